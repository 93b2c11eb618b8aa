"""The temporary pool P: the ensemble the next configuration should diversify against.

DivBO and OptDivBO rebuild P from every stored observation before each suggestion (docs/method.md,
"Temporary pool P"). P is a multiset; it is returned as its unique members plus weights, so the
acquisitions evaluate the diversity surrogate once per distinct member and weight the result.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .arrays import as_predictions, as_targets
from .ensemble import agnostic_bayes_weights, ensemble_selection
from .metrics import LossSpec, is_classification_loss, mean_loss, per_example_loss

POOL_BUILDERS = ("caruana", "agnostic_bayes")

#: Models a pool under a black-box loss is chosen among: the best by their own loss. A callable loss costs one
#: call per model and round; auto-sklearn's ensemble builder bounds the same cost with its ``ensemble_nbest=50``.
POOL_NBEST = 50

#: Agnostic Bayes members below this posterior weight are dropped: they would only cost surrogate calls.
MIN_POSTERIOR_WEIGHT = 1e-6


class Pool(NamedTuple):
    indices: np.ndarray  # (p,) unique member indices into the predictions, ascending
    weights: np.ndarray  # (p,) float multiplicities; they sum to the pool size


def build_pool(val_preds, y_val, loss: LossSpec, size: int = 25, builder: str = "caruana", seed: int = 0,
               nbest: Optional[int] = None) -> Pool:
    """Pool P over the models of ``val_preds`` ((m, n) values or (m, n, k) probabilities).

    ``caruana``: ``size`` rounds of ensemble selection with replacement; weights are the integer
    multiplicities. ``agnostic_bayes``: posterior probability of being the best model under ``loss``
    (bootstrap sampler), scaled to sum to ``size`` so both builders give weights on the same scale.
    ``nbest``: build P among the ``nbest`` models with the lowest loss of their own (ties: the lower
    index), which bounds the calls of a callable ``loss``; None uses every model.
    """
    if builder not in POOL_BUILDERS:
        raise ValueError(f"unknown pool builder {builder!r}; choose one of {', '.join(POOL_BUILDERS)}")
    if size < 1:
        raise ValueError("pool size must be at least 1")
    if nbest is not None and (isinstance(nbest, bool) or not isinstance(nbest, (int, np.integer)) or nbest < 1):
        raise ValueError(f"nbest must be a positive integer or None; got {nbest!r}")
    preds = as_predictions(val_preds)
    y = as_targets(y_val, preds)
    if nbest is not None and preds.shape[0] > nbest:
        keep = np.sort(best_models(preds, y, loss, int(nbest)))
        inner = build_pool(preds[keep], y, loss, size=size, builder=builder, seed=seed)
        return Pool(keep[inner.indices], inner.weights)
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


def best_models(val_preds, y_val, loss: LossSpec, n: int) -> np.ndarray:
    """Indices of the ``n`` models with the lowest loss of their own, best first (ties: the lower index; a
    non-finite loss ranks last)."""
    preds = as_predictions(val_preds)
    y = as_targets(y_val, preds)
    if callable(loss):
        own = np.array([mean_loss(p, y, loss) for p in preds], dtype=np.float64)
    else:
        if is_classification_loss(loss) != (preds.ndim == 3):
            raise ValueError(f"loss {loss!r} does not match predictions of shape {preds.shape}")
        own = np.asarray(mean_loss(preds, y, loss), dtype=np.float64)
    own = np.where(np.isfinite(own), own, np.inf)
    return np.argsort(own, kind="stable")[:n]
