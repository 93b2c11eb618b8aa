"""Several evaluations at once on this machine, without Dask: the :class:`LocalPoolRunner`.

Each evaluation already fits in a worker process of its own :class:`~optdiv.evaluation.evaluator.Evaluator`, so
running N at once needs only N evaluators, each driven by a thread of this process that waits on its worker. The
threads do no work of their own (the fits run in the worker processes), so the driver's interpreter lock is not a
bottleneck, and nothing new needs installing: this is how the product's default search uses every core.

The evaluators are rebuilt from the engine's (never started) evaluator's recipe, as the Dask workers rebuild
theirs, so time limits, memory limits, saved pipelines and fault plans hold per evaluation exactly as in a
sequential run. An evaluator never raises for a failing model, so nothing is lost here; a thread that raises
anyway reports its evaluation lost, and the loop re-queues it.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Dict, List, Optional

from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.fault_plan import mark
from optdiv.evaluation.faults import restore_config
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.execution.runner import Done, Runner

#: Seconds :meth:`LocalPoolRunner.close` waits for each stopped evaluation's thread to return.
JOIN_SECONDS = 10.0


class LocalPoolRunner(Runner):
    """``parallel`` evaluations at once, each in its own evaluator's worker process (see the module docstring).
    ``evaluator``: the engine's live, unstarted evaluator, possibly fault-injecting."""

    canonical_configs = True  # as the issued log gives them back, so a resumed parallel run repeats them exactly

    def __init__(self, evaluator: EvaluatorInterface, parallel: int):
        recipe = evaluator.worker_recipe()
        if recipe is None:
            raise ValueError("parallel evaluations need the live evaluator; replay runs are sequential")
        if int(parallel) < 1:
            raise ValueError(f"parallel must be at least 1; got {parallel}")
        self.plan = recipe.faults
        self._idle: List[Evaluator] = [Evaluator(splits=recipe.splits, **recipe.settings)
                                       for _ in range(int(parallel))]
        self._busy: Dict[int, Evaluator] = {}  # evaluation index -> its evaluator
        self._threads: Dict[int, threading.Thread] = {}
        self._ended: "queue.Queue[Done]" = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._parallel = int(parallel)

    @property
    def capacity(self) -> int:
        return self._parallel

    @property
    def running(self) -> int:
        return len(self._threads)

    def open(self) -> None:
        for evaluator in self._idle:  # every worker's start-up at once, beside the first suggestions
            evaluator.spawn()

    def submit(self, index: int, config: dict, time_limit: Optional[float] = None) -> None:
        with self._lock:
            if not self._idle:
                raise RuntimeError(f"all {self._parallel} evaluators are busy")
            evaluator = self._idle.pop()
            self._busy[index] = evaluator
        fault = None if self.plan is None else self.plan.fault_for(index)
        thread = threading.Thread(target=self._evaluate, args=(evaluator, index, config, fault, time_limit),
                                  name=f"optdiv-evaluation-{index}", daemon=True)
        self._threads[index] = thread
        thread.start()

    def _evaluate(self, evaluator: Evaluator, index: int, config: dict, fault: Optional[str],
                  time_limit: Optional[float]) -> None:
        began = time.perf_counter()
        try:
            obs = restore_config(evaluator.evaluate(mark(config, fault), index, time_limit=time_limit), config)
            obs.index = index
            # a worker's start-up is no part of the algorithm's duration (what the duration predictor learns)
            done = Done(index, config, obs, time.perf_counter() - began - evaluator.last_start_seconds)
        except BaseException as exc:  # noqa: BLE001 - the evaluator itself broke: the loop re-queues it
            done = Done(index, config, None, time.perf_counter() - began, lost=f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._busy.pop(index, None)
            if not self._closed:
                self._idle.append(evaluator)
        self._ended.put(done)

    def wait(self, give_up: Optional[float] = None) -> Optional[List[Done]]:
        """Block until at least one running evaluation ended and return every one that did; None when ``give_up``
        passed first."""
        if not self._threads:
            return []
        try:
            timeout = None if give_up is None else max(give_up - time.perf_counter(), 0.0)
            first = self._ended.get(timeout=timeout)
        except queue.Empty:
            return None
        out = [first]
        while True:
            try:
                out.append(self._ended.get_nowait())
            except queue.Empty:
                break
        for done in out:
            thread = self._threads.pop(done.index, None)
            if thread is not None:
                thread.join()
        return out

    def close(self) -> None:
        """End every worker: a running evaluation's worker is stopped (its result is dropped), idle ones are
        released."""
        with self._lock:
            self._closed = True
            busy, idle = list(self._busy.values()), list(self._idle)
            self._idle.clear()
        for evaluator in busy:
            evaluator._stop()  # its thread sees the worker gone and returns a failed observation, then ends
        for thread in list(self._threads.values()):
            thread.join(JOIN_SECONDS)
        self._threads.clear()
        for evaluator in idle + busy:
            evaluator.close()

    def describe(self) -> Optional[dict]:
        return {"workers": self._parallel, "startup_seconds": 0.0}
