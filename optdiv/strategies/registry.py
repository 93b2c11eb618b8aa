"""Every suggestion strategy the engine can make, and what each one takes: one registry entry each.

A new strategy is one class with ``suggest(history, y_val) -> Suggestion`` (:class:`~optdiv.strategies.base.Strategy`)
and one :class:`StrategySpec` in :data:`STRATEGIES`. Everything a strategy needs for the whole search (the space, the
loss, the seed, the candidate source, the budget, the time left, the constraints) reaches it through
:class:`StrategyContext` when it is made, so nothing is set on it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from optdiv.final.choice import FINALS
from optdiv.strategies.admm import ADMM
from optdiv.strategies.base import Strategy
from optdiv.strategies.dacopt import DACOpt
from optdiv.strategies.ensemble_optimization import EnsembleOptimization
from optdiv.strategies.evolution import RegularisedEvolutionEnsemble
from optdiv.strategies.methods import METHODS, SELECTOR_OPTIONS, MethodSpec
from optdiv.strategies.model_based import Optimizer
from optdiv.strategies.per_algorithm import PerAlgorithmBO
from optdiv.strategies.rising_bandit import RisingBandit


@dataclass(frozen=True)
class StrategyContext:
    """What every strategy factory is given: the space, the loss, the seed, the candidate source (a replay
    library's, or None for the space's own), the budget, the method (its ``options`` and ``ensemble_size``), the
    run's strategy options, the diversity selector's options, the seconds the search may still use (a callable,
    None without a time budget) and the run's black-box constraints."""

    space: Any
    metric: str
    seed: int
    candidates: Any
    budget: Optional[int]
    method: MethodSpec
    options: Dict
    selector_options: Dict
    time_left: Optional[Callable[[], float]] = None
    constraints: List = field(default_factory=list)


@dataclass(frozen=True)
class StrategySpec:
    """How to make one suggestion strategy and what the engine may hand it.

    ``model_based``: the strategy is one of the :class:`~optdiv.strategies.model_based.Optimizer` family, which takes
    a warm-start portfolio (``initial``), an algorithm share cap (``max_share``) and cost-aware weighting
    (``cost_aware``, with the context's ``time_left``).
    """

    name: str
    make: Callable[[StrategyContext], Strategy]
    model_based: bool = False


def _model_based(name: str) -> StrategySpec:
    def make(ctx: StrategyContext):
        return Optimizer(ctx.space, name, ctx.metric, seed=ctx.seed, candidates=ctx.candidates,
                         selector_options=ctx.selector_options, time_left=ctx.time_left, **ctx.options)

    return StrategySpec(name, make, model_based=True)


def _dacopt(ctx: StrategyContext):
    return DACOpt(ctx.space, ctx.metric, seed=ctx.seed, candidates=ctx.candidates, budget=ctx.budget,
                  inner=ctx.method.options["inner"], contest=ctx.method.options["contest"],
                  selector_options=ctx.selector_options or None, **ctx.options)


def _admm(ctx: StrategyContext):
    # ADMM's z-min weighs the constraints themselves (Algorithm 2), not only which runs were infeasible
    return ADMM(ctx.space, ctx.metric, seed=ctx.seed, candidates=ctx.candidates, constraints=ctx.constraints,
                **ctx.options)


STRATEGIES: Dict[str, StrategySpec] = {
    spec.name: spec
    for spec in (
        _model_based("rs"),
        _model_based("bo"),
        _model_based("tpe"),
        _model_based("divbo"),
        _model_based("optdivbo"),
        StrategySpec("dac", _dacopt),
        StrategySpec("admm", _admm),
        StrategySpec("rb", lambda ctx: RisingBandit(ctx.space, ctx.metric, seed=ctx.seed, candidates=ctx.candidates,
                                                    budget=ctx.budget, **ctx.options)),
        StrategySpec("kbo", lambda ctx: PerAlgorithmBO(ctx.space, ctx.metric, seed=ctx.seed,
                                                       candidates=ctx.candidates, **ctx.options)),
        StrategySpec("eo", lambda ctx: EnsembleOptimization(
            ctx.space, ctx.metric, seed=ctx.seed, candidates=ctx.candidates,
            ensemble_size=ctx.method.options.get("selector_size", 12), **ctx.options)),
        StrategySpec("nes", lambda ctx: RegularisedEvolutionEnsemble(
            ctx.space, ctx.metric, seed=ctx.seed, candidates=ctx.candidates,
            ensemble_size=ctx.method.ensemble_size or 10)),
    )
}
#: The strategies that take a warm-start portfolio, an algorithm share cap and cost-aware weighting.
MODEL_BASED = tuple(name for name, spec in STRATEGIES.items() if spec.model_based)


def _check_registry() -> None:
    """Every method names a known strategy and final model (a typo fails at import, not mid-run)."""
    for spec in METHODS.values():
        if spec.strategy not in STRATEGIES:
            raise ValueError(f"method {spec.name!r} names an unknown strategy {spec.strategy!r}")
        if spec.final not in FINALS:
            raise ValueError(f"method {spec.name!r} names an unknown final model {spec.final!r}")


_check_registry()


def make_strategy(spec: MethodSpec, space, metric: str, seed: int = 0, candidates=None,
                  budget: Optional[int] = None, optimizer_options: Optional[Dict] = None,
                  time_left: Optional[Callable[[], float]] = None, constraints: Optional[List] = None):
    """The object whose ``suggest(history, y_val)`` drives the search for ``spec``.

    ``optimizer_options`` are the strategy's keyword options; its ``selector_options`` entry (DivBO / OptDivBO's
    selector, also inside DACOpt) is merged with the method's own selector options. ``time_left`` (the seconds the
    search may still use, under a time budget) and ``constraints`` (parsed Constraint objects) reach the strategies
    that use them.
    """
    options = dict(optimizer_options or {})
    selector_options = dict(options.pop("selector_options", {}) or {})
    selector_options.update({k: v for k, v in spec.options.items() if k in SELECTOR_OPTIONS})
    strategy = STRATEGIES[spec.strategy]
    return strategy.make(StrategyContext(space, metric, int(seed), candidates, budget, spec, options,
                                         selector_options, time_left, list(constraints or [])))
