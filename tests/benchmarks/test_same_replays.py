"""benchmarks/same_replays.py: identical bench directories pass, any changed result or trace is named."""

import importlib.util
import shutil
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "same_replays.py"


def _load():
    spec = importlib.util.spec_from_file_location("same_replays", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench(root: Path) -> Path:
    run = root / "runs" / "quake" / "error" / "bo-es" / "seed-0"
    run.mkdir(parents=True)
    (root / "results.csv").write_text("dataset,method,test_error,wall_seconds\nquake,bo-es,44.1,3.2\n")
    (run / "result.json").write_text('{"members": [3, 7], "provenance": {"host": "a"}, "row": {"wall_seconds": 1}}')
    (run / "trace.csv").write_text("iteration,val\n10,0.41\n")
    return root


def test_same_searches_with_other_timings_pass(tmp_path, capsys):
    same = _load()
    before = _bench(tmp_path / "before")
    after = tmp_path / "after"
    shutil.copytree(before, after)
    (after / "results.csv").write_text("dataset,method,test_error,wall_seconds\nquake,bo-es,44.1,9.9\n")
    result = after / "runs/quake/error/bo-es/seed-0/result.json"
    result.write_text('{"members": [3, 7], "provenance": {"host": "b"}, "row": {"wall_seconds": 5}}')
    assert same.main([str(before), str(after)]) == 0
    assert "0 differ" in capsys.readouterr().out


def test_a_changed_member_or_trace_is_named(tmp_path):
    same = _load()
    before = _bench(tmp_path / "before")
    after = tmp_path / "after"
    shutil.copytree(before, after)
    (after / "runs/quake/error/bo-es/seed-0/result.json").write_text('{"members": [3, 8]}')
    (after / "runs/quake/error/bo-es/seed-0/trace.csv").write_text("iteration,val\n10,0.42\n")
    found = same.differences(before, after)
    assert found == ["runs/quake/error/bo-es/seed-0/result.json", "runs/quake/error/bo-es/seed-0/trace.csv"]
    assert same.main([str(before), str(after)]) == 1
