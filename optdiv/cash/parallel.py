"""Scale-out on Dask: an asynchronous, diversity-aware search loop that loses nothing on crash, hang or kill.

Evaluation pool
---------------
Each Dask task runs one evaluation through the ordinary :class:`~optdiv.cash.evaluator.Evaluator` kept
on the Dask worker (one per worker thread and run), so every evaluation still fits in its own child
process under the time limit and the memory limit (``RLIMIT_AS``), and exceptions, timeouts, crashes and
NaN predictions become failed / timeout observations exactly as in a sequential run. The workers' evaluators
are built with the constructor arguments of the engine's own (never started) evaluator, so an option the
sequential engine passes to its Evaluator reaches the workers unchanged. The data splits are scattered once
to every worker.

``workers=N`` starts a loopback ``LocalCluster`` (N processes, one thread each, no dashboard, no Dask memory
management: the per-evaluation limit is the evaluator's). Its worker processes are not daemonic (the
evaluator starts a child process) and its scheduler allows no silent re-runs of a task whose worker died
(``allowed-failures`` 0), so this module decides: ``scheduler=ADDRESS`` uses an existing cluster, whose
workers must be non-daemonic too (``DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker ADDRESS``) and must
import optdiv and the space's build function; there the scheduler's own ``allowed-failures`` re-runs come
before ours.

Asynchronous loop
-----------------
As many evaluations run as the cluster has worker threads (on an existing cluster: counted once, when the
run connects). Whenever one finishes, the next configuration
is suggested from the finished observations (in evaluation-index order) followed by one pseudo-observation
per configuration still running, status :data:`~optdiv.cash.optimizers.PENDING`:

- performance, a Kriging believer: its ``val_loss`` is the mean of a random forest over the finished
  observations (the mean successful loss while fewer than two are finished), so BO's expected improvement
  is pushed away from it;
- diversity: its ``val_pred`` is the mean validation prediction of the three nearest successful
  configurations in the encoding, so DivBO / OptDivBO's pool and diversity see its predicted behaviour
  and a batch is diverse within itself too.

The pseudo-observations exist only inside that one ``suggest`` call: they never reach the store, the final
ensemble or the result. Suggestions stay pure functions of (seed, history): the history handed to
``suggest`` has one entry per issued evaluation, so its length is the new evaluation's index. Strategies
other than rs / bo / tpe / divbo / optdivbo see a pending entry as a failed run (a pessimistic liar).

Fault tolerance and exact resume
--------------------------------
- Before a suggestion is submitted it is appended, fsynced, to ``issued.jsonl`` in the run directory (its
  index, configuration and the indices still pending when it was made); results are appended to the store
  as they arrive and loaded in index order. A resumed run re-submits every issued evaluation without a
  result (same index, same configuration) before suggesting anything new, so ``kill -9`` of the driver at
  any point loses and duplicates nothing. With one worker nothing is ever pending, every suggestion sees
  exactly the history a sequential run sees, and the final history equals an uninterrupted run's.
- A task that raises (the evaluation itself never does: a failing model is an observation) lost its
  worker, was cancelled or could not send its result: it is re-queued once, and recorded as ``"failed"``
  with the reason when it is lost again.
- No wait is unbounded: an evaluation without a result ``time_limit * folds + START_TIMEOUT + DEADLINE_SLACK``
  seconds after it was submitted counts as lost (``folds``: 1 on a holdout split, K under K-fold
  cross-validation, where the time limit is per fold).

Time budget
-----------
Under a time budget the loop issues an evaluation only while its predicted duration fits in the search's
time left, and caps each task's limit at that time left. A task cut at the deadline (status
:data:`~optdiv.cash.observation.DEADLINE`) is not recorded: it stays issued without a result, so a resumed
run evaluates it again. Tasks still running :data:`GIVE_UP_SECONDS` past the search's end are cancelled.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import pickle
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.cash.candidates import SpaceCandidates
from optdiv.cash.constraints import enforce
from optdiv.cash.evaluator import Evaluator
from optdiv.cash.fitting import n_folds
from optdiv.cash.observation import DEADLINE, WORST_LOSS, Observation, algorithm_of
from optdiv.cash.worker import START_TIMEOUT
from optdiv.cash.faults import FaultInjectingEvaluator, FaultPlan, mark, restore_config
from optdiv.cash.optimizers import PENDING, _losses_with_failures
from optdiv.cash.store import cut_torn_line, to_jsonable

#: File of issued suggestions in a run directory (one JSON line each, append-only, fsynced).
ISSUED_NAME = "issued.jsonl"

#: Seconds past ``time_limit + START_TIMEOUT`` after which a submitted evaluation counts as lost.
DEADLINE_SLACK = 60.0

#: Seconds to wait for a finished task's result to arrive from its worker.
RESULT_TIMEOUT = 60.0

#: Seconds between checks of the running evaluations (results are picked up this often at worst).
POLL_SECONDS = 0.02

#: Nearest successful configurations whose predictions make a pending configuration's believed behaviour.
BELIEVER_NEIGHBOURS = 3

#: Times one evaluation may be lost (worker killed, task cancelled, deadline passed) before it is recorded
#: as failed: lost once it is re-queued, lost twice it fails.
MAX_LOSSES = 2

#: Seconds past the end of a time-budgeted search after which tasks still running are cancelled (each is
#: capped at the deadline already: this covers a worker that does not answer).
GIVE_UP_SECONDS = 3.0


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


# --------------------------------------------------------------------------- issued suggestions


class IssuedLog:
    """``issued.jsonl``: every suggestion, written and fsynced before it is submitted (None: memory only)."""

    def __init__(self, directory=None):
        self.path = None if directory is None else Path(directory) / ISSUED_NAME
        self.records: Dict[int, dict] = {}
        self._repaired = False  # a torn line can only precede this process's first append

    def load(self) -> Dict[int, dict]:
        """Index -> record of every complete line (a torn last line from a crash is ignored)."""
        self.records = {}
        if self.path is None or not self.path.exists():
            return self.records
        data = self.path.read_bytes()
        for raw in data.split(b"\n")[:-1]:
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                index = int(record["index"])
                record["config"] = dict(record["config"])
            except (ValueError, KeyError, TypeError):
                continue
            self.records.setdefault(index, record)
        return self.records

    def append(self, index: int, config: dict, pending: Sequence[int]) -> None:
        record = {"index": int(index), "config": config, "pending": sorted(int(i) for i in pending)}
        self.records[int(index)] = record
        if self.path is None:
            return
        line = json.dumps(to_jsonable(record), sort_keys=True, allow_nan=False) + "\n"
        new = not self.path.exists()
        if not self._repaired:
            cut_torn_line(self.path)
            self._repaired = True
        with open(self.path, "ab") as fh:
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        if new:
            from optdiv.cash.store import _fsync_dir

            _fsync_dir(self.path.parent)


def unfinished_issued(store, history: Sequence) -> List[int]:
    """Indices issued in ``store``'s run whose result never arrived (empty without a store or a log)."""
    if store is None or not (Path(store.directory) / ISSUED_NAME).exists():
        return []
    done = {obs.index for obs in history}
    return sorted(i for i in IssuedLog(store.directory).load() if i not in done)


def wants_parallel(workers: Optional[int], scheduler: Optional[str], store, history: Sequence) -> bool:
    """Whether the search runs on Dask: asked for, or resuming a run that has evaluations in flight
    (those are re-submitted with their indices, which only the parallel loop does)."""
    if workers is not None or scheduler is not None:
        return True
    return bool(unfinished_issued(store, history))


def canonical_config(config: dict) -> dict:
    """The configuration as the issued log gives it back on resume (plain JSON types), so a resumed run
    evaluates the very values an uninterrupted one does."""
    return json.loads(json.dumps(to_jsonable(dict(config)), sort_keys=True))


# --------------------------------------------------------------------------- pending pseudo-observations


class BelieverModel:
    """Pseudo-observations for pending configurations: believed loss and believed predictions (see the
    module docstring). Deterministic in (seed, number of finished and pending evaluations)."""

    def __init__(self, space, seed: int = 0, n_trees: int = 20, neighbours: int = BELIEVER_NEIGHBOURS):
        self.source = SpaceCandidates(space)
        self.seed, self.n_trees, self.neighbours = int(seed), int(n_trees), int(neighbours)

    def believers(self, finished: Sequence, pending: Sequence[Tuple[int, dict]]) -> List[Observation]:
        if not pending:
            return []
        configs = [dict(config) for _, config in pending]
        pending_x = self.source.space.encode(configs)
        losses = self._believed_losses(finished, pending_x, len(finished) + len(pending))
        preds = self._believed_predictions(finished, pending_x)
        return [
            Observation(config=config, status=PENDING, val_loss=float(loss), index=int(index),
                        algorithm=algorithm_of(config), val_pred=pred)
            for (index, _), config, loss, pred in zip(pending, configs, losses, preds)
        ]

    def _believed_losses(self, finished: Sequence, pending_x: np.ndarray, step: int) -> np.ndarray:
        ok = [obs.val_loss for obs in finished if obs.status == "ok" and np.isfinite(obs.val_loss)]
        fallback = float(np.mean(ok)) if ok else float("nan")  # nan: optimisers read it as a failure
        if len(finished) < 2:
            return np.full(len(pending_x), fallback)
        from optdiv.core.surrogates import ProbabilisticRandomForest

        seed = int(np.random.default_rng([self.seed, step, 0xBE11]).integers(2**31))
        forest = ProbabilisticRandomForest(n_trees=self.n_trees, seed=seed)
        forest.fit(self.source.encode_history(finished), _losses_with_failures(finished))
        mean, _ = forest.predict(pending_x)
        return np.where(np.isfinite(mean), mean, fallback)

    def _believed_predictions(self, finished: Sequence, pending_x: np.ndarray) -> List[Optional[np.ndarray]]:
        ok = [obs for obs in finished if obs.status == "ok" and obs.val_pred is not None]
        if not ok:
            return [None] * len(pending_x)
        ok_x = self.source.encode_history(ok)
        preds = np.stack([obs.val_pred for obs in ok]).astype(np.float64)
        out = []
        for row in pending_x:
            distance = np.abs(ok_x - row).sum(axis=1)
            nearest = np.argsort(distance, kind="stable")[: self.neighbours]
            out.append(preds[nearest].mean(axis=0).astype(np.float32))
        return out


def suggest_with_pending(strategy, finished: Sequence, pending: Sequence[Tuple[int, dict]], y_val,
                         believer: BelieverModel):
    """``strategy.suggest`` over the finished observations followed by believers for the pending ones."""
    history = list(finished) + believer.believers(finished, pending)
    return strategy.suggest(history, y_val=y_val)


# --------------------------------------------------------------------------- worker side


@dataclass(frozen=True)
class EvaluatorSpec:
    """What a Dask worker needs to build its evaluators: the Evaluator keyword arguments (minus the splits,
    which are scattered) and a key under which workers keep them: a digest of those arguments and the
    splits, so a driver restarted on a long-lived cluster reuses its predecessor's evaluator processes."""

    key: str
    kwargs: Dict = field(default_factory=dict)

    @property
    def time_limit(self) -> float:
        return float(self.kwargs.get("time_limit", 120.0))

    @property
    def metric(self) -> str:
        return str(self.kwargs["metric"])


def evaluator_spec(evaluator) -> Tuple[EvaluatorSpec, Optional[FaultPlan], object]:
    """(spec, fault plan, splits) read off the engine's unstarted evaluator (possibly fault-injecting)."""
    plan = None
    if isinstance(evaluator, FaultInjectingEvaluator):
        evaluator, plan = evaluator.evaluator, evaluator.plan
    if not isinstance(evaluator, Evaluator):
        raise ValueError("parallel search (workers / scheduler) needs the live evaluator; replay runs are "
                         "sequential")
    names = [n for n in inspect.signature(Evaluator.__init__).parameters if n not in ("self", "splits")]
    kwargs = {name: getattr(evaluator, name) for name in names if hasattr(evaluator, name)}
    return EvaluatorSpec(_digest(kwargs, evaluator.splits), kwargs), plan, evaluator.splits


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


@contextlib.contextmanager
def local_cluster(workers: int, silence_logs: int = logging.ERROR):
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
class _Running:
    index: int
    config: dict
    attempt: int
    submitted: float
    deadline: float


def parallel_loop(strategy, evaluator, history: Sequence, *, y_val, budget: Optional[int],
                  time_left: Optional[Callable[[], float]] = None, predictor=None, space, seed: int = 0, store=None,
                  constraints: Sequence = (), progress=None, workers: Optional[int] = None,
                  scheduler: Optional[str] = None, on_finished: Optional[Callable[[List[Observation]], None]] = None):
    """Run the search's evaluations on Dask until the budget; returns (history in index order, suggestion
    seconds of this session, stats). ``evaluator`` is the engine's unstarted evaluator (its arguments and
    splits go to the workers); ``history`` the stored observations; ``time_left()`` the seconds the search
    may still use (None: no time budget), ``predictor`` a :class:`~optdiv.cash.budget.DurationPredictor`;
    ``on_finished(history)`` runs after each recorded observation."""
    from optdiv.cash.budget import DurationPredictor

    predictor = DurationPredictor(history) if predictor is None else predictor
    spec, plan, splits = evaluator_spec(evaluator)
    require_distributed()  # before anything is read or started
    finished: Dict[int, Observation] = {int(obs.index): obs for obs in history}
    issued = IssuedLog(None if store is None else store.directory)
    records = issued.load()
    reissue = sorted(i for i in records if i not in finished)
    next_index = max(list(finished) + list(records), default=-1) + 1
    missing = sorted(set(range(next_index)) - set(finished) - set(records))
    if missing:
        raise ValueError(f"run {getattr(store, 'directory', '')}: evaluations {missing[:10]} were neither issued "
                         f"nor recorded; the run directory is damaged")
    believer = BelieverModel(space, seed)
    suggest_seconds: List[float] = []
    stats = {"workers": None, "requeued": [], "lost": [], "reissued": list(reissue), "startup_seconds": 0.0,
             "stopped": None}
    running: Dict[object, _Running] = {}
    losses: Dict[int, int] = {}
    deadline_seconds = spec.time_limit * n_folds(splits) + START_TIMEOUT + DEADLINE_SLACK

    def ordered() -> List[Observation]:
        return [finished[i] for i in sorted(finished)]

    def may_issue() -> bool:
        if stats["stopped"] is not None or not (budget is None or next_index < budget):
            return False
        if time_left is not None and time_left() <= predictor.fastest():
            stats["stopped"] = "time budget: no evaluation fits in the time left"
            return False
        return True

    def submit(pool, index: int, config: dict) -> None:
        now = time.perf_counter()
        fault = None if plan is None else plan.fault_for(index)
        limit = None if time_left is None else max(time_left(), 0.0)
        future = pool.submit(index, config, fault, losses.get(index, 0), limit)
        running[future] = _Running(index, config, losses.get(index, 0), now, now + deadline_seconds)

    def record(obs: Observation) -> None:
        predictor.observe(obs.algorithm, obs.fit_seconds)
        if obs.status == DEADLINE:  # cut by the run's deadline: stays issued without a result (a resume re-runs it)
            stats["stopped"] = "time budget: an evaluation was stopped at the deadline and discarded"
            return
        obs = enforce(obs, constraints)
        if store is not None:
            store.append(obs)
        finished[obs.index] = obs
        if on_finished is not None:
            on_finished(ordered())
        if progress is not None:
            progress(len(finished), budget, obs)

    def lost(pool, task: _Running, reason: str) -> None:
        losses[task.index] = losses.get(task.index, 0) + 1
        if losses[task.index] < MAX_LOSSES:
            stats["requeued"].append(task.index)
            submit(pool, task.index, task.config)
            return
        stats["lost"].append(task.index)
        waited = time.perf_counter() - task.submitted
        record(Observation(config=dict(task.config), status="failed", val_loss=WORST_LOSS[spec.metric],
                           fit_seconds=waited, index=task.index, algorithm=algorithm_of(task.config),
                           error=f"evaluation lost {MAX_LOSSES} times (re-queued once): {reason}"[:3000],
                           measures={"fit_seconds": waited}))

    with DaskEvaluationPool(spec, splits, workers, scheduler) as pool:
        stats["workers"] = pool.concurrency
        stats["startup_seconds"] = pool.startup_seconds
        try:
            while True:
                while len(running) < pool.concurrency and (
                        (reissue and (time_left is None or time_left() > 0)) or may_issue()):
                    if reissue:
                        index = reissue.pop(0)
                        config = dict(records[index]["config"])
                    else:
                        index = next_index
                        pending = sorted(task.index for task in running.values())
                        suggestion = suggest_with_pending(
                            strategy, ordered(), [(i, records[i]["config"]) for i in pending], y_val, believer)
                        config = canonical_config(suggestion.config)
                        if time_left is not None:
                            left = time_left()
                            if left <= 0 or predictor.predict(algorithm_of(config)) > left:
                                stats["stopped"] = (f"time budget: the next evaluation would not fit in the "
                                                    f"{max(left, 0.0):.1f} s left")
                                break
                        suggest_seconds.append(suggestion.seconds)
                        issued.append(index, config, pending)  # persisted before it runs anywhere
                        next_index += 1
                    submit(pool, index, config)
                if not running:
                    break
                give_up = None
                if time_left is not None:
                    left = time_left()
                    give_up = time.perf_counter() + left + GIVE_UP_SECONDS
                    if left <= 0 and stats["stopped"] is None:
                        stats["stopped"] = "time budget: the search's time ran out"
                if not _collect(pool, running, record, lost, give_up):
                    break  # past the deadline with tasks still running: the finally clause cancels them
        finally:
            for future in list(running):
                with contextlib.suppress(Exception):
                    future.cancel()
    return ordered(), suggest_seconds, stats


def _collect(pool, running: Dict, record, lost, give_up: Optional[float] = None) -> bool:
    """Wait (bounded) until an evaluation finishes or passes its deadline, and handle every one that did;
    False when ``give_up`` (a perf_counter time) passed first."""
    while True:
        now = time.perf_counter()
        done = [future for future in running if future.done()]
        expired = [future for future, task in running.items() if future not in done and now > task.deadline]
        if done or expired:
            break
        if give_up is not None and now > give_up:
            return False
        time.sleep(POLL_SECONDS)
    for future in done:
        task = running.pop(future)
        try:
            obs = future.result(timeout=RESULT_TIMEOUT)
        except Exception as exc:  # the worker died, the task was cancelled or its result could not come back
            lost(pool, task, f"{type(exc).__name__}: {exc}")
            continue
        obs.index = task.index
        record(obs)
    for future in expired:
        task = running.pop(future)
        with contextlib.suppress(Exception):
            future.cancel()
        lost(pool, task, f"no result within {task.deadline - task.submitted:.0f} s of submitting it")
    return True
