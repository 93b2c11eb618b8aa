"""Identifier-like columns: how often each row's value occurs, appended as a feature.

Identifiers written as integers (an employee, a manager, a product code) reach the models as numbers, and a tree
then splits on an order that means nothing. How common a row's identifier is carries what the number does not.
Nothing in a column tells an identifier from a quantity (a count of calls, a coordinate), so the built-in space
makes this a switch the search sets per configuration, judged on validation rows like every other choice.

A column qualifies when every fitted value is a whole number, it holds more than ``min_distinct`` distinct values
and each occurs ``min_repeat`` times or more on average (a near-unique column would count 1 everywhere). Its added
feature is the value's share of the fitted rows (a share, not a count, so a member refitted on more rows keeps the
scale the search scored), 0 for a value the fitted rows never hold. With no qualifying column the step passes its
input through unchanged.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


def identifier_columns(X: np.ndarray, min_distinct: int = 50, min_repeat: float = 2.0) -> List[int]:
    """Positions of the columns of ``X`` that qualify (see the module's docstring)."""
    chosen = []
    for j in range(X.shape[1]):
        column = X[:, j]
        if not np.all(np.isfinite(column)) or not np.all(np.mod(column, 1) == 0):
            continue
        distinct = len(np.unique(column))
        if distinct > min_distinct and len(column) / distinct >= min_repeat:
            chosen.append(j)
    return chosen


class ValueShares(TransformerMixin, BaseEstimator):
    """Appends, per identifier-like column, the share of the fitted rows holding each row's value."""

    def __init__(self, min_distinct: int = 50, min_repeat: float = 2.0):
        self.min_distinct = min_distinct
        self.min_repeat = min_repeat

    def fit(self, X, y=None):
        X = _dense(X)
        self.columns_ = identifier_columns(X, self.min_distinct, self.min_repeat)
        self.tables_: List[Tuple[np.ndarray, np.ndarray]] = []
        for j in self.columns_:
            values, counts = np.unique(X[:, j], return_counts=True)
            self.tables_.append((values, counts / float(len(X))))
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        X = _dense(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"ValueShares was fitted on {self.n_features_in_} columns; got {X.shape[1]}")
        if not self.columns_:
            return X
        added = []
        for j, (values, shares) in zip(self.columns_, self.tables_):
            at = np.clip(np.searchsorted(values, X[:, j]), 0, len(values) - 1)
            added.append(np.where(values[at] == X[:, j], shares[at], 0.0))
        return np.column_stack([X, *added])


def _dense(X) -> np.ndarray:
    if hasattr(X, "toarray"):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)
