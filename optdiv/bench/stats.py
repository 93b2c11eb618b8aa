"""Average ranks and Wilcoxon better/same/worse counts, the papers' two summaries of a results table."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
from scipy.stats import rankdata, wilcoxon


def average_ranks(means: Dict[str, Dict[str, float]], methods: Sequence[str]) -> Dict[str, float]:
    """``means[dataset][method]`` -> each method's rank (1 = lowest error, ties share the mean rank)
    averaged over the datasets where every method in ``methods`` has a number."""
    per_method: Dict[str, List[float]] = {m: [] for m in methods}
    for dataset, row in means.items():
        if not all(m in row and np.isfinite(row[m]) for m in methods):
            continue
        r = rankdata([row[m] for m in methods], method="average")
        for m, value in zip(methods, r):
            per_method[m].append(float(value))
    return {m: (float(np.mean(v)) if v else float("nan")) for m, v in per_method.items()}


def compare(ours: Sequence[float], theirs: Sequence[float], alpha: float = 0.05) -> str:
    """'better' / 'same' / 'worse' for ``ours`` against ``theirs`` (paired by seed; lower is better).

    Wilcoxon signed-rank, two-sided, at ``alpha``; identical samples, or fewer than 2 pairs, are 'same'.
    With few seeds no difference can be significant (3 pairs give p >= 0.25), which 'same' then reports.
    """
    p = paired_p(ours, theirs)
    if not (p <= alpha):
        return "same"
    return "better" if np.mean(ours) < np.mean(theirs) else "worse"


def _ties(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairs equal up to float noise (a loss scaled to % or summed in another order): a tie, not a difference."""
    return np.isclose(a, b, rtol=1e-12, atol=0.0)


def paired_p(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p of paired samples; 1.0 when they are identical or fewer than 2 pairs."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length; got {a.shape} and {b.shape}")
    d = np.where(_ties(a, b), 0.0, a - b)  # "wilcox" drops the ties
    if len(d) < 2 or np.count_nonzero(d) == 0:
        return 1.0
    # and so are equal differences (two seeds both 2 of 436 rows apart), which the signed ranks must share
    scale = np.max(np.abs(d))
    d = np.round(d / scale, 9) * scale
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def strictly_lower(ours: Sequence[float], theirs: Sequence[float]) -> np.ndarray:
    """Per pair: ``ours`` below ``theirs`` by more than float noise."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return (a < b) & ~_ties(a, b)


def lower_tie_higher(ours: Sequence[float], theirs: Sequence[float]) -> Tuple[int, int, int]:
    """How many pairs ``ours`` is below, equal to, and above ``theirs``."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    tie = _ties(a, b)
    return int(np.sum(strictly_lower(a, b))), int(np.sum(tie)), int(np.sum((a > b) & ~tie))


def better_same_worse(per_dataset: Dict[str, Tuple[Sequence[float], Sequence[float]]],
                      alpha: float = 0.05) -> Tuple[int, int, int]:
    """Counts over datasets of ``compare(ours, theirs)``."""
    counts = {"better": 0, "same": 0, "worse": 0}
    for ours, theirs in per_dataset.values():
        counts[compare(ours, theirs, alpha)] += 1
    return counts["better"], counts["same"], counts["worse"]


def relative_pairs_line(label: str, ours: Sequence[float], theirs: Sequence[float]) -> str:
    """One line over paired errors: how often ``ours`` is lower / level / higher than ``theirs``, the median relative
    difference and the two-sided Wilcoxon p of the relative differences (level pairs dropped, as the signed-rank test
    does); a pair whose reference is 0 counts as level."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    rel = np.array([(x - y) / y if y else 0.0 for x, y in zip(a, b)])
    if not len(rel):
        return f"{label}: no pairs"
    moved = rel[rel != 0]
    p = float(wilcoxon(moved).pvalue) if len(moved) >= 2 else 1.0
    return (f"{label} over {len(rel)} pairs: {int(np.sum(rel < 0))} lower / {int(np.sum(rel == 0))} level / "
            f"{int(np.sum(rel > 0))} higher, median {100 * float(np.median(rel)):+.1f} %, Wilcoxon p = {p:.3g}")
