"""k-fold cross-validation mode: the view's folds, out-of-fold evaluation, rho tuning, resume and the CLI flag."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.tree import DecisionTreeClassifier
from tiny_space import build, tiny_space

from optdiv.core.agnostic_baselines import RHO_GRID, ensemble_loss
from optdiv.core.ensemble import agnostic_bayes_weights
from optdiv.core.metrics import mean_loss, per_example_loss
from optdiv.data import Splits, cross_validation_view, from_frame, split
from optdiv.engine.run import run
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
import optdiv.evaluation.fitting as fitting_module
from optdiv.final.choice import choose_members
from optdiv.storage.files import RunStore, RunStoreError

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}
TREE = {"algorithm": "tree", "depth": 3, "leaf": 1, "task": "classification"}


def _breast_cancer(rows=240):
    frame = load_breast_cancer(as_frame=True).frame.sample(rows, random_state=0)
    return from_frame(frame, target="target", name="breast_cancer")


@pytest.fixture(scope="module")
def cls_splits():
    return split(_breast_cancer(), seed=0)


# --------------------------------------------------------------------------- #
# The view
# --------------------------------------------------------------------------- #


def test_view_pools_train_and_validation_with_stratified_folds(cls_splits):
    view = cross_validation_view(cls_splits, 5, seed=3)
    n = len(cls_splits.y_train) + len(cls_splits.y_val)
    assert len(view.X_train) == len(view.X_val) == len(view.y_val) == n
    pd.testing.assert_frame_equal(view.X_train, view.X_val)
    np.testing.assert_array_equal(view.y_train, view.y_val)
    np.testing.assert_array_equal(view.y_train, np.concatenate([cls_splits.y_train, cls_splits.y_val]))
    pd.testing.assert_frame_equal(view.X_train.iloc[len(cls_splits.y_train):].reset_index(drop=True),
                                  cls_splits.X_val)
    assert view.X_test is cls_splits.X_test and view.y_test is cls_splits.y_test
    # every row in exactly one fold; folds 0..4, none empty, sizes within one of each other
    assert view.folds.shape == (n,) and set(np.unique(view.folds)) == set(range(5))
    sizes = np.bincount(view.folds, minlength=5)
    assert sizes.sum() == n and sizes.min() >= 1 and sizes.max() - sizes.min() <= 1
    # stratified: each class's count per fold differs by at most one
    for label in (0, 1):
        per_fold = np.bincount(view.folds[view.y_val == label], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
    # deterministic by seed, and the seed matters
    np.testing.assert_array_equal(cross_validation_view(cls_splits, 5, seed=3).folds, view.folds)
    assert not np.array_equal(cross_validation_view(cls_splits, 5, seed=4).folds, view.folds)


def test_view_of_a_regression_split_is_shuffled_and_balanced():
    frame = load_diabetes(as_frame=True).frame.sample(100, random_state=0)
    splits = split(from_frame(frame, target="target", task="regression"), seed=0)
    view = cross_validation_view(splits, 3, seed=0)
    sizes = np.bincount(view.folds)
    assert len(sizes) == 3 and sizes.max() - sizes.min() <= 1
    assert not np.array_equal(view.folds, np.arange(len(view.folds)) % 3)  # shuffled, not dealt in row order


@pytest.mark.parametrize("k", [1, 0, -2, 2.5, True, "3"])
def test_bad_number_of_folds_is_refused(cls_splits, k):
    with pytest.raises(ValueError, match="k|folds"):
        cross_validation_view(cls_splits, k, seed=0)


def test_more_folds_than_rows_and_a_view_of_a_view_are_refused(cls_splits):
    n = len(cls_splits.y_train) + len(cls_splits.y_val)
    assert len(cross_validation_view(cls_splits, n, seed=0).folds) == n  # leave-one-out is allowed
    with pytest.raises(ValueError, match=f"2 <= k <= {n}"):
        cross_validation_view(cls_splits, n + 1, seed=0)
    with pytest.raises(ValueError, match="already a cross-validation view"):
        cross_validation_view(cross_validation_view(cls_splits, 3, seed=0), 3, seed=0)


# --------------------------------------------------------------------------- #
# The evaluator
# --------------------------------------------------------------------------- #


def test_out_of_fold_prediction_equals_fitting_each_fold_by_hand(cls_splits):
    view = cross_validation_view(cls_splits, 4, seed=1)
    obs = Evaluator(build, view, "classification", "error", n_classes=2, seed=7, in_process=True).evaluate(TREE, 0)
    assert obs.status == "ok", obs.error
    X, y, Xt = view.X_train.to_numpy(), view.y_train, cls_splits.X_test.to_numpy()
    oof, test = np.zeros((len(y), 2)), np.zeros((len(Xt), 2))
    for fold in range(4):
        inside = view.folds == fold
        tree = DecisionTreeClassifier(max_depth=3, min_samples_leaf=1, random_state=7).fit(X[~inside], y[~inside])
        oof[inside] = tree.predict_proba(X[inside])
        test += tree.predict_proba(Xt) / 4
    np.testing.assert_allclose(obs.val_pred, oof, atol=1e-6)
    np.testing.assert_allclose(obs.test_pred, test, atol=1e-6)
    assert obs.val_loss == pytest.approx(float(mean_loss(oof, y, "error")))
    assert obs.test_loss == pytest.approx(float(mean_loss(test, cls_splits.y_test, "error")))
    seconds = obs.measures["predict_seconds"]
    assert 0 < seconds < obs.fit_seconds
    assert obs.measures["predict_us_per_row"] == pytest.approx(seconds / len(y) * 1e6)


def _iris_view_with_a_class_in_one_fold():
    """Iris where class 2 has two rows, both in fold 0: that fold's training part lacks the class."""
    data = load_iris(as_frame=True)
    keep = np.concatenate([np.arange(0, 30), np.arange(50, 80), [100, 101]])
    X = data.data.iloc[keep].reset_index(drop=True)
    y = np.asarray(data.target)[keep].astype(np.int64)
    folds = np.arange(len(y)) % 3
    folds[-2:] = 0
    return Splits(X, y, X, y, X.iloc[-2:], y[-2:], folds)  # test rows: the class-2 rows


def test_a_fold_lacking_a_class_still_gives_every_class_column():
    view = _iris_view_with_a_class_in_one_fold()
    obs = Evaluator(build, view, "classification", "error", n_classes=3, in_process=True).evaluate(TREE, 0)
    assert obs.status == "ok", obs.error
    assert obs.val_pred.shape == (len(view.y_val), 3) and obs.test_pred.shape == (2, 3)
    np.testing.assert_allclose(obs.val_pred.sum(1), 1.0, atol=1e-6)
    assert np.all(obs.val_pred[view.folds == 0, 2] == 0)  # fold 0's model never saw class 2
    # the two models that saw class 2 recognise its rows, fold 0's cannot: the mean over folds is 2/3
    np.testing.assert_allclose(obs.test_pred[:, 2], 2 / 3, atol=1e-6)


def test_any_fold_failing_fails_the_evaluation(cls_splits):
    view = cross_validation_view(cls_splits, 3, seed=0)
    folds = view.folds.copy()
    folds[view.y_train == 1] = 0  # fold 0's training part has class 0 only: logistic regression refuses
    view.folds = folds
    linear = {"algorithm": "linear", "C": 1.0, "task": "classification"}
    obs = Evaluator(build, view, "classification", "error", n_classes=2, in_process=True).evaluate(linear, 0)
    assert obs.status == "failed" and obs.val_pred is None and obs.val_loss == 1.0
    assert "class" in obs.error


def test_holdout_splits_keep_the_single_fit_path(cls_splits, monkeypatch):
    assert cls_splits.folds is None

    def refuse(*args, **kwargs):
        raise AssertionError("a holdout evaluation must not take the cross-validation path")

    monkeypatch.setattr(fitting_module, "_fit_predict_folds", refuse)
    obs = Evaluator(build, cls_splits, "classification", "error", n_classes=2, seed=7, in_process=True).evaluate(TREE, 0)
    assert obs.status == "ok", obs.error
    tree = DecisionTreeClassifier(max_depth=3, random_state=7).fit(cls_splits.X_train.to_numpy(), cls_splits.y_train)
    np.testing.assert_allclose(obs.val_pred, tree.predict_proba(cls_splits.X_val.to_numpy()), atol=1e-6)


# --------------------------------------------------------------------------- #
# The engine
# --------------------------------------------------------------------------- #


def test_search_with_cv_tunes_agnostic_bayes_rho_on_the_out_of_fold_loss(cls_splits):
    result = search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
                    budget=6, seed=2, metric="log_loss", ensemble="agnostic_bayes", optimizer_options=FAST,
                    cv=3)
    assert result.info["cv"] == 3 and result.info["evaluation"] == "3-fold CV"
    y_oof = cross_validation_view(cls_splits, 3, seed=2).y_val
    ok = [i for i, obs in enumerate(result.history) if obs.status == "ok"]
    assert len(ok) >= 2 and all(result.history[i].val_pred.shape == (len(y_oof), 2) for i in ok)
    preds = np.stack([result.history[i].val_pred for i in ok])
    # log loss: continuous, so rho changes the ensemble's score even where every model's OOF error is 0
    losses = per_example_loss(preds, y_oof, "log_loss").T
    scores = [ensemble_loss(preds, y_oof, agnostic_bayes_weights(losses, "bootstrap", 1000, rho=r, seed=2),
                            "log_loss") for r in RHO_GRID]
    assert max(scores) > min(scores)  # rho matters here, so a fixed or wrong rho would be caught
    best = int(np.argmin(scores))  # first of the lowest, as the tuning keeps the first on ties
    assert result.info["rho"] == pytest.approx(RHO_GRID[best])
    weights = agnostic_bayes_weights(losses, "bootstrap", 1000, rho=RHO_GRID[best], seed=2)
    keep = np.flatnonzero(weights > 1e-6)
    assert result.member_indices == [ok[i] for i in keep]
    np.testing.assert_allclose(result.weights, weights[keep] / weights[keep].sum())
    assert result.val_loss == pytest.approx(scores[best])  # the reported validation error is the OOF error
    # AMin and SMin work on the same out-of-fold predictions
    members, _ = choose_members(result.history, y_oof, "log_loss", "amin", seed=0)
    assert result.history[members[0]].val_loss == min(result.history[i].val_loss for i in ok)
    members, weights = choose_members(result.history, y_oof, "log_loss", "smin")
    assert weights.sum() == pytest.approx(1.0) and set(members) <= set(ok)


def test_holdout_search_keeps_rho_one(cls_splits):
    result = search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
                    budget=4, seed=2, ensemble="agnostic_bayes", optimizer_options=FAST)
    assert result.info["rho"] == 1.0 and result.info["evaluation"] == "holdout" and result.info["cv"] is None
    assert all(result.history[i].val_pred.shape[0] == len(cls_splits.y_val) for i in result.member_indices)


def test_cv_with_an_explicit_evaluator_is_refused(cls_splits):
    class Replay:  # like optdiv.bench.replay.LibraryEvaluator: stored holdout predictions, no splits
        def evaluate(self, config, index=-1):
            raise AssertionError("never reached")

    with pytest.raises(ValueError, match="holdout predictions"):
        search(cls_splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"),
               budget=2, evaluator=Replay(), cv=3)


def _rows_seen(pipe) -> int:
    """Training rows of a tiny-space member: its scaler's count, or its tree root's sample count."""
    model = pipe.steps[-1][1]
    return int(model.steps[0][1].n_samples_seen_) if hasattr(model, "steps") else int(model.tree_.n_node_samples[0])


def test_run_records_cv_and_refuses_resuming_with_another(tmp_path):
    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(200, random_state=1).to_csv(csv, index=False)
    out = tmp_path / "run"
    kwargs = dict(target="target", out=str(out), seed=0, method="rs-es", space=tiny_space("classification"),
                  optimizer_options=FAST, ensemble="agnostic_bayes")
    result, summary = run(str(csv), budget=2, cv=3, **kwargs)
    saved = json.loads((out / "result.json").read_text())
    assert saved["evaluation"] == "3-fold CV" and saved["cv"] == 3
    assert np.isclose(RHO_GRID, saved["rho"]).any()
    assert json.loads((out / "meta.json").read_text())["cv"] == 3
    holdout = split(from_frame(pd.read_csv(csv), target="target"), seed=0)
    pooled = cross_validation_view(holdout, 3, 0, "classification")
    n_pooled = len(pooled.y_val)
    # the default keeps each member's three fold models, each fitted on the pooled rows outside its fold
    assert all(isinstance(member, fitting_module.FoldBag) for member in result.model.members)
    assert [sorted(_rows_seen(p) for p in member.pipelines) for member in result.model.members] == [
        sorted(n_pooled - np.bincount(pooled.folds))] * len(result.model.members)
    refit, _ = run(str(csv), budget=2, cv=3, **{**kwargs, "out": str(tmp_path / "refit")}, fold_models="refit")
    assert [_rows_seen(member) for member in refit.model.members] == [n_pooled] * len(refit.model.members)
    with pytest.raises(RunStoreError, match="cv"):
        run(str(csv), budget=3, resume=True, cv=None, **kwargs)  # holdout now
    with pytest.raises(RunStoreError, match="cv"):
        run(str(csv), budget=3, resume=True, cv=4, **kwargs)
    with pytest.raises(RunStoreError, match="3-fold cross-validation"):
        search(holdout, "classification", n_classes=2, method="rs-es", space=tiny_space("classification"),
               budget=3, store=RunStore(out), optimizer_options=FAST)
    resumed, _ = run(str(csv), budget=3, resume=True, cv=3, **kwargs)
    assert len(resumed.history) == 3
    assert [o.config for o in resumed.history[:2]] == [o.config for o in result.history]


def test_cli_cv_option(tmp_path, capsys):
    from optdiv.cli import build_parser, main

    parser = build_parser()
    assert parser.parse_args(["run", "--data", "x.csv"]).cv == "auto"
    assert parser.parse_args(["run", "--data", "x.csv", "--cv", "none"]).cv is None
    assert parser.parse_args(["run", "--data", "x.csv", "--cv", "5"]).cv == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--data", "x.csv", "--cv", "some"])
    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(60, random_state=0).to_csv(csv, index=False)
    # one fold is refused with the options, more folds than rows once the data are read: either before any run
    # directory is written
    assert main(["run", "--data", str(csv), "--cv", "1", "--quiet", "--out", str(tmp_path / "run")]) == 2
    assert "cv must be a number of folds (at least 2)" in capsys.readouterr().err
    assert main(["run", "--data", str(csv), "--cv", "49", "--quiet", "--out", str(tmp_path / "run")]) == 2
    assert "2 <= k <= 48" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_automatic_cv_folds_small_data_and_holds_out_on_large():
    from optdiv.data import AUTO_CV_FOLDS, AUTO_CV_MAX_ROWS, resolve_cv

    assert resolve_cv("auto", 200) == AUTO_CV_FOLDS == 5
    assert resolve_cv("auto", AUTO_CV_MAX_ROWS) == 5 and resolve_cv("auto", AUTO_CV_MAX_ROWS + 1) is None
    assert resolve_cv(3, 10**6) == 3 and resolve_cv(None, 200) is None  # given folds, or holdout, are kept
    with pytest.raises(ValueError, match="'auto'"):
        resolve_cv("yes", 200)


def test_automatic_cv_in_run_and_the_estimators_default_chooses_folds_on_small_data(tmp_path):
    from optdiv.sklearn import OptDivClassifier

    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(150, random_state=1).to_csv(csv, index=False)
    _, summary = run(str(csv), target="target", out=str(tmp_path / "run"), seed=0, method="rs-es",
                     space=tiny_space("classification"), optimizer_options=FAST, budget=2, cv="auto")
    assert summary["cv"] == 5 and json.loads((tmp_path / "run" / "meta.json").read_text())["cv"] == 5
    frame = load_breast_cancer(as_frame=True).frame.sample(150, random_state=1)
    model = OptDivClassifier(method="rs-es", space=tiny_space("classification"), budget=2).fit(
        frame.drop(columns="target"), frame["target"])
    assert model.result_.info["cv"] == 5
    holdout = OptDivClassifier(method="rs-es", space=tiny_space("classification"), budget=2, cv=None).fit(
        frame.drop(columns="target"), frame["target"])
    assert holdout.result_.info.get("cv") is None


def test_automatic_cv_keeps_a_validation_set_the_caller_gives():
    from optdiv.sklearn import OptDivClassifier

    frame = load_breast_cancer(as_frame=True).frame.sample(150, random_state=1)
    X, y = frame.drop(columns="target"), frame["target"]
    model = OptDivClassifier(method="rs-es", space=tiny_space("classification"), budget=2).fit(
        X[:100], y[:100], X_val=X[100:], y_val=y[100:])
    assert model.result_.info.get("cv") is None
    assert len(model.result_.history[0].val_pred) == 50  # scored on the rows given, not out of fold
