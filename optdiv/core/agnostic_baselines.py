"""Agnostic Bayes's decision rule and its baselines (Lacoste et al., ICML 2014): weighted vote, AMin, SMin, and tuning.

- ``weighted_vote``: the classification rule E*(x) = argmax_y sum_h w_h [h(x) = y], returned as vote
  shares per class (rows sum to 1) so it plugs in wherever averaged probabilities do;
- ``amin_weights``: all weight on the model with the lowest held-out risk, ties broken at random;
- ``smin_weights``: Gibbs weights proportional to exp(-beta * risk);
- ``tune``: pick a parameter (rho of the k-fold adaptation, SMin's beta) by the loss of the resulting
  ensemble on the held-out meta-data, the paper's section 4.2 procedure. The paper's rho grid is
  ``RHO_GRID``; it gives no beta grid, so ``BETA_GRID`` (log-spaced, 0.1 to 10^4) is ours.
"""

from __future__ import annotations

from typing import Callable, Iterable, Tuple

import numpy as np

from .arrays import as_predictions, as_targets
from .agnostic_bayes import agnostic_bayes_weights
from .ensemble import tied_minima
from .metrics import mean_loss, per_example_loss

RHO_GRID = np.linspace(0.1, 0.8, 20)
BETA_GRID = np.logspace(-1, 4, 26)


def weighted_vote(preds, weights) -> np.ndarray:
    """(n, k) vote shares of the weighted majority vote over (models, n, k) class probabilities."""
    preds = as_predictions(preds)
    if preds.ndim != 3:
        raise ValueError("a vote needs class probabilities of shape (models, rows, classes)")
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (preds.shape[0],):
        raise ValueError(f"need one weight per model: {preds.shape[0]} models, weights of shape {weights.shape}")
    labels = preds.argmax(axis=2)  # (models, n)
    votes = np.zeros(preds.shape[1:], dtype=np.float64)
    rows = np.arange(preds.shape[1])
    for h in np.flatnonzero(weights):
        votes[rows, labels[h]] += weights[h]
    return votes / max(weights.sum(), 1e-300)


def amin_weights(losses, seed: int = 0) -> np.ndarray:
    """One-hot weights on the lowest mean loss over the columns of ``losses`` (n_examples, m)."""
    risks = _risks(losses)
    best = tied_minima(risks)
    out = np.zeros(risks.shape[0])
    out[np.random.default_rng(seed).choice(best)] = 1.0
    return out


def smin_weights(losses, beta: float) -> np.ndarray:
    """Gibbs weights exp(-beta * risk), normalised; beta = 0 is the uniform average."""
    if not (np.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be a finite number >= 0; got {beta!r}")
    risks = _risks(losses)
    logits = -beta * (risks - risks.min())
    w = np.exp(logits)
    return w / w.sum()


def ensemble_loss(preds, y, weights, loss: str, vote: bool = False) -> float:
    """Loss of the weighted ensemble (average, or vote shares for classification with ``vote``)."""
    preds = as_predictions(preds)
    y = as_targets(y, preds)
    combined = weighted_vote(preds, weights) if vote else np.tensordot(weights, preds.astype(np.float64), axes=1)
    return float(mean_loss(combined, y, loss))


def tune(values: Iterable[float], weights_for: Callable[[float], np.ndarray], preds, y, loss: str,
         vote: bool = False) -> Tuple[float, np.ndarray]:
    """The value (first on ties) whose weights give the lowest ensemble loss on (preds, y), and its weights."""
    best = None
    for value in values:
        w = weights_for(float(value))
        score = ensemble_loss(preds, y, w, loss, vote)
        if best is None or score < best[0] - 1e-12:
            best = (score, float(value), w)
    if best is None:
        raise ValueError("the grid of values to tune over is empty")
    return best[1], best[2]


def tuned_agnostic_bayes(preds, y, loss: str, sampler: str = "bootstrap", grid=RHO_GRID, n_samples: int = 1000,
                         seed: int = 0, vote: bool = False) -> Tuple[float, np.ndarray]:
    """(rho, weights) for out-of-fold predictions: rho tuned on ``grid`` as in the paper's k-fold protocol."""
    losses = per_example_loss(as_predictions(preds), y, loss).T  # (n_examples, models)
    return tune(grid, lambda rho: agnostic_bayes_weights(losses, sampler, n_samples, rho=rho, seed=seed),
                preds, y, loss, vote)


def tuned_smin(preds, y, loss: str, grid=BETA_GRID, vote: bool = False) -> Tuple[float, np.ndarray]:
    """(beta, weights) of SMin with beta tuned on ``grid`` by the ensemble's held-out loss."""
    losses = per_example_loss(as_predictions(preds), y, loss).T
    return tune(grid, lambda beta: smin_weights(losses, beta), preds, y, loss, vote)


def _risks(losses) -> np.ndarray:
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 2 or losses.size == 0:
        raise ValueError(f"losses must be a non-empty (n_examples, n_models) matrix; got shape {losses.shape}")
    if not np.all(np.isfinite(losses)):
        raise ValueError("losses contain NaN or inf values")
    return losses.mean(axis=0)
