"""Evaluations on Dask: the :class:`DaskRunner` of the search loop (optdiv.engine.loop), which loses nothing on
crash, hang or kill.

Evaluation pool
---------------
Each Dask task runs one evaluation through the ordinary :class:`~optdiv.evaluation.evaluator.Evaluator` kept
on the Dask worker (one per worker thread and run), so every evaluation still fits in its own child
process under the time limit and the memory limit (``RLIMIT_AS``), and exceptions, timeouts, crashes and
NaN predictions become failed / timeout observations exactly as in a sequential run. The workers' evaluators
are built from the engine's own (never started) evaluator's recipe
(:meth:`~optdiv.evaluation.interface.EvaluatorInterface.worker_recipe`: its settings, the splits and its fault plan),
so an option the engine passes to its Evaluator reaches the workers unchanged. The data splits are scattered
once to every worker.

``workers=N`` starts a loopback ``LocalCluster`` (N processes, one thread each, no dashboard, no Dask memory
management: the per-evaluation limit is the evaluator's, whose models get ``n_jobs`` cores shared out among the
workers). Dask's own logs stay off the console while the pool runs (:data:`DASK_LOGGERS`): what fails is an
evaluation, recorded with its error. Its worker processes are not daemonic (the
evaluator starts a child process) and its scheduler allows no silent re-runs of a task whose worker died
(``allowed-failures`` 0), so the search loop decides: ``scheduler=ADDRESS`` uses an existing cluster, whose
workers must be non-daemonic too (``DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker ADDRESS``) and must
import optdiv and the space's build function; there the scheduler's own ``allowed-failures`` re-runs come
before ours.

The runner
----------
Its capacity is the cluster's worker threads (on an existing cluster: counted once, when the run connects).
A task that raises (the evaluation itself never does: a failing model is an observation) lost its worker,
was cancelled or could not send its result, and no wait is unbounded: an evaluation without a result
``time_limit * folds + START_TIMEOUT + DEADLINE_SLACK`` seconds after it was submitted counts as lost too
(``folds``: 1 on a holdout split, K under K-fold cross-validation, where the time limit is per fold). The
runner reports both as lost; the loop re-queues or records them. Pending pseudo-observations, the issued log,
exact resume and the time budget are the loop's, the same for every runner.

Dask is imported only when a runner is made (:class:`DaskUnavailable` names the extra to install).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.fault_plan import mark
from optdiv.evaluation.faults import restore_config
from optdiv.evaluation.fitting import n_folds
from optdiv.evaluation.interface import EvaluatorInterface, WorkerRecipe
from optdiv.evaluation.observation import Observation
from optdiv.evaluation.worker import START_TIMEOUT
from optdiv.execution.runner import Done, Runner

#: Seconds past ``time_limit + START_TIMEOUT`` after which a submitted evaluation counts as lost.
DEADLINE_SLACK = 60.0

#: Seconds to wait for a finished task's result to arrive from its worker.
RESULT_TIMEOUT = 60.0

#: Seconds between checks of the running evaluations (results are picked up this often at worst).
POLL_SECONDS = 0.02


class DaskUnavailable(ImportError):
    """Parallel runs were asked for but dask.distributed is not installed."""


def require_distributed():
    """The ``distributed`` module, or :class:`DaskUnavailable` naming the extra to install."""
    try:
        import distributed
    except ImportError as exc:
        raise DaskUnavailable(
            "parallel evaluation (--workers / --scheduler) needs Dask: pip install 'optdiv[dask]' "
            f"(dask[distributed]); import failed: {exc}"
        ) from None
    return distributed


# --------------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class EvaluatorSpec:
    """What a Dask worker needs to build its evaluators: the Evaluator's settings (its constructor arguments but
    the splits, which are scattered) and a key under which workers keep them: a digest of those settings and the
    splits, so a driver restarted on a long-lived cluster reuses its predecessor's evaluator processes."""

    key: str
    kwargs: Dict = field(default_factory=dict)

    @classmethod
    def of(cls, recipe: WorkerRecipe) -> "EvaluatorSpec":
        return cls(_digest(recipe.settings, recipe.splits), dict(recipe.settings))

    @property
    def time_limit(self) -> float:
        return float(self.kwargs.get("time_limit", 120.0))


def _digest(kwargs: dict, splits) -> str:
    try:
        return hashlib.sha256(pickle.dumps((sorted(kwargs.items()), splits), protocol=4)).hexdigest()
    except Exception:  # not picklable here (the workers will say so): never shared with another driver
        return uuid.uuid4().hex


#: Idle evaluators of this worker process by spec key, least recently used first.
_WORKER_EVALUATORS: "OrderedDict[str, List[Evaluator]]" = OrderedDict()
_WORKER_LOCK = threading.Lock()

#: Runs whose idle evaluators a worker keeps (a long-lived cluster serves run after run, and a killed
#: driver never closes its own): the least recently used beyond these are ended.
KEEP_RUNS_PER_WORKER = 2


def evaluate_task(spec: EvaluatorSpec, splits, config: dict, index: int, fault: Optional[str],
                  time_limit: Optional[float] = None) -> Observation:
    """The Dask task: one evaluation on an idle evaluator of this worker (one per thread and run);
    ``time_limit`` caps it at the run's deadline."""
    stale: List[Evaluator] = []
    with _WORKER_LOCK:
        idle = _WORKER_EVALUATORS.setdefault(spec.key, [])
        _WORKER_EVALUATORS.move_to_end(spec.key)
        evaluator = idle.pop() if idle else None
        while len(_WORKER_EVALUATORS) > KEEP_RUNS_PER_WORKER:
            stale.extend(_WORKER_EVALUATORS.popitem(last=False)[1])
    for old in stale:
        old.close()
    if evaluator is None:
        evaluator = Evaluator(splits=splits, **spec.kwargs)
    try:
        obs = evaluator.evaluate(mark(config, fault), index, time_limit=time_limit)
    finally:
        with _WORKER_LOCK:
            _WORKER_EVALUATORS.setdefault(spec.key, []).append(evaluator)
    return restore_config(obs, config)


def close_worker_evaluators(key: str) -> int:
    """End this worker's idle evaluator processes of spec ``key``; returns how many there were."""
    with _WORKER_LOCK:
        evaluators = _WORKER_EVALUATORS.pop(key, [])
    for evaluator in evaluators:
        evaluator.close()
    return len(evaluators)


def _worker_is_daemonic() -> bool:
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


# --------------------------------------------------------------------------- driver side


#: Loggers of Dask and its network layer. A run that goes well still closes connections under them (workers
#: ending while the scheduler or the client still talks to them), which they report as tracebacks at ERROR level;
#: every evaluation's own failure is an observation with its error, so the run keeps them off the console.
DASK_LOGGERS = ("distributed", "tornado", "asyncio")


@contextlib.contextmanager
def quiet_dask_logs(level: int = logging.CRITICAL):
    """Raise the driver's Dask loggers to ``level`` while the block runs, then restore them."""
    saved = {name: logging.getLogger(name).level for name in DASK_LOGGERS}
    for name in DASK_LOGGERS:
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, old in saved.items():
            logging.getLogger(name).setLevel(old)


@contextlib.contextmanager
def local_cluster(workers: int, silence_logs: int = logging.CRITICAL):
    """A loopback LocalCluster set up for evaluations (see the module docstring); the settings stay in
    force while it runs, because its nannies read them again when they restart a killed worker."""
    distributed = require_distributed()
    import dask

    if int(workers) < 1:
        raise ValueError(f"workers must be at least 1; got {workers}")
    settings = {"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0}
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(
            n_workers=int(workers), threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, memory_limit=0, silence_logs=silence_logs,
        )
        try:
            yield cluster
        finally:
            cluster.close(timeout=30)


class DaskEvaluationPool:
    """A Dask client (on a cluster of its own or an existing scheduler) running :func:`evaluate_task`."""

    def __init__(self, spec: EvaluatorSpec, splits, workers: Optional[int] = None, scheduler: Optional[str] = None):
        if workers is None and scheduler is None:
            workers = 1
        self.spec, self.splits, self.workers, self.scheduler = spec, splits, workers, scheduler
        self._stack = contextlib.ExitStack()
        self.session = uuid.uuid4().hex  # task keys: never those of an earlier (killed) driver's tasks
        self.client = None
        self.concurrency = 0
        self.startup_seconds = 0.0

    def __enter__(self) -> "DaskEvaluationPool":
        distributed = require_distributed()
        began = time.perf_counter()
        self._stack.enter_context(quiet_dask_logs())  # until the pool is closed: closing is what logs the most
        try:
            if self.scheduler is not None:
                self.client = self._stack.enter_context(distributed.Client(self.scheduler, timeout=START_TIMEOUT))
                self.client.wait_for_workers(1, timeout=START_TIMEOUT)
                if any(self.client.run(_worker_is_daemonic).values()):
                    raise ValueError(
                        f"the Dask workers at {self.scheduler} are daemonic processes, which cannot start the "
                        f"evaluation process; start them with DASK_DISTRIBUTED__WORKER__DAEMON=False"
                    )
            else:
                cluster = self._stack.enter_context(local_cluster(self.workers))
                self.client = self._stack.enter_context(distributed.Client(cluster))
            self.concurrency = max(1, sum(self.client.nthreads().values()))
            self._scatter()
        except BaseException:
            self._stack.close()
            raise
        self.startup_seconds = time.perf_counter() - began
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _scatter(self) -> None:
        self.splits_future = self.client.scatter(self.splits, broadcast=True, hash=False)

    def submit(self, index: int, config: dict, fault: Optional[str], attempt: int,
               time_limit: Optional[float] = None):
        if self.splits_future.status != "finished":  # every copy was lost with its workers: send them again
            self._scatter()
        key = f"optdiv-eval-{index}-{attempt}-{self.session}"
        return self.client.submit(evaluate_task, self.spec, self.splits_future, config, index, fault, time_limit,
                                  key=key, pure=False)

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.run(close_worker_evaluators, self.spec.key, on_error="ignore")
        self._stack.close()
        self.client = None


@dataclass
class _Task:
    index: int
    config: dict
    submitted: float
    deadline: float


class DaskRunner(Runner):
    """Evaluations on a Dask cluster of its own (``workers``) or an existing one (``scheduler``), as many at once
    as it has worker threads. ``evaluator``: the engine's live, unstarted evaluator, possibly fault-injecting
    (its plan then marks each task's configuration, as the sequential evaluator does); the workers rebuild it from
    its :meth:`~optdiv.evaluation.interface.EvaluatorInterface.worker_recipe`."""

    canonical_configs = True

    def __init__(self, evaluator: EvaluatorInterface, workers: Optional[int] = None,
                 scheduler: Optional[str] = None):
        recipe = evaluator.worker_recipe()
        if recipe is None:
            raise ValueError("parallel search (workers / scheduler) needs the live evaluator; replay runs are "
                             "sequential")
        require_distributed()  # before anything is read or started
        self.spec, self.plan = EvaluatorSpec.of(recipe), recipe.faults
        self.pool = DaskEvaluationPool(self.spec, recipe.splits, workers, scheduler)
        self.patience = self.spec.time_limit * n_folds(recipe.splits) + START_TIMEOUT + DEADLINE_SLACK
        self._tasks: Dict[object, _Task] = {}  # future -> task, in submission order
        self._attempts: Dict[int, int] = {}

    @property
    def capacity(self) -> int:
        return self.pool.concurrency

    @property
    def running(self) -> int:
        return len(self._tasks)

    def open(self) -> None:
        self.pool.__enter__()

    def submit(self, index: int, config: dict, time_limit: Optional[float] = None) -> None:
        now = time.perf_counter()
        attempt = self._attempts.get(index, 0)  # a re-queued evaluation's task gets a key of its own
        self._attempts[index] = attempt + 1
        fault = None if self.plan is None else self.plan.fault_for(index)
        future = self.pool.submit(index, config, fault, attempt, time_limit)
        self._tasks[future] = _Task(index, config, now, now + self.patience)

    def wait(self, give_up: Optional[float] = None) -> Optional[List[Done]]:
        """Wait (bounded) until an evaluation finishes or passes its deadline; every one that did, results first."""
        while True:
            now = time.perf_counter()
            done = [future for future in self._tasks if future.done()]
            expired = [future for future, task in self._tasks.items() if future not in done and now > task.deadline]
            if done or expired:
                break
            if give_up is not None and now > give_up:
                return None
            time.sleep(POLL_SECONDS)
        out = []
        for future in done:
            task = self._tasks.pop(future)
            try:
                obs = future.result(timeout=RESULT_TIMEOUT)
            except Exception as exc:  # the worker died, the task was cancelled or its result could not come back
                out.append(self._lost(task, f"{type(exc).__name__}: {exc}"))
                continue
            obs.index = task.index
            out.append(Done(task.index, task.config, obs, obs.fit_seconds))
        for future in expired:
            task = self._tasks.pop(future)
            with contextlib.suppress(Exception):
                future.cancel()
            out.append(self._lost(task, f"no result within {task.deadline - task.submitted:.0f} s of submitting it"))
        return out

    @staticmethod
    def _lost(task: _Task, reason: str) -> Done:
        return Done(task.index, task.config, None, time.perf_counter() - task.submitted, lost=reason)

    def close(self) -> None:
        for future in list(self._tasks):
            with contextlib.suppress(Exception):
                future.cancel()
        self._tasks.clear()
        self.pool.close()

    def describe(self) -> Optional[dict]:
        return {"workers": self.pool.concurrency, "startup_seconds": self.pool.startup_seconds}
