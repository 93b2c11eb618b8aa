"""Time limits under cross-validation: per fold, and a timeout after some folds is a censored observation."""

import time

import builders
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import build, tiny_space

from optdiv.core.metrics import mean_loss
from optdiv.data import Splits, cross_validation_view, from_frame, split
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.evaluation.observation import WORST_LOSS, Observation
from optdiv.storage.files import RunStore
from optdiv.strategies.base import imputed_loss, losses_with_failures

#: Deadlines and time-outs measured on the wall clock: run alone (see the `timing` marker).
pytestmark = pytest.mark.timing

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}


@pytest.fixture(scope="module")
def cls_splits():
    frame = load_breast_cancer(as_frame=True).frame.sample(240, random_state=0)
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


def _uneven_folds(rows=90):
    """Three folds of 40, 40 and 10 rows: fold 2's training part (80 rows) is the only one above 50."""
    frame = load_breast_cancer(as_frame=True).frame.sample(rows, random_state=1)
    X, y = frame.drop(columns="target").reset_index(drop=True), frame["target"].to_numpy().astype(np.int64)
    folds = np.repeat([0, 1, 2], [40, 40, 10])
    return Splits(X, y, X, y, X.iloc[:5], y[:5], folds)


def _censored(index, partial_loss, folds_done=4, folds_total=5, config=None):
    return Observation(config or {"algorithm": "lightgbm"}, "timeout", WORST_LOSS["error"], fit_seconds=60.0,
                       error="fold 5 of 5 exceeded the time limit", index=index, algorithm="lightgbm",
                       partial_loss=partial_loss, folds_done=folds_done, folds_total=folds_total)


def _ok(index, loss):
    return Observation({"algorithm": "qda", "reg": float(index)}, "ok", loss, index=index, algorithm="qda",
                       val_pred=np.zeros((3, 2), np.float32))


def test_the_time_limit_is_per_fold_under_cv(cls_splits):
    view = cross_validation_view(cls_splits, 4, seed=0)
    slow = {"algorithm": "sleeper", "sleep": 1.0}  # each fold well inside 2.5 s, the 4 folds together (4 s) not
    with Evaluator(builders.by_name, view, "classification", "error", n_classes=2, time_limit=2.5) as ev:
        ev.start()
        assert ev.evaluate({"algorithm": "sleeper", "sleep": 0.0}, 9).ok  # the worker's first-fit imports, untimed
        began = time.perf_counter()
        obs = ev.evaluate(slow, 0)
        elapsed = time.perf_counter() - began
    assert obs.status == "ok", obs.error
    assert elapsed > 1.5 * 2.5  # the evaluation as a whole did pass one time limit (4 x 1 s of sleep)
    assert obs.val_pred.shape == (len(view.y_val), 2) and obs.partial_loss is None
    # the holdout split keeps one limit for its one fit
    with Evaluator(builders.by_name, cls_splits, "classification", "error", n_classes=2, time_limit=0.5) as ev:
        ev.start()
        holdout = ev.evaluate(slow, 1)
    assert holdout.status == "timeout" and "time limit of 0.5 s" in holdout.error and holdout.partial_loss is None


def test_a_fold_timing_out_keeps_the_finished_folds_loss():
    view = _uneven_folds()
    slow_last_fold = {"algorithm": "slow_on_large", "rows": 50, "sleep": 30}
    with Evaluator(builders.by_name, view, "classification", "error", n_classes=2, time_limit=1.5) as ev:
        ev.start()
        began = time.perf_counter()
        obs = ev.evaluate(slow_last_fold, 3)
        assert time.perf_counter() - began < 1.5 + 8  # ended at fold 2's limit, not after the 30 s sleep
    assert obs.status == "timeout" and not obs.ok and obs.val_pred is None and obs.test_pred is None
    assert obs.val_loss == WORST_LOSS["error"]  # the recorded loss stays the failure value
    assert (obs.folds_done, obs.folds_total) == (2, 3)
    assert "fold 3 of 3" in obs.error and "2 folds finished" in obs.error
    # the majority label of each finished fold's training rows, scored on that fold's rows
    rows = np.flatnonzero(view.folds < 2)
    oof = np.zeros((len(rows), 2), np.float32)
    for k, fold in enumerate((0, 1)):
        label = np.bincount(view.y_train[view.folds != fold]).argmax()
        oof[np.flatnonzero(view.folds[rows] == fold), label] = 1.0
    expected = float(mean_loss(oof, view.y_val[rows], "error"))
    assert obs.partial_loss == pytest.approx(expected)
    assert 0 < obs.partial_loss < 0.6
    # the optimisers impute it from the partial loss instead of the worst successful loss
    history = [_ok(0, 0.3), _ok(1, 0.5), obs]
    losses = losses_with_failures(history)
    assert losses[2] == pytest.approx((2 * obs.partial_loss + 1 * 0.4) / 3)  # the unfinished fold at the median
    assert losses[2] < 0.5


def test_imputation_of_timeouts_and_failures():
    history = [_ok(0, 0.1), _ok(1, 0.2), _ok(2, 0.6), _censored(3, 0.05, 4, 5), _censored(4, None, 0, 5),
               Observation({"algorithm": "svm"}, "failed", WORST_LOSS["error"], index=5, error="boom"),
               _censored(6, 0.05, 1, 5)]
    losses = losses_with_failures(history)
    np.testing.assert_allclose(losses, [0.1, 0.2, 0.6, (4 * 0.05 + 0.2) / 5, 0.2, 0.6, (0.05 + 4 * 0.2) / 5])
    # before any run succeeded: the partial loss itself, else the fallback
    assert imputed_loss(_censored(0, 0.07), None, 1.0) == pytest.approx(0.07)
    assert imputed_loss(_censored(0, None, 0), None, 1.0) == 1.0


def test_a_censored_observation_survives_the_store_and_a_resume(tmp_path, cls_splits):
    store = RunStore(tmp_path / "run")
    first = search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
                   budget=2, seed=1, optimizer_options=FAST, cv=3, store=store)
    assert all(obs.status == "ok" for obs in first.history)
    tree = {"algorithm": "tree", "depth": 12, "leaf": 1, "task": "classification"}
    censored = _censored(2, 0.04, folds_done=2, folds_total=3, config=tree)
    censored.algorithm = "tree"
    store.append(censored)
    loaded = RunStore(tmp_path / "run").load()
    again = loaded[2]
    assert (again.status, again.partial_loss, again.folds_done, again.folds_total) == ("timeout", 0.04, 2, 3)
    assert again.val_pred is None and again.config == tree
    np.testing.assert_allclose(losses_with_failures(loaded), losses_with_failures(first.history + [censored]))
    resumed = search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
                     budget=4, seed=1, optimizer_options=FAST, cv=3, store=RunStore(tmp_path / "run"))
    assert len(resumed.history) == 4 and resumed.history[2].partial_loss == 0.04
    assert 2 not in resumed.member_indices  # no predictions, so never an ensemble member
    assert resumed.test_loss is not None


def test_an_older_log_line_loads_as_not_censored(tmp_path):
    (tmp_path / "observations.jsonl").write_text(
        '{"index": 0, "status": "timeout", "val_loss": 1.0, "config": {"algorithm": "svm"}, "error": "slow"}\n')
    obs = RunStore(tmp_path).load()[0]
    assert (obs.partial_loss, obs.folds_done, obs.folds_total) == (None, 0, 0)


class TreesTimeOut(EvaluatorInterface):
    """In-process evaluator whose tree configurations all time out after 4 of 5 folds with a partial loss better
    than anything that finishes: the partial loss alone would make the search chase them forever."""

    def __init__(self, splits):
        self.splits = splits
        self.inner = Evaluator(build, splits, "classification", "error", n_classes=2, in_process=True)

    def evaluate(self, config, index):
        if config["algorithm"] == "tree":
            return _censored(index, 0.001, config=dict(config))
        return self.inner.evaluate(config, index)

    def close(self):
        pass


@pytest.mark.parametrize("method", ["bo", "optdivbo"])
def test_configurations_that_time_out_are_not_suggested_again_and_again(cls_splits, method):
    result = search(cls_splits, "classification", n_classes=2, method=method, space=tiny_space("classification"),
                    budget=25, seed=0, optimizer_options=FAST, evaluator=TreesTimeOut(cls_splits))
    after_initial = result.history[5:]
    assert sum(obs.status == "timeout" for obs in after_initial) <= 4, [obs.algorithm for obs in after_initial]
    assert all(result.history[i].status == "ok" for i in result.member_indices)
