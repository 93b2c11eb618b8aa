"""The temporary pool: unique members with multiplicities, built by the core's ensemble builders."""

import numpy as np
import pytest

from optdiv.core.ensemble import agnostic_bayes_weights, ensemble_selection
from optdiv.core.metrics import per_example_loss
from optdiv.core.pool import MIN_POSTERIOR_WEIGHT, best_models, build_pool


def _binary(rng, m=30, n=200):
    y = rng.integers(0, 2, n)
    signal = np.where(y == 1, 1.0, -1.0)
    logit = rng.uniform(0.2, 2.0, (m, 1)) * signal + rng.normal(0, 1.5, (m, n))
    p1 = 1.0 / (1.0 + np.exp(-logit))
    return np.stack([1 - p1, p1], axis=-1), y


def test_caruana_pool_is_the_multiset_of_picks():
    rng = np.random.default_rng(0)
    preds, y = _binary(rng)
    pool = build_pool(preds, y, "log_loss", size=25, seed=3)
    picks = ensemble_selection(preds, y, "log_loss", size=25, seed=3).picks
    assert pool.weights.sum() == 25
    assert np.all(np.diff(pool.indices) > 0)  # unique, ascending
    assert set(pool.indices.tolist()) == set(picks.tolist())
    for idx, w in zip(pool.indices, pool.weights):
        assert w == np.count_nonzero(picks == idx)


def test_caruana_hand_example_single_dominant_model():
    # model 1 is perfect; adding anything else can only hurt the mean squared error
    y = np.array([0.0, 1.0, 2.0])
    preds = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0], [3.0, 3.0, 3.0]])
    pool = build_pool(preds, y, "mse", size=7)
    np.testing.assert_array_equal(pool.indices, [1])
    np.testing.assert_array_equal(pool.weights, [7.0])


def test_agnostic_bayes_pool_scales_posterior_and_drops_negligible_members():
    rng = np.random.default_rng(1)
    preds, y = _binary(rng, m=12)
    pool = build_pool(preds, y, "error", size=25, builder="agnostic_bayes", seed=4)
    posterior = agnostic_bayes_weights(per_example_loss(preds.astype(np.float32), y, "error").T, seed=4)
    kept = np.flatnonzero(posterior >= MIN_POSTERIOR_WEIGHT)
    np.testing.assert_array_equal(pool.indices, kept)
    assert pool.weights.sum() == pytest.approx(25.0)
    np.testing.assert_allclose(pool.weights / 25.0, posterior[kept] / posterior[kept].sum())
    assert kept.size < 12  # some clearly worse models get (almost) no posterior mass


def test_agnostic_bayes_hand_example():
    # model 0 is right on every row, model 1 on none: the posterior puts all mass on model 0
    y = np.array([0, 1, 0, 1])
    right = np.eye(2)[y]
    preds = np.stack([right * 0.9 + 0.05, (1 - right) * 0.9 + 0.05])
    pool = build_pool(preds, y, "error", size=25, builder="agnostic_bayes")
    np.testing.assert_array_equal(pool.indices, [0])
    np.testing.assert_allclose(pool.weights, [25.0])


def test_regression_pool():
    rng = np.random.default_rng(2)
    y = rng.normal(size=80)
    preds = y + rng.normal(0, 1, (10, 80))
    pool = build_pool(preds, y, "mae", size=10)
    assert pool.weights.sum() == 10
    assert pool.indices.max() < 10


def test_errors():
    rng = np.random.default_rng(3)
    preds, y = _binary(rng, m=4, n=20)
    with pytest.raises(ValueError, match="builder"):
        build_pool(preds, y, "error", builder="stacking")
    with pytest.raises(ValueError, match="at least 1"):
        build_pool(preds, y, "error", size=0)
    with pytest.raises(ValueError, match="does not match"):
        build_pool(preds, y, "mse", builder="agnostic_bayes")
    with pytest.raises(ValueError, match="does not match"):
        build_pool(preds, y, "mse")
    with pytest.raises(ValueError):
        build_pool(preds, y[:10], "error")


def test_nbest_builds_the_pool_among_the_best_models_and_maps_indices_back():
    rng = np.random.default_rng(5)
    preds, y = _binary(rng, m=20)
    own = per_example_loss(preds, y, "log_loss").mean(axis=1)
    best = np.argsort(own, kind="stable")[:4]
    np.testing.assert_array_equal(best_models(preds, y, "log_loss", 4), best)
    pool = build_pool(preds, y, "log_loss", size=25, seed=2, nbest=4)
    inner = build_pool(preds[np.sort(best)], y, "log_loss", size=25, seed=2)
    np.testing.assert_array_equal(pool.indices, np.sort(best)[inner.indices])
    np.testing.assert_array_equal(pool.weights, inner.weights)
    unrestricted = build_pool(preds, y, "log_loss")
    np.testing.assert_array_equal(build_pool(preds, y, "log_loss", nbest=20).indices, unrestricted.indices)
    with pytest.raises(ValueError, match="nbest"):
        build_pool(preds, y, "log_loss", nbest=0)


def test_best_models_ties_and_non_finite_losses():
    y = np.zeros(3)
    preds = np.array([[1.0] * 3, [0.5] * 3, [1.0] * 3, [0.5] * 3, [0.0] * 3])
    np.testing.assert_array_equal(best_models(preds, y, "mse", 3), [4, 1, 3])
    nan_last = best_models(preds, y, lambda t, p: np.nan if p[0] == 0.0 else float(np.mean(p)), 5)
    assert nan_last[-1] == 4 and nan_last[:2].tolist() == [1, 3]
