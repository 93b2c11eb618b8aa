"""Choosing the runner of a search: Dask when workers or a scheduler are asked for, else the sequential runner."""

from __future__ import annotations

from typing import Optional

from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.execution.dask_runner import DaskRunner
from optdiv.execution.runner import Runner
from optdiv.execution.sequential import SequentialRunner


def make_runner(evaluator: EvaluatorInterface, workers: Optional[int] = None,
                scheduler: Optional[str] = None) -> Runner:
    """A :class:`~optdiv.execution.dask_runner.DaskRunner` when ``workers`` or ``scheduler`` is given (a ValueError
    for an evaluator Dask workers cannot rebuild, :class:`~optdiv.execution.dask_runner.DaskUnavailable` without
    Dask), else a :class:`~optdiv.execution.sequential.SequentialRunner`."""
    if workers is None and scheduler is None:
        return SequentialRunner(evaluator)
    return DaskRunner(evaluator, workers=workers, scheduler=scheduler)
