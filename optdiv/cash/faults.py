"""Fault injection for tests and demos: a fraction of evaluations raise, hang past the limit, or predict NaN.

A :class:`FaultPlan` decides per evaluation, deterministically from ``(seed, evaluation index)``, so a
resumed run (or a re-queued evaluation) meets exactly the faults the uninterrupted run would. The faults
go through the evaluator's real machinery rather than being faked around it: the evaluator's build
function is wrapped in a :class:`FaultyBuild`, and each doomed evaluation sends its configuration with
an extra :data:`FAULT_KEY` entry that the wrapper strips before building. So

- ``raise``: building raises :class:`InjectedFault`, recorded as ``"failed"`` with its traceback;
- ``hang``: the model's ``fit`` sleeps far past any time limit, the evaluator ends the worker process and
  records ``"timeout"``;
- ``nan``: the real model is fitted but predicts NaN, which the evaluator records as ``"failed"``.

The marked configuration never reaches an observation: the injector hands back the configuration it was
given. Spec text (``optdiv run --inject-faults``): ``raise=0.3,hang=0.1,nan=0.05`` plus an optional
``seed=N`` (default: the run's seed); the fractions must sum to at most 1.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Union

import numpy as np

#: Configuration entry that carries a fault to the worker (stripped before the space's build sees it).
FAULT_KEY = "__optdiv_fault__"

#: The fault kinds, in the order their fractions are stacked on [0, 1).
KINDS = ("raise", "hang", "nan")

#: How long a ``hang`` sleeps: far past any sensible time limit, so the limit is what ends it.
HANG_SECONDS = 24 * 3600.0

#: Stream constant that keeps the fault draws apart from every other seeded generator of a run.
_FAULT_STREAM = 0xFA17


class InjectedFault(RuntimeError):
    """The exception a ``raise`` fault throws while the model is built."""


@dataclass(frozen=True)
class FaultPlan:
    """Fractions of evaluations that raise, hang or predict NaN; :meth:`fault_for` draws per evaluation."""

    raise_: float = 0.0
    hang: float = 0.0
    nan: float = 0.0
    seed: int = 0

    def __post_init__(self):
        for name, value in zip(KINDS, self.fractions):
            if not (0.0 <= value <= 1.0):
                raise ValueError(f"fault fraction {name}={value} must lie in [0, 1]")
        if sum(self.fractions) > 1.0 + 1e-12:
            raise ValueError(f"fault fractions sum to {sum(self.fractions):g}; they must sum to at most 1")
        if int(self.seed) < 0:
            raise ValueError("the fault seed must be a non-negative integer")

    @property
    def fractions(self):
        return (self.raise_, self.hang, self.nan)

    def fault_for(self, index: int) -> Optional[str]:
        """``"raise"``, ``"hang"``, ``"nan"`` or None for evaluation ``index``: one uniform draw seeded by
        (seed, index), compared with the stacked fractions."""
        draw = np.random.default_rng([int(self.seed), int(index), _FAULT_STREAM]).random()
        edge = 0.0
        for kind, fraction in zip(KINDS, self.fractions):
            edge += fraction
            if draw < edge:
                return kind
        return None

    def text(self) -> str:
        """The spec text this plan parses from (stored in a run's settings, so a resume must match it)."""
        parts = [f"{kind}={value:g}" for kind, value in zip(KINDS, self.fractions) if value > 0]
        return ",".join(parts + [f"seed={int(self.seed)}"])


def parse_faults(spec: Union[None, str, FaultPlan, Dict], seed: int = 0) -> Optional[FaultPlan]:
    """A :class:`FaultPlan` from ``"raise=0.3,hang=0.1,nan=0.05[,seed=N]"``, a dict of the same, or a plan;
    None (or an empty text) means no faults. ``seed`` is used when the spec names none."""
    if spec is None or isinstance(spec, FaultPlan):
        return spec
    if isinstance(spec, dict):
        items = dict(spec)
    else:
        items = {}
        for part in str(spec).split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"fault spec {spec!r}: {part!r} is not NAME=VALUE (e.g. raise=0.3,hang=0.1,nan=0.05)")
            items[name.strip().lower()] = value.strip()
        if not items:
            return None
    unknown = sorted(set(items) - set(KINDS) - {"seed"})
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; use {', '.join(KINDS)} and seed")
    try:
        fractions = {kind: float(items.get(kind, 0.0)) for kind in KINDS}
        plan_seed = int(items.get("seed", seed))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"fault spec {spec!r}: {exc}") from None
    return FaultPlan(fractions["raise"], fractions["hang"], fractions["nan"], plan_seed)


def mark(config: Dict, fault: Optional[str]) -> Dict:
    """The configuration to send to the evaluator: ``config`` plus the fault entry when there is one."""
    return dict(config) if fault is None else {**config, FAULT_KEY: fault}


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


class FaultInjectingEvaluator:
    """An :class:`~optdiv.cash.evaluator.Evaluator` that sends each evaluation its planned fault.

    ``evaluator`` must be a live Evaluator whose worker has not started yet: its build is wrapped here,
    before the worker process receives it. The observation keeps the configuration as given.
    """

    def __init__(self, evaluator, plan: FaultPlan):
        from optdiv.cash.evaluator import Evaluator

        if not isinstance(evaluator, Evaluator):
            raise ValueError("fault injection needs the live evaluator (not a replay or a custom evaluator)")
        if evaluator._holder[0] is not None:
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

    def close(self) -> None:
        self.evaluator.close()


def restore_config(obs, config: Dict):
    """The observation with the configuration as the search suggested it (no fault entry)."""
    from optdiv.cash.observation import algorithm_of

    obs.config = dict(config)
    obs.algorithm = algorithm_of(obs.config) or obs.algorithm
    return obs


def inject_faults(evaluator, plan: Optional[FaultPlan]):
    """``evaluator`` itself without a plan, else a :class:`FaultInjectingEvaluator` around it."""
    return evaluator if plan is None else FaultInjectingEvaluator(evaluator, plan)
