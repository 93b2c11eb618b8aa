"""Build, fit and predict one configuration: the work an evaluation does, in a worker or in process.

Never raises for a failing model: :func:`fit_predict` returns a plain dict with ``ok`` and either the float32
predictions or the error text, so the worker can send it over a pipe as it is.
"""

from __future__ import annotations

import random
import time
import traceback
import warnings
from typing import Callable, Dict, Optional

import numpy as np

from optdiv.evaluation.anytime import fit_within, set_rounds

#: Characters of traceback kept in :attr:`Observation.error`.
MAX_ERROR_CHARS = 3000


def final_estimator(model):
    """The model at the end of a pipeline: through nested pipelines, the regression range clip and a row cap."""
    from optdiv.evaluation.target_range import RangeClippedRegressor
    from optdiv.spaces.sklearn_models import RowCapped

    while hasattr(model, "steps") or isinstance(model, (RangeClippedRegressor, RowCapped)):
        if isinstance(model, RangeClippedRegressor):
            model = model.regressor
        elif isinstance(model, RowCapped):
            model = model.estimator
        else:
            model = model.steps[-1][1]
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


def build_pipeline(build, config: dict, X_train, seed: int, task: str = "classification",
                   rounds: Optional[int] = None):
    """The unfitted pipeline every evaluation (and every refit of an ensemble member) uses; a regression
    model's predictions are clipped near its training targets' range (optdiv.evaluation.target_range).
    ``rounds``: those an earlier evaluation of ``config`` kept when its fit was cut (optdiv.evaluation.anytime),
    given to the model instead of the configured ones."""
    from sklearn.pipeline import Pipeline

    from optdiv.data import make_preprocessor
    from optdiv.evaluation.target_range import RangeClippedRegressor

    model = build(dict(config), seed)
    set_rounds(final_estimator(model), rounds)
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
    classes = getattr(final_estimator(pipe), "classes_", None)
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


def error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = "...\n" + text[-MAX_ERROR_CHARS:]
    return f"{head}\n{text}"


def n_folds(splits) -> int:
    """Fits one evaluation makes on ``splits``: its number of folds, 1 for a holdout split."""
    folds = getattr(splits, "folds", None)
    return 1 if folds is None else len(np.unique(np.asarray(folds)))


def fit_predict(build, splits, task: str, n_classes: Optional[int], seed: int, config: dict,
                 on_fold: Optional[Callable[[int, np.ndarray], None]] = None,
                 save_to: Optional[str] = None, fit_seconds: Optional[float] = None,
                 rounds: Optional[int] = None, rows: Optional[int] = None) -> dict:
    """Build, fit and predict one configuration; returns a plain dict (never raises Exception).

    Only the validation prediction is timed for ``predict_seconds`` (what a latency constraint bounds), so
    the test rows, which a search never sees, do not change which runs are feasible. Splits with ``folds``
    (cross-validation mode) go to :func:`_fit_predict_folds`, which calls ``on_fold`` after each fold.
    ``save_to``: where to save the fitted pipeline of a successful fit (after ``seconds`` is taken, so saving
    does not change ``fit_seconds``); under cross-validation the fold pipelines, as one :class:`FoldBag`.
    ``fit_seconds``: the time a fit (each fold's, under cross-validation) may grow in; a forest or booster still
    growing then keeps the rounds it has (:mod:`optdiv.evaluation.anytime`, recorded in the measures). ``rounds``:
    the rounds an earlier evaluation of ``config`` kept (a final member's refit), fitted instead of the configured.
    ``rows``: fit on a sample of that many training rows only (classes in their shares), a final member grown from
    a row sample towards every row as far as the time left allows.
    """
    if getattr(splits, "folds", None) is not None:
        return _fit_predict_folds(build, splits, task, n_classes, seed, config, on_fold, save_to, fit_seconds)
    start = time.perf_counter()
    measures: Dict[str, float] = {}
    try:
        np.random.seed(seed % (2**32))
        random.seed(seed)
        pipe = build_pipeline(build, config, splits.X_train, seed, task, rounds)
        model = pipe.steps[-1][1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence and similar chatter of candidate models
            X_fit, y_fit = splits.X_train, splits.y_train
            if rows is not None and rows < len(y_fit):
                from optdiv.data import row_sample_positions

                keep = row_sample_positions(np.asarray(y_fit), int(rows), np.random.default_rng(seed),
                                            task == "classification")
                X_fit = X_fit.iloc[keep] if hasattr(X_fit, "iloc") else X_fit[keep]
                y_fit = np.asarray(y_fit)[keep]
            measures.update(fit_within(pipe, final_estimator(model), X_fit, y_fit, fit_seconds))
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
        name = type(final_estimator(model)).__name__
        seconds = time.perf_counter() - start
        saved = save_to is not None and _save_fitted(pipe, save_to, preds)
        return {"ok": True, "val_pred": preds[0], "test_pred": preds[1], "model": name,
                "seconds": seconds, "measures": measures, "saved": saved}
    except (Exception, SystemExit) as exc:
        return {"ok": False, "error": error_text(exc), "seconds": time.perf_counter() - start,
                "restart": isinstance(exc, MemoryError), "measures": measures}


def _save_fitted(pipe, path: str, preds) -> bool:
    """Save a fitted pipeline whose predictions are finite (a NaN-predicting one fails and is never a member)."""
    if any(p is not None and not np.all(np.isfinite(p)) for p in preds):
        return False
    from optdiv.evaluation.pipelines import save_pipeline

    return save_pipeline(pipe, path)


def _predict_rows(pipe, X, task: str, n_classes: Optional[int]) -> np.ndarray:
    return _class_probabilities(pipe, X, n_classes) if task == "classification" else _regression_values(pipe, X)


class FoldBag:
    """The k pipelines of one cross-validated evaluation, averaged: the model whose out-of-fold predictions the
    search scored and the ensemble was chosen on, so the final model needs no refit on all rows.

    Classification averages the folds' class probabilities (aligned to ``n_classes`` columns as the evaluator
    aligns them), regression their values."""

    def __init__(self, pipelines, task: str, n_classes: Optional[int] = None):
        self.pipelines = list(pipelines)
        self.task = task
        self.n_classes = n_classes
        if task == "classification":
            self.classes_ = np.arange(int(n_classes))

    def predict_proba(self, X) -> np.ndarray:
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        return np.mean([_class_probabilities(p, X, self.n_classes) for p in self.pipelines], axis=0)

    def predict(self, X) -> np.ndarray:
        if self.task == "classification":
            return np.argmax(self.predict_proba(X), axis=1)
        return np.mean([np.asarray(p.predict(X), dtype=np.float64).reshape(len(X)) for p in self.pipelines], axis=0)


def _fit_predict_folds(build, splits, task: str, n_classes: Optional[int], seed: int, config: dict,
                       on_fold: Optional[Callable[[int, np.ndarray], None]] = None,
                       save_to: Optional[str] = None, fit_seconds: Optional[float] = None) -> dict:
    """k-fold :func:`fit_predict`: one pipeline per fold, fitted on the rows outside it; never raises Exception.

    The validation prediction is out-of-fold (each row predicted by the one pipeline that did not see it);
    the test prediction is the mean over the fold pipelines. ``predict_seconds`` sums the out-of-fold predict
    calls, which together predict every row once, like the holdout predict it stands for. Class probabilities
    keep every class's column even when a fold's training part lacks that class (``_class_probabilities``
    aligns by ``classes_``). Any fold failing fails the evaluation. ``on_fold(fold, predictions of its rows)``
    runs after each fold is done (the worker's progress message: it restarts the per-fold time limit and lets a
    later time-out keep the finished folds' loss). ``save_to``: where to save the fold pipelines together, as one
    :class:`FoldBag`, when the evaluation succeeds.
    """
    start = time.perf_counter()
    measures: Dict[str, float] = {}
    try:
        fitted = []
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
                cut = fit_within(pipe, final_estimator(model), X_fit, y[~inside], fit_seconds)
                if cut:  # the fewest rounds any fold kept
                    measures["rounds_configured"] = cut["rounds_configured"]
                    measures["rounds_fitted"] = min(cut["rounds_fitted"],
                                                    measures.get("rounds_fitted", cut["rounds_fitted"]))
                if save_to is not None:
                    fitted.append(pipe)
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
        name = type(final_estimator(model)).__name__
        seconds = time.perf_counter() - start
        saved = save_to is not None and _save_fitted(FoldBag(fitted, task, n_classes), save_to, [val, test])
        return {"ok": True, "val_pred": val, "test_pred": test, "model": name,
                "seconds": seconds, "measures": measures, "saved": saved}
    except (Exception, SystemExit) as exc:
        return {"ok": False, "error": error_text(exc), "seconds": time.perf_counter() - start,
                "restart": isinstance(exc, MemoryError), "measures": measures}

