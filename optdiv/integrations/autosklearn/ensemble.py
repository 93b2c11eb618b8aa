"""auto-sklearn's final ensemble chosen the way optdiv's engine chooses its own: ``OptDivEnsemble``, a class for
auto-sklearn's ``ensemble_class`` hook, built on first use (:func:`ensemble_class`).

auto-sklearn's ``EnsembleSelection`` runs Caruana's selection on the task metric itself. With a few hundred
validation rows that over-fits them: selection on 0/1 error keeps members whose gain is a handful of flipped rows.
``OptDivEnsemble`` runs the same forward selection with optdiv's core (:mod:`optdiv.core.ensemble`) on what
:func:`~optdiv.final.choice.resolve_selection` gives for auto-sklearn's metric: log loss for accuracy, the average
of 20 selections on bootstrap samples of the validation rows for a regression metric, the metric itself otherwise
(auto-sklearn's own loss for a metric optdiv does not compute, as the search's pool does).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from optdiv.core.ensemble import bagged_ensemble_selection, ensemble_predict, ensemble_selection
from optdiv.core.metric_vocabulary import REGRESSION_LOSSES
from optdiv.final.choice import AUTO, check_selection_settings, resolve_selection
from optdiv.integrations.autosklearn.callback import HostLoss, OptDivSMAC, computes_exactly, selector_metric

#: Rounds of selection, auto-sklearn 0.15's ``EnsembleSelection`` default, so switching classes keeps the size.
DEFAULT_ENSEMBLE_SIZE = 50

#: The keywords ``ensemble_kwargs`` may give ``OptDivEnsemble`` (the others come from auto-sklearn's builder).
ENSEMBLE_KWARGS = ("ensemble_size", "ensemble_loss", "ensemble_bags")
_BUILDER_KWARGS = ("task_type", "metrics", "backend", "random_state")

_CLASSES: Dict[str, type] = {}


def check_ensemble_settings(ensemble_size=DEFAULT_ENSEMBLE_SIZE, ensemble_loss=AUTO, ensemble_bags=AUTO) -> None:
    """Refuse a bad setting when it is given, not in auto-sklearn's ensemble-builder process minutes later."""
    check_selection_settings(ensemble_size, ensemble_loss, ensemble_bags, own_metric="auto-sklearn's metric")


def check_ensemble_kwargs(ensemble_kwargs: Optional[Mapping[str, Any]]) -> None:
    """``ensemble_kwargs`` meant for ``OptDivEnsemble``: known keywords (not ``EnsembleSelection``'s ``mode`` or
    ``bagging``) with valid values."""
    kwargs = dict(ensemble_kwargs or {})
    unknown = sorted(set(kwargs) - set(ENSEMBLE_KWARGS) - set(_BUILDER_KWARGS))
    if unknown:
        raise ValueError(f"optdiv's ensemble takes {', '.join(ENSEMBLE_KWARGS)} in ensemble_kwargs, not "
                         f"{', '.join(unknown)}; pass optdiv_ensemble=False for auto-sklearn's EnsembleSelection")
    check_ensemble_settings(**{key: kwargs[key] for key in ENSEMBLE_KWARGS if key in kwargs})


def selection_plan(metric, task_type: int, ensemble_loss=AUTO, ensemble_bags=AUTO) -> Tuple[Any, str, int]:
    """(loss the selection minimises, its name, bootstrap bags) for an auto-sklearn Scorer and task type.

    The loss is an optdiv loss name where optdiv computes the metric (or ``ensemble_loss`` names one), else
    auto-sklearn's own loss for the metric (:class:`~optdiv.integrations.autosklearn.callback.HostLoss`).
    """
    classification = OptDivSMAC._is_classification(task_type)
    task = "classification" if classification else "regression"
    name = str(metric.name)
    run_loss = selector_metric(name, classification) if computes_exactly(name, classification) else None
    selection, bags = resolve_selection(task, run_loss or name, ensemble_loss, ensemble_bags)
    if selection is not None:
        if (selection in REGRESSION_LOSSES) == classification:
            raise ValueError(f"ensemble_loss {selection!r} does not fit a {task} task")
        return selection, selection, bags
    if run_loss is not None:
        return run_loss, run_loss, bags
    return HostLoss(metric, task_type), name, bags


def _selection_arrays(base_models_predictions, true_targets, classification: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The runs' validation predictions as (models, rows[, classes]) and the targets as a vector."""
    preds = np.stack([np.asarray(p) for p in base_models_predictions])
    y = np.asarray(true_targets)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if not classification and preds.ndim == 3 and preds.shape[2] == 1:
        preds = preds[:, :, 0]
    if y.ndim != 1 or preds.ndim != (3 if classification else 2):
        raise ValueError(f"optdiv's ensemble supports single-target tasks; got predictions of shape {preds.shape} "
                         f"and targets of shape {y.shape}")
    return preds, y


def _seed(random_state) -> int:
    """An int seed as given; else one drawn from the RandomState (auto-sklearn's builder hands one over)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def ensemble_class() -> type:
    """``OptDivEnsemble``, auto-sklearn's ``AbstractEnsemble`` with optdiv's selection, built on first use (importing
    optdiv needs no auto-sklearn) under the package's name, whose ``__getattr__`` builds it, so pickles find it."""
    if "ensemble" in _CLASSES:
        return _CLASSES["ensemble"]
    from autosklearn.ensembles.abstract_ensemble import AbstractEnsemble
    from autosklearn.metrics import calculate_losses

    class OptDivEnsemble(AbstractEnsemble):
        """auto-sklearn's final ensemble chosen by optdiv's ensemble selection (see the module docstring).

        ``ensemble_size``: selection rounds (50, as auto-sklearn's ``EnsembleSelection``). ``ensemble_loss``:
        ``"auto"`` (log loss for accuracy, else the metric), ``None`` (auto-sklearn's metric) or an optdiv loss
        name. ``ensemble_bags``: ``"auto"`` (20 for regression, else 0) or the number of bootstrap selections
        averaged. auto-sklearn's builder passes the rest; only the first of several metrics is used.
        """

        def __init__(self, task_type: int, metrics, backend=None, ensemble_size: int = DEFAULT_ENSEMBLE_SIZE,
                     ensemble_loss: Optional[str] = AUTO, ensemble_bags: Union[int, str] = AUTO,
                     random_state=None):
            check_ensemble_settings(ensemble_size, ensemble_loss, ensemble_bags)
            OptDivSMAC._is_classification(task_type)  # multilabel / multi-output are refused here
            self.task_type = task_type
            self.metrics = metrics
            self.ensemble_size = int(ensemble_size)
            self.ensemble_loss = ensemble_loss
            self.ensemble_bags = ensemble_bags
            self.random_state = random_state

        def _metric(self):
            metrics = self.metrics
            if isinstance(metrics, Sequence):
                if len(metrics) == 0:
                    raise ValueError("optdiv's ensemble needs auto-sklearn's metric; got none")
                if len(metrics) > 1:
                    warnings.warn("optdiv's ensemble selection optimises one metric; using the first of "
                                  f"{len(metrics)}", stacklevel=3)
                metrics = metrics[0]
            if getattr(metrics, "_needs_X", False):
                raise ValueError(f"optdiv's ensemble cannot score metric {metrics.name!r}: it needs the rows' X")
            return metrics

        def fit(self, base_models_predictions, true_targets, model_identifiers, runs, X_data=None):
            """Weights by optdiv's selection on the runs' validation predictions; ``runs`` is not needed."""
            if len(base_models_predictions) == 0:
                raise ValueError("no run predictions to build an ensemble from")
            if len(model_identifiers) != len(base_models_predictions):
                raise ValueError(f"{len(model_identifiers)} identifiers for {len(base_models_predictions)} runs")
            metric = self._metric()
            loss, loss_name, bags = selection_plan(metric, self.task_type, self.ensemble_loss, self.ensemble_bags)
            preds, y = _selection_arrays(base_models_predictions, true_targets,
                                         OptDivSMAC._is_classification(self.task_type))
            seed = _seed(self.random_state)
            if bags:
                weights = bagged_ensemble_selection(preds, y, loss, size=self.ensemble_size, bags=bags, seed=seed)
            else:
                weights = ensemble_selection(preds, y, loss, size=self.ensemble_size, seed=seed).weights
            self.weights_ = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
            self.identifiers_ = list(model_identifiers)
            self.selection_loss_, self.bags_, self.seed_ = loss_name, int(bags), seed
            self.metric_name_ = str(metric.name)
            # what auto-sklearn's EnsembleSelection reports: its loss on the metric of the weighted prediction
            self.validation_loss_ = float(calculate_losses(
                solution=true_targets, prediction=self.predict(base_models_predictions), task_type=self.task_type,
                metrics=[metric], X_data=X_data)[metric.name])
            return self

        def predict(self, base_models_predictions):
            """Weighted average; the predictions are every fitted run's or, as auto-sklearn's ``predict`` passes
            them, only those of the members (non-zero weights), in the same order."""
            weights = self.weights_
            if len(base_models_predictions) == len(weights):
                members = [p for p, w in zip(base_models_predictions, weights) if w > 0]
                weights = weights[weights > 0]
            elif len(base_models_predictions) == int(np.count_nonzero(weights)):
                members, weights = list(base_models_predictions), weights[weights > 0]
            else:
                raise ValueError(f"predictions of {len(base_models_predictions)} runs for an ensemble of "
                                 f"{len(weights)} runs ({np.count_nonzero(weights)} members)")
            return ensemble_predict(np.stack([np.asarray(p) for p in members]), weights)

        def get_models_with_weights(self, models) -> List[Tuple[float, Any]]:
            return [(weight, models[identifier]) for identifier, weight in self._members()]

        def get_identifiers_with_weights(self) -> List[Tuple[Tuple[int, int, float], float]]:
            return [(identifier, float(weight)) for identifier, weight in zip(self.identifiers_, self.weights_)]

        def get_selected_model_identifiers(self) -> List[Tuple[int, int, float]]:
            return [identifier for identifier, weight in zip(self.identifiers_, self.weights_) if weight > 0]

        def get_validation_performance(self) -> float:
            return self.validation_loss_

        def _members(self) -> List[Tuple[Tuple[int, int, float], float]]:
            """(identifier, weight) of the members, heaviest first."""
            pairs = [(identifier, float(weight)) for identifier, weight in zip(self.identifiers_, self.weights_)
                     if weight > 0]
            return sorted(pairs, key=lambda pair: -pair[1])

        def __str__(self) -> str:
            if not hasattr(self, "weights_"):
                return "optdiv ensemble selection (not fitted)"
            bags = f", averaged over {self.bags_} bootstrap samples" if self.bags_ else ""
            members = " ".join(f"{identifier}: {weight:.4f}" for identifier, weight in self._members())
            return (f"optdiv ensemble selection on {self.selection_loss_} ({self.ensemble_size} rounds{bags}):\n"
                    f"\tValidation loss ({self.metric_name_}): {self.validation_loss_:.5f}\n"
                    f"\tMembers (identifier: weight): {members}\n")

    OptDivEnsemble.__module__ = __package__
    OptDivEnsemble.__qualname__ = "OptDivEnsemble"
    _CLASSES["ensemble"] = OptDivEnsemble
    return OptDivEnsemble
