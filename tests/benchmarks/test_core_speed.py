"""Speed of the core at the issue's reference size: 300 models x 5,000 rows x 2 classes.

Targets: pairwise_diversity <= 0.1 s for mse/mae/brier, <= 1 s for ce/divbo;
ensemble_selection(size=25) <= 0.3 s. Figures come from
``pytest tests/benchmarks --benchmark-enable``; without that flag each case runs once as a test.
"""

import numpy as np
import pytest

from optdiv.core.diversity import pairwise_diversity
from optdiv.core.ensemble import ensemble_selection

M, N = 300, 5000


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(0)
    p1 = rng.random((M, N)).astype(np.float32)
    return np.stack([1 - p1, p1], axis=-1), rng.integers(0, 2, N)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(1)
    return rng.normal(size=(M, N)).astype(np.float32), rng.normal(size=N)


@pytest.mark.parametrize("kind", ["brier", "ce", "divbo", "zero_one"])
def test_pairwise_classification(benchmark, classification, kind):
    preds, y = classification
    out = benchmark(pairwise_diversity, preds, y, kind)
    assert out.shape == (M, M) and np.all(np.isfinite(out))


@pytest.mark.parametrize("kind", ["mse", "mae", "divbo"])
def test_pairwise_regression(benchmark, regression, kind):
    preds, y = regression
    out = benchmark(pairwise_diversity, preds, y, kind)
    assert out.shape == (M, M) and np.all(np.isfinite(out))


@pytest.mark.parametrize("loss", ["error", "log_loss", "brier"])
def test_ensemble_selection_classification(benchmark, classification, loss):
    preds, y = classification
    res = benchmark(ensemble_selection, preds, y, loss, 25)
    assert res.weights.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("loss", ["mse", "mae"])
def test_ensemble_selection_regression(benchmark, regression, loss):
    preds, y = regression
    res = benchmark(ensemble_selection, preds, y, loss, 25)
    assert res.weights.sum() == pytest.approx(1.0)
