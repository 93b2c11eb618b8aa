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

#: ``infeasible`` is set by the engine, not here: an ok run that violates a constraint (optdiv.evaluation.constraints).
STATUSES = ("ok", "failed", "timeout", "infeasible", DEADLINE)

#: Measure set to 1 on a failed evaluation whose worker process died before it was ready (an unimportable build
#: function, a main script without the ``__main__`` guard, a memory limit below what starting needs): every later
#: start would fail the same way, which the search loop uses to stop instead of spending its budget on it.
WORKER_START_FAILED = "worker_start_failed"

#: Status of a pseudo-observation standing for a configuration still being evaluated (several evaluations at once):
#: its ``val_loss`` is a believed loss and its ``val_pred`` a predicted behaviour (optdiv.engine.loop). It only ever
#: exists inside one ``suggest`` call's history, never in a store.
PENDING = "pending"


@dataclass
class Observation:
    """One evaluated configuration.

    ``val_pred`` / ``test_pred`` are float32 ``(rows, classes)`` probabilities or ``(rows,)`` values,
    present only when ``status == "ok"``. ``fit_seconds`` is the wall time of building, fitting and
    predicting (for a timeout or crash: the time waited). ``error`` holds the exception and a traceback
    tail, or the reason of a timeout / crash. ``measures`` holds what black-box constraints can name
    (:data:`optdiv.evaluation.constraints.MEASURES`): ``fit_seconds``, and for runs that got as far as predicting
    the validation rows ``predict_seconds`` and ``predict_us_per_row``; empty for observations stored before
    measures were recorded.

    A cross-validation evaluation that timed out after ``folds_done`` of ``folds_total`` folds is censored, not
    uninformative: ``partial_loss`` is the loss of the out-of-fold predictions of those folds' rows, which
    the optimisers use instead of the worst loss. It still has no predictions (the other folds' rows were never
    predicted), so it never enters an ensemble. ``None`` / 0 for every other observation.

    ``recorded_at`` (seconds since the epoch) is when the search recorded the observation, so a run's progress
    can be drawn against wall time; ``None`` before it is recorded and for log lines written before it was kept.
    Nothing in a search reads it.

    ``model_name`` is a host's own name for the model the evaluation fitted (the AutoGluon adapter reads its
    predictions back by it); ``None`` in optdiv's own searches. ``config_key`` caches the configuration's identity
    (:func:`optdiv.spaces.candidates.observation_key` fills it on first use), since every suggestion compares the
    keys of the whole history; it is never stored.
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
    model_name: Optional[str] = None
    config_key: Optional[tuple] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def worker_start_failed(obs: Observation) -> bool:
    """Whether ``obs`` failed because its worker process died starting (:data:`WORKER_START_FAILED`)."""
    return obs.status == "failed" and bool((obs.measures or {}).get(WORKER_START_FAILED))


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

