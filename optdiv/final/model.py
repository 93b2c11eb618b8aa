"""The final model: fitted member pipelines with weights (or a stacking meta-model), predicting like a scikit-learn
estimator. This is what ``model.joblib`` and a fitted estimator hold, so its class path is what pickles name."""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from optdiv.data import check_predict_columns
from optdiv.evaluation.fitting import predict_probabilities
from optdiv.final.choice import Stacker, weighted_prediction


class EnsembleModel:
    """Fitted member pipelines with weights; predicts like a scikit-learn estimator.

    Classification averages member probabilities (margin models contribute squashed margins, label-only
    members one-hot votes, as in the evaluator);
    regression averages values. ``classes_`` holds the original labels.
    """

    def __init__(self, members: List, weights: np.ndarray, task: str, classes, columns: List[str], info: List[Dict],
                 stacker: Optional[Stacker] = None, vote: bool = False):
        self.stacker = stacker
        self.vote = bool(vote)
        self.members = members
        self.weights = np.asarray(weights, dtype=np.float64)
        self.task = task
        self.classes_ = None if classes is None else np.asarray(classes)
        self.columns = list(columns)
        self.info = info

    def _frame(self, X):
        return check_predict_columns(self.columns, X)

    def predict_proba(self, X) -> np.ndarray:
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        X = self._frame(X)
        k = len(self.classes_)
        probs = [predict_probabilities(member, X, k) for member in self.members]
        if getattr(self, "stacker", None) is not None:
            return self.stacker.predict(probs)
        return weighted_prediction(probs, self.weights, vote=getattr(self, "vote", False))

    def predict(self, X) -> np.ndarray:
        if self.task == "classification":
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        X = self._frame(X)
        values = [np.asarray(m.predict(X), dtype=np.float64) for m in self.members]
        if getattr(self, "stacker", None) is not None:
            return self.stacker.predict(values)
        return weighted_prediction(values, self.weights)


def model_prediction(model: EnsembleModel, X, task: str) -> np.ndarray:
    """What a final model's loss is computed on: class probabilities for classification, values for regression."""
    return model.predict_proba(X) if task == "classification" else model.predict(X)
