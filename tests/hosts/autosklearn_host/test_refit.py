"""The final members refitted on every row within auto-sklearn's time budget (RefitReserve)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from optdiv.integrations.autosklearn.refit import (AFTER_SEARCH_SECONDS, REFIT_MARGIN, RESERVE_CAP, RefitReserve,
                                                   holdout_train_size)

FAST_CLASSIFIERS = ["random_forest", "extra_trees", "lda", "k_nearest_neighbors", "liblinear_svc"]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _result(num_run, cost, seconds, status="SUCCESS"):
    return SimpleNamespace(status=SimpleNamespace(name=status), cost=cost, time=seconds,
                           additional_info={"num_run": num_run})


def test_holdout_train_size_only_for_holdouts():
    assert holdout_train_size("holdout", None) == pytest.approx(0.67)
    assert holdout_train_size("holdout-iterative-fit", {"train_size": 0.6}) == pytest.approx(0.6)
    assert holdout_train_size("cv", {"folds": 5}) is None  # fold models already saw every row
    assert holdout_train_size(object(), None) is None  # a user's splitter: its rows are unknown
    assert holdout_train_size("holdout", {"train_size": 1.0}) is None


def test_reserve_keeps_the_best_runs_refits_and_stops_the_search():
    clock = Clock()
    reserve = RefitReserve(budget=100, train_size=0.5, clock=clock)
    reserve.start()
    reserve(None, None, _result(2, 0.30, 4.0), 90)
    reserve(None, None, _result(3, 0.10, 2.0), 90)
    reserve(None, None, _result(4, 0.20, 1.0), 90)
    reserve(None, None, _result(5, 0.90, 8.0), 90)  # the worst run: not among the likely members
    reserve(None, None, _result(6, 0.05, 50.0, status="CRASHED"), 90)  # no predictions, never a member
    assert set(reserve.runs) == {2, 3, 4, 5}
    assert reserve.predicted(3) == pytest.approx(2.0 * 2 * REFIT_MARGIN)
    assert reserve.predicted(6) is None
    expected = (2.0 + 1.0 + 4.0) * 2 * REFIT_MARGIN  # runs 3, 4, 2: the three lowest costs
    assert reserve.reserve_seconds() == pytest.approx(expected)
    clock.now = 100 - expected - AFTER_SEARCH_SECONDS - 1
    assert reserve(None, None, _result(7, 0.5, 0.1), 10) is None and reserve.stopped_search is None
    clock.now += 2
    assert reserve(None, None, _result(8, 0.5, 0.1), 10) is False
    assert reserve.stopped_search == pytest.approx(clock.now, abs=0.1)

    reserve(None, None, _result(9, 0.01, 500.0), 10)
    assert reserve.reserve_seconds() == pytest.approx(RESERVE_CAP * 100)  # never more than the cap


def test_the_users_trials_callback_is_called_and_can_stop_the_search():
    seen = []

    def users(smbo, run_info, result, time_left):
        seen.append(result.additional_info["num_run"])
        return False if len(seen) == 2 else None

    reserve = RefitReserve(budget=1000, train_size=0.8, chained=users, clock=Clock())
    reserve.start()
    assert reserve(None, None, _result(2, 0.1, 1.0), 900) is None
    assert reserve(None, None, _result(3, 0.1, 1.0), 900) is False
    assert seen == [2, 3] and reserve.stopped_search is None


class RowCounter:
    """A member that remembers how many rows it was fitted on; ``fail`` makes its fit raise."""

    def __init__(self, rows=0, fail=False):
        self.rows, self.fail = rows, fail

    def fit(self, X, y):
        if self.fail:
            raise ValueError("cannot fit")
        self.rows = len(y)
        return self


def _fitted(members, models):
    ensemble = SimpleNamespace(get_identifiers_with_weights=lambda: members)
    inner = SimpleNamespace(ensemble_=ensemble, models_=models, _logger=logging.getLogger("test"),
                            InputValidator=SimpleNamespace(transform=lambda X, y: (X, y)))
    return SimpleNamespace(automl_=inner)


def test_refit_goes_heaviest_first_within_the_time_left_and_keeps_failed_members():
    clock = Clock()
    reserve = RefitReserve(budget=100, train_size=0.5, clock=clock)
    reserve.start()
    for num_run, seconds in ((2, 1.0), (3, 2.0), (4, 100.0), (5, 1.0)):
        reserve.record(num_run, 0.1, seconds)
    ids = {n: (1, n, 0.0) for n in (2, 3, 4, 5, 6)}
    models = {ids[n]: RowCounter(rows=50, fail=(n == 5)) for n in ids}
    originals = dict(models)
    members = [(ids[2], 0.2), (ids[3], 0.4), (ids[4], 0.3), (ids[5], 0.05), (ids[6], 0.05)]
    clock.now = 50.0
    X, y = np.zeros((100, 2)), np.zeros(100)
    refits = reserve.refit(_fitted(members, models), X, y)

    assert [r["num_run"] for r in refits] == [3, 4, 2, 5, 6]  # heaviest first
    by_run = {r["num_run"]: r for r in refits}
    assert by_run[3]["refitted"] and by_run[2]["refitted"]
    assert models[ids[3]].rows == 100 and models[ids[2]].rows == 100
    assert models[ids[3]] is not originals[ids[3]] and originals[ids[3]].rows == 50  # refitted on a copy
    assert not by_run[4]["refitted"] and by_run[4]["seconds"] is None  # 250 s predicted, 50 s left
    assert models[ids[4]] is originals[ids[4]]
    assert not by_run[5]["refitted"] and "cannot fit" in by_run[5]["error"]
    assert models[ids[5]] is originals[ids[5]]  # a failed refit keeps the member as it was
    assert not by_run[6]["refitted"] and by_run[6]["predicted"] is None  # no recorded run: not guessed
    summary = reserve.summary()
    assert (summary["members"], summary["refitted"], summary["failed"]) == (5, 2, 1)
    assert summary["refitted_weight"] == pytest.approx(0.6)


def test_bad_reserve_arguments():
    with pytest.raises(ValueError, match="budget"):
        RefitReserve(budget=0, train_size=0.5)
    with pytest.raises(ValueError, match="train_size"):
        RefitReserve(budget=10, train_size=1.0)


def test_the_switch_builds_the_reserve_only_where_it_refits(tmp_path):
    from optdiv.integrations.autosklearn import OptDivAutoSklearnClassifier

    def built(name, **kwargs):
        estimator = OptDivAutoSklearnClassifier(time_left_for_this_task=30, tmp_folder=str(tmp_path / name),
                                                **kwargs)
        automl = estimator.build_automl()
        return estimator, automl

    estimator, automl = built("default")
    assert isinstance(estimator.optdiv_refit_, RefitReserve) and estimator.optdiv_ is None
    assert automl._get_trials_callback.f is estimator.optdiv_refit_  # through auto-sklearn's own hook
    assert estimator.get_trials_callback is None  # the user's parameter is left as it was
    assert estimator.optdiv_refit_.growth == pytest.approx(1 / 0.67)
    assert built("off", optdiv=False)[0].optdiv_refit_ is None
    assert built("no_refit", optdiv_refit=False)[0].optdiv_refit_ is None
    assert built("cv", resampling_strategy="cv")[0].optdiv_refit_ is None
    assert built("no_ensemble", ensemble_class=None)[0].optdiv_refit_ is None
    with pytest.raises(ValueError, match="optdiv_refit must be"):
        built("flag", optdiv_refit="yes")
    with pytest.raises(ValueError, match="optdiv_kwargs configure the re-ranking"):
        built("kwargs", optdiv_kwargs={"ensemble_size": 5})

    def users(smbo, run_info, result, time_left):
        return None

    estimator, _ = built("chained", get_trials_callback=users)
    assert estimator.optdiv_refit_.chained is users and estimator.get_trials_callback is users


@pytest.mark.timeout(400)
def test_default_fit_refits_its_final_members_on_every_row(tmp_path):
    """The default switch: auto-sklearn's own search, optdiv's ensemble, the members refitted on all given rows."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from optdiv.integrations.autosklearn import OptDivAutoSklearnClassifier

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    automl = OptDivAutoSklearnClassifier(
        initial_configurations_via_metalearning=3, per_run_time_limit=10, memory_limit=4096, n_jobs=1, seed=1,
        include={"classifier": FAST_CLASSIFIERS, "feature_preprocessor": ["no_preprocessing"]},
        time_left_for_this_task=45, tmp_folder=str(tmp_path / "autosklearn_tmp"),
        delete_tmp_folder_after_terminate=False)  # the holdout fits are read back below
    automl.fit(X_train, y_train, dataset_name="breast_cancer_refit")

    inner = automl.automl_
    assert automl.optdiv_ is None and type(inner.ensemble_).__name__ == "OptDivEnsemble"
    refits = automl.optdiv_refit_.refits
    weights = [r["weight"] for r in refits]
    assert refits and weights == sorted(weights, reverse=True)
    refitted = [r for r in refits if r["refitted"]]
    assert refitted, refits
    saved = inner._backend.load_models_by_identifiers(
        [i for i, _ in inner.ensemble_.get_identifiers_with_weights()])
    X_seen = inner.InputValidator.feature_validator.transform(X_train)
    changed = 0
    for identifier, model in saved.items():
        if any(r["num_run"] == identifier[1] for r in refitted):
            assert inner.models_[identifier] is not model
            changed += not np.allclose(inner.models_[identifier].predict_proba(X_seen), model.predict_proba(X_seen))
    assert changed >= 1  # fitted on more rows than the holdout fit
    accuracy = float(np.mean(automl.predict(X_test) == y_test))
    assert accuracy > 0.85, accuracy


def test_refits_run_on_the_threads_autosklearn_was_given():
    from optdiv.integrations.autosklearn.refit import refit_threads

    assert refit_threads(1) == 1 and refit_threads(None) == 1  # auto-sklearn's default: one core
    assert refit_threads(4) == 4
    assert refit_threads(-1) is None  # every core


def test_a_search_on_a_row_sample_predicts_the_refit_on_every_row():
    """auto-sklearn's dataset compression may search on fewer rows than fit was given: the refit's prediction grows
    by the rows it really adds."""
    clock = Clock()
    reserve = RefitReserve(budget=100, train_size=0.5, clock=clock)
    reserve.start()
    reserve.record(2, 0.1, 1.0)
    ids = {2: (1, 2, 0.0)}
    automl = _fitted([(ids[2], 1.0)], {ids[2]: RowCounter()})
    datamanager = SimpleNamespace(data={"Y_train": np.zeros(50)})  # 50 of the 100 rows searched on
    automl.automl_._backend = SimpleNamespace(load_datamanager=lambda: datamanager)
    reserve.refit(automl, np.zeros((100, 2)), np.zeros(100))
    assert reserve.growth == pytest.approx(100 / (50 * 0.5))
    assert reserve.refits[0]["predicted"] == pytest.approx(1.0 * 4 * REFIT_MARGIN)
