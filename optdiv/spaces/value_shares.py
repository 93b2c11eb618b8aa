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

from typing import Dict, List, Tuple

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


def identifier_tables(X: np.ndarray, min_distinct: int = 50, min_repeat: float = 2.0) -> Dict[int, Tuple]:
    """{position: (distinct values, their counts)} of the columns of ``X`` that qualify (see the module's
    docstring), each column's values counted once for both the test and the shares."""
    tables = {}
    for j in range(X.shape[1]):
        column = X[:, j]
        if not np.all(np.isfinite(column)) or not np.all(np.mod(column, 1) == 0):
            continue
        values, counts = np.unique(column, return_counts=True)
        if len(values) > min_distinct and len(column) / len(values) >= min_repeat:
            tables[j] = (values, counts)
    return tables


def identifier_columns(X: np.ndarray, min_distinct: int = 50, min_repeat: float = 2.0) -> List[int]:
    """Positions of the columns of ``X`` that qualify (see the module's docstring)."""
    return list(identifier_tables(X, min_distinct, min_repeat))


def looked_up(values: np.ndarray, weights: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Per entry of ``column``: the weight of its value among the sorted ``values``, 0 where it is not one of them."""
    at = np.clip(np.searchsorted(values, column), 0, len(values) - 1)
    return np.where(values[at] == column, weights[at], 0).astype(np.float64)


class ValueShares(TransformerMixin, BaseEstimator):
    """Appends, per identifier-like column, the share of the fitted rows holding each row's value."""

    def __init__(self, min_distinct: int = 50, min_repeat: float = 2.0):
        self.min_distinct = min_distinct
        self.min_repeat = min_repeat

    def fit(self, X, y=None):
        X = _dense(X)
        tables = identifier_tables(X, self.min_distinct, self.min_repeat)
        self.columns_ = list(tables)
        self.tables_: List[Tuple[np.ndarray, np.ndarray]] = [(values, counts / float(len(X)))
                                                              for values, counts in tables.values()]
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        X = _dense(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"ValueShares was fitted on {self.n_features_in_} columns; got {X.shape[1]}")
        if not self.columns_:
            return X
        added = [looked_up(values, shares, X[:, j]) for j, (values, shares) in zip(self.columns_, self.tables_)]
        return np.column_stack([X, *added])


def _dense(X) -> np.ndarray:
    if hasattr(X, "toarray"):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)
