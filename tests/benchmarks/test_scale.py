"""benchmarks/scale.py: core counts, the split, one pinned fit of each system, and the report's pairing."""

from __future__ import annotations

import json
import os

import pytest


def test_core_counts_are_checked_against_the_machine(script, monkeypatch):
    scale = script("scale")
    monkeypatch.setattr(scale, "available_cores", lambda: [0, 1, 2, 3])
    assert scale.parse_cores("1,all,2,4") == [1, 4, 2]  # "all" is 4 here; each count once
    with pytest.raises(ValueError, match="this machine has 4 cores"):
        scale.parse_cores("8")


def test_the_synthetic_table_is_split_stratified_per_seed(script):
    scale = script("scale")
    X_train, y_train, X_test, y_test, task = scale.load("synthetic:2000", "", seed=1)
    assert task == "classification" and X_train.shape == (1600, 30) and len(y_test) == 400
    assert abs(y_train.mean() - y_test.mean()) < 0.01
    again = scale.load("synthetic:2000", "", seed=1)[0]
    assert list(again.index) == list(X_train.index)
    assert list(scale.load("synthetic:2000", "", seed=2)[0].index) != list(X_train.index)


@pytest.mark.timeout(300)
def test_one_pinned_fit_of_each_system_is_recorded(script):
    scale = script("scale")
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("pinning a fit to its cores needs sched_setaffinity (Linux)")
    pinned = os.sched_getaffinity(0)
    try:
        _fit_each_system(scale)
    finally:
        os.sched_setaffinity(0, pinned)  # fit() pins the calling process: this test's is pytest's


def _fit_each_system(scale):
    job = {"data": "synthetic:3000", "data_dir": "", "seed": 0, "cores": 1, "seconds": 25.0,
           "options": {"space": "autosklearn"}}
    light = scale.fit({**job, "system": "lightgbm"})
    assert light["status"] == "ok" and 0 <= light["test_error"] < 30
    mine = scale.fit({**job, "system": "optdiv"})
    assert mine["status"] == "ok" and 0 <= mine["test_error"] < 30 and mine["evaluations"] >= 1
    assert mine["threads"] == 1 and mine["wall_seconds"] < 25 + 15
    assert mine["driver_mb"] > 50 and mine["worker_mb"] > 10
    assert mine["tree_mb"] >= max(mine["driver_mb"], mine["worker_mb"]) * 0.5  # sampled, so it may miss a peak
    assert 0 < mine["search_seconds"] <= mine["wall_seconds"] and mine["final_model"]["refitted"] >= 0
    assert 0 <= mine["cut"] <= mine["evaluations"] and len(mine["algorithms"]) == mine["evaluations"]
    # a search that only reached its fixed start list asked the surrogate nothing: 0 s is a true record
    assert 0 < mine["fit_seconds"] < 2 * 25 and 0 <= mine["suggest_seconds"] < mine["search_seconds"]
    if os.path.exists("/proc/stat"):  # the fit kept its one core mostly busy
        assert 0.3 < mine["cores_busy"] <= 1.0


def test_the_report_pairs_the_most_cores_with_one(script, tmp_path, capsys):
    scale = script("scale")
    records = []
    for seed, (one, two) in enumerate([(5.0, 4.0), (6.0, 5.5), (7.0, 7.5), (5.0, 4.5)]):
        for cores, error in ((1, one), (2, two)):
            records.append({"data": "d", "seed": seed, "cores": cores, "system": "optdiv", "status": "ok",
                            "test_error": error, "evaluations": 10, "failed": 0, "wall_seconds": 60.0 - 12 * (seed == 0),
                            "seconds": 60.0, "driver_mb": 100.0, "worker_mb": 200.0, "tree_mb": 250.0})
            records.append({"data": "d", "seed": seed, "cores": cores, "system": "lightgbm", "status": "ok",
                            "test_error": 8.0, "wall_seconds": 1.0})
    for r in records[2::4]:  # the 2-core fits, 456 core-seconds in all: 90 % busy, 60 s fitting and 10 s refitting each
        r.update(cores_busy=0.9, fit_seconds=60.0, suggest_seconds=12.0,
                 final_model={"refit_times": [{"seconds": 4.0}, {"seconds": 6.0}]})
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    class Args:
        out = str(tmp_path)

    scale.report(Args)
    table = (tmp_path / "table.md").read_text()
    assert "| d | 1 | 5.750 | 10 | 0.0 | 60 (60) | 100 | 200 | 250 | 8.000 in 1 s | 4 |" in table
    assert "| d | 2 | 5.375 |" in table
    # relative changes -20 %, -8.3 %, +7.1 %, -10 %: the median -9.2 %
    assert "2 cores against 1 over 4 pairs: 3 lower / 0 level / 1 higher, median -9.2 %, Wilcoxon p = " in table
    assert "Fits ending more than 10 s from their budget: 2 of 8." in table
    # (48 + 3 x 60) s x 2 cores = 456; busy 410.4, fits 240, refits 40, suggestions 48: the rest 82.4
    assert ("2 cores, where 456 core-seconds of 4 fits went: busy 90%, evaluations' fits 53%, refits 9%, suggestions "
            "11%, the rest 18%; 40 evaluations.") in table
    assert "1 cores, where" not in table  # records without the busy share say nothing


def test_compare_pairs_two_runs_of_the_same_fits_and_counts_their_early_ends(script, tmp_path, capsys):
    scale = script("scale")

    def write(folder, errors, walls, unpaired=False):
        folder.mkdir()
        records = [{"data": "d", "seed": seed, "cores": 2, "system": "optdiv", "status": "ok", "test_error": error,
                    "evaluations": 10, "wall_seconds": wall, "seconds": 60.0}
                   for seed, (error, wall) in enumerate(zip(errors, walls))]
        if unpaired:  # a fit of one run only: not paired
            records.append({"data": "d", "seed": 9, "cores": 2, "system": "optdiv", "status": "ok", "test_error": 1.0,
                            "evaluations": 10, "wall_seconds": 60.0, "seconds": 60.0})
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return folder

    old = write(tmp_path / "old", [5.0, 6.0, 7.0], [45.0, 58.0, 49.0], unpaired=True)
    new = write(tmp_path / "new", [4.0, 6.0, 6.3], [55.0, 58.0, 72.0])

    class Args:
        out, against = str(new), str(old / "results.jsonl")

    scale.compare(Args)
    text = capsys.readouterr().out
    # relative changes -20 %, 0, -10 %: the median -10 %; the level pair is dropped by the test
    assert "2 cores over 3 pairs: 2 lower / 1 level / 0 higher, median -10.0 %, Wilcoxon p = " in text
    assert "- new: 0 of 3 fits ended more than 10 s early, 1 more than 10 s late;" in text
    assert "- old: 2 of 3 fits ended more than 10 s early, 0 more than 10 s late;" in text
    assert "30 evaluations" in text


def test_jobs_run_side_by_side_on_disjoint_cores(script, tmp_path, monkeypatch):
    scale = script("scale")
    monkeypatch.setattr(scale, "available_cores", lambda: [0, 1])
    fake = tmp_path / "fake_fit.py"  # stands in for one fit: records its cores and when it ran
    fake.write_text("import json, sys, time\n"
                    "job = json.loads(sys.argv[2]); began = time.time(); time.sleep(1.0)\n"
                    "print(json.dumps({**job, 'status': 'ok', 'test_error': 1.0, 'began': began,\n"
                    "                  'ended': time.time()}))\n")
    monkeypatch.setattr(scale, "SCRIPT", fake)

    class Args:
        out, data, data_dir, cores, seeds, seconds, options = str(tmp_path / "o"), "a", "", "2,1", "0", 5.0, None
        jobs = 2

    assert [(j["cores"], j["system"]) for j in scale.pending(Args)] == [
        (1, "optdiv"), (1, "lightgbm"), (2, "optdiv"), (2, "lightgbm")]  # fewest cores first
    scale.run(Args)
    records = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    one = [r for r in records if r["cores"] == 1]
    two = [r for r in records if r["cores"] == 2]
    assert sorted(r["core_ids"][0] for r in one) == [0, 1]  # the two one-core fits, each on its own core
    assert max(r["began"] for r in one) < min(r["ended"] for r in one)  # ... at the same time
    assert all(r["core_ids"] == [0, 1] for r in two)
    assert min(r["began"] for r in two) >= max(r["ended"] for r in one)  # a 2-core fit waits for both cores
    assert max(r["began"] for r in two) >= min(r["ended"] for r in two)  # and has them alone
    assert scale.pending(Args) == []  # a rerun has nothing left to do
