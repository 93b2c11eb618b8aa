"""The run's final ensemble: members chosen over the stored validation predictions, refit, and saved.

Choosing members needs no refit (the stored predictions are enough); the saved model refits each
member pipeline on train (or train+validation with ``refit=True``) with the seed it was evaluated with,
so without ``refit`` the saved model reproduces the evaluated predictions.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from optdiv.core.ensemble import agnostic_bayes_weights, ensemble_selection
from optdiv.core.metrics import per_example_loss

BUILDERS = ("caruana", "agnostic_bayes")


def choose_members(
    history: Sequence, y_val: np.ndarray, loss: str, builder: str = "caruana", size: int = 25, seed: int = 0
) -> Tuple[List[int], np.ndarray]:
    """Indices into ``history`` and their weights (summing to 1); only successful runs take part."""
    if builder not in BUILDERS:
        raise ValueError(f"unknown ensemble builder {builder!r}; choose one of {', '.join(BUILDERS)}")
    ok = _successful(history)
    preds = np.stack([history[i].val_pred for i in ok])
    if builder == "caruana":
        weights = ensemble_selection(preds, y_val, loss, size=size, seed=seed).weights
    else:
        weights = agnostic_bayes_weights(per_example_loss(preds, y_val, loss).T, seed=seed)
    keep = np.flatnonzero(weights > 1e-6)
    return [ok[i] for i in keep], weights[keep] / weights[keep].sum()


def best_single(history: Sequence) -> Tuple[List[int], np.ndarray]:
    ok = _successful(history)
    best = min(ok, key=lambda i: (history[i].val_loss, i))
    return [best], np.ones(1)


def _successful(history: Sequence) -> List[int]:
    """Positions of the runs that left predictions; failed runs never enter an ensemble."""
    ok = [i for i, obs in enumerate(history) if obs.status == "ok" and obs.val_pred is not None]
    if not ok:
        raise RuntimeError("every evaluation failed: there is no model to build an ensemble from")
    return ok


def weighted_prediction(stored: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    return np.tensordot(np.asarray(weights, dtype=np.float64), np.stack(stored).astype(np.float64), axes=1)


class EnsembleModel:
    """Fitted member pipelines with weights; predicts like a scikit-learn estimator.

    Classification averages member probabilities (label-only members contribute one-hot votes);
    regression averages values. ``classes_`` holds the original labels.
    """

    def __init__(self, members: List, weights: np.ndarray, task: str, classes, columns: List[str], info: List[Dict]):
        self.members = members
        self.weights = np.asarray(weights, dtype=np.float64)
        self.task = task
        self.classes_ = None if classes is None else np.asarray(classes)
        self.columns = list(columns)
        self.info = info

    def _frame(self, X):
        from optdiv.cash.data import check_predict_columns

        return check_predict_columns(self.columns, X)

    def predict_proba(self, X) -> np.ndarray:
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        from optdiv.cash.evaluator import predict_probabilities

        X = self._frame(X)
        k = len(self.classes_)
        probs = [predict_probabilities(member, X, k) for member in self.members]
        return weighted_prediction(probs, self.weights)

    def predict(self, X) -> np.ndarray:
        if self.task == "classification":
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        X = self._frame(X)
        return weighted_prediction([np.asarray(m.predict(X), dtype=np.float64) for m in self.members], self.weights)
