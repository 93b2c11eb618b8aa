"""The final model of an OpenBox run: the engine's ensemble selection over the validation predictions the advisor
stored for its successful, feasible trials, and its members refitted on every row the user has.

OpenBox fits nothing itself (the user's objective does), so the refit takes the user's own fitting function."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Callable, List, NamedTuple, Optional, Union

import numpy as np

from optdiv.core.ensemble import ensemble_predict
from optdiv.core.metrics import mean_loss
from optdiv.core.selector import pool_loss
from optdiv.final.choice import AUTO, check_selection_settings, resolve_selection

if TYPE_CHECKING:  # the advisor builds on this module (its final_ensemble method), so only its type is named
    from optdiv.integrations.openbox.advisor import OptDivAdvisor


def check_targets(y_val, task: str) -> Optional[np.ndarray]:
    """``y_val`` checked for ``task``: class indices as int64, or finite values as float64 (None stays None);
    the advisor (:class:`~optdiv.integrations.openbox.advisor.OptDivAdvisor`) and :func:`final_ensemble` read
    targets this one way."""
    if y_val is None:
        return None
    y = np.asarray(y_val)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y_val must be a non-empty 1-D array of validation targets; got shape {y.shape}")
    if task == "regression":
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y_val contains NaN or inf values")
        return y
    if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or y.min() < 0:
        raise ValueError("classification y_val must hold class indices 0..k-1 (encode the labels first)")
    return y.astype(np.int64)


class EnsembleMembers(NamedTuple):
    indices: List[int]  # positions in the advisor's history
    weights: np.ndarray  # sum to 1
    configs: List[Any]  # the members' configurations
    val_prediction: np.ndarray  # the ensemble's validation prediction
    val_loss: float  # the ensemble's validation loss under the pool loss of the metric
    task: str = "classification"
    info: Optional[dict] = None  # what the selection reported besides weights (the guard's verdict)

    def predict(self, member_predictions) -> np.ndarray:
        """Weighted average of the members' predictions on new rows (one array per member, in order)."""
        preds = np.stack([np.asarray(p, dtype=np.float64) for p in member_predictions])
        return ensemble_predict(preds, self.weights)

    def refit(self, fit: Callable[[Any], Any]) -> "FittedEnsemble":
        """The members fitted again by ``fit(config)`` (your code: the model of ``config`` fitted on the training
        *and* validation rows), combined with these weights.

        Refitting on every row is the engine's default final step: the validation rows have done their job
        (choosing the members and weights) and now add data. A member whose fit raises is left out with a warning
        and the other weights rescaled; when every fit raises, the first error is raised.
        """
        models, kept, errors = [], [], []
        for position, config in enumerate(self.configs):
            try:
                models.append(fit(config))
            except Exception as exc:  # noqa: BLE001 - one member's failure must not lose the others
                errors.append(f"member {self.indices[position]}: {type(exc).__name__}: {exc}")
                if len(errors) == len(self.configs):
                    raise RuntimeError(f"no member could be refitted; {errors[0]}") from exc
                continue
            kept.append(position)
        if errors:
            warnings.warn("left out of the final model, their refit failed: " + "; ".join(errors), RuntimeWarning,
                          stacklevel=2)
        weights = self.weights[kept]
        n_classes = self.val_prediction.shape[1] if self.task == "classification" else 0
        return FittedEnsemble(models, weights / weights.sum(), self.task, n_classes,
                              [self.indices[p] for p in kept])


class FittedEnsemble:
    """Fitted members with weights, predicting like a scikit-learn estimator on the rows your objective reads.

    Classification averages the members' class probabilities (aligned by each model's ``classes_``; margin models
    give squashed margins, label-only models one-hot votes, as the engine scores them) and ``predict`` returns class
    indices ``0..k-1``, the encoding ``y_val`` used; regression averages values.
    """

    def __init__(self, models: List, weights: np.ndarray, task: str, n_classes: int, indices: List[int]):
        self.models = list(models)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.task = task
        self.n_classes = int(n_classes)
        self.indices = list(indices)  # the members' positions in the advisor's history

    def predict_proba(self, X) -> np.ndarray:
        from optdiv.evaluation.fitting import predict_probabilities

        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        probs = np.stack([predict_probabilities(m, X, self.n_classes) for m in self.models])
        return ensemble_predict(probs, self.weights)

    def predict(self, X) -> np.ndarray:
        if self.task == "classification":
            return np.argmax(self.predict_proba(X), axis=1)
        values = np.stack([np.asarray(m.predict(X), dtype=np.float64).reshape(-1) for m in self.models])
        return ensemble_predict(values, self.weights)

    def __repr__(self) -> str:
        return f"FittedEnsemble({len(self.models)} members, task={self.task!r})"


class _Run(NamedTuple):
    """The fields of a run that ``optdiv.final.choice.choose_members`` reads."""

    status: str
    val_pred: Optional[np.ndarray]
    val_loss: float


def final_ensemble(
    advisor: OptDivAdvisor,
    builder: str = "caruana",
    size: int = 25,
    seed: int = 0,
    y_val=None,
    ensemble_loss: Optional[str] = AUTO,
    ensemble_bags: Union[int, str] = AUTO,
    selection_guard: Optional[float] = None,
) -> EnsembleMembers:
    """Post-hoc ensemble over the advisor's stored validation predictions (failed and infeasible trials
    excluded).

    ``builder``: ``"caruana"`` (ensemble selection with replacement, ``size`` rounds) or
    ``"agnostic_bayes"`` (posterior probability of being the best model). ``y_val`` is needed only when
    the advisor was built without it (option off).

    ``ensemble_loss`` and ``ensemble_bags`` (Caruana only) are the engine's: under ``"auto"`` a 0/1-error run's
    selection minimises log loss and a regression run's averages 20 selections on bootstrap samples of the rows
    (docs/method.md, "Final ensembles"); ``None`` and ``0`` select on the run's own metric once.

    ``selection_guard`` (a z value; None, the default, for no guard): when the selection minimises another loss
    than the run's metric, the selection on the metric is kept instead if its ensemble is better on the validation
    rows by more than that many paired standard errors (:func:`optdiv.final.choice.guarded_choice`); the result's
    ``info["guard"]`` says which was kept. Off by default: at z = 1.645 it raised the test error slightly on the sets
    it was reported on (docs/results.md, "A guard on the log-loss selection under OpenBox").
    """
    from optdiv.final.choice import choose_members

    if not callable(getattr(advisor, "stored_predictions", None)):  # an OptDivAdvisor's own store of predictions
        raise TypeError(f"final_ensemble needs an OptDivAdvisor; got {type(advisor).__name__}")
    check_selection_settings(size, ensemble_loss, ensemble_bags, task=advisor.task, guard=selection_guard)
    y = advisor.y_val if y_val is None else check_targets(y_val, advisor.task)
    if y is None:
        raise ValueError("pass y_val: this advisor was built without validation targets")
    rows, preds = advisor.stored_predictions()
    if not rows:
        raise RuntimeError("no successful, feasible trial reported validation predictions: there is no model "
                           "to ensemble")
    if preds.shape[1] != len(y):
        raise ValueError(f"y_val has {len(y)} rows but the stored predictions cover {preds.shape[1]}")
    loss = pool_loss(advisor.metric, advisor.task == "classification")
    selection_loss, bags = resolve_selection(advisor.task, loss, ensemble_loss, ensemble_bags)
    objectives = advisor.history.get_objectives(transform="none", warn_invalid_value=False)[:, 0]
    runs = [_Run("ok", preds[j], float(objectives[i])) for j, i in enumerate(rows)]
    info: dict = {}
    picked, weights = choose_members(runs, y, loss, builder=builder, size=size, seed=seed, info=info,
                                     selection_loss=selection_loss, bags=bags, guard=selection_guard)
    member_preds = preds[picked]
    val_prediction = ensemble_predict(member_preds, weights)
    return EnsembleMembers(
        indices=[int(rows[j]) for j in picked],
        weights=np.asarray(weights, dtype=np.float64),
        configs=[advisor.history.observations[rows[j]].config for j in picked],
        val_prediction=val_prediction,
        val_loss=float(mean_loss(val_prediction, y, loss)),
        task=advisor.task,
        info=info,
    )
