"""The runner interface: where the search's evaluations run, as the one search loop (optdiv.engine.loop) sees it.

The loop decides what to evaluate, when to stop, what to record and what to re-run; a runner only runs what
it is given and reports what ended. So a new way to run evaluations (another cluster) is one more runner,
and it gets the time budget, the issued log, exact resume, pending-aware suggestions and the re-queueing of
lost evaluations without repeating any of it.

- :class:`~optdiv.execution.sequential.SequentialRunner`: the engine's evaluator in this process, one evaluation at
  a time.
- :class:`~optdiv.execution.dask_runner.DaskRunner`: the same evaluations on Dask workers, as many at once as the
  cluster has threads (Dask is imported only when one is made).

:func:`optdiv.execution.factory.make_runner` chooses between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from optdiv.evaluation.observation import Observation


@dataclass
class Done:
    """A submitted evaluation that ended: its observation, or, when it was lost (its worker died, its result
    never came), the reason and no observation."""

    index: int
    config: dict
    observation: Optional[Observation]
    #: What the duration predictor learns: the evaluation's own seconds (a worker's start-up left out); for a
    #: lost evaluation, the seconds waited for it.
    seconds: float
    lost: Optional[str] = None


class Runner:
    """Runs evaluations for the search loop. ``submit`` starts one; ``wait`` returns those that ended.

    ``capacity``: evaluations that may run at once (the loop suggests while fewer are ``running``).
    ``canonical_configs``: the loop evaluates each configuration in its issued-log form (plain JSON types)
    rather than the strategy's own object, because this runner ships it to another process anyway.
    """

    canonical_configs = False

    @property
    def capacity(self) -> int:
        raise NotImplementedError

    @property
    def running(self) -> int:
        """Evaluations submitted and not yet returned by :meth:`wait`."""
        raise NotImplementedError

    def open(self) -> None:
        """Start what evaluations need (a cluster); the loop calls it once before the first submit."""

    def submit(self, index: int, config: dict, time_limit: Optional[float] = None) -> None:
        """Evaluate ``config`` as evaluation ``index``; ``time_limit`` caps it (the seconds the search has left)."""
        raise NotImplementedError

    def wait(self, give_up: Optional[float] = None) -> Optional[List[Done]]:
        """Block until at least one running evaluation ended and return every one that did; None when
        ``give_up`` (a ``time.perf_counter`` time) passed first."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop what still runs and end the workers; the loop calls it however it ends."""

    def describe(self) -> Optional[dict]:
        """What ``result.info["parallel"]`` reports of this runner (``workers``, ``startup_seconds``), or None."""
        return None
