"""Task losses in one place, per example and averaged, for one model or a stack of models.

Every loss is smaller-is-better. Classification predictions are probabilities (..., n, k) and
targets are class indices; regression predictions are values (..., n).
"""

from __future__ import annotations

from typing import Callable, Union

import numpy as np

from .arrays import PROB_CLIP
from .metric_vocabulary import CLASSIFICATION_LOSSES, LOSSES, REGRESSION_LOSSES  # noqa: F401 (the names' home)

LossSpec = Union[str, Callable[[np.ndarray, np.ndarray], float]]


def is_classification_loss(name: str) -> bool:
    return check_loss(name) in CLASSIFICATION_LOSSES


def check_loss(name: str) -> str:
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)} or pass a callable")
    return name


def per_example_loss(preds, y, name: str) -> np.ndarray:
    """Loss of each example: shape ``preds.shape[:-1]`` for classification, ``preds.shape`` for regression.

    A leading model axis is kept, so (m, n, k) probabilities give an (m, n) matrix.
    """
    check_loss(name)
    preds = np.asarray(preds)
    y = np.asarray(y)
    if name in CLASSIFICATION_LOSSES:
        if preds.ndim < 2:
            raise ValueError(f"loss {name!r} needs class probabilities (..., n, k); got shape {preds.shape}")
        y = y.astype(np.intp)
        if name == "error":
            return (np.argmax(preds, axis=-1) != y).astype(np.float64)
        q = np.take_along_axis(preds, np.broadcast_to(y[:, None], preds.shape[:-1] + (1,)), axis=-1)[..., 0]
        if name == "log_loss":
            return -np.log(np.clip(q.astype(np.float64), PROB_CLIP, 1.0))
        sq = np.square(preds.astype(np.float64)).sum(-1)
        return sq - 2.0 * q + 1.0  # sum_k (onehot_k - p_k)^2 without building the one-hot matrix
    diff = preds.astype(np.float64) - y.astype(np.float64)
    return np.square(diff) if name == "mse" else np.abs(diff)


def mean_loss(preds, y, name: LossSpec):
    """Mean loss over examples: a float for one model, a vector for a stack of models.

    A callable is ``fn(y_true, y_pred) -> float`` (scikit-learn's order) for one model's predictions.
    """
    if callable(name):
        return float(name(np.asarray(y), np.asarray(preds)))
    return per_example_loss(preds, y, name).mean(axis=-1)


def gm_micro(y_true, y_pred, n_classes: int) -> float:
    """Micro-averaged geometric mean of sensitivity and specificity (DACOpt's imbalanced-data metric).

    Every class is scored one-vs-rest and the counts are summed before the rates are taken:
    sqrt(sum TP / (sum TP + sum FN) * sum TN / (sum TN + sum FP)). Not an average of per-example losses,
    so it is a black-box metric for OptDivBO (the zero_one diversity kind).
    """
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError("y_true and y_pred must be non-empty label vectors of the same length")
    confusion = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(confusion, (y_true, y_pred), 1)
    tp = np.trace(confusion)
    fn = confusion.sum() - tp  # every off-diagonal count is one FN (for its true class) ...
    fp = fn  # ... and one FP (for its predicted class)
    tn = n_classes * confusion.sum() - tp - fn - fp
    return float(np.sqrt(tp / (tp + fn) * tn / (tn + fp)))
