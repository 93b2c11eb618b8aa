"""Parallel evaluation on Dask (loopback only) and fault tolerance: pending-aware suggestions, a killed worker,
killed drivers resumed exactly, injected faults. Every test is bounded by pytest-timeout."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from parallel_helpers import (FAST, SLEEP_SECONDS, CustomEvaluator, check_faults, config_key, drive, fault_seed,
                              sleepy_space)
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.data import from_frame, split
from optdiv.engine.loop import BelieverModel, with_pending
from optdiv.engine.search import search
from optdiv.evaluation.fault_plan import FAULT_KEY, FaultPlan, parse_faults
from optdiv.evaluation.faults import FaultyBuild
from optdiv.evaluation.observation import PENDING
from optdiv.execution.dask_runner import DaskUnavailable, local_cluster
from optdiv.storage.files import RunStore
from optdiv.storage.issued import IssuedLog
from optdiv.storage.layout import ISSUED_NAME
from optdiv.strategies.methods import get_method
from optdiv.strategies.registry import make_strategy

try:
    import distributed
except ImportError:  # the tests that need no Dask still run
    distributed = None

needs_dask = pytest.mark.skipif(distributed is None, reason="needs dask.distributed (pip install 'optdiv[dask]')")

SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture(scope="module")
def frame():
    return load_breast_cancer(as_frame=True).frame.sample(300, random_state=0)


@pytest.fixture(scope="module")
def splits(frame):
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


@pytest.fixture(scope="module")
def finished(splits):
    """Eight sequential optdivbo evaluations: the history the suggestion tests extend."""
    return search(splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
                  budget=8, seed=4, optimizer_options=FAST).history


# --------------------------------------------------------------------------- no Dask needed


def test_fault_plan_is_seeded_per_evaluation_and_parses():
    plan = parse_faults("raise=0.3, hang=0.1, nan=0.05", seed=7)
    assert plan == FaultPlan(0.3, 0.1, 0.05, 7)
    assert parse_faults(plan.text()) == plan  # what a run stores is what it parses back
    draws = [plan.fault_for(i) for i in range(2000)]
    assert draws == [plan.fault_for(i) for i in range(2000)]  # a resumed run meets the same faults
    share = {kind: draws.count(kind) / len(draws) for kind in ("raise", "hang", "nan")}
    assert share["raise"] == pytest.approx(0.3, abs=0.04) and share["hang"] == pytest.approx(0.1, abs=0.03)
    assert share["nan"] == pytest.approx(0.05, abs=0.02)
    assert [FaultPlan(0.3, 0.1, 0.05, 8).fault_for(i) for i in range(50)] != draws[:50]
    assert parse_faults(None) is None and parse_faults("") is None
    for bad, match in [("raise=0.7,hang=0.5", "sum"), ("explode=0.1", "unknown fault"), ("raise", "NAME=VALUE"),
                       ("nan=-0.1", r"\[0, 1\]")]:
        with pytest.raises(ValueError, match=match):
            parse_faults(bad)
    build = FaultyBuild(tiny_space("classification").build)
    config = {"algorithm": "linear", "C": 1.0, "task": "classification"}
    assert type(build(config, 0)).__name__ == "Pipeline"  # unmarked: the space's own model
    with pytest.raises(RuntimeError, match="injected fault"):
        build({**config, FAULT_KEY: "raise"}, 0)


def test_issued_log_survives_a_torn_line(tmp_path):
    log = IssuedLog(tmp_path)
    log.append(0, {"a": 1}, [])
    log.append(1, {"a": 2.5}, [0])
    with open(tmp_path / ISSUED_NAME, "ab") as fh:
        fh.write(b'{"index": 2, "config": {"a"')  # a crash mid-append
    assert sorted(IssuedLog(tmp_path).load()) == [0, 1]
    IssuedLog(tmp_path).append(2, {"a": 3}, [1])  # the torn line is cut before the next append
    records = IssuedLog(tmp_path).load()
    assert sorted(records) == [0, 1, 2] and records[1]["pending"] == [0] and records[2]["config"] == {"a": 3}


@pytest.mark.timeout(60)
def test_pending_configurations_shape_the_next_suggestion(splits, finished):
    space = tiny_space("classification")
    optimizer = make_strategy(get_method("optdivbo"), space, "error", seed=4, optimizer_options=FAST)
    believer = BelieverModel(space, seed=4)
    first = optimizer.suggest(finished, y_val=splits.y_val)
    assert optimizer.suggest(finished, y_val=splits.y_val).config == first.config  # blind to pending: a duplicate
    second = optimizer.suggest(with_pending(finished, [(8, first.config)], believer), y_val=splits.y_val)
    third = optimizer.suggest(with_pending(finished, [(8, first.config), (9, second.config)], believer),
                              y_val=splits.y_val)
    batch = [first.config, second.config, third.config]
    assert len({config_key(c) for c in batch}) == 3
    assert not {config_key(c) for c in batch} & {config_key(o.config) for o in finished}
    assert second.info.get("n_pending") == 1 and third.info.get("n_pending") == 2  # the diversity term saw them

    pseudo = believer.believers(finished, [(8, first.config), (9, second.config)])
    assert [p.status for p in pseudo] == [PENDING, PENDING] and [p.index for p in pseudo] == [8, 9]
    ok_losses = [o.val_loss for o in finished if o.status == "ok"]
    assert all(min(ok_losses) - 1e-9 <= p.val_loss <= max(ok_losses) + 1e-9 for p in pseudo)
    assert all(p.val_pred.shape == finished[0].val_pred.shape and p.val_pred.dtype == np.float32 for p in pseudo)

    # every strategy takes a history with pending pseudo-observations and suggests something new
    for method in ("rs", "bo", "tpe", "divbo", "rb-es", "kbo-es", "eo", "nes", "dac-sb-es", "optdivbo-dac", "admm"):
        strategy = make_strategy(get_method(method), space, "error", seed=4, budget=20, optimizer_options=FAST)
        suggestion = strategy.suggest(with_pending(finished, [(8, first.config)], believer), y_val=splits.y_val)
        seen = {config_key(o.config) for o in finished} | {config_key(first.config)}
        assert config_key(suggestion.config) not in seen, method


@pytest.mark.timeout(60)
def test_missing_dask_is_a_clear_error(tmp_path):
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "import optdiv, optdiv.engine.search, optdiv.execution.dask_runner\n"
        "from optdiv.cli import main\n"
        "sys.exit(main(['run', '--data', 'sklearn:iris', '--budget', '2', '--workers', '2', '--quiet']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "optdiv[dask]" in done.stderr and "Traceback" not in done.stderr
    assert issubclass(DaskUnavailable, ImportError)


# --------------------------------------------------------------------------- on a loopback LocalCluster


@needs_dask
@pytest.mark.timeout(120)
def test_two_workers_complete_the_budget(tmp_path, splits):
    store = RunStore(tmp_path / "run")
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
                    budget=10, seed=1, optimizer_options=FAST, workers=2, store=store)
    history = result.history
    assert [o.index for o in history] == list(range(10))
    assert len({config_key(o.config) for o in history}) == 10  # a batch never repeats a pending configuration
    assert all(o.status == "ok" for o in history)
    assert result.info["parallel"]["workers"] == 2 and not result.info["parallel"]["lost"]
    assert result.test_loss < 0.2
    stored = store.load()
    assert [o.index for o in stored] == list(range(10)) and [o.config for o in stored] == [o.config for o in history]
    issued = IssuedLog(store.directory).load()
    assert sorted(issued) == list(range(10))
    assert any(record["pending"] for record in issued.values())  # suggestions were made beside running ones
    assert all(o.status != PENDING for o in stored)


@needs_dask
@pytest.mark.timeout(240)
def test_a_run_on_a_local_cluster_keeps_dask_s_logs_off_the_console(tmp_path, frame):
    csv = tmp_path / "data.csv"
    frame.to_csv(csv, index=False)
    done = subprocess.run([sys.executable, "-m", "optdiv", "run", "--data", str(csv), "--target", "target", "--budget",
                           "6", "--workers", "2", "--out", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=220)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "6 evaluations" in done.stdout
    for noise in ("Traceback", "CommClosedError", "distributed.", "Exception"):
        assert noise not in done.stderr, done.stderr[-3000:]


@needs_dask
@pytest.mark.timeout(150)
@pytest.mark.timing
def test_killed_worker_loses_its_evaluation_once_then_it_fails(splits):
    """Index 2 runs on a worker that is killed mid-fit, is re-queued, and its second worker is killed too:
    it is recorded as failed; every other evaluation completes."""
    with local_cluster(2) as cluster, distributed.Client(cluster) as client:
        killed = []

        def executing(dask_worker):
            return [str(ts.key) for ts in dask_worker.state.executing]

        def killer():
            deadline = time.monotonic() + 100
            for attempt in (0, 1):
                prefix = f"optdiv-eval-2-{attempt}-"
                while time.monotonic() < deadline:
                    running = client.run(executing, on_error="return")
                    hit = [w for w, keys in running.items() if isinstance(keys, list)
                           and any(k.startswith(prefix) for k in keys)]
                    if hit:
                        time.sleep(SLEEP_SECONDS / 3)  # well inside the fit
                        pid = client.run(os.getpid, workers=hit)[hit[0]]
                        os.kill(pid, signal.SIGKILL)
                        killed.append((attempt, pid))
                        break
                    time.sleep(0.05)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        result = search(splits, "classification", n_classes=2, method="rs", space=sleepy_space(), budget=4, seed=2,
                        optimizer_options=FAST, scheduler=cluster.scheduler_address, time_limit=30)
        thread.join(5)
    assert [a for a, _ in killed] == [0, 1]
    history = result.history
    assert [o.index for o in history] == list(range(4))
    stats = result.info["parallel"]
    assert stats["requeued"].count(2) == 1 and 2 in stats["lost"]
    assert history[2].status == "failed" and "lost 2 times" in history[2].error
    assert "KilledWorker" in history[2].error
    # On a slow machine the killed worker's restart can take so long that the scheduler queues another evaluation
    # behind index 2 on the one worker left; the second kill then loses it too, by the same rule. Nothing else fails.
    for i, obs in enumerate(history):
        if i != 2:
            assert obs.status == "ok" or (i in stats["lost"] and "KilledWorker" in obs.error), (i, obs.status, obs.error)
    assert sum(o.status == "ok" for o in history) >= 2


@needs_dask
@pytest.mark.timeout(150)
@pytest.mark.timing
def test_injected_faults_on_two_workers_are_all_recorded(tmp_path, splits):
    seed = fault_seed()
    store = RunStore(tmp_path / "run")
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
                    budget=12, seed=seed, optimizer_options=FAST, workers=2, time_limit=3,
                    faults="raise=0.3,hang=0.1,nan=0.05", store=store)
    assert [o.index for o in result.history] == list(range(12))
    check_faults(result.history, FaultPlan(0.3, 0.1, 0.05, seed))
    assert [(o.index, o.status) for o in store.load()] == [(o.index, o.status) for o in result.history]
    assert all(result.history[i].status == "ok" for i in result.member_indices)


@pytest.mark.timeout(90)
@pytest.mark.timing
def test_injected_faults_without_dask(splits):
    seed = fault_seed(("raise", "nan"), budget=6)
    plan = FaultPlan(0.3, 0.1, 0.05, seed)
    result = search(splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"),
                    budget=6, seed=seed, optimizer_options=FAST, time_limit=3, faults=plan)
    assert "parallel" not in result.info
    check_faults(result.history, plan)


@needs_dask
@pytest.mark.timeout(300)
@pytest.mark.timing
def test_driver_killed_repeatedly_resumes_exactly(tmp_path, frame):
    """SIGKILL the driver process at up to ten seeded random points (at least five of them mid-run), resume
    each time; with one worker the final history (configurations, statuses, losses) and ensemble equal an
    uninterrupted sequential run's. The cluster outlives the drivers here (``--scheduler``), as a long-lived
    cluster does."""
    csv = tmp_path / "data.csv"
    frame.to_csv(csv, index=False)
    budget = 36
    drive(str(csv), str(tmp_path / "reference"), budget, "none")  # uninterrupted, no Dask
    with local_cluster(1) as cluster:
        out, outcomes = _kill_and_resume(tmp_path, csv, cluster.scheduler_address, 10, budget, 20240611)
    assert outcomes.count("killed") >= MIN_KILLS, outcomes
    _assert_same_run(out, tmp_path / "reference", budget)


@needs_dask
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_driver_with_its_own_cluster_killed_and_resumed(tmp_path, frame, workers):
    """The same with ``--workers N``: each kill takes the driver's local cluster down with it. Two workers
    give no exact-equality promise, only nothing lost or duplicated."""
    csv = tmp_path / "data.csv"
    frame.to_csv(csv, index=False)
    budget = 30
    out, outcomes = _kill_and_resume(tmp_path, csv, workers, 10, budget, 7)
    assert outcomes.count("killed") >= MIN_KILLS, outcomes
    if workers == "1":
        drive(str(csv), str(tmp_path / "reference"), budget, "none")
        _assert_same_run(out, tmp_path / "reference", budget)
    else:
        resumed = RunStore(out).load(predictions=False)
        assert [o.index for o in resumed] == list(range(budget))
        assert len({config_key(o.config) for o in resumed}) == budget


MIN_KILLS = 5


def _kill_and_resume(tmp_path: Path, csv: Path, where: str, kills: int, budget: int, seed: int):
    """Start the driver up to ``kills`` times and SIGKILL it at a seeded random point, then let one finish.

    A fast machine can finish the whole budget before a late kill point comes; the run is then complete and
    later starts would only reload it, so the loop stops there and the callers ask for ``MIN_KILLS`` real kills.
    """
    out = tmp_path / "killed"
    rng = random.Random(seed)
    outcomes = []
    command = [sys.executable, str(SUPPORT / "parallel_helpers.py"), str(csv), str(out), str(budget), where]
    for _ in range(kills):
        # when: at a random early time (mostly still starting up), or just after the log of issued suggestions
        # or of results has grown by one or two lines (mid-run, whatever the machine's speed); a late time
        # would let a fast machine finish the budget in one start
        trigger = rng.choice(["time", ISSUED_NAME, "observations.jsonl"])
        at_time, grow, extra = rng.uniform(0.2, 1.5), rng.randint(1, 2), rng.uniform(0.0, 0.3)
        base = _lines(out / trigger)
        before = _lines(out / "observations.jsonl")
        proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        began = time.monotonic()
        while proc.poll() is None:
            waited = time.monotonic() - began
            if (trigger == "time" and waited >= at_time) or waited > 90:
                break
            if trigger != "time" and _lines(out / trigger) >= base + grow:
                time.sleep(extra)
                break
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            outcomes.append("killed")
        else:
            outcomes.append("finished")
        proc.wait(timeout=30)
        assert _lines(out / "observations.jsonl") >= before
        if outcomes[-1] == "finished":
            break
    final = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=200)
    assert final.returncode == 0, final.stderr[-3000:]
    return out, outcomes


def _assert_same_run(out: Path, reference_dir: Path, budget: int) -> None:
    reference = RunStore(reference_dir).load()
    resumed = RunStore(out).load()
    assert [o.index for o in resumed] == list(range(budget))  # nothing lost, nothing duplicated
    assert [(o.config, o.status) for o in resumed] == [(o.config, o.status) for o in reference]
    assert [o.val_loss for o in resumed] == pytest.approx([o.val_loss for o in reference])
    lines = (out / "observations.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["index"] for line in lines) == list(range(budget))
    summary = json.loads((out / "result.json").read_text())
    assert summary["n_evaluations"] == budget
    assert summary["ensemble"] == json.loads((reference_dir / "result.json").read_text())["ensemble"]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_replay_and_custom_evaluators_stay_sequential(splits):
    with pytest.raises(ValueError, match="live evaluator"):
        search(splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"), budget=2,
               workers=2, evaluator=CustomEvaluator())
    with pytest.raises(ValueError, match="live evaluator"):
        search(splits, "classification", n_classes=2, method="rs", space=tiny_space("classification"), budget=2,
               evaluator=CustomEvaluator(), faults="raise=0.5")


def test_bench_takes_workers_for_live_searches_only(tmp_path):
    from optdiv.bench.harness import Bench, DatasetRef
    from optdiv.cli import build_parser

    ref = DatasetRef("tiny.csv", "tiny", "classification")
    bench = Bench(datasets=[ref], methods=["rs"], seeds=[0], out=tmp_path, budget=3, workers=2)
    assert bench.settings()["workers"] == 2 and bench.units()[0]["workers"] == 2
    assert "workers" not in Bench(datasets=[ref], methods=["rs"], seeds=[0], out=tmp_path, budget=3).settings()
    replay = Bench(datasets=[ref], methods=["rs"], seeds=[0], out=tmp_path, budget=3, library=5, workers=2)
    # in replay mode the workers only build the library: the searches and their settings stay sequential
    assert "workers" not in replay.settings() and replay.units()[0]["workers"] is None
    args = build_parser().parse_args(["bench", "--datasets", "x", "--methods", "rs", "--out", "o", "--workers", "3"])
    assert args.workers == 3
    args = build_parser().parse_args(["run", "--data", "x", "--workers", "2", "--inject-faults", "raise=0.5",
                                      "--memory-limit", "2048"])
    assert (args.workers, args.scheduler, args.inject_faults, args.memory_limit) == (2, None, "raise=0.5", 2048)
    with pytest.raises(SystemExit):  # one or the other
        build_parser().parse_args(["run", "--data", "x", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
