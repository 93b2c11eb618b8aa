"""Where the search's evaluations run: the one search loop (optdiv.cash.loop) talks to a runner only.

The loop decides what to evaluate, when to stop, what to record and what to re-run; a runner only runs what
it is given and reports what ended. So a new way to run evaluations (another cluster) is one more runner,
and it gets the time budget, the issued log, exact resume, pending-aware suggestions and the re-queueing of
lost evaluations without repeating any of it.

- :class:`SequentialRunner`: the engine's evaluator in this process, one evaluation at a time.
- :class:`~optdiv.cash.parallel.DaskRunner`: the same evaluations on Dask workers, as many at once as the
  cluster has threads (Dask is imported only when one is made).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import List, Optional

from optdiv.cash.observation import Observation


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


class SequentialRunner(Runner):
    """The engine's evaluator, in this process's order: ``submit`` queues one evaluation and ``wait`` runs it.

    Running it in ``wait`` rather than ``submit`` lets the loop do its bookkeeping (the issued log, the time
    check) before the evaluation, in the order it does for any runner. Nothing is ever lost: an evaluator
    never raises for a failing model, and one that raises for anything else ends the search.
    """

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.time_limited = accepts_time_limit(evaluator)
        self._queued: Optional[tuple] = None

    @property
    def capacity(self) -> int:
        return 1

    @property
    def running(self) -> int:
        return 0 if self._queued is None else 1

    def submit(self, index: int, config: dict, time_limit: Optional[float] = None) -> None:
        if self._queued is not None:
            raise RuntimeError("the sequential runner runs one evaluation at a time")
        self._queued = (index, config, time_limit)

    def wait(self, give_up: Optional[float] = None) -> Optional[List[Done]]:
        if self._queued is None:
            return []
        index, config, time_limit = self._queued
        self._queued = None
        options = {} if time_limit is None or not self.time_limited else {"time_limit": time_limit}
        began = time.perf_counter()
        obs = self.evaluator.evaluate(config, index=index, **options)
        # a worker's start-up (the first evaluation, or after a timeout) is no part of the algorithm's duration
        start_up = getattr(self.evaluator, "last_start_seconds", 0.0)
        return [Done(index, config, obs, time.perf_counter() - began - start_up)]

    def close(self) -> None:
        self._queued = None
        self.evaluator.close()


def accepts_time_limit(evaluator) -> bool:
    """Whether ``evaluator.evaluate`` takes a per-call ``time_limit`` (the live one does; a replay needs none)."""
    try:
        return "time_limit" in inspect.signature(evaluator.evaluate).parameters
    except (TypeError, ValueError):
        return False


def make_runner(evaluator, workers: Optional[int] = None, scheduler: Optional[str] = None) -> Runner:
    """A :class:`~optdiv.cash.parallel.DaskRunner` when ``workers`` or ``scheduler`` is given (a ValueError for an
    evaluator that is not the live one, :class:`~optdiv.cash.parallel.DaskUnavailable` without Dask), else a
    :class:`SequentialRunner`."""
    if workers is None and scheduler is None:
        return SequentialRunner(evaluator)
    from optdiv.cash.parallel import DaskRunner

    return DaskRunner(evaluator, workers=workers, scheduler=scheduler)
