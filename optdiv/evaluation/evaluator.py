"""Fit one configuration under a wall-time limit and record what happened, never raising.

The fit runs in a persistent worker process (:mod:`optdiv.evaluation.worker`, which describes the process model
and how limits and deaths are handled) doing :func:`optdiv.evaluation.fitting.fit_predict`; the result becomes an
:class:`~optdiv.evaluation.observation.Observation`.

Failures
--------
Exceptions (with a traceback tail), timeouts, worker crashes and NaN/inf predictions all become an
:class:`Observation` with ``status`` ``"failed"`` or ``"timeout"``, no predictions, ``test_loss=None``
and ``val_loss = worst_loss(metric)`` (optimisers impute timeouts differently, see
:func:`optdiv.strategies.base.imputed_loss`): a finite, JSON-friendly value no real model scores worse than:
``error`` 1.0, ``brier`` 2.0, ``log_loss`` ``-log(1e-15)`` (about 34.54, the loss of probability 0 on
the true class after the clipping in :mod:`optdiv.core.metrics`), and ``1e30`` for the unbounded
regression losses ``mse`` / ``mae``.

:meth:`Evaluator.settings` gives back the constructor's arguments, so a Dask worker (optdiv.execution.dask_runner)
builds an evaluator that evaluates as the engine's would, whatever options that one was given
(:meth:`Evaluator.worker_recipe`, the runners' interface of :mod:`optdiv.evaluation.interface`).

Builders must be picklable by reference (top-level functions of an importable module), because the
worker imports them; the constructor checks this and raises ``TypeError`` early. With ``spawn``, a
script that uses the evaluator needs the usual ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import math
import multiprocessing
import pickle
import time
import weakref
from typing import Any, Callable, Dict, Optional, Union

import numpy as np

from optdiv.core.metric_vocabulary import resolve
from optdiv.core.metrics import mean_loss
from optdiv.evaluation.fault_plan import FaultPlan
from optdiv.evaluation.faults import FaultInjectingEvaluator
from optdiv.evaluation.fitting import MAX_ERROR_CHARS, error_text, fit_predict, n_folds
from optdiv.evaluation.threads import with_threads
from optdiv.evaluation.interface import EvaluatorInterface, WorkerRecipe
from optdiv.evaluation.memory import can_watch_memory, resolve_memory_limit, splits_mb
from optdiv.evaluation.observation import DEADLINE, WORKER_START_FAILED, WORST_LOSS, Observation, algorithm_of
from optdiv.evaluation.pipelines import part_rows_digest, pipeline_path, splits_digest
from optdiv.evaluation.worker import START_TIMEOUT, Worker, describe_exit, keep, shutdown, take_kept

#: Share of an evaluation's time limit its forest or booster may grow in before it keeps the rounds it has
#: (optdiv.evaluation.anytime); the rest is for predicting the validation and test rows and sending them back.
GROWTH_SHARE = 0.7


def _refuse_while_bootstrapping(what: str) -> None:
    """Stop a process that multiprocessing is still starting (a script without an ``if __name__ == "__main__"``
    guard, re-run by a worker's spawn start-up) with one line that says how to fix it: SystemExit prints no
    traceback, and a script's own ``except Exception`` around the fit cannot swallow it and run on in the child."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(f"optdiv {what} while this process was being started by multiprocessing: guard the "
                         f"script's entry point with if __name__ == '__main__':")


class Evaluator(EvaluatorInterface):
    """Evaluate configurations on fixed splits, each fit in a worker process under ``time_limit`` seconds.

    With cross-validation splits (``folds`` set) ``time_limit`` bounds each fold's fit, so one evaluation may
    take up to ``n_folds(splits) * time_limit`` seconds; a timeout after some folds keeps their loss as
    ``partial_loss``.

    ``build(config, seed)`` returns an unfitted scikit-learn estimator; it must be a top-level function
    of an importable module. ``metric`` is ``error``, ``log_loss`` or ``brier`` for classification and
    ``mse`` or ``mae`` for regression, or an alias of one (:func:`optdiv.core.metric_vocabulary.resolve`;
    ``metric`` then holds the loss's own name). ``n_classes`` defaults to one more than the
    largest class index in the splits. ``memory_limit_mb`` caps the worker's resident set (its children's
    included; the data it holds count too): the parent reads it every 0.2 s while a fit runs and ends a worker
    past it, recording a failure. Where the resident set cannot be read, the worker's address space is capped
    instead (``RLIMIT_AS``, which also counts thread stacks and untouched mappings, so leave headroom there).
    ``threads``: the cores one evaluation may use, given to its model's thread options and to the process's
    OpenMP/BLAS caps (optdiv.evaluation.threads); None keeps the libraries' own defaults.
    ``pipelines_dir``: a folder where each successful holdout fit is saved (:meth:`saved_path` says where),
    so the final model can load its members instead of refitting them; with ``bag_folds``, a cross-validated
    evaluation's fold pipelines are saved too, as one averaging model (:class:`~optdiv.evaluation.fitting.FoldBag`).

    Not thread-safe: use one evaluator per thread. Call :meth:`close` (or use ``with``) to end the
    worker early; otherwise it ends when the evaluator is garbage-collected or at interpreter exit.
    """

    takes_time_limit = True

    def __init__(
        self,
        build: Callable[[dict, int], Any],
        splits,
        task: str,
        metric: str,
        n_classes: Optional[int] = None,
        time_limit: float = 120.0,
        seed: int = 0,
        memory_limit_mb: Union[int, str, None] = None,
        in_process: bool = False,
        start_method: str = "spawn",
        threads: Optional[int] = 1,
        pipelines_dir=None,
        bag_folds: bool = False,
    ):
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression'; got {task!r}")
        self.metric = resolve(metric, task).name
        if not (time_limit > 0):
            raise ValueError(f"time_limit must be positive; got {time_limit}")
        if task == "classification" and n_classes is None:
            ys = [np.asarray(y) for y in (splits.y_train, splits.y_val, splits.y_test) if y is not None]
            n_classes = int(max(int(y.max()) for y in ys if y.size)) + 1
        if not in_process:
            try:
                pickle.dumps(build)
            except Exception as exc:
                raise TypeError(
                    f"build must be picklable by reference (a top-level function of an importable module) "
                    f"to run in a worker process: {exc}"
                ) from None
        self.build = with_threads(build, threads)  # the models take the evaluation's threads (optdiv.evaluation.threads)
        self.splits = splits
        self.task = task
        self.n_classes = n_classes
        self.time_limit = float(time_limit)
        self.seed = int(seed)
        self.memory_limit_mb = resolve_memory_limit(  # "auto": by the data this evaluator's worker holds
            memory_limit_mb, splits_mb(splits) if memory_limit_mb == "auto" else 0.0)
        self.in_process = in_process
        self.start_method = start_method
        self.threads = threads  # the evaluation's threads: its models' and its OpenMP/BLAS caps; None: library defaults
        self.pipelines_dir = pipelines_dir  # where fitted pipelines are saved (optdiv.evaluation.pipelines)
        self.bag_folds = bool(bag_folds)  # under cross-validation, save each evaluation's fold pipelines as one bag
        self._rows_digest: Optional[str] = None
        self.worker_starts = 0  # how many times a worker was started or taken over from a closed evaluator
        self.last_start_seconds = 0.0  # of the last evaluate call, the seconds spent starting a worker
        self.last_start_broke = False  # whether the last worker start failed for good (died, not timed out)
        self._holder: list = [None]
        self._task_counter = 0
        self._finalizer = weakref.finalize(self, shutdown, self._holder)

    # -- public -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now (otherwise the first :meth:`evaluate` does); a no-op in process."""
        if not self.in_process:
            self._ensure_worker()

    def spawn(self) -> None:
        """Start the worker process without waiting for it to be ready: its start-up (interpreter, imports, the
        rows) then runs beside the caller's work, and the first call that needs it waits only for what is left."""
        if self.in_process or self._holder[0] is not None:
            return
        _refuse_while_bootstrapping("started a worker process")
        watched, capped = self._memory_limits()
        args = (self.build, self.splits, self.task, self.n_classes, self.seed, capped)
        self._holder[0] = take_kept(self._worker_kind(), args)  # one a closed evaluator left, without start-up
        if self._holder[0] is None:
            ctx = multiprocessing.get_context(self.start_method)
            self._holder[0] = Worker(ctx, args, self.threads, memory_limit_mb=watched)
        self.worker_starts += 1

    def _memory_limits(self):
        """(the limit the parent watches on the worker's resident set, the one the worker caps its own address
        space at where the resident set cannot be read (RLIMIT_AS)); one of them is None."""
        watched = self.memory_limit_mb is not None and can_watch_memory()
        return (self.memory_limit_mb if watched else None), (None if watched else self.memory_limit_mb)

    def _worker_kind(self) -> tuple:
        """What a worker was started with that a later evaluator's worker must share to take it over."""
        return (self.start_method, self.threads, *self._memory_limits())

    def settings(self) -> Dict[str, Any]:
        """The constructor's arguments except ``splits``: ``Evaluator(splits=splits, **settings())`` evaluates as
        this one does. A Dask worker builds its evaluators from them (the splits travel separately), so an option
        given here reaches every worker. ``build`` is the current one, which fault injection may have wrapped."""
        return {"build": self.build, "task": self.task, "metric": self.metric, "n_classes": self.n_classes,
                "time_limit": self.time_limit, "seed": self.seed, "memory_limit_mb": self.memory_limit_mb,
                "in_process": self.in_process, "start_method": self.start_method, "threads": self.threads,
                "pipelines_dir": self.pipelines_dir, "bag_folds": self.bag_folds}

    def worker_recipe(self) -> WorkerRecipe:
        """What a Dask worker needs to evaluate as this evaluator does: :meth:`settings` and the splits."""
        return WorkerRecipe(self.settings(), self.splits)

    def with_faults(self, plan: FaultPlan) -> FaultInjectingEvaluator:
        """This evaluator sending each evaluation its planned fault; only before its worker starts (the wrapped
        build must reach the worker)."""
        return FaultInjectingEvaluator(self, plan)

    @property
    def started(self) -> bool:
        """Whether a worker process was started and not ended since."""
        return self._holder[0] is not None

    def close(self) -> None:
        """Release the worker process, if any: an idle, healthy one is kept a short while for the next evaluator
        of this process (optdiv.evaluation.worker.keep), any other ended. The evaluator stays usable: a later
        evaluate starts (or takes over) a worker again."""
        if self.in_process:
            return
        keep(self._holder, self._worker_kind())

    def _stop(self) -> None:
        """End the worker process now (it failed, timed out, or its state is unknown)."""
        shutdown(self._holder)

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def evaluate(self, config: dict, index: int, time_limit: Optional[float] = None) -> Observation:
        """Fit ``config`` and return its :class:`Observation`; never raises for a failing model.

        ``time_limit``: the most seconds this call may take, worker start-up included (the run's deadline);
        when it is below the evaluator's own limit and ends the evaluation, the status is :data:`DEADLINE`.
        In process there is no limit to enforce.

        Ends the process (SystemExit, one line) when called while it is itself being spawned (a script without
        an ``if __name__ == "__main__"`` guard, re-run by a worker's start-up): every evaluation would fail, and
        a store would fill with failures instead of the script stopping."""
        _refuse_while_bootstrapping("evaluated a configuration")
        config = dict(config)
        started = time.perf_counter()
        self.last_start_seconds = 0.0
        try:
            if self.in_process:
                result = fit_predict(self.build, self.splits, self.task, self.n_classes, self.seed, config,
                                      save_to=self._save_to(index))
                return self._observation(config, index, result)
            return self._evaluate_in_worker(config, index, time_limit)
        except Exception as exc:  # a failure of the machinery itself: still an observation, never a raise
            if not self.in_process:
                self._stop()
            return self._failed(config, index, "failed", "evaluator error: " + error_text(exc),
                                time.perf_counter() - started)

    def fit_and_save(self, config: dict, index: int, time_limit: Optional[float] = None,
                     rounds: Optional[int] = None, rows: Optional[int] = None) -> Optional[str]:
        """Fit ``config`` on the training rows and save the pipeline where :meth:`saved_path` says, in the worker
        and stopped after ``time_limit`` seconds (worker start-up included): a final model's refit, which has no
        rows to be scored on; ``rounds``: those its evaluation kept (optdiv.evaluation.anytime); ``rows``: on
        a sample of that many rows only, saved apart (:func:`~optdiv.evaluation.pipelines.part_rows_digest`). None
        when it was saved, else what went wrong."""
        save_to = self._save_to(index, rows)
        if save_to is None:
            return "no folder to save the fitted pipeline in (pipelines_dir)"
        cut = time.perf_counter() + (self.time_limit if time_limit is None else max(float(time_limit), 0.0))
        if self.in_process:
            result = fit_predict(self.build, self.splits, self.task, self.n_classes, self.seed, dict(config),
                                 save_to=save_to, rounds=rounds, rows=rows)
        else:
            problem = self._ensure_worker(cut - time.perf_counter())
            if problem is not None:
                return problem
            worker = self._holder[0]
            self._task_counter += 1
            try:
                worker.busy = True
                worker.conn.send((self._task_counter, dict(config), save_to, None, rounds, rows))
            except Exception as exc:
                self._stop()
                return "could not send the configuration to the worker: " + error_text(exc)
            kind, payload = worker.receive(max(cut - time.perf_counter(), 0.0))
            if kind != "msg":
                self._stop()
                return ("stopped at the deadline" if kind == "timeout" else
                        describe_exit(payload) if kind == "dead" else self._over_memory(payload) if kind == "memory"
                        else "unreadable result from the worker")
            result = payload[1]
        if not result.get("ok"):
            return (result.get("error") or "unknown error")[:MAX_ERROR_CHARS]
        return None if result.get("saved") else "the fitted pipeline could not be saved"

    @property
    def rows_digest(self) -> Optional[str]:
        """Digest of the rows (and folds) saved pipelines are fitted on (optdiv.evaluation.pipelines); None when none
        are saved: no ``pipelines_dir``, or cross-validation without ``bag_folds`` (its fold pipelines each miss a
        fold of the rows, so alone none of them is the model that was scored)."""
        folds = getattr(self.splits, "folds", None)
        if self.pipelines_dir is None or (folds is not None and not self.bag_folds):
            return None
        if self._rows_digest is None:
            self._rows_digest = splits_digest(self.splits.X_train, self.splits.y_train, folds)
        return self._rows_digest

    def saved_path(self, index: int, rows: Optional[int] = None):
        """Where evaluation ``index``'s fitted pipeline (on a sample of ``rows`` rows) is saved, or None when
        pipelines are not saved."""
        digest = self.rows_digest
        if digest is None:
            return None
        return pipeline_path(self.pipelines_dir, digest if rows is None else part_rows_digest(digest, rows), index)

    # -- internals ----------------------------------------------------------------------------------

    def _save_to(self, index: int, rows: Optional[int] = None) -> Optional[str]:
        path = self.saved_path(index, rows)
        return None if path is None else str(path)

    def _ensure_worker(self, timeout: float = START_TIMEOUT) -> Optional[str]:
        """Start a worker when none is alive, waiting at most ``timeout`` seconds for it; returns an error text
        when it cannot be started."""
        worker = self._holder[0]
        if worker is not None and worker.ready and worker.alive():
            return None
        began = time.perf_counter()
        try:
            if worker is None or worker.ready:  # none, or one that died: start a new one
                self._stop()
                self.spawn()
            rebound = self._holder[0].rebound
            problem = self._await_ready(timeout)
            if problem is not None and rebound:  # a kept worker that could not take these data: a fresh one
                self.spawn()
                problem = self._await_ready(timeout - (time.perf_counter() - began))
            return problem
        finally:
            self.last_start_seconds = time.perf_counter() - began

    def _await_ready(self, timeout: float) -> Optional[str]:
        worker = self._holder[0]
        kind, payload = worker.receive(min(START_TIMEOUT, max(timeout, 0.0)))
        if kind == "msg" and isinstance(payload, tuple) and payload and payload[0] == "ready":
            worker.ready = True
            self.last_start_broke = False
            return None
        self._stop()
        self.last_start_broke = kind != "timeout"  # a slow start may be the machine's load; the others repeat
        if kind == "timeout":
            return f"worker process did not start within {min(START_TIMEOUT, max(timeout, 0.0)):.0f} s"
        if kind == "memory":
            return self._over_memory(payload) + " while starting"
        if kind == "dead":
            return (f"{describe_exit(payload)} while starting (is the build function importable, and is the "
                    f"main script guarded by if __name__ == '__main__'?)")
        return f"worker process sent an unexpected first message: {payload!r}"[:MAX_ERROR_CHARS]

    def _evaluate_in_worker(self, config: dict, index: int, time_limit: Optional[float] = None) -> Observation:
        called = time.perf_counter()
        cut = None if time_limit is None else called + max(float(time_limit), 0.0)  # the caller's deadline
        problem = self._ensure_worker(START_TIMEOUT if cut is None else cut - time.perf_counter())
        if problem is not None:
            if cut is not None and time.perf_counter() >= cut:
                return self._cut_at_deadline(config, index, time.perf_counter() - called)
            return self._failed(config, index, "failed", problem, 0.0,
                                {WORKER_START_FAILED: 1.0} if self.last_start_broke else None)
        worker = self._holder[0]
        self._task_counter += 1
        task_id = self._task_counter
        sent = time.perf_counter()
        try:
            worker.busy = True
            limit = self.time_limit if cut is None else min(self.time_limit, cut - time.perf_counter())
            worker.conn.send((task_id, config, self._save_to(index), GROWTH_SHARE * max(limit, 0.0), None, None))
        except Exception as exc:  # unpicklable config, or a worker that just died
            self._stop()
            return self._failed(config, index, "failed", "could not send the configuration to the worker: "
                                + error_text(exc), 0.0)
        folds = _FoldProgress(self.splits)
        while True:  # each fold's progress message starts the next fold's time limit
            limit = self.time_limit if cut is None else min(self.time_limit, cut - time.perf_counter())
            kind, payload = worker.receive(limit)
            if not (kind == "msg" and folds.take(payload, task_id)):
                break
            worker.busy = True  # the answer is still to come
        waited = time.perf_counter() - sent
        if kind == "timeout":
            self._stop()
            if limit < self.time_limit:
                return self._cut_at_deadline(config, index, time.perf_counter() - called)
            return self._timed_out(config, index, folds, waited)
        if kind == "dead":
            self._stop()
            return self._failed(config, index, "failed", describe_exit(payload) + " during the evaluation", waited)
        if kind == "memory":
            self._stop()
            return self._failed(config, index, "failed", self._over_memory(payload), waited)
        if kind == "bad":
            self._stop()
            return self._failed(config, index, "failed", "unreadable result from the worker: " + payload, waited)
        got_id, result = payload
        if got_id != task_id:
            self._stop()
            return self._failed(config, index, "failed", f"worker answered task {got_id} for task {task_id}", waited)
        if result.get("restart"):
            self._stop()
        return self._observation(config, index, result)

    def _over_memory(self, resident: float) -> str:
        return (f"exceeded the memory limit of {self.memory_limit_mb:g} MB (resident set {resident:.0f} MB; "
                f"worker ended)")

    def _timed_out(self, config, index, folds: "_FoldProgress", seconds: float) -> Observation:
        """A timeout; under cross-validation it keeps the finished folds' loss (a censored observation)."""
        if folds.total == 1:
            return self._failed(config, index, "timeout",
                                f"exceeded the time limit of {self.time_limit:g} s (worker ended)", seconds)
        obs = self._failed(config, index, "timeout",
                           f"fold {len(folds.done) + 1} of {folds.total} exceeded the time limit of "
                           f"{self.time_limit:g} s per fold (worker ended; {len(folds.done)} folds finished)", seconds)
        obs.folds_done, obs.folds_total = len(folds.done), folds.total
        obs.partial_loss = folds.loss(self.splits.y_val, self.metric)
        return obs

    def _cut_at_deadline(self, config, index, seconds) -> Observation:
        return self._failed(config, index, DEADLINE, f"stopped at the run's deadline after {seconds:.1f} s, before "
                            f"its own time limit of {self.time_limit:g} s (not a failure of the configuration)",
                            seconds)

    def _failed(self, config, index, status, error, seconds, measures: Optional[dict] = None) -> Observation:
        """A failure keeps what was measured before it happened (``fit_seconds``: the time it took or waited)."""
        return Observation(
            config=config, status=status, val_loss=WORST_LOSS[self.metric], test_loss=None,
            fit_seconds=float(seconds), error=error, index=int(index), algorithm=algorithm_of(config),
            measures=_measures(measures, seconds),
        )

    def _observation(self, config: dict, index: int, result: dict) -> Observation:
        seconds = float(result.get("seconds", 0.0))
        measured = result.get("measures")
        if not result.get("ok"):
            return self._failed(config, index, "failed", result.get("error") or "unknown error", seconds, measured)
        val, test = result["val_pred"], result["test_pred"]
        for name, arr in (("validation", val), ("test", test)):
            if arr is not None and not np.all(np.isfinite(arr)):
                return self._failed(config, index, "failed", f"{name} predictions contain NaN or inf values", seconds,
                                    measured)
        algorithm = algorithm_of(config) or str(result.get("model", ""))
        val_loss = float(mean_loss(val, self.splits.y_val, self.metric))
        test_loss = None
        if test is not None and self.splits.y_test is not None:
            test_loss = float(mean_loss(test, self.splits.y_test, self.metric))
        if not math.isfinite(val_loss):
            return self._failed(config, index, "failed", f"validation {self.metric} is not finite", seconds,
                                measured)
        return Observation(
            config=config, status="ok", val_loss=val_loss, test_loss=test_loss, fit_seconds=seconds, error=None,
            val_pred=val, test_pred=test, index=int(index), algorithm=algorithm, measures=_measures(measured, seconds),
        )


class _FoldProgress:
    """The parent's record of a cross-validation evaluation's finished folds and their out-of-fold predictions."""

    def __init__(self, splits):
        self.folds = getattr(splits, "folds", None)
        self.total = n_folds(splits)
        self.done: Dict[int, np.ndarray] = {}

    def take(self, payload, task_id: int) -> bool:
        """Record ``payload`` if it is a progress message of ``task_id``; False for anything else (the answer)."""
        got_id, result = payload if isinstance(payload, tuple) and len(payload) == 2 else (None, None)
        if got_id != task_id or not isinstance(result, dict) or not result.get("progress"):
            return False
        self.done[int(result["fold"])] = np.asarray(result["val_part"])
        return True

    def loss(self, y_val, metric: str) -> Optional[float]:
        """Loss of the finished folds' out-of-fold predictions on their rows; None without a finite one."""
        if not self.done or self.folds is None:
            return None
        folds = np.asarray(self.folds).reshape(-1)
        rows = [np.flatnonzero(folds == fold) for fold in self.done]
        pred = np.concatenate([self.done[fold] for fold in self.done])
        if not np.all(np.isfinite(pred)):
            return None
        loss = float(mean_loss(pred, np.asarray(y_val)[np.concatenate(rows)], metric))
        return loss if math.isfinite(loss) else None


def _measures(measured: Optional[dict], seconds: float) -> Dict[str, float]:
    """The observation's measures: what the worker timed plus ``fit_seconds``, finite floats only."""
    out = {str(k): float(v) for k, v in (measured or {}).items() if v is not None and math.isfinite(float(v))}
    out["fit_seconds"] = float(seconds)
    return out
