"""Does ensembling over more models predict unseen rows better? The check rows and the paired tests that say so.

More models always fit the rows an ensemble is fitted on at least as well, and a search that picks its models by
their scores on some rows makes those rows flatter still. The honest comparison of a pool of old models with the
pool of every model scores both ensembles on rows neither the search nor the ensembles' fit has seen: the check
rows (:func:`check_rows`), kept apart before a search starts (:func:`switch_confidence_heldout`), or, with too few
rows to keep any apart, held-out folds of a cross-validation (:func:`switch_confidence_cv`). Each turns the per-row
loss differences into a one-sided paired z-test (:func:`paired_confidence`). The AutoGluon hook decides with
them whether its refitted ensemble replaces AutoGluon's own best model.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .ensemble import ensemble_predict, ensemble_selection
from .metrics import per_example_loss

#: Share of the rows models are scored on that a search never scores: the check rows. Each class is split in
#: this share. The search steers by the other rows only, so the check rows can tell a better pool from one
#: picked to fit the rows it was scored on.
CHECK_SHARE = 0.5
#: Below this many check rows (or rows left for the search) the rows are not split, and a comparison falls back
#: to a cross-validation over all of them (:func:`switch_confidence_cv`).
MIN_CHECK_ROWS = 30
#: Folds of :func:`switch_confidence_cv`.
SWITCH_FOLDS = 5


def check_rows(y, task: str, seed: int, share: float = CHECK_SHARE,
               min_rows: int = MIN_CHECK_ROWS) -> Optional[np.ndarray]:
    """Boolean mask of the rows a search never scores (``share`` of each class for ``task="classification"``,
    else of all rows), drawn with ``seed``; None when either side would have fewer than ``min_rows`` rows."""
    y = np.asarray(y)
    n = len(y)
    n_check = int(round(share * n))
    if n_check < min_rows or n - n_check < min_rows:
        return None
    rng = np.random.default_rng([int(seed), 0xC4EC])
    mask = np.zeros(n, dtype=bool)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if task == "classification" else [np.arange(n)]
    for rows in groups:
        mask[rng.permutation(rows)[:int(round(share * len(rows)))]] = True
    return mask


def switch_confidence_cv(preds, old: Sequence[int], y, loss: str, seed: int = 0, ensemble: bool = True,
                         folds: int = SWITCH_FOLDS, size: int = 25) -> float:
    """How sure a cross-validation over the rows of ``y`` is that a weighted ensemble over every model of ``preds``
    ((models, rows, classes) probabilities or (models, rows) values) predicts unseen rows better than one over
    the models ``old`` alone.

    On ``folds`` folds of the rows, Caruana's selection (``optdiv.core.ensemble``, the greedy method AutoGluon's
    weighted ensemble uses; ``size`` rounds) is fitted on the other folds, once over ``old`` and once over all, and
    each row's ``loss`` is taken where it was held out; the confidence is :func:`paired_confidence` of those losses.
    Unlike the two ensembles' validation scores, the held-out losses do not reward the larger pool for fitting the
    rows it is scored on; they still reward models that a search picked by their scores on these very rows, which
    :func:`switch_confidence_heldout` does not. ``ensemble=False`` compares the best single model of each pool
    instead. ``loss`` is the metric vocabulary's for the eval_metric (the metric itself for accuracy, log_loss,
    MSE, RMSE, R2 and MAE; 0/1 error, MSE or MAE standing in for metrics without a per-row loss, such as AUC or
    F1)."""
    preds = np.asarray(preds, dtype=np.float64)
    y = np.asarray(y)
    n = len(y)
    fold_of = np.random.default_rng([seed, 0x5717C4]).permutation(n) % max(2, min(folds, n))
    held_out = np.zeros((2, n))
    for fold in np.unique(fold_of):
        test_rows = fold_of == fold
        held_out[:, test_rows] = _held_out_losses(preds, list(old), y, ~test_rows, test_rows, loss, seed, ensemble,
                                                  size)
    return paired_confidence(held_out[0] - held_out[1])


def switch_confidence_heldout(preds, old: Sequence[int], y, check, loss: str, seed: int = 0, ensemble: bool = True,
                              size: int = 25) -> float:
    """How sure the ``check`` rows (a boolean mask over the rows of ``y``) are that a weighted ensemble over every
    model of ``preds`` predicts unseen rows better than one over the models ``old`` alone: both ensembles are
    fitted (Caruana, ``size`` rounds) on the other rows, each check row's ``loss`` is taken under both, and the
    confidence is :func:`paired_confidence` of the differences. When a search picked the other models by their
    scores on the other rows, the check rows are the only ones on which the picking does not count as skill."""
    preds = np.asarray(preds, dtype=np.float64)
    y = np.asarray(y)
    check = np.asarray(check, dtype=bool)
    if check.shape != y.shape or check.all() or not check.any():
        raise ValueError("check must be a boolean mask over the rows of y with rows on both sides")
    held_out = _held_out_losses(preds, list(old), y, ~check, check, loss, seed, ensemble, size)
    return paired_confidence(held_out[0] - held_out[1])


def _held_out_losses(preds, old, y, fit_rows, test_rows, loss, seed, ensemble, size) -> np.ndarray:
    """(2, test rows) losses of the ensembles (or best single models) over ``old`` and over every model, each
    chosen on ``fit_rows`` and applied to ``test_rows``."""
    out = np.zeros((2, int(np.count_nonzero(test_rows))))
    for j, pool in enumerate((old, list(range(preds.shape[0])))):
        sub = preds[pool][:, fit_rows]
        if ensemble:
            weights = ensemble_selection(sub, y[fit_rows], loss, size=size, seed=seed).weights
        else:
            weights = np.zeros(len(pool))
            weights[int(np.argmin(per_example_loss(sub, y[fit_rows], loss).mean(axis=1)))] = 1.0
        out[j] = per_example_loss(ensemble_predict(preds[pool][:, test_rows], weights), y[test_rows], loss)
    return out


def paired_confidence(d) -> float:
    """One-sided paired z-test that the mean of the differences ``d`` (old loss minus new, per row) is above 0:
    Phi(mean(d) / (sd(d) / sqrt(n)))."""
    d = np.asarray(d, dtype=np.float64)
    n = len(d)
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if not sd > 0:
        return 0.5 if mean == 0 else (1.0 if mean > 0 else 0.0)
    return 0.5 * (1.0 + math.erf(mean / (sd / math.sqrt(n)) / math.sqrt(2.0)))
