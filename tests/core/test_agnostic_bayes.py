"""Agnostic Bayes weights: the paper's Table 1 (Lacoste et al., ICML 2014), the t-posterior hand numbers, and sampler properties."""

import math

import numpy as np
import pytest

from optdiv.core.agnostic_bayes import sample_risks
from optdiv.core.ensemble import agnostic_bayes_weights, student_t_posterior

TABLE1 = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
TABLE1_DUP = np.c_[TABLE1, TABLE1[:, 2]]


def test_table1_exact_enumeration():
    np.testing.assert_allclose(agnostic_bayes_weights(TABLE1, exact=True), [1 / 3] * 3, rtol=1e-12)
    np.testing.assert_allclose(
        agnostic_bayes_weights(TABLE1_DUP, exact=True), [25 / 81, 25 / 81, 31 / 162, 31 / 162], rtol=1e-12
    )


def test_table1_monte_carlo_close_to_exact():
    w = agnostic_bayes_weights(TABLE1_DUP, n_samples=20000, seed=1)
    np.testing.assert_allclose(w, [25 / 81, 25 / 81, 31 / 162, 31 / 162], atol=0.01)


def test_t_posterior_hand_numbers():
    post = student_t_posterior([[0, 1], [1, 1], [0, 0]])
    assert post.kappa == 4 and post.nu == 5 and post.df == 4
    np.testing.assert_allclose(post.loc, [0.375, 0.625])
    np.testing.assert_allclose(post.precision_matrix, [[0.9375, 0.3125], [0.3125, 0.9375]])
    np.testing.assert_allclose(post.scale, [[0.05859375, 0.01953125], [0.01953125, 0.05859375]])


@pytest.mark.parametrize("sampler", ["bootstrap", "bayesian_bootstrap", "dirichlet", "student_t"])
def test_weights_are_a_distribution_and_permute_with_columns(sampler):
    rng = np.random.default_rng(0)
    losses = (rng.random((40, 5)) < np.array([0.2, 0.3, 0.3, 0.4, 0.5])).astype(float)
    w = agnostic_bayes_weights(losses, sampler=sampler, n_samples=400, seed=3)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    if sampler == "bootstrap":
        perm = np.array([3, 0, 4, 1, 2])
        np.testing.assert_allclose(agnostic_bayes_weights(losses[:, perm], n_samples=400, seed=3), w[perm])


def test_exact_duplicates_get_equal_weight():
    rng = np.random.default_rng(1)
    losses = rng.random((30, 3))
    losses = np.c_[losses, losses[:, 1]]
    w = agnostic_bayes_weights(losses, n_samples=500)
    assert w[1] == pytest.approx(w[3])


@pytest.mark.parametrize("sampler", ["bootstrap", "student_t"])
def test_consistency_weight_concentrates_on_the_best(sampler):
    rng = np.random.default_rng(2)
    n = 4000
    losses = np.c_[rng.random(n) < 0.2, rng.random(n) < 0.3, rng.random(n) < 0.35].astype(float)
    assert agnostic_bayes_weights(losses, sampler=sampler, n_samples=500)[0] > 0.99


def test_rho_bootstrap_draws_ceil_rho_m_examples():
    losses = np.eye(10)[:, :4]  # 0/1 losses: each risk is (number of drawn hits) / draws
    risks = sample_risks(losses, "bootstrap", 200, 0.35, np.random.default_rng(0))
    draws = math.ceil(0.35 * 10)
    np.testing.assert_allclose(risks * draws, np.round(risks * draws), atol=1e-12)
    assert risks.max() <= 1.0 and np.any(risks * draws == 1.0)


def test_rho_one_is_unadjusted():
    rng = np.random.default_rng(4)
    losses = rng.random((25, 3))
    np.testing.assert_allclose(
        agnostic_bayes_weights(losses, rho=1.0, seed=9), agnostic_bayes_weights(losses, seed=9)
    )
    post = student_t_posterior(losses, rho=0.5)
    assert post.kappa == pytest.approx(1 + 12.5)


def test_dirichlet_small_concentration_matches_bayesian_bootstrap():
    rng = np.random.default_rng(5)
    losses = (rng.random((60, 3)) < [0.3, 0.4, 0.5]).astype(float)
    a = sample_risks(losses, "dirichlet", 20000, 1.0, np.random.default_rng(1), prior_concentration=1e-6)
    b = sample_risks(losses, "bayesian_bootstrap", 20000, 1.0, np.random.default_rng(2))
    np.testing.assert_allclose(a.mean(0), b.mean(0), atol=0.005)
    np.testing.assert_allclose(a.var(0), b.var(0), rtol=0.1)


def test_dirichlet_prior_pulls_risks_towards_half():
    losses = np.zeros((20, 2))
    risks = sample_risks(losses, "dirichlet", 5000, 1.0, np.random.default_rng(0), prior_concentration=5.0)
    assert 0.05 < risks.mean() < 0.3  # data says 0, the uniform prior says 0.5, weight 5 / (5 + 20)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"sampler": "nope"}, "unknown Agnostic Bayes sampler"),
        ({"sampler": "student_t", "exact": True}, "bootstrap sampler only"),
        ({"rho": 0.0}, "rho must be positive"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        agnostic_bayes_weights(TABLE1, **kwargs)


def test_dirichlet_rejects_non_binary_losses_and_huge_exact():
    with pytest.raises(ValueError, match="0/1 losses"):
        agnostic_bayes_weights(np.full((3, 2), 0.5), sampler="dirichlet")
    with pytest.raises(ValueError, match="too large"):
        agnostic_bayes_weights(np.zeros((40, 2)), exact=True)
