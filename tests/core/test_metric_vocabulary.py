"""The metric vocabulary: the one reading of metric names for the engine, the selector and the host adapters."""

import math

import numpy as np
import pytest

from optdiv.core import metric_vocabulary as mv
from optdiv.core.diversity import CLASSIFICATION_KINDS, REGRESSION_KINDS, kind_for_metric
from optdiv.core.metrics import per_example_loss
from optdiv.core.selector import pool_loss


def test_every_entry_is_computable_and_consistent():
    p, y = np.array([[0.7, 0.3], [0.2, 0.8]]), np.array([0, 0])
    seen = set()
    for loss in mv.VOCABULARY:
        names = (loss.name,) + loss.aliases + loss.host_names
        assert not seen & set(names), f"{loss.name}: a name belongs to two losses"
        seen.update(names)
        assert all(n == n.lower() for n in names)
        kinds = CLASSIFICATION_KINDS if loss.task == "classification" else REGRESSION_KINDS
        assert loss.diversity in kinds and math.isfinite(loss.worst)
        preds = p if loss.task == "classification" else np.array([0.5, 1.0])
        assert per_example_loss(preds, y, loss.name).shape == (2,)
    assert mv.LOSSES == ("error", "log_loss", "brier", "mse", "mae")


@pytest.mark.parametrize("name,task,loss", [
    ("error", "classification", "error"), ("accuracy", "classification", "error"), ("acc", "classification", "error"),
    ("log_loss", "classification", "log_loss"), ("logloss", "classification", "log_loss"),
    ("cross_entropy", "classification", "log_loss"), ("brier", "classification", "brier"),
    ("mse", "regression", "mse"), ("mae", "regression", "mae"), ("rmse", "regression", "mse"),
    ("r2", "regression", "mse"), ("mean_absolute_error", "regression", "mae"), ("Accuracy", "classification", "error"),
])
def test_engine_names(name, task, loss):
    assert mv.resolve(name, task).name == loss
    assert mv.resolve_host(name, task).name == loss


def test_defaults():
    assert mv.resolve(None, "classification").name == "error" and mv.resolve(None, "regression").name == "mse"
    assert mv.resolve_host(None, "classification").name == "error"
    assert mv.resolve_host(None, "regression").name == "mse"


def test_host_metric_names():
    # auto-sklearn 0.15's names (the adapter's table before the vocabulary, plus brier)
    autosklearn = {"accuracy": "error", "log_loss": "log_loss", "r2": "mse", "mean_squared_error": "mse",
                   "root_mean_squared_error": "mse", "mean_squared_log_error": "mse",
                   "mean_absolute_error": "mae", "median_absolute_error": "mae"}
    for name, loss in autosklearn.items():
        assert mv.resolve_host(name, mv.task_of(name)).name == loss
    # AutoGluon's Scorer names
    for name in ("root_mean_squared_error", "pearsonr", "mean_absolute_percentage_error", "pinball_loss"):
        assert mv.resolve_host(name, "regression").name == "mse"
    assert mv.resolve_host("median_absolute_error", "regression").name == "mae"
    assert mv.resolve_host("nll", "classification").name == "log_loss"
    assert mv.resolve_host("brier_score_loss", "classification").name == "brier"


def test_black_box_fallback():
    for name in ("balanced_accuracy", "f1_macro", "roc_auc", "roc_auc_ovr_weighted", "my_custom_scorer"):
        assert mv.resolve_host(name, "classification").name == "error"
        assert mv.diversity_kind(name) == "zero_one"
    assert mv.resolve_host("my_custom_scorer", "regression").name == "mse"
    assert mv.task_of("balanced_accuracy") == "classification" and mv.task_of("my_custom_scorer") is None
    with pytest.raises(ValueError, match="does not fit a regression task"):
        mv.resolve_host("roc_auc", "regression")  # a known classification metric is not a fallback case


def test_errors_list_the_choices():
    with pytest.raises(ValueError, match=r"unknown classification metric 'auc'; choose one of error, log_loss, brier"):
        mv.resolve("auc", "classification")
    with pytest.raises(ValueError, match=r"metric 'error' does not fit a regression task .*choose one of mse, mae"):
        mv.resolve("error", "regression")
    with pytest.raises(ValueError, match=r"cannot compute the regression metric 'median_absolute_error'.*mae"):
        mv.resolve("median_absolute_error", "regression")
    with pytest.raises(ValueError, match="cannot compute the classification metric 'balanced_accuracy'"):
        mv.resolve("balanced_accuracy", "classification")  # the engine computes its own metric, never a stand-in
    with pytest.raises(ValueError, match="does not fit a classification task"):
        mv.resolve_host("mse", "classification")
    with pytest.raises(ValueError, match="task must be one of"):
        mv.resolve("error", "ranking")
    with pytest.raises(TypeError, match="must be a string"):
        mv.resolve_host(3, "classification")


def test_diversity_kinds_and_pool_losses():
    # the selector's and diversity module's tables before the vocabulary, unchanged
    kinds = {"mse": "mse", "rmse": "mse", "mae": "mae", "brier": "brier", "log_loss": "ce", "ce": "ce",
             "error": "zero_one", "roc_auc": "zero_one"}
    for name, kind in kinds.items():
        assert kind_for_metric(name) == kind == mv.diversity_kind(name)
    assert mv.diversity_kind("error", paper=True) == "zero_one_paper"
    assert mv.diversity_kind("f1", paper=True) == "zero_one_paper"
    assert mv.diversity_kind("mse", paper=True) == "mse"
    assert mv.diversity_kind("median_absolute_error") == "mae"
    pools = {("error", True): "error", ("log_loss", True): "log_loss", ("ce", True): "log_loss",
             ("brier", True): "brier", ("f1", True): "error", ("mse", False): "mse", ("rmse", False): "mse",
             ("mae", False): "mae"}
    for (name, classification), loss in pools.items():
        assert pool_loss(name, classification) == loss


def test_worst_losses_and_auto_selection():
    assert mv.worst_loss("accuracy") == 1.0 and mv.worst_loss("brier") == 2.0
    assert mv.worst_loss("logloss") == pytest.approx(-math.log(1e-15))
    assert mv.worst_loss("mse") == mv.worst_loss("mae") == 1e30
    assert dict(mv.WORST_LOSS) == {loss.name: loss.worst for loss in mv.VOCABULARY}
    with pytest.raises(ValueError, match="unknown loss 'auc'"):
        mv.worst_loss("auc")
    assert mv.auto_selection("error") == "log_loss"
    assert [mv.auto_selection(name) for name in ("log_loss", "brier", "mse", "mae")] == [None] * 4
