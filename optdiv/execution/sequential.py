"""The sequential runner: the engine's evaluator in this process, one evaluation at a time."""

from __future__ import annotations

import time
from typing import List, Optional

from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.execution.runner import Done, Runner


class SequentialRunner(Runner):
    """The engine's evaluator, in this process's order: ``submit`` queues one evaluation and ``wait`` runs it.

    Running it in ``wait`` rather than ``submit`` lets the loop do its bookkeeping (the issued log, the time
    check) before the evaluation, in the order it does for any runner. Nothing is ever lost: an evaluator
    never raises for a failing model, and one that raises for anything else ends the search.
    """

    def __init__(self, evaluator: EvaluatorInterface):
        self.evaluator = evaluator
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
        options = {} if time_limit is None or not self.evaluator.takes_time_limit else {"time_limit": time_limit}
        began = time.perf_counter()
        obs = self.evaluator.evaluate(config, index=index, **options)
        # a worker's start-up (the first evaluation, or after a timeout) is no part of the algorithm's duration
        start_up = self.evaluator.last_start_seconds
        return [Done(index, config, obs, time.perf_counter() - began - start_up)]

    def close(self) -> None:
        self._queued = None
        self.evaluator.close()
