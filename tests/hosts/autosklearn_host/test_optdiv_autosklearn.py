"""optdiv inside auto-sklearn 0.15 / SMAC 1.2: real fits through auto-sklearn's SMAC loop.

Each fit is short (30-60 s) on a few fast model families; auto-sklearn itself runs as it ships
(runs in separate processes, its run history, intensifier, meta-learning initial design, random forest
and ensemble builder).
"""

from __future__ import annotations

import numpy as np
import pytest

FAST_CLASSIFIERS = ["random_forest", "extra_trees", "lda", "k_nearest_neighbors", "liblinear_svc"]
FAST_REGRESSORS = ["extra_trees", "k_nearest_neighbors", "ard_regression", "decision_tree", "liblinear_svr"]
NO_PREPROCESSING = ["no_preprocessing"]


def _common(tmp_path, seconds):
    return dict(
        time_left_for_this_task=seconds,
        per_run_time_limit=10,
        memory_limit=4096,
        n_jobs=1,
        seed=1,
        tmp_folder=str(tmp_path / "autosklearn_tmp"),  # must not exist yet
        delete_tmp_folder_after_terminate=True,
    )


def _runs_in_order(automl):
    """(configuration dict, status name, num_run) of every run, in the order SMAC submitted them."""
    rh = automl.automl_.runhistory_
    out = []
    for key, value in rh.data.items():
        config = rh.ids_config[key.config_id].get_dictionary()
        out.append((config, value.status.name, (value.additional_info or {}).get("num_run")))
    return out


def _check_report_after_fit(report, runs):
    """What every optdiv fit must show: the maximiser ran after the initial design, ranked by diversity,
    and SMAC evaluated the configuration it put first."""
    assert report.initial_design_size is not None and report.initial_design_size >= 1
    assert report.n_calls >= 1, "SMAC never asked the optdiv maximiser"
    assert report.n_diversity_ranked >= 1, report.calls
    assert report.n_fallbacks == 0, report.last_error
    first = report.calls[0]
    assert first["finished_runs"] >= report.initial_design_size, (
        "the maximiser ran before auto-sklearn's initial design was finished", first, report.initial_design_size)
    for call in report.calls:
        if call["diversity_ranked"]:
            assert call["observations"] >= 2 and call["weight"] > 0 and call["pool_size"] >= 1
    evaluated = [config for config, _, _ in runs]
    # each suggestion SMAC asked for was run, except possibly the last one (the time may end first)
    for call in report.calls[:-1]:
        assert call["config"] in evaluated, "SMAC did not evaluate the optdiv maximiser's first choice"
    # every successful run SMAC had finished by the last call was found in auto-sklearn's run folders
    last = report.calls[-1]
    successes = sum(1 for _, status, _ in runs[: last["finished_runs"]] if status == "SUCCESS")
    assert last["observations"] == successes >= 2


def _check_members(members, runs):
    assert members, "auto-sklearn built no ensemble"
    assert abs(sum(m["weight"] for m in members) - 1.0) < 1e-6
    ok = {num_run for _, status, num_run in runs if status == "SUCCESS"}
    assert {m["model_id"] for m in members} <= ok


# --------------------------------------------------------------------------- #
# No fit: the callback builds SMAC as auto-sklearn does, apart from the maximiser
# --------------------------------------------------------------------------- #


def _smac_args(tmp_path):
    from autosklearn.constants import BINARY_CLASSIFICATION
    from ConfigSpace import ConfigurationSpace
    from ConfigSpace.hyperparameters import CategoricalHyperparameter, UniformFloatHyperparameter
    from smac.tae.serial_runner import SerialRunner

    class FakeDataManager:
        info = {"task": BINARY_CLASSIFICATION}

    class FakeBackend:
        def load_datamanager(self):
            return FakeDataManager()

    class NoRun(SerialRunner):
        def __init__(self, backend=None, autosklearn_seed=None, metrics=None, **kwargs):
            super().__init__(**kwargs)

        def run(self, *args, **kwargs):  # never called: nothing is optimised here
            raise AssertionError("not run")

    cs = ConfigurationSpace(seed=1)
    cs.add_hyperparameters([CategoricalHyperparameter("algo", ["a", "b", "c"]),
                            UniformFloatHyperparameter("lr", 1e-3, 1.0, log=True)])
    meta = [cs.sample_configuration() for _ in range(3)]
    scenario = {"abort_on_first_run_crash": False, "save-results-instantly": True, "cs": cs,
                "cutoff_time": 10, "deterministic": "true", "instances": [['{"task_id": "x"}']],
                "memory_limit": 1024, "output-dir": str(tmp_path / "smac"), "run_obj": "quality",
                "wallclock_limit": 30, "cost_for_crash": 1.0}
    return dict(scenario_dict=scenario, seed=1, ta=NoRun,
                ta_kwargs={"ta": lambda *a: 0.0, "backend": FakeBackend(), "autosklearn_seed": 1, "metrics": []},
                metalearning_configurations=meta, n_jobs=1, dask_client=None,
                multi_objective_algorithm=None, multi_objective_kwargs={})


def test_callback_builds_smac_like_autosklearn(tmp_path):
    import copy

    from autosklearn.smbo import get_smac_object
    from smac.optimizer.ei_optimization import LocalAndSortedRandomSearch

    from optdiv.integrations.autosklearn import optdiv_smac

    args = _smac_args(tmp_path)
    stock = get_smac_object(**copy.copy(args)).solver
    callback = optdiv_smac("optdivbo")
    ours = callback(**copy.copy(args)).solver
    # default configuration + meta-learning ones, in the same order
    assert ours.initial_design.configs == stock.initial_design.configs
    assert len(ours.initial_design.configs) == 4

    for part in ("runhistory", "intensifier", "initial_design", "tae_runner"):
        assert type(getattr(ours, part)) is type(getattr(stock, part)), part
    ours_bo, stock_bo = ours.epm_chooser, stock.epm_chooser
    for part in ("model", "acquisition_func", "rh2EPM", "random_configuration_chooser"):
        assert type(getattr(ours_bo, part)) is type(getattr(stock_bo, part)), part
    ours, stock = ours_bo, stock_bo
    assert type(stock.acq_optimizer) is LocalAndSortedRandomSearch
    assert isinstance(ours.acq_optimizer, LocalAndSortedRandomSearch)
    assert type(ours.acq_optimizer) is not LocalAndSortedRandomSearch
    for attr in ("n_sls_iterations",):
        assert getattr(ours.acq_optimizer, attr) == getattr(stock.acq_optimizer, attr)
    for attr in ("max_steps", "n_steps_plateau_walk"):
        assert getattr(ours.acq_optimizer.local_search, attr) == getattr(stock.acq_optimizer.local_search, attr)
    assert callback.report.initial_design_size == 4
    assert callback.report.metric == "error"
    assert ours.acq_optimizer.selector.method == "optdivbo"


def test_bad_arguments_are_rejected():
    from optdiv.integrations.autosklearn import OptDivAutoSklearnClassifier, optdiv_smac, selector_metric

    with pytest.raises(ValueError, match="unknown optdiv method"):
        optdiv_smac("bo")
    with pytest.raises(ValueError, match="ensemble_size"):
        optdiv_smac("divbo", ensemble_size=0)
    with pytest.raises(ValueError, match="not in selector_kwargs"):
        optdiv_smac("divbo", selector_kwargs={"method": "optdivbo"})
    with pytest.raises(ValueError, match="regression metric"):
        selector_metric("mean_squared_error", classification=True)
    with pytest.raises(ValueError, match="does not fit a regression task"):
        selector_metric("accuracy", classification=False)
    assert selector_metric("balanced_accuracy", True) == "error"
    assert selector_metric("r2", False) == "mse"
    assert selector_metric("median_absolute_error", False) == "mae"
    assert selector_metric("my_scorer", True) == "error" and selector_metric("my_scorer", False) == "mse"
    assert selector_metric(None, True) == "error" and selector_metric(None, False) == "mse"
    with pytest.raises(ValueError, match="optdiv must be"):
        OptDivAutoSklearnClassifier(optdiv="xgboost", time_left_for_this_task=30).build_automl()
    with pytest.raises(ValueError, match="not both"):
        OptDivAutoSklearnClassifier(optdiv=True, get_smac_object_callback=optdiv_smac(),
                                    time_left_for_this_task=30).build_automl()


def test_switch_off_hands_autosklearn_no_callback(tmp_path):
    """optdiv=False is stock auto-sklearn: no callback reaches AutoML; on, only ours does, for that fit."""
    from sklearn.base import clone

    from optdiv.integrations.autosklearn import OptDivAutoSklearnClassifier, OptDivSMAC

    off = OptDivAutoSklearnClassifier(optdiv=False, **_common(tmp_path / "off", 30))
    assert off.build_automl()._get_smac_object_callback is None
    assert off.optdiv_ is None

    on = OptDivAutoSklearnClassifier(optdiv="divbo", optdiv_kwargs={"ensemble_size": 10},
                                     **_common(tmp_path / "on", 30))
    automl = on.build_automl()
    assert isinstance(automl._get_smac_object_callback, OptDivSMAC)
    assert automl._get_smac_object_callback is on.optdiv_
    assert on.optdiv_.method == "divbo" and on.optdiv_.ensemble_size == 10
    assert on.get_smac_object_callback is None  # the user's parameter is left as it was
    params = clone(on).get_params()
    assert params["optdiv"] == "divbo" and params["time_left_for_this_task"] == 30


# --------------------------------------------------------------------------- #
# Real fits
# --------------------------------------------------------------------------- #


@pytest.mark.timeout(400)
def test_classification_with_the_flag(tmp_path):
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from optdiv.integrations.autosklearn import ensemble_members, optdiv_smac

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    callback = optdiv_smac(method="optdivbo", strict=True)
    automl = AutoSklearnClassifier(
        get_smac_object_callback=callback,
        initial_configurations_via_metalearning=3,
        include={"classifier": FAST_CLASSIFIERS, "feature_preprocessor": NO_PREPROCESSING},
        ensemble_kwargs={"ensemble_size": 25},
        **_common(tmp_path, 60),
    )
    automl.fit(X_train, y_train, dataset_name="breast_cancer")

    report = callback.report
    runs = _runs_in_order(automl)
    assert report.metric == "error"
    assert report.initial_design_size >= 2  # auto-sklearn's default configuration + meta-learning ones
    _check_report_after_fit(report, runs)
    _check_members(ensemble_members(automl), runs)
    accuracy = float(np.mean(automl.predict(X_test) == y_test))
    assert accuracy > 0.85, accuracy


@pytest.mark.timeout(400)
def test_regression_with_the_switch(tmp_path):
    from sklearn.datasets import load_diabetes
    from sklearn.metrics import r2_score
    from sklearn.model_selection import train_test_split

    from optdiv.integrations.autosklearn import OptDivAutoSklearnRegressor, ensemble_members

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    automl = OptDivAutoSklearnRegressor(
        optdiv="divbo",
        optdiv_kwargs={"strict": True},
        initial_configurations_via_metalearning=2,
        include={"regressor": FAST_REGRESSORS, "feature_preprocessor": NO_PREPROCESSING},
        **_common(tmp_path, 45),
    )
    automl.fit(X_train, y_train, dataset_name="diabetes")

    report = automl.optdiv_.report
    runs = _runs_in_order(automl)
    assert report.method == "divbo" and report.metric == "mse"  # auto-sklearn's default r2 -> MSE diversity
    _check_report_after_fit(report, runs)
    _check_members(ensemble_members(automl), runs)
    r2 = r2_score(y_test, automl.predict(X_test))
    assert r2 > 0.2, r2


@pytest.fixture
def crashing_classifier():
    """Registers a classifier whose fit always raises, through auto-sklearn's public add_classifier, and
    removes it afterwards (runs fork from this process, so they see it)."""
    from autosklearn.pipeline.components import classification
    from autosklearn.pipeline.components.base import AutoSklearnClassificationAlgorithm
    from autosklearn.pipeline.constants import DENSE, PREDICTIONS, UNSIGNED_DATA
    from ConfigSpace.configuration_space import ConfigurationSpace
    from ConfigSpace.hyperparameters import UniformFloatHyperparameter

    class AlwaysCrashes(AutoSklearnClassificationAlgorithm):
        def __init__(self, strength, random_state=None):
            self.strength = strength

        def fit(self, X, y):
            raise RuntimeError("this classifier always crashes")

        def predict(self, X):
            raise NotImplementedError

        def predict_proba(self, X):
            raise NotImplementedError

        @staticmethod
        def get_properties(dataset_properties=None):
            return {"shortname": "crash", "name": "Always crashes", "handles_regression": False,
                    "handles_classification": True, "handles_multiclass": True, "handles_multilabel": False,
                    "handles_multioutput": False, "is_deterministic": True, "input": (DENSE, UNSIGNED_DATA),
                    "output": (PREDICTIONS,)}

        @staticmethod
        def get_hyperparameter_search_space(feat_type=None, dataset_properties=None):
            cs = ConfigurationSpace()
            cs.add_hyperparameter(UniformFloatHyperparameter("strength", 0.0, 1.0, default_value=0.5))
            return cs

    classification.add_classifier(AlwaysCrashes)
    try:
        yield "AlwaysCrashes"
    finally:
        classification.additional_components.components.pop("AlwaysCrashes", None)


@pytest.mark.timeout(400)
def test_crashing_configuration_does_not_stop_the_loop(tmp_path, crashing_classifier):
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer

    from optdiv.integrations.autosklearn import optdiv_smac

    X, y = load_breast_cancer(return_X_y=True)
    callback = optdiv_smac(method="optdivbo", strict=True)
    automl = AutoSklearnClassifier(
        get_smac_object_callback=callback,
        initial_configurations_via_metalearning=0,
        include={"classifier": [crashing_classifier, "lda", "k_nearest_neighbors"],
                 "feature_preprocessor": NO_PREPROCESSING},
        **_common(tmp_path, 45),
    )
    automl.fit(X, y, dataset_name="breast_cancer_crash")

    runs = _runs_in_order(automl)
    choice = "classifier:__choice__"
    crashed = [i for i, (config, status, _) in enumerate(runs)
               if config[choice] == crashing_classifier and status != "SUCCESS"]
    assert crashed, f"the crashing classifier was never tried: {[(c[choice], s) for c, s, _ in runs]}"
    assert all(status != "SUCCESS" for config, status, _ in runs if config[choice] == crashing_classifier)
    later = [status for _, status, _ in runs[crashed[0] + 1:]]
    assert "SUCCESS" in later, "no run succeeded after the first crash"
    report = callback.report
    # crashed runs carry no predictions and are left out
    seen_crashes = sum(1 for i in crashed if i < report.calls[-1]["finished_runs"])
    assert seen_crashes >= 1 and report.runs_skipped >= seen_crashes
    assert any(call["finished_runs"] > crashed[0] for call in report.calls), "optdiv stopped after the crash"
    assert report.n_diversity_ranked >= 1 and report.n_fallbacks == 0
    assert np.mean(automl.predict(X) == y) > 0.85
