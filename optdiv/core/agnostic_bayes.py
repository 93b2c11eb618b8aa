"""Agnostic Bayes ensemble weights (Lacoste et al., ICML 2014).

The weight of model h is the posterior probability that h has the lowest true risk, estimated by
drawing risk vectors from a posterior over risks given the per-example held-out losses and counting
how often each model is the argmin. Ties inside the argmin are split evenly, which reproduces the
paper's Table 1 exactly (docs/method.md, "Final ensembles").

Samplers: ``bootstrap`` (resample examples), ``bayesian_bootstrap`` (Dirichlet(rho) example weights),
``dirichlet`` (0/1 losses; prior concentration ``A = alpha * N`` as docs/method.md says, so 2^d never
appears), ``student_t`` (normal-Wishart prior, multivariate t marginal). ``rho`` is the effective
sample-size ratio of the paper's k-fold adaptation; rho=1 is the plain single-split posterior.
"""

from __future__ import annotations

import math
from typing import Iterator, NamedTuple, Optional

import numpy as np

SAMPLERS = ("bootstrap", "bayesian_bootstrap", "dirichlet", "student_t")

#: Exact enumeration of bootstrap resamples is refused beyond this many count vectors.
MAX_EXACT_RESAMPLES = 500_000


class StudentTPosterior(NamedTuple):
    loc: np.ndarray  # r_m
    scale: np.ndarray  # T_m / (kappa_m * nu_tilde)
    df: float  # nu_tilde = nu_m - d + 1
    kappa: float
    nu: float
    precision_matrix: np.ndarray  # T_m


def agnostic_bayes_weights(
    losses,
    sampler: str = "bootstrap",
    n_samples: int = 1000,
    rho: float = 1.0,
    seed: int = 0,
    exact: bool = False,
    prior_concentration: float = 1.0,
) -> np.ndarray:
    """Posterior probability of being the best model, for each column of ``losses`` (n_examples, m).

    ``exact=True`` enumerates every bootstrap resample instead of sampling (bootstrap only, small n).
    ``prior_concentration`` is ``A = alpha * N`` of the ``dirichlet`` sampler.
    """
    losses = _check_losses(losses)
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown Agnostic Bayes sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if not rho > 0:
        raise ValueError("rho must be positive")
    if exact:
        if sampler != "bootstrap":
            raise ValueError("exact enumeration is defined for the bootstrap sampler only")
        return _exact_bootstrap_weights(losses, rho)
    if n_samples < 1:
        raise ValueError("n_samples must be at least 1")
    rng = np.random.default_rng(seed)
    risks = sample_risks(losses, sampler, n_samples, rho, rng, prior_concentration)
    return _split_argmin(risks).mean(axis=0)


def sample_risks(
    losses: np.ndarray,
    sampler: str,
    n_samples: int,
    rho: float,
    rng: np.random.Generator,
    prior_concentration: float = 1.0,
) -> np.ndarray:
    """(n_samples, m) risk vectors drawn from the chosen posterior."""
    n = losses.shape[0]
    if sampler == "bootstrap":
        draws = math.ceil(rho * n)
        counts = rng.multinomial(draws, np.full(n, 1.0 / n), size=n_samples)
        return counts @ losses / draws
    if sampler == "bayesian_bootstrap":
        return _dirichlet_rows(rng, rho, n, n_samples) @ losses
    if sampler == "dirichlet":
        return _dirichlet_risks(losses, n_samples, rho, rng, prior_concentration)
    post = student_t_posterior(losses, rho=rho)
    chol = np.linalg.cholesky(post.scale)
    z = rng.standard_normal((n_samples, losses.shape[1])) @ chol.T
    xi = rng.chisquare(post.df, size=n_samples)
    return post.loc[None, :] + z * np.sqrt(post.df / xi)[:, None]


def student_t_posterior(
    losses,
    rho: float = 1.0,
    r0: float = 0.5,
    t0: float = 0.25,
    kappa0: float = 1.0,
    nu0: Optional[float] = None,
) -> StudentTPosterior:
    """Normal-Wishart posterior over risks (paper eq. 4-5) with the paper's fixed prior defaults.

    ``nu0`` defaults to d; with ``rho`` the sample size m becomes ``m' = rho * m`` in every update.
    """
    losses = _check_losses(losses)
    m, d = losses.shape
    nu0 = float(d) if nu0 is None else float(nu0)
    if nu0 <= d - 1:
        raise ValueError("nu0 must exceed d - 1")
    m_eff = rho * m
    mean = losses.mean(axis=0)
    centred = losses - mean
    scatter = centred.T @ centred / m
    prior_loc = np.full(d, r0)
    kappa = kappa0 + m_eff
    nu = nu0 + m_eff
    loc = (kappa0 * prior_loc + m_eff * mean) / kappa
    gap = prior_loc - mean
    t_m = t0 * np.eye(d) + m_eff * scatter + m_eff * (kappa0 / kappa) * np.outer(gap, gap)
    df = nu - d + 1
    return StudentTPosterior(loc, t_m / (kappa * df), df, kappa, nu, t_m)


def _check_losses(losses) -> np.ndarray:
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 2 or losses.shape[0] == 0 or losses.shape[1] == 0:
        raise ValueError(f"losses must be a non-empty (n_examples, n_models) matrix; got shape {losses.shape}")
    if not np.all(np.isfinite(losses)):
        raise ValueError("losses contain NaN or inf values")
    return losses


def _split_argmin(risks: np.ndarray) -> np.ndarray:
    """Indicator of the argmin per row, ties sharing the row's unit mass evenly."""
    best = risks.min(axis=1, keepdims=True)
    winners = (risks <= best + 1e-12 * np.maximum(1.0, np.abs(best))).astype(np.float64)
    return winners / winners.sum(axis=1, keepdims=True)


def _dirichlet_rows(rng: np.random.Generator, alpha: float, size: int, rows: int) -> np.ndarray:
    g = rng.gamma(alpha, size=(rows, size))
    return g / g.sum(axis=1, keepdims=True)


def _dirichlet_risks(losses, n_samples, rho, rng, concentration: float) -> np.ndarray:
    """Seed-notes' stick-breaking identity: r = theta * r_prior + (1 - theta) * r_data."""
    if not np.all((losses == 0.0) | (losses == 1.0)):
        raise ValueError("the dirichlet sampler needs 0/1 losses; use bootstrap or student_t for other losses")
    n, d = losses.shape
    data = _dirichlet_rows(rng, rho, n, n_samples) @ losses
    if concentration <= 0:
        return data  # A -> 0 is the Bayesian bootstrap
    theta = rng.beta(concentration, rho * n, size=n_samples)
    sticks = max(1, math.ceil(10 * concentration))
    v = rng.beta(1.0, concentration, size=(n_samples, sticks))
    left = np.concatenate([np.ones((n_samples, 1)), np.cumprod(1.0 - v, axis=1)[:, :-1]], axis=1)
    pi = v * left
    pi /= pi.sum(axis=1, keepdims=True)  # truncated stick-breaking, renormalised
    atoms = rng.integers(0, 2, size=(n_samples, sticks, d)).astype(np.float64)
    prior = np.einsum("sk,skd->sd", pi, atoms)
    return theta[:, None] * prior + (1.0 - theta[:, None]) * data


def _exact_bootstrap_weights(losses: np.ndarray, rho: float) -> np.ndarray:
    n, d = losses.shape
    draws = math.ceil(rho * n)
    if math.comb(draws + n - 1, n - 1) > MAX_EXACT_RESAMPLES:
        raise ValueError(
            f"exact enumeration of {n} examples x {draws} draws is too large; use exact=False (Monte Carlo)"
        )
    counts = np.array(list(_compositions(draws, n)), dtype=np.float64)
    log_fact = np.array([math.lgamma(c + 1) for c in range(draws + 1)])
    log_p = math.lgamma(draws + 1) - log_fact[counts.astype(np.intp)].sum(axis=1) - draws * math.log(n)
    risks = counts @ losses / draws
    return np.exp(log_p) @ _split_argmin(risks)


def _compositions(total: int, parts: int) -> Iterator[tuple]:
    """Every vector of ``parts`` non-negative integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions(total - first, parts - 1):
            yield (first,) + rest
