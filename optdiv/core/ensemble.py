"""Ensemble builders over stored predictions: Caruana's forward selection and Agnostic Bayes weights.

Both serve twice: for the final ensemble and for the temporary pool that DivBO/OptDivBO diversify against.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arrays import PROB_CLIP, as_predictions, as_targets
from .agnostic_bayes import agnostic_bayes_weights, student_t_posterior  # noqa: F401  (public here too)
from .metrics import LossSpec, check_loss, is_classification_loss, mean_loss

#: Relative tolerance under which two candidate losses count as tied.
TIE_TOLERANCE = 1e-12


class SelectionResult(NamedTuple):
    weights: np.ndarray  # (m,) multiplicity / size; sums to 1
    loss_path: np.ndarray  # (size,) validation loss of the ensemble after each round
    picks: np.ndarray  # (size,) model index chosen in each round


def addition_losses(preds, y, loss: LossSpec = "error"):
    """A function ``(running, count) -> (m,)``: the loss of ``(running + preds[h]) / count`` for every model h.

    ``running`` is the sum of the members already chosen; ensemble-building searches (EO's slot
    replacement) use it to score every observed model against the current ensemble in one pass.
    """
    preds = as_predictions(preds)
    return _round_loss_function(preds.astype(np.float64), as_targets(y, preds), loss)


def ensemble_selection(preds, y, loss: LossSpec = "error", size: int = 25, seed: int = 0) -> SelectionResult:
    """Greedy forward selection with replacement (Caruana et al. 2004) of ``size`` rounds.

    Each round adds the model whose addition gives the lowest validation loss of the uniform average of
    the multiset so far; a running sum keeps a round at one pass over the predictions. Ties (within a
    relative 1e-12) are broken by a generator seeded with ``seed``, so results are reproducible.
    """
    preds = as_predictions(preds)
    y = as_targets(y, preds)
    if size < 1:
        raise ValueError("ensemble size must be at least 1")
    _check_selection_loss(loss, preds)
    return _select(preds.astype(np.float64), y, loss, size, seed)


def _check_selection_loss(loss: LossSpec, preds: np.ndarray) -> None:
    if isinstance(loss, str):
        check_loss(loss)
        if is_classification_loss(loss) != (preds.ndim == 3):
            raise ValueError(f"loss {loss!r} does not match predictions of shape {preds.shape}")


def _select(stack: np.ndarray, y: np.ndarray, loss: LossSpec, size: int, seed: int) -> SelectionResult:
    """:func:`ensemble_selection` on float64 predictions already checked."""
    rng = np.random.default_rng(seed)
    round_losses = _round_loss_function(stack, y, loss)
    running = np.zeros(stack.shape[1:], dtype=np.float64)
    counts = np.zeros(stack.shape[0], dtype=np.int64)
    picks = np.empty(size, dtype=np.int64)
    path = np.empty(size, dtype=np.float64)
    for t in range(size):
        losses = round_losses(running, t + 1)
        pick = _argmin_with_ties(losses, rng)
        running += stack[pick]
        counts[pick] += 1
        picks[t] = pick
        path[t] = losses[pick]
    return SelectionResult(counts / size, path, picks)


def bagged_ensemble_selection(preds, y, loss: LossSpec = "error", size: int = 25, bags: int = 20,
                              seed: int = 0) -> np.ndarray:
    """(m,) weights averaged over ``bags`` ensemble selections, each on a bootstrap sample of the rows.

    One selection fits the validation rows it sees: with a few hundred rows it keeps members whose gain is
    noise. A member chosen on most bootstrap samples keeps its weight; one chosen on a few loses most of it.
    """
    preds = as_predictions(preds)
    y = as_targets(y, preds)
    if bags < 1:
        raise ValueError("bags must be at least 1")
    if size < 1:
        raise ValueError("ensemble size must be at least 1")
    _check_selection_loss(loss, preds)
    rng = np.random.default_rng(seed)
    stack = preds.astype(np.float64)  # cast once, not once per bag
    weights = np.zeros(preds.shape[0], dtype=np.float64)
    for b in range(bags):
        rows = rng.integers(0, len(y), len(y))
        weights += _select(stack[:, rows], y[rows], loss, size, seed + b).weights
    return weights / bags


def ensemble_predict(preds, weights) -> np.ndarray:
    """Weighted average of the models' predictions (probabilities or values)."""
    preds = np.asarray(preds)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (preds.shape[0],):
        raise ValueError(f"need one weight per model: {preds.shape[0]} models, {weights.shape} weights")
    return np.tensordot(weights, preds.astype(np.float64), axes=1) / weights.sum()


def _round_loss_function(stack: np.ndarray, y: np.ndarray, spec: LossSpec):
    """Return ``f(running_sum, size) -> (m,)``: each model's loss if added to the current multiset.

    The named losses are rewritten on per-row statistics precomputed once, so a round costs a few
    (m, n) passes instead of materialising m candidate ensembles of (n, k) probabilities.
    """
    if callable(spec):
        return lambda running, size: np.array([mean_loss((running + p) / size, y, spec) for p in stack])
    n = y.shape[0]
    if spec == "mse":  # sum_n ((R + P_i)/s - y)^2 expanded: one matrix-vector product per round
        sq_norm = np.square(stack).sum(axis=1)

        def mse(running, size):
            resid = running / size - y
            return (sq_norm / size**2 + (2.0 / size) * (stack @ resid) + resid @ resid) / n

        return mse
    if spec == "mae":
        return lambda running, size: np.abs((running[None] + stack) / size - y).mean(axis=1)
    rows = np.arange(n)
    true_col = stack[:, rows, y]  # (m, n) probability of the true class
    if spec == "log_loss":

        def log_loss(running, size):
            q = (running[rows, y][None] + true_col) / size
            return -np.log(np.clip(q, PROB_CLIP, 1.0)).mean(axis=1)

        return log_loss
    if spec == "brier":  # sum_n sum_k c^2 - 2 c_y + 1 with c = (R + P_i)/s, expanded likewise
        flat = stack.reshape(stack.shape[0], -1)
        sq_norm = np.square(flat).sum(axis=1)
        true_sum = true_col.sum(axis=1)

        def brier(running, size):
            cross = flat @ running.ravel()
            sum_sq = (running.ravel() @ running.ravel() + 2.0 * cross + sq_norm) / size**2
            true_mass = (running[rows, y].sum() + true_sum) / size
            return (sum_sq - 2.0 * true_mass) / n + 1.0

        return brier
    if stack.shape[2] == 2:  # error, binary: class 1 wins iff its summed score is strictly larger
        margin = stack[:, :, 1] - stack[:, :, 0]
        positive = y == 1
        return lambda running, size: (
            (margin > (running[:, 0] - running[:, 1])[None]) != positive[None]
        ).mean(axis=1)
    return lambda running, size: (np.argmax(running[None] + stack, axis=2) != y[None]).mean(axis=1)


def tied_minima(values: np.ndarray) -> np.ndarray:
    """Positions of the values within :data:`TIE_TOLERANCE` (relative) of the minimum, in order."""
    best = float(np.min(values))
    return np.flatnonzero(values <= best + TIE_TOLERANCE * max(1.0, abs(best)))


def _argmin_with_ties(values: np.ndarray, rng: np.random.Generator) -> int:
    tied = tied_minima(values)
    return int(tied[0]) if tied.size == 1 else int(rng.choice(tied))
