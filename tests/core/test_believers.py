"""Believed outcomes of running configurations: the mean of the nearest finished ones' predictions, and a
forest's loss (Kriging believer)."""

import numpy as np
import pytest

from optdiv.core.believers import BELIEVER_NEIGHBOURS, believed_losses, believed_predictions


def test_mean_of_the_three_nearest_by_l1_distance():
    finished_x = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.3], [1.0, 1.0], [0.9, 1.0]])
    preds = np.arange(5 * 4 * 2, dtype=np.float32).reshape(5, 4, 2)
    running_x = np.array([[0.05, 0.05], [1.0, 0.9]])
    out = believed_predictions(finished_x, preds, running_x)
    assert BELIEVER_NEIGHBOURS == 3 and len(out) == 2
    np.testing.assert_allclose(out[0], preds[[0, 1, 2]].mean(axis=0))
    np.testing.assert_allclose(out[1], preds[[3, 4, 2]].mean(axis=0))  # [0, .3] is 1.6 away, [.1, 0] 1.8
    assert all(o.dtype == np.float32 and o.shape == (4, 2) for o in out)


def test_ties_take_the_earlier_finished_and_fewer_than_k_use_all():
    finished_x = np.array([[0.0], [1.0], [1.0], [1.0]])
    preds = np.array([[0.0], [1.0], [2.0], [3.0]])
    np.testing.assert_allclose(believed_predictions(finished_x, preds, [[1.0]], neighbours=2)[0], [1.5])
    np.testing.assert_allclose(believed_predictions(finished_x[:2], preds[:2], [[0.0]])[0], [0.5])


def test_errors():
    with pytest.raises(ValueError, match="equal width"):
        believed_predictions(np.zeros((2, 2)), np.zeros((2, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="at least one finished"):
        believed_predictions(np.zeros((0, 2)), np.zeros((0, 3)), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="neighbours"):
        believed_predictions(np.zeros((2, 2)), np.zeros((2, 3)), np.zeros((1, 2)), neighbours=0)


def test_believed_losses_fall_back_below_two_finished():
    np.testing.assert_array_equal(believed_losses(np.zeros((1, 2)), [0.3], np.zeros((3, 2)), 0.3, seed=0),
                                  [0.3, 0.3, 0.3])
    assert np.isnan(believed_losses(np.zeros((0, 2)), [], np.zeros((1, 2)), float("nan"), seed=0)).all()


def test_believed_losses_follow_the_forest_and_are_seeded():
    # two clusters: losses 0.1 near x = 0 and 0.9 near x = 1; a constant target gives its constant
    finished_x = np.array([[0.0], [0.05], [0.1], [0.9], [0.95], [1.0]])
    losses = np.array([0.1, 0.1, 0.1, 0.9, 0.9, 0.9])
    running_x = np.array([[0.02], [0.98]])
    low, high = believed_losses(finished_x, losses, running_x, fallback=0.5, seed=7)
    assert low < 0.5 < high
    np.testing.assert_array_equal(believed_losses(finished_x, losses, running_x, 0.5, seed=7), [low, high])
    np.testing.assert_allclose(believed_losses(finished_x, np.full(6, 0.4), running_x, 0.5, seed=1), [0.4, 0.4])
