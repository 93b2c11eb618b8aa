"""benchmarks/parallel_speedup.py: the scale-out report's arithmetic on hand-made runs (no search is run here)."""

import json

import pytest


def _row(seed, mode, workers, wall, fits, test):
    return {"dataset": "d", "method": "optdivbo", "seed": seed, "mode": mode, "workers": workers, "budget": 10,
            "n_evaluations": 10, "n_failed": 0, "wall_seconds": wall, "startup_seconds": 2.0 if workers else 0.0,
            "suggest_seconds": 1.0, "fit_seconds": fits, "val_error": test, "test_error": test,
            "requeued": 0, "lost": 0}


def test_speedup_is_one_worker_wall_over_n_workers_wall_and_work_is_reported(tmp_path, script):
    speedup = script("parallel_speedup")
    summarize, write = speedup.summarize, speedup.write
    rows = [_row(0, "sequential", 0, 90.0, 80.0, 0.10), _row(0, "async-1", 1, 100.0, 80.0, 0.10),
            _row(0, "async-2", 2, 40.0, 70.0, 0.12), _row(1, "sequential", 0, 110.0, 100.0, 0.20),
            _row(1, "async-1", 1, 120.0, 100.0, 0.20), _row(1, "async-2", 2, 80.0, 130.0, 0.22)]
    summary = summarize(rows)
    assert summary["async-2"]["speedup_vs_1_worker"] == pytest.approx(110.0 / 60.0)
    assert summary["async-1"]["speedup_vs_1_worker"] == pytest.approx(1.0)
    assert "speedup_vs_1_worker" not in summary["sequential"]
    assert summary["async-2"]["fit_seconds"] == pytest.approx(100.0)
    assert summary["async-2"]["test_error_minus_sequential"] == pytest.approx(0.02)
    write(tmp_path, rows, summary, {"method": "optdivbo", "data": "d.csv", "budget": 10, "seeds": [0, 1]})
    table = (tmp_path / "parallel_speedup.md").read_text()
    assert "| async-2 | 2 | 60.0 | 2.0 | 100.0 | 1.83 | 0.1700 | +0.0200 |" in table
    assert len(json.loads((tmp_path / "parallel_speedup.json").read_text())["runs"]) == 6
