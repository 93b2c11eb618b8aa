"""`optdiv bench` and `optdiv report` end to end on small CSVs: replay and live, resume, report."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from optdiv.bench.library import load_library
from optdiv.bench.provenance import dataset_digest, environment, library_digest
from optdiv.cli import main
from optdiv.data import load_dataset


@pytest.fixture(scope="module")
def small_csvs(tmp_path_factory):
    from sklearn.datasets import load_breast_cancer, load_diabetes

    root = tmp_path_factory.mktemp("data")
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    rows = np.random.default_rng(0).choice(len(y), 150, replace=False)
    frame = X.iloc[rows, :6].reset_index(drop=True)
    frame["target"] = y.iloc[rows].to_numpy()
    frame.to_csv(root / "tinycancer.csv", index=False)
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    frame = X.iloc[:120, :5].copy()
    frame["target"] = y[:120].to_numpy()
    frame.to_csv(root / "tinydiabetes.csv", index=False)
    return root


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_replay_bench_resumes_and_reports(small_csvs, tmp_path, capsys):
    out, cache = tmp_path / "bench", tmp_path / "cache"
    args = ["bench", "--datasets", str(small_csvs / "tinycancer.csv"), "--methods", "rs,bo-es,rb-es,optdivbo",
            "--seeds", "0-1", "--budget", "10", "--library", "16", "--cache", str(cache), "--jobs", "2",
            "--trace-every", "5", "--out", str(out)]
    assert main(args) == 0
    rows = _rows(out / "results.csv")
    assert sorted((r["method"], r["seed"]) for r in rows) == sorted(
        (m, str(s)) for m in ("rs", "bo-es", "rb-es", "optdivbo") for s in (0, 1))
    assert {r["mode"] for r in rows} == {"replay"} and {r["n_evaluations"] for r in rows} == {"10"}
    assert {r["library_size"] for r in rows} == {"16"}
    result = out / "runs" / "tinycancer" / "error" / "optdivbo" / "seed-0" / "result.json"
    trace = _rows(result.parent / "trace.csv")
    assert [int(float(r["iteration"])) for r in trace] == [5, 10]
    recorded = json.loads(result.read_text())["provenance"]
    library = load_library(small_csvs / "tinycancer.csv", cache, 16)
    assert recorded["library_digest"] == library_digest(library)
    assert recorded["environment"] == environment()
    stamp = result.stat().st_mtime_ns

    capsys.readouterr()
    assert main(args) == 0  # everything is finished: nothing is redone
    assert "0 searches to run" in capsys.readouterr().err
    assert result.stat().st_mtime_ns == stamp
    assert len(_rows(out / "results.csv")) == 8

    assert main(args[:-2] + ["--budget", "12", "--out", str(out)]) == 2  # other settings, same directory

    assert main(["report", str(out), "--at", "5"]) == 0
    report = (out / "report.md").read_text()
    assert "## Classification test error (%) after 5 evaluations" in report
    assert "## Classification test error (%)" in report and "replay" in report
    for method in ("rs", "bo-es", "rb-es", "optdivbo"):
        assert f"| {method} |" in report
    assert "optdivbo vs | better | same | worse" in report
    assert f"Library digest per dataset (one library each): tinycancer {library_digest(library)}." in report
    assert "predate provenance" not in report
    spread = next(line for line in report.splitlines() if line.startswith("Algorithm spread"))
    assert "rb-es " in spread and "optdivbo " in spread
    assert (out / "rank_over_iterations_error.png").exists()
    assert (out / "ensemble_diversity_tinycancer_error.png").exists()

    short = tmp_path / "short.md"
    assert main(["report", str(out), "--only", "rb-es,optdivbo", "--at", "5", "--no-figures",
                 "--output", str(short)]) == 0
    text = short.read_text()
    assert "| rb-es |" in text and "| optdivbo |" in text
    assert "| rs |" not in text and "| bo-es |" not in text
    ranks = [float(line.rsplit("|", 2)[-2]) for line in text.splitlines()
             if line.startswith(("| rb-es |", "| optdivbo |")) and "±" in line]
    assert ranks and all(1.0 <= r <= 2.0 for r in ranks)  # ranked among the two methods only
    assert (out / "report.md").read_text() == report  # the full report is left as it was
    assert main(["report", str(out), "--only", "optdivbo,nosuch", "--output", str(short)]) == 2


def test_live_bench_runs_regression_under_both_metrics(small_csvs, tmp_path):
    out = tmp_path / "live"
    args = ["bench", "--datasets", "tinydiabetes", "--data-dir", str(small_csvs), "--methods", "rs,rs-es",
            "--seeds", "0", "--budget", "3", "--time-limit", "30", "--out", str(out)]
    assert main(args) == 0
    rows = _rows(out / "results.csv")
    assert sorted((r["metric"], r["method"]) for r in rows) == [("mae", "rs"), ("mae", "rs-es"), ("mse", "rs"),
                                                                 ("mse", "rs-es")]
    assert {r["mode"] for r in rows} == {"live"}
    assert all(float(r["test_error"]) > 0 for r in rows)
    # the live search is stored, so an interrupted bench resumes it instead of refitting
    assert (out / "search" / "tinydiabetes" / "mse" / "rs" / "seed-0" / "observations.jsonl").exists()
    result = json.loads((out / "runs" / "tinydiabetes" / "mae" / "rs-es" / "seed-0" / "result.json").read_text())
    digest = dataset_digest(load_dataset(str(small_csvs / "tinydiabetes.csv")))
    assert result["provenance"]["data_digest"] == digest and "library_digest" not in result["provenance"]
    assert main(["report", str(out), "--no-figures"]) == 0
    assert f"Dataset digest per live dataset (one file content each): tinydiabetes {digest}." in (
        out / "report.md").read_text()


def test_bench_rejects_unknown_methods_and_bad_seeds(small_csvs, tmp_path):
    base = ["bench", "--datasets", str(small_csvs / "tinycancer.csv"), "--out", str(tmp_path / "x")]
    assert main(base + ["--methods", "bo-es,nope"]) == 2
    assert main(base + ["--methods", "bo-es", "--seeds", "-3"]) == 2
    assert main(base + ["--methods", "bo-es", "--library", "5", "--budget", "10"]) == 2


@pytest.mark.timeout(300)
def test_library_built_on_dask_workers_equals_the_sequential_one(small_csvs, tmp_path):
    pytest.importorskip("distributed", reason="needs dask.distributed (pip install 'optdiv[dask]')")
    from optdiv.bench.library import build_library, load_library

    data = str(small_csvs / "tinycancer.csv")
    build_library(data, tmp_path / "sequential", size=8, time_limit=60)
    build_library(data, tmp_path / "dask", size=8, time_limit=60, workers=2)
    sequential = load_library(data, tmp_path / "sequential", 8)
    parallel = load_library(data, tmp_path / "dask", 8)
    assert parallel.configs == sequential.configs
    assert np.array_equal(parallel.ok, sequential.ok) and parallel.ok.sum() >= 4
    np.testing.assert_allclose(parallel.val_preds, sequential.val_preds, atol=1e-6)
    np.testing.assert_allclose(parallel.test_preds, sequential.test_preds, atol=1e-6)


@pytest.mark.timeout(300)
def test_regression_library_records_clipping_and_refuses_to_grow_an_unclipped_one(small_csvs, tmp_path):
    from optdiv.bench.library import REGRESSION_MEMBERS, build_library
    from optdiv.storage.files import RunStore, RunStoreError

    data = str(small_csvs / "tinydiabetes.csv")
    directory = build_library(data, tmp_path, size=3, time_limit=60)
    store = RunStore(directory)
    assert store.read_meta()["regression_members"] == REGRESSION_MEMBERS
    assert len(store) == 3
    unclipped = {k: v for k, v in store.read_meta().items() if k != "regression_members"}
    store.meta_path.write_text(json.dumps(unclipped))  # as a library built before members were clipped
    with pytest.raises(RunStoreError, match="regression_members"):
        build_library(data, tmp_path, size=5, time_limit=60)
    assert len(store) == 3
