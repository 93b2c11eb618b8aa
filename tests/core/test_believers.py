"""Believed predictions of running configurations: the mean of the nearest finished ones' predictions."""

import numpy as np
import pytest

from optdiv.core.believers import BELIEVER_NEIGHBOURS, believed_predictions


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
