"""The record of one evaluated configuration, its statuses and the loss a failure is recorded with.

Every search, store, replay library and host adapter exchanges :class:`Observation` objects, so this module
depends on nothing but numpy and the core's metric vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import numpy as np

# the loss recorded for a failed or timed-out evaluation: by loss name, or for any name of a loss
from optdiv.core.metric_vocabulary import WORST_LOSS, worst_loss  # noqa: F401

#: Status of an evaluation cut by the caller's ``time_limit`` (the run's deadline), not by its own limit: never
#: stored, since it says nothing about the configuration.
DEADLINE = "deadline"

#: ``infeasible`` is set by the engine, not here: an ok run that violates a constraint (optdiv.cash.constraints).
STATUSES = ("ok", "failed", "timeout", "infeasible", DEADLINE)


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

    ``recorded_at`` (seconds since the epoch) is when the search recorded the observation, so a run's progress
    can be drawn against wall time; ``None`` before it is recorded and for log lines written before it was kept.
    Nothing in a search reads it.
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
    recorded_at: Optional[float] = None

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

