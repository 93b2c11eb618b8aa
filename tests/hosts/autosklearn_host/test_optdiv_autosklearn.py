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


def _host_backend(tmp_path, task, y_val):
    """auto-sklearn's own backend in ``tmp_path``, holding a data manager of ``task`` and the validation targets,
    as auto-sklearn leaves it before the search starts."""
    from autosklearn.automl_common.common.utils.backend import create
    from autosklearn.data.xy_data_manager import XYDataManager

    backend = create(temporary_directory=str(tmp_path / "autosklearn_tmp"), output_directory=None,
                     prefix="auto-sklearn")
    y_val = np.asarray(y_val)
    backend.save_datamanager(XYDataManager(np.zeros((len(y_val), 1)), y_val, None, None, task, {0: "numerical"},
                                           "constructed"))
    backend.save_additional_data(y_val, what="targets_ensemble")
    return backend


def _smac_args(tmp_path, y_val=None, metric=None, task=None):
    from autosklearn.constants import BINARY_CLASSIFICATION
    from ConfigSpace import ConfigurationSpace
    from ConfigSpace.hyperparameters import CategoricalHyperparameter, UniformFloatHyperparameter
    from smac.tae.serial_runner import SerialRunner

    class NoRun(SerialRunner):
        def __init__(self, backend=None, autosklearn_seed=None, metrics=None, **kwargs):
            super().__init__(**kwargs)

        def run(self, *args, **kwargs):  # never called: nothing is optimised here
            raise AssertionError("not run")

    y_val = np.array([0, 1] * 10) if y_val is None else y_val
    backend = _host_backend(tmp_path, BINARY_CLASSIFICATION if task is None else task, y_val)
    cs = ConfigurationSpace(seed=1)
    cs.add_hyperparameters([CategoricalHyperparameter("algo", ["a", "b", "c"]),
                            UniformFloatHyperparameter("lr", 1e-3, 1.0, log=True)])
    meta = [cs.sample_configuration() for _ in range(3)]
    scenario = {"abort_on_first_run_crash": False, "save-results-instantly": True, "cs": cs,
                "cutoff_time": 10, "deterministic": "true", "instances": [['{"task_id": "x"}']],
                "memory_limit": 1024, "output-dir": str(tmp_path / "smac"), "run_obj": "quality",
                "wallclock_limit": 30, "cost_for_crash": 1.0}
    return dict(scenario_dict=scenario, seed=1, ta=NoRun,
                ta_kwargs={"ta": lambda *a: 0.0, "backend": backend, "autosklearn_seed": 1,
                           "metrics": [] if metric is None else [metric]},
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
    assert callback.report.metric == callback.report.pool_metric == "error"
    assert ours.acq_optimizer.selector.method == "optdivbo"
    assert ours.acq_optimizer.selector.pool_scorer is None


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
        OptDivAutoSklearnClassifier(optdiv="optdivbo", get_smac_object_callback=optdiv_smac(),
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
    ensemble = automl.automl_.ensemble_  # the switch's default final ensemble: bagged selection on MSE
    assert type(ensemble).__name__ == "OptDivEnsemble"
    assert (ensemble.selection_loss_, ensemble.bags_, ensemble.ensemble_size) == ("mse", 20, 50)
    r2 = r2_score(y_test, automl.predict(X_test))
    assert r2 > 0.2, r2


@pytest.mark.timeout(400)
def test_roc_auc_builds_the_pool_with_autosklearns_loss(tmp_path):
    """A metric optdiv cannot compute: the pool minimises auto-sklearn's own loss for it on real runs'
    predictions, the diversity is the black-box mix of the 0/1 error entry."""
    import autosklearn.metrics
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer

    from optdiv.integrations.autosklearn import optdiv_smac

    X, y = load_breast_cancer(return_X_y=True)
    callback = optdiv_smac(method="optdivbo", strict=True)
    automl = AutoSklearnClassifier(
        get_smac_object_callback=callback,
        metric=autosklearn.metrics.roc_auc,
        initial_configurations_via_metalearning=2,
        include={"classifier": FAST_CLASSIFIERS, "feature_preprocessor": NO_PREPROCESSING},
        **_common(tmp_path, 45),
    )
    automl.fit(X, y, dataset_name="breast_cancer_auc")

    report = callback.report
    assert report.metric == "error" and report.pool_metric == "roc_auc"
    _check_report_after_fit(report, _runs_in_order(automl))  # strict: every pool on roc_auc was built
    assert "pool on roc_auc" in report.summary()


@pytest.mark.timeout(400)
def test_two_workers_see_running_configurations(tmp_path):
    """n_jobs=2 (auto-sklearn's dask workers): suggestions made while the other worker runs take that run
    into account. Each run starts a fresh process here (auto-sklearn uses forkserver with several workers),
    hence the longer per-run limit."""
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer

    from optdiv.integrations.autosklearn import optdiv_smac

    X, y = load_breast_cancer(return_X_y=True)
    callback = optdiv_smac(method="optdivbo", strict=True)
    automl = AutoSklearnClassifier(
        get_smac_object_callback=callback,
        initial_configurations_via_metalearning=2,
        include={"classifier": ["lda", "k_nearest_neighbors", "liblinear_svc"],
                 "feature_preprocessor": NO_PREPROCESSING},
        **{**_common(tmp_path, 60), "n_jobs": 2, "per_run_time_limit": 30},
    )
    automl.fit(X, y, dataset_name="breast_cancer_two_workers")

    report = callback.report
    assert report.n_fallbacks == 0, report.last_error
    assert report.n_with_running >= 1, report.calls
    for call in report.calls:
        if call["running"]:
            assert call["observations"] >= 1  # believers need a finished run to borrow predictions from
            assert call["diversity_ranked"] == (call["weight"] > 0)  # finished + believers: at least 2


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


# --------------------------------------------------------------------------- #
# No fit: a constructed SMAC history, SMAC's own model-based suggestion
# --------------------------------------------------------------------------- #

INSTANCE = '{"task_id": "x"}'


def _two_families(n=120, seed=0):
    """Validation targets and the predictions of two model families on them: family "a" (low cost) shares
    one accurate decision, family "b" (higher cost) another that disagrees with it on many rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    decisions = {"a": np.where(rng.random(n) < 0.9, y, 1 - y), "b": np.where(rng.random(n) < 0.65, y, 1 - y)}

    def predictions(family):
        label = np.where(rng.random(n) < 0.03, 1 - decisions[family], decisions[family])
        p1 = np.clip(np.where(label == 1, 0.8, 0.2) + rng.uniform(-0.05, 0.05, n), 0.0, 1.0)
        return np.stack([1 - p1, p1], axis=-1)

    return y, predictions


def _smac_with_history(tmp_path, callback, lrs=(0.01, 0.02, 0.04, 0.08, 0.16, 0.32), running=(), metric=None):
    """SMAC built by ``callback`` whose run history holds finished runs of families "a" and "b" (their
    predictions written by auto-sklearn's backend where its runs write them) and RUNNING entries for the
    ``running`` configurations, as SMAC records submitted runs with several workers."""
    from ConfigSpace import Configuration
    from smac.tae import StatusType

    y, predictions = _two_families()
    args = _smac_args(tmp_path, y_val=y, metric=metric)
    smac = callback(**args)
    solver, backend, cs = smac.solver, args["ta_kwargs"]["backend"], args["scenario_dict"]["cs"]
    num_run, finished = 2, []
    for family, base_cost in (("a", 0.1), ("b", 0.3)):
        for i, lr in enumerate(lrs):
            config = Configuration(cs, {"algo": family, "lr": lr})
            preds = predictions(family)
            backend.save_numrun_to_dir(seed=1, idx=num_run, budget=0.0, model=None, cv_model=None,
                                       ensemble_predictions=preds, valid_predictions=None, test_predictions=None)
            solver.runhistory.add(config, base_cost + 0.01 * i, 1.0, StatusType.SUCCESS, instance_id=INSTANCE,
                                  seed=0, budget=0.0, additional_info={"num_run": num_run})
            finished.append((config, preds.astype(np.float32)))
            num_run += 1
    for values in running:
        solver.runhistory.add(Configuration(cs, values), 2147483647.0, 0.0, StatusType.RUNNING,
                              instance_id=INSTANCE, seed=0, budget=0.0)
    return smac, y, finished


def _smac_suggestion(smac):
    """SMAC's own next model-based suggestion: its random forest and EI on the run history, then the
    acquisition maximiser; the first challenger of the list is what the intensifier runs next."""
    challengers = smac.solver.epm_chooser.choose_next()
    len(challengers)  # SMAC builds its list here (the random interleaving is drawn per item, later)
    return challengers.challengers[0]


def test_diversity_term_changes_smacs_pick(tmp_path):
    """Same history, same seeds, same SMAC model and candidates: without the diversity term SMAC runs EI's best
    candidate; with it (a fixed large weight) SMAC runs another configuration, of lower EI."""
    from optdiv.integrations.autosklearn import optdiv_smac

    plain = optdiv_smac("optdivbo", strict=True, selector_kwargs={"fixed_weight": 0.0})
    pick = _smac_suggestion(_smac_with_history(tmp_path / "plain", plain)[0])
    call = plain.report.calls[-1]
    assert plain.report.n_changed == 0 and not call["changed"] and not call["diversity_ranked"]
    assert pick.get_dictionary() == call["config"]
    ei_pick = pick

    diverse = optdiv_smac("optdivbo", strict=True, selector_kwargs={"fixed_weight": 1000.0})
    smac, _, _ = _smac_with_history(tmp_path / "diverse", diverse)
    pick = _smac_suggestion(smac)
    call = diverse.report.calls[-1]
    assert diverse.report.n_changed >= 1, diverse.report.calls
    assert call["changed"] and call["diversity_ranked"] and call["observations"] == 12
    assert pick.get_dictionary() == call["config"]  # SMAC runs the re-ranked first candidate
    assert pick != ei_pick
    pool = smac.solver.epm_chooser.acq_optimizer.selector.pool_
    assert pool.weights[pool.indices < 6].sum() > pool.weights.sum() / 2  # the pool is mostly family "a"


def test_running_configurations_enter_the_selector_as_believers(tmp_path):
    """With several workers SMAC's history holds RUNNING entries: each enters the selector for that suggestion,
    with the mean predictions of its three nearest finished runs, and is counted in the report."""
    from ConfigSpace import Configuration

    from optdiv.core.diversity import pairwise_diversity
    from optdiv.integrations.autosklearn import optdiv_smac

    lrs = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
    # nearest finished runs by encoded distance: family "b" at lr 0.04, 0.02, 0.08 (the "a" runs are half the
    # categorical's range away) and family "a" at lr 0.32, 0.16, 0.08
    running = ({"algo": "b", "lr": 0.03}, {"algo": "a", "lr": 0.5})
    expected_neighbours = ([8, 7, 9], [5, 4, 3])

    callback = optdiv_smac("optdivbo", strict=True)
    smac, y, finished = _smac_with_history(tmp_path / "running", callback, lrs=lrs, running=running)
    pick = _smac_suggestion(smac)
    call = callback.report.calls[-1]
    assert call["running"] == 2 and call["observations"] == 12 and callback.report.n_with_running == 1
    assert pick.get_dictionary() not in [dict(r) for r in running]  # a running configuration is not suggested

    maximizer = smac.solver.epm_chooser.acq_optimizer
    selector = maximizer.selector
    assert selector.observations_.shape[0] == 14  # 12 finished runs + 2 believers
    cs = maximizer.config_space
    np.testing.assert_allclose(selector.observations_[12:], maximizer.encoder.encode(
        [Configuration(cs, values) for values in running]))
    believed = [np.mean([finished[i][1] for i in idx], axis=0) for idx in expected_neighbours]
    preds = np.stack([p for _, p in finished] + believed).astype(np.float32)
    expected = pairwise_diversity(preds, y, selector.kind, selector.ensemble_size)
    np.testing.assert_allclose(selector.diversity_, expected, rtol=1e-5, atol=1e-6)

    alone = optdiv_smac("optdivbo", strict=True)
    smac_alone, _, _ = _smac_with_history(tmp_path / "alone", alone, lrs=lrs)
    _smac_suggestion(smac_alone)
    assert alone.report.calls[-1]["running"] == 0 and alone.report.n_with_running == 0
    assert smac_alone.solver.epm_chooser.acq_optimizer.selector.observations_.shape[0] == 12


# --------------------------------------------------------------------------- #
# A changed host fails loudly when SMAC is built
# --------------------------------------------------------------------------- #


def test_installed_host_passes_the_check():
    from optdiv.integrations.autosklearn import check_host, host_problems

    assert host_problems() == []
    check_host()


def _changed_get_smac_object(monkeypatch):
    import autosklearn.smbo

    def get_smac_object(scenario_dict, seed, ta, ta_kwargs, metalearning_configurations, n_jobs, dask_client,
                        multi_objective_algorithm, multi_objective_kwargs, initial_budget):
        raise AssertionError("not called")

    monkeypatch.setattr(autosklearn.smbo, "get_smac_object", get_smac_object)
    return "get_smac_object"


def _maximize_gone(monkeypatch):
    from smac.optimizer.ei_optimization import LocalAndSortedRandomSearch

    monkeypatch.delattr(LocalAndSortedRandomSearch, "_maximize")
    return "LocalAndSortedRandomSearch defines no _maximize"


def _prediction_files_renamed(monkeypatch):
    from autosklearn.automl_common.common.utils.backend import Backend

    monkeypatch.setattr(Backend, "get_prediction_filename",
                        lambda self, subset, seed, idx, budget: f"{subset}_{seed}_{idx}_{budget}.npy")
    return "get_prediction_filename"


def _running_status_gone(monkeypatch):
    import enum

    import smac.tae

    monkeypatch.setattr(smac.tae, "StatusType", enum.Enum("StatusType", "SUCCESS CRASHED DONOTADVANCE"))
    return "RUNNING"


def _ensemble_fit_changed(monkeypatch):
    from autosklearn.ensembles.abstract_ensemble import AbstractEnsemble

    monkeypatch.setattr(AbstractEnsemble, "fit", lambda self, predictions, targets, identifiers: self)
    return "ensemble_class API"


@pytest.mark.parametrize("change", [_changed_get_smac_object, _maximize_gone, _prediction_files_renamed,
                                    _running_status_gone, _ensemble_fit_changed])
def test_changed_host_fails_loudly_when_smac_is_built(tmp_path, monkeypatch, change):
    """Even without strict=True: an incompatible host is an error at build time, never SMAC's own order."""
    from optdiv.integrations.autosklearn import HostVersionError, optdiv_smac

    args = _smac_args(tmp_path)
    what = change(monkeypatch)
    callback = optdiv_smac("optdivbo")
    with pytest.raises(HostVersionError, match="auto-sklearn 0.15.0 with SMAC 1.2") as info:
        callback(**args)
    assert what in str(info.value)
    assert callback.report.initial_design_size is None  # nothing was built


def test_changed_host_stops_the_autosklearn_fit(tmp_path, monkeypatch):
    """auto-sklearn passes the error on: the fit fails at the search's start instead of running unchanged."""
    from sklearn.datasets import load_breast_cancer

    from optdiv.integrations.autosklearn import HostVersionError, OptDivAutoSklearnClassifier

    X, y = load_breast_cancer(return_X_y=True)
    _changed_get_smac_object(monkeypatch)
    automl = OptDivAutoSklearnClassifier(optdiv="optdivbo", initial_configurations_via_metalearning=0,
                                         include={"classifier": ["lda"], "feature_preprocessor": NO_PREPROCESSING},
                                         **_common(tmp_path, 30))
    with pytest.raises(HostVersionError, match="get_smac_object"):
        automl.fit(X, y)
    assert automl.optdiv_.report.n_calls == 0


def test_pool_metric_follows_autosklearns_metric(tmp_path):
    import autosklearn.metrics
    from autosklearn.constants import BINARY_CLASSIFICATION, REGRESSION

    from optdiv.integrations.autosklearn import HostLoss, optdiv_smac

    cases = [  # auto-sklearn metric, task, callback metric -> report.metric, report.pool_metric, host loss used
        (autosklearn.metrics.balanced_accuracy, BINARY_CLASSIFICATION, None, "error", "balanced_accuracy", True),
        (autosklearn.metrics.f1, BINARY_CLASSIFICATION, None, "error", "f1", True),
        (autosklearn.metrics.accuracy, BINARY_CLASSIFICATION, None, "error", "error", False),
        (autosklearn.metrics.log_loss, BINARY_CLASSIFICATION, None, "log_loss", "log_loss", False),
        (autosklearn.metrics.roc_auc, BINARY_CLASSIFICATION, "brier", "brier", "brier", False),
        (autosklearn.metrics.r2, REGRESSION, None, "mse", "mse", False),
        (autosklearn.metrics.median_absolute_error, REGRESSION, None, "mae", "median_absolute_error", True),
    ]
    for i, (metric, task, ours, loss, pool_metric, host_loss) in enumerate(cases):
        y_val = np.array([0, 1] * 10) if task == BINARY_CLASSIFICATION else np.linspace(0.0, 1.0, 20)
        args = _smac_args(tmp_path / str(i), y_val=y_val, metric=metric, task=task)
        callback = optdiv_smac("optdivbo", metric=ours)
        selector = callback(**args).solver.epm_chooser.acq_optimizer.selector
        assert (callback.report.metric, callback.report.pool_metric) == (loss, pool_metric), metric.name
        assert isinstance(selector.pool_scorer, HostLoss) == host_loss, metric.name
        if host_loss:
            assert selector.pool_scorer.scorer is metric and selector.pool_scorer.task_type == task
            prediction = np.stack([1.0 - y_val, y_val], axis=1) if task == BINARY_CLASSIFICATION else y_val
            assert selector.pool_scorer(y_val, prediction) == pytest.approx(0.0)  # a perfect prediction

    args = _smac_args(tmp_path / "ab", metric=autosklearn.metrics.roc_auc)
    with pytest.raises(ValueError, match="pool_builder='caruana'"):
        optdiv_smac("optdivbo", selector_kwargs={"pool_builder": "agnostic_bayes"})(**args)
    with pytest.raises(ValueError, match="set from auto-sklearn's metric"):
        optdiv_smac("optdivbo", selector_kwargs={"pool_scorer": len})


def test_roc_auc_pool_on_a_constructed_history(tmp_path):
    """SMAC's suggestion with auto-sklearn's roc_auc loss building the pool over the runs' prediction files."""
    import autosklearn.metrics
    from autosklearn.constants import BINARY_CLASSIFICATION
    from autosklearn.metrics import calculate_loss

    from optdiv.core.pool import build_pool
    from optdiv.integrations.autosklearn import optdiv_smac

    callback = optdiv_smac("optdivbo", strict=True)
    smac, y, finished = _smac_with_history(tmp_path, callback, metric=autosklearn.metrics.roc_auc)
    _smac_suggestion(smac)
    assert callback.report.calls[-1]["diversity_ranked"] and callback.report.pool_metric == "roc_auc"
    selector = smac.solver.epm_chooser.acq_optimizer.selector
    preds = np.stack([p for _, p in finished])

    def auc_loss(pool):
        ensemble = np.tensordot(pool.weights, preds[pool.indices].astype(np.float64), axes=1) / pool.weights.sum()
        return calculate_loss(y, ensemble, BINARY_CLASSIFICATION, autosklearn.metrics.roc_auc)

    by_error = build_pool(preds, y, "error", size=selector.ensemble_size, seed=selector.seed)
    assert auc_loss(selector.pool_) < auc_loss(by_error)  # another pool than 0/1 error's, better on roc_auc


# --------------------------------------------------------------------------- #
# The final ensemble: optdiv's selection through auto-sklearn's ensemble_class hook
# --------------------------------------------------------------------------- #


def _classification_runs(n=300, seed=0):
    """Validation targets and runs' probabilities: two sharp runs (most accurate, all-in on their label) and four
    moderate ones (less accurate), so 0/1 error and log loss choose different ensembles."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    runs = []
    for accuracy, confidence in ((0.9, 0.999), (0.89, 0.999), (0.85, 0.7), (0.84, 0.65), (0.8, 0.6), (0.83, 0.75)):
        label = np.where(rng.random(n) < accuracy, y, 1 - y)
        p1 = np.where(label == 1, confidence, 1 - confidence)
        runs.append(np.stack([1 - p1, p1], axis=1))
    return y, runs


def _identifiers(runs):
    return [(1, num_run, 0.0) for num_run in range(2, len(runs) + 2)]


def test_ensemble_chooses_log_loss_selection_for_accuracy():
    """On the same arrays: optdiv's selection on log loss, which is not auto-sklearn's selection on accuracy; the
    reported validation performance is auto-sklearn's accuracy loss of the weighted prediction."""
    import pickle

    import autosklearn.metrics
    from autosklearn.constants import BINARY_CLASSIFICATION
    from autosklearn.ensembles.ensemble_selection import EnsembleSelection
    from autosklearn.metrics import calculate_loss

    from optdiv.core.ensemble import ensemble_predict, ensemble_selection
    from optdiv.integrations.autosklearn import OptDivEnsemble

    y, runs = _classification_runs()
    ids = _identifiers(runs)
    accuracy = autosklearn.metrics.accuracy
    ensemble = OptDivEnsemble(task_type=BINARY_CLASSIFICATION, metrics=[accuracy], backend=None, random_state=3)
    ensemble.fit(runs, y, ids, runs=[])

    expected = ensemble_selection(np.stack(runs), y, "log_loss", size=50, seed=3).weights
    np.testing.assert_allclose(ensemble.weights_, expected, rtol=0, atol=1e-12)
    assert ensemble.selection_loss_ == "log_loss" and ensemble.bags_ == 0
    stock = EnsembleSelection(task_type=BINARY_CLASSIFICATION, metrics=[accuracy], backend=None, random_state=3)
    stock.fit(runs, y, ids, runs=[])
    assert not np.allclose(ensemble.weights_, stock.weights_)  # auto-sklearn's selection on 0/1 error differs

    prediction = ensemble_predict(np.stack(runs), expected)
    assert ensemble.get_validation_performance() == pytest.approx(
        calculate_loss(y, prediction, BINARY_CLASSIFICATION, accuracy))
    np.testing.assert_allclose(ensemble.predict(runs), prediction)
    members = [run for run, weight in zip(runs, ensemble.weights_) if weight > 0]
    np.testing.assert_allclose(ensemble.predict(members), prediction)  # as auto-sklearn's predict passes them
    with pytest.raises(ValueError, match="members"):
        ensemble.predict(runs + runs[:1])

    chosen = [identifier for identifier, weight in zip(ids, expected) if weight > 0]
    assert ensemble.get_selected_model_identifiers() == chosen
    assert [i for i, _ in ensemble.get_identifiers_with_weights()] == ids
    assert sum(w for _, w in ensemble.get_identifiers_with_weights()) == pytest.approx(1.0)
    with_models = ensemble.get_models_with_weights({identifier: f"model {identifier[1]}" for identifier in ids})
    assert sorted(model for _, model in with_models) == sorted(f"model {i[1]}" for i in chosen)
    assert [w for w, _ in with_models] == sorted((w for w, _ in with_models), reverse=True)
    assert "log_loss" in str(ensemble) and "accuracy" in str(ensemble)

    restored = pickle.loads(pickle.dumps(ensemble))  # auto-sklearn's backend saves and loads it so
    assert not hasattr(restored, "metrics")
    np.testing.assert_allclose(restored.predict(members), prediction)
    assert restored.get_validation_performance() == ensemble.get_validation_performance()


def test_ensemble_follows_the_metric_and_its_settings():
    """What the selection minimises for each auto-sklearn metric, and the explicit settings."""
    import autosklearn.metrics
    from autosklearn.constants import BINARY_CLASSIFICATION, MULTILABEL_CLASSIFICATION, REGRESSION

    from optdiv.core.ensemble import ensemble_selection
    from optdiv.integrations.autosklearn import HostLoss, OptDivEnsemble
    from optdiv.integrations.autosklearn.ensemble import selection_plan

    m = autosklearn.metrics
    cases = [  # metric, task, ensemble_loss, ensemble_bags -> selection loss, bags
        (m.accuracy, BINARY_CLASSIFICATION, "auto", "auto", "log_loss", 0),
        (m.log_loss, BINARY_CLASSIFICATION, "auto", "auto", "log_loss", 0),
        (m.accuracy, BINARY_CLASSIFICATION, None, "auto", "error", 0),  # auto-sklearn's own choice
        (m.roc_auc, BINARY_CLASSIFICATION, "auto", "auto", "roc_auc", 0),
        (m.balanced_accuracy, BINARY_CLASSIFICATION, "brier", 5, "brier", 5),
        (m.r2, REGRESSION, "auto", "auto", "mse", 20),
        (m.mean_absolute_error, REGRESSION, "auto", "auto", "mae", 20),
        (m.median_absolute_error, REGRESSION, "auto", "auto", "median_absolute_error", 20),
        (m.r2, REGRESSION, "auto", 0, "mse", 0),
    ]
    for metric, task, loss, bags, expected_loss, expected_bags in cases:
        chosen, name, n_bags = selection_plan(metric, task, loss, bags)
        assert (name, n_bags) == (expected_loss, expected_bags), metric.name
        assert isinstance(chosen, HostLoss) == (name in ("roc_auc", "median_absolute_error")), metric.name

    y, runs = _classification_runs()  # a metric optdiv does not compute: auto-sklearn's loss for it
    ensemble = OptDivEnsemble(task_type=BINARY_CLASSIFICATION, metrics=[m.roc_auc], random_state=0,
                              ensemble_size=10).fit(runs, y, _identifiers(runs), runs=[])
    expected = ensemble_selection(np.stack(runs), y, HostLoss(m.roc_auc, BINARY_CLASSIFICATION), size=10, seed=0)
    np.testing.assert_allclose(ensemble.weights_, expected.weights, rtol=0, atol=1e-12)

    with pytest.raises(ValueError, match="does not fit a classification task"):
        selection_plan(m.accuracy, BINARY_CLASSIFICATION, "mse")
    for bad in ({"ensemble_size": 0}, {"ensemble_loss": "hinge"}, {"ensemble_bags": -1}, {"ensemble_bags": "many"}):
        with pytest.raises(ValueError):
            OptDivEnsemble(task_type=BINARY_CLASSIFICATION, metrics=[m.accuracy], **bad)
    with pytest.raises(ValueError, match="multilabel"):
        OptDivEnsemble(task_type=MULTILABEL_CLASSIFICATION, metrics=[m.f1])


def test_regression_ensemble_is_bagged_selection():
    """Regression: the weights are the average of 20 selections on bootstrap samples of the validation rows."""
    import autosklearn.metrics
    from autosklearn.constants import REGRESSION
    from autosklearn.metrics import calculate_loss

    from optdiv.core.ensemble import bagged_ensemble_selection, ensemble_predict, ensemble_selection
    from optdiv.integrations.autosklearn import OptDivEnsemble

    rng = np.random.default_rng(1)
    n = 80
    y = rng.normal(0.0, 1.0, n)
    runs = [y + rng.normal(bias, noise, n) for bias, noise in
            ((0.0, 0.5), (0.1, 0.5), (-0.1, 0.55), (0.2, 0.6), (0.0, 0.7), (-0.3, 0.5), (0.0, 1.0), (0.3, 0.45))]
    ids = _identifiers(runs)
    r2 = autosklearn.metrics.r2
    ensemble = OptDivEnsemble(task_type=REGRESSION, metrics=[r2], random_state=7).fit(runs, y, ids, runs=[])

    expected = bagged_ensemble_selection(np.stack(runs), y, "mse", size=50, bags=20, seed=7)
    np.testing.assert_allclose(ensemble.weights_, expected, rtol=0, atol=1e-12)
    assert ensemble.selection_loss_ == "mse" and ensemble.bags_ == 20
    single = ensemble_selection(np.stack(runs), y, "mse", size=50, seed=7).weights
    assert not np.allclose(ensemble.weights_, single)  # not one selection on all rows
    prediction = ensemble_predict(np.stack(runs), expected)
    assert prediction.shape == (n,)
    assert ensemble.get_validation_performance() == pytest.approx(calculate_loss(y, prediction, REGRESSION, r2))

    column_runs = [run[:, None] for run in runs]  # (rows, 1) predictions give the same weights
    again = OptDivEnsemble(task_type=REGRESSION, metrics=[r2], random_state=7).fit(column_runs, y, ids, runs=[])
    np.testing.assert_allclose(again.weights_, ensemble.weights_)


def test_optdiv_estimators_use_the_ensemble_unless_told_otherwise(tmp_path):
    """With optdiv on the estimators hand auto-sklearn optdiv's ensemble class; a user's own ensemble_class (even
    auto-sklearn's EnsembleSelection or None), optdiv_ensemble=False and optdiv=False keep theirs."""
    from autosklearn.ensembles.ensemble_selection import EnsembleSelection
    from autosklearn.ensembles.singlebest_ensemble import SingleBest
    from sklearn.base import clone

    from optdiv.integrations.autosklearn import (OptDivAutoSklearnClassifier, OptDivAutoSklearnRegressor,
                                                 OptDivEnsemble)

    def built(cls, name, **kwargs):
        estimator = cls(**kwargs, **_common(tmp_path / name, 30))
        return estimator, estimator.build_automl()

    estimator, automl = built(OptDivAutoSklearnClassifier, "default")
    assert automl._ensemble_class is OptDivEnsemble
    assert estimator.ensemble_class == "default"  # the parameter is left as the user gave it
    params = clone(estimator).get_params()
    assert params["ensemble_class"] == "default" and params["optdiv_ensemble"] is True
    assert built(OptDivAutoSklearnRegressor, "regressor", optdiv="divbo")[1]._ensemble_class is OptDivEnsemble
    sized = built(OptDivAutoSklearnClassifier, "sized", ensemble_kwargs={"ensemble_size": 25})[1]
    assert sized._ensemble_class is OptDivEnsemble and sized._ensemble_kwargs == {"ensemble_size": 25}

    assert built(OptDivAutoSklearnClassifier, "off", optdiv_ensemble=False)[1]._ensemble_class is EnsembleSelection
    assert built(OptDivAutoSklearnClassifier, "stock", optdiv=False)[1]._ensemble_class is EnsembleSelection
    for own in (SingleBest, EnsembleSelection, None):
        estimator, automl = built(OptDivAutoSklearnClassifier, f"own_{getattr(own, '__name__', own)}",
                                  ensemble_class=own)
        assert automl._ensemble_class is own
        again = clone(estimator).set_params(tmp_folder=str(tmp_path / f"clone_{getattr(own, '__name__', own)}"))
        assert again.build_automl()._ensemble_class is own

    with pytest.raises(ValueError, match="optdiv_ensemble=False"):
        built(OptDivAutoSklearnClassifier, "mode", ensemble_kwargs={"mode": "slow"})
    with pytest.raises(ValueError, match="ensemble_size"):
        built(OptDivAutoSklearnClassifier, "size", ensemble_kwargs={"ensemble_size": 0})
    with pytest.raises(ValueError, match="optdiv_ensemble must be"):
        built(OptDivAutoSklearnClassifier, "flag", optdiv_ensemble="yes")


@pytest.mark.timeout(400)
def test_autosklearn_fit_with_the_ensemble_class(tmp_path):
    """Plain auto-sklearn with ``ensemble_class=OptDivEnsemble``: its ensemble builder (another process) fits,
    saves and loads the class; the final ensemble is optdiv's, over successful runs only, and predicts well."""
    from autosklearn.classification import AutoSklearnClassifier
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from optdiv.integrations.autosklearn import OptDivEnsemble, ensemble_members

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    automl = AutoSklearnClassifier(
        ensemble_class=OptDivEnsemble,
        initial_configurations_via_metalearning=3,
        include={"classifier": FAST_CLASSIFIERS, "feature_preprocessor": NO_PREPROCESSING},
        **_common(tmp_path, 45),
    )
    automl.fit(X_train, y_train, dataset_name="breast_cancer_optdiv_ensemble")

    ensemble = automl.automl_.ensemble_
    assert isinstance(ensemble, OptDivEnsemble)
    assert ensemble.selection_loss_ == "log_loss" and ensemble.metric_name_ == "accuracy"
    assert abs(float(np.sum(ensemble.weights_)) - 1.0) < 1e-9
    runs = _runs_in_order(automl)
    _check_members(ensemble_members(automl), runs)
    successful = {num_run for _, status, num_run in runs if status == "SUCCESS"}
    assert {num_run for _, num_run, _ in ensemble.get_selected_model_identifiers()} <= successful
    assert 0.0 <= ensemble.get_validation_performance() < 0.2
    accuracy = float(np.mean(automl.predict(X_test) == y_test))
    assert accuracy > 0.85, accuracy
