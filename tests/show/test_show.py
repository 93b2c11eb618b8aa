"""`optdiv show RUN_DIR`: the leaderboard and figures of a finished, a killed and an older run directory."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes
from tiny_space import tiny_space

from optdiv.cli import main
from optdiv.engine.run import run
from optdiv.show.view import FIGURES, leaderboard, progress, read_run
from optdiv.storage.files import RunStore
from optdiv.storage.layout import LOG_NAME

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}
BUDGET = 8
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small finished regression run (150 rows, 8 evaluations, one algorithm of the space always fails); its
    final ensemble has several members (bagged selection on mse), so the heatmap is drawn."""
    root = tmp_path_factory.mktemp("show")
    csv = root / "diabetes.csv"
    load_diabetes(as_frame=True).frame.sample(150, random_state=0).to_csv(csv, index=False)
    out = root / "run"
    run(str(csv), target="target", out=str(out), seed=0, method="optdivbo", cv=None,
        space=tiny_space("regression", with_crash=True), budget=BUDGET, optimizer_options=FAST)
    return out


def _killed_copy(finished, destination):
    """The run as a kill mid-append leaves it: no result.json or model, the log's last line torn in half."""
    shutil.copytree(finished, destination)
    (destination / "result.json").unlink()
    (destination / "model.joblib").unlink()
    log = destination / LOG_NAME
    data = log.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    log.write_bytes(data[: last + (len(data) - last) // 2])
    return destination


def _printed_rows(text):
    """The leaderboard's rows as printed: index -> (algorithm, status, weight text or '', peak MB text)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["index", "algorithm", "status"]) + 1
    rows = {}
    for line in lines[start:]:
        parts = line.split()
        if not parts or not parts[0].isdigit():
            break
        rows[int(parts[0])] = (parts[1], parts[2], parts[6] if len(parts) > 6 else "", parts[5])
    return rows


def _assert_pngs(folder, names):
    for name in names:
        path = folder / name
        assert path.exists(), name
        data = path.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG), name


def test_show_a_finished_run_prints_every_evaluation_and_writes_every_figure(finished, tmp_path, capsys):
    figures = tmp_path / "figures"
    assert main(["show", str(finished), "--out", str(figures)]) == 0
    out = capsys.readouterr().out
    logged = RunStore(finished).load(predictions=False)
    assert len(logged) == BUDGET
    rows = _printed_rows(out)
    assert sorted(rows) == [obs.index for obs in logged]
    assert {i: row[:2] for i, row in rows.items()} == {obs.index: (obs.algorithm, obs.status) for obs in logged}
    assert any(obs.status == "failed" for obs in logged)  # the crash algorithm: a failure is shown as one
    result = json.loads((finished / "result.json").read_text())
    members = {logged[m["index"]].index: m["weight"] for m in result["ensemble"]}
    assert {i for i, row in rows.items() if row[2]} == set(members)
    assert all(float(row[3]) > 0 for row in rows.values() if row[1] == "ok")  # each evaluation's own peak
    assert f"final ensemble of {len(members)}" in out
    _assert_pngs(figures, FIGURES.values())
    assert "ensemble_diversity.png" in out and "note:" not in out

    frame = leaderboard(read_run(finished))
    assert list(frame.columns) == ["index", "algorithm", "status", "val_loss", "fit_seconds", "peak_mb", "weight"]
    assert sorted(frame["index"]) == [obs.index for obs in logged]
    assert frame["weight"].sum() == pytest.approx(1.0)
    by_index = frame.set_index("index")["weight"]
    for index, weight in members.items():
        assert by_index[index] == pytest.approx(weight)
    ok = frame[frame["status"] == "ok"]
    assert list(ok["val_loss"]) == sorted(ok["val_loss"])  # best first
    assert frame.loc[frame["status"] == "failed", "val_loss"].isna().all()


def test_show_a_killed_run_from_its_log(finished, tmp_path, capsys):
    killed = _killed_copy(finished, tmp_path / "killed")
    assert main(["show", str(killed)]) == 0
    out = capsys.readouterr().out
    rows = _printed_rows(out)
    assert sorted(rows) == list(range(BUDGET - 1))  # the torn last line is not an evaluation
    assert all(row[2] == "" for row in rows.values())  # no final ensemble: no weights
    assert "no final ensemble yet" in out
    _assert_pngs(killed, [FIGURES["progress"], FIGURES["algorithms"]])
    assert not (killed / FIGURES["diversity"]).exists()
    assert out.count(f"{FIGURES['diversity']} left out") == 1

    view = read_run(killed)
    frame = leaderboard(view)
    assert len(frame) == BUDGET - 1 and frame["weight"].isna().all()
    data = progress(view)
    assert data.time_label.startswith("wall seconds")
    assert np.isfinite(data.ensemble).any()  # the targets were kept, so the ensemble curve is drawn


def test_an_older_run_directory_shows_without_targets_and_timestamps(finished, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(finished, old)
    (old / "preds" / "y_val.npy").unlink()
    lines = [json.loads(line) for line in (old / LOG_NAME).read_text().splitlines()]
    (old / LOG_NAME).write_text("".join(json.dumps({k: v for k, v in line.items() if k != "recorded_at"}) + "\n"
                                        for line in lines))
    assert main(["show", str(old)]) == 0
    out = capsys.readouterr().out
    assert out.count("need the validation targets") == 1
    _assert_pngs(old, [FIGURES["progress"], FIGURES["algorithms"]])
    data = progress(read_run(old))
    assert "cumulative fit seconds" in data.time_label and not np.isfinite(data.ensemble).any()


def test_the_store_keeps_the_targets_and_when_each_evaluation_was_recorded(finished):
    store = RunStore(finished)
    y_val = store.load_targets()
    history = store.load()
    assert y_val is not None and len(y_val) == len(next(o.val_pred for o in history if o.val_pred is not None))
    stamps = [obs.recorded_at for obs in history]
    assert all(stamp is not None for stamp in stamps) and stamps == sorted(stamps)


def test_a_directory_that_is_not_a_run_is_one_clear_line(tmp_path, capsys):
    assert main(["show", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an optdiv run directory" in err and LOG_NAME in err
    assert not (tmp_path / "preds").exists()  # reading never writes
    assert main(["show", str(tmp_path / "nosuch")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_without_matplotlib_show_and_report_say_so_once(finished, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    figures = tmp_path / "figures"
    assert main(["show", str(finished), "--out", str(figures)]) == 0
    captured = capsys.readouterr()
    assert len(_printed_rows(captured.out)) == BUDGET
    assert captured.err.count('pip install "optdiv[plot]"') == 1
    assert not figures.exists()

    bench = tmp_path / "bench"
    bench.mkdir()
    pd.DataFrame([dict(dataset="d", task="classification", metric="error", mode="replay", method=m, seed=s,
                       budget=5, library_size=10, best_val_error=0.1, val_error=0.1, test_error=0.1 + 0.01 * s,
                       n_evaluations=5, n_failed=0, wall_seconds=1.0, optimizer_seconds=0.1, search_group=m,
                       n_infeasible=0) for m in ("bo-es", "optdivbo") for s in (0, 1)]).to_csv(
        bench / "results.csv", index=False)
    assert main(["report", str(bench)]) == 0
    assert capsys.readouterr().err.count('pip install "optdiv[plot]"') == 1
    assert not list(bench.glob("*.png"))
