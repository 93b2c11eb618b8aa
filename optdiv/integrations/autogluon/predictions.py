"""Reading a predictor: its task, the loss and diversity kind its ``eval_metric`` stands for, the labels and the
models' predictions on the rows its models are scored on, and its metric on any of those rows."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from optdiv.core.metric_vocabulary import resolve_host, task_of


def predictor_task(predictor) -> str:
    return task_of_problem(predictor.problem_type)


def task_of_problem(problem_type: str) -> str:
    return "regression" if problem_type in ("regression", "quantile") else "classification"


def optdiv_metric(predictor) -> str:
    """The optdiv metric for the predictor's eval_metric: it picks the pool loss and diversity kind."""
    return loss_for(predictor.eval_metric, predictor_task(predictor))


def loss_for(eval_metric, task: Optional[str]) -> str:
    """The loss whose pool and diversity serve AutoGluon's ``eval_metric`` (a Scorer, a name or None) in
    ``task`` (None: the metric's own task): the metric vocabulary's host reading, so AUC, F1, MAPE, ...
    and custom scorers share one rule with the other adapters (optdiv.core.metric_vocabulary)."""
    name = str(getattr(eval_metric, "name", eval_metric or "")) or None
    if task is None:
        task = (task_of(name) if name else None) or "classification"
    return resolve_host(name, task).name


def validation_targets(predictor) -> np.ndarray:
    """AutoGluon's internal labels of the rows its models are scored on: the validation rows, or
    the training rows when the predictor is bagged (out-of-fold predictions, no validation set)."""
    which = "val" if predictor.has_val else "train"
    _, y = predictor.load_data_internal(which, return_X=False, return_y=True)
    y = np.asarray(y)
    return y.astype(np.int64) if predictor_task(predictor) == "classification" else y.astype(np.float64)


def validation_predictions(predictor, models: Sequence[str]) -> Dict[str, np.ndarray]:
    """``{model: (rows, classes) probabilities or (rows,) values}`` on the rows of
    :func:`validation_targets`, in AutoGluon's internal class order (float32)."""
    models = list(models)
    if not models:
        return {}
    if predictor.can_predict_proba:
        out = predictor.predict_proba_multi(models=models, as_pandas=False, as_multiclass=True,
                                            inverse_transform=False)
    else:
        out = predictor.predict_multi(models=models, as_pandas=False, inverse_transform=False)
    return {m: np.asarray(v, dtype=np.float32) for m, v in out.items()}


def metric_loss(predictor, pred: np.ndarray, y: np.ndarray) -> float:
    """The predictor's ``eval_metric`` as an error for predictions in the layout of :func:`validation_predictions`
    on rows with the internal labels ``y``: what AutoGluon's validation score would be on those rows alone, so the
    search steers by your metric (AUC, F1, ... included) on the rows it may see."""
    from autogluon.core.metrics import compute_metric
    from autogluon.core.utils import get_pred_from_proba

    metric, problem = predictor.eval_metric, predictor.problem_type
    proba = pred[:, 1] if problem == "binary" and pred.ndim == 2 else pred  # AutoGluon's binary layout
    y_pred = get_pred_from_proba(proba, problem_type=problem) if metric.needs_pred or metric.needs_quantile else None
    return float(compute_metric(y, metric, y_pred=y_pred, y_pred_proba=None if y_pred is not None else proba,
                                as_error=True))
