"""What a finished search looked like along the way: the per-iteration trace the report plots.

At checkpoints (every ``every`` evaluations and at the end) the trace records, for the search's history
up to that point: the best single validation loss, each method's final model on that prefix (validation
and test loss), and the minimum diversity of the suggestions since the previous checkpoint to the
temporary pool at that checkpoint (DivBO's Fig. 5: DivBO's own diversity, the pool built by ensemble
selection of 25). The trace is computed after the search from the stored predictions, so it never slows
the search down and is the same for live and replay runs.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from optdiv.core.diversity import diversity_to_pool, pairwise_diversity
from optdiv.core.ensemble import ensemble_selection
from optdiv.core.metrics import mean_loss
from optdiv.core.selector import pool_loss


def checkpoints(n: int, every: int) -> List[int]:
    points = list(range(every, n + 1, every)) if every > 0 else []
    if not points or points[-1] != n:
        points.append(n)
    return [p for p in points if p > 0]


def successful(history: Sequence, upto: int) -> List[int]:
    return [i for i in range(upto) if history[i].status == "ok" and history[i].val_pred is not None]


def pool_members(history: Sequence, upto: int, y_val: np.ndarray, metric: str, size: int = 25) -> List[int]:
    """Distinct members of the ensemble-selection pool over the first ``upto`` runs."""
    ok = successful(history, upto)
    if not ok:
        return []
    preds = np.stack([history[i].val_pred for i in ok])
    weights = ensemble_selection(preds, y_val, pool_loss(metric, preds.ndim == 3), size=size, seed=0).weights
    return [ok[i] for i in np.flatnonzero(weights > 0)]


def minimum_diversity(history: Sequence, start: int, stop: int, pool: List[int], y_val: np.ndarray) -> float:
    """Median over the successful suggestions in [start, stop) of their smallest DivBO diversity to ``pool``
    (the median, because one regression model with exploding predictions makes a mean meaningless)."""
    new = [i for i in range(start, stop) if history[i].status == "ok" and history[i].val_pred is not None]
    if not new or not pool:
        return float("nan")
    new_preds = np.stack([history[i].val_pred for i in new])
    pool_preds = np.stack([history[i].val_pred for i in pool])
    matrix = diversity_to_pool(new_preds, pool_preds, y_val, "divbo")
    return float(np.median(matrix.min(axis=1)))


def member_diversity(history: Sequence, members: Sequence[int], y_val: np.ndarray) -> List[List[float]]:
    """DivBO pairwise diversity among the final members (DivBO's Fig. 6 heatmap)."""
    if len(members) < 1:
        return []
    preds = np.stack([history[i].val_pred for i in members])
    return np.round(pairwise_diversity(preds, y_val, "divbo"), 6).tolist()


def search_trace(history: Sequence, y_val: np.ndarray, y_test: np.ndarray, metric: str, finals: Dict[str, callable],
                 every: int = 10) -> Dict[str, List[Dict]]:
    """Rows per method: iteration, best single val loss, the method's final val/test loss, min diversity.

    ``finals`` maps a method name to ``f(prefix) -> (FinalChoice, val_pred)`` (final_ensemble.finalize bound to
    the method); a prefix with no successful run yields NaN losses.
    """
    rows: Dict[str, List[Dict]] = {name: [] for name in finals}
    previous = 0
    for point in checkpoints(len(history), every):
        pool = pool_members(history, previous, y_val, metric) if previous else []
        min_div = minimum_diversity(history, previous, point, pool, y_val)
        ok = successful(history, point)
        best = min((history[i].val_loss for i in ok), default=float("nan"))
        prefix = list(history[:point])
        for name, final in finals.items():
            val = test = float("nan")
            if ok:
                choice, val_pred = final(prefix)
                val = float(mean_loss(val_pred, y_val, metric))
                test = float(mean_loss(choice.combine([prefix[i].test_pred for i in choice.members]), y_test, metric))
            rows[name].append({"iteration": point, "best_single_val": best, "val": val, "test": test,
                               "min_diversity": min_div})
        previous = point
    return rows
