"""Black-box constraints: parsing, arithmetic, the engine marking infeasible runs, resume and old stores."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import SLOW_PREDICT_SECONDS, latency_space, tiny_space

from optdiv.evaluation.constraints import (
    Constraint,
    InfeasibleSearchError,
    check,
    enforce,
    measure_value,
    parse_constraints,
    settings_form,
)
from optdiv.cli import build_parser, main
from optdiv.data import from_frame, load_dataset, split
from optdiv.engine.run import run
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.observation import Observation
from optdiv.storage.files import RunStore, RunStoreError

# --------------------------------------------------------------------------- parsing and arithmetic


@pytest.mark.parametrize("text, measure, op, bound, canonical", [
    ("predict_seconds<=0.01", "predict_seconds", "<=", 0.01, "predict_seconds<=0.01"),
    ("  fit_seconds <  2 ", "fit_seconds", "<", 2.0, "fit_seconds<2.0"),
    ("predict_us_per_row>=1e3", "predict_us_per_row", ">=", 1000.0, "predict_us_per_row>=1000.0"),
    ("fit_seconds>-1.5E-2", "fit_seconds", ">", -0.015, "fit_seconds>-0.015"),
    ("predict_seconds <= .25", "predict_seconds", "<=", 0.25, "predict_seconds<=0.25"),
])
def test_parse_accepts_every_form_and_round_trips(text, measure, op, bound, canonical):
    constraint = Constraint.parse(text)
    assert (constraint.measure, constraint.op, constraint.bound) == (measure, op, bound)
    assert str(constraint) == canonical
    assert Constraint.parse(str(constraint)) == constraint
    assert Constraint.parse(constraint) is constraint


def test_round_trip_keeps_every_digit():
    constraint = Constraint("predict_seconds", "<=", 0.1234567890123)
    assert Constraint.parse(str(constraint)).bound == 0.1234567890123


@pytest.mark.parametrize("text", [
    "", "latency<=0.1", "predict_seconds=0.1", "predict_seconds==0.1", "predict_seconds<=", "<=0.1",
    "predict_seconds<=abc", "predict_seconds<=inf", "predict_seconds<=-inf", "predict_seconds<=nan",
    "predict_seconds<=0.1 s", "predict_seconds=<0.1", "predict_seconds<<0.1",
])
def test_parse_errors_name_the_form_and_the_measures(text):
    with pytest.raises(ValueError) as info:
        Constraint.parse(text)
    message = str(info.value)
    assert "NAME<=X" in message and "NAME>X" in message
    for measure in ("fit_seconds", "predict_seconds", "predict_us_per_row"):
        assert measure in message


def test_direct_construction_is_validated_too():
    with pytest.raises(ValueError, match="unknown constraint measure"):
        Constraint("latency", "<=", 1.0)
    with pytest.raises(ValueError, match="comparison"):
        Constraint("fit_seconds", "==", 1.0)
    with pytest.raises(ValueError, match="not finite"):
        Constraint("fit_seconds", "<=", math.inf)
    assert Constraint("fit_seconds", "<=", 1).bound == 1.0 and isinstance(Constraint("fit_seconds", "<=", 1).bound,
                                                                           float)


@pytest.mark.parametrize("text, value, satisfied, violation", [
    ("predict_seconds<=0.1", 0.05, True, 0.0),
    ("predict_seconds<=0.1", 0.1, True, 0.0),
    ("predict_seconds<=0.1", 0.35, False, 0.25),
    ("predict_seconds<0.1", 0.1, False, 0.0),  # the boundary of a strict bound: infeasible, distance 0
    ("predict_seconds<0.1", 0.09, True, 0.0),
    ("fit_seconds>=2", 1.5, False, 0.5),
    ("fit_seconds>=2", 2.0, True, 0.0),
    ("fit_seconds>2", 2.0, False, 0.0),
    ("fit_seconds>2", 3.0, True, 0.0),
    ("predict_us_per_row<=100", float("nan"), False, math.inf),
])
def test_satisfied_and_violation(text, value, satisfied, violation):
    constraint = Constraint.parse(text)
    assert constraint.satisfied(value) is satisfied
    assert constraint.violation(value) == pytest.approx(violation)


def test_parse_constraints_drops_repeats_and_settings_sort():
    parsed = parse_constraints(["predict_seconds<=0.1", "fit_seconds<5", "predict_seconds <= 1e-1"])
    assert [str(c) for c in parsed] == ["predict_seconds<=0.1", "fit_seconds<5.0"]
    assert parse_constraints(None) == [] and parse_constraints("fit_seconds<1") == [Constraint("fit_seconds", "<", 1)]
    assert settings_form(["predict_seconds<=0.1", "fit_seconds<5"]) == ["fit_seconds<5.0", "predict_seconds<=0.1"]


def _obs(status="ok", measures=None, fit_seconds=0.5):
    val = np.full((4, 2), 0.5, dtype=np.float32)
    return Observation({"algorithm": "x"}, status, 0.2, 0.3, fit_seconds, None, val if status == "ok" else None,
                       val if status == "ok" else None, 7, "x", measures if measures is not None else {})


def test_check_reports_each_violated_constraint_with_its_value():
    obs = _obs(measures={"fit_seconds": 0.5, "predict_seconds": 0.25, "predict_us_per_row": 2500.0})
    assert check(obs, ["predict_seconds<=0.3", "fit_seconds<1"]) == (True, None)
    feasible, reason = check(obs, ["predict_seconds<=0.1", "fit_seconds<1", "predict_us_per_row<=100"])
    assert not feasible
    assert "predict_seconds = 0.25 violates predict_seconds<=0.1" in reason
    assert "predict_us_per_row = 2500 violates predict_us_per_row<=100.0" in reason
    assert "fit_seconds" not in reason


def test_enforce_marks_only_ok_runs_and_keeps_losses_and_measures():
    obs = _obs(measures={"fit_seconds": 0.5, "predict_seconds": 0.25})
    enforce(obs, parse_constraints(["predict_seconds<=0.1"]))
    assert obs.status == "infeasible" and obs.val_pred is None and obs.test_pred is None
    assert obs.val_loss == 0.2 and obs.test_loss == 0.3 and obs.measures["predict_seconds"] == 0.25
    assert obs.error.startswith("infeasible: predict_seconds = 0.25")
    feasible = enforce(_obs(measures={"predict_seconds": 0.05}), parse_constraints(["predict_seconds<=0.1"]))
    assert feasible.status == "ok" and feasible.val_pred is not None
    failed = enforce(_obs(status="failed"), parse_constraints(["predict_seconds<=0.1"]))  # no measure: untouched
    assert failed.status == "failed"


def test_a_missing_measure_raises_and_fit_seconds_falls_back_to_the_field():
    old = _obs(measures={}, fit_seconds=1.5)
    assert measure_value(old, "fit_seconds") == 1.5
    assert check(old, ["fit_seconds<=1"]) == (False, "fit_seconds = 1.5 violates fit_seconds<=1.0")
    with pytest.raises(ValueError, match="no 'predict_seconds' measure"):
        check(old, ["predict_seconds<=1"])


# --------------------------------------------------------------------------- stores


def test_store_round_trips_measures_and_loads_logs_without_them(tmp_path):
    store = RunStore(tmp_path / "new")
    store.append(_obs(measures={"fit_seconds": 0.5, "predict_seconds": 0.01, "predict_us_per_row": 100.0}))
    assert store.load()[0].measures == {"fit_seconds": 0.5, "predict_seconds": 0.01, "predict_us_per_row": 100.0}

    old = RunStore(tmp_path / "old")  # a log line as written before measures existed
    line = {"index": 0, "algorithm": "tree", "status": "ok", "val_loss": 0.1, "test_loss": 0.2, "fit_seconds": 0.7,
            "error": None, "config": {"algorithm": "tree"}, "val_pred": None, "test_pred": None}
    (tmp_path / "old" / "observations.jsonl").write_text(json.dumps(line) + "\n")
    loaded = old.load()
    assert len(loaded) == 1 and loaded[0].measures == {} and loaded[0].fit_seconds == 0.7
    assert check(loaded[0], ["fit_seconds<=1"]) == (True, None)


# --------------------------------------------------------------------------- the engine


@pytest.fixture(scope="module")
def cls_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(200, random_state=2).iloc[:, list(range(5)) + [-1]].to_csv(
        path, index=False)
    return path


LATENCY = "predict_seconds<=0.1"


@pytest.mark.timing
def test_live_run_marks_slow_predictors_infeasible_and_keeps_them_out_of_the_ensemble(cls_csv, tmp_path):
    out = tmp_path / "run"
    kwargs = dict(target="target", out=str(out), seed=0, method="rs-es", space=latency_space(), ensemble_size=10,
                  cv=None)
    result, summary = run(str(cls_csv), budget=6, constraints=[LATENCY], **kwargs)
    history = result.history
    assert len(history) == 6  # infeasible runs count against the budget; the search went on
    slow = [obs for obs in history if obs.algorithm == "slow"]
    fast = [obs for obs in history if obs.algorithm == "fast"]
    assert slow and fast, "the seed must sample both algorithms for the test to mean anything"
    for obs in slow:
        assert obs.status == "infeasible"
        assert obs.val_pred is None and obs.test_pred is None
        assert obs.measures["predict_seconds"] >= SLOW_PREDICT_SECONDS
        assert obs.error.startswith("infeasible: predict_seconds = ") and LATENCY in obs.error
        assert 0.0 <= obs.val_loss < 0.5  # a real loss, kept for reporting (not the failure loss 1.0)
    ok = [obs for obs in history if obs.status == "ok"]
    assert ok, "the fast predictor must be feasible"
    splits = split(load_dataset(str(cls_csv), target="target"), seed=0)
    n_val = len(splits.y_val)
    for obs in history:
        # (and, where the OS reports it, the evaluation's own peak memory)
        assert set(obs.measures) - {"peak_mb"} == {"fit_seconds", "predict_seconds", "predict_us_per_row"}
        assert obs.measures["fit_seconds"] == obs.fit_seconds
        assert obs.measures["predict_us_per_row"] == pytest.approx(obs.measures["predict_seconds"] / n_val * 1e6)
    for obs in ok:
        assert obs.measures["predict_seconds"] <= 0.1
    assert result.member_indices and all(history[i].status == "ok" for i in result.member_indices)
    assert {history[i].algorithm for i in result.member_indices} == {"fast"}
    infeasible = [obs.index for obs in history if obs.status == "infeasible"]
    assert not set(infeasible) & set(result.member_indices)

    saved = json.loads((out / "result.json").read_text())
    assert saved["constraints"] == [LATENCY] and summary["constraints"] == [LATENCY]
    assert saved["n_infeasible"] == len(infeasible) >= len(slow) and saved["n_failed"] == 0
    assert {m["algorithm"] for m in saved["ensemble"]} == {"fast"}
    assert json.loads((out / "meta.json").read_text())["constraints"] == [LATENCY]
    stored = RunStore(out).load()
    assert [o.status for o in stored] == [o.status for o in history]
    assert [o.measures for o in stored] == [o.measures for o in history]
    assert all(o.val_pred is None for o in stored if o.status == "infeasible")

    # resuming under other constraints, or none, is refused with the reason
    for other in (["predict_seconds<=0.5"], None, [LATENCY, "fit_seconds<=10"]):
        with pytest.raises(RunStoreError, match="constraints"):
            run(str(cls_csv), budget=7, resume=True, constraints=other, **kwargs)
    with pytest.raises(RunStoreError, match="searched under constraints"):  # the engine itself checks too
        search(splits, "classification", n_classes=2, method="rs-es", space=latency_space(), budget=7, store=RunStore(out),
               constraints=["predict_seconds<=0.5"])
    assert len(RunStore(out).load()) == 6  # nothing was evaluated by the refused resumes

    # the same constraints (other spelling, same meaning) resume and extend the run
    resumed, summary = run(str(cls_csv), budget=7, resume=True, constraints=["predict_seconds <= 1e-1"], **kwargs)
    assert len(resumed.history) == 7 and summary["n_evaluations"] == 7
    assert [o.status for o in resumed.history[:6]] == [o.status for o in history]
    assert all(resumed.history[i].status == "ok" for i in resumed.member_indices)


def test_no_feasible_run_fails_clearly(tmp_path):
    frame = load_breast_cancer(as_frame=True).frame.sample(150, random_state=0)
    splits = split(from_frame(frame, target="target"), seed=0)
    space = tiny_space("classification")
    evaluator = Evaluator(space.build, splits, "classification", "error", n_classes=2, in_process=True)
    with pytest.raises(InfeasibleSearchError, match=r"no feasible run: of 3 evaluations, 3 violated"):
        search(splits, "classification", n_classes=2, method="bo-es", space=space, budget=3, evaluator=evaluator,
               constraints=["fit_seconds<0"], store=RunStore(tmp_path / "s"))
    stored = RunStore(tmp_path / "s").load()
    assert [o.status for o in stored] == ["infeasible"] * 3  # the evaluations were kept


# --------------------------------------------------------------------------- the command line


def test_cli_accepts_repeated_constraints_on_run_and_bench():
    args = build_parser().parse_args(["run", "--data", "x.csv", "--constraint", "predict_seconds<=0.01",
                                      "--constraint", "fit_seconds < 3"])
    assert args.constraint == [Constraint("predict_seconds", "<=", 0.01), Constraint("fit_seconds", "<", 3.0)]
    args = build_parser().parse_args(["bench", "--datasets", "d", "--methods", "rs", "--out", "o",
                                      "--constraint", "predict_us_per_row<=50"])
    assert args.constraint == [Constraint("predict_us_per_row", "<=", 50.0)]
    assert build_parser().parse_args(["run", "--data", "x.csv"]).constraint is None


@pytest.mark.parametrize("command", [["run", "--data", "x.csv"], ["bench", "--datasets", "d", "--methods", "rs",
                                                                   "--out", "o"]])
def test_cli_rejects_bad_constraints_with_argparse_and_the_reason(command, capsys):
    with pytest.raises(SystemExit) as info:
        main(command + ["--constraint", "latency<=0.01"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --constraint" in err and "unknown measure 'latency'" in err and "predict_us_per_row" in err
