"""The persistent worker process that fits configurations for an :class:`~optdiv.evaluation.evaluator.Evaluator`.

Process model
-------------
Fits run in **one persistent worker process** started with the ``spawn`` context (``fork`` can deadlock
when the parent already runs OpenMP / BLAS thread pools, e.g. after LightGBM; ``forkserver`` may be
chosen with ``start_method``). The worker receives the data splits once, when it starts, and then
serves evaluations one after another over a :func:`multiprocessing.Pipe`: the parent sends
``(task id, config)``, the worker builds ``Pipeline([("prep", make_preprocessor(X_train)), ("model",
build(config, seed))])``, fits it on the training rows, predicts validation and test rows and sends
the float32 predictions back. With cross-validation splits (``splits.folds`` set, see
:func:`optdiv.data.cross_validation_view`) it fits one pipeline per fold instead, sends a progress
message with the fold's out-of-fold predictions after each fold, and finally the whole out-of-fold
validation prediction and the fold-averaged test prediction.

The parent enforces the time limit by waiting on the pipe and on the worker's sentinel together. Under
cross-validation the limit is per fold: each progress message starts the next fold's limit, so a K-fold
evaluation may take up to K times the limit in all (a model that fits in time on a holdout split fits in
time on each fold, which is about as large). When the limit passes it ends the worker (``terminate``, then ``kill`` after a grace period), reaps it and
records a ``"timeout"``; a cross-validation evaluation that timed out after some folds finished keeps the
loss of those folds' out-of-fold predictions as ``partial_loss`` (a censored observation, see
:class:`Observation`); when the worker dies (non-zero exit, a signal such as SIGSEGV, the kernel's
OOM killer) it records a ``"failed"`` observation with the exit code or signal. Either way the next
evaluation starts a fresh worker. Worker start-up (interpreter, imports, receiving the splits, about
1-2 s) is not charged to the evaluation's limit; the limit covers building, fitting and predicting.

Under a time budget the engine passes ``evaluate(..., time_limit=SECONDS)``: the most this one call may
take, worker start-up included. When that cut (not the configuration's own ``time_limit``) ends it, the
observation's status is :data:`DEADLINE`: the run ran out of time, which says nothing about the
configuration, so the engine discards it instead of storing a failure.

With ``pipelines_dir`` the worker also saves every successful holdout fit there (joblib, see
:mod:`optdiv.evaluation.pipelines`), so the final model needs no refit; the save is inside the limit.

A worker is reused while it stays healthy, so an evaluation costs one pipe round trip of the config
and the predictions (around a millisecond on small data) on top of the fit itself, instead of a
process start (3-5 s of numpy/pandas/scikit-learn imports on a small machine). A ``MemoryError`` is recorded
as a failure and the worker is replaced, since its heap may be in a poor state. When its evaluator closes, an idle,
healthy, small worker is kept for :data:`KEEP_SECONDS` and handed the data of the next evaluator of this process
started with the same settings (:func:`keep`, :func:`take_kept`), so repeated fits pay the start-up once.

``in_process=True`` runs everything in the calling process with no limit, for debugging.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing.util  # noqa: F401  (so our atexit hook runs before its child-joining one)
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Dict, Optional

import numpy as np

from optdiv.evaluation.fitting import error_text, fit_predict
from optdiv.evaluation.memory import note_worker_peak, own_peak_mb, resident_mb

#: Seconds a worker may take to start (imports and receiving the splits) before it is given up.
START_TIMEOUT = 120.0

#: Seconds between ``terminate`` and ``kill`` when ending a worker.
KILL_GRACE = 2.0

#: Seconds between two reads of a worker's resident set while it works under a memory limit.
MEMORY_POLL = 0.2


def _set_memory_limit(megabytes: int) -> None:
    try:
        import resource
    except ImportError:  # not on Windows
        return
    limit = int(megabytes) * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _worker_main(conn) -> None:
    """Worker loop: take the data, announce readiness, then serve ``(task id, config)`` until told to stop or
    orphaned. ``("idle", seconds)`` (its evaluator closed, :func:`keep`) drops the data and waits that long for
    ``("bind", data)`` from the next evaluator, or leaves."""
    try:
        try:
            args = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if args[-1]:
            _set_memory_limit(args[-1])
        held = [args]  # handed over, not kept here: once idle, the data must be freed
        del args
        while held:
            conn.send(("ready", os.getpid()))
            _serve(conn, held)
            _forget_peak()
    finally:
        conn.close()


def _serve(conn, held: list) -> None:
    """Serve evaluations on the data in ``held`` (taken out of it); once idle and bound again, the next
    evaluator's data is left in ``held``, which stays empty when the worker is to leave."""
    build, splits, task, n_classes, seed, _ = held.pop()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if msg is None:
            return
        if msg[0] == "idle":
            del build, splits
            gc.collect()
            try:
                if conn.poll(msg[1]):
                    msg = conn.recv()
                    if isinstance(msg, tuple) and msg[0] == "bind":
                        os.chdir(msg[1])  # as a fresh spawn starts: the parent's directory and import path, then
                        sys.path[:] = msg[2]  # the data (whose build function may need that path to unpickle)
                        held.append(conn.recv())
            except (EOFError, OSError):
                pass
            return
        task_id, config, save_to, fit_seconds, rounds, rows = msg

        def report_fold(fold: int, part: np.ndarray, task_id=task_id) -> None:
            conn.send((task_id, {"progress": True, "fold": fold, "val_part": part}))

        _forget_peak()  # each evaluation's peak is its own: which configurations need the memory shows per run
        result = fit_predict(build, splits, task, n_classes, seed, config, on_fold=report_fold,
                             save_to=save_to, fit_seconds=fit_seconds, rounds=rounds, rows=rows)
        result["peak_mb"] = own_peak_mb()  # the driver keeps the largest (optdiv.evaluation.memory)
        if result["peak_mb"] is not None:
            result.setdefault("measures", {})["peak_mb"] = result["peak_mb"]
        try:
            conn.send((task_id, result))
        except (EOFError, OSError, BrokenPipeError):
            return
        except Exception as exc:  # the result would not pickle
            conn.send((task_id, {"ok": False, "error": "could not send the result back: " + error_text(exc),
                                 "seconds": result.get("seconds", 0.0), "measures": result.get("measures", {})}))
        if result.get("restart"):
            return


def _forget_peak() -> None:
    """Start this process's peak resident set afresh (Linux), so the next evaluator's report is its own."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "worker process stopped responding"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (possibly killed for using too much memory)" if -code == getattr(signal, "SIGKILL", 9) else ""
        return f"worker process was killed by {name}{hint}"
    return f"worker process exited with code {code}"


def _stop_process(proc, conn) -> None:
    """End a worker: polite stop request if idle, then terminate, then kill; always reaps it."""
    try:
        if conn is not None:
            conn.close()
    except OSError:
        pass
    if proc is None:
        return
    if proc.is_alive():
        proc.terminate()
        proc.join(KILL_GRACE)
    if proc.is_alive():
        proc.kill()
        proc.join(KILL_GRACE)
    if proc.exitcode is not None and hasattr(proc, "close"):
        proc.close()


#: Workers alive in this process; ended by an atexit hook registered after multiprocessing's own, so it runs
#: first (multiprocessing joins non-daemon children at exit, which would wait on an idle worker forever).
_LIVE_WORKERS: "set[Worker]" = set()


#: Environment variables that cap the thread pools of OpenMP (LightGBM, HistGradientBoosting) and BLAS.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@contextmanager
def thread_limit_environment(threads: Optional[int]):
    """Set the thread caps while a worker is spawned: it reads them when its libraries load.

    Oversubscribed OpenMP pools (one fit's threads fighting the parent or another worker for the same
    cores) slowed single fits by 10-50x where cores were few and shared, so evaluations default to one thread.
    """
    if not threads:
        yield
        return
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update({name: str(int(threads)) for name in THREAD_VARIABLES})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _send_start_data(conn, args) -> None:
    try:
        conn.send(args)
    except (BrokenPipeError, EOFError, OSError, TypeError, ValueError):  # TypeError: the pipe closed under it
        pass  # the worker died while starting, or was stopped: receive() reports it


class Worker:
    """One worker process and the parent's end of its pipe.

    Not a daemon process: daemonic processes may not start children, which would silently turn
    ``n_jobs`` of joblib-based models into 1.
    """

    def __init__(self, ctx, args, threads: Optional[int] = None, memory_limit_mb: Optional[float] = None):
        self.memory_limit_mb = memory_limit_mb  # watched here, on the worker's resident set (optdiv.evaluation.memory)
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child_conn,), name="optdiv-evaluator")
        with thread_limit_environment(threads):
            self.proc.start()
        _LIVE_WORKERS.add(self)
        child_conn.close()  # so the parent sees EOF when the worker dies
        self.conn = parent_conn
        self.ready = False
        self.busy = False  # a task was sent and its answer not yet received
        self.kept_until = 0.0  # while kept for the next evaluator (keep): when it leaves on its own
        self.rebound = False  # a kept worker handed to another evaluator (take_kept), not a fresh process
        # The data go over the pipe, not in the start payload: a spawned child that dies before reading a start
        # payload larger than the OS pipe buffer (an unguarded main script) would block start() forever. They are
        # sent from a thread: data larger than the pipe buffer are only taken once the child has imported its
        # libraries (seconds), and a caller starting several workers would otherwise wait for each in turn. Nothing
        # else is sent before the child answers "ready", which it does only once it holds the data.
        self._sending: Optional[threading.Thread] = threading.Thread(
            target=_send_start_data, args=(parent_conn, args), name="optdiv-worker-start", daemon=True)
        self._sending.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def receive(self, timeout: float):
        """Next message, or ``("timeout", None)`` / ``("dead", exitcode)`` / ``("memory", resident MB)`` when the
        worker's resident set passed its limit (the caller ends it)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            ready = wait([self.conn, self.proc.sentinel],
                         timeout=left if self.memory_limit_mb is None else min(left, MEMORY_POLL))
            if not ready:
                if self.memory_limit_mb is not None:
                    used = resident_mb(self.proc.pid)
                    if used is not None and used > self.memory_limit_mb:
                        return "memory", used
                continue
            if self.conn in ready:
                try:
                    msg = self.conn.recv()
                    self.busy = False
                    if isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[1], dict):
                        note_worker_peak(msg[1].get("peak_mb"))
                    return "msg", msg
                except (EOFError, OSError):
                    pass
                except Exception as exc:  # a message that cannot be unpickled here
                    return "bad", error_text(exc)
            # the sentinel fired, or the pipe reached EOF: the worker has died
            self.proc.join(KILL_GRACE)
            return "dead", self.proc.exitcode

    def stop(self) -> None:
        _LIVE_WORKERS.discard(self)
        proc, conn, self.proc, self.conn = self.proc, self.conn, None, None
        starting = self._sending is not None and self._sending.is_alive()  # its data still going over the pipe
        if proc is not None and conn is not None and not self.busy and not starting and proc.is_alive():
            try:
                conn.send(None)  # idle worker: ask it to leave on its own
                proc.join(0.5)
            except (OSError, EOFError):
                pass
        if starting and proc is not None:  # end it before its pipe is closed under the sending thread's write
            _stop_process(proc, None)
            self._sending.join(KILL_GRACE)
            proc = None
        _stop_process(proc, conn)


def shutdown(holder: list) -> None:
    if holder and holder[0] is not None:
        worker, holder[0] = holder[0], None
        worker.stop()


#: Seconds a worker whose evaluator closed stays alive for the next evaluator of this process (as joblib's loky
#: keeps its workers): a fit's start-up is mostly the worker's imports (3-5 s of scikit-learn and pandas on a
#: small machine), which repeated fits (cross-validation of an estimator, scikit-learn's own checks) then pay once.
KEEP_SECONDS = 60.0
#: A worker whose resident set is over this many MB is not kept: its heap would stay held and count against the
#: next evaluator's memory limit.
KEEP_MAX_MB = 600.0

#: Kept workers by what they were started with (start method, threads, memory limits): one at most per kind.
_KEPT: Dict[tuple, "Worker"] = {}


def keep(holder: list, kind: tuple) -> None:
    """Hand the idle, healthy worker in ``holder`` to the next evaluator of this process that starts one of the same
    ``kind`` (within :data:`KEEP_SECONDS`); any other worker is stopped."""
    worker = holder[0] if holder else None
    if worker is None:
        return
    holder[0] = None
    used = resident_mb(worker.proc.pid) if worker.alive() else None
    if not (worker.ready and not worker.busy and used is not None and used <= KEEP_MAX_MB):
        worker.stop()
        return
    try:
        worker.conn.send(("idle", KEEP_SECONDS))
    except (OSError, EOFError, BrokenPipeError):
        worker.stop()
        return
    worker.kept_until = time.monotonic() + KEEP_SECONDS - 1.0
    previous = _KEPT.pop((os.getpid(), kind), None)
    if previous is not None:
        previous.stop()
    _KEPT[(os.getpid(), kind)] = worker


def take_kept(kind: tuple, args) -> "Optional[Worker]":
    """A kept worker of ``kind``, sent the new evaluator's data ``args`` (it answers "ready" as a new one does), or
    None."""
    worker = _KEPT.pop((os.getpid(), kind), None)
    if worker is None:
        return None
    if not worker.alive() or time.monotonic() > worker.kept_until:
        worker.stop()
        return None
    try:
        worker.conn.send(("bind", os.getcwd(), list(sys.path)))
        worker.conn.send(args)
    except (OSError, EOFError, BrokenPipeError):
        worker.stop()
        return None
    worker.ready = False
    worker.rebound = True
    return worker


@atexit.register
def _stop_all_workers() -> None:
    for worker in list(_LIVE_WORKERS):
        worker.stop()

