"""optdiv.integrations.autogluon's hook against a real TabularPredictor (AutoGluon-Tabular 1.6.3).

Every fit trains real models through AutoGluon on breast_cancer (or diabetes), kept short: a few fast
families, ``num_cpus=1`` (on a busy machine AutoGluon's multi-threaded boosters are many times slower), time
limits under a minute. AutoGluon is imported inside the tests.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

FAST = ["GBM", "RF", "XT", "KNN", "LR"]
#: AutoGluon's default portfolio without the families that are slow here or not installed (no torch)
SLOW_DEFAULTS = ["GBM", "CAT", "XGB", "NN_TORCH", "FASTAI"]


def _breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    df = load_breast_cancer(as_frame=True).frame
    df["target"] = np.where(df["target"] == 1, "benign", "malignant")  # string labels: exercise the mapping
    rest, test = train_test_split(df, test_size=0.2, random_state=0, stratify=df["target"])
    train, val = train_test_split(rest, test_size=0.25, random_state=1, stratify=rest["target"])
    return train, val, test


def _predictor(tmp_path, name="ag", **kwargs):
    from autogluon.tabular import TabularPredictor

    return TabularPredictor(label="target", path=str(tmp_path / name), verbosity=0, **kwargs)


@pytest.mark.timeout(600)
def test_hook_starts_from_autogluons_own_fit_spends_the_budget_and_saves(tmp_path, monkeypatch):
    from autogluon.tabular import TabularPredictor

    from optdiv.integrations import autogluon as oag

    steered_by = []  # the rows each suggestion was made from
    suggest = oag.hook.Optimizer.suggest  # the engine's optimiser, as the hook calls it

    def recording_suggest(self, history, y_val=None, **kwargs):
        steered_by.append((len(y_val), {obs.val_pred.shape[0] for obs in history if obs.val_pred is not None}))
        return suggest(self, history, y_val, **kwargs)

    monkeypatch.setattr(oag.hook.Optimizer, "suggest", recording_suggest)

    train, val, test = _breast_cancer()
    user_args = dict(excluded_model_types=SLOW_DEFAULTS, num_cpus=1)  # the user's own AutoGluon arguments

    alone = _predictor(tmp_path, "alone", eval_metric="accuracy").fit(train, tuning_data=val, time_limit=45,
                                                                      **user_args)
    predictor = _predictor(tmp_path, "hook", eval_metric="accuracy")
    seen = []
    start = time.monotonic()
    search = oag.fit(predictor, train, tuning_data=val, time_limit=45, families=FAST, seed=1,
                     callback=seen.append, refit=False, **user_args)
    wall = time.monotonic() - start

    # phase 1 is AutoGluon's own fit: its default portfolio (less the user's exclusions), the same scores
    board = predictor.leaderboard().set_index("model")["score_val"]
    alone_board = alone.leaderboard().set_index("model")["score_val"]
    assert sorted(search.phase1_models) == sorted(alone.model_names())
    assert {"RandomForestGini", "RandomForestEntr", "ExtraTreesGini", "ExtraTreesEntr"} <= set(search.phase1_models)
    for name in search.phase1_models:
        assert board[name] == pytest.approx(alone_board[name]), name
    assert search.autogluon_best == alone.model_best == "WeightedEnsemble_L2"

    # phase 2 went on after AutoGluon's portfolio and used the budget
    ok = [t for t in search.trials if t.status == "ok"]
    assert len(ok) >= 3, search.trials_frame()
    assert search.phase1_seconds < 0.6 * 45
    assert 0.85 * 45 <= wall <= 45 + 3, (wall, search.phase1_seconds, len(search.trials))
    assert [t.index for t in seen] == list(range(len(search.trials)))
    for t in ok:
        assert t.model in board.index and t.model.endswith("_OD%d" % t.index)
        assert t.score_val == pytest.approx(board[t.model])
        fitted = predictor.model_hyperparameters(t.model, output_format="all")
        for key, value in t.hyperparameters.items():  # the suggestion reached AutoGluon's model
            assert fitted[key] == value, (t.model, key)
    assert {t.family for t in search.trials} <= set(FAST)

    # the suggestions' history starts with phase 1's models and their validation predictions
    first = [obs.model_name for obs in search.history[:4]]
    assert sorted(first) == sorted(["RandomForestGini", "RandomForestEntr", "ExtraTreesGini", "ExtraTreesEntr"])
    again = predictor.predict_proba_multi(models=first + search.models, as_pandas=False, inverse_transform=False)
    for obs in search.history:
        if obs.status == "ok":
            assert obs.val_pred.shape == (len(val), 2)
            np.testing.assert_allclose(obs.val_pred, again[obs.model_name], atol=1e-6)
            assert obs.val_loss == pytest.approx(np.mean(obs.val_pred.argmax(1) != search.y_val))
            assert oag.metric_loss(predictor, obs.val_pred, search.y_val) == pytest.approx(obs.val_loss)
    assert any(t.info.get("strategy") == "optdivbo" and t.info.get("weight", 0) > 0 for t in search.trials)

    # the search is steered by half the validation rows; the other half (the check rows) it never scores
    n_check = int(search.check.sum())
    assert search.check.shape == (len(val),) and abs(n_check - len(val) / 2) <= 2
    assert steered_by and all(seen == (len(val) - n_check, {len(val) - n_check}) for seen in steered_by)

    # the final model is AutoGluon's best or the refitted ensemble, never worse on validation; the refitted one
    # replaces AutoGluon's only when the check rows are sure enough
    refit = "WeightedEnsemble_L2" + oag.ENSEMBLE_SUFFIX
    assert predictor.model_best == search.final_model in (search.autogluon_best, refit)
    assert set(search.scores) == {search.autogluon_best, refit}
    assert board[search.final_model] >= board[search.autogluon_best]
    if search.scores[refit] > search.scores[search.autogluon_best]:
        assert 0.0 <= search.confidence <= 1.0
        assert (search.final_model == refit) == (search.confidence >= oag.SWITCH_CONFIDENCE)
    else:
        assert search.final_model == search.autogluon_best and search.confidence is None

    # saved like any predictor: loading gives the same model and the same predictions
    proba = predictor.predict_proba(test)
    loaded = TabularPredictor.load(predictor.path, verbosity=0)
    assert loaded.model_best == search.final_model
    np.testing.assert_allclose(loaded.predict_proba(test).to_numpy(), proba.to_numpy(), atol=1e-9)
    assert (loaded.predict(test) == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_bagged_and_stacked_hook_measures_diversity_out_of_fold(tmp_path):
    from optdiv.integrations import autogluon as oag

    train, _, test = _breast_cancer()
    predictor = _predictor(tmp_path, eval_metric="roc_auc")
    search = oag.fit(predictor, train, time_limit=45, hyperparameters={"LR": {}, "KNN": {}}, num_bag_folds=2,
                     num_stack_levels=1, dynamic_stacking=False, families=["LR", "KNN", "XT"], n_models=6, seed=2,
                     num_cpus=1)

    # no validation rows: out-of-fold predictions on the training rows, with the training labels
    assert not predictor.has_val
    assert search.y_val.shape == (len(train),)
    levels = predictor.leaderboard().set_index("model")["stack_level"]
    assert {"LinearModel_BAG_L1", "KNeighbors_BAG_L1", "LinearModel_BAG_L2"} <= set(search.phase1_models)
    in_history = [obs.model_name for obs in search.history]
    assert "LinearModel_BAG_L2" in in_history  # the stacker's predictions count for the diversity as well
    ok = [t for t in search.trials if t.status == "ok"]
    assert len(ok) >= 3, search.trials_frame()
    for t in ok:  # phase-2 models are bagged and join level 1
        assert t.model.endswith("_OD%d_BAG_L1" % t.index) and levels[t.model] == 1
    from sklearn.metrics import roc_auc_score

    check = search.check
    assert check is not None and abs(int(check.sum()) - len(train) / 2) <= 2  # half the out-of-fold rows
    for obs in search.history:
        if obs.status == "ok":
            assert obs.val_pred.shape == (len(train), 2)
            # AutoGluon's out-of-fold AUC is the AUC of the stored predictions on the stored labels, and the search
            # reads the same metric on the rows it is steered by
            assert obs.val_loss == pytest.approx(1 - roc_auc_score(search.y_val, obs.val_pred[:, 1]))
            assert oag.metric_loss(predictor, obs.val_pred[~check], search.y_val[~check]) == pytest.approx(
                1 - roc_auc_score(search.y_val[~check], obs.val_pred[~check, 1]))

    # the refitted ensemble may use every level; the result is never below AutoGluon's own on validation
    scores = predictor.leaderboard().set_index("model")["score_val"]
    assert scores[search.final_model] >= scores[search.autogluon_best]
    assert (predictor.predict(test) == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_auto_bagging_scores_every_row_out_of_fold(tmp_path):
    from optdiv.integrations import autogluon as oag

    train, val, test = _breast_cancer()
    predictor = _predictor(tmp_path, eval_metric="accuracy")
    search = oag.fit(predictor, train, tuning_data=val, time_limit=40, hyperparameters={"LR": {}, "KNN": {}},
                     families=["LR", "KNN"], n_models=3, seed=0, num_cpus=1, bagging="auto")

    # the settings left bagging open: both phases are bagged with the hook's folds over train + tuning rows
    assert not predictor.has_val
    assert search.y_val.shape == (len(train) + len(val),)
    assert predictor._trainer.k_fold == oag.hook.BAG_FOLDS
    assert {"LinearModel_BAG_L1", "KNeighbors_BAG_L1"} <= set(search.phase1_models)
    assert all(t.model.endswith("_BAG_L1") for t in search.trials if t.status == "ok")
    assert abs(int(search.check.sum()) - (len(train) + len(val)) / 2) <= 2  # half of every row checks the switch
    for obs in search.history:
        if obs.status == "ok":
            assert obs.val_pred.shape == (len(train) + len(val), 2)
    assert (predictor.predict(test) == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_the_final_model_is_refitted_on_training_and_tuning_rows(tmp_path, monkeypatch):
    from autogluon.tabular import TabularPredictor

    from optdiv.integrations import autogluon as oag

    train, val, test = _breast_cancer()
    args = dict(tuning_data=val, time_limit=30, hyperparameters={"LR": {}, "KNN": {}}, families=["LR", "KNN"],
                n_models=3, seed=0, num_cpus=1)
    predictor = _predictor(tmp_path, "refit", eval_metric="accuracy")
    search = oag.fit(predictor, train, **args)

    # the model the hook chose, not AutoGluon's highest validation score, is refitted and predicts
    assert search.refitted == predictor.model_best == search.final_model + "_FULL"
    members = [m for m in predictor.model_names() if m.endswith("_FULL") and m != search.refitted]
    assert members and all(predictor.model_info(m)["num_samples"] == len(train) + len(val) for m in members)
    loaded = TabularPredictor.load(predictor.path, verbosity=0)
    assert loaded.model_best == search.refitted
    assert (loaded.predict(test) == test["target"]).mean() > 0.9

    # the user's refit_full decides when given; refit=False and a refit that cannot fit in time refit nothing
    for name, kwargs in (("users", {"refit_full": False}), ("off", {"refit": False})):
        predictor = _predictor(tmp_path, name, eval_metric="accuracy")
        search = oag.fit(predictor, train, **args, **kwargs)
        assert search.refitted is None and not any(m.endswith("_FULL") for m in predictor.model_names())
        assert predictor.model_best == search.final_model
    monkeypatch.setattr(oag.hook, "REFIT_MARGIN", 1e9)
    predictor = _predictor(tmp_path, "late", eval_metric="accuracy")
    search = oag.fit(predictor, train, **args)
    assert search.refitted is None and predictor.model_best == search.final_model
    with pytest.raises(ValueError, match="refit must be"):
        oag.fit(_predictor(tmp_path, "bad"), train, refit=True)


def test_bagging_follows_the_users_settings():
    from optdiv.integrations.autogluon import hook

    effective = hook._effective_fit_kwargs  # the presets resolved as AutoGluon resolves them
    assert hook._bag_folds("auto", effective(None, None, {})) == hook.BAG_FOLDS  # default presets: open
    assert hook._bag_folds("auto", effective("medium_quality", None, {})) == hook.BAG_FOLDS
    assert hook._bag_folds("auto", effective("best_quality", None, {})) is None  # the presets stack: theirs
    assert hook._bag_folds("auto", effective(None, None, {"num_bag_folds": 0})) is None  # an explicit no
    assert hook._bag_folds("auto", effective(None, None, {"num_bag_folds": 3})) is None
    assert hook._bag_folds(False, effective(None, None, {})) is None
    assert hook._bag_folds(5, effective(None, None, {})) == 5
    with pytest.raises(ValueError, match="bagging must be"):
        hook._bag_folds(1, {})
    with pytest.raises(ValueError, match="contradicts num_bag_folds"):
        hook._bag_folds(5, {"num_bag_folds": 3})


@pytest.mark.timeout(600)
def test_regression_hook_uses_values_and_the_metric(tmp_path):
    from sklearn.datasets import load_diabetes

    from optdiv.integrations import autogluon as oag

    df = load_diabetes(as_frame=True).frame
    train, val, test = df.iloc[:260], df.iloc[260:350], df.iloc[350:]
    predictor = _predictor(tmp_path, eval_metric="mean_absolute_error")
    search = oag.fit(predictor, train, tuning_data=val, time_limit=30, hyperparameters={"LR": {}},
                     families=["KNN", "LR"], n_models=4, n_initial=2, n_candidates=200, switch_confidence=0.0,
                     num_cpus=1, refit=False)

    assert search.phase1_models == ["LinearModel", "WeightedEnsemble_L2"]
    assert len(search.trials) == 4 and all(t.status == "ok" for t in search.trials), search.trials_frame()
    np.testing.assert_allclose(search.y_val, val["target"].to_numpy())
    for obs in search.history:  # AutoGluon's MAE score, turned into a loss, is the MAE of the stored predictions
        assert obs.val_pred.shape == (len(val),)
        assert obs.val_loss == pytest.approx(np.abs(obs.val_pred - search.y_val).mean(), rel=1e-4)
        assert oag.metric_loss(predictor, obs.val_pred, search.y_val) == pytest.approx(obs.val_loss, rel=1e-4)
    refit = "WeightedEnsemble_L2" + oag.ENSEMBLE_SUFFIX  # switch_confidence=0: the validation score decides
    better = search.scores[refit] > search.scores["WeightedEnsemble_L2"]
    assert search.final_model == (refit if better else "WeightedEnsemble_L2") == predictor.model_best
    preds = predictor.predict(test)
    assert np.abs(preds - test["target"]).mean() < np.abs(test["target"] - train["target"].mean()).mean()


@pytest.mark.timeout(600)
def test_failed_model_fits_do_not_stop_the_search(tmp_path, monkeypatch):
    from optdiv.integrations import autogluon as oag

    train, val, _ = _breast_cancer()
    real = oag.to_hyperparameters
    calls = []

    def broken_for_some(config, task):
        calls.append(config)
        if len(calls) in (1, 3):  # two fit_extra calls fail inside LightGBM
            return "GBM", {"num_leaves": -5}
        return real(config, task)

    monkeypatch.setattr(oag.hook, "to_hyperparameters", broken_for_some)  # where the hook looks it up
    predictor = _predictor(tmp_path)
    search = oag.fit(predictor, train, tuning_data=val, time_limit=45, hyperparameters={"LR": {}}, method="divbo",
                     n_models=5, n_initial=2, families=["KNN", "LR", "XT"], n_candidates=200, num_cpus=1)

    status = [t.status for t in search.trials]
    assert status == ["failed", "ok", "failed", "ok", "ok"], [(t.status, t.error) for t in search.trials]
    for t in (search.trials[0], search.trials[2]):
        assert t.model is None and "num_leaves" in t.error
    failed = [obs for obs in search.history if obs.status == "failed"]
    assert len(failed) == 2 and all(obs.val_pred is None and obs.val_loss == np.inf for obs in failed)
    assert not any(m.endswith(("_OD0", "_OD2")) for m in predictor.model_names())
    assert predictor.predict(val).shape == (len(val),)


def test_phase1_models_map_to_the_nearest_configuration():
    """AutoGluon's own models enter the history at the nearest configuration of optdiv's space."""
    from optdiv.integrations import autogluon as oag

    space = oag.search_space("classification", ["GBM", "RF", "KNN", "LR"])
    large = oag.from_hyperparameters("GBM", {"learning_rate": 0.03, "num_leaves": 128, "feature_fraction": 0.9,
                                             "min_data_in_leaf": 3, "extra_trees": True}, space)
    assert large["classifier:__choice__"] == "lightgbm"
    assert large["classifier:lightgbm:num_leaves"] == 96  # clipped into AutoGluon's own search range
    assert large["classifier:lightgbm:learning_rate"] == pytest.approx(0.03)
    assert large["classifier:lightgbm:min_data_in_leaf"] == 3
    plain = oag.from_hyperparameters("GBM", {"learning_rate": 0.05, "seed": 0}, space)
    assert plain["classifier:lightgbm:num_leaves"] == 31  # LightGBM's own default where AutoGluon sets none
    rf = oag.from_hyperparameters("RF", {"n_estimators": 300, "max_leaf_nodes": 15000, "criterion": "entropy"}, space)
    assert rf["classifier:random_forest:max_features"] == "sqrt"
    assert rf["classifier:random_forest:min_samples_leaf"] == 1
    knn = oag.from_hyperparameters("KNN", {"weights": "distance"}, space)
    assert knn["classifier:k_nearest_neighbors:weights"] == "distance"
    assert knn["classifier:k_nearest_neighbors:p"] == "2"
    assert oag.from_hyperparameters("XT", {}, space) is None  # a family outside the space
    assert oag.to_hyperparameters(rf, "classification") == ("RF", {"max_leaf_nodes": 15000, "min_samples_leaf": 1,
                                                                   "max_features": "sqrt"})


def test_eval_metrics_follow_the_metric_vocabulary():
    """The hook and the searcher read AutoGluon's eval_metric the same way as the other adapters."""
    from types import SimpleNamespace

    from autogluon.core.metrics import get_metric

    from optdiv.integrations import autogluon as oag

    cases = {("binary", "accuracy"): "error", ("binary", "roc_auc"): "error", ("binary", "log_loss"): "log_loss",
             ("multiclass", "balanced_accuracy"): "error", ("regression", "rmse"): "mse",
             ("regression", "r2"): "mse", ("regression", "mape"): "mse", ("regression", "mae"): "mae",
             ("regression", "median_absolute_error"): "mae", ("quantile", "pinball_loss"): "mse"}
    for (problem_type, name), loss in cases.items():
        scorer = get_metric(name, problem_type)
        predictor = SimpleNamespace(problem_type=problem_type, eval_metric=scorer)
        searcher = oag.OptDivSearcher(search_space={"x": 1}, reward_attribute="reward")
        searcher._trial_paths = (None, None, None, None, problem_type, scorer, False)
        assert oag.optdiv_metric(predictor) == searcher._metric() == loss


def test_bad_input_is_rejected_with_clear_errors(tmp_path):
    from optdiv.integrations import autogluon as oag

    train, _, _ = _breast_cancer()
    predictor = _predictor(tmp_path)
    with pytest.raises(ValueError, match="unknown method"):
        oag.fit(predictor, train, method="smac")
    with pytest.raises(ValueError, match="unknown AutoGluon model famil"):
        oag.fit(predictor, train, families=["GBM", "NN_MAGIC"])
    with pytest.raises(ValueError, match="train_data is required"):
        oag.fit(predictor)
    with pytest.raises(ValueError, match="n_models"):
        oag.fit(predictor, train, n_models=-1)
    with pytest.raises(ValueError, match="time_limit must be a positive"):
        oag.fit(predictor, train, time_limit=0)
    with pytest.raises(ValueError, match="switch_confidence"):
        oag.fit(predictor, train, switch_confidence=1.0)
    with pytest.raises(ValueError, match="bagging must be"):
        oag.fit(predictor, train, bagging="always")
    with pytest.raises(ValueError, match="infer_limit.*not supported"):
        oag.fit(predictor, train, infer_limit=0.01)
    with pytest.raises(ValueError, match="use_bag_holdout.*not supported"):
        oag.fit(predictor, train, num_bag_folds=2, use_bag_holdout=True)
    with pytest.raises(TypeError, match="TabularPredictor"):
        oag.fit(object(), train)
    if "CAT" not in oag.available_families():
        with pytest.raises(ImportError, match="catboost"):
            oag.fit(predictor, train, families=["CAT"])
    assert not predictor.is_fit  # every refusal came before AutoGluon trained anything


def test_a_changed_host_fails_loudly(tmp_path, monkeypatch):
    """The internals the hook relies on are checked before anything is trained; a missing one names the version."""
    from autogluon.tabular import TabularPredictor

    from optdiv.integrations import autogluon as oag

    oag.check_host()  # the installed AutoGluon is the one the adapter was written for
    train, _, _ = _breast_cancer()
    predictor = _predictor(tmp_path)
    monkeypatch.delattr(TabularPredictor, "predict_proba_multi")
    with pytest.raises(oag.HostVersionError, match=r"1\.6\.3[\s\S]*predict_proba_multi"):
        oag.fit(predictor, train, time_limit=10)
    monkeypatch.undo()

    def fit_extra(self, hyperparameters, time_limit=None):  # a fit_extra that lost its resource arguments
        raise AssertionError("never called")

    monkeypatch.setattr(TabularPredictor, "fit_extra", fit_extra)
    with pytest.raises(oag.HostVersionError, match=r"fit_extra: missing fit_weighted_ensemble, num_cpus"):
        oag.check_host()
    monkeypatch.undo()

    import autogluon.tabular.models as models

    monkeypatch.setattr(models.RFModel, "ag_key", "RANDOM_FOREST")
    with pytest.raises(oag.HostVersionError, match="RF are gone or renamed"):
        oag.check_host()
    assert not predictor.is_fit


@pytest.mark.timeout(600)
def test_table6_command_runs_end_to_end_on_a_small_csv(tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    # benchmarks/autogluon_compare.py is a script of the checkout, not a module of the package: load it by path
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "autogluon_compare.py"
    spec = importlib.util.spec_from_file_location("autogluon_compare", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    train, _, _ = _breast_cancer()
    csv = tmp_path / "quake.csv"  # a paper dataset's name, so the paper columns are filled in
    train.head(200).to_csv(csv, index=False)
    out = tmp_path / "cmp"
    argv = ["--data", str(csv), "--methods", "optdivbo", "--seeds", "0", "--time-budget", "30",
            "--num-cpus", "1", "--out", str(out)]
    assert bench.main(argv) == 0
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 1 and runs[0]["method"] == "optdivbo" and runs[0]["hook"] == bench.HOOK
    assert runs[0]["phase1_models"] >= 1 and runs[0]["trials"] >= 1
    assert set(runs[0]["test_scores"]) == set(runs[0]["val_scores"]) and runs[0]["autogluon_best"] in runs[0]["val_scores"]
    assert 0.0 <= runs[0]["test_error"] < 30.0 and 0.7 * 30 <= runs[0]["seconds"] <= 30.0 + 5.0
    summary = (out / "summary.md").read_text()
    assert "| quake |" in summary and "44.70" in summary and "44.72" in summary
    assert not (out / "models" / "quake-optdivbo-0").exists()
    assert bench.main(argv) == 0  # a rerun resumes: nothing new to run
    assert len((out / "runs.jsonl").read_text().splitlines()) == 1
    with pytest.raises(SystemExit):
        bench.main(["--data", str(csv), "--time-budget", "0"])
