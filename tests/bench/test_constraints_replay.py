"""Constraints in replay runs and in `optdiv bench`: stored measures, old libraries, results.csv and resume."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from optdiv.bench.replay import LibraryEvaluator, replay_search
from optdiv.cli import main

FAST = {"n_trees": 10}
BUDGET = 20
SLOW_FIT = 0.5


def _with_fit_seconds(library):
    """The synthetic library with every other member slow to fit (0.5 s against 0.05 s)."""
    seconds = np.where(np.arange(len(library)) % 2 == 0, 0.05, SLOW_FIT)
    return dataclasses.replace(library, fit_seconds=seconds)


def test_a_constraint_on_a_measure_the_library_lacks_is_refused(cls_library):
    assert "predict_seconds" not in cls_library.measures  # a library from before measures were recorded
    with pytest.raises(ValueError, match=r"no 'predict_seconds' for 57 of its 57 successful members.*rebuild"):
        replay_search(cls_library, "rs-es", "error", seed=0, budget=BUDGET, constraints=["predict_seconds<=0.01"])


@pytest.mark.parametrize("method", ["rs-es", "bo-es", "tpe-es", "rb-es", "kbo-es", "eo", "nes", "optdivbo",
                                    "divbo-stacking", "dac-hb-es", "dac-sb", "bo-ab", "admm-es"])
def test_fit_seconds_constraint_marks_the_slow_members_infeasible(cls_library, method):
    library = _with_fit_seconds(cls_library)
    result = replay_search(library, method, "error", seed=1, budget=BUDGET, constraints=["fit_seconds<=0.1"],
                           optimizer_options={} if method == "nes" else FAST)
    indices = result.info["library_indices"]
    assert len(result.history) == BUDGET == len(indices)
    for obs, i in zip(result.history, indices):
        if not library.ok[i]:
            assert obs.status == "failed"
        elif library.fit_seconds[i] > 0.1:
            assert obs.status == "infeasible" and obs.val_pred is None and obs.test_pred is None
            assert obs.measures["fit_seconds"] == SLOW_FIT and "fit_seconds = 0.5 violates" in obs.error
        else:
            assert obs.status == "ok" and obs.val_pred is not None
    assert any(obs.status == "infeasible" for obs in result.history)
    assert result.member_indices
    for m in result.member_indices:
        assert result.history[m].status == "ok" and library.fit_seconds[indices[m]] <= 0.1
    assert result.info["constraints"] == ["fit_seconds<=0.1"]


def test_recorded_measures_reach_replay_observations(cls_library):
    n = len(cls_library)
    latency = np.where(np.arange(n) % 3 == 0, 0.2, 0.001)
    library = dataclasses.replace(cls_library, measures={"predict_seconds": latency,
                                                         "predict_us_per_row": latency / 120 * 1e6})
    first = LibraryEvaluator(library, "error").evaluate(library.configs[3], index=0)
    assert first.measures == {"predict_seconds": 0.2, "predict_us_per_row": pytest.approx(0.2 / 120 * 1e6),
                              "fit_seconds": 0.1}
    result = replay_search(library, "bo-es", "error", seed=0, budget=BUDGET, constraints=["predict_seconds<=0.01"],
                           optimizer_options=FAST)
    indices = result.info["library_indices"]
    infeasible = [indices[k] for k, obs in enumerate(result.history) if obs.status == "infeasible"]
    assert infeasible and all(i % 3 == 0 for i in infeasible)
    assert all(indices[m] % 3 != 0 for m in result.member_indices)


# --------------------------------------------------------------------------- optdiv bench on a stored library


@pytest.fixture()
def stored_library(tmp_path):
    """A CSV and a library store for it (as an older optdiv wrote it: fit_seconds only, no predict_seconds),
    with made-up predictions, so the bench needs no fitting."""
    from sklearn.datasets import load_breast_cancer

    from optdiv.bench.library import library_dir
    from optdiv.data import load_dataset, split
    from optdiv.evaluation.observation import Observation
    from optdiv.spaces import get_space
    from optdiv.storage.files import RunStore

    frame = load_breast_cancer(as_frame=True).frame.sample(120, random_state=0).iloc[:, list(range(4)) + [-1]]
    path = tmp_path / "tinybc.csv"
    frame.to_csv(path, index=False)
    dataset = load_dataset(str(path))
    splits = split(dataset, seed=0)
    cache = tmp_path / "cache"
    store = RunStore(library_dir(cache, dataset.name, 0, "autosklearn"))
    space = get_space("autosklearn", "classification")
    rng = np.random.default_rng(0)
    for i, config in enumerate(space.sample(20, seed=0)):
        preds = []
        for y in (splits.y_val, splits.y_test):
            p1 = np.clip(0.5 + (2 * y - 1) * rng.uniform(0.05, 0.4) + rng.normal(0, 0.2, len(y)), 0.01, 0.99)
            preds.append(np.stack([1 - p1, p1], axis=1).astype(np.float32))
        fit = 0.05 if i % 2 == 0 else SLOW_FIT
        store.append(Observation(config, "ok", 0.2, 0.2, fit, None, preds[0], preds[1], i, space.algorithm_of(config)))
    return path, cache


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _bench_args(path, cache, out, *extra):
    return ["bench", "--datasets", str(path), "--methods", "rs-es,bo-es", "--seeds", "0", "--budget", "8",
            "--library", "20", "--cache", str(cache), "--trace-every", "4", "--out", str(out), *extra]


def test_bench_passes_constraints_and_counts_infeasible_runs(stored_library, tmp_path, capsys):
    path, cache = stored_library
    out = tmp_path / "bench"
    assert main(_bench_args(path, cache, out, "--constraint", "fit_seconds<=0.1")) == 0
    rows = _rows(out / "results.csv")
    assert sorted(r["method"] for r in rows) == ["bo-es", "rs-es"]
    assert all(int(r["n_infeasible"]) > 0 and r["n_failed"] == "0" for r in rows)
    assert json.loads((out / "bench.json").read_text())["constraints"] == ["fit_seconds<=0.1"]
    for method in ("rs-es", "bo-es"):
        saved = json.loads((out / "runs" / "tinybc" / "error" / method / "seed-0" / "result.json").read_text())
        assert saved["library_members"] and all(m % 2 == 0 for m in saved["library_members"])  # the fast members

    capsys.readouterr()
    assert main(_bench_args(path, cache, tmp_path / "other", "--constraint", "predict_seconds<=0.01")) == 2
    err = capsys.readouterr().err
    assert "no 'predict_seconds'" in err and "rebuild the library" in err


def test_benches_from_before_constraints_still_load_and_resume(stored_library, tmp_path, capsys):
    path, cache = stored_library
    out = tmp_path / "bench"
    assert main(_bench_args(path, cache, out)) == 0
    # make it look like a bench written before constraints: no settings key, no column, no row field
    settings = json.loads((out / "bench.json").read_text())
    assert settings.pop("constraints") == []
    (out / "bench.json").write_text(json.dumps(settings))
    for result in out.glob("runs/*/*/*/seed-*/result.json"):
        saved = json.loads(result.read_text())
        assert saved["row"].pop("n_infeasible") == 0
        result.write_text(json.dumps(saved))
    rows = _rows(out / "results.csv")
    with open(out / "results.csv", "w", newline="") as fh:
        columns = [c for c in rows[0] if c != "n_infeasible"]
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    capsys.readouterr()
    assert main(_bench_args(path, cache, out)) == 0
    assert "0 searches to run" in capsys.readouterr().err
    rows = _rows(out / "results.csv")
    assert len(rows) == 2 and [r["n_infeasible"] for r in rows] == ["", ""]
    assert main(_bench_args(path, cache, out, "--constraint", "fit_seconds<=0.1")) == 2  # other settings
