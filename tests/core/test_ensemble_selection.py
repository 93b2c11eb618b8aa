"""Caruana ensemble selection against a naive reference, and its contract."""

import numpy as np
import pytest

from optdiv.core.ensemble import TIE_TOLERANCE, bagged_ensemble_selection, ensemble_predict, ensemble_selection
from optdiv.core.metrics import mean_loss


def naive_selection(preds, y, loss, size, seed):
    """Build every candidate ensemble explicitly and score it with the metrics module."""
    rng = np.random.default_rng(seed)
    chosen, path = [], []
    for _ in range(size):
        scores = np.array([mean_loss(np.mean(preds[chosen + [i]], axis=0), y, loss) for i in range(len(preds))])
        best = scores.min()
        tied = np.flatnonzero(scores <= best + TIE_TOLERANCE * max(1.0, abs(best)))
        pick = int(tied[0]) if tied.size == 1 else int(rng.choice(tied))
        chosen.append(pick)
        path.append(scores[pick])
    weights = np.bincount(chosen, minlength=len(preds)) / size
    return weights, np.array(path), np.array(chosen)


def _cls(rng, m, n, k):
    return rng.dirichlet(np.ones(k) * 0.7, size=(m, n)), rng.integers(0, k, n)


CASES = [
    ("error", 2),
    ("error", 3),
    ("log_loss", 2),
    ("log_loss", 4),
    ("brier", 2),
    ("brier", 3),
    ("mse", 0),
    ("mae", 0),
]


@pytest.mark.parametrize("loss,k", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_naive_reference(loss, k, seed):
    rng = np.random.default_rng(seed + 10 * k)
    if k:
        preds, y = _cls(rng, 15, 60, k)
    else:
        preds, y = rng.normal(size=(15, 60)), rng.normal(size=60)
    got = ensemble_selection(preds, y, loss, size=12, seed=seed)
    weights, path, picks = naive_selection(preds.astype(np.float32).astype(np.float64), y, loss, 12, seed)
    np.testing.assert_array_equal(got.picks, picks)
    np.testing.assert_allclose(got.weights, weights)
    np.testing.assert_allclose(got.loss_path, path, rtol=1e-9, atol=1e-12)


def test_callable_loss_matches_named():
    rng = np.random.default_rng(3)
    preds, y = rng.normal(size=(10, 40)), rng.normal(size=40)
    named = ensemble_selection(preds, y, "mae", size=8)
    custom = ensemble_selection(preds, y, lambda yt, yp: float(np.mean(np.abs(yt - yp))), size=8)
    np.testing.assert_array_equal(named.picks, custom.picks)


def test_weights_and_path_properties():
    rng = np.random.default_rng(4)
    preds, y = _cls(rng, 20, 100, 3)
    res = ensemble_selection(preds, y, "log_loss", size=25)
    assert res.weights.shape == (20,) and res.weights.sum() == pytest.approx(1.0)
    assert np.all(res.weights * 25 == np.round(res.weights * 25))
    # the first round picks the single best model
    assert res.picks[0] == np.argmin([mean_loss(p, y, "log_loss") for p in preds])
    ens = ensemble_predict(preds, res.weights)
    assert mean_loss(ens, y, "log_loss") == pytest.approx(res.loss_path[-1], rel=1e-5)
    assert res.loss_path[-1] <= res.loss_path[0] + 1e-12 or res.loss_path.min() < res.loss_path[0]


def test_ties_are_seeded_and_deterministic():
    rng = np.random.default_rng(5)
    base, y = _cls(rng, 1, 50, 2)
    preds = np.repeat(base, 6, axis=0)  # six identical models: every round is a six-way tie
    runs = [ensemble_selection(preds, y, "error", size=10, seed=s).picks for s in (0, 0, 1)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert len(set(runs[0].tolist())) > 1  # ties are spread, not always the lowest index
    assert not np.array_equal(runs[0], runs[2])


def test_diverse_pair_beats_best_single_model():
    y = np.array([0, 1, 0, 1, 0, 1])
    good = np.array([[0.9, 0.1]] * 6)  # right on class 0 rows only
    comp = np.array([[0.1, 0.9]] * 6)  # right on class 1 rows only
    preds = np.stack([good, good, comp])
    res = ensemble_selection(preds, y, "log_loss", size=4)
    assert res.weights[2] > 0


@pytest.mark.parametrize(
    "preds,y,loss,match",
    [
        (np.zeros((2, 3, 2)), np.zeros(3, int), "mse", "does not match"),
        (np.zeros((2, 3)), np.zeros(3), "error", "does not match"),
        (np.zeros((2, 3)), np.zeros(3), "r2", "unknown loss"),
    ],
)
def test_bad_input(preds, y, loss, match):
    with pytest.raises(ValueError, match=match):
        ensemble_selection(preds, y, loss)


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        ensemble_selection(np.zeros((2, 3)), np.zeros(3), "mse", size=0)


def test_bagged_selection_averages_bootstrap_selections():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    good = np.where(y[:, None] == np.arange(2), 0.8, 0.2)  # right on every row
    noisy = [np.where(rng.random((300, 1)) < 0.6, good, 1 - good) for _ in range(6)]  # right on about 60%
    preds = np.stack([good] + noisy)
    weights = bagged_ensemble_selection(preds, y, "log_loss", size=10, bags=8, seed=3)
    assert weights.shape == (7,) and weights.sum() == pytest.approx(1.0)
    assert weights[0] > 0.9  # the member that is best on every bootstrap sample keeps its weight
    np.testing.assert_array_equal(weights, bagged_ensemble_selection(preds, y, "log_loss", size=10, bags=8, seed=3))
    # one bag is one selection on one bootstrap sample of the rows
    rows = np.random.default_rng(3).integers(0, 300, 300)
    single = ensemble_selection(preds[:, rows], y[rows], "log_loss", size=10, seed=3).weights
    np.testing.assert_array_equal(bagged_ensemble_selection(preds, y, "log_loss", size=10, bags=1, seed=3), single)
    with pytest.raises(ValueError, match="bags"):
        bagged_ensemble_selection(preds, y, "log_loss", bags=0)
