"""Evaluations side by side on this machine without Dask (``parallel=N``, the product's default on several cores):
batches that see each other as pending, every evaluation recorded once, faults recorded as in a sequential run,
running workers ended on close. Every test is bounded by pytest-timeout."""

from __future__ import annotations

import time

import pytest
from parallel_helpers import FAST, SLEEP_SECONDS, CustomEvaluator, check_faults, config_key, fault_seed, sleepy_space
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.data import from_frame, split
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.fault_plan import FaultPlan
from optdiv.execution.factory import make_runner
from optdiv.execution.local_pool import LocalPoolRunner
from optdiv.execution.sequential import SequentialRunner
from optdiv.storage.files import RunStore
from optdiv.storage.issued import IssuedLog


@pytest.fixture(scope="module")
def splits():
    frame = load_breast_cancer(as_frame=True).frame.sample(300, random_state=0)
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


@pytest.mark.timeout(180)
def test_two_evaluations_at_once_complete_the_budget_and_see_each_other_pending(tmp_path, splits):
    store = RunStore(tmp_path / "run")
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=sleepy_space(), budget=8,
                    seed=1, optimizer_options=FAST, parallel=2, store=store, time_limit=30)
    history = result.history
    assert [o.index for o in history] == list(range(8))
    assert all(o.status == "ok" for o in history), [o.error for o in history]
    assert len({config_key(o.config) for o in history}) == 8  # a batch never repeats a pending configuration
    assert result.info["parallel"]["workers"] == 2 and not result.info["parallel"]["lost"]
    issued = IssuedLog(store.directory).load()
    assert sorted(issued) == list(range(8))
    assert any(record["pending"] for record in issued.values())  # suggested while another evaluation ran
    assert [o.config for o in store.load()] == [o.config for o in history]
    assert all(o.fit_seconds >= SLEEP_SECONDS for o in history)  # each one's own time, not its wait


@pytest.mark.timeout(180)
@pytest.mark.timing  # a 3 s limit that a hang must pass and a first fit must not: run alone
def test_injected_faults_on_two_local_workers_are_all_recorded(splits):
    seed = fault_seed()
    result = search(splits, "classification", n_classes=2, method="optdivbo", space=tiny_space("classification"),
                    budget=12, seed=seed, optimizer_options=FAST, parallel=2, time_limit=3,
                    faults="raise=0.3,hang=0.1,nan=0.05")
    assert [o.index for o in result.history] == list(range(12))
    check_faults(result.history, FaultPlan(0.3, 0.1, 0.05, seed))


@pytest.mark.timeout(120)
def test_closing_the_pool_ends_a_running_evaluation_s_worker(splits):
    space = sleepy_space()
    evaluator = Evaluator(space.build, splits, "classification", "error", n_classes=2, time_limit=60)
    runner = make_runner(evaluator, parallel=2)
    assert isinstance(runner, LocalPoolRunner) and runner.capacity == 2
    runner.open()
    config = dict(space.sample(1, seed=0)[0])
    runner.submit(0, config)
    assert runner.running == 1
    time.sleep(SLEEP_SECONDS / 2)  # inside the fit
    busy = list(runner._busy.values())
    runner.close()
    assert runner.running == 0 and busy and not any(e.started for e in busy)


def test_a_replay_or_custom_evaluator_stays_sequential_and_one_at_a_time_needs_no_pool(splits):
    assert isinstance(make_runner(CustomEvaluator(), parallel=4), SequentialRunner)
    live = Evaluator(tiny_space("classification").build, splits, "classification", "error", n_classes=2)
    assert isinstance(make_runner(live, parallel=1), SequentialRunner)
    with pytest.raises(ValueError, match="at least 1"):
        LocalPoolRunner(live, 0)
