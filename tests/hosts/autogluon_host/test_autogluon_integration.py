"""optdiv.integrations.autogluon against a real TabularPredictor (AutoGluon-Tabular 1.6.3).

Every test trains real models through AutoGluon on breast_cancer (or diabetes), kept small: few
suggestions, fast families, a per-model time cap. AutoGluon is imported inside the tests.
"""

from __future__ import annotations

import numpy as np
import pytest

FAST = ["GBM", "RF", "XT", "KNN", "LR"]


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
def test_hook_trains_suggested_models_and_reads_their_predictions(tmp_path):
    from optdiv.integrations import autogluon as oag

    train, val, test = _breast_cancer()
    predictor = _predictor(tmp_path, eval_metric="accuracy")
    seen = []
    result = oag.fit(predictor, train, tuning_data=val, method="optdivbo", n_models=8, n_initial=3,
                     families=FAST, model_time_limit=10, n_candidates=300, seed=3, callback=seen.append)

    assert result.predictor is predictor
    assert [t.index for t in seen] == list(range(8))  # the callback saw every trial, in order
    ok = [t for t in result.trials if t.status == "ok"]
    assert len(ok) == 8, [(t.model, t.error) for t in result.trials]
    assert {t.family for t in result.trials} <= set(FAST)

    # every suggested model is in AutoGluon's leaderboard under its trial name
    board = predictor.leaderboard()
    names = set(board["model"])
    for t in ok:
        assert t.model in names and t.model.endswith("_OD%d" % t.index)
        assert t.score_val == pytest.approx(float(board.loc[board["model"] == t.model, "score_val"].iloc[0]))

    # the suggested hyperparameters reached AutoGluon's model
    for t in ok:
        fitted = predictor.model_hyperparameters(t.model, output_format="all")
        for key, value in t.hyperparameters.items():
            assert fitted[key] == value, (t.model, key)

    # predictions were read back for every trained model, on AutoGluon's validation rows
    assert result.y_val.shape == (len(val),)
    again = predictor.predict_proba_multi(models=result.models, as_pandas=False, inverse_transform=False)
    for t, obs in zip(result.trials, result.history):
        assert obs.val_pred.shape == (len(val), 2) and obs.val_pred.dtype == np.float32
        np.testing.assert_allclose(obs.val_pred, again[t.model], rtol=1e-6, atol=1e-6)
        assert obs.val_loss == pytest.approx(1.0 - t.score_val)  # accuracy -> error

    # after the random start the diversity-aware selector made the suggestions
    assert all(t.info["strategy"] == "random" for t in result.trials[:3])
    guided = result.trials[3:]
    assert all(t.info["strategy"] == "optdivbo" for t in guided)
    assert any(t.info.get("weight", 0.0) > 0 and t.info.get("pool") for t in guided)

    # AutoGluon's weighted ensemble over the suggested models is the predictor's choice and predicts
    assert result.ensemble_members == [predictor.model_best]
    assert predictor.model_best.startswith("WeightedEnsemble")
    assert set(predictor.model_info(predictor.model_best)["stacker_info"]["base_model_names"]) <= set(result.models)
    labels = predictor.predict(test)
    assert set(labels.unique()) <= {"benign", "malignant"}
    assert (labels == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_failed_model_fits_do_not_stop_the_loop(tmp_path, monkeypatch):
    from optdiv.integrations import autogluon as oag

    train, val, _ = _breast_cancer()
    real = oag.to_hyperparameters
    calls = []

    def broken_for_some(config, task):
        calls.append(config)
        if len(calls) in (1, 3):  # the very first fit and a later fit_extra both fail inside LightGBM
            return "GBM", {"num_leaves": -5}
        return real(config, task)

    monkeypatch.setattr(oag, "to_hyperparameters", broken_for_some)
    predictor = _predictor(tmp_path)
    result = oag.fit(predictor, train, tuning_data=val, method="divbo", n_models=6, n_initial=2,
                     families=["KNN", "LR", "XT"], model_time_limit=10, n_candidates=200)

    assert len(result.trials) == 6
    status = [t.status for t in result.trials]
    assert status[0] == "failed" and status[2] == "failed", status
    assert status[1] == "ok" and status[3:] == ["ok"] * 3, [(t.status, t.error) for t in result.trials]
    for t in (result.trials[0], result.trials[2]):
        assert t.model is None and "num_leaves" in t.error
        assert result.history[t.index].val_pred is None and result.history[t.index].val_loss == np.inf
    assert set(result.models) <= set(predictor.model_names())
    assert not any(m.endswith(("_OD0", "_OD2")) for m in predictor.model_names())
    assert predictor.predict(val).shape == (len(val),)


@pytest.mark.timeout(600)
def test_optdiv_ensemble_is_selectable(tmp_path):
    from optdiv.integrations import autogluon as oag

    train, val, test = _breast_cancer()
    predictor = _predictor(tmp_path)
    result = oag.fit(predictor, train, tuning_data=val, method="optdivbo", n_models=5, n_initial=3,
                     families=["KNN", "LR", "XT"], model_time_limit=10, n_candidates=200, ensemble="optdiv")

    assert result.ensemble == "optdiv"
    assert result.ensemble_members and set(result.ensemble_members) <= set(result.models)
    assert result.ensemble_weights.sum() == pytest.approx(1.0)
    assert not any(m.startswith("WeightedEnsemble") for m in predictor.model_names())

    proba = result.predict_proba(test)
    assert list(proba.columns) == list(predictor.class_labels)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    manual = sum(w * predictor.predict_proba(test, model=m) for m, w in
                 zip(result.ensemble_members, result.ensemble_weights))
    np.testing.assert_allclose(proba.to_numpy(), manual.to_numpy(), atol=1e-6)
    assert (result.predict(test) == test["target"]).mean() > 0.9


@pytest.mark.timeout(600)
def test_regression_hook_uses_values_and_the_metric(tmp_path):
    from sklearn.datasets import load_diabetes

    from optdiv.integrations import autogluon as oag

    df = load_diabetes(as_frame=True).frame
    train, val, test = df.iloc[:260], df.iloc[260:350], df.iloc[350:]
    predictor = _predictor(tmp_path, eval_metric="mean_absolute_error")
    result = oag.fit(predictor, train, tuning_data=val, n_models=4, n_initial=2, families=["KNN", "LR"],
                     n_candidates=200, num_cpus=1)  # num_cpus reaches fit and every fit_extra

    assert all(t.status == "ok" for t in result.trials)
    assert result.history[0].val_pred.shape == (len(val),)
    np.testing.assert_allclose(result.y_val, val["target"].to_numpy())
    for obs in result.history:  # AutoGluon's MAE score, turned into a loss, is the MAE of the stored predictions
        assert obs.val_loss == pytest.approx(np.abs(obs.val_pred - result.y_val).mean(), rel=1e-4)
    preds = predictor.predict(test)
    assert np.abs(preds - test["target"]).mean() < np.abs(test["target"] - train["target"].mean()).mean()


@pytest.mark.timeout(600)
def test_searcher_inside_autogluon_hpo_gets_predictions_for_every_trial(tmp_path):
    from autogluon.common import space

    from optdiv.integrations import autogluon as oag

    assert oag.register_searchers() == ["optdivbo", "divbo"]
    train, val, test = _breast_cancer()
    records = []  # list.append survives AutoGluon's deep copy of hyperparameter_tune_kwargs
    predictor = _predictor(tmp_path).fit(
        train, tuning_data=val, time_limit=240,
        hyperparameters={"GBM": {"num_boost_round": 50, "num_leaves": space.Int(4, 64, default=31),
                                 "learning_rate": space.Real(0.01, 0.3, default=0.1, log=True)}},
        hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "optdivbo", "num_trials": 6,
                                    "search_options": {"n_initial": 3, "callback": records.append, "seed": 1}},
    )

    assert [r["trial"] for r in records] == list(range(6))
    assert all(r["has_predictions"] for r in records)
    assert len({(r["config"]["num_leaves"], r["config"]["learning_rate"]) for r in records}) == 6
    trial_models = [m for m in predictor.model_names() if m.startswith("LightGBM/T")]
    assert sorted(trial_models) == ["LightGBM/T%d" % i for i in range(1, 7)]
    assert (predictor.predict(test) == test["target"]).mean() > 0.9


def test_searcher_encoding_and_choice_without_training():
    """The searcher's own arithmetic: encoding in [0, 1] and a guided choice once predictions exist."""
    from autogluon.common import space

    from optdiv.integrations import autogluon as oag

    ss = {"lr": space.Real(1e-3, 1e-1, default=1e-2, log=True), "depth": space.Int(2, 10, default=4),
          "kind": space.Categorical("a", "b", "c"), "fixed": 7}
    searcher = oag.OptDivSearcher(search_space=ss, reward_attribute="reward", n_initial=2, n_candidates=50)
    x = searcher.encode([{"lr": 1e-2, "depth": 10, "kind": "b", "fixed": 7}])
    np.testing.assert_allclose(x, [[0.5, 1.0, 0.5]])
    rng = np.random.default_rng(0)
    searcher._y_val = rng.integers(0, 2, 40)
    for _ in range(4):
        config = searcher.get_config()
        p = rng.random(40).astype(np.float32)
        searcher.update(config, reward=float(rng.random()))
        searcher._observed[-1]["pred"] = np.stack([1 - p, p], axis=1)
    config = searcher.get_config()
    assert set(config) == set(ss) and config["fixed"] == 7
    assert searcher._pickle_config(config) not in {searcher._pickle_config(o["config"]) for o in searcher.observations}


def test_eval_metrics_follow_the_metric_vocabulary():
    """The hook (before and after fit) and the searcher read AutoGluon's eval_metric the same way."""
    from types import SimpleNamespace

    from autogluon.core.metrics import get_metric

    from optdiv.integrations import autogluon as oag

    cases = {("binary", "accuracy"): "error", ("binary", "roc_auc"): "error", ("binary", "log_loss"): "log_loss",
             ("multiclass", "balanced_accuracy"): "error", ("regression", "rmse"): "mse",
             ("regression", "r2"): "mse", ("regression", "mape"): "mse", ("regression", "mae"): "mae",
             ("regression", "median_absolute_error"): "mae", ("quantile", "pinball_loss"): "mse"}
    for (problem_type, name), loss in cases.items():
        scorer = get_metric(name, problem_type)
        task = "regression" if problem_type in ("regression", "quantile") else "classification"
        predictor = SimpleNamespace(problem_type=problem_type, eval_metric=scorer,
                                    _learner=SimpleNamespace(eval_metric=scorer))
        searcher = oag.OptDivSearcher(search_space={"x": 1}, reward_attribute="reward")
        searcher._trial_paths = (None, None, None, problem_type, scorer)
        assert oag.optdiv_metric(predictor) == oag._metric_before_fit(predictor, task) == searcher._metric() == loss
    none = SimpleNamespace(_learner=SimpleNamespace(eval_metric=None))
    assert oag._metric_before_fit(none, "classification") == "error"
    assert oag._metric_before_fit(none, "regression") == "mse"


def test_bad_input_is_rejected_with_clear_errors(tmp_path):
    import pandas as pd

    from optdiv.integrations import autogluon as oag

    train, _, _ = _breast_cancer()
    with pytest.raises(ValueError, match="unknown method"):
        oag.fit(_predictor(tmp_path), train, method="smac")
    with pytest.raises(ValueError, match="unknown ensemble"):
        oag.fit(_predictor(tmp_path), train, ensemble="stacking")
    with pytest.raises(ValueError, match="unknown AutoGluon model famil"):
        oag.fit(_predictor(tmp_path), train, families=["GBM", "NN_MAGIC"])
    with pytest.raises(ValueError, match="train_data is required"):
        oag.fit(_predictor(tmp_path))
    with pytest.raises(ValueError, match="chosen by the search"):
        oag.fit(_predictor(tmp_path), train, hyperparameters={"GBM": {}})
    with pytest.raises(TypeError, match="TabularPredictor"):
        oag.fit(object(), train)
    with pytest.raises(ValueError, match="no label column"):
        oag.fit(_predictor(tmp_path), pd.DataFrame({"a": [1, 2, 3]}))
    if "CAT" not in oag.available_families():
        with pytest.raises(ImportError, match="catboost"):
            oag.fit(_predictor(tmp_path), train, families=["CAT"])
    assert oag.to_hyperparameters(
        {"classifier:__choice__": "random_forest", "classifier:random_forest:max_features": "0.5",
         "classifier:random_forest:max_leaf_nodes": 5000, "classifier:random_forest:min_samples_leaf": 3},
        "classification") == ("RF", {"max_leaf_nodes": 5000, "min_samples_leaf": 3, "max_features": 0.5})


@pytest.mark.timeout(600)
def test_table6_command_runs_end_to_end_on_a_small_csv(tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    # benchmarks/autogluon_compare.py is a script of the checkout, not a module of the package: load it by path
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "autogluon_compare.py"
    spec = importlib.util.spec_from_file_location("autogluon_compare", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    train, val, test = _breast_cancer()
    csv = tmp_path / "quake.csv"  # a paper dataset's name, so the paper columns are filled in
    train.head(200).to_csv(csv, index=False)
    out = tmp_path / "cmp"
    argv = ["--data", str(csv), "--methods", "optdivbo", "--seeds", "0", "--time-budget", "20",
            "--n-models", "3", "--out", str(out)]
    assert bench.main(argv) == 0
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 1 and runs[0]["method"] == "optdivbo" and runs[0]["trials"] == 3
    assert 0.0 <= runs[0]["test_error"] < 30.0 and runs[0]["seconds"] <= 20.0 + 5.0
    summary = (out / "summary.md").read_text()
    assert "| quake |" in summary and "44.70" in summary and "44.72" in summary
    assert not (out / "models" / "quake-optdivbo-0").exists()
    assert bench.main(argv) == 0  # a rerun resumes: nothing new to run
    assert len((out / "runs.jsonl").read_text().splitlines()) == 1
    with pytest.raises(SystemExit):
        bench.main(["--data", str(csv), "--time-budget", "0"])
