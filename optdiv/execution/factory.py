"""Choosing the runner of a search: Dask when workers or a scheduler are asked for, else local worker processes
side by side when more than one evaluation may run at once, else the sequential runner."""

from __future__ import annotations

from typing import Optional

from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.execution.dask_runner import DaskRunner
from optdiv.execution.local_pool import LocalPoolRunner
from optdiv.execution.runner import Runner
from optdiv.execution.sequential import SequentialRunner


def make_runner(evaluator: EvaluatorInterface, workers: Optional[int] = None,
                scheduler: Optional[str] = None, parallel: int = 1) -> Runner:
    """A :class:`~optdiv.execution.dask_runner.DaskRunner` when ``workers`` or ``scheduler`` is given (a ValueError
    for an evaluator Dask workers cannot rebuild, :class:`~optdiv.execution.dask_runner.DaskUnavailable` without
    Dask); else a :class:`~optdiv.execution.local_pool.LocalPoolRunner` of ``parallel`` evaluations when that is
    more than one and the evaluator can be rebuilt (a replay's stays sequential); else a
    :class:`~optdiv.execution.sequential.SequentialRunner`."""
    if workers is not None or scheduler is not None:
        return DaskRunner(evaluator, workers=workers, scheduler=scheduler)
    if parallel > 1 and evaluator.worker_recipe() is not None:
        return LocalPoolRunner(evaluator, parallel)
    return SequentialRunner(evaluator)
