"""The temporary pool P: the ensemble the next configuration should diversify against.

DivBO and OptDivBO rebuild P from every stored observation before each suggestion (docs/method.md,
"Temporary pool P"). P is a multiset; it is returned as its unique members plus weights, so the
acquisitions evaluate the diversity surrogate once per distinct member and weight the result.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._arrays import as_predictions, as_targets
from .ensemble import agnostic_bayes_weights, ensemble_selection
from .metrics import LossSpec, is_classification_loss, per_example_loss

POOL_BUILDERS = ("caruana", "agnostic_bayes")

#: Agnostic Bayes members below this posterior weight are dropped: they would only cost surrogate calls.
MIN_POSTERIOR_WEIGHT = 1e-6


class Pool(NamedTuple):
    indices: np.ndarray  # (p,) unique member indices into the predictions, ascending
    weights: np.ndarray  # (p,) float multiplicities; they sum to the pool size


def build_pool(val_preds, y_val, loss: LossSpec, size: int = 25, builder: str = "caruana", seed: int = 0) -> Pool:
    """Pool P over the models of ``val_preds`` ((m, n) values or (m, n, k) probabilities).

    ``caruana``: ``size`` rounds of ensemble selection with replacement; weights are the integer
    multiplicities. ``agnostic_bayes``: posterior probability of being the best model under ``loss``
    (bootstrap sampler), scaled to sum to ``size`` so both builders give weights on the same scale.
    """
    if builder not in POOL_BUILDERS:
        raise ValueError(f"unknown pool builder {builder!r}; choose one of {', '.join(POOL_BUILDERS)}")
    if size < 1:
        raise ValueError("pool size must be at least 1")
    preds = as_predictions(val_preds)
    y = as_targets(y_val, preds)
    if builder == "caruana":
        picks = ensemble_selection(preds, y, loss, size=size, seed=seed).picks
        counts = np.bincount(picks, minlength=preds.shape[0])
        indices = np.flatnonzero(counts)
        return Pool(indices, counts[indices].astype(np.float64))
    if callable(loss):
        raise ValueError("the agnostic_bayes pool needs a named loss (per-example losses are required)")
    if is_classification_loss(loss) != (preds.ndim == 3):
        raise ValueError(f"loss {loss!r} does not match predictions of shape {preds.shape}")
    losses = per_example_loss(preds, y, loss)  # (m, n)
    posterior = agnostic_bayes_weights(losses.T, seed=seed)
    indices = np.flatnonzero(posterior >= MIN_POSTERIOR_WEIGHT)
    kept = posterior[indices]
    return Pool(indices, kept * (size / kept.sum()))
