"""The time budget covers the whole call: evaluations cut or not started at the deadline, a final model built
from the pipelines saved during the search, and resumed runs without saved pipelines."""

import shutil
import time

import builders
import numpy as np
import pytest
import tiny_space
from sklearn.datasets import load_breast_cancer
from tiny_space import timed_space

from optdiv.budget import FINISH_SECONDS, Deadline, DurationPredictor
from optdiv.data import from_frame, load_dataset, split
from optdiv.engine.run import run
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.evaluation.observation import DEADLINE, WORST_LOSS, Observation, algorithm_of
from optdiv.evaluation.worker import KILL_GRACE
from optdiv.final.fit import fit_model
from optdiv.sklearn import OptDivClassifier
from optdiv.storage.files import RunStore

#: Deadlines and time-outs measured on the wall clock: run alone (see the `timing` marker).
pytestmark = pytest.mark.timing

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}


@pytest.fixture(scope="module")
def cls_splits():
    frame = load_breast_cancer(as_frame=True).frame.sample(300, random_state=0)
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


def test_an_evaluation_is_cut_at_the_callers_time_limit_and_marked_deadline():
    cancer = split(load_dataset("sklearn:breast_cancer"), seed=0)
    with Evaluator(builders.by_name, cancer, "classification", "error", n_classes=2, time_limit=60) as ev:
        assert ev.evaluate({"algorithm": "majority"}, index=0).ok  # the worker is up
        began = time.perf_counter()
        obs = ev.evaluate({"algorithm": "sleeper", "sleep": 30}, index=1, time_limit=1.0)
        waited = time.perf_counter() - began
        assert obs.status == DEADLINE and "deadline" in obs.error and obs.val_pred is None
        assert waited < 1.0 + KILL_GRACE + 1.0
        assert ev.evaluate({"algorithm": "majority"}, index=2, time_limit=30).ok  # a fresh worker, within the cap
        own = ev.evaluate({"algorithm": "sleeper", "sleep": 30}, index=3, time_limit=1e9)
    assert own.status == "timeout" or own.ok  # a cap above the own limit leaves the own limit in charge
    assert own.status != DEADLINE


def test_duration_predictor_per_algorithm_then_over_all():
    predictor = DurationPredictor()
    assert predictor.predict("tree") == 0.0 and predictor.fastest() == 0.0
    for seconds in (1.0, 2.0, 3.0, 4.0, 5.0):
        predictor.observe("forest", seconds)
    predictor.observe("tree", 0.1)
    assert predictor.predict("forest") == pytest.approx(4.0)  # the 75 % quantile
    assert predictor.predict("tree") == pytest.approx(0.1)
    assert predictor.predict("svm") == pytest.approx(np.median([1, 2, 3, 4, 5, 0.1]))  # unseen: over all
    assert predictor.fastest() == pytest.approx(0.1)


def test_search_cuts_the_evaluation_at_the_deadline_discards_it_and_returns_in_time(tmp_path, cls_splits):
    budget = 6.0
    store = RunStore(tmp_path / "run")
    space = timed_space()
    evaluator = Evaluator(space.build, cls_splits, "classification", "error", n_classes=2, time_limit=120)
    evaluator.start()  # a busy machine may take seconds to start a worker: not what this test measures
    began = time.perf_counter()
    result = search(cls_splits, "classification", n_classes=2, method="rs", space=space, budget=None,
                    time_budget=budget, seed=0, store=store, evaluator=evaluator)
    elapsed = time.perf_counter() - began
    assert elapsed < budget + 2.0
    assert result.history[0].algorithm == "tree"  # seed 0 starts with a tree, so there is a model to build
    # the 30 s fit was started (nothing was known of its duration) and cut at the deadline, not stored
    assert "stopped at the deadline" in result.info["stopped"]
    assert all(obs.algorithm == "tree" and obs.ok for obs in store.load())
    assert len(store.load()) == len(result.history)


class ClockedEvaluator(EvaluatorInterface):
    """Evaluates instantly except the ``slow`` algorithm, which fails after 1.5 s; records the time limit of each
    call."""

    takes_time_limit = True

    def __init__(self, y_val):
        self.y_val = np.asarray(y_val)
        self.calls = []

    def evaluate(self, config, index, time_limit=None):
        algorithm = algorithm_of(config)
        self.calls.append((algorithm, time_limit))
        needs = 1.5 if algorithm == "slow" else 0.01
        if time_limit is not None and time_limit < needs:
            time.sleep(max(time_limit, 0.0))
            return Observation(dict(config), DEADLINE, WORST_LOSS["error"], index=index, algorithm=algorithm,
                               fit_seconds=time_limit, error="stopped at the deadline")
        time.sleep(needs)
        if algorithm == "slow":  # a failure: its duration is learned, but it is no member whose refit time the
            # search reserves (a successful slow model among the few first ones would fill the reserve alone)
            return Observation(dict(config), "failed", WORST_LOSS["error"], index=index, algorithm=algorithm,
                               fit_seconds=needs, error="slow and useless")
        pred = np.eye(2, dtype=np.float32)[self.y_val]
        return Observation(dict(config), "ok", 0.0, fit_seconds=needs, val_pred=pred, test_pred=None, index=index,
                           algorithm=algorithm)

    def close(self):
        pass


def test_an_evaluation_predicted_not_to_fit_is_not_started(cls_splits):
    evaluator = ClockedEvaluator(cls_splits.y_val)
    splits = cls_splits.__class__(cls_splits.X_train, cls_splits.y_train, cls_splits.X_val, cls_splits.y_val,
                                  None, None)
    budget = 6.0
    began = time.perf_counter()
    result = search(splits, "classification", n_classes=2, method="rs", space=timed_space(), budget=None,
                    time_budget=budget, seed=0, evaluator=evaluator)
    elapsed = time.perf_counter() - began
    assert elapsed < budget + 0.5
    # when the slow one would not fit, fast ones fill the time left: the search runs up to its reserve
    assert elapsed > budget - FINISH_SECONDS - 1.0
    slow = [limit for algorithm, limit in evaluator.calls if algorithm == "slow"]
    assert slow, "rs draws the slow algorithm"
    assert all(limit >= 1.5 for limit in slow[1:])  # once its 1.5 s were seen, never started with less left
    assert result.info["stopped"].startswith("time budget")
    assert all(obs.status != DEADLINE for obs in result.history)


def test_final_model_is_built_from_saved_pipelines_without_refitting(cls_splits):
    tiny_space.FITS["count"] = 0
    model = OptDivClassifier(method="rs", space=timed_space(with_slow=False), budget=6, seed=1, refit=False)
    model.fit(cls_splits.X_train, cls_splits.y_train, X_val=cls_splits.X_val, y_val=cls_splits.y_val)
    assert tiny_space.FITS["count"] == 0, "no member was refitted in this process"
    final = model.result_.info["final_model"]
    assert (final["rows"], final["loaded"], final["refitted"]) == ("train", len(model.members_), 0)
    assert all(member["source"] == "saved" for member in model.members_)
    assert not model.result_.pipelines.folder.exists(), "the temporary folder goes once the model is built"
    history = model.result_.history  # the loaded members predict what they predicted when evaluated
    combined = sum(m["weight"] * history[m["index"]].val_pred for m in model.members_)
    np.testing.assert_allclose(model.predict_proba(cls_splits.X_val), combined, atol=1e-5)


def test_refit_on_train_and_validation_refits_unless_the_deadline_forbids_it(cls_splits):
    result = search(cls_splits, "classification", n_classes=2, method="rs", space=timed_space(with_slow=False),
                    budget=5, seed=2)
    args = (result, result.space, cls_splits, "classification", [0, 1], None, 2)
    tiny_space.FITS["count"] = 0
    model = fit_model(*args)
    assert tiny_space.FITS["count"] == 0 and result.info["final_model"]["loaded"] == len(model.members)
    proba = model.predict_proba(cls_splits.X_val)
    combined = sum(w * result.history[i].val_pred for i, w in zip(result.member_indices, result.weights))
    np.testing.assert_allclose(proba, combined, atol=1e-5)  # the saved fits are the evaluated ones
    model = fit_model(*args, refit=True, deadline=Deadline(time.perf_counter() + 60))
    final = result.info["final_model"]  # under a deadline the refits run in a worker process, stopped at it
    assert final["refitted"] == len(result.member_indices) and final["loaded"] == 0 and "refit_failed" not in final
    assert final["rows"] == "train+validation"
    times = final["refit_times"]  # each refit's predicted and taken seconds, for checking the reserve
    assert sorted(t["index"] for t in times) == sorted(result.history[i].index for i in result.member_indices)
    assert all(t["ok"] and t["seconds"] > 0 and t["predicted"] > 0 for t in times)
    assert [m["rows"] for m in model.info] == ["train+validation"] * len(model.members)
    refitted = model.predict_proba(cls_splits.X_val)
    assert refitted.shape == proba.shape and not np.allclose(refitted, proba)  # other rows, another model
    model = fit_model(*args, refit=True, deadline=Deadline(time.perf_counter() + 0.1))
    assert tiny_space.FITS["count"] == 0
    assert result.info["final_model"]["rows"] == "train"
    assert "refit_skipped" in result.info["final_model"]


def test_a_refit_in_the_worker_is_saved_or_stopped_at_its_time_limit(tmp_path):
    from optdiv.data import Splits
    from optdiv.evaluation.pipelines import SavedPipelines, splits_digest

    cancer = split(load_dataset("sklearn:breast_cancer"), seed=0)
    rows = Splits(cancer.X_train, cancer.y_train, None, None, None, None)  # a refit has no rows to score
    saved = SavedPipelines(tmp_path / "models")
    with Evaluator(builders.by_name, rows, "classification", "error", n_classes=2, time_limit=60,
                   pipelines_dir=saved.folder) as ev:
        assert ev.fit_and_save({"algorithm": "majority"}, 3) is None
        assert saved.load(splits_digest(cancer.X_train, cancer.y_train), 3).predict(cancer.X_test).shape == (
            len(cancer.X_test),)
        began = time.perf_counter()
        error = ev.fit_and_save({"algorithm": "sleeper", "sleep": 30}, 4, time_limit=1.0)
        assert error == "stopped at the deadline"
        assert time.perf_counter() - began < 1.0 + 2 * KILL_GRACE + 1.0
        assert not saved.has(splits_digest(cancer.X_train, cancer.y_train), 4)


def test_a_resumed_run_without_saved_pipelines_still_builds_its_model(tmp_path):
    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(250, random_state=1).to_csv(csv, index=False)
    out = tmp_path / "run"
    options = dict(target="target", out=str(out), seed=0, method="rs", space=timed_space(with_slow=False), cv=None)
    run(str(csv), budget=4, **options)
    assert list((out / "models").glob("*/*.joblib")), "the run directory keeps the fitted pipelines"
    shutil.rmtree(out / "models")  # as in a run made before pipelines were saved
    tiny_space.FITS["count"] = 0
    result, summary = run(str(csv), budget=7, resume=True, **options)
    sources = {member["index"]: member["source"] for member in result.model.info}
    assert all(source == ("refitted" if index < 4 else "saved") for index, source in sources.items())
    assert tiny_space.FITS["count"] == sum(source == "refitted" for source in sources.values())
    assert summary["final_model"]["loaded"] + summary["final_model"]["refitted"] == len(sources)
    frame = load_breast_cancer(as_frame=True).frame.sample(250, random_state=1).drop(columns=["target"])
    assert result.model.predict_proba(frame).shape == (250, 2)


def test_automatic_time_limit_is_a_tenth_of_the_budget_within_bounds():
    from optdiv.budget import resolve_time_limit

    assert resolve_time_limit("auto", None) == 120.0
    assert resolve_time_limit("auto", 180) == pytest.approx(18.0)
    assert resolve_time_limit("auto", 30) == 10.0  # the floor
    assert resolve_time_limit("auto", 3600) == 120.0  # the cap
    assert resolve_time_limit(45, 180) == 45.0  # a number given is kept
    with pytest.raises(ValueError, match="'auto'"):
        resolve_time_limit("fast", 180)
    with pytest.raises(ValueError, match="positive"):
        resolve_time_limit(0, None)


def test_under_a_time_budget_a_slow_first_configuration_times_out_instead_of_spending_the_budget(cls_splits):
    slow_first = [{"algorithm": "slow"}]
    began = time.perf_counter()
    result = search(cls_splits, "classification", n_classes=2, method="bo-es", space=timed_space(), budget=None,
                    time_budget=40, time_limit="auto", seed=0, portfolio=slow_first,
                    optimizer_options=FAST)
    elapsed = time.perf_counter() - began
    first = result.history[0]
    assert first.algorithm == "slow" and first.status == "timeout"  # cut at 10 s (auto: the floor), kept as evidence
    assert any(obs.ok for obs in result.history[1:])  # the time left bought models, so there is an ensemble
    assert result.member_indices and all(result.history[i].ok for i in result.member_indices)
    assert elapsed < 40 + 10


def test_run_stores_the_seconds_an_automatic_time_limit_stands_for(tmp_path):
    import json

    run("sklearn:breast_cancer", out=str(tmp_path / "run"), method="rs", budget=2, time_budget=300, seed=0)
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["time_limit"] == pytest.approx(30.0)  # a tenth of 300 s: what a resume is checked against
    assert OptDivClassifier().get_params()["time_limit"] == "auto"


def test_refit_under_a_deadline_refits_the_heaviest_members_that_fit_and_keeps_the_rest_on_train(cls_splits):
    from optdiv.final.fit import REFIT_SAFETY, WORKER_REFIT_SAFETY, members_to_refit

    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    assert len(result.member_indices) >= 2
    for position, i in enumerate(result.member_indices):  # pretend each refit takes 1 s (0.75 s on train rows)
        result.history[i].fit_seconds = 0.75
    heaviest = max(range(len(result.member_indices)), key=lambda p: (result.weights[p], -p))
    one = REFIT_SAFETY * 1.0  # what a refit of 1 s is predicted to take

    def predicted(obs):
        return REFIT_SAFETY * obs.fit_seconds * 4 / 3

    assert members_to_refit(result, predicted, left=1.5 * one) == {heaviest}  # one refit fits, two do not
    assert members_to_refit(result, predicted, left=None) == set(range(len(result.member_indices)))
    assert members_to_refit(result, predicted, left=0.9 * one) == set()
    # end to end, the refits in a worker process: enough time for exactly one refit, the heaviest (the others are
    # predicted to take 40 s each: still 10 s at the quickest pace a refit can set). The refit worker is ready
    # before the clock starts, as when the search starts it beside its evaluations (a worker's start-up under load,
    # 2-5 s, is not what this test measures)
    ratio = (len(cls_splits.y_train) + len(cls_splits.y_val)) / len(cls_splits.y_train)
    for position, i in enumerate(result.member_indices):
        result.history[i].fit_seconds = (1.0 if position == heaviest else 40.0) / ratio
    model, final = _refit_with_worker(result, cls_splits, 1.5 * WORKER_REFIT_SAFETY)
    assert final["refitted"] == 1 and "refit_failed" not in final
    assert final["loaded"] == len(model.members) - 1
    assert final["rows"].startswith("train+validation for 1 of") and "refit_skipped" in final
    assert [m["rows"] for m in model.info if m["source"] == "refitted"] == ["train+validation"]


def _refit_with_worker(result, splits, seconds):
    """fit_model with ``refit=True`` under a deadline ``seconds`` (plus the finishing margin) away, its refit worker
    started before the clock starts; (the model, its final-model report)."""
    import pandas as pd

    from optdiv.final.fit import Refitter

    X_all = pd.concat([splits.X_train, splits.X_val], axis=0)
    y_all = np.concatenate([splits.y_train, splits.y_val])
    refitter = Refitter(result.space, X_all, y_all, "classification", 2, 2, result.pipelines,
                        Deadline(time.perf_counter() + 600))
    refitter.evaluator.start()
    deadline = Deadline(time.perf_counter() + FINISH_SECONDS + seconds)
    refitter.deadline, result.refitter = deadline, refitter
    model = fit_model(result, result.space, splits, "classification", [0, 1], None, 2, refit=True, deadline=deadline)
    return model, result.info["final_model"]


def _with_refits_predicted(splits, heaviest: float, second: float, others: float):
    """A small search's result whose members' refits on train+validation are predicted to take ``heaviest``,
    ``second`` and ``others`` seconds by weight (their real refits take a fraction of a second); (result, member
    positions heaviest first)."""
    result = search(splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    assert len(result.member_indices) >= 2
    order = sorted(range(len(result.member_indices)), key=lambda p: (-float(result.weights[p]), p))
    ratio = (len(splits.y_train) + len(splits.y_val)) / len(splits.y_train)
    for position, i in enumerate(result.member_indices):
        result.history[i].fit_seconds = {order[0]: heaviest, order[1]: second}.get(position, others) / ratio
    return result, order


def test_the_time_a_quick_refit_leaves_refits_the_next_member_whose_refit_now_fits(cls_splits):
    """Refits are planned on predictions; one that ends sooner than predicted leaves time that the heaviest of the
    members left out is refitted in, when its own prediction fits what is left."""
    result, order = _with_refits_predicted(cls_splits, 1.5, 2.0, 40.0)
    # 3 s: the plan holds the heaviest only (1.5 + 2 > 3); its refit of a small tree takes far less than 1.5 s;
    # the others stay out even at the quickest pace a refit can set (a quarter of 40 s)
    model, final = _refit_with_worker(result, cls_splits, 3.0)
    refitted = [m["index"] for m in model.info if m["source"] == "refitted"]
    assert sorted(refitted) == sorted(result.member_indices[p] for p in order[:2])
    assert [t["index"] for t in final["refit_times"]] == [result.member_indices[p] for p in order[:2]]


def test_a_member_predicted_over_the_time_left_is_refitted_at_the_pace_its_algorithms_refits_took(cls_splits):
    """A prediction that the refits of the same algorithm have beaten is corrected by the share they took: the
    member predicted at 4 s after a 3 s deadline is refitted once a member of its algorithm refitted in a fraction of
    its prediction."""
    from optdiv.final.refit_time import PACE_BOUNDS

    result, order = _with_refits_predicted(cls_splits, 1.5, 4.0, 40.0)
    model, final = _refit_with_worker(result, cls_splits, 3.0)
    refitted = [m["index"] for m in model.info if m["source"] == "refitted"]
    assert sorted(refitted) == sorted(result.member_indices[p] for p in order[:2])
    first, second = final["refit_times"]
    assert second["predicted"] == pytest.approx(4.0, rel=0.01)  # the plain prediction did not fit in 3 s
    assert first["seconds"] < PACE_BOUNDS[0] * first["predicted"]  # the first refit took under a quarter of its own
    assert first["paced"] == first["predicted"]  # no refit of its algorithm before it: nothing to correct by
    assert second["paced"] == pytest.approx(PACE_BOUNDS[0] * 4.0, rel=0.01)  # at the first one's pace (the bound)


def test_under_cross_validation_members_whose_refit_does_not_fit_are_left_out(cls_splits):
    from optdiv.data import cross_validation_view
    from optdiv.final.fit import REFIT_SAFETY

    cv_splits = cross_validation_view(cls_splits, 3, 0, "classification")
    result = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    n_members = len(result.member_indices)
    assert n_members >= 3
    for i in result.member_indices:  # pretend each refit on all rows takes 1 s (3 folds: 2 s per evaluation)
        result.history[i].fit_seconds = 2.0
    weights = np.asarray(result.weights, dtype=float)
    order = sorted(range(n_members), key=lambda p: (-weights[p], p))
    heaviest_two = [result.member_indices[p] for p in sorted(order[:2])]
    args = (result, result.space, cv_splits, "classification", [0, 1], None, 2)

    tiny_space.FITS["count"] = 0
    model = fit_model(*args, deadline=Deadline(time.perf_counter() + FINISH_SECONDS + 2.5 * REFIT_SAFETY))
    final = result.info["final_model"]
    assert tiny_space.FITS["count"] == 2 == len(model.members)  # two predicted refits fit, a third does not
    assert result.member_indices == heaviest_two and final["members_dropped"] == n_members - 2
    assert result.weights.sum() == pytest.approx(weights.sum())  # rescaled to the same total
    dropped = 1 - weights[order[:2]].sum() / weights.sum()
    assert final["weight_dropped"] == pytest.approx(dropped) and "left out" in final["drop_reason"]
    assert [m["index"] for m in model.info] == heaviest_two and final["rows"] == "train+validation"

    late = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                  budget=12, seed=2)
    heaviest = late.member_indices[order[0]]
    fit_model(late, late.space, cv_splits, "classification", [0, 1], None, 2, deadline=Deadline(time.perf_counter()))
    assert late.member_indices == [heaviest]  # past the deadline the heaviest member still makes a model

    whole = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                   budget=12, seed=2)
    fit_model(whole, whole.space, cv_splits, "classification", [0, 1], None, 2)  # no deadline: every member
    assert len(whole.member_indices) == n_members and "members_dropped" not in whole.info["final_model"]


def test_the_search_starts_the_refit_worker_and_reserves_the_likely_members_refits(cls_splits):
    from optdiv.final.fit import REFIT_WORKER_START
    from optdiv.final.reserve import finish_reserve, likely_members

    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=5, time_budget=120, refit=True, seed=0, classes=[0, 1])
    final = result.info["final_model"]
    assert final["refitted"] == len(result.member_indices) and "refit_failed" not in final
    assert final["rows"] == "train+validation" and result.refitter is None  # used, then its worker ended
    members = likely_members(result.history, cls_splits.y_val, "error", 25, 0)
    assert {obs.index for obs in members} <= {obs.index for obs in result.history if obs.ok}
    for obs in members:
        obs.fit_seconds = 3.0
    waiting = finish_reserve(members, None, None, True, None)
    started = finish_reserve(members, None, None, True, None, started=True)
    assert waiting - started == pytest.approx(REFIT_WORKER_START)
    assert started == pytest.approx(FINISH_SECONDS + 4.0 * len(members))  # 3 s on train is 4 s on train+validation
    half = finish_reserve(members, None, None, True, None, started=True, refits_share=0.5)
    assert half == pytest.approx(FINISH_SECONDS + 2.0 * len(members))  # what a late evaluation may not take
    assert finish_reserve(members, None, None, False, None, refits_share=0.5) == pytest.approx(
        FINISH_SECONDS + 1.5 * 3.0 * len(members))  # refits in this process are not optional: all kept
    # members searched on a 50,000-row sample of 800,000 rows: their refits see 16 times the rows, within a cap
    sampled = finish_reserve(members, None, None, True, None, started=True, rows=(50_000, 800_000))
    assert sampled == pytest.approx(FINISH_SECONDS + 48.0 * len(members))
    capped = finish_reserve(members, None, None, True, None, started=True, rows=(50_000, 800_000), refits_cap=60.0)
    assert capped == pytest.approx(FINISH_SECONDS + min(60.0, 48.0 * len(members)))
    assert finish_reserve(members, None, None, True, None, started=True, refits_share=0.5, rows=(50_000, 800_000),
                          refits_cap=60.0) == pytest.approx(FINISH_SECONDS + min(30.0, 24.0 * len(members)))
    # each refit alone over the cap: none will happen, so none is kept time for
    assert finish_reserve(members, None, None, True, None, started=True, rows=(50_000, 800_000),
                          refits_cap=40.0) == pytest.approx(FINISH_SECONDS)


def test_members_refitted_ahead_cost_the_reserve_only_their_loading_and_the_final_model_reads_them_back(cls_splits):
    import pandas as pd

    from optdiv.final.fit import Refitter
    from optdiv.final.reserve import finish_reserve

    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    members = [result.history[i] for i in result.member_indices]
    assert len(members) >= 2
    X_all = pd.concat([cls_splits.X_train, cls_splits.X_val], axis=0)
    y_all = np.concatenate([cls_splits.y_train, cls_splits.y_val])
    refitter = Refitter(result.space, X_all, y_all, "classification", 2, 2, result.pipelines,
                        Deadline(time.perf_counter() + 600))
    first, second = members[0], members[1]
    times = refitter.refit_ahead([first], lambda obs: 1.0)
    assert [t["index"] for t in times] == [first.index] and times[0]["ok"] and times[0]["ahead"]
    assert refitter.done(first) and not refitter.done(second)
    assert refitter.refit_ahead([first], lambda obs: 1.0) == []  # never twice
    assert refitter.refit_ahead([second], lambda obs: 1e6) == [] and not refitter.done(second)  # would not fit
    for obs in members:  # 3 s on train: a 4 s refit on train+validation each
        obs.fit_seconds = 3.0
    full = finish_reserve(members, None, None, True, None, started=True)
    ahead = finish_reserve(members, None, None, True, None, started=True, refitted=refitter.done)
    assert full - ahead == pytest.approx(4.0)  # the member refitted ahead needs no more time
    deadline = Deadline(time.perf_counter() + 120)
    refitter.deadline, result.refitter = deadline, refitter
    model = fit_model(result, result.space, cls_splits, "classification", [0, 1], None, 2, refit=True,
                      deadline=deadline)
    final = result.info["final_model"]
    assert final["refitted_ahead"] == 1 and final["rows"] == "train+validation"
    assert final["refit_times"][0] == times[0]  # the refit ahead is reported, and not run again
    assert sorted(t["index"] for t in final["refit_times"][1:]) == sorted(obs.index for obs in members[1:])
    assert all(m["source"] == "refitted" and m["rows"] == "train+validation" for m in model.info)


def test_a_search_that_runs_out_of_time_refits_its_likely_members_ahead_and_the_final_model_keeps_them(cls_splits,
                                                                                                      monkeypatch):
    import optdiv.engine.loop as loop

    # the tiny trees fit in milliseconds: predict half a second for each, so the search stops because no evaluation
    # fits before the reserve (the path that refits ahead), not because its last evaluation was cut at the deadline
    monkeypatch.setattr(loop, "least_duration", lambda space, predictor: 0.5)
    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=100_000, time_budget=15, refit=True, seed=0, classes=[0, 1])
    final = result.info["final_model"]
    ahead = [t for t in final.get("refit_times", []) if t.get("ahead")]
    assert ahead and all(t["ok"] for t in ahead)  # run when the time left stopped the search, before its end
    kept = {result.history[i].index for i in result.member_indices}
    refitted_ahead = {t["index"] for t in ahead} & kept
    assert refitted_ahead and final["refitted_ahead"] == len(refitted_ahead)  # the final members chosen then
    later = [t["index"] for t in final["refit_times"] if not t.get("ahead")]
    assert not set(later) & refitted_ahead  # a member refitted ahead is read back, not refitted again
    assert final["rows"].startswith("train+validation") and result.total_seconds < 15 + 2
    sampled = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                     budget=100_000, time_budget=15, refit=True, seed=0, classes=[0, 1], search_rows=100)
    assert "search_rows" in sampled.info  # on a row sample the refits on every row wait for the search's end
    assert not any(t.get("ahead") for t in sampled.info["final_model"].get("refit_times", []))
    waited = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=100_000, time_budget=15, refit=True, seed=0, classes=[0, 1], refit_ahead=False)
    assert not any(t.get("ahead") for t in waited.info["final_model"].get("refit_times", []))  # switched off
    assert waited.info["final_model"]["refitted"] >= 1  # the members are refitted after the search instead


def test_cross_validated_members_refitted_ahead_leave_the_reserve_and_the_final_model_takes_them(cls_splits):
    from optdiv.data import cross_validation_view
    from optdiv.final.fit import REFIT_SAFETY
    from optdiv.final.fold_refits import FOLD_REFITS_AHEAD_SECONDS, FoldRefits
    from optdiv.final.reserve import finish_reserve

    cv_splits = cross_validation_view(cls_splits, 3, 0, "classification")
    result = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    members = [result.history[i] for i in result.member_indices]
    assert len(members) >= 2
    refits = FoldRefits(result.space, cv_splits.X_train, cv_splits.y_train, "classification", 2, 3)
    tiny_space.FITS["count"] = 0
    assert not refits.refit_ahead(members, lambda: 600.0)  # milliseconds to do: not worth running ahead
    assert tiny_space.FITS["count"] == 0 and not refits.pipelines
    for obs in members:  # 3 folds in 6 s: one 3 s refit on all rows each, 4.5 s with the safety factor
        obs.fit_seconds = 6.0
    assert refits.predicted(members[0]) == pytest.approx(3.0 * REFIT_SAFETY)
    assert 3.0 * REFIT_SAFETY < FOLD_REFITS_AHEAD_SECONDS  # one alone is not worth it, two are
    full = finish_reserve(members, None, None, True, 3)
    assert full == pytest.approx(FINISH_SECONDS + 4.5 * len(members))
    first, rest = members[0], members[1:]
    assert refits.refit_ahead([first] + rest, lambda: 5.0)  # 4.5 s each: every one fits 5 s on its own
    assert tiny_space.FITS["count"] == len(members) and all(refits.has(obs) for obs in members)
    assert [t["index"] for t in refits.times] == [obs.index for obs in members] and refits.times[0]["ahead"]
    assert finish_reserve(members, None, None, True, 3, refitted=refits.has) == pytest.approx(FINISH_SECONDS)
    assert not refits.refit_ahead(members, lambda: 600.0)  # never twice
    assert not refits.refit_ahead(rest, lambda: 600.0) and not refits.has(first)  # no longer a member: dropped
    first.fit_seconds = 12.0  # alone, a 9 s refit: worth running ahead again
    assert refits.refit_ahead(members, lambda: 600.0) and refits.has(first)
    before = tiny_space.FITS["count"]
    result.fold_refits = refits
    model = fit_model(result, result.space, cv_splits, "classification", [0, 1], None, 2,
                      deadline=Deadline(time.perf_counter() + FINISH_SECONDS + 1.0))  # too little for one refit
    final = result.info["final_model"]
    assert tiny_space.FITS["count"] == before  # taken as refitted ahead, none refitted again, none left out
    assert final["refitted_ahead"] == len(members) == len(model.members) and "members_dropped" not in final
    assert final["rows"] == "train+validation" and len(final["refit_times"]) == len(members) + 1
    assert result.fold_refits is None  # handed over to the model


def test_a_cross_validated_search_that_runs_out_of_time_refits_its_members_ahead(cls_splits, monkeypatch):
    import optdiv.engine.loop as loop
    import optdiv.final.fold_refits as fold_refits
    from optdiv.data import cross_validation_view

    # the tiny trees fit in milliseconds: predict half a second for each evaluation, and run any refit ahead
    monkeypatch.setattr(loop, "least_duration", lambda space, predictor: 0.5)
    monkeypatch.setattr(fold_refits, "FOLD_REFITS_AHEAD_SECONDS", 0.0)
    cv_splits = cross_validation_view(cls_splits, 3, 0, "classification")
    result = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=100_000, time_budget=10, refit=True, seed=0, classes=[0, 1])
    final = result.info["final_model"]
    ahead = [t for t in final.get("refit_times", []) if t.get("ahead")]
    assert ahead and all(t["ok"] for t in ahead)  # run when the time left stopped the search, before its end
    kept = {result.history[i].index for i in result.member_indices}
    assert 1 <= final["refitted_ahead"] <= len(kept & {t["index"] for t in ahead})  # taken, not refitted again
    assert final["refitted"] == len(result.member_indices) and final["rows"] == "train+validation"
    assert result.total_seconds < 10 + 2
    waited = search(cv_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=100_000, time_budget=10, refit=True, seed=0, classes=[0, 1], refit_ahead=False)
    assert "refitted_ahead" not in waited.info["final_model"] and waited.info["final_model"]["refitted"] >= 1


def test_time_no_prediction_fits_is_spent_on_attempts_that_the_deadline_may_stop(cls_splits):
    """When no member's predicted refit fits the time left, the one likeliest to end (the shortest prediction) is
    attempted if that prediction is within ATTEMPT_REACH times the time left: one stopped at the deadline keeps its
    fit on train, so only idle seconds are spent. Beyond that reach nothing is attempted."""
    from optdiv.final.fit import ATTEMPT_MIN_SECONDS, ATTEMPT_REACH

    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2)
    assert len(result.member_indices) >= 2
    ratio = (len(cls_splits.y_train) + len(cls_splits.y_val)) / len(cls_splits.y_train)
    seconds = ATTEMPT_MIN_SECONDS + 1.0
    for i in result.member_indices:  # out of reach: nothing is attempted, every member stays on train
        result.history[i].fit_seconds = (ATTEMPT_REACH + 0.5) * seconds / ratio
    model, final = _refit_with_worker(result, cls_splits, seconds)
    assert final["refitted"] == 0 and "refit_times" not in final

    shortest = result.member_indices[-1]
    for i in result.member_indices:  # every prediction over the time left, the shortest within reach of it
        result.history[i].fit_seconds = (1.5 if i == shortest else 1.9) * seconds / ratio
    model, final = _refit_with_worker(result, cls_splits, seconds)
    assert final["refit_times"][0]["index"] == shortest and final["refit_times"][0]["attempt"] is True
    assert final["refit_times"][0]["ok"] and final["refitted"] >= 1
    assert {m["index"] for m in model.info if m["source"] == "refitted"} >= {shortest}


def test_a_row_sampled_search_grows_its_members_to_the_rows_their_refits_fit_in(cls_splits):
    """On a row sample, once no member's refit on every row fits the time left, the heaviest member is refitted on
    the most rows its prediction fits in GROW_SHARE of that time (at least GROW_MIN_RATIO times the sample); the
    pace that refit sets then lets the next members' refits on every row fit. Fewer rows than that: none grown."""
    from optdiv.final.fit import GROW_MIN_RATIO, GROW_SHARE

    result = search(cls_splits, "classification", n_classes=2, method="rs-es", space=timed_space(with_slow=False),
                    budget=12, seed=2, search_rows=100)
    assert result.fitted_on is not None and len(result.member_indices) >= 2
    sample, everything = len(result.fitted_on.y_train), len(cls_splits.y_train) + len(cls_splits.y_val)
    seconds = 8.0
    order = sorted(range(len(result.member_indices)), key=lambda p: (-float(result.weights[p]), p))
    heaviest = result.history[result.member_indices[order[0]]].index

    # a prediction so long that GROW_SHARE of the time left buys under GROW_MIN_RATIO times the sample: all on train
    # (this case first: a refit saves what a later call would read back)
    for i in result.member_indices:
        result.history[i].fit_seconds = 1.1 * GROW_SHARE / GROW_MIN_RATIO * seconds
    model, final = _refit_with_worker(result, cls_splits, seconds)
    assert "grown" not in final and final["refitted"] == 0 and {m["rows"] for m in model.info} == {"train"}

    # each refit on every row predicted at 1.1 times the time left; grown, the heaviest reaches this many rows
    share = 1.1 * sample / everything
    for i in result.member_indices:
        result.history[i].fit_seconds = share * seconds
    model, final = _refit_with_worker(result, cls_splits, seconds)
    grown = final["grown"][0]
    assert grown["index"] == heaviest and GROW_MIN_RATIO * sample <= grown["rows"] < everything
    assert grown["rows"] <= sample * GROW_SHARE / share + 1  # what GROW_SHARE of the time left was predicted to fit
    assert [m["rows"] for m in model.info if m["index"] == heaviest] == [f"{grown['rows']} rows of "
                                                                         "train+validation"]
    assert all(t["ok"] for t in final["refit_times"]) and final["refit_times"][0]["rows"] == grown["rows"]
    first = final["refit_times"][0]  # the grown refit's plain prediction on its rows, and at its pace (none yet)
    assert first["paced"] == first["predicted"] <= GROW_SHARE * seconds + 0.05
    # the tiny tree's refit took far less than predicted: at that pace the others fit on every row
    assert {m["rows"] for m in model.info if m["index"] != heaviest} == {"train+validation"}
    assert model.predict(cls_splits.X_test).shape == (len(cls_splits.y_test),)


def test_a_search_whose_every_evaluation_failed_says_what_failed_not_to_raise_the_budget(cls_splits):
    with pytest.raises(RuntimeError, match=r"all \d+ failed, the first with: .*injected") as caught:
        search(cls_splits, "classification", n_classes=2, method="rs", space=tiny_space.tiny_space("classification"),
               budget=None, time_budget=15, seed=0, optimizer_options=FAST, faults="raise=1.0")
    assert "raise the time budget" not in str(caught.value)


def test_the_refit_worker_starts_with_the_first_result_not_beside_the_evaluation_workers_start_up(cls_splits):
    from optdiv.config import RunConfig
    from optdiv.engine.search import prepare
    from optdiv.storage.memory import MemoryStore

    config = RunConfig.from_options(method="rs-es", space=timed_space(with_slow=False), budget=3, time_budget=60,
                                    refit=True, seed=0)
    prepared = prepare(cls_splits, "classification", config, n_classes=2, store=MemoryStore(), candidates=None,
                       evaluator=None, started=None)
    try:
        assert prepared.refitter is not None and not prepared.refitter.evaluator.started
        prepared.finished([])  # what the loop calls once an evaluation is recorded
        assert prepared.refitter.evaluator.started
    finally:
        prepared.refitter.close()
        prepared.runner.close()
