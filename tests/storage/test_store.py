"""The run directory: round trip, crash safety and resume checks."""

import json
import os
import time

import numpy as np
import pytest

from optdiv.evaluation.observation import Observation
from optdiv.storage import files as store_mod
from optdiv.storage.files import RunStore, RunStoreError


def _ok(index, rows=6, classes=3, seed=0):
    rng = np.random.default_rng(seed + index)
    val = rng.dirichlet(np.ones(classes), size=rows).astype(np.float32)
    test = rng.dirichlet(np.ones(classes), size=rows + 1).astype(np.float32)
    config = {"algorithm": "lgbm", "lr": np.float64(0.1 * (index + 1)), "leaves": np.int64(31), "bag": True}
    return Observation(config, "ok", 0.25 + index, 0.3, 1.5, None, val, test, index, "lgbm")


def _failed(index):
    return Observation({"algorithm": "svm", "C": 2.0}, "timeout", 34.5, None, 120.0, "exceeded the time limit",
                       None, None, index, "svm")


def _same(a: Observation, b: Observation):
    for name in ("status", "val_loss", "test_loss", "fit_seconds", "error", "index", "algorithm"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.config == {k: (v.item() if hasattr(v, "item") else v) for k, v in b.config.items()}
    for name in ("val_pred", "test_pred"):
        x, y = getattr(a, name), getattr(b, name)
        if y is None:
            assert x is None
        else:
            assert x.dtype == np.float32
            np.testing.assert_array_equal(x, y)


def test_roundtrip(tmp_path):
    s = RunStore(tmp_path / "run")
    obs = [_ok(0), _failed(1), _ok(2)]
    for o in obs:
        s.append(o)
    assert len(s) == 3
    loaded = RunStore(tmp_path / "run").load()
    assert len(loaded) == 3
    for a, b in zip(loaded, obs):
        _same(a, b)
    assert sorted(os.listdir(tmp_path / "run" / "preds")) == [
        "00000_test.npy", "00000_val.npy", "00002_test.npy", "00002_val.npy"]
    lines = (tmp_path / "run" / "observations.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    assert rec["val_pred"] == "preds/00000_val.npy" and "0.1" in lines[0]
    assert all(len(line) < 1000 for line in lines)  # predictions are not inline
    light = s.load(predictions=False)
    assert light[0].val_pred is None and light[0].val_loss == 0.25


def test_each_line_records_when_and_the_targets_are_kept_once(tmp_path):
    s = RunStore(tmp_path)
    stamped = _ok(0)
    stamped.recorded_at = 1700000000.5  # as the search loop sets it
    before = time.time()
    s.append(stamped)
    s.append(_failed(1))  # recorded by the store itself when the caller set no time
    first, second = s.load()
    assert first.recorded_at == 1700000000.5 and before <= second.recorded_at <= time.time()
    log = tmp_path / "observations.jsonl"
    old = [{k: v for k, v in json.loads(line).items() if k != "recorded_at"} for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(record) + "\n" for record in old))  # a log written before the field
    assert [o.recorded_at for o in RunStore(tmp_path).load()] == [None, None]

    assert s.load_targets() is None  # a run directory from before the targets were kept
    s.save_targets(np.array([0, 1, 1]))
    s.save_targets(np.array([9, 9, 9]))  # a resumed search scores the same rows: the first stays
    np.testing.assert_array_equal(RunStore(tmp_path).load_targets(), [0, 1, 1])
    assert [o.index for o in s.load()] == [0, 1]  # the targets are not an observation's arrays


def test_torn_last_line_is_ignored_and_repaired(tmp_path):
    s = RunStore(tmp_path)
    s.append(_ok(0))
    s.append(_failed(1))
    log = tmp_path / "observations.jsonl"
    full = log.read_bytes()
    with open(log, "ab") as fh:  # a crash in the middle of writing observation 2
        fh.write(b'{"index": 2, "status": "ok", "torn_mark')
    assert [o.index for o in s.load()] == [0, 1] and len(s) == 2
    s.append(_ok(3))
    assert log.read_bytes().startswith(full) and log.read_bytes().count(b"\n") == 3
    assert [o.index for o in RunStore(tmp_path).load()] == [0, 1, 3]
    assert b"torn_mark" not in log.read_bytes()


def test_torn_first_line_is_repaired(tmp_path):
    s = RunStore(tmp_path)
    (tmp_path / "observations.jsonl").write_bytes(b'{"index": 0, "sta')
    assert s.load() == []
    s.append(_failed(0))
    assert [o.index for o in s.load()] == [0]


def test_arrays_are_written_before_the_log_line(tmp_path, monkeypatch):
    s = RunStore(tmp_path)
    s.append(_ok(0))
    log = tmp_path / "observations.jsonl"
    seen = []
    real = store_mod.atomic_save_npy

    def spy(path, array):
        seen.append((os.path.basename(str(path)), log.read_bytes().count(b"\n")))
        real(path, array)

    monkeypatch.setattr(store_mod, "atomic_save_npy", spy)
    s.append(_ok(1))
    assert seen == [("00001_val.npy", 1), ("00001_test.npy", 1)]  # the log still had one line at both saves
    assert log.read_bytes().count(b"\n") == 2

    def crash(*args):
        raise KeyboardInterrupt("power cut after the arrays")

    monkeypatch.setattr(RunStore, "_repair_log", crash)  # runs after the arrays, before the line
    with pytest.raises(KeyboardInterrupt):
        s.append(_ok(2))
    assert (tmp_path / "preds" / "00002_val.npy").exists()
    assert [o.index for o in s.load()] == [0, 1]  # no line, no observation: arrays alone never count
    assert not [n for n in os.listdir(tmp_path / "preds") if n.endswith(".tmp")]


def test_line_with_missing_arrays_is_skipped(tmp_path):
    s = RunStore(tmp_path)
    s.append(_ok(0))
    s.append(_ok(1))
    os.remove(tmp_path / "preds" / "00000_test.npy")
    with pytest.warns(RuntimeWarning, match=r"skipping observation 0: prediction file\(s\) missing"):
        assert [o.index for o in s.load()] == [1]


def test_meta_written_once_and_checked(tmp_path):
    s = RunStore(tmp_path)
    settings = {"dataset": "sklearn:iris", "seed": 1, "method": "optdivbo", "budget": 50, "space": ("a", "b")}
    s.write_meta(settings)
    s.write_meta(settings)  # a resume with the same settings
    RunStore(tmp_path).check_meta({**settings, "seed": np.int64(1)})
    with pytest.raises(RunStoreError, match=r"settings differ \(method: stored 'optdivbo', now 'divbo'; seed: "
                                            r"stored 1, now 2\)"):
        s.write_meta({**settings, "seed": 2, "method": "divbo"})
    with pytest.raises(RunStoreError, match=r"extra: not stored, now 1"):
        s.check_meta({**settings, "extra": 1})
    s.check_meta({**settings, "budget": 100}, ignore=["budget"])
    assert s.read_meta()["seed"] == 1
    with pytest.raises(RunStoreError, match="no meta.json"):
        RunStore(tmp_path / "fresh").check_meta(settings)


def test_write_json_is_atomic_and_json_friendly(tmp_path):
    s = RunStore(tmp_path)
    path = s.write_json("result.json", {"loss": np.float32(0.5), "bad": float("nan"), "w": np.arange(3)})
    assert path == tmp_path / "result.json"
    assert s.read_json("result.json") == {"loss": 0.5, "bad": None, "w": [0, 1, 2]}
    s.write_json("result.json", {"loss": 0.25})
    assert json.loads(path.read_text()) == {"loss": 0.25}
    assert sorted(os.listdir(tmp_path)) == ["preds", "result.json"]  # no temporary files left


def test_empty_store(tmp_path):
    s = RunStore(tmp_path / "new")
    assert len(s) == 0 and s.load() == [] and s.read_meta() is None
