"""The one table of metric names: which loss each name stands for, and what the search uses for that loss.

optdiv computes five losses (:mod:`optdiv.core.metrics`). Users and hosts name metrics in many ways, so
every part of optdiv (the engine, the evaluator, the selector, the three host adapters) turns a name into
one of the five here and nowhere else. A name belongs to one of three tiers:

* the loss's own name and its **aliases**: other names of the same loss, or of a metric that ranks
  models the same way on fixed validation rows (accuracy = 1 - error, RMSE and R2 against MSE). optdiv
  optimises these exactly, so the standalone engine accepts them (:func:`resolve`);
* **host names**: a host's metric that optdiv cannot compute per example, whose search uses this loss's
  temporary pool and diversity (median absolute error -> mae, F1 / AUC -> 0/1 error's black-box mix).
  Only the adapters and the selector accept them (:func:`resolve_host`): the host scores the runs itself
  (and may hand the selector its own loss for the pool, ``pool_scorer``, as the auto-sklearn adapter does);
* any other name, for a host only: the **fallback** of its task (:data:`FALLBACK`), 0/1 error for
  classification (OptDivBO's black-box diversity, as auto-sklearn's adapter did) and squared error for
  regression (as AutoGluon's adapter did).

Names are compared lower-case, without surrounding spaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Dict, Mapping, Optional, Tuple

from .arrays import PROB_CLIP

TASKS = ("classification", "regression")

#: OptDivBO's diversity for a metric with no derived bound (eq. 12's mix of cross-entropy and Brier terms),
#: and the same mix with the papers' 1e-15 clip (see optdiv.core.diversity).
BLACK_BOX_KIND = "zero_one"
PAPER_BLACK_BOX_KIND = "zero_one_paper"


@dataclass(frozen=True)
class Loss:
    """One loss optdiv computes, the names that mean it, and what the search uses for it.

    The loss is also what the temporary pool's ensemble selection minimises (DivBO / OptDivBO) and, by
    default, the final ensemble's. ``auto_selection`` is the final selection's loss under
    ``ensemble_loss="auto"`` when it differs (None: the loss itself).
    """

    name: str
    task: str
    aliases: Tuple[str, ...]
    host_names: Tuple[str, ...]
    diversity: str  # OptDivBO's pairwise diversity kind for this loss (optdiv.core.diversity.KINDS)
    worst: float  # recorded for a failed or timed-out evaluation: finite, so run logs stay valid JSON
    auto_selection: Optional[str] = None


def _variants(*bases: str, suffixes: Tuple[str, ...] = ("", "_macro", "_micro", "_weighted", "_samples")):
    return tuple(base + suffix for base in bases for suffix in suffixes)


#: Classification metrics of auto-sklearn 0.15 and AutoGluon 1.x that optdiv cannot compute per example. They would
#: get the fallback anyway; listed, they also tell a host's task (a regression run named roc_auc is an error).
_BLACK_BOX_CLASSIFICATION = (
    ("balanced_accuracy", "average_precision", "mcc", "pac", "pac_score", "quadratic_kappa")
    + _variants("f1", "precision", "recall")
    + _variants("roc_auc", suffixes=("", "_ovo", "_ovo_macro", "_ovo_weighted", "_ovr", "_ovr_macro", "_ovr_micro",
                                     "_ovr_weighted"))
)

VOCABULARY: Tuple[Loss, ...] = (
    Loss("error", "classification", aliases=("accuracy", "acc"), host_names=_BLACK_BOX_CLASSIFICATION,
         diversity=BLACK_BOX_KIND, worst=1.0, auto_selection="log_loss"),
    Loss("log_loss", "classification", aliases=("logloss", "cross_entropy", "ce", "nll"), host_names=(),
         diversity="ce", worst=float(-math.log(PROB_CLIP))),
    Loss("brier", "classification", aliases=("brier_score", "brier_score_loss"), host_names=(),
         diversity="brier", worst=2.0),
    Loss("mse", "regression", aliases=("mean_squared_error", "rmse", "root_mean_squared_error", "r2"),
         host_names=("mean_squared_log_error", "root_mean_squared_log_error", "mean_absolute_percentage_error",
                     "mape", "symmetric_mean_absolute_percentage_error", "smape", "pearsonr", "spearmanr",
                     "pinball", "pinball_loss"),
         diversity="mse", worst=1e30),
    Loss("mae", "regression", aliases=("mean_absolute_error",), host_names=("median_absolute_error",),
         diversity="mae", worst=1e30),
)

#: The loss a host's metric falls back to when the vocabulary does not know its name.
FALLBACK = MappingProxyType({"classification": "error", "regression": "mse"})

#: The loss each task uses when no metric is given.
DEFAULT = MappingProxyType({"classification": "error", "regression": "mse"})

CLASSIFICATION_LOSSES = tuple(loss.name for loss in VOCABULARY if loss.task == "classification")
REGRESSION_LOSSES = tuple(loss.name for loss in VOCABULARY if loss.task == "regression")
LOSSES = CLASSIFICATION_LOSSES + REGRESSION_LOSSES

_BY_NAME: Dict[str, Loss] = {loss.name: loss for loss in VOCABULARY}
_EXACT: Dict[str, Loss] = {n: loss for loss in VOCABULARY for n in (loss.name,) + loss.aliases}
_HOST: Dict[str, Loss] = {**{n: loss for loss in VOCABULARY for n in loss.host_names}, **_EXACT}

#: Loss recorded for a failed evaluation, by loss name (a view of the table above).
WORST_LOSS: Mapping[str, float] = MappingProxyType({loss.name: loss.worst for loss in VOCABULARY})


def _key(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a metric name must be a string; got {type(name).__name__}")
    return name.strip().lower()


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")


def choices(task: str) -> str:
    """The names :func:`resolve` accepts for ``task``, for error messages."""
    _check_task(task)
    losses = [loss for loss in VOCABULARY if loss.task == task]
    aliases = [a for loss in losses for a in loss.aliases]
    return f"{', '.join(loss.name for loss in losses)} (or {', '.join(aliases)})"


def _mismatch(name: str, loss: Loss, task: str) -> ValueError:
    return ValueError(f"metric {name!r} does not fit a {task} task (it is a {loss.task} metric); "
                      f"choose one of {choices(task)}")


def resolve(name: Optional[str], task: str) -> Loss:
    """The loss a user's metric name means for ``task`` (None: the task's default); optdiv computes it exactly.

    Raises ValueError for a name of the other task, a host-only name, or an unknown name, listing the choices.
    """
    _check_task(task)
    if name is None:
        return _BY_NAME[DEFAULT[task]]
    key = _key(name)
    loss = _EXACT.get(key)
    if loss is not None:
        if loss.task != task:
            raise _mismatch(name, loss, task)
        return loss
    served = _HOST.get(key)
    if served is not None and served.task == task:
        raise ValueError(f"optdiv cannot compute the {task} metric {name!r} itself (host adapters search it with "
                         f"{served.name}'s pool and diversity); choose one of {choices(task)}")
    raise ValueError(f"unknown {task} metric {name!r}; choose one of {choices(task)}")


def resolve_host(name: Optional[str], task: str) -> Loss:
    """The loss whose pool and diversity serve a host's metric ``name`` for ``task``.

    Known names resolve as in the table; a name of the other task raises ValueError; an unknown name (a
    host's custom or black-box metric) gets the task's :data:`FALLBACK`, as does None.
    """
    _check_task(task)
    if name is None:
        return _BY_NAME[FALLBACK[task]]
    loss = _HOST.get(_key(name))
    if loss is None:
        return _BY_NAME[FALLBACK[task]]
    if loss.task != task:
        raise _mismatch(name, loss, task)
    return loss


def task_of(name: str) -> Optional[str]:
    """The task a known metric name (any tier) belongs to; None for a name the vocabulary does not know."""
    loss = _HOST.get(_key(name))
    return None if loss is None else loss.task


def diversity_kind(name: str, paper: bool = False) -> str:
    """OptDivBO's diversity kind for a metric name: its loss's kind, the black-box mix for an unknown name.

    ``paper=True`` gives the black-box mix with the papers' 1e-15 clip instead of the floor
    (:data:`optdiv.core.diversity.ZERO_ONE_CE_FLOOR`); no other kind has a clip to change.
    """
    loss = _HOST.get(_key(name))
    kind = BLACK_BOX_KIND if loss is None else loss.diversity
    return PAPER_BLACK_BOX_KIND if paper and kind == BLACK_BOX_KIND else kind


def worst_loss(name: str) -> float:
    """The loss recorded for a failed evaluation under the metric ``name`` (a loss name or an alias)."""
    loss = _EXACT.get(_key(name))
    if loss is None:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")
    return loss.worst


def auto_selection(loss: str) -> Optional[str]:
    """The final ensemble selection's loss under ``ensemble_loss="auto"`` for a run on ``loss`` (None: ``loss``)."""
    entry = _EXACT.get(_key(loss))
    return None if entry is None else entry.auto_selection
