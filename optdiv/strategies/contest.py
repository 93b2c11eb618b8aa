"""DACOpt's contest arithmetic (Nguyen 2024, Algorithms 11 and 12): who survives a round and what each gets.

Highest-performance contest (DAC-H*): ``c`` candidates, ``R_max = floor(log_eta c)`` rounds after round 0
(computed with integers: the float log of 243 in base 3 is 4.999...), ``ceil(previous / eta)`` survivors per
round, chosen as the top by best-found value. Round ``r`` spends ``floor(B_left / (R_max - r + 1))`` split
equally among its survivors; the paper's ``B / (R_max - r)`` divides by zero in the last round, so the
remaining rounds are counted including the current one (docs/method.md, "Other seed systems").

Statistical contest (DAC-S*): Friedman's test with three or more survivors, Wilcoxon's with two, at level
``alpha``; when it rejects, survivors significantly worse than the best-ranked one (Holm-corrected
pairwise Wilcoxon tests) are dropped. No test runs before each survivor has more than 2 samples.
"""

from __future__ import annotations

import math
from typing import List, Sequence

import numpy as np


def integer_log(c: int, eta: int) -> int:
    """The largest R with eta**R <= c (c >= 1, eta >= 2), without floating point."""
    if c < 1 or eta < 2:
        raise ValueError("need c >= 1 and eta >= 2")
    r, power = 0, eta
    while power <= c:
        r, power = r + 1, power * eta
    return r


def survivors_per_round(c: int, eta: int = 3) -> List[int]:
    """Candidates alive in rounds 0..R_max: c, ceil(c/eta), ... (10 -> 4 -> 2 for eta = 3)."""
    counts = [c]
    for _ in range(integer_log(c, eta)):
        counts.append(math.ceil(counts[-1] / eta))
    return counts


def round_budget(budget_left: int, r: int, r_max: int, survivors: int) -> int:
    """Evaluations each survivor gets in round ``r`` (the same for all of them)."""
    if survivors < 1 or r > r_max:
        raise ValueError("a round needs at least one survivor and r <= r_max")
    round_total = budget_left // (r_max - r + 1)
    return round_total // survivors


def top_survivors(best_values: Sequence[float], keep: int) -> List[int]:
    """Indices of the ``keep`` candidates with the lowest best-found loss (ties: lower index first)."""
    order = sorted(range(len(best_values)), key=lambda i: (best_values[i], i))
    return sorted(order[:keep])


def statistical_survivors(samples: Sequence[Sequence[float]], alpha: float = 0.05) -> List[int]:
    """Indices of candidates that stay after a Friedman (>= 3) / Wilcoxon (2) test and Holm's correction.

    ``samples[i]``: candidate i's losses, aligned by evaluation index across candidates (equal lengths).
    """
    from scipy.stats import friedmanchisquare, wilcoxon

    k = len(samples)
    if k <= 1:
        return list(range(k))
    data = np.asarray(samples, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] <= 2:
        return list(range(k))  # too few samples to test
    if k >= 3:
        p = friedmanchisquare(*data).pvalue
    else:
        p = wilcoxon_p(data[0], data[1], wilcoxon)
    if not (p <= alpha):
        return list(range(k))
    ranks = np.apply_along_axis(lambda col: np.argsort(np.argsort(col, kind="stable"), kind="stable"), 0, data)
    best = int(np.argmin(ranks.mean(axis=1)))
    others = [i for i in range(k) if i != best]
    pvalues = [wilcoxon_p(data[best], data[i], wilcoxon) for i in others]
    dropped = holm_rejections(pvalues, alpha)
    worse = {others[j] for j in dropped if np.mean(data[others[j]]) > np.mean(data[best])}
    return [i for i in range(k) if i not in worse]


def wilcoxon_p(a, b, wilcoxon) -> float:
    """Two-sided signed-rank p-value. With tied or zero differences (common: a replay library repeats
    losses) the normal approximation is asked for explicitly, because recent scipy otherwise falls back
    to a permutation test that costs seconds per call and made a 250-iteration contest take half an hour."""
    if np.allclose(a, b):
        return 1.0
    d = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    ties = bool(np.any(d == 0) or np.unique(d).size < d.size)
    return float(wilcoxon(a, b, method="approx").pvalue if ties else wilcoxon(a, b).pvalue)


def holm_rejections(pvalues: Sequence[float], alpha: float) -> List[int]:
    """Holm's step-down procedure: indices of the rejected hypotheses."""
    order = np.argsort(pvalues, kind="stable")
    m = len(pvalues)
    rejected = []
    for step, j in enumerate(order):
        if pvalues[j] <= alpha / (m - step):
            rejected.append(int(j))
        else:
            break
    return rejected
