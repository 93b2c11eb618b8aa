"""The final ensemble of an OpenBox run: Caruana's selection (or Agnostic Bayes) over the validation predictions the
advisor stored for its successful, feasible trials."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, NamedTuple, Optional

import numpy as np

from optdiv.core.ensemble import ensemble_predict
from optdiv.core.metrics import mean_loss
from optdiv.core.selector import pool_loss

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

    def predict(self, member_predictions) -> np.ndarray:
        """Weighted average of the members' predictions on new rows (one array per member, in order)."""
        preds = np.stack([np.asarray(p, dtype=np.float64) for p in member_predictions])
        return ensemble_predict(preds, self.weights)


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
) -> EnsembleMembers:
    """Post-hoc ensemble over the advisor's stored validation predictions (failed and infeasible trials
    excluded).

    ``builder``: ``"caruana"`` (ensemble selection with replacement, ``size`` rounds) or
    ``"agnostic_bayes"`` (posterior probability of being the best model). ``y_val`` is needed only when
    the advisor was built without it (option off).
    """
    from optdiv.final.choice import choose_members

    if not callable(getattr(advisor, "stored_predictions", None)):  # an OptDivAdvisor's own store of predictions
        raise TypeError(f"final_ensemble needs an OptDivAdvisor; got {type(advisor).__name__}")
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
    objectives = advisor.history.get_objectives(transform="none", warn_invalid_value=False)[:, 0]
    runs = [_Run("ok", preds[j], float(objectives[i])) for j, i in enumerate(rows)]
    picked, weights = choose_members(runs, y, loss, builder=builder, size=size, seed=seed)
    member_preds = preds[picked]
    val_prediction = ensemble_predict(member_preds, weights)
    return EnsembleMembers(
        indices=[int(rows[j]) for j in picked],
        weights=np.asarray(weights, dtype=np.float64),
        configs=[advisor.history.observations[rows[j]].config for j in picked],
        val_prediction=val_prediction,
        val_loss=float(mean_loss(val_prediction, y, loss)),
    )
