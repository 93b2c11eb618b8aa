"""Diversity acquisitions, their weight schedules, and the rank combination with the performance term.

The two terms live on different scales, so both methods combine *ranks* over the candidate set:
``score = R_perf + w(t) * R_div`` and the lowest score wins (rank 1 = best). The kind's direction
decides what "best" means for diversity: ``divbo`` is larger-is-more-diverse, every OptDiv kind is a
loss-bound term and smaller-is-better (optdiv.core.diversity).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from scipy.stats import rankdata


def divbo_weight(t, beta: float = 0.05, tau: float = 0.2):
    """DivBO: ``beta * (sigmoid(tau t) - 0.5)``, rising from 0 to beta/2 (the paper's "[0, beta)" is beta/2)."""
    return _scalar_or_array(beta * (expit(tau * np.asarray(t, dtype=np.float64)) - 0.5))


def optdivbo_weight(t, tau: float = 0.2):
    """OptDivBO: ``2 * (sigmoid(tau t) - 0.5)``, rising from 0 to 1, so late on diversity counts as much as EI."""
    return _scalar_or_array(2.0 * (expit(tau * np.asarray(t, dtype=np.float64)) - 0.5))


def ranks(values, higher_is_better: bool) -> np.ndarray:
    """Ranks over the candidates, 1 = best; ties share their average rank so no candidate is favoured."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"ranks need a vector of candidate values; got shape {values.shape}")
    if np.isnan(values).any():
        raise ValueError("cannot rank NaN values")
    return rankdata(-values if higher_is_better else values, method="average")


def divbo_acquisition(samples, higher_is_more_diverse: bool = True) -> np.ndarray:
    """DivBO (eq. 4): mean over N surrogate draws of the candidate's diversity to its *closest* pool member.

    ``samples`` is (N, c, p): draw n of the diversity between candidate c and pool member p. For the
    larger-is-more-diverse ``divbo`` kind the closest member is the minimum; for a smaller-is-better
    loss-bound kind it is the maximum (the member the candidate helps least). Returns (c,), to be ranked
    in the kind's own direction.
    """
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 3 or samples.shape[2] == 0:
        raise ValueError(f"samples must be (draws, candidates, pool members) with members; got {samples.shape}")
    closest = samples.min(axis=2) if higher_is_more_diverse else samples.max(axis=2)
    return closest.mean(axis=0)


def optdivbo_acquisition(
    member_preds, pool_weights, kappa: float = 1.0, higher_is_more_diverse: bool = False
) -> np.ndarray:
    """OptDivBO (eq. 10-11): confidence bound of the pool-weighted diversity sum.

    ``member_preds`` is (K, c, p): surrogate member k's diversity between candidate c and pool member p;
    ``pool_weights`` (p,) are the pool multiplicities. Per member ``a_k(c) = sum_p w_p f_k(c, p)``
    (the paper's 1/(N |P|) factor scales every candidate alike and leaves ranks unchanged); mu and sigma
    are the mean and standard deviation over members. A smaller-is-better kind returns the optimistic
    lower bound ``mu - kappa sigma`` (rank ascending); the larger-is-more-diverse ``divbo`` kind returns
    ``mu + kappa sigma`` (rank descending).
    """
    member_preds = np.asarray(member_preds, dtype=np.float64)
    pool_weights = np.asarray(pool_weights, dtype=np.float64)
    if member_preds.ndim != 3:
        raise ValueError(f"member predictions must be (members, candidates, pool members); got {member_preds.shape}")
    if pool_weights.shape != (member_preds.shape[2],):
        raise ValueError(
            f"need one weight per pool member: {member_preds.shape[2]} members, weights of shape {pool_weights.shape}"
        )
    per_member = member_preds @ pool_weights  # (K, c)
    mu, sigma = per_member.mean(axis=0), per_member.std(axis=0)
    return mu + kappa * sigma if higher_is_more_diverse else mu - kappa * sigma


def combine(perf_rank, div_rank, w: float) -> np.ndarray:
    """``perf_rank + w * div_rank``; the lowest score wins."""
    return np.asarray(perf_rank, dtype=np.float64) + w * np.asarray(div_rank, dtype=np.float64)


def _scalar_or_array(value: np.ndarray):
    return float(value) if value.ndim == 0 else value
