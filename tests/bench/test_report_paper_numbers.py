"""`optdiv report --paper-numbers FILE.json`: published numbers beside ours only when a file gives them."""

from __future__ import annotations

import csv
import json

from optdiv.cli import main

COLUMNS = ("dataset", "task", "metric", "mode", "method", "seed", "budget", "library_size", "best_val_error",
           "val_error", "test_error", "n_evaluations", "n_failed", "wall_seconds", "optimizer_seconds",
           "search_group", "n_infeasible")


def _bench_dir(path):
    """A results.csv by hand: quake (error) and bodyfat (mse), two methods, two seeds; no runs/ folder."""
    path.mkdir()
    rows = []
    for dataset, metric, task in (("quake", "error", "classification"), ("bodyfat", "mse", "regression")):
        for method, loss in (("bo-es", 0.45), ("optdivbo", 0.44)):
            for seed in (0, 1):
                value = loss + 0.01 * seed
                rows.append(dict(dataset=dataset, task=task, metric=metric, mode="replay", method=method, seed=seed,
                                 budget=10, library_size=50, best_val_error=value, val_error=value,
                                 test_error=value, n_evaluations=10, n_failed=0, wall_seconds=1.0,
                                 optimizer_seconds=0.5, search_group=method, n_infeasible=0))
    with open(path / "results.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_brackets_come_from_the_file_and_only_on_the_test_tables(tmp_path):
    bench = _bench_dir(tmp_path / "bench")
    numbers = tmp_path / "numbers.json"
    numbers.write_text(json.dumps({"error": {"optdivbo": {"quake": [45.05, 1.37]}},
                                   "mse": {"bo-es": {"bodyfat": [0.13, 0.05]}}}))
    assert main(["report", str(bench), "--no-figures"]) == 0
    plain = (bench / "report.md").read_text()
    assert "paper" not in plain

    assert main(["report", str(bench), "--no-figures", "--paper-numbers", str(numbers)]) == 0
    report = (bench / "report.md").read_text()
    assert "[paper X] = the published mean for the same dataset and method" in report
    lines = report.splitlines()
    assert [line for line in lines if "[paper" in line and line.startswith("|")] == [
        "| optdivbo | **44.50 ± 0.71** [paper 45.05] | 1.00 |", "| bo-es | 0.4550 ± 0.0071 [paper 0.13] | 2.00 |"]
    # apart from the brackets and the sentence explaining them, the two reports are the same
    assert [line.replace(" [paper 45.05]", "").replace(" [paper 0.13]", "") for line in lines
            if not line.startswith("Cells:")] == [line for line in plain.splitlines() if not line.startswith("Cells:")]


def test_a_malformed_or_missing_file_is_an_error_naming_it(tmp_path, capsys):
    bench = _bench_dir(tmp_path / "bench")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"error": {"optdivbo": {"quake": 45.05}}}))
    assert main(["report", str(bench), "--no-figures", "--paper-numbers", str(bad)]) == 2
    assert f"{bad}: 'error' / 'optdivbo' / 'quake': expected [mean, std]" in capsys.readouterr().err
    bad.write_text("{not json")
    assert main(["report", str(bench), "--no-figures", "--paper-numbers", str(bad)]) == 2
    assert f"{bad}: not JSON" in capsys.readouterr().err
    assert main(["report", str(bench), "--no-figures", "--paper-numbers", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    assert not (bench / "report.md").exists()
