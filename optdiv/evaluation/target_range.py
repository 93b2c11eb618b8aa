"""Regression members predict inside a margin around the target range of the rows they were fitted on.

One extrapolating member (a kernel or linear model meeting an unusual row, a polynomial expansion) can predict
values orders of magnitude away from any target; averaged into an ensemble, a few such rows dominate its MSE.
Every regression pipeline therefore clips its predictions to [min - m * span, max + m * span] of its training
targets, m = :data:`TARGET_MARGIN`. The clip is part of the pipeline, so the validation predictions the search
sees, cross-validation folds, saved members and refitted members all behave alike. docs/method.md
("Regression predictions are clipped") records how the margin was chosen.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

#: Margin around the training targets' range, as a fraction of that range.
TARGET_MARGIN = 0.25


def target_bounds(y, margin: float = TARGET_MARGIN):
    """(low, high): the finite targets' range widened by ``margin`` times its span on each side."""
    values = np.asarray(y, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        raise ValueError("no finite regression target to fit on")
    low, high = float(finite.min()), float(finite.max())
    span = high - low
    return low - margin * span, high + margin * span


class RangeClippedRegressor(RegressorMixin, BaseEstimator):
    """Fits ``regressor`` itself (not a clone, so its fitted state stays reachable) and clips its predictions
    to a margin around the training targets' range."""

    def __init__(self, regressor=None, margin: float = TARGET_MARGIN):
        self.regressor = regressor
        self.margin = margin

    def fit(self, X, y, **fit_params):
        self.low_, self.high_ = target_bounds(y, self.margin)
        self.regressor.fit(X, y, **fit_params)
        self.regressor_ = self.regressor
        return self

    def predict(self, X):
        return np.clip(np.asarray(self.regressor_.predict(X), dtype=np.float64), self.low_, self.high_)
