"""Fit one configuration under a wall-time limit and record what happened, never raising.

Process model
-------------
Fits run in **one persistent worker process** started with the ``spawn`` context (``fork`` can deadlock
when the parent already runs OpenMP / BLAS thread pools, e.g. after LightGBM; ``forkserver`` may be
chosen with ``start_method``). The worker receives the data splits once, when it starts, and then
serves evaluations one after another over a :func:`multiprocessing.Pipe`: the parent sends
``(task id, config)``, the worker builds ``Pipeline([("prep", make_preprocessor(X_train)), ("model",
build(config, seed))])``, fits it on the training rows, predicts validation and test rows and sends
the float32 predictions back. With cross-validation splits (``splits.folds`` set, see
:func:`optdiv.cash.data.cross_validation_view`) it fits one pipeline per fold instead, sends a progress
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
:mod:`optdiv.cash.pipelines`), so the final model needs no refit; the save is inside the limit.

A worker is reused while it stays healthy, so an evaluation costs one pipe round trip of the config
and the predictions (around a millisecond on small data) on top of the fit itself, instead of a
process start (about a second with numpy/pandas/scikit-learn imports). A ``MemoryError`` is recorded
as a failure and the worker is replaced, since its heap may be in a poor state.

``in_process=True`` runs everything in the calling process with no limit, for debugging.

Failures
--------
Exceptions (with a traceback tail), timeouts, worker crashes and NaN/inf predictions all become an
:class:`Observation` with ``status`` ``"failed"`` or ``"timeout"``, no predictions, ``test_loss=None``
and ``val_loss = worst_loss(metric)`` (optimisers impute timeouts differently, see
:func:`optdiv.cash.optimizers.imputed_loss`): a finite, JSON-friendly value no real model scores worse than:
``error`` 1.0, ``brier`` 2.0, ``log_loss`` ``-log(1e-15)`` (about 34.54, the loss of probability 0 on
the true class after the clipping in :mod:`optdiv.core.metrics`), and ``1e30`` for the unbounded
regression losses ``mse`` / ``mae``.

Builders must be picklable by reference (top-level functions of an importable module), because the
worker imports them; the constructor checks this and raises ``TypeError`` early. With ``spawn``, a
script that uses the evaluator needs the usual ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import atexit
import math
import multiprocessing
import multiprocessing.util  # noqa: F401  (so our atexit hook runs before its child-joining one)
import os
import pickle
import random
import signal
import time
import traceback
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, Optional

import numpy as np

from optdiv.core._arrays import PROB_CLIP
from optdiv.core.metrics import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, check_loss, mean_loss

#: Status of an evaluation cut by the caller's ``time_limit`` (the run's deadline), not by its own limit: never
#: stored, since it says nothing about the configuration.
DEADLINE = "deadline"

#: ``infeasible`` is set by the engine, not here: an ok run that violates a constraint (optdiv.cash.constraints).
STATUSES = ("ok", "failed", "timeout", "infeasible", DEADLINE)

#: Loss recorded for failed / timed-out evaluations (finite, so run logs stay valid JSON).
WORST_LOSS = {
    "error": 1.0,
    "brier": 2.0,
    "log_loss": float(-math.log(PROB_CLIP)),
    "mse": 1e30,
    "mae": 1e30,
}

#: Metric aliases accepted by :class:`Evaluator`.
METRIC_ALIASES = {"accuracy": "error", "acc": "error", "logloss": "log_loss", "cross_entropy": "log_loss"}

#: Characters of traceback kept in :attr:`Observation.error`.
MAX_ERROR_CHARS = 3000

#: Seconds a worker may take to start (imports and receiving the splits) before it is given up.
START_TIMEOUT = 120.0

#: Seconds between ``terminate`` and ``kill`` when ending a worker.
KILL_GRACE = 2.0


def worst_loss(metric: str) -> float:
    """The loss recorded for a failed evaluation under ``metric`` (see the module docstring)."""
    return WORST_LOSS[normalize_metric(metric)]


def normalize_metric(metric: str) -> str:
    return check_loss(METRIC_ALIASES.get(metric, metric))


@dataclass
class Observation:
    """One evaluated configuration.

    ``val_pred`` / ``test_pred`` are float32 ``(rows, classes)`` probabilities or ``(rows,)`` values,
    present only when ``status == "ok"``. ``fit_seconds`` is the wall time of building, fitting and
    predicting (for a timeout or crash: the time waited). ``error`` holds the exception and a traceback
    tail, or the reason of a timeout / crash. ``measures`` holds what black-box constraints can name
    (:data:`optdiv.cash.constraints.MEASURES`): ``fit_seconds``, and for runs that got as far as predicting
    the validation rows ``predict_seconds`` and ``predict_us_per_row``; empty for observations stored before
    measures were recorded.

    A cross-validation evaluation that timed out after ``folds_done`` of ``folds_total`` folds is censored, not
    uninformative: ``partial_loss`` is the loss of the out-of-fold predictions of those folds' rows, which
    the optimisers use instead of the worst loss. It still has no predictions (the other folds' rows were never
    predicted), so it never enters an ensemble. ``None`` / 0 for every other observation.
    """

    config: Dict[str, Any]
    status: str
    val_loss: float
    test_loss: Optional[float] = None
    fit_seconds: float = 0.0
    error: Optional[str] = None
    val_pred: Optional[np.ndarray] = field(default=None, repr=False)
    test_pred: Optional[np.ndarray] = field(default=None, repr=False)
    index: int = -1
    algorithm: str = ""
    measures: Dict[str, float] = field(default_factory=dict)
    partial_loss: Optional[float] = None
    folds_done: int = 0
    folds_total: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def algorithm_of(config: Dict[str, Any]) -> str:
    """The algorithm named by a configuration: its ``algorithm`` entry, else an auto-sklearn style
    ``classifier:__choice__`` / ``regressor:__choice__`` entry, else ``""``."""
    if "algorithm" in config:
        return str(config["algorithm"])
    for key in ("classifier:__choice__", "regressor:__choice__"):
        if key in config:
            return str(config[key])
    for key, value in config.items():
        if str(key).endswith("__choice__") and "preprocess" not in str(key):
            return str(value)
    return ""


# --------------------------------------------------------------------------- #
# The work itself (runs in the worker, or in the caller with in_process=True)
# --------------------------------------------------------------------------- #


def _final_estimator(model):
    from .target_range import RangeClippedRegressor

    while hasattr(model, "steps") or isinstance(model, RangeClippedRegressor):
        model = model.regressor if isinstance(model, RangeClippedRegressor) else model.steps[-1][1]
    return model


def _one_hot_labels(labels, n_rows: int, n_classes: int) -> np.ndarray:
    labels = np.asarray(labels).reshape(-1)
    if labels.shape[0] != n_rows:
        raise ValueError(f"predict returned {labels.shape[0]} labels for {n_rows} rows")
    idx = labels.astype(np.int64)
    if not np.array_equal(idx, labels) or idx.min(initial=0) < 0 or idx.max(initial=0) >= n_classes:
        raise ValueError(f"predict returned labels outside the class indices 0..{n_classes - 1}")
    out = np.zeros((n_rows, n_classes), dtype=np.float32)
    out[np.arange(n_rows), idx] = 1.0
    return out


def build_pipeline(build, config: dict, X_train, seed: int, task: str = "classification"):
    """The unfitted pipeline every evaluation (and every refit of an ensemble member) uses; a regression
    model's predictions are clipped near its training targets' range (optdiv.cash.target_range)."""
    from sklearn.pipeline import Pipeline

    from .data import make_preprocessor
    from .target_range import RangeClippedRegressor

    model = build(dict(config), seed)
    if task == "regression":
        model = RangeClippedRegressor(model)
    return Pipeline([("prep", make_preprocessor(X_train)), ("model", model)])


def predict_probabilities(pipe, X, n_classes: int) -> np.ndarray:
    """(rows, n_classes) float32 probabilities aligned by ``classes_`` (see :func:`_class_probabilities`)."""
    return _class_probabilities(pipe, X, n_classes)


def _class_probabilities(pipe, X, n_classes: int) -> np.ndarray:
    """Probabilities from ``predict_proba``; else a sigmoid / softmax of ``decision_function`` (SVCs, ridge and
    other margin classifiers), as auto-sklearn's and VolcanoML's SVCs score; else one-hot labels.

    Hard 0/1 rows from a margin model would make every wrong row look certain, which misleads the
    log-loss and the diversity measures built on the true class's probability.
    """
    n = len(X)
    try:
        proba = pipe.predict_proba(X)
    except Exception:  # no predict_proba (AttributeError), or one that refuses (e.g. SVC(probability=False))
        proba = _decision_probabilities(pipe, X)
    if proba is None:
        return _one_hot_labels(pipe.predict(X), n, n_classes)
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or proba.shape[0] != n:
        raise ValueError(f"predict_proba returned shape {proba.shape} for {n} rows")
    classes = getattr(_final_estimator(pipe), "classes_", None)
    if classes is None:
        if proba.shape[1] != n_classes:
            raise ValueError(
                f"predict_proba returned {proba.shape[1]} columns for {n_classes} classes and the model has "
                f"no classes_ to align them"
            )
        classes = np.arange(n_classes)
    classes = np.asarray(classes).reshape(-1)
    cols = classes.astype(np.int64)
    if len(cols) != proba.shape[1] or not np.array_equal(cols, classes) or cols.min() < 0 or cols.max() >= n_classes:
        raise ValueError(f"cannot align predict_proba columns with classes_ {classes!r} for {n_classes} classes")
    out = np.zeros((n, n_classes), dtype=np.float32)
    out[:, cols] = proba  # classes missing from the training rows keep probability 0
    return out


def _decision_probabilities(pipe, X) -> Optional[np.ndarray]:
    """(rows, classes_) scores of a margin classifier squashed into probabilities, or None without
    ``decision_function``: a sigmoid of the binary margin, a softmax of one-vs-rest / one-vs-one margins."""
    try:
        margin = np.asarray(pipe.decision_function(X), dtype=np.float64)
    except Exception:  # no decision_function, or one that refuses
        return None
    if margin.ndim == 2 and margin.shape[1] == 1:
        margin = margin[:, 0]
    if margin.ndim == 1:
        positive = 0.5 * (1.0 + np.tanh(0.5 * margin))  # the logistic sigmoid, without overflow
        return np.column_stack([1.0 - positive, positive])
    if margin.ndim != 2:
        return None
    shifted = np.exp(margin - margin.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _regression_values(pipe, X) -> np.ndarray:
    pred = np.asarray(pipe.predict(X), dtype=np.float64)
    if pred.ndim == 2 and pred.shape[1] == 1:
        pred = pred[:, 0]
    if pred.shape != (len(X),):
        raise ValueError(f"predict returned shape {pred.shape} for {len(X)} rows")
    with np.errstate(over="ignore"):
        return pred.astype(np.float32)


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = "...\n" + text[-MAX_ERROR_CHARS:]
    return f"{head}\n{text}"


def n_folds(splits) -> int:
    """Fits one evaluation makes on ``splits``: its number of folds, 1 for a holdout split."""
    folds = getattr(splits, "folds", None)
    return 1 if folds is None else len(np.unique(np.asarray(folds)))


def _fit_predict(build, splits, task: str, n_classes: Optional[int], seed: int, config: dict,
                 on_fold: Optional[Callable[[int, np.ndarray], None]] = None,
                 save_to: Optional[str] = None) -> dict:
    """Build, fit and predict one configuration; returns a plain dict (never raises Exception).

    Only the validation prediction is timed for ``predict_seconds`` (what a latency constraint bounds), so
    the test rows, which a search never sees, do not change which runs are feasible. Splits with ``folds``
    (cross-validation mode) go to :func:`_fit_predict_folds`, which calls ``on_fold`` after each fold.
    ``save_to``: where to save the fitted pipeline of a successful holdout fit (after ``seconds`` is taken, so
    saving does not change ``fit_seconds``).
    """
    if getattr(splits, "folds", None) is not None:
        return _fit_predict_folds(build, splits, task, n_classes, seed, config, on_fold)
    start = time.perf_counter()
    measures: Dict[str, float] = {}
    try:
        np.random.seed(seed % (2**32))
        random.seed(seed)
        pipe = build_pipeline(build, config, splits.X_train, seed, task)
        model = pipe.steps[-1][1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence and similar chatter of candidate models
            pipe.fit(splits.X_train, splits.y_train)
            preds = []
            for part, X in (("val", splits.X_val), ("test", splits.X_test)):
                if X is None:
                    preds.append(None)
                    continue
                began = time.perf_counter()
                preds.append(_predict_rows(pipe, X, task, n_classes))
                if part == "val":
                    seconds = time.perf_counter() - began
                    measures["predict_seconds"] = seconds
                    measures["predict_us_per_row"] = seconds / max(len(X), 1) * 1e6
        name = type(_final_estimator(model)).__name__
        seconds = time.perf_counter() - start
        saved = save_to is not None and _save_fitted(pipe, save_to, preds)
        return {"ok": True, "val_pred": preds[0], "test_pred": preds[1], "model": name,
                "seconds": seconds, "measures": measures, "saved": saved}
    except (Exception, SystemExit) as exc:
        return {"ok": False, "error": _error_text(exc), "seconds": time.perf_counter() - start,
                "restart": isinstance(exc, MemoryError), "measures": measures}


def _save_fitted(pipe, path: str, preds) -> bool:
    """Save a fitted pipeline whose predictions are finite (a NaN-predicting one fails and is never a member)."""
    if any(p is not None and not np.all(np.isfinite(p)) for p in preds):
        return False
    from .pipelines import save_pipeline

    return save_pipeline(pipe, path)


def _predict_rows(pipe, X, task: str, n_classes: Optional[int]) -> np.ndarray:
    return _class_probabilities(pipe, X, n_classes) if task == "classification" else _regression_values(pipe, X)


def _fit_predict_folds(build, splits, task: str, n_classes: Optional[int], seed: int, config: dict,
                       on_fold: Optional[Callable[[int, np.ndarray], None]] = None) -> dict:
    """k-fold :func:`_fit_predict`: one pipeline per fold, fitted on the rows outside it; never raises Exception.

    The validation prediction is out-of-fold (each row predicted by the one pipeline that did not see it);
    the test prediction is the mean over the fold pipelines. ``predict_seconds`` sums the out-of-fold predict
    calls, which together predict every row once, like the holdout predict it stands for. Class probabilities
    keep every class's column even when a fold's training part lacks that class (``_class_probabilities``
    aligns by ``classes_``). Any fold failing fails the evaluation. ``on_fold(fold, predictions of its rows)``
    runs after each fold is done (the worker's progress message: it restarts the per-fold time limit and lets a
    later time-out keep the finished folds' loss).
    """
    start = time.perf_counter()
    measures: Dict[str, float] = {}
    try:
        folds = np.asarray(splits.folds).reshape(-1)
        X, y = splits.X_train, np.asarray(splits.y_train)
        if len(folds) != len(X) or len(splits.X_val) != len(X):
            raise ValueError(f"cross-validation splits need one fold per row: {len(folds)} folds, {len(X)} training "
                             f"rows, {len(splits.X_val)} validation rows")
        ids = np.unique(folds)
        val, test, seconds, model = None, None, 0.0, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence and similar chatter of candidate models
            for fold in ids:
                inside = folds == fold
                np.random.seed(seed % (2**32))  # every fold starts from the same state, as a holdout fit does
                random.seed(seed)
                X_fit = X.iloc[np.flatnonzero(~inside)]
                pipe = build_pipeline(build, config, X_fit, seed, task)
                model = pipe.steps[-1][1]
                pipe.fit(X_fit, y[~inside])
                began = time.perf_counter()
                part = _predict_rows(pipe, splits.X_val.iloc[np.flatnonzero(inside)], task, n_classes)
                seconds += time.perf_counter() - began
                if val is None:
                    val = np.zeros((len(X),) + part.shape[1:], dtype=np.float32)
                val[inside] = part
                if splits.X_test is not None:
                    fold_test = _predict_rows(pipe, splits.X_test, task, n_classes).astype(np.float64)
                    test = fold_test if test is None else test + fold_test
                if on_fold is not None:
                    on_fold(int(fold), part)
        measures["predict_seconds"] = seconds
        measures["predict_us_per_row"] = seconds / max(len(X), 1) * 1e6
        if test is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                test = (test / len(ids)).astype(np.float32)
        name = type(_final_estimator(model)).__name__
        return {"ok": True, "val_pred": val, "test_pred": test, "model": name,
                "seconds": time.perf_counter() - start, "measures": measures}
    except (Exception, SystemExit) as exc:
        return {"ok": False, "error": _error_text(exc), "seconds": time.perf_counter() - start,
                "restart": isinstance(exc, MemoryError), "measures": measures}


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
    orphaned."""
    try:
        try:
            build, splits, task, n_classes, seed, memory_limit_mb = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if memory_limit_mb:
            _set_memory_limit(memory_limit_mb)
        conn.send(("ready", os.getpid()))
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if msg is None:
                return
            task_id, config, save_to = msg

            def report_fold(fold: int, part: np.ndarray, task_id=task_id) -> None:
                conn.send((task_id, {"progress": True, "fold": fold, "val_part": part}))

            result = _fit_predict(build, splits, task, n_classes, seed, config, on_fold=report_fold,
                                  save_to=save_to)
            try:
                conn.send((task_id, result))
            except (EOFError, OSError, BrokenPipeError):
                return
            except Exception as exc:  # the result would not pickle
                conn.send((task_id, {"ok": False, "error": "could not send the result back: " + _error_text(exc),
                                     "seconds": result.get("seconds", 0.0), "measures": result.get("measures", {})}))
            if result.get("restart"):
                return
    finally:
        conn.close()


def _describe_exit(code: Optional[int]) -> str:
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
_LIVE_WORKERS: "set[_Worker]" = set()


#: Environment variables that cap the thread pools of OpenMP (LightGBM, HistGradientBoosting) and BLAS.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@contextmanager
def _thread_limit_environment(threads: Optional[int]):
    """Set the thread caps while a worker is spawned: it reads them when its libraries load.

    Oversubscribed OpenMP pools (one fit's threads fighting the parent or another worker for the same
    cores) slowed single fits by 10-50x on a busy 2-core machine, so evaluations default to one thread.
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


class _Worker:
    """One worker process and the parent's end of its pipe.

    Not a daemon process: daemonic processes may not start children, which would silently turn
    ``n_jobs`` of joblib-based models into 1.
    """

    def __init__(self, ctx, args, threads: Optional[int] = None):
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child_conn,), name="optdiv-evaluator")
        with _thread_limit_environment(threads):
            self.proc.start()
        _LIVE_WORKERS.add(self)
        child_conn.close()  # so the parent sees EOF when the worker dies
        self.conn = parent_conn
        self.ready = False
        self.busy = False  # a task was sent and its answer not yet received
        # The data go over the pipe, not in the start payload: a spawned child that dies before reading a start
        # payload larger than the OS pipe buffer (an unguarded main script) would block start() forever.
        try:
            parent_conn.send(args)
        except (BrokenPipeError, EOFError, OSError):
            pass  # the worker died while starting; receive() reports it

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def receive(self, timeout: float):
        """Next message, or ``("timeout", None)`` / ``("dead", exitcode)``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            ready = wait([self.conn, self.proc.sentinel], timeout=left)
            if not ready:
                return "timeout", None
            if self.conn in ready:
                try:
                    msg = self.conn.recv()
                    self.busy = False
                    return "msg", msg
                except (EOFError, OSError):
                    pass
                except Exception as exc:  # a message that cannot be unpickled here
                    return "bad", _error_text(exc)
            # the sentinel fired, or the pipe reached EOF: the worker has died
            self.proc.join(KILL_GRACE)
            return "dead", self.proc.exitcode

    def stop(self) -> None:
        _LIVE_WORKERS.discard(self)
        proc, conn, self.proc, self.conn = self.proc, self.conn, None, None
        if proc is not None and conn is not None and not self.busy and proc.is_alive():
            try:
                conn.send(None)  # idle worker: ask it to leave on its own
                proc.join(0.5)
            except (OSError, EOFError):
                pass
        _stop_process(proc, conn)


def _shutdown(holder: list) -> None:
    if holder and holder[0] is not None:
        worker, holder[0] = holder[0], None
        worker.stop()


@atexit.register
def _stop_all_workers() -> None:
    for worker in list(_LIVE_WORKERS):
        worker.stop()


class Evaluator:
    """Evaluate configurations on fixed splits, each fit in a worker process under ``time_limit`` seconds.

    With cross-validation splits (``folds`` set) ``time_limit`` bounds each fold's fit, so one evaluation may
    take up to ``n_folds(splits) * time_limit`` seconds; a timeout after some folds keeps their loss as
    ``partial_loss``.

    ``build(config, seed)`` returns an unfitted scikit-learn estimator; it must be a top-level function
    of an importable module. ``metric`` is ``error`` (alias ``accuracy``), ``log_loss`` or ``brier`` for
    classification and ``mse`` or ``mae`` for regression. ``n_classes`` defaults to one more than the
    largest class index in the splits. ``memory_limit_mb`` caps the worker's address space
    (``RLIMIT_AS``, Linux/macOS only; it also counts the data and thread stacks, so leave headroom).
    ``pipelines_dir``: a folder where each successful holdout fit is saved (:meth:`saved_path` says where),
    so the final model can load its members instead of refitting them.

    Not thread-safe: use one evaluator per thread. Call :meth:`close` (or use ``with``) to end the
    worker early; otherwise it ends when the evaluator is garbage-collected or at interpreter exit.
    """

    def __init__(
        self,
        build: Callable[[dict, int], Any],
        splits,
        task: str,
        metric: str,
        n_classes: Optional[int] = None,
        time_limit: float = 120.0,
        seed: int = 0,
        memory_limit_mb: Optional[int] = None,
        in_process: bool = False,
        start_method: str = "spawn",
        threads: Optional[int] = 1,
        pipelines_dir=None,
    ):
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression'; got {task!r}")
        self.metric = normalize_metric(metric)
        allowed = CLASSIFICATION_LOSSES if task == "classification" else REGRESSION_LOSSES
        if self.metric not in allowed:
            raise ValueError(f"metric {metric!r} does not fit a {task} task; choose one of {', '.join(allowed)}")
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
        self.build = build
        self.splits = splits
        self.task = task
        self.n_classes = n_classes
        self.time_limit = float(time_limit)
        self.seed = int(seed)
        self.memory_limit_mb = memory_limit_mb
        self.in_process = in_process
        self.start_method = start_method
        self.threads = threads  # per-evaluation cap of OpenMP/BLAS threads; None keeps library defaults
        self.pipelines_dir = pipelines_dir  # where fitted holdout pipelines are saved (optdiv.cash.pipelines)
        self._rows_digest: Optional[str] = None
        self.worker_starts = 0  # how many worker processes were started (restarts included)
        self.last_start_seconds = 0.0  # of the last evaluate call, the seconds spent starting a worker
        self._holder: list = [None]
        self._task_counter = 0
        self._finalizer = weakref.finalize(self, _shutdown, self._holder)

    # -- public -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now (otherwise the first :meth:`evaluate` does); a no-op in process."""
        if not self.in_process:
            self._ensure_worker()

    def close(self) -> None:
        """End the worker process, if any. The evaluator stays usable: a later evaluate restarts it."""
        _shutdown(self._holder)

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def evaluate(self, config: dict, index: int, time_limit: Optional[float] = None) -> Observation:
        """Fit ``config`` and return its :class:`Observation`; never raises for a failing model.

        ``time_limit``: the most seconds this call may take, worker start-up included (the run's deadline);
        when it is below the evaluator's own limit and ends the evaluation, the status is :data:`DEADLINE`.
        In process there is no limit to enforce.

        Raises RuntimeError when called while this process is itself being spawned (a script without an
        ``if __name__ == "__main__"`` guard, re-run by a worker's start-up): every evaluation would fail, and a
        store would fill with failures instead of the script stopping."""
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            raise RuntimeError("optdiv evaluated a configuration while this process was being started by "
                               "multiprocessing: guard the script's entry point with if __name__ == '__main__':")
        config = dict(config)
        started = time.perf_counter()
        self.last_start_seconds = 0.0
        try:
            if self.in_process:
                result = _fit_predict(self.build, self.splits, self.task, self.n_classes, self.seed, config,
                                      save_to=self._save_to(index))
                return self._observation(config, index, result)
            return self._evaluate_in_worker(config, index, time_limit)
        except Exception as exc:  # a failure of the machinery itself: still an observation, never a raise
            if not self.in_process:
                self.close()
            return self._failed(config, index, "failed", "evaluator error: " + _error_text(exc),
                                time.perf_counter() - started)

    @property
    def rows_digest(self) -> Optional[str]:
        """Digest of the rows saved pipelines are fitted on (optdiv.cash.pipelines); None when none are saved:
        no ``pipelines_dir``, or cross-validation, whose fold pipelines each miss a fold of the rows."""
        if self.pipelines_dir is None or getattr(self.splits, "folds", None) is not None:
            return None
        if self._rows_digest is None:
            from .pipelines import rows_digest

            self._rows_digest = rows_digest(self.splits.X_train, self.splits.y_train)
        return self._rows_digest

    def saved_path(self, index: int):
        """Where evaluation ``index``'s fitted pipeline is saved, or None when pipelines are not saved."""
        from .pipelines import pipeline_path

        digest = self.rows_digest
        return None if digest is None else pipeline_path(self.pipelines_dir, digest, index)

    # -- internals ----------------------------------------------------------------------------------

    def _save_to(self, index: int) -> Optional[str]:
        path = self.saved_path(index)
        return None if path is None else str(path)

    def _ensure_worker(self, timeout: float = START_TIMEOUT) -> Optional[str]:
        """Start a worker when none is alive, waiting at most ``timeout`` seconds for it; returns an error text
        when it cannot be started."""
        worker = self._holder[0]
        if worker is not None and worker.ready and worker.alive():
            return None
        self.close()
        began = time.perf_counter()
        try:
            return self._start_worker(timeout)
        finally:
            self.last_start_seconds = time.perf_counter() - began

    def _start_worker(self, timeout: float) -> Optional[str]:
        ctx = multiprocessing.get_context(self.start_method)
        args = (self.build, self.splits, self.task, self.n_classes, self.seed, self.memory_limit_mb)
        worker = _Worker(ctx, args, self.threads)
        self._holder[0] = worker
        self.worker_starts += 1
        kind, payload = worker.receive(min(START_TIMEOUT, max(timeout, 0.0)))
        if kind == "msg" and isinstance(payload, tuple) and payload and payload[0] == "ready":
            worker.ready = True
            return None
        self.close()
        if kind == "timeout":
            return f"worker process did not start within {min(START_TIMEOUT, max(timeout, 0.0)):.0f} s"
        if kind == "dead":
            return (f"{_describe_exit(payload)} while starting (is the build function importable, and is the "
                    f"main script guarded by if __name__ == '__main__'?)")
        return f"worker process sent an unexpected first message: {payload!r}"[:MAX_ERROR_CHARS]

    def _evaluate_in_worker(self, config: dict, index: int, time_limit: Optional[float] = None) -> Observation:
        called = time.perf_counter()
        cut = None if time_limit is None else called + max(float(time_limit), 0.0)  # the caller's deadline
        problem = self._ensure_worker(START_TIMEOUT if cut is None else cut - time.perf_counter())
        if problem is not None:
            if cut is not None and time.perf_counter() >= cut:
                return self._cut_at_deadline(config, index, time.perf_counter() - called)
            return self._failed(config, index, "failed", problem, 0.0)
        worker = self._holder[0]
        self._task_counter += 1
        task_id = self._task_counter
        sent = time.perf_counter()
        try:
            worker.busy = True
            worker.conn.send((task_id, config, self._save_to(index)))
        except Exception as exc:  # unpicklable config, or a worker that just died
            self.close()
            return self._failed(config, index, "failed", "could not send the configuration to the worker: "
                                + _error_text(exc), 0.0)
        folds = _FoldProgress(self.splits)
        while True:  # each fold's progress message starts the next fold's time limit
            limit = self.time_limit if cut is None else min(self.time_limit, cut - time.perf_counter())
            kind, payload = worker.receive(limit)
            if not (kind == "msg" and folds.take(payload, task_id)):
                break
            worker.busy = True  # the answer is still to come
        waited = time.perf_counter() - sent
        if kind == "timeout":
            self.close()
            if limit < self.time_limit:
                return self._cut_at_deadline(config, index, time.perf_counter() - called)
            return self._timed_out(config, index, folds, waited)
        if kind == "dead":
            self.close()
            return self._failed(config, index, "failed", _describe_exit(payload) + " during the evaluation", waited)
        if kind == "bad":
            self.close()
            return self._failed(config, index, "failed", "unreadable result from the worker: " + payload, waited)
        got_id, result = payload
        if got_id != task_id:
            self.close()
            return self._failed(config, index, "failed", f"worker answered task {got_id} for task {task_id}", waited)
        if result.get("restart"):
            self.close()
        return self._observation(config, index, result)

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
