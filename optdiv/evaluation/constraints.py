"""Black-box constraints on measured quantities of a run, such as prediction latency (ADMM for AutoML,
Liu et al. AAAI 2020, Algorithm 2: ``g_i(z, theta) <= eps_i``).

A constraint names a measure the evaluator records on every observation (:data:`MEASURES`), a comparison
and a finite bound: ``predict_seconds<=0.01``. The engine checks each successful evaluation against the
run's constraints; one that violates any of them becomes ``status == "infeasible"`` and loses its
predictions, so every optimiser (which learn from ``status == "ok"`` runs only) and every final-ensemble
builder treats it like a failure. Its ``val_loss`` and ``measures`` stay, so a constraint-aware
strategy can still read how far it was off (:meth:`Constraint.violation`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple, Union

#: Measures a constraint may name, and what each is.
MEASURES = {
    "fit_seconds": "wall time of building, fitting and predicting one configuration",
    "predict_seconds": "wall time of predicting the validation rows",
    "predict_us_per_row": "predict_seconds per validation row, in microseconds (the ADMM paper's latency unit)",
}

#: Comparisons, upper bounds first.
OPERATORS = ("<=", "<", ">=", ">")

_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*(\S+)\s*$")

FORM = (
    "write NAME<=X, NAME<X, NAME>=X or NAME>X with X a finite number (e.g. predict_seconds<=0.01), "
    f"NAME one of {', '.join(MEASURES)}"
)


class InfeasibleSearchError(RuntimeError):
    """A search ended without a single run that satisfies its constraints: there is no model to return."""


@dataclass(frozen=True)
class Constraint:
    """``measure op bound``; build one with :meth:`parse` or directly (both validate)."""

    measure: str
    op: str
    bound: float

    def __post_init__(self):
        if self.measure not in MEASURES:
            raise ValueError(f"unknown constraint measure {self.measure!r}; {FORM}")
        if self.op not in OPERATORS:
            raise ValueError(f"unknown constraint comparison {self.op!r}; {FORM}")
        try:
            bound = float(self.bound)
        except (TypeError, ValueError):
            raise ValueError(f"constraint bound {self.bound!r} is not a number; {FORM}") from None
        if not math.isfinite(bound):
            raise ValueError(f"constraint bound {self.bound!r} is not finite; {FORM}")
        object.__setattr__(self, "bound", bound)

    @classmethod
    def parse(cls, text: Union[str, "Constraint"]) -> "Constraint":
        """``"predict_seconds <= 1e-2"`` -> ``Constraint("predict_seconds", "<=", 0.01)``."""
        if isinstance(text, Constraint):
            return text
        if not isinstance(text, str):
            raise ValueError(f"a constraint must be text, got {type(text).__name__}; {FORM}")
        match = _PATTERN.match(text)
        if match is None:
            raise ValueError(f"malformed constraint {text!r}; {FORM}")
        name, op, raw = match.groups()
        if name not in MEASURES:
            raise ValueError(f"unknown measure {name!r} in constraint {text!r}; {FORM}")
        try:
            bound = float(raw)
        except ValueError:
            raise ValueError(f"constraint {text!r} has a bound that is not a number ({raw!r}); {FORM}") from None
        if not math.isfinite(bound):
            raise ValueError(f"constraint {text!r} has a bound that is not finite; {FORM}")
        return cls(name, op, bound)

    @property
    def upper(self) -> bool:
        """True for ``<=`` / ``<`` (the measure must stay below the bound)."""
        return self.op in ("<=", "<")

    def satisfied(self, value: float) -> bool:
        """Whether a measured ``value`` meets the constraint; NaN (nothing measured) never does."""
        value = float(value)
        if math.isnan(value):
            return False
        if self.op == "<=":
            return value <= self.bound
        if self.op == "<":
            return value < self.bound
        if self.op == ">=":
            return value >= self.bound
        return value > self.bound

    def violation(self, value: float) -> float:
        """How far ``value`` lies past the bound (0 when satisfied; ADMM's penalty magnitude).

        ``max(0, value - bound)`` for upper bounds, ``max(0, bound - value)`` for lower ones, ``inf`` for
        NaN. A strict bound hit exactly is unsatisfied with violation 0: use :meth:`satisfied` for
        feasibility.
        """
        value = float(value)
        if math.isnan(value):
            return math.inf
        gap = value - self.bound if self.upper else self.bound - value
        return max(0.0, gap)

    def __str__(self) -> str:
        return f"{self.measure}{self.op}{self.bound!r}"


def parse_constraints(items: Optional[Iterable[Union[str, Constraint]]]) -> List[Constraint]:
    """Constraints from texts or :class:`Constraint` objects (``None`` -> none); repeats dropped, order kept."""
    if items is None:
        return []
    if isinstance(items, (str, Constraint)):
        items = [items]
    out: List[Constraint] = []
    for item in items:
        constraint = Constraint.parse(item)
        if constraint not in out:
            out.append(constraint)
    return out


def settings_form(items: Optional[Iterable[Union[str, Constraint]]]) -> List[str]:
    """The canonical texts, sorted: what run settings record and compare on resume (order-independent)."""
    return sorted(str(c) for c in parse_constraints(items))


def measure_value(observation, measure: str) -> Optional[float]:
    """The observation's recorded ``measure``, or None; ``fit_seconds`` falls back to the observation's own
    field (stores and libraries written before measures were recorded)."""
    measures = getattr(observation, "measures", None) or {}
    value = measures.get(measure)
    if value is None and measure == "fit_seconds":
        value = getattr(observation, "fit_seconds", None)
    return None if value is None else float(value)


def check(observation, constraints: Sequence[Union[str, Constraint]]) -> Tuple[bool, Optional[str]]:
    """(feasible, reason): whether the observation's measures meet every constraint, and if not, which
    ones failed with the measured values. The status is not looked at (the engine checks ok runs only);
    a measure the observation lacks raises ValueError rather than guessing."""
    problems = []
    for constraint in parse_constraints(constraints):
        value = measure_value(observation, constraint.measure)
        if value is None:
            raise ValueError(
                f"observation {getattr(observation, 'index', '?')} has no {constraint.measure!r} measure to check "
                f"{constraint} against (it was recorded before this measure existed)"
            )
        if not constraint.satisfied(value):
            problems.append(f"{constraint.measure} = {value:.6g} violates {constraint}")
    return (not problems), ("; ".join(problems) or None)


def enforce(observation, constraints: Sequence[Constraint]):
    """Mark a successful observation that violates a constraint ``"infeasible"`` and drop its predictions
    (so it never enters a pool or an ensemble); keeps its losses and measures. Returns the observation."""
    if not constraints or observation.status != "ok":
        return observation
    feasible, reason = check(observation, constraints)
    if not feasible:
        observation.status = "infeasible"
        observation.error = "infeasible: " + reason
        observation.val_pred = None
        observation.test_pred = None
    return observation
