"""A fault plan: which evaluations of a run fail, and how (tests and demos of fault tolerance).

A :class:`FaultPlan` decides per evaluation, deterministically from ``(seed, evaluation index)``, so a resumed run
(or a re-queued evaluation) meets exactly the faults the uninterrupted run would. Spec text (``optdiv run
--inject-faults``): ``raise=0.3,hang=0.1,nan=0.05`` plus an optional ``seed=N`` (default: the run's seed); the
fractions must sum to at most 1. How the faults reach the real evaluator is :mod:`optdiv.evaluation.faults`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Union

import numpy as np

#: Configuration entry that carries a fault to the worker (stripped before the space's build sees it).
FAULT_KEY = "__optdiv_fault__"

#: The fault kinds, in the order their fractions are stacked on [0, 1).
KINDS = ("raise", "hang", "nan")

#: Stream constant that keeps the fault draws apart from every other seeded generator of a run.
FAULT_STREAM = 0xFA17


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
        draw = np.random.default_rng([int(self.seed), int(index), FAULT_STREAM]).random()
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
