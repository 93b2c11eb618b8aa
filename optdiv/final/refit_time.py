"""How long a member's refit on more rows will take, predicted from the fit time its evaluation measured.

A search on a row sample refits its final members on every row, 16 times the rows at 1M rows, so how the fit time
grows with the rows decides what the search keeps back: linear growth over-predicts a booster's refit (its
histogram binning and per-round costs grow slower than the rows) and under-predicts a forest's (deeper trees on
more rows). The exponents below come from fitting each algorithm's library default on growing synthetic tables
(benchmarks/refit_scaling.py), not from any benchmark dataset.
"""

from __future__ import annotations

from optdiv.spaces.sklearn_models import KERNEL_SVM_MAX_ROWS

#: ``seconds ~ rows ** exponent`` per algorithm, measured between 40,000 and 160,000 rows (classification and
#: regression rounded together; 1.0, linear, for any other algorithm). Histogram gradient boosting measured 0.75
#: there, but its refits from 50,000 to 800,000 rows took 1.15-1.5 times that prediction (the search's tuned
#: configurations, early stopping on more rows): 0.9, as LightGBM.
ROWS_EXPONENT = {
    "lightgbm": 0.9,
    "gradient_boosting": 0.9,
    "extra_trees": 1.25,
    "random_forest": 1.25,
    "k_nearest_neighbors": 1.35,
    "logistic_regression": 1.15,
    "ridge": 1.15,
}

#: Algorithms of the built-in space that fit on at most this many rows (a kernel SVM's row cap), so their refit on
#: more rows costs what their evaluation did once both are over it.
ROW_CAPS = {"libsvm_svc": KERNEL_SVM_MAX_ROWS, "libsvm_svr": KERNEL_SVM_MAX_ROWS}


def refit_seconds(algorithm: str, seconds: float, rows_from: float, rows_to: float) -> float:
    """Predicted seconds of a fit of ``algorithm`` on ``rows_to`` rows that took ``seconds`` on ``rows_from``."""
    cap = ROW_CAPS.get(algorithm)
    if cap is not None:
        rows_from, rows_to = min(rows_from, cap), min(rows_to, cap)
    if rows_from <= 0 or rows_to <= 0:
        return float(seconds)
    return float(seconds) * (rows_to / rows_from) ** ROWS_EXPONENT.get(algorithm, 1.0)


def rows_within(algorithm: str, seconds: float, rows_from: float, rows_max: float, allowed: float) -> int:
    """The most rows, up to ``rows_max``, on which a fit of ``algorithm`` that took ``seconds`` on ``rows_from`` rows
    is predicted (:func:`refit_seconds`) to take at most ``allowed`` seconds: :func:`refit_seconds` turned round."""
    if seconds <= 0 or refit_seconds(algorithm, seconds, rows_from, rows_max) <= allowed:
        return int(rows_max)
    cap = ROW_CAPS.get(algorithm)
    base = rows_from if cap is None else min(rows_from, cap)
    rows = base * (max(allowed, 0.0) / seconds) ** (1.0 / ROWS_EXPONENT.get(algorithm, 1.0))
    return int(min(rows, rows_max))


def fold_refit_seconds(algorithm: str, seconds: float, k: int) -> float:
    """Predicted seconds of one fit on all the rows of a k-fold evaluation that took ``seconds`` for its k fits on
    (k-1)/k of them: a k-th of it, grown to k/(k-1) times the rows."""
    k = max(int(k), 2)
    return refit_seconds(algorithm, seconds / k, k - 1, k)


#: Bounds on the correction :class:`RefitPace` applies to a prediction: one quick refit (a tiny model, a member
#: whose warm-start stages each paid their binning) says little about a large one.
PACE_BOUNDS = (0.25, 4.0)


class RefitPace:
    """Predicted refit seconds corrected by the refits of the same run already taken (ahead, or in the final step).

    The prediction grows an evaluation's fit time with the rows (:func:`refit_seconds`); the refits of one
    algorithm in one run took a similar share of it (at 1M rows, histogram boosting refits 0.26-0.77 of their
    predictions over nine fits, median 0.46), so once one member of an algorithm is refitted, the next of that
    algorithm is predicted at the slowest share seen (clipped to :data:`PACE_BOUNDS`), and time a refit quicker than
    predicted leaves goes to members that would otherwise stay on the rows they were evaluated on. Algorithms
    without a refit yet keep the plain prediction."""

    def __init__(self):
        self.slowest = {}  # algorithm -> the largest taken / predicted of its refits that finished

    def record(self, algorithm: str, predicted: float, taken: float) -> None:
        """A refit of ``algorithm`` that finished in ``taken`` seconds against ``predicted``."""
        if predicted > 0 and taken >= 0:
            self.slowest[algorithm] = max(self.slowest.get(algorithm, 0.0), taken / predicted)

    def correct(self, algorithm: str, predicted: float) -> float:
        """``predicted`` corrected by the slowest share ``algorithm``'s refits took so far."""
        if algorithm not in self.slowest:
            return predicted
        low, high = PACE_BOUNDS
        return predicted * min(max(self.slowest[algorithm], low), high)
