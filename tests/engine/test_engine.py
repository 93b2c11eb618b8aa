"""The search loop end to end on a tiny space: methods, failures, resume, result.json, bad input."""

import json
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from tiny_space import tiny_space

from optdiv.data import DataError, from_frame, split
from optdiv.engine.loop import START_FAILURES_TO_STOP
from optdiv.engine.run import run
from optdiv.engine.search import resolve_metric, search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.observation import WORKER_START_FAILED
from optdiv.storage.files import RunStore, RunStoreError
from optdiv.strategies.methods import get_method
from optdiv.strategies.model_based import Optimizer

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}


def _breast_cancer(rows=300):
    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.frame.sample(rows, random_state=0)
    return from_frame(frame, target="target", name="breast_cancer")


def _diabetes(rows=300):
    frame = load_diabetes(as_frame=True).frame.sample(rows, random_state=0)
    return from_frame(frame, target="target", task="regression", name="diabetes")


@pytest.fixture(scope="module")
def cls_splits():
    return split(_breast_cancer(), seed=0)


@pytest.mark.parametrize("method", ["rs", "bo", "divbo", "optdivbo", "optdivbo-", "rb-es", "kbo-es", "eo", "nes",
                                    "divbo-stacking", "bo-es", "tpe-es", "dac-sb-es", "optdivbo-dac"])
def test_each_method_finishes_and_beats_chance(cls_splits, method):
    result = search(
        cls_splits, "classification", n_classes=2, method=method, space=tiny_space("classification"),
        budget=9, seed=1, optimizer_options=FAST,
    )
    assert len(result.history) == 9
    assert sum(result.weights) == pytest.approx(1.0)
    assert result.test_loss < 0.2  # breast_cancer: a majority guess errs on ~37%
    if get_method(method).final == "single":
        assert len(result.member_indices) == 1
    assert len(result.suggest_seconds) == 9
    assert len({tuple(sorted(obs.config.items())) for obs in result.history}) == 9  # nothing suggested twice


def test_diversity_methods_use_the_selector_after_the_initial_design(cls_splits):
    space = tiny_space("classification")
    optimizer = Optimizer(space, "optdivbo", "error", seed=0, **FAST)
    result = search(cls_splits, "classification", n_classes=2, method="optdivbo", space=space, budget=7,
                    seed=0, optimizer_options=FAST)
    history = result.history
    suggestion = optimizer.suggest(history, y_val=cls_splits.y_val)
    assert suggestion.info["strategy"] == "optdivbo"
    assert 0 < suggestion.info["weight"] < 1
    assert suggestion.info["pool"], "the pool of the ensemble so far is reported"
    early = optimizer.suggest(history[:3], y_val=cls_splits.y_val)
    assert early.info["strategy"] == "random"


@pytest.mark.parametrize("method,kind", [("optdivbo", "zero_one"), ("optdivbo-paper", "zero_one_paper")])
def test_optdivbo_paper_keeps_the_published_clip(cls_splits, method, kind):
    from optdiv.strategies.registry import make_strategy

    space = tiny_space("classification")
    history = search(cls_splits, "classification", n_classes=2, method="rs", space=space, budget=7, seed=0).history
    strategy = make_strategy(get_method(method), space, "error", seed=0, optimizer_options=FAST)
    assert strategy.suggest(history, y_val=cls_splits.y_val).info["diversity_kind"] == kind


def test_regression_search(cls_splits):
    splits = split(_diabetes(), seed=0)
    result = search(splits, "regression", method="optdivbo", metric="mae", space=tiny_space("regression"),
                    budget=8, seed=0, optimizer_options=FAST)
    assert result.info["metric"] == "mae"
    baseline = np.mean(np.abs(splits.y_test - splits.y_train.mean()))
    assert result.test_loss < baseline


def test_failures_are_recorded_and_the_search_goes_on(cls_splits):
    result = search(cls_splits, "classification", n_classes=2, method="rs", space=tiny_space("classification", True),
                    budget=12, seed=3, optimizer_options=FAST)
    failed = [obs for obs in result.history if obs.status != "ok"]
    assert failed, "the crash algorithm should have been sampled at least once in 12 draws"
    assert all(obs.val_pred is None and obs.val_loss == 1.0 for obs in failed)
    assert all("always fails" in obs.error for obs in failed)
    assert all(result.history[i].status == "ok" for i in result.member_indices)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident set is read from /proc on Linux")
def test_a_search_whose_workers_cannot_start_stops_and_names_why(tmp_path, cls_splits):
    """A memory limit below what a worker needs to start fails every start alike: the search stops after a few,
    with the reason, instead of restarting workers until its budget of 500 evaluations is spent."""
    store = RunStore(tmp_path / "run")
    with pytest.raises(RuntimeError, match="could not start; the first with: exceeded the memory limit of 30 MB"):
        search(cls_splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"),
               budget=500, seed=0, memory_limit_mb=30, store=store, optimizer_options=FAST)
    recorded = RunStore(tmp_path / "run").load()
    assert len(recorded) == START_FAILURES_TO_STOP
    assert all(obs.status == "failed" and obs.measures[WORKER_START_FAILED] == 1.0 for obs in recorded)


def test_suggestions_are_deterministic_and_resume_exactly(tmp_path, cls_splits):
    space = tiny_space("classification")
    kwargs = dict(n_classes=2, method="divbo", space=space, seed=5, optimizer_options=FAST)
    full = search(cls_splits, "classification", budget=9, store=RunStore(tmp_path / "a"), **kwargs)
    store = RunStore(tmp_path / "b")
    search(cls_splits, "classification", budget=6, store=store, **kwargs)
    resumed = search(cls_splits, "classification", budget=9, store=RunStore(tmp_path / "b"), **kwargs)
    assert [o.config for o in resumed.history] == [o.config for o in full.history]
    assert [o.val_loss for o in resumed.history] == pytest.approx([o.val_loss for o in full.history])
    assert resumed.member_indices == full.member_indices
    assert len(resumed.suggest_seconds) == 3  # only the missing evaluations ran


def test_run_writes_result_json_and_model(tmp_path):
    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(250, random_state=1).to_csv(csv, index=False)
    out = tmp_path / "run"
    result, summary = run(str(csv), target="target", out=str(out), seed=0, method="optdivbo",
                          space=tiny_space("classification"), budget=7, optimizer_options=FAST)
    saved = json.loads((out / "result.json").read_text())
    for key in ("method", "dataset", "task", "metric", "n_evaluations", "n_failed", "val_error", "test_error",
                "ensemble", "suggest_seconds", "total_seconds"):
        assert key in saved
    assert saved["n_evaluations"] == 7 and len(saved["suggest_seconds"]) == 7
    assert {"config", "weight", "val_error"} <= set(saved["ensemble"][0])
    import joblib

    model = joblib.load(out / "model.joblib")
    frame = pd.read_csv(csv).drop(columns=["target"])
    proba = model.predict_proba(frame)
    assert proba.shape == (250, 2) and np.allclose(proba.sum(1), 1.0)
    with pytest.raises(DataError, match="columns at predict time differ"):
        model.predict(frame.drop(columns=[frame.columns[0]]))
    with pytest.raises(FileExistsError, match="--resume"):
        run(str(csv), target="target", out=str(out), seed=0, method="optdivbo",
            space=tiny_space("classification"), budget=7, optimizer_options=FAST)
    with pytest.raises(RunStoreError, match="method"):
        run(str(csv), target="target", out=str(out), resume=True, seed=0, method="bo",
            space=tiny_space("classification"), budget=8, optimizer_options=FAST)


def test_stacking_model_is_saved_with_its_meta_model(tmp_path):
    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(250, random_state=2).to_csv(csv, index=False)
    result, summary = run(str(csv), target="target", out=str(tmp_path / "run"), seed=0, method="divbo-stacking",
                          space=tiny_space("classification"), budget=8, optimizer_options=FAST)
    import joblib

    model = joblib.load(tmp_path / "run" / "model.joblib")
    assert model.stacker is not None and len(model.members) == min(5, len(result.history))
    frame = pd.read_csv(csv).drop(columns=["target"])
    proba = model.predict_proba(frame)
    assert proba.shape == (250, 2) and np.allclose(proba.sum(1), 1.0)
    # the meta-model, not the uniform average, combines the members
    from optdiv.evaluation.fitting import predict_probabilities

    members = [predict_probabilities(m, frame, 2) for m in model.members]
    np.testing.assert_allclose(proba, model.stacker.predict(members))
    assert summary["test_error"] == pytest.approx(result.test_loss)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: Optimizer(None, "smac", "error"), "unknown method 'smac'"),
        (lambda: resolve_metric("auc", "classification"), "unknown classification metric 'auc'"),
        (lambda: resolve_metric("error", "regression"), "metric 'error' does not fit a regression task"),
        (lambda: resolve_metric("median_absolute_error", "regression"), "cannot compute the regression metric"),
    ],
)
def test_bad_names(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_unknown_space_is_named(cls_splits):
    with pytest.raises(ValueError, match="nospace"):
        search(cls_splits, "classification", n_classes=2, space="nospace", budget=1)


@pytest.mark.parametrize("kind", ["divbo", "zero_one", "zero_one_paper"])
def test_incremental_diversity_matrix_equals_full(kind):
    from optdiv.core.diversity import pairwise_diversity

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=(9, 40)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    optimizer = Optimizer(tiny_space("classification"), "optdivbo", "error")
    for upto in (3, 4, 7, 9):
        ok = list(range(upto))
        got = optimizer._diversity_matrix(ok, p[:upto], y, kind, 25)
    np.testing.assert_allclose(got, pairwise_diversity(p, y, kind), rtol=1e-6, atol=1e-9)
    other = optimizer._diversity_matrix([0, 2, 5], p[[0, 2, 5]], y, kind, 25)  # not an extension: recomputed
    np.testing.assert_allclose(other, pairwise_diversity(p[[0, 2, 5]], y, kind), rtol=1e-6, atol=1e-9)


def test_agnostic_bayes_ensemble_and_time_budget(cls_splits):
    space = tiny_space("classification")
    evaluator = Evaluator(space.build, cls_splits, "classification", "error", n_classes=2, seed=2)
    evaluator.start()  # the budget counts a worker's start-up, which can take seconds on a busy machine
    result = search(cls_splits, "classification", n_classes=2, method="bo-es", space=space, evaluator=evaluator,
                    budget=None, time_budget=10.0, seed=2, ensemble="agnostic_bayes", optimizer_options=FAST)
    assert len(result.history) >= 2
    assert result.weights.sum() == pytest.approx(1.0)
    assert all(result.history[i].status == "ok" for i in result.member_indices)
    assert result.test_loss < 0.2
    with pytest.raises(ValueError, match="budget"):
        search(cls_splits, "classification", n_classes=2, budget=None, time_budget=None)
    with pytest.raises(ValueError, match="ensemble builder"):
        search(cls_splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"),
               budget=2, ensemble="stacking", optimizer_options=FAST)


@pytest.mark.parametrize("ensemble,sampler,vote", [
    ("agnostic_bayes", "dirichlet", True),
    ("agnostic_bayes", "student_t", False),
    ("amin", "bootstrap", False),
    ("smin", "bootstrap", True),
])
def test_agnostic_bayes_builders_samplers_and_vote(cls_splits, ensemble, sampler, vote):
    result = search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
                    budget=8, seed=0, ensemble=ensemble, sampler=sampler, vote=vote, optimizer_options=FAST)
    assert result.weights.sum() == pytest.approx(1.0)
    assert all(result.history[i].status == "ok" for i in result.member_indices)
    assert result.vote == vote
    if ensemble == "amin":
        best = min(obs.val_loss for obs in result.history if obs.status == "ok")
        assert len(result.member_indices) == 1 and result.history[result.member_indices[0]].val_loss == best
    from optdiv.core.metrics import mean_loss
    from optdiv.final.choice import weighted_prediction

    test_pred = weighted_prediction([result.history[i].test_pred for i in result.member_indices], result.weights,
                                    vote=vote)
    assert result.test_loss == pytest.approx(float(mean_loss(test_pred, cls_splits.y_test, "error")))


def test_diversity_pool_by_agnostic_bayes(cls_splits):
    result = search(cls_splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
                    budget=8, seed=0, pool="agnostic_bayes", optimizer_options=FAST)
    assert len(result.history) == 8
    with pytest.raises(ValueError, match="pool builder"):
        search(cls_splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
               budget=7, seed=0, pool="nope", optimizer_options=FAST)
    with pytest.raises(ValueError, match="sampler"):
        search(cls_splits, "classification", n_classes=2, method="bo-es", space=tiny_space("classification"),
               budget=7, seed=0, ensemble="agnostic_bayes", sampler="nope", optimizer_options=FAST)


def test_final_selection_on_another_loss_and_bagged(cls_splits):
    space = tiny_space("classification")
    kwargs = dict(n_classes=2, method="bo-es", space=space, budget=6, seed=0, optimizer_options=FAST)
    plain = search(cls_splits, "classification", **kwargs)
    bagged = search(cls_splits, "classification", ensemble_loss="log_loss", ensemble_bags=5, **kwargs)
    assert [o.config for o in plain.history] == [o.config for o in bagged.history]  # the search is the same
    assert bagged.weights.sum() == pytest.approx(1.0)
    assert bagged.info["metric"] == "error"  # the run's metric is still what is reported
    with pytest.raises(ValueError, match="does not fit a classification task"):
        search(cls_splits, "classification", ensemble_loss="mse", **kwargs)
    with pytest.raises(ValueError, match="ensemble_bags"):
        search(cls_splits, "classification", ensemble_bags=-1, **kwargs)
