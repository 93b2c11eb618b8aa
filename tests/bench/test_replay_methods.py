"""Every method on a tiny replay library: finishes, keeps to the budget, deterministic by seed."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.bench.replay import replay_search
from optdiv.strategies.methods import METHODS

FAST = {"n_trees": 10}
BUDGET = 24


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_finishes_within_budget_and_repeats_by_seed(cls_library, method):
    first = replay_search(cls_library, method, "error", seed=3, budget=BUDGET, optimizer_options=_options(method))
    again = replay_search(cls_library, method, "error", seed=3, budget=BUDGET, optimizer_options=_options(method))
    indices = first.info["library_indices"]
    assert len(first.history) == BUDGET
    assert len(set(indices)) == BUDGET  # no member evaluated twice
    assert indices == again.info["library_indices"]
    np.testing.assert_allclose(first.weights, again.weights)
    assert first.test_loss == pytest.approx(again.test_loss)
    assert all(first.history[i].status == "ok" for i in first.member_indices)
    assert first.weights.sum() == pytest.approx(1.0)
    assert 0.0 <= first.test_loss <= 1.0


def _options(method):
    return {} if method in ("nes",) else FAST


@pytest.mark.parametrize("method", ["bo-es", "rb-es", "optdivbo", "eo"])
def test_seeds_change_the_search(cls_library, method):
    a = replay_search(cls_library, method, "error", seed=0, budget=BUDGET, optimizer_options=FAST)
    b = replay_search(cls_library, method, "error", seed=1, budget=BUDGET, optimizer_options=FAST)
    assert a.info["library_indices"] != b.info["library_indices"]


@pytest.mark.parametrize("metric", ["mse", "mae"])
@pytest.mark.parametrize("method", ["rs-es", "bo-es", "divbo-b0.01", "optdivbo", "divbo-stacking", "eo"])
def test_regression_methods_under_both_metrics(reg_library, method, metric):
    result = replay_search(reg_library, method, metric, seed=0, budget=BUDGET, optimizer_options=FAST)
    assert len(result.history) == BUDGET
    assert np.isfinite(result.test_loss) and result.test_loss >= 0


def test_budget_beyond_the_library_is_refused(cls_library):
    with pytest.raises(ValueError, match="exceeds"):
        replay_search(cls_library, "rs", "error", seed=0, budget=len(cls_library) + 1)


def test_ensemble_finals_differ_only_in_the_final_model(cls_library):
    """bo, bo-es and bo-es100 share the search; their finals differ as named."""
    runs = {m: replay_search(cls_library, m, "error", seed=2, budget=BUDGET, optimizer_options=FAST)
            for m in ("bo", "bo-es", "bo-es100")}
    assert runs["bo"].info["library_indices"] == runs["bo-es"].info["library_indices"]
    assert len(runs["bo"].member_indices) == 1
    assert len(runs["bo-es"].member_indices) >= 1
    assert runs["bo-es"].val_loss <= runs["bo"].val_loss + 1e-12  # ES starts from the best single model
