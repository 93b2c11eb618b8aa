"""What the runners ask of an evaluator, stated once so that no runner has to probe one.

A runner (optdiv.execution) runs an evaluator's ``evaluate(config, index)`` and needs three more facts about it:
whether ``evaluate`` can be capped at the run's deadline (``takes_time_limit``), how long its last call spent
starting a worker process (``last_start_seconds``, no part of the algorithm's duration), and whether Dask workers
can rebuild it (:meth:`EvaluatorInterface.worker_recipe`). Fault injection asks one more: whether the evaluator can
send each evaluation a planned fault (:meth:`EvaluatorInterface.with_faults`). Every evaluator the engine is given
(the live :class:`~optdiv.evaluation.evaluator.Evaluator`, a replay library's, a test's) derives from
:class:`EvaluatorInterface`; the defaults describe one that runs in this process only, uncapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from optdiv.evaluation.observation import Observation


@dataclass(frozen=True)
class WorkerRecipe:
    """What a Dask worker needs to evaluate as an evaluator in this process would: the evaluator's settings (its
    constructor arguments but the splits), the splits (sent once to every worker), and the fault plan that marks each
    evaluation (a :class:`~optdiv.evaluation.fault_plan.FaultPlan`, or None)."""

    settings: Dict
    splits: Any
    faults: Any = None


class EvaluatorInterface:
    """An evaluator as the runners and the engine see it (see the module docstring)."""

    #: Whether :meth:`evaluate` takes ``time_limit``: the seconds the run has left, to cap the evaluation with.
    takes_time_limit = False

    #: Seconds the last :meth:`evaluate` spent starting a worker process.
    last_start_seconds = 0.0

    #: Digest of the rows the evaluator's saved pipelines are fitted on (optdiv.evaluation.pipelines); None when it
    #: saves none.
    rows_digest: Optional[str] = None

    def evaluate(self, config: dict, index: int, time_limit: Optional[float] = None) -> Observation:
        """The observation of ``config`` as evaluation ``index``; never raises for a failing model."""
        raise NotImplementedError

    def close(self) -> None:
        """End whatever the evaluator started (a worker process); it stays usable."""

    def worker_recipe(self) -> Optional[WorkerRecipe]:
        """How Dask workers rebuild this evaluator, or None when it runs in this process only (a replay's stored
        outcomes, a custom evaluator)."""
        return None

    def with_faults(self, plan) -> "EvaluatorInterface":
        """This evaluator sending each evaluation the fault ``plan`` draws for it (tests and demos)."""
        raise ValueError("fault injection needs the live evaluator (not a replay or a custom evaluator)")
