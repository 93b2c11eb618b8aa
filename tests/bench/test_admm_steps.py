"""ADMM's closed-form steps against hand-worked targets."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.strategies.admm_steps import ThompsonArms, delta_min, dual_update, inactive_theta, reward


def test_delta_min_rounds_the_clipped_shifted_value():
    theta = np.array([2.4, 7.6, -3.0])
    lam = np.array([0.2, 0.0, 1.0])
    np.testing.assert_array_equal(delta_min(theta, lam, 1.0, [0, 0, 0], [5, 10, 5]), [3, 8, 0])
    np.testing.assert_array_equal(delta_min(theta, lam, 2.0, [0, 0, 0], [5, 10, 5]), [2, 8, 0])


def test_inactive_hyperparameters_and_dual_update():
    np.testing.assert_allclose(inactive_theta([3, 8], [1.0, -4.0], 2.0, [0, 0], [5, 9]), [2.5, 9.0])
    np.testing.assert_allclose(dual_update([0.5, 0.0], 1.0, [2.4, 7.6], [2, 8]), [0.9, -0.4])


def test_reward_mapping():
    assert reward(0.0) == 1.0
    assert reward(0.7) == 0.0 and reward(1.5) == 0.0
    assert reward(0.35) == pytest.approx(0.5)
    assert reward(-0.1) == 1.0


def test_thompson_picks_one_arm_per_module_and_updates_only_pulled_arms():
    arms = ThompsonArms({"scaler": ["none", "standard"], "model": ["tree", "linear", "knn"]})
    rng = np.random.default_rng(0)
    choice = arms.choose(rng)
    assert set(choice) == {"scaler", "model"} and choice["model"] in ("tree", "linear", "knn")
    arms.update(choice, 0.0, rng)  # reward 1 for sure
    for (module, arm), pulls, rewards in arms.counts():
        pulled = choice[module] == arm
        assert pulls == int(pulled) and rewards == int(pulled)
    # an arm that keeps winning is chosen more and more
    for _ in range(200):
        c = arms.choose(rng)
        arms.update(c, 0.05 if c["model"] == "linear" else 0.69, rng)
    wins = sum(arms.choose(rng)["model"] == "linear" for _ in range(100))
    assert wins > 80
    with pytest.raises(ValueError):
        ThompsonArms({"model": []})
