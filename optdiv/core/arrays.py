"""Input checks shared by the core modules, so every entry point rejects bad shapes the same way."""

from __future__ import annotations

import numpy as np

PROB_CLIP = 1e-15


def as_predictions(preds) -> np.ndarray:
    """Return predictions as float32 (m, n) or (m, n, k); float32 halves memory, sums are done in float64."""
    arr = np.asarray(preds)
    if arr.ndim not in (2, 3):
        raise ValueError(
            f"predictions must be (models, rows) for regression or (models, rows, classes) for "
            f"classification; got shape {arr.shape}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"predictions are empty: shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating) or arr.dtype.itemsize > 4:
        arr = arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError("predictions contain NaN or inf values")
    return arr


def as_targets(y, preds: np.ndarray) -> np.ndarray:
    """Check targets against predictions: class indices for (m, n, k), values for (m, n)."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != preds.shape[1]:
        raise ValueError(f"targets must be a vector of {preds.shape[1]} rows; got shape {y.shape}")
    if preds.ndim == 3:
        if not np.issubdtype(y.dtype, np.integer):
            if not np.all(np.equal(np.mod(y, 1), 0)):
                raise ValueError("classification targets must be class indices 0..k-1")
            y = y.astype(np.int64)
        k = preds.shape[2]
        if y.size and (y.min() < 0 or y.max() >= k):
            raise ValueError(f"class indices must lie in [0, {k - 1}] for {k} probability columns")
        return y.astype(np.intp)
    y = y.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError("regression targets contain NaN or inf values")
    return y


def one_hot(y: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((y.shape[0], k), dtype=np.float64)
    out[np.arange(y.shape[0]), y] = 1.0
    return out


def true_class_probability(preds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(m, n) probability each model gives to the true class of each row."""
    return np.take_along_axis(preds, y[None, :, None], axis=2)[:, :, 0]
