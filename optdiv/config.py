"""Every option of one search, in one typed record the command line, the estimators, the bench harness and a run
directory's stored settings all build from.

Before this record the same two dozen options were listed again in each of those places, and the lists drifted
(the estimators offered half of them). A new option is now one field here; :func:`optdiv.engine.search.search`
reads it, ``optdiv run`` and the estimators pass it through, and :meth:`RunConfig.settings` stores it when a
resume must see the same value. Each option is checked when a RunConfig is made, so a bad value fails where it is
given, before data are loaded or a worker starts; what an option means for the data or the space (a metric for the
task, a portfolio for the space) is checked by the search.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from optdiv.budget import DEFAULT_EVALUATIONS, DEFAULT_TIME_LIMIT, resolve_budget, resolve_time_limit
from optdiv.data import resolve_search_rows
from optdiv.core.agnostic_bayes import SAMPLERS
from optdiv.core.pool import POOL_BUILDERS
from optdiv.evaluation.constraints import parse_constraints, settings_form
from optdiv.evaluation.fault_plan import parse_faults
from optdiv.evaluation.memory import resolve_memory_limit
from optdiv.evaluation.threads import THREADED_MIN_ROWS, resolve_n_jobs
from optdiv.final.choice import AUTO, ENSEMBLE_BUILDERS
from optdiv.strategies.methods import get_method


#: What a cross-validated search's final members are: one model refitted on all rows, or the fold models averaged.
FOLD_MODELS = ("refit", "bagged")


@dataclass(frozen=True)
class RunConfig:
    """The options of one search (see :func:`optdiv.engine.search.search` for what each one does).

    Defaults are the papers' protocol, which the bench harness and :func:`~optdiv.engine.search.search` keep;
    ``optdiv run``, :func:`optdiv.run` and the estimators default to :meth:`product`.
    """

    method: str = "optdivbo"
    metric: Optional[str] = None
    space: Any = "autosklearn"  # a built-in space's name or a SearchSpace
    budget: Union[int, str, None] = DEFAULT_EVALUATIONS  # evaluations ("auto": unbounded under a time budget)
    time_budget: Optional[float] = None  # seconds for the whole call, final model included
    time_limit: Union[float, str] = DEFAULT_TIME_LIMIT  # seconds per evaluation (per fold under cv), or "auto"
    seed: int = 0
    ensemble: str = "caruana"
    ensemble_size: int = 25
    ensemble_loss: Optional[str] = None
    ensemble_bags: Union[int, str] = 0
    refit: bool = False
    sampler: str = "bootstrap"  # Agnostic Bayes's posterior sampler
    vote: bool = False
    pool: str = "caruana"  # DivBO / OptDivBO's temporary pool builder
    constraints: Sequence = ()
    cv: Union[int, str, None] = None
    fold_models: str = "refit"  # under cv: "refit" one model on all rows, or keep the fold models "bagged"
    algorithm_share: Optional[float] = None  # most share of the evaluations one algorithm may take (None: no cap)
    portfolio: Any = None
    cost_aware: bool = False
    search_rows: Union[int, str, None] = None  # most training rows an evaluation fits on ("auto": by the budget)
    n_jobs: Optional[int] = 1  # cores of a local search (-1: all of them), as threads of each evaluation's model
    parallel: Union[int, str] = 1  # evaluations at once on this machine ("auto": a core each under a time budget)
    refit_ahead: bool = True  # when no evaluation fits any more, refit the likely final members before stopping
    workers: Optional[int] = None
    scheduler: Optional[str] = None
    faults: Any = None
    memory_limit_mb: Union[int, str, None] = None  # MB of one evaluation's resident set; "auto": by data and machine
    optimizer_options: Optional[Dict] = None  # the strategy's own keyword options (research and tests)

    def __post_init__(self):
        """Check every option on its own (a ValueError names the option and what it takes)."""
        get_method(self.method)  # an unknown method name is refused with the known ones
        resolve_budget(self.budget, self.time_budget)  # a number of evaluations, None or "auto"
        if self.time_budget is not None and not self.time_budget > 0:
            raise ValueError(f"time_budget must be positive; got {self.time_budget}")
        resolve_time_limit(self.time_limit, self.time_budget)  # "auto" or a positive number of seconds
        if self.ensemble not in ENSEMBLE_BUILDERS:
            raise ValueError(f"unknown ensemble builder {self.ensemble!r}; choose one of "
                             f"{', '.join(ENSEMBLE_BUILDERS)}")
        if isinstance(self.ensemble_bags, str):
            if self.ensemble_bags != AUTO:
                raise ValueError(f"ensemble_bags must be a number or {AUTO!r}, not {self.ensemble_bags!r}")
        elif self.ensemble_bags < 0:
            raise ValueError("ensemble_bags must be 0 (one selection) or more")
        if self.pool not in POOL_BUILDERS:  # checked before any evaluation, not when the first pool is built
            raise ValueError(f"unknown pool builder {self.pool!r}; choose one of {', '.join(POOL_BUILDERS)}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown Agnostic Bayes sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        parse_constraints(self.constraints)  # each text is a valid constraint
        parse_faults(self.faults, self.seed)  # a valid fault plan
        folds = isinstance(self.cv, numbers.Integral) and not isinstance(self.cv, bool) and self.cv >= 2
        if not (self.cv is None or folds or (isinstance(self.cv, str) and self.cv == "auto")):
            raise ValueError(f"cv must be a number of folds (at least 2), None (holdout) or 'auto'; got {self.cv!r}")
        if self.fold_models not in FOLD_MODELS:
            raise ValueError(f"fold_models must be one of {', '.join(FOLD_MODELS)}; got {self.fold_models!r}")
        resolve_n_jobs(self.n_jobs)  # a whole number of cores, not 0
        if isinstance(self.parallel, str):
            if self.parallel != "auto":
                raise ValueError(f"parallel must be a number of evaluations or 'auto'; got {self.parallel!r}")
        elif isinstance(self.parallel, bool) or not isinstance(self.parallel, numbers.Integral) or self.parallel < 1:
            raise ValueError(f"parallel must be a number of evaluations (at least 1) or 'auto'; got {self.parallel!r}")
        elif self.parallel > 1 and (self.workers is not None or self.scheduler is not None):
            raise ValueError("parallel runs evaluations side by side on this machine; with workers or scheduler "
                             "Dask does, so set one or the other")
        if not isinstance(self.refit_ahead, bool):
            raise ValueError(f"refit_ahead must be True or False; got {self.refit_ahead!r}")
        resolve_search_rows(self.search_rows, self.time_budget)  # a number of rows, None or "auto"
        resolve_memory_limit(self.memory_limit_mb)  # MB, None or "auto"
        if self.algorithm_share is not None and not 0 < float(self.algorithm_share) <= 1:
            raise ValueError(f"algorithm_share must be in (0, 1] or None; got {self.algorithm_share!r}")

    @classmethod
    def product(cls, **changes) -> "RunConfig":
        """The product's defaults: what ``optdiv run``, :func:`optdiv.run` and the estimators search with unless
        told otherwise (the one place they are written; ``changes`` replace fields).

        Besides the papers' protocol (the dataclass defaults, which the benchmarks that replay the papers keep):
        the automatic time limit, cross-validation on small data, each strong algorithm at its library's defaults
        first, the members refitted on train+validation, and the measured final-ensemble selection
        (docs/method.md gives the measurements behind each)."""
        return cls.from_options(cls(**PRODUCT_DEFAULTS), **changes)

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_options(cls, base: Optional["RunConfig"] = None, **options) -> "RunConfig":
        """``base`` (default: the papers' defaults) with ``options`` replaced; a ValueError names an unknown one."""
        unknown = sorted(set(options) - set(cls.names()))
        if unknown:
            raise ValueError(f"unknown search option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the "
                             f"options are {', '.join(cls.names())}")
        return replace(base or cls(), **options)

    def replace(self, **changes) -> "RunConfig":
        return RunConfig.from_options(self, **changes)

    def options(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.names()}

    def settings(self) -> Dict[str, Any]:
        """The JSON form a run directory stores, so a resume can refuse other settings.

        Options that came later are stored only when set, so runs stored before them still resume; options that
        change nothing a resume must repeat (the budget may grow, the final ensemble's loss and bags, where the
        search runs, the strategy's research options) are not stored.
        """
        out: Dict[str, Any] = {name: getattr(self, name) for name in _ALWAYS_STORED}
        if not isinstance(out["space"], str):
            out["space"] = getattr(self.space, "name", str(self.space))
        constraints = parse_constraints(self.constraints)
        if constraints:
            out["constraints"] = settings_form(constraints)
        if self.cv is not None:
            out["cv"] = int(self.cv)
        faults = parse_faults(self.faults, self.seed)
        if faults is not None:
            out["faults"] = faults.text()
        if self.algorithm_share is not None:
            out["algorithm_share"] = float(self.algorithm_share)
        if self.memory_limit_mb is not None and self.memory_limit_mb != "auto":  # "auto" changes no evaluation kept
            out["memory_limit_mb"] = int(self.memory_limit_mb)
        if self.portfolio is not None:
            portfolio = self.portfolio
            out["portfolio"] = str(portfolio) if isinstance(portfolio, (str, Path)) else [dict(c) for c in portfolio]
        return out

    def evaluations(self) -> Optional[int]:
        """The most evaluations of the search (None: as many as the time budget allows)."""
        return resolve_budget(self.budget, self.time_budget)

    def parallel_evaluations(self) -> int:
        """Evaluations run side by side on this machine without Dask: ``parallel``, where ``"auto"`` is one per core
        of ``n_jobs`` under a time budget, whose results depend on timing anyway, and one at a time without one, so
        a seeded search of a number of evaluations repeats exactly. Dask's ``workers`` / ``scheduler``, when given,
        decide instead (1 here)."""
        if self.workers is not None or self.scheduler is not None:
            return 1
        if self.parallel == "auto":
            return 1 if self.time_budget is None else resolve_n_jobs(self.n_jobs)
        return int(self.parallel)

    def evaluations_at_once(self) -> int:
        """Evaluations that may run together on this machine (a local Dask cluster's workers, or
        :meth:`parallel_evaluations`): what the per-evaluation memory limit is shared out among."""
        return int(self.workers) if self.workers is not None else self.parallel_evaluations()

    def evaluation_threads(self, rows: Optional[int] = None) -> int:
        """Threads of one evaluation on ``rows`` training rows: the run's cores (``n_jobs``), shared out among the
        evaluations that run at once; one on an existing cluster, whose workers' own threads are its parallelism,
        and one below :data:`~optdiv.evaluation.threads.THREADED_MIN_ROWS`, where threads cost more than they save."""
        if self.scheduler is not None or (rows is not None and rows < THREADED_MIN_ROWS):
            return 1
        return max(1, resolve_n_jobs(self.n_jobs) // max(1, self.evaluations_at_once()))

    def refit_threads(self, rows: Optional[int] = None) -> int:
        """Threads of each final refit: every core of ``n_jobs``, since the refits run after the search (one below
        :data:`~optdiv.evaluation.threads.THREADED_MIN_ROWS` rows)."""
        if rows is not None and rows < THREADED_MIN_ROWS:
            return 1
        return resolve_n_jobs(self.n_jobs)


#: Stored in every run directory (the first options the engine had).
_ALWAYS_STORED = ("method", "metric", "space", "budget", "time_limit", "ensemble", "ensemble_size", "refit", "sampler",
                  "vote", "pool")

#: Where :meth:`RunConfig.product` departs from the papers' protocol.
PRODUCT_DEFAULTS: Dict[str, Any] = {"budget": "auto", "time_limit": "auto", "cv": "auto", "portfolio": "auto",
                                    "refit": True, "ensemble_loss": "auto", "ensemble_bags": "auto", "n_jobs": -1,
                                    "parallel": "auto", "fold_models": "bagged",
                                    "search_rows": "auto", "memory_limit_mb": "auto"}
