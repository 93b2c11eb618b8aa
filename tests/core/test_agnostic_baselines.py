"""Weighted vote, AMin, SMin and the section 4.2 tuning, on hand examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optdiv.core.agnostic_baselines import (
    RHO_GRID,
    amin_weights,
    ensemble_loss,
    smin_weights,
    tune,
    tuned_agnostic_bayes,
    tuned_smin,
    weighted_vote,
)


def test_weighted_vote_by_hand():
    # model 0 says class 1 on both rows, model 1 class 0 on both, model 2 class 0 then class 1
    preds = np.array([
        [[0.4, 0.6], [0.2, 0.8]],
        [[0.9, 0.1], [0.7, 0.3]],
        [[0.6, 0.4], [0.3, 0.7]],
    ])
    shares = weighted_vote(preds, [0.5, 0.3, 0.2])
    np.testing.assert_allclose(shares, [[0.5, 0.5], [0.3, 0.7]])
    # a vote ignores confidence: averaging the same probabilities favours class 0 on row 0 (0.59 vs 0.41)
    assert np.tensordot([0.5, 0.3, 0.2], preds, axes=1)[0].argmax() == 0
    with pytest.raises(ValueError):
        weighted_vote(preds[:, :, 0], [1, 1, 1])
    with pytest.raises(ValueError):
        weighted_vote(preds, [1, 1])


def test_amin_puts_all_weight_on_the_lowest_risk_and_breaks_ties_at_random():
    losses = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=float)  # risks 1/3, 1/3, 1/3: a three-way tie
    picks = {int(np.argmax(amin_weights(losses, seed=s))) for s in range(30)}
    assert picks == {0, 1, 2}
    np.testing.assert_array_equal(amin_weights(losses, seed=4), amin_weights(losses, seed=4))
    clear = np.array([[0, 1], [0, 1], [1, 0]], dtype=float)
    np.testing.assert_array_equal(amin_weights(clear), [1.0, 0.0])


def test_smin_gibbs_weights_by_hand():
    losses = np.array([[0.1, 0.3]] * 4)
    np.testing.assert_allclose(smin_weights(losses, 0.0), [0.5, 0.5])
    expected = np.array([1.0, math.exp(-10 * 0.2)])
    np.testing.assert_allclose(smin_weights(losses, 10.0), expected / expected.sum())
    assert smin_weights(losses, 1e6)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        smin_weights(losses, -1.0)


def test_tune_picks_the_value_whose_ensemble_loses_least():
    y = np.array([0, 1, 1, 0])
    good = np.eye(2)[y] * 0.9 + 0.05
    bad = np.eye(2)[1 - y] * 0.9 + 0.05
    preds = np.stack([good, bad])
    value, weights = tune([0.0, 0.5, 1.0], lambda v: np.array([v, 1 - v]), preds, y, "log_loss")
    assert value == 1.0 and np.allclose(weights, [1, 0])
    assert ensemble_loss(preds, y, np.array([1.0, 0.0]), "error") == 0.0
    assert ensemble_loss(preds, y, np.array([0.0, 1.0]), "error", vote=True) == 1.0
    with pytest.raises(ValueError):
        tune([], lambda v: np.array([v, 1 - v]), preds, y, "error")


def test_tuned_rho_and_beta_come_from_their_grids_and_favour_the_better_model():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    strong = np.clip(np.eye(2)[y] * 0.7 + rng.uniform(0, 0.3, (300, 2)), 0, 1)
    weak = rng.dirichlet([1, 1], 300)
    preds = np.stack([strong / strong.sum(1, keepdims=True), weak, weak[::-1]])
    rho, w = tuned_agnostic_bayes(preds, y, "error", n_samples=200)
    assert rho in RHO_GRID and w.sum() == pytest.approx(1.0) and w.argmax() == 0
    beta, w = tuned_smin(preds, y, "error")
    assert w.sum() == pytest.approx(1.0) and w.argmax() == 0 and beta > 0
