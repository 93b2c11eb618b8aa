"""benchmarks/race.py: the split handed to every system, the report's counts and p-values, resuming, and one real
optdiv fit through the worker subprocess (auto-sklearn and AutoGluon need their own environments and minutes;
they are exercised by the smoke run in benchmarks/README.md, not here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "race.py"


@pytest.fixture(scope="module")
def race():
    spec = importlib.util.spec_from_file_location("race", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def breast_cancer_csv(tmp_path_factory):
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    frame = data.data.copy()
    frame["target"] = data.target
    path = tmp_path_factory.mktemp("data") / "breast_cancer.csv"
    frame.to_csv(path, index=False)
    return path


def test_split_file_round_trip_is_stratified_and_identical(race, breast_cancer_csv, tmp_path):
    first = race.ensure_split(tmp_path / "a", "breast_cancer", breast_cancer_csv, 3)
    second = race.ensure_split(tmp_path / "b", "breast_cancer", breast_cancer_csv, 3)
    again = race.ensure_split(tmp_path / "a", "breast_cancer", breast_cancer_csv, 3)  # reused, not rewritten
    assert first == again
    a, b = race.read_split(first), race.read_split(second)
    assert a == b
    assert a["task"] == "classification" and a["n_classes"] == 2 and a["n_rows"] == 569
    train, test = np.array(a["train"]), np.array(a["test"])
    assert len(test) == 114 and len(train) == 455
    assert len(np.intersect1d(train, test)) == 0 and np.array_equal(np.sort(np.r_[train, test]), np.arange(569))
    y = pd.read_csv(breast_cancer_csv)["target"].to_numpy()
    for label in (0, 1):  # each class split 80/20 to within one row
        assert abs((y[test] == label).sum() - 0.2 * (y == label).sum()) <= 1
    other = race.read_split(race.ensure_split(tmp_path / "a", "breast_cancer", breast_cancer_csv, 4))
    assert other["test"] != a["test"]  # the seed matters
    # regression: shuffled, not stratified, and not in file order
    train_r, test_r = race.make_split(np.linspace(0, 1, 100), "regression", 0)
    assert len(test_r) == 20 and not np.array_equal(np.sort(test_r), test_r)
    # a changed CSV is refused rather than silently split again
    pd.read_csv(breast_cancer_csv).iloc[:-1].to_csv(tmp_path / "changed.csv", index=False)
    split_dir = tmp_path / "a" / "splits"
    (split_dir / "changed-seed3.json").write_text((split_dir / "breast_cancer-seed3.json").read_text())
    with pytest.raises(RuntimeError, match="changed"):
        race.ensure_split(tmp_path / "a", "changed", tmp_path / "changed.csv", 3)


def _record(dataset, task, seed, system, error, status="ok", wall=10.0):
    return {"dataset": dataset, "task": task, "seed": seed, "system": system, "seconds": 10.0, "status": status,
            "test_error": error if status == "ok" else None, "wall_seconds": wall if status == "ok" else None,
            "parent_wall_seconds": wall + 3.0, "models_evaluated": 5 if status == "ok" else None,
            "versions": {"python": "3.x"}, "error": None if status == "ok" else "boom", "repo_commit": "abc"}


def hand_written_results():
    """Two datasets, three seeds; better peer: auto-sklearn on cls, AutoGluon on reg."""
    rows = []
    table = {
        ("cls", "classification"): {"autosklearn": [10, 11, 12], "autogluon": [12, 13, 15], "optdiv": [9, 11, 10]},
        ("reg", "regression"): {"autosklearn": [2.0, 2.2, 2.4], "autogluon": [1.0, 1.2, 1.4],
                                "optdiv": [1.6, 1.8, 2.6]},
    }
    for (dataset, task), systems in table.items():
        for system, errors in systems.items():
            for seed, error in enumerate(errors):
                rows.append(_record(dataset, task, seed, system, error))
    # a failed optdiv fit, retried ok later: the ok record counts
    rows.insert(0, _record("reg", "regression", 0, "optdiv", None, status="failed"))
    # a variant equal to auto-sklearn on cls only: at or below, all paired differences zero
    rows += [_record("cls", "classification", seed, "optdiv:method=bo-es", e) for seed, e in enumerate([10, 11, 12])]
    # a fit 12 s over T = 10 s (allowed: 10 s)
    rows.append(_record("cls", "classification", 3, "autogluon", 14, wall=22.0))
    return rows


def test_report_counts_better_peer_and_wilcoxon(race, tmp_path):
    rows = hand_written_results()
    summary = race.summarize(rows)
    assert summary["better_peer"] == {"cls": "autosklearn", "reg": "autogluon"}
    assert summary["systems"] == ["autosklearn", "autogluon", "optdiv", "optdiv:method=bo-es"]
    cell = summary["cells"]["reg", "optdiv"]
    assert cell["n_ok"] == 3 and cell["mean"] == pytest.approx(2.0)
    assert summary["cells"]["cls", "autosklearn"]["std"] == pytest.approx(1.0)

    v = summary["variants"]["optdiv"]
    # cls: 10.0 <= 11.0; reg: 2.0 > 1.2 + 0.2 (AutoGluon's seed std)
    assert (v["datasets"], v["at_or_below"], v["at_or_below_regression"], v["worse_beyond_std"]) == (2, 1, 0, 1)
    ask, ag, best = v["paired"]["autosklearn"], v["paired"]["autogluon"], v["paired"]["better peer"]
    assert (ask["pairs"], ask["better"], ask["same"], ask["worse"]) == (6, 4, 1, 1)
    assert (ag["pairs"], ag["better"], ag["same"], ag["worse"]) == (6, 3, 0, 3)
    assert (best["pairs"], best["better"], best["same"], best["worse"]) == (6, 2, 1, 3)
    # exact two-sided signed-rank p over the non-zero relative differences, worked out by hand:
    # vs auto-sklearn, n = 5, W+ = 1: 2 * #{subsets of 1..5 summing <= 1} / 2^5 = 2 * 2 / 32
    assert ask["wilcoxon_p"] == pytest.approx(0.125)
    # vs AutoGluon, n = 6, W- = 6: 2 * 14 / 64
    assert ag["wilcoxon_p"] == pytest.approx(0.4375)
    # vs the better peer, n = 5, W- = 3: 2 * 5 / 32
    assert best["wilcoxon_p"] == pytest.approx(0.3125)
    assert best["median_relative_difference"] == pytest.approx(np.median([-0.1, 0, -1 / 6, 0.6, 0.5, 2.6 / 1.4 - 1]))

    same = summary["variants"]["optdiv:method=bo-es"]
    assert (same["datasets"], same["at_or_below"], same["worse_beyond_std"]) == (1, 1, 0)
    assert same["paired"]["autosklearn"]["same"] == 3 and same["paired"]["autosklearn"]["wilcoxon_p"] == 1.0
    # a variant is also paired with the defaults it would replace (cls: 10, 11, 12 against 9, 11, 10)
    lever = same["paired"]["optdiv"]
    assert (lever["pairs"], lever["better"], lever["same"], lever["worse"]) == (3, 0, 1, 2)
    assert "optdiv" not in v["paired"]

    assert summary["overrun"]["autogluon"]["max_over"] == pytest.approx(12.0)
    assert summary["overrun"]["autogluon"]["beyond_tolerance"] == 1
    assert summary["overrun"]["optdiv"]["beyond_tolerance"] == 0
    assert summary["failures"] == []  # the failed fit was retried ok

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert race.main(["report", "--out", str(out)]) == 0
    table = (out / "table.md").read_text()
    assert "| dataset | task | autosklearn | autogluon | optdiv | optdiv:method=bo-es | better peer |" in table
    assert "| cls | cls | 11.00 ± 1.00 | 13.50 ± 1.29 | **10.00 ± 1.00** | 11.00 ± 1.00 | autosklearn |" in table
    assert "| optdiv | better peer | 6 | 2 | 1 | 3 |" in table
    assert "| optdiv:method=bo-es | optdiv | 3 | 0 | 1 | 2 |" in table
    # a report of some systems only: the others leave the table, the peers stay
    assert race.main(["report", "--out", str(out), "--systems", "autosklearn,autogluon,optdiv:method=bo-es"]) == 0
    table = (out / "table.md").read_text()
    assert "| dataset | task | autosklearn | autogluon | optdiv:method=bo-es | better peer |" in table
    assert "| optdiv | better peer |" not in table
    # the variants paired with another one than the defaults: OptDivBO against BO-ES of the same engine
    assert race.main(["report", "--out", str(out), "--reference", "optdiv:method=bo-es"]) == 0
    assert "| optdiv | optdiv:method=bo-es | 3 | 2 | 1 | 0 |" in (out / "table.md").read_text()
    with pytest.raises(SystemExit, match="no records of optdiv:cv=3"):
        race.main(["report", "--out", str(out), "--systems", "autosklearn,optdiv:cv=3"])


def test_systems_syntax(race):
    assert race.parse_systems("autosklearn, optdiv:refit=true;method=optdivbo,optdiv:method=optdivbo;refit=true") == [
        "autosklearn", "optdiv:method=optdivbo;refit=true"]
    assert race.parse_system('optdiv:time_limit=30;space="autosklearn"') == (
        "optdiv", {"time_limit": 30, "space": "autosklearn"})
    for bad in ("autosklearn:seed=1", "optdiv:seed=1", "optdiv:time_budget=5", "h2o", "optdiv:refit"):
        with pytest.raises(ValueError):
            race.parse_systems(bad)
    with pytest.raises(ValueError, match="not an OptDivClassifier option"):
        race.check_optdiv_options(["optdiv:n_trees=3"])


def test_resume_skips_recorded_triples(race):
    records = [_record("a", "classification", 0, "optdiv", 10.0),
               _record("a", "classification", 0, "autosklearn", None, status="failed")]
    todo, skipped = race.plan(records, ["a"], [0, 1], ["autosklearn", "optdiv"])
    assert todo == [("a", 1, "autosklearn"), ("a", 1, "optdiv")]
    assert sorted(skipped) == [("a", 0, "autosklearn"), ("a", 0, "optdiv")]
    todo, _ = race.plan(records, ["a"], [0, 1], ["autosklearn", "optdiv"], retry_failed=True)
    assert todo == [("a", 0, "autosklearn"), ("a", 1, "autosklearn"), ("a", 1, "optdiv")]


def _race_optdiv(race, csv, out, seconds):
    argv = ["run", "--data-dir", str(csv.parent), "--datasets", "breast_cancer", "--seeds", "0",
            "--seconds", str(seconds), "--systems", "optdiv", "--jobs", "1", "--out", str(out)]
    assert race.main(argv) == 0
    records = race.load_records(out / "results.jsonl")
    assert len(records) == 1
    return argv, records[0]


@pytest.mark.timing
def test_end_to_end_optdiv(race, breast_cancer_csv, tmp_path, capsys):
    """One real optdiv fit with T = 10 s through the worker subprocess. On a machine so loaded that optdiv's
    evaluator cannot even start a model within 10 s (optdiv then raises "no evaluation finished within the time
    budget"), the failed record is checked and the fit is run again with T = 30 s."""
    seconds = 10
    argv, r = _race_optdiv(race, breast_cancer_csv, tmp_path / "race10", seconds)
    if r["status"] != "ok" and "no evaluation finished within the time budget" in (r["error"] or ""):
        assert r["test_error"] is None and r["wall_seconds"] is None and r["parent_wall_seconds"] > 0
        assert "RuntimeError" in r["traceback"]
        seconds = 30
        argv, r = _race_optdiv(race, breast_cancer_csv, tmp_path / "race30", seconds)
    out = Path(argv[argv.index("--out") + 1])
    assert r["status"] == "ok", r.get("error")
    assert (r["dataset"], r["task"], r["seed"], r["system"]) == ("breast_cancer", "classification", 0, "optdiv")
    assert 0 < r["wall_seconds"] <= seconds + race.tolerance(seconds)
    assert r["parent_wall_seconds"] >= r["wall_seconds"]
    assert 0 <= r["test_error"] <= 100 and r["n_test"] == 114
    assert r["machine"]["cores"] >= 1 and r["machine"]["calibration_seconds"] > 0 and r["machine"]["cpu"]
    assert r["models_evaluated"] >= 1
    assert "optdiv" in r["versions"] and "numpy" in r["versions"]
    assert not (out / "work").exists()  # the fit's folder is gone
    assert "| breast_cancer | cls |" in (out / "table.md").read_text()
    # a rerun finds the triple recorded and runs nothing
    capsys.readouterr()
    assert race.main(argv) == 0
    assert "0 fits to run, 1 already recorded" in capsys.readouterr().out
    assert len(race.load_records(out / "results.jsonl")) == 1


def test_equal_error_counts_in_another_order_are_at_or_below_the_peer(race):
    """(0.1 + 0.2) + 0.3 and (0.3 + 0.2) + 0.1 differ in the last bit: the same errors must not count as worse."""
    rows = [_record("d", "classification", seed, system, error)
            for system, errors in {"autosklearn": [0.3, 0.2, 0.1], "autogluon": [0.5, 0.5, 0.5],
                                   "optdiv": [0.1, 0.2, 0.3]}.items()
            for seed, error in enumerate(errors)]
    summary = race.summarize(rows)
    assert summary["cells"]["d", "optdiv"]["mean"] == summary["cells"]["d", "autosklearn"]["mean"]
    assert summary["variants"]["optdiv"]["at_or_below"] == 1
    nearly = rows[:-1] + [_record("d", "classification", 2, "optdiv", 0.3 + 1e-6)]  # a real difference stays one
    assert race.summarize(nearly)["variants"]["optdiv"]["at_or_below"] == 0


def test_a_default_is_reported_only_on_the_half_it_was_not_chosen_on(race, tmp_path):
    """Lever x helps on half a only, lever y on half b only: each half reports the lever taken on the other."""
    halves = (("a1", "a2"), ("b1", "b2"))
    rows = []
    for dataset in ("a1", "a2", "b1", "b2"):
        for seed in range(3):
            base = 10.0 + seed
            x = base - 1 if dataset.startswith("a") else base + 1
            y = base + 2 if dataset.startswith("a") else base - 2
            rows += [_record(dataset, "classification", seed, "optdiv", base),
                     _record(dataset, "classification", seed, "optdiv:x=1", x),
                     _record(dataset, "classification", seed, "optdiv:y=1", y),
                     _record(dataset, "classification", seed, "autosklearn", base)]
    system, stats = race.choose(rows, "optdiv", ["optdiv:x=1", "optdiv:y=1"], halves[0])
    assert system == "optdiv:x=1"
    assert (stats["optdiv:x=1"]["better"], stats["optdiv:y=1"]["worse"]) == (6, 6)
    composed, decisions = race.chosen_elsewhere(rows, "optdiv", ["optdiv:x=1", "optdiv:y=1"], halves)
    assert [d["system"] for d in decisions] == ["optdiv:x=1", "optdiv:y=1"]
    reported = {(r["dataset"], r["seed"]): (r["chosen_system"], r["test_error"]) for r in composed}
    # half b reports x, chosen on a (worse there), half a reports y, chosen on b
    assert reported["b1", 0] == ("optdiv:x=1", 11.0) and reported["a2", 2] == ("optdiv:y=1", 14.0)
    assert {r["system"] for r in composed} == {race.CHOSEN} and len(composed) == 12
    # a lever that helps nowhere leaves the reference in place
    assert race.choose(rows, "optdiv", ["optdiv:y=1"], halves[0])[0] == "optdiv"
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert race.main(["choose", "--out", str(out), "--candidates", "optdiv:x=1,optdiv:y=1", "--half", "a1,a2"]) == 0
    text = (out / "chosen.md").read_text()
    assert "## Chosen on a1, a2: `optdiv:x=1`" in text and "## Chosen on b1, b2: `optdiv:y=1`" in text
    assert f"| {race.CHOSEN} | better peer | 12 |" in text


def test_pairs_of_lines_raced_on_different_machines_are_flagged_by_the_choice(race, tmp_path):
    """A time-budgeted search does as much as its machine allows: a lever's lines paired with reference lines from a
    slower or faster machine mix the two, and the choice says so."""
    here = {"cpu": "cpu x", "cores": 2, "calibration_seconds": 0.20}
    slower = {**here, "calibration_seconds": 0.30}
    assert race.same_machine(here, {**here, "calibration_seconds": 0.22})
    assert not race.same_machine(here, slower) and not race.same_machine(here, {**here, "cores": 16})
    assert not race.same_machine(here, None)

    def rows(reference_machine, candidate_machine):
        out = []
        for dataset in ("a1", "b1"):
            for seed in range(3):
                out += [{**_record(dataset, "classification", seed, "optdiv", 10.0 + seed),
                         "machine": reference_machine},
                        {**_record(dataset, "classification", seed, "optdiv:x=1", 9.0 + seed),
                         "machine": candidate_machine}]
        return out

    assert race.machine_warnings(rows(here, here), "optdiv", ["optdiv:x=1"], ["a1"]) == []
    [warning] = race.machine_warnings(rows(here, slower), "optdiv", ["optdiv:x=1"], ["a1"])
    assert "3 of 3 pairs join lines raced on different machines" in warning and "0.2-0.3 s" in warning
    [note] = race.machine_warnings(rows(None, here), "optdiv", ["optdiv:x=1"], ["a1"])
    assert "no machine recorded" in note
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(here, slower)))
    assert race.main(["choose", "--out", str(out), "--candidates", "optdiv:x=1", "--half", "a1"]) == 0
    assert (out / "chosen.md").read_text().count("raced on different machines") == 2  # both halves


def test_search_statistics_of_optdiv_fits(race):
    record = _record("d", "classification", 0, "optdiv", 12.0, wall=150.0)
    record["seconds"] = 180.0
    record["extra"] = {"algorithms": {"lightgbm": 6, "knn": 2}, "ensemble_val": 0.1}
    assert race.top_algorithm_share(record) == pytest.approx(0.75)
    assert race.validation_test_gap(record) == pytest.approx(2.0)  # 12 % on test, 10 % on validation
    regression = {**record, "task": "regression", "test_error": 0.3, "extra": {"ensemble_val": 0.2}}
    assert race.validation_test_gap(regression) == pytest.approx(0.1) and race.top_algorithm_share(regression) is None
    summary = race.summarize([record])
    assert summary["cells"]["d", "optdiv"]["top_share"] == pytest.approx(0.75)
    assert summary["overrun"]["optdiv"]["early"] == 1 and summary["overrun"]["optdiv"]["min_over"] == -30.0
    assert "| d | 0.75 / 2.00 |" in race.render(summary)


def test_autogluon_best_quality_is_a_peer_in_the_autogluon_environment(race):
    assert race.parse_system("autogluon-best") == ("autogluon-best", {})
    assert race.ENVIRONMENT["autogluon-best"] == "autogluon" and "autogluon-best" in race.PEERS
    assert race.AUTOGLUON_PRESETS["autogluon-best"] == "best_quality"
    rows = [_record("d", "classification", s, system, e) for s in range(2)
            for system, e in (("autosklearn", 10.0), ("autogluon", 11.0), ("autogluon-best", 9.0), ("optdiv", 9.5))]
    summary = race.summarize(rows)
    assert summary["better_peer"]["d"] == "autogluon-best"
    assert summary["variants"]["optdiv"]["at_or_below"] == 0


def test_an_option_that_changes_nothing_on_a_dataset_is_run_and_recorded_once(race):
    bagged = "optdiv:algorithm_share=0.5;fold_models=bagged"
    assert race.effective_system(bagged, 30000) == "optdiv:algorithm_share=0.5"  # no cross-validation there
    assert race.effective_system(bagged, 2000) == bagged
    assert race.effective_system("optdiv:cv=5;fold_models=bagged", 30000) == "optdiv:cv=5;fold_models=bagged"
    todo, _ = race.plan([], ["big", "small"], [0], ["optdiv:algorithm_share=0.5", bagged],
                        n_train={"big": 30000, "small": 2000})
    assert todo == [("big", 0, "optdiv:algorithm_share=0.5"), ("small", 0, "optdiv:algorithm_share=0.5"),
                    ("small", 0, bagged)]
    rows = [_record("big", "classification", 0, "optdiv:algorithm_share=0.5", 7.0),
            _record("small", "classification", 0, bagged, 9.0)]
    for row in rows:
        row["n_train"] = 30000 if row["dataset"] == "big" else 2000
    filled = race.with_same_fits(rows)
    alias = [r for r in filled if r.get("same_as")]
    assert [(r["dataset"], r["system"], r["test_error"]) for r in alias] == [("big", bagged, 7.0)]
