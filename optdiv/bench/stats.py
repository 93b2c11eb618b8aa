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
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length; got {a.shape} and {b.shape}")
    d = a - b
    if len(d) < 2 or np.allclose(d, 0.0):
        return "same"
    p = wilcoxon(a, b, zero_method="wilcox", alternative="two-sided").pvalue
    if not (p <= alpha):
        return "same"
    return "better" if np.mean(a) < np.mean(b) else "worse"


def better_same_worse(per_dataset: Dict[str, Tuple[Sequence[float], Sequence[float]]],
                      alpha: float = 0.05) -> Tuple[int, int, int]:
    """Counts over datasets of ``compare(ours, theirs)``."""
    counts = {"better": 0, "same": 0, "worse": 0}
    for ours, theirs in per_dataset.values():
        counts[compare(ours, theirs, alpha)] += 1
    return counts["better"], counts["same"], counts["worse"]
