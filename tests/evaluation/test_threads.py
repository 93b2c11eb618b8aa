"""The run's cores reach each evaluation's model as threads."""

import pickle

import numpy as np
import pytest
from sklearn.ensemble import BaggingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC

from optdiv.config import RunConfig
from optdiv.data import Splits
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.threads import (THREADED_MIN_ROWS, ThreadedBuild, available_cores, resolve_n_jobs, set_model_threads,
                                       with_threads)
from optdiv.final.fit import fit_pipeline


def forest(config, seed):
    return RandomForestClassifier(n_estimators=int(config.get("trees", 5)), n_jobs=1, random_state=seed)


class _Space:
    build = staticmethod(forest)


def test_n_jobs_follows_scikit_learn_s_convention(monkeypatch):
    monkeypatch.setattr("optdiv.evaluation.threads.available_cores", lambda: 8)
    assert resolve_n_jobs(-1) == 8
    assert resolve_n_jobs(-2) == 7
    assert resolve_n_jobs(-20) == 1  # never fewer than one core
    assert resolve_n_jobs(3) == 3
    assert resolve_n_jobs(64) == 8  # never more than the process may run on
    assert resolve_n_jobs(None) == 1
    with pytest.raises(ValueError, match="must not be 0"):
        resolve_n_jobs(0)
    with pytest.raises(ValueError, match="whole number"):
        resolve_n_jobs("all")
    assert available_cores.__module__ == "optdiv.evaluation.threads"


def test_thread_options_are_set_where_they_mean_threads_nested_estimators_included():
    bag = BaggingClassifier(RandomForestClassifier(n_jobs=1), n_jobs=1)
    set_model_threads(bag, 4)
    params = bag.get_params(deep=False)
    inner = params["estimator"] if "estimator" in params else params["base_estimator"]  # its name before sklearn 1.2
    assert inner.n_jobs == 4  # a forest's jobs are threads
    assert bag.n_jobs == 1  # bagging's are processes, which outlive the fit
    assert set_model_threads(LogisticRegression(n_jobs=None), 2).n_jobs is None  # one-vs-rest processes too
    svc = set_model_threads(SVC(), 4)  # no thread option: unchanged, no error
    assert "n_jobs" not in svc.get_params()
    lightgbm = pytest.importorskip("lightgbm")
    assert set_model_threads(lightgbm.LGBMClassifier(n_jobs=1), 3).n_jobs == 3


def test_a_threaded_build_pickles_and_unwraps_to_one_thread():
    threaded = with_threads(forest, 3)
    assert isinstance(threaded, ThreadedBuild) and threaded({}, 0).n_jobs == 3
    again = pickle.loads(pickle.dumps(threaded))
    assert again({"trees": 2}, 1).n_jobs == 3 and again({"trees": 2}, 1).n_estimators == 2
    assert again == threaded and hash(again) == hash(threaded) and again != ThreadedBuild(forest, 2)
    assert with_threads(threaded, 1) is forest  # one thread: the plain build
    assert with_threads(threaded, 5).build is forest  # never wrapped twice
    assert with_threads(forest, None) is forest


def _splits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    import pandas as pd
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    return Splits(frame.iloc[:50], y[:50], frame.iloc[50:], y[50:], None, None)


def test_the_evaluator_s_threads_reach_the_model_it_fits():
    splits = _splits()
    with Evaluator(forest, splits, "classification", "error", threads=2, in_process=True) as ev:
        assert ev.build({}, 0).n_jobs == 2
        assert Evaluator(splits=splits, **ev.settings()).build({}, 0).n_jobs == 2  # as a Dask worker rebuilds it
        assert ev.evaluate({"trees": 3}, 0).status == "ok"
    assert Evaluator(forest, splits, "classification", "error").build({}, 0).n_jobs == 1  # one thread by default


def test_a_member_refitted_for_the_final_model_gets_the_run_s_threads():
    splits = _splits()
    pipe, error = fit_pipeline(_Space, {"trees": 3}, splits.X_train, splits.y_train, 0, "classification", threads=2)
    assert error is None and pipe.steps[-1][1].n_jobs == 2


def test_the_product_uses_every_core_one_evaluation_per_core_and_a_dask_cluster_shares_them(monkeypatch):
    monkeypatch.setattr("optdiv.evaluation.threads.available_cores", lambda: 8)
    assert RunConfig().evaluation_threads() == 1 and RunConfig().parallel_evaluations() == 1  # the papers': one core
    timed = RunConfig.product(time_budget=60)
    assert timed.n_jobs == -1 and timed.parallel_evaluations() == 8 and timed.evaluation_threads() == 1
    untimed = RunConfig.product()  # a number of evaluations: one at a time, so a seeded run repeats exactly
    assert untimed.parallel_evaluations() == 1 and untimed.evaluation_threads() == 8
    assert timed.replace(parallel=2).evaluation_threads(rows=THREADED_MIN_ROWS) == 4
    assert untimed.evaluation_threads(rows=THREADED_MIN_ROWS - 1) == 1  # threads cost more than they save
    assert timed.replace(n_jobs=3).parallel_evaluations() == 3
    dask = timed.replace(workers=4)  # Dask's workers decide: parallel is not used
    assert dask.parallel_evaluations() == 1 and dask.evaluations_at_once() == 4 and dask.evaluation_threads() == 2
    assert timed.replace(workers=16).evaluation_threads() == 1
    assert timed.replace(scheduler="tcp://x:8786").evaluation_threads() == 1
    assert timed.refit_threads() == 8  # the refits come after the search: every core
    assert timed.refit_threads(rows=THREADED_MIN_ROWS - 1) == 1


@pytest.mark.parametrize("bad", [0, -1, "all", 1.5, True])
def test_parallel_takes_a_positive_number_or_auto(bad):
    with pytest.raises(ValueError, match="parallel"):
        RunConfig.product(parallel=bad)


def test_parallel_and_dask_workers_are_one_or_the_other():
    with pytest.raises(ValueError, match="workers or scheduler"):
        RunConfig.product(parallel=2, workers=2)
    assert RunConfig.product(parallel="auto", workers=2).parallel_evaluations() == 1


def test_the_peak_memory_of_the_driver_and_of_its_largest_worker_is_reported():
    from optdiv.evaluation import memory

    splits = _splits()
    with Evaluator(forest, splits, "classification", "error") as ev:
        assert ev.evaluate({"trees": 3}, 0).status == "ok"
    peaks = memory.peak_memory_mb()
    if peaks is None or memory.own_peak_mb() is None:
        pytest.skip("this OS does not report peak memory")
    assert peaks["driver"] > 10 and 10 < peaks["largest_worker"] < 4000  # a worker's own peak, not its parent's
    memory.note_worker_peak(1e9)
    assert memory.peak_memory_mb()["largest_worker"] == 1e9
    memory.note_worker_peak(None)  # a worker that could not say changes nothing
    assert memory.peak_memory_mb()["largest_worker"] == 1e9
    memory._LARGEST_WORKER[0] = peaks["largest_worker"]
