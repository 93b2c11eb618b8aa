"""Fault injection for tests and demos: a fraction of evaluations raise, hang past the limit, or predict NaN.

Which evaluations fail, and how, is a :class:`~optdiv.evaluation.fault_plan.FaultPlan` (deterministic per
evaluation index). The faults go through the evaluator's real machinery rather than being faked around it: the
evaluator's build function is wrapped in a :class:`FaultyBuild`, and each doomed evaluation sends its configuration
with an extra :data:`~optdiv.evaluation.fault_plan.FAULT_KEY` entry that the wrapper strips before building. So

- ``raise``: building raises :class:`InjectedFault`, recorded as ``"failed"`` with its traceback;
- ``hang``: the model's ``fit`` sleeps far past any time limit, the evaluator ends the worker process and
  records ``"timeout"``;
- ``nan``: the real model is fitted but predicts NaN, which the evaluator records as ``"failed"``.

The marked configuration never reaches an observation: the injector hands back the configuration it was
given.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Callable, Dict, Optional

import numpy as np

from optdiv.evaluation.fault_plan import FAULT_KEY, FaultPlan, mark
from optdiv.evaluation.interface import EvaluatorInterface, WorkerRecipe
from optdiv.evaluation.observation import algorithm_of


class InjectedFault(RuntimeError):
    """The exception a ``raise`` fault throws while the model is built."""


#: How long a ``hang`` sleeps: far past any sensible time limit, so the limit is what ends it.
HANG_SECONDS = 24 * 3600.0


class FaultyBuild:
    """Wraps a space's build function; a configuration marked with :data:`FAULT_KEY` gets its fault.

    A top-level class holding the original build, so it pickles by reference into the worker process
    exactly as the original does.
    """

    def __init__(self, build: Callable):
        self.build = build

    def __call__(self, config, seed: int = 0):
        config = dict(config)
        fault = config.pop(FAULT_KEY, None)
        if fault == "raise":
            raise InjectedFault("injected fault: raise")
        if fault == "hang":
            return HangingModel()
        estimator = self.build(config, seed)
        if fault == "nan":
            return NaNModel(estimator)
        if fault is not None:
            raise ValueError(f"unknown injected fault {fault!r}")
        return estimator


def _base_estimator():
    from sklearn.base import BaseEstimator

    return BaseEstimator


class HangingModel(_base_estimator()):
    """A model whose ``fit`` sleeps for :data:`HANG_SECONDS`; it gives up early when its parent process is
    gone, so an orphaned worker (its driver killed) does not linger for a day."""

    def fit(self, X, y=None):
        parent = os.getppid()
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if os.getppid() != parent:
                raise InjectedFault("injected hang abandoned: the parent process is gone")
        return self


class NaNModel(_base_estimator()):
    """Fits the real model, then predicts NaN (probabilities of the right shape for a classifier)."""

    def __init__(self, estimator=None):
        self.estimator = estimator

    def fit(self, X, y=None):
        self.estimator.fit(X, y)
        final = self.estimator
        while hasattr(final, "steps"):
            final = final.steps[-1][1]
        if hasattr(final, "classes_"):
            self.classes_ = final.classes_
        return self

    def predict(self, X):
        return np.full(len(X), np.nan)

    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), np.nan)


class FaultInjectingEvaluator(EvaluatorInterface):
    """An :class:`~optdiv.evaluation.evaluator.Evaluator` that sends each evaluation its planned fault (made by
    :meth:`Evaluator.with_faults <optdiv.evaluation.evaluator.Evaluator.with_faults>`).

    ``evaluator``'s worker must not have started yet: its build is wrapped here, before the worker process receives
    it. The observation keeps the configuration as given. Dask workers rebuild the evaluator from its recipe and mark
    each evaluation with the same plan.
    """

    takes_time_limit = True

    def __init__(self, evaluator, plan: FaultPlan):
        if evaluator.started:
            raise ValueError("fault injection must wrap the evaluator before its worker starts")
        if not isinstance(evaluator.build, FaultyBuild):
            evaluator.build = FaultyBuild(evaluator.build)
        self.evaluator, self.plan = evaluator, plan

    def evaluate(self, config: Dict, index: int, time_limit: Optional[float] = None):
        marked = mark(config, self.plan.fault_for(index))
        return restore_config(self.evaluator.evaluate(marked, index, time_limit=time_limit), config)

    @property
    def last_start_seconds(self) -> float:
        return self.evaluator.last_start_seconds

    @property
    def rows_digest(self) -> Optional[str]:
        return self.evaluator.rows_digest

    def worker_recipe(self) -> WorkerRecipe:
        return replace(self.evaluator.worker_recipe(), faults=self.plan)

    def close(self) -> None:
        self.evaluator.close()


def restore_config(obs, config: Dict):
    """The observation with the configuration as the search suggested it (no fault entry)."""
    obs.config = dict(config)
    obs.algorithm = algorithm_of(obs.config) or obs.algorithm
    return obs


def inject_faults(evaluator: EvaluatorInterface, plan: Optional[FaultPlan]) -> EvaluatorInterface:
    """``evaluator`` itself without a plan, else the evaluator sending each evaluation its planned fault (a
    ValueError for an evaluator that cannot: a replay or a custom one)."""
    return evaluator if plan is None else evaluator.with_faults(plan)
