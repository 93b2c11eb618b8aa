"""Every method `optdiv run` and `optdiv bench` know, by the papers' names: one registry entry each.

A method is a suggestion **strategy** (an entry of :data:`optdiv.strategies.registry.STRATEGIES`: how to make it
and what the engine may hand it) plus how its **final** model is made (an entry of
:data:`optdiv.final.choice.FINALS`):
- ``single``: the best run by validation loss (RS, BO, RB, DivBO-);
- ``ensemble``: post-hoc ensemble selection over all runs (the ``-ES`` designs, DivBO, OptDivBO), or
  Agnostic Bayes with ``--ensemble agnostic_bayes``;
- ``own``: the strategy's own ensemble (EO);
- ``bagging`` / ``stacking``: the 5 best runs averaged uniformly / combined by a meta-model (DivBO Table 9).
Names ending in ``-`` (``divbo-``, ``optdivbo-``, ``rs-``, ``bo-``) mean the single best run.

A new method is one :class:`MethodSpec` in :data:`METHODS`; a new strategy is one class and one entry of
:data:`optdiv.strategies.registry.STRATEGIES` (which checks, when imported, that every method names a known strategy
and final model). This module imports no strategy, so the names can be checked and listed cheaply (``RunConfig``,
``optdiv methods``). Strategies keep no state a search depends on beyond the history they
are given (a resumed run suggests what an uninterrupted one would), so there is no ``observe`` step: the history is
the observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

#: Method options that change the search itself (the rest, e.g. ``builder``, change only the final model).
SEARCH_OPTIONS = ("fixed_weight", "beta", "pool_builder", "diversity_target", "paper_clip", "contest", "inner")
#: Of those, the ones the diversity selector takes.
SELECTOR_OPTIONS = ("fixed_weight", "beta", "pool_builder", "diversity_target", "paper_clip")


@dataclass(frozen=True)
class MethodSpec:
    """One named method: its strategy (a key of ``STRATEGIES``), its final model (a key of ``FINALS``), and
    the options that make it a variant (selector options such as ``paper_clip``, DACOpt's ``contest`` and
    ``inner``, the final ``builder``)."""

    name: str
    strategy: str
    final: str
    description: str
    ensemble_size: Optional[int] = None  # None: the run's --ensemble-size (25 by default)
    options: Dict = field(default_factory=dict)


def _spec(name, strategy, final, description, ensemble_size=None, **options):
    return MethodSpec(name, strategy, final, description, ensemble_size, options)


METHODS: Dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        _spec("rs", "rs", "single", "random search, best single model"),
        _spec("bo", "bo", "single", "Bayesian optimisation (PRF + EI), best single model"),
        _spec("tpe", "tpe", "single", "tree-structured Parzen estimator (Hyperopt-style), best single model"),
        _spec("tpe-es", "tpe", "ensemble", "TPE + post-hoc ensemble selection"),
        _spec("rb", "rb", "single", "Rising Bandit over algorithms (alpha 3, 5 trials per arm), best single model"),
        _spec("eo", "eo", "own", "Ensemble Optimization, ensemble of 12 renewed slot by slot", selector_size=12),
        _spec("nes", "nes", "ensemble", "regularised-evolution ensemble search, population 30", ensemble_size=10),
        _spec("rs-es", "rs", "ensemble", "random search + post-hoc ensemble selection"),
        _spec("bo-es", "bo", "ensemble", "BO + post-hoc ensemble selection (auto-sklearn's default)"),
        _spec("bo-es100", "bo", "ensemble", "BO + post-hoc ensemble selection of size 100 (DivBO Table 10)",
              ensemble_size=100),
        _spec("rb-es", "rb", "ensemble", "Rising Bandit + post-hoc ensemble selection (VolcanoML's default)"),
        _spec("kbo-es", "kbo", "ensemble", "one BO per algorithm, equal budget each, + ensemble selection"),
        _spec("divbo-", "divbo", "single", "DivBO's search, best single model"),
        _spec("divbo", "divbo", "ensemble", "DivBO: diversity-aware BO + ensemble selection"),
        _spec("divbo-w0.1", "divbo", "ensemble", "DivBO with a fixed diversity weight 0.1 (DivBO Table 8)",
              fixed_weight=0.1),
        _spec("divbo-b0.01", "divbo", "ensemble", "DivBO with beta 0.01 (OptDivBO's regression setting)",
              beta=0.01),
        _spec("divbo-bagging", "divbo", "bagging", "DivBO's search, uniform average of the 5 best (Table 9)"),
        _spec("divbo-stacking", "divbo", "stacking", "DivBO's search, meta-model over the 5 best (Table 9)"),
        _spec("optdivbo-", "optdivbo", "single", "OptDivBO's search, best single model"),
        _spec("optdivbo", "optdivbo", "ensemble", "OptDivBO: optimal-diversity BO + ensemble selection"),
        _spec("optdivbo-rank", "optdivbo", "ensemble", "OptDivBO whose diversity surrogate fits pair ranks, not raw "
              "diversity (robust to wild regression predictions)", diversity_target="rank"),
        _spec("optdivbo-paper", "optdivbo", "ensemble", "OptDivBO with the papers' 0/1-loss diversity (cross-entropy "
              "clipped at 1e-15, which favours confidently wrong models); regression as optdivbo", paper_clip=True),
        _spec("divbo-rank", "divbo", "ensemble", "DivBO whose diversity surrogate fits pair ranks",
              diversity_target="rank"),
        _spec("dac-hb", "dac", "single", "DACOpt: BO per algorithm group, highest-performance contest (eta 3)",
              contest="highest", inner="bo"),
        _spec("dac-hb-es", "dac", "ensemble", "DAC-HB + post-hoc ensemble selection", contest="highest", inner="bo"),
        _spec("dac-hh", "dac", "single", "DACOpt, highest-performance contest, TPE inside (the paper's Hyperopt)",
              contest="highest", inner="tpe"),
        _spec("dac-hh-es", "dac", "ensemble", "DAC-HH + post-hoc ensemble selection", contest="highest", inner="tpe"),
        _spec("dac-sh", "dac", "single", "DACOpt, statistical contest, TPE inside", contest="statistical",
              inner="tpe"),
        _spec("dac-sh-es", "dac", "ensemble", "DAC-SH + post-hoc ensemble selection", contest="statistical",
              inner="tpe"),
        _spec("dac-sb", "dac", "single", "DACOpt with the statistical contest (Friedman/Wilcoxon + Holm)",
              contest="statistical", inner="bo"),
        _spec("dac-sb-es", "dac", "ensemble", "DAC-SB + post-hoc ensemble selection", contest="statistical",
              inner="bo"),
        _spec("optdivbo-dac", "dac", "ensemble", "DACOpt's contest over sub-spaces, OptDivBO inside each, one global "
              "pool and diversity surrogate", contest="highest", inner="optdivbo"),
        _spec("divbo-dac", "dac", "ensemble", "as optdivbo-dac with DivBO inside", contest="highest", inner="divbo"),
        _spec("admm", "admm", "single", "ADMM (BO for theta-min, Thompson-sampling CMAB for z-min, rho 1), best "
              "single model"),
        _spec("admm-es", "admm", "ensemble", "ADMM + post-hoc ensemble selection"),
        _spec("bo-ab", "bo", "ensemble", "BO + Agnostic Bayes ensemble (bootstrap posterior of the best model)",
              builder="agnostic_bayes"),
        _spec("bo-smin", "bo", "ensemble", "BO + SMin (Gibbs weights, beta tuned on validation)", builder="smin"),
        _spec("optdivbo-ab", "optdivbo", "ensemble", "OptDivBO with an Agnostic Bayes pool and final ensemble",
              builder="agnostic_bayes", pool_builder="agnostic_bayes"),
    )
}
ALIASES = {"rs-": "rs", "bo-": "bo"}


def get_method(name: str) -> MethodSpec:
    key = ALIASES.get(name, name)
    if key not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[key]
