"""Task losses on hand examples and against scikit-learn."""

import numpy as np
import pytest
from sklearn.metrics import log_loss, mean_absolute_error, mean_squared_error

from optdiv.core.metrics import mean_loss, per_example_loss

P = np.array([[0.8, 0.2], [0.4, 0.6], [0.3, 0.7]])
Y = np.array([0, 0, 1])


def test_hand_values():
    np.testing.assert_allclose(per_example_loss(P, Y, "error"), [0, 1, 0])
    np.testing.assert_allclose(per_example_loss(P, Y, "brier"), [0.08, 0.72, 0.18])
    np.testing.assert_allclose(per_example_loss(P, Y, "log_loss"), -np.log([0.8, 0.4, 0.7]))
    np.testing.assert_allclose(per_example_loss(np.array([1.0, 3.0]), np.array([2.0, 2.0]), "mse"), [1, 1])


def test_agrees_with_sklearn():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=50)
    y = rng.integers(0, 3, 50)
    assert mean_loss(p, y, "log_loss") == pytest.approx(log_loss(y, p, labels=[0, 1, 2]))
    f, t = rng.normal(size=50), rng.normal(size=50)
    assert mean_loss(f, t, "mse") == pytest.approx(mean_squared_error(t, f))
    assert mean_loss(f, t, "mae") == pytest.approx(mean_absolute_error(t, f))


def test_stack_keeps_model_axis():
    stack = np.stack([P, P[::-1]])
    assert mean_loss(stack, Y, "error").shape == (2,)
    assert mean_loss(stack, Y, "brier")[0] == pytest.approx(np.mean([0.08, 0.72, 0.18]))


def test_unknown_loss_is_named():
    with pytest.raises(ValueError, match="unknown loss 'auc'"):
        mean_loss(P, Y, "auc")
