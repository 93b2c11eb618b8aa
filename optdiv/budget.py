"""Keeping a wall-time budget: one deadline for the whole call, and predicted durations to plan within it.

A time budget covers the whole call that was given it (``OptDivClassifier.fit``, ``optdiv run``), not only
the search loop: the search ends early enough that building and saving the final model still fits. So the
search never starts an evaluation whose predicted duration does not fit in the time left, and caps every
evaluation's own limit at the time left; an evaluation cut at the deadline says nothing about its
configuration and is discarded, not stored (see :data:`optdiv.evaluation.observation.DEADLINE`). The search loop
(optdiv.engine.loop) applies these rules once, for evaluations in process and on Dask workers alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

#: Seconds always kept for the end of a call: choosing the ensemble, loading the saved member pipelines and
#: writing the result. That took 0.1-0.3 s on 250-8k-row data in benchmarks/time_budget.py's runs; the rest is
#: headroom for a slower or busier machine, the last evaluation's worker being ended and the caller's own work.
FINISH_SECONDS = 2.0

#: Quantile of an algorithm's observed durations taken as its predicted duration: above the median, since
#: starting a run that is then cut at the deadline wastes the time it ran, but not the maximum, which one
#: slow configuration would make stop the search long before the deadline.
DURATION_QUANTILE = 0.75

#: Saved-pipeline bytes loaded per second when the final model is assembled (and written again by ``run``):
#: a conservative figure for joblib on a local disk.
LOAD_BYTES_PER_SECOND = 100e6


@dataclass(frozen=True)
class Deadline:
    """When a call with a time budget must end, on the ``time.perf_counter`` clock."""

    end: float

    @classmethod
    def after(cls, seconds: float, start: Optional[float] = None) -> "Deadline":
        """The deadline ``seconds`` after ``start`` (default: now)."""
        if not (seconds > 0):
            raise ValueError(f"time_budget must be positive; got {seconds}")
        return cls((time.perf_counter() if start is None else start) + float(seconds))

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.end - time.perf_counter()

    def earlier(self, seconds: float) -> "Deadline":
        """The deadline ``seconds`` before this one (what remains for the search after reserving the end)."""
        return Deadline(self.end - max(0.0, float(seconds)))


#: The most evaluations of a search given no time budget, unless told otherwise (the papers' protocol).
DEFAULT_EVALUATIONS = 50


def resolve_budget(budget, time_budget: Optional[float]) -> Optional[int]:
    """The most evaluations of a search: ``"auto"`` is no cap under a time budget (the clock ends the search, so a
    fast machine or small data is not left idle) and :data:`DEFAULT_EVALUATIONS` without one; a number is checked
    and kept; None is no cap."""
    if isinstance(budget, str):
        if budget != "auto":
            raise ValueError(f"budget must be a number of evaluations, None or 'auto'; got {budget!r}")
        return None if time_budget is not None else DEFAULT_EVALUATIONS
    if budget is None:
        return None
    if isinstance(budget, bool) or int(budget) != budget or budget < 1:
        raise ValueError(f"budget must be at least 1 evaluation; got {budget!r}")
    return int(budget)


#: One evaluation's limit (each fold's, under cross-validation) without a time budget.
DEFAULT_TIME_LIMIT = 120.0

#: Under a time budget, ``time_limit="auto"`` gives one evaluation this share of the budget (auto-sklearn's
#: default ``per_run_time_limit`` is the same tenth): with the fixed 120 s, one slow configuration could spend
#: two thirds of a 180 s budget, and a first 5-fold evaluation could outlast the whole budget.
AUTO_TIME_LIMIT_SHARE = 0.1

#: The least an automatic limit gives one evaluation, so a short budget still fits ordinary models.
AUTO_TIME_LIMIT_FLOOR = 10.0


def resolve_time_limit(time_limit, time_budget: Optional[float]) -> float:
    """One evaluation's limit in seconds: ``"auto"`` is min(120, max(10, budget / 10)) under a time budget,
    else 120; a number is checked and kept."""
    if isinstance(time_limit, str):
        if time_limit != "auto":
            raise ValueError(f"time_limit must be a number of seconds or 'auto'; got {time_limit!r}")
        if time_budget is None:
            return DEFAULT_TIME_LIMIT
        return min(DEFAULT_TIME_LIMIT, max(AUTO_TIME_LIMIT_FLOOR, AUTO_TIME_LIMIT_SHARE * float(time_budget)))
    seconds = float(time_limit)
    if not (seconds > 0):
        raise ValueError(f"time_limit must be positive; got {time_limit}")
    return seconds


def deadline_for(time_budget: Optional[float], start: Optional[float] = None) -> Optional[Deadline]:
    """The deadline of a call given ``time_budget`` seconds, or None without one."""
    return None if time_budget is None else Deadline.after(time_budget, start)


class DurationPredictor:
    """Predicts an evaluation's wall time from those already seen: per algorithm, else over all of them.

    Fed with the wall time of every evaluation this process ran (start-up of a worker included) and the
    ``fit_seconds`` of stored ones; a timed-out evaluation contributes the time it waited, a lower bound of its
    duration. Knows nothing before the first evaluation (predicts 0: the deadline cap then bounds it).
    """

    def __init__(self, history: Sequence = ()):
        self.seconds: Dict[str, List[float]] = {}
        for obs in history:
            self.observe(obs.algorithm, obs.fit_seconds)

    def observe(self, algorithm: str, seconds: float) -> None:
        if seconds is not None and np.isfinite(seconds) and seconds >= 0:
            self.seconds.setdefault(str(algorithm or ""), []).append(float(seconds))

    def predict(self, algorithm: Optional[str] = None) -> float:
        """Predicted seconds of an evaluation of ``algorithm`` (None: of any configuration)."""
        times = self.seconds.get(str(algorithm or "")) if algorithm is not None else None
        if not times:
            every = [s for seen in self.seconds.values() for s in seen]
            return float(np.median(every)) if every else 0.0
        return float(np.quantile(times, DURATION_QUANTILE))

    def fastest(self) -> float:
        """The smallest prediction over the algorithms seen: whether any evaluation could still fit."""
        if not self.seconds:
            return 0.0
        return min(self.predict(algorithm) for algorithm in self.seconds)
