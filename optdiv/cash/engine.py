"""The standalone CASH engine: `search` (prepare, the loop of optdiv.cash.loop, finalize), `run`, result.json."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.cash.budget import (
    FINISH_SECONDS,
    LOAD_BYTES_PER_SECOND,
    Deadline,
    DurationPredictor,
    deadline_for,
    resolve_time_limit,
)
from optdiv.cash.constraints import Constraint, InfeasibleSearchError, parse_constraints, settings_form
from optdiv.cash.data import Splits, cross_validation_view, resolve_cv, split
from optdiv.cash.evaluator import Evaluator
from optdiv.cash.fitting import build_pipeline
from optdiv.cash.faults import inject_faults, parse_faults
from optdiv.cash.final_ensemble import (
    ENSEMBLE_BUILDERS,
    EnsembleModel,
    FinalSettings,
    Stacker,
    finalize,
    resolve_selection,
)
from optdiv.cash.loop import LoopResult, search_loop
from optdiv.cash.methods import MODEL_BASED, STRATEGIES, MethodSpec, get_method, make_strategy
from optdiv.cash.pipelines import SavedPipelines, splits_digest
from optdiv.cash.portfolio import is_auto_portfolio, resolve_portfolio
from optdiv.cash.run_config import RunConfig
from optdiv.cash.runners import Runner, make_runner
from optdiv.cash.spaces import SearchSpace, get_space
from optdiv.cash.store import MODELS_DIR, RunStore, RunStoreError
from optdiv.core.metric_vocabulary import resolve
from optdiv.core.metrics import mean_loss


def resolve_metric(metric: Optional[str], task: str) -> str:
    """The loss a metric name stands for (the metric vocabulary's :func:`~optdiv.core.metric_vocabulary.resolve`);
    defaults are error (classification) and mse (regression)."""
    return resolve(metric, task).name


@dataclass
class SearchResult:
    history: List
    member_indices: List[int]
    weights: np.ndarray
    val_loss: float
    test_loss: Optional[float]
    suggest_seconds: List[float]
    total_seconds: float
    space: Optional[SearchSpace] = None
    model: Optional[EnsembleModel] = None
    info: Dict = field(default_factory=dict)
    stacker: Optional[Stacker] = None
    vote: bool = False
    pipelines: Optional[SavedPipelines] = None  # the evaluator's saved fits, which fit_model loads
    deadline: Optional[Deadline] = None  # when the whole call must end (fit_model keeps to it too)
    refitter: Optional["Refitter"] = None  # the worker started during the search for fit_model's refits


#: Members whose refit time is reserved when the likely final members cannot be chosen (no validation targets):
#: about as many distinct members as ensemble selection keeps.
REFIT_MEMBERS = 10
#: A member's refit in this process is predicted from its evaluation's fit time scaled by the rows, times this:
#: some models cost more than linearly in the rows (kernel machines, neighbour searches), the machine may be busier
#: than when the member was evaluated, and a refit in this process that overruns the time budget cannot be taken
#: back.
REFIT_SAFETY = 1.5
#: The same factor for refits run in a worker process under the deadline (every refit under a time budget): a
#: refit that overruns is cut there and its member keeps its fit on the training rows, so the expected cost is
#: reserved and the time budget is used instead of being kept back for the worst case.
WORKER_REFIT_SAFETY = 1.0
#: Seconds reserved for starting the refit worker process (interpreter, imports, the rows).
REFIT_WORKER_START = 3.0
#: The likely final members (whose loading and refits the search keeps time for) are chosen by one ensemble
#: selection over this many of the best successful runs: cheap enough to repeat after every evaluation.
LIKELY_POOL = 50
#: Share of the worker refits' reserve that an evaluation already running may still use: the search starts an
#: evaluation only when its predicted duration fits before the whole reserve, but one that runs longer than
#: predicted is let finish as long as half the refits' time is left (instead of being cut at the search's end
#: and thrown away with the time it ran); the refits then take the heaviest members that still fit.
REFIT_OVERRUN_SHARE = 0.5


def search(
    splits: Splits,
    task: str,
    config: Optional[RunConfig] = None,
    *,
    n_classes: Optional[int] = None,
    store: Optional[RunStore] = None,
    classes=None,
    columns: Optional[List[str]] = None,
    progress: Optional[Callable[[int, Optional[int], object], None]] = None,
    candidates=None,
    evaluator=None,
    started: Optional[float] = None,
    **options,
) -> SearchResult:
    """Run a search until ``budget`` evaluations and/or ``time_budget`` seconds, then build the final model.

    ``config`` (a :class:`~optdiv.cash.run_config.RunConfig`) holds the search's options; keyword ``options``
    replace its fields (or the papers' defaults without one), so ``search(splits, task, method="bo-es")`` works too.

    With a ``store`` that already holds observations (a resumed run) the loop continues after them.
    ``candidates`` and ``evaluator`` replace the space's sampler and the live evaluator (replay runs
    over a library pass both; see optdiv.bench.replay).

    ``constraints`` (texts such as ``"predict_seconds<=0.01"`` or :class:`Constraint`): every successful
    evaluation that violates one is stored and kept as ``"infeasible"``, without predictions, so no strategy
    learns from it as a success and no final model uses it; it still counts against the budget.

    The search is three steps: :func:`_prepare` (every check, the strategy, the evaluator and its runner, the
    stored history, the deadline), :func:`optdiv.cash.loop.search_loop` and :func:`_finalize` (the final model).

    ``workers=N`` (a local Dask cluster) or ``scheduler=ADDRESS`` (an existing one) evaluate asynchronously
    in parallel (optdiv.cash.parallel; needs the ``dask`` extra). Either way, an evaluation that was in flight
    when a stored run stopped is evaluated again first, at its index, with its configuration. ``faults``
    (``"raise=0.3,hang=0.1,nan=0.05"`` or a FaultPlan) injects faults into that fraction of evaluations
    (optdiv.cash.faults). ``memory_limit_mb`` caps each evaluation's process.

    ``cv=k`` evaluates by k-fold cross-validation over the train+validation rows (their
    :func:`~optdiv.cash.data.cross_validation_view`; splits that already carry ``folds`` are such a view): every
    validation loss and prediction is out-of-fold, and Agnostic Bayes's rho is tuned on them. ``time_limit`` then
    bounds each fold's fit, so one evaluation may take up to ``cv * time_limit`` seconds; an evaluation that times
    out after some folds is stored as a ``"timeout"`` with those folds' ``partial_loss``, which the optimisers use
    (see :func:`optdiv.cash.optimizers.imputed_loss`) but no final model does (it has no predictions).

    ``time_budget`` counts from ``started`` (a ``time.perf_counter()`` reading; default: now), so a caller
    such as ``OptDivClassifier.fit`` counts its own preparation too, and covers the final model: the search
    keeps back the predicted time of building it (:func:`_finish_reserve`), starts no evaluation whose
    predicted duration (:class:`~optdiv.cash.budget.DurationPredictor`) does not fit in the time left, and
    caps every evaluation at the time left. An evaluation cut at the deadline is discarded, not stored. The
    live evaluator saves each fitted pipeline (``models/`` of the run directory, or a temporary folder) so
    :func:`fit_model` loads the members instead of refitting them.

    ``portfolio`` ("builtin", a portfolio file, or a list of configurations; see optdiv.cash.portfolio)
    replaces the random initial design of the BO-family strategies: its configurations are evaluated first.

    ``cost_aware`` (BO-family strategies, under a ``time_budget``): EI is weighted down for candidates predicted
    to take more than a tenth of the search's time left (:meth:`Optimizer._fits_time_left`).

    ``ensemble_loss`` (default: the run's metric) is what the final Caruana selection minimises, and
    ``ensemble_bags > 0`` averages that many selections over bootstrap samples of the validation rows; DivBO's
    and OptDivBO's temporary pool keeps the run's metric. ``"auto"`` for either is the measured choice of
    :func:`~optdiv.cash.final_ensemble.resolve_selection` (the estimators' and ``run``'s default).
    """
    prepared = _prepare(splits, task, RunConfig.from_options(config, **options), n_classes=n_classes, store=store,
                        candidates=candidates, evaluator=evaluator, started=started)
    if store is not None:  # the targets every stored prediction is scored on, for reading the run back
        store.save_targets(prepared.splits.y_val)
    c = prepared.config
    outcome = search_loop(
        prepared.strategy, prepared.runner, prepared.history, y_val=prepared.splits.y_val, space=prepared.space,
        seed=c.seed, loss=prepared.loss, budget=c.budget, predictor=prepared.predictor, store=store,
        time_left=None if prepared.deadline is None else prepared.search_left,
        run_left=None if prepared.deadline is None else prepared.run_left, fill_in=candidates is None,
        constraints=prepared.constraints, progress=progress, on_finished=prepared.finished)
    return _finalize(prepared, outcome, classes, columns)


@dataclass
class _Prepared:
    """A search made ready to run: what the prepare step settled, for the loop and the final step."""

    config: RunConfig
    splits: Splits  # the cross-validation view under cv
    task: str
    n_classes: Optional[int]
    method: MethodSpec
    strategy: object
    space: SearchSpace
    loss: str
    ensemble_loss: Optional[str]
    ensemble_bags: int
    constraints: List[Constraint]
    n_folds: Optional[int]
    runner: Runner
    history: List
    predictor: DurationPredictor
    deadline: Optional[Deadline]
    start: float
    started: Optional[float]
    pipelines: Optional[SavedPipelines]
    digest: Optional[str]  # None: nothing is saved (cross-validation without fold bags, a replay)
    latest: List = field(default_factory=list)  # the history as the loop last handed it over
    _reserve: Optional[tuple] = None  # (history key, seconds, seconds less the overrun) last computed
    refitter: Optional["Refitter"] = None  # started now, so the final refits need not wait for a worker

    def search_left(self) -> float:
        """Seconds the search may still use: the time left less what building the final model needs."""
        return self.deadline.left() - self.reserve()

    def run_left(self) -> float:
        """Seconds an evaluation already running may still use: the time left less the final model's reserve
        without the share of its optional refits that a late evaluation may take (:data:`REFIT_OVERRUN_SHARE`)."""
        return self.deadline.left() - self.reserve(overrun=True)

    def reserve(self, overrun: bool = False) -> float:
        """Predicted seconds of building the final model from the history as it stands (recomputed only when an
        evaluation was recorded since the last call); ``overrun``: less the refits a late evaluation may take."""
        key = (len(self.latest), self.latest[-1].index if self.latest else None)
        if self._reserve is None or self._reserve[0] != key:
            members = likely_members(self.latest, self.splits.y_val, self.ensemble_loss or self.loss,
                                     self.config.ensemble_size, self.config.seed)
            both = [_finish_reserve(members, self.pipelines, self.digest, self.config.refit, self.n_folds,
                                    started=self.refitter is not None, refits_share=share)
                    for share in (1.0, 1.0 - REFIT_OVERRUN_SHARE)]
            self._reserve = (key, *both)
        return self._reserve[2 if overrun else 1]

    def finished(self, done: List, ensemble: Sequence[int] = ()) -> None:
        """After each recorded evaluation: the finishing reserve follows the history, and saved pipelines that
        can no longer be members are deleted (those of ``ensemble``, the current suggestion's pool, are kept)."""
        self.latest = done
        if self.digest is not None:
            self.pipelines.prune(self.digest, done, protect=ensemble)


def _prepare(splits: Splits, task: str, config: RunConfig, *, n_classes, store, candidates, evaluator,
             started) -> _Prepared:
    """Check the options, make the strategy, the evaluator and its runner, load the stored history and set the
    deadline: a bad option or a stored run that cannot continue this way is refused before a worker starts."""
    c = config
    method, metric, space, budget, time_budget, seed = c.method, c.metric, c.space, c.budget, c.time_budget, c.seed
    ensemble, ensemble_size, ensemble_loss, ensemble_bags = c.ensemble, c.ensemble_size, c.ensemble_loss, \
        c.ensemble_bags
    sampler, pool, constraints, cv = c.sampler, c.pool, c.constraints, c.cv
    portfolio, cost_aware, optimizer_options = c.portfolio, c.cost_aware, c.optimizer_options
    if evaluator is not None and (cv is not None or (getattr(splits, "folds", None) is not None
                                                     and getattr(evaluator, "splits", None) is not splits)):
        raise ValueError("cross-validation needs the live evaluator's out-of-fold predictions; the evaluator "
                         "given (e.g. a replay library's, which holds holdout predictions) cannot make them")
    if cv is not None:
        splits = cross_validation_view(splits, cv, seed, task)
    folds = getattr(splits, "folds", None)
    n_folds = None if folds is None else int(np.max(folds)) + 1
    if store is not None:
        _check_stored_cv(store, n_folds)
    constraints = parse_constraints(constraints)
    if store is not None:
        _check_stored_constraints(store, constraints)
    if budget is None and time_budget is None:
        raise ValueError("give a budget in evaluations, in seconds, or both")
    time_limit = resolve_time_limit(c.time_limit, time_budget)
    if budget is not None and budget < 1:
        raise ValueError("budget must be at least 1 evaluation")
    spec = get_method(method)
    if ensemble not in ENSEMBLE_BUILDERS:
        raise ValueError(f"unknown ensemble builder {ensemble!r}; choose one of {', '.join(ENSEMBLE_BUILDERS)}")
    loss = resolve_metric(metric, task)
    ensemble_loss, ensemble_bags = resolve_selection(task, loss, ensemble_loss, ensemble_bags)
    if ensemble_loss is not None:
        ensemble_loss = resolve_metric(ensemble_loss, task)
    if ensemble_bags < 0:
        raise ValueError("ensemble_bags must be 0 (one selection) or more")
    space = get_space(space, task) if isinstance(space, str) else space
    from optdiv.core.agnostic_bayes import SAMPLERS
    from optdiv.core.pool import POOL_BUILDERS

    if pool not in POOL_BUILDERS:  # checked before any evaluation, not when the first pool is built
        raise ValueError(f"unknown pool builder {pool!r}; choose one of {', '.join(POOL_BUILDERS)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown Agnostic Bayes sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    # DivBO / OptDivBO's temporary pool: as large as the final ensemble, built by ``pool`` (e.g. agnostic_bayes)
    optimizer_options = dict(optimizer_options or {})
    optimizer_options["selector_options"] = {"ensemble_size": spec.ensemble_size or ensemble_size,
                                             **(optimizer_options.get("selector_options") or {}),
                                             **({} if pool == "caruana" else {"pool_builder": pool})}
    kind = STRATEGIES[spec.strategy]
    if is_auto_portfolio(portfolio) and (not kind.model_based or candidates is not None):
        portfolio = None  # "auto" warm-starts what can be warm-started; a replay's library holds no defaults
    initial = resolve_portfolio(portfolio, space.name, task)
    if initial is not None:
        if not kind.model_based:
            raise ValueError(f"method {method!r} has no initial design to warm-start; a portfolio works with "
                             f"the strategies {', '.join(MODEL_BASED)}")
        optimizer_options = {**(optimizer_options or {}), "initial": initial}
    if c.algorithm_share is not None:
        if not kind.model_based:
            raise ValueError(f"method {method!r} cannot cap an algorithm's share of the evaluations; the cap works "
                             f"with the strategies {', '.join(MODEL_BASED)}")
        optimizer_options = {**(optimizer_options or {}), "max_share": float(c.algorithm_share)}
    if cost_aware:
        if not kind.model_based:
            raise ValueError(f"method {method!r} cannot weigh candidates by their cost; cost-aware suggestion "
                             f"works with the strategies {', '.join(MODEL_BASED)}")
        optimizer_options = {**(optimizer_options or {}), "cost_aware": True}
    strategy = make_strategy(spec, space, loss, seed=seed, candidates=candidates, budget=budget,
                             optimizer_options=optimizer_options)
    if kind.takes_constraints:  # ADMM's z-min wants the bounds themselves
        strategy.set_constraints(list(constraints))
    faults = parse_faults(c.faults, seed)
    start = time.perf_counter()
    deadline = deadline_for(time_budget, start if started is None else started)
    pipelines = None
    if evaluator is None:
        if c.scheduler is None:  # a remote cluster's workers cannot write into this machine's folder
            pipelines = SavedPipelines(None if store is None else store.directory / MODELS_DIR)
        evaluator = Evaluator(space.build, splits, task, loss, n_classes=n_classes, time_limit=time_limit, seed=seed,
                              memory_limit_mb=c.memory_limit_mb,
                              pipelines_dir=None if pipelines is None else pipelines.folder,
                              bag_folds=c.fold_models == "bagged")
    digest = getattr(evaluator, "rows_digest", None)  # None: nothing is saved (cross-validation, a replay)
    refitter = None
    if c.refit and deadline is not None and pipelines is not None and folds is None and digest is not None:
        import pandas as pd

        refitter = Refitter(space, pd.concat([splits.X_train, splits.X_val], axis=0),
                            np.concatenate([splits.y_train, splits.y_val]), task, n_classes, seed, pipelines,
                            deadline)
    runner = make_runner(inject_faults(evaluator, faults), c.workers, c.scheduler)
    history = store.load() if store is not None else []
    prepared = _Prepared(
        config=c, splits=splits, task=task, n_classes=n_classes, method=spec,
        strategy=strategy, space=space, loss=loss, ensemble_loss=ensemble_loss, ensemble_bags=ensemble_bags,
        constraints=constraints, n_folds=n_folds, runner=runner, history=history,
        predictor=DurationPredictor(history), deadline=deadline, start=start, started=started, pipelines=pipelines,
        digest=digest, latest=history, refitter=refitter)
    if deadline is not None and cost_aware:
        strategy.time_left = prepared.search_left  # cost-aware suggestion weighs candidates by the search's time left
    return prepared


def _finalize(prepared: _Prepared, outcome: LoopResult, classes, columns) -> SearchResult:
    """Choose the final members over the history, score them on the test rows and make the result."""
    p, c = prepared, prepared.config
    spec, splits, space, loss, task, seed = p.method, p.splits, p.space, p.loss, p.task, c.seed
    history, stopped, constraints, n_folds = outcome.history, outcome.stopped, p.constraints, p.n_folds
    search_seconds = time.perf_counter() - (p.start if p.started is None else p.started)
    if not any(obs.status == "ok" for obs in history) and stopped is not None:
        raise RuntimeError(f"no evaluation finished within the time budget of {c.time_budget:g} s "
                           f"({len(history)} evaluated); raise the time budget")
    if constraints:
        _require_feasible(history, constraints)
    choice, val_pred = finalize(spec, p.strategy, history, splits.y_val, FinalSettings(
        loss, c.ensemble, c.ensemble_size, seed, task, p.n_classes, sampler=c.sampler, vote=bool(c.vote),
        tune_rho=n_folds is not None, selection_loss=p.ensemble_loss, bags=p.ensemble_bags))
    result = SearchResult(
        history=history,
        member_indices=choice.members,
        weights=choice.weights,
        val_loss=float(mean_loss(val_pred, splits.y_val, loss)),
        test_loss=None,
        suggest_seconds=outcome.suggest_seconds,
        total_seconds=time.perf_counter() - p.start,
        space=space,
        info={"method": spec.name, "strategy": spec.strategy, "final": spec.final, "metric": loss, "space": space.name,
              "constraints": settings_form(constraints), "cv": n_folds,
              "evaluation": "holdout" if n_folds is None else f"{n_folds}-fold CV", **choice.info,
              **({} if outcome.parallel is None else {"parallel": outcome.parallel}),
              "search_seconds": search_seconds, **({} if stopped is None else {"stopped": stopped}),
              **({"ensemble_selection": {"loss": p.ensemble_loss or loss, "bags": int(p.ensemble_bags)}}
                 if spec.final == "ensemble" and spec.options.get("builder", c.ensemble) == "caruana" else {}),
              **({"time_fill_ins": outcome.fill_ins} if outcome.fill_ins else {})},
        stacker=choice.stacker,
        vote=choice.vote,
        pipelines=p.pipelines,
        deadline=p.deadline,
        refitter=p.refitter,
    )
    if splits.y_test is not None:
        if c.refit:
            model = fit_model(result, space, splits, task, classes, columns, seed, refit=True, deadline=p.deadline)
            test_pred = _model_prediction(model, splits.X_test, task)
        else:
            test_pred = choice.combine([history[i].test_pred for i in choice.members])
            model = None
        result.test_loss = float(mean_loss(test_pred, splits.y_test, loss))
        result.model = model
    return result


def likely_members(history: Sequence, y_val, loss: str, size: int, seed: int) -> List:
    """The observations the final ensemble would hold if the search stopped now: one ensemble selection on
    ``loss`` over the :data:`LIKELY_POOL` best successful runs (the :data:`REFIT_MEMBERS` best without
    validation targets). What the search keeps time for follows these members, not a fixed number of runs."""
    ok = sorted((obs for obs in history if obs.status == "ok" and obs.val_pred is not None),
                key=lambda obs: (obs.val_loss, obs.index))
    if len(ok) <= 1 or y_val is None:
        return ok[:REFIT_MEMBERS]
    from optdiv.core.ensemble import ensemble_selection

    pool = ok[:LIKELY_POOL]
    try:
        weights = ensemble_selection(np.stack([obs.val_pred for obs in pool]), y_val, loss, size=max(1, size),
                                     seed=seed).weights
    except ValueError:  # a loss selection cannot use here: fall back to the best runs
        return ok[:REFIT_MEMBERS]
    return [obs for obs, weight in zip(pool, weights) if weight > 0]


def _finish_reserve(members: Sequence, pipelines: Optional[SavedPipelines], digest: Optional[str], refit: bool,
                    n_folds: Optional[int], started: bool = False, refits_share: float = 1.0) -> float:
    """Predicted seconds from the end of the search to the end of the call for the final ``members``:
    :data:`FINISH_SECONDS`, loading (and saving again) the saved ones, and the refits :func:`fit_model` does.

    A k-fold evaluation's ``fit_seconds`` covers k fits on (k-1)/k of the rows, one refit on all rows about
    1/(k-1) of it (needed only when its fold pipelines are not saved); a refit on train+validation fits a third
    more rows than the 60 % training part, in a worker process under the deadline (:data:`WORKER_REFIT_SAFETY`;
    :data:`REFIT_WORKER_START` unless that worker was ``started`` during the search). ``refits_share`` counts
    that share of those worker refits only: they are optional (a member whose refit does not fit stays fitted on
    train), so an evaluation already running may use the rest (:data:`REFIT_OVERRUN_SHARE`).
    """
    reserve = FINISH_SECONDS
    if digest is not None and pipelines is not None:
        reserve += 2 * pipelines.bytes_of(digest, [obs.index for obs in members]) / LOAD_BYTES_PER_SECOND
    seconds = sum(obs.fit_seconds for obs in members)
    if n_folds is not None:
        if digest is None:
            reserve += REFIT_SAFETY * seconds / max(n_folds - 1, 1)
    elif refit:
        reserve += (0.0 if started else REFIT_WORKER_START) + refits_share * WORKER_REFIT_SAFETY * seconds * 4 / 3
    elif digest is None:
        reserve += REFIT_SAFETY * seconds
    return reserve


def _check_stored_constraints(store: RunStore, constraints: List[Constraint]) -> None:
    """A stored run continues only under the constraints it was searched with (its infeasible runs have no
    predictions, so they could not become feasible later)."""
    _refuse_changed_setting(
        store, "constraints", lambda stored: settings_form(stored or []), settings_form(constraints),
        lambda stored, now: f"it was searched under constraints {stored or 'none'}, now {now or 'none'}; use a new "
                            f"run directory or the original --constraint options")


def _check_stored_cv(store: RunStore, n_folds: Optional[int]) -> None:
    """A stored run continues only under the evaluation it began with (its losses are holdout or out-of-fold)."""
    _refuse_changed_setting(
        store, "cv", lambda stored: stored, n_folds,
        lambda stored, now: f"it was evaluated by {_evaluation(stored)}, now by {_evaluation(now)}; use a new run "
                            f"directory or the original --cv")


def _refuse_changed_setting(store: RunStore, key: str, read, now, explain) -> None:
    """RunStoreError when the stored run's ``key`` (as ``read`` normalises it) differs from ``now``; settings a
    run stored before that key existed count as absent (None)."""
    meta = store.read_meta()
    if meta is None:
        return
    stored = read(meta.get(key))
    if stored != now:
        raise RunStoreError(f"cannot resume run {str(store.directory)!r}: {explain(stored, now)}")


def _evaluation(n_folds: Optional[int]) -> str:
    return "a holdout split" if n_folds is None else f"{n_folds}-fold cross-validation"


def _require_feasible(history: List, constraints: List[Constraint]) -> None:
    if any(obs.status == "ok" and obs.val_pred is not None for obs in history):
        return
    infeasible = sum(obs.status == "infeasible" for obs in history)
    failed = len(history) - infeasible
    raise InfeasibleSearchError(
        f"no feasible run: of {len(history)} evaluations, {infeasible} violated the constraints "
        f"({', '.join(str(c) for c in constraints)}) and {failed} failed, so there is no model to build; "
        f"relax the constraints or raise the budget (in a new run directory)"
    )


def fit_model(result: SearchResult, space, splits: Splits, task, classes, columns, seed, refit=False,
              deadline: Optional[Deadline] = None) -> EnsembleModel:
    """The chosen members (fitted on train, or train+validation with ``refit``) as one predictor.

    A member the evaluator saved for the same rows (``result.pipelines``) is loaded, not refitted: a holdout
    fit, or under cross-validation the member's fold pipelines averaged (``fold_models="bagged"``). The others
    (an older run without saved pipelines, cross-validation without fold bags, a pruned one) are refitted. Under a
    ``deadline`` (default: the search's) only the members whose refit on train+validation is predicted to fit in
    the time left are refitted, heaviest weight first, each in a worker process that is stopped at the deadline;
    the others (and one whose refit is stopped or fails) stay fitted on train, and ``result.info["final_model"]``
    says how many.
    Cross-validation splits' ``X_train`` already holds the train+validation rows, so ``refit`` adds nothing; a
    member without a saved fold bag must be refitted there, so under a deadline the lightest such members whose
    refits are predicted not to fit are left out (the heaviest always stays) and the others' weights rescaled to
    the same total: ``result.member_indices`` and ``result.weights`` then describe the model as built, and the
    final-model report says what was left out.
    """
    began = time.perf_counter()
    deadline = result.deadline if deadline is None else deadline
    X, y = splits.X_train, splits.y_train
    folds = getattr(splits, "folds", None)
    cross_validated = folds is not None
    report = {"rows": "train+validation" if cross_validated else "train"}
    saved = result.pipelines
    digest = None if saved is None else splits_digest(X, y, folds)
    if cross_validated and deadline is not None and result.stacker is None:
        bagged = {i for i in result.member_indices if digest is not None and saved.has(digest, result.history[i].index)}
        _drop_members_that_do_not_fit(result, splits, deadline.left() - FINISH_SECONDS, report, bagged)
    on_all, refitter = set(), None  # positions in member_indices to refit on train+validation, and where
    if refit and not cross_validated:
        import pandas as pd

        X_all = pd.concat([splits.X_train, splits.X_val], axis=0)
        y_all = np.concatenate([splits.y_train, splits.y_val])
        in_worker = deadline is not None and saved is not None
        refitter = result.refitter if in_worker else None
        start = REFIT_WORKER_START if in_worker and refitter is None else 0.0
        left = None if deadline is None else deadline.left() - FINISH_SECONDS - start
        on_all = _members_to_refit(result, len(X_all) / max(len(X), 1), left,
                                   WORKER_REFIT_SAFETY if in_worker else REFIT_SAFETY)
        if in_worker and on_all and refitter is None:
            refitter = Refitter(space, X_all, y_all, task, None if classes is None else len(classes), seed, saved,
                                deadline)
        n_members = len(result.member_indices)
        if len(on_all) == n_members:
            report["rows"] = "train+validation"
        else:
            if on_all:
                report["rows"] = f"train+validation for {len(on_all)} of {n_members} members, train for the others"
            report["refit_skipped"] = (f"refitting {n_members - len(on_all)} of {n_members} members on "
                                       f"train+validation was predicted not to fit in the time budget: they stay "
                                       f"fitted on train")
    members, info, failed = [], [], []
    try:
        refits = {}  # position -> (pipeline or None, error), heaviest first, so a refit cut at the deadline is a
        # light one
        for position in sorted(on_all, key=lambda p: (-float(result.weights[p]), p)):
            obs = result.history[result.member_indices[position]]
            refits[position] = (refitter.fit(obs) if refitter is not None
                                else _fitted(space, obs.config, X_all, y_all, seed, task))
        for position, (i, weight) in enumerate(zip(result.member_indices, result.weights)):
            obs = result.history[i]
            pipe = None if digest is None or position in on_all else saved.load(digest, obs.index)
            source, on_all_rows = "saved", position in on_all or cross_validated
            if pipe is None and position in on_all:
                pipe, error = refits[position]
                if pipe is None:  # e.g. a preprocessor that overflows on the added rows, or a refit stopped at the
                    # deadline: the member fitted on train stays, as when its refit does not fit in time
                    report.setdefault("refit_failed", []).append({"index": i, "error": error})
                    on_all_rows = False
                    pipe = None if digest is None else saved.load(digest, obs.index)
                else:
                    source = "refitted"
            if pipe is None:  # not saved (cross-validation, an older run), or its refit on all rows failed
                pipe, error = _fitted(space, obs.config, X, y, seed, task)
                source = "refitted"
                if pipe is None:
                    failed.append((position, i, error))
                    continue
            members.append(pipe)
            info.append({"index": i, "weight": float(weight), "config": obs.config, "val_loss": obs.val_loss,
                         "source": source, "rows": "train+validation" if on_all_rows else "train"})
    finally:
        for worker in {id(r): r for r in (refitter, result.refitter) if r is not None}.values():
            worker.close()
        result.refitter = None
    if failed:
        _leave_out_failed_members(result, failed, report)
    report["loaded"] = sum(member["source"] == "saved" for member in info)
    report["refitted"] = len(info) - report["loaded"]
    report["seconds"] = time.perf_counter() - began
    result.info["final_model"] = report
    columns = list(columns) if columns is not None else list(X.columns)
    return EnsembleModel(members, result.weights, task, classes, columns, info, stacker=result.stacker,
                         vote=result.vote)


class Refitter:
    """Refits members on train+validation in a worker process, each stopped at the deadline (less the time kept
    for the end of the call), so a refit slower than predicted cannot overrun the time budget. Its worker is
    started when the refitter is made (by the search, at its start), so the refits do not wait for one."""

    def __init__(self, space, X_all, y_all, task, n_classes, seed, saved: SavedPipelines, deadline: Deadline):
        self.splits = Splits(X_all, y_all, None, None, None, None)
        self.digest = splits_digest(X_all, y_all)
        self.saved, self.deadline = saved, deadline
        self.evaluator = Evaluator(space.build, self.splits, task, "error" if task == "classification" else "mse",
                                   n_classes=n_classes, seed=seed, time_limit=max(deadline.left(), 1.0),
                                   pipelines_dir=saved.folder)
        self.evaluator.spawn()

    def fit(self, obs):
        """(the member refitted on train+validation, None) or (None, why not)."""
        left = self.deadline.left() - FINISH_SECONDS
        if left <= 0:
            return None, "no time left for the refit"
        error = self.evaluator.fit_and_save(obs.config, obs.index, left)
        if error is not None:
            return None, error
        pipe = self.saved.load(self.digest, obs.index)
        return (pipe, None) if pipe is not None else (None, "the refitted pipeline could not be read back")

    def close(self) -> None:
        self.evaluator.close()


def _fitted(space, config, X, y, seed, task):
    """(the pipeline of ``config`` fitted on X, y, None) or (None, the error) when the fit raises."""
    pipe = build_pipeline(space.build, config, X, seed, task)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the same chatter the evaluator already silenced for this model
            pipe.fit(X, y)
    except Exception as exc:  # noqa: BLE001 - one member's failure must not lose the whole search
        return None, f"{type(exc).__name__}: {exc}"
    return pipe, None


def _leave_out_failed_members(result: SearchResult, failed: List, report: Dict) -> None:
    """Members whose final fit raised (their evaluation succeeded on other rows) are left out and the other
    weights rescaled to the same total; with none left, or with a stacker that needs every member, it raises."""
    if result.stacker is not None or len(failed) == len(result.member_indices):
        raise RuntimeError(f"the final model could not be fitted: member {failed[0][1]} failed with {failed[0][2]}")
    gone = {position for position, _, _ in failed}
    report["members_failed"] = [{"index": i, "error": error} for _, i, error in failed]
    _keep_members(result, [p for p in range(len(result.member_indices)) if p not in gone])


def _keep_members(result: SearchResult, kept: List[int]) -> float:
    """Keep the members at positions ``kept``, their weights rescaled to the old total; the share of the weight
    that was left out."""
    weights = np.asarray(result.weights, dtype=np.float64)
    total, kept_total = float(weights.sum()), float(weights[kept].sum())
    result.member_indices = [result.member_indices[p] for p in kept]
    result.weights = weights[kept] * (total / kept_total if kept_total > 0 else 1.0)
    return (total - kept_total) / total if total > 0 else 0.0


def _members_to_refit(result: SearchResult, rows_ratio: float, left: Optional[float], safety: float = REFIT_SAFETY,
                      free: Sequence[int] = ()) -> set:
    """Positions of the members to refit: all without a deadline; under one, the heaviest weights first, each
    while its predicted refit (its evaluation's fit time scaled by the rows, times ``safety``) still fits, so the
    time left buys the refits that matter most instead of none. Members whose evaluation index is in ``free``
    cost nothing (they are loaded, not refitted)."""
    positions = sorted(range(len(result.member_indices)), key=lambda p: (-float(result.weights[p]), p))
    if left is None:
        return set(positions)
    chosen, spent = set(), 0.0
    for position in positions:
        i = result.member_indices[position]
        cost = 0.0 if i in free else safety * rows_ratio * result.history[i].fit_seconds
        if spent + cost <= left:
            chosen.add(position)
            spent += cost
    return chosen


def _drop_members_that_do_not_fit(result: SearchResult, splits: Splits, left: float, report: Dict,
                                  bagged: Sequence[int] = ()) -> None:
    """Cross-validation: keep the members whose refits on all rows are predicted to fit in ``left`` seconds
    (:func:`_members_to_refit`; a k-fold evaluation's fit time covers k fits on (k-1)/k of the rows; a member in
    ``bagged``, whose fold pipelines are saved, needs no refit), and at least the heaviest; rescale the kept
    weights to the same total and say in ``report`` what was left out."""
    n_folds = int(np.max(splits.folds)) + 1
    keep = _members_to_refit(result, 1.0 / max(n_folds - 1, 1), left, free=bagged)
    n_members = len(result.member_indices)
    if len(keep) == n_members:
        return
    if not keep:
        keep = {min(range(n_members), key=lambda p: (-float(result.weights[p]), p))}
    kept = sorted(keep)
    report["members_dropped"] = n_members - len(kept)
    report["weight_dropped"] = _keep_members(result, kept)
    report["drop_reason"] = (f"refitting {n_members - len(kept)} of {n_members} members on all rows was predicted "
                             f"not to fit in the time budget: they were left out and the other weights rescaled")


def _model_prediction(model: EnsembleModel, X, task: str) -> np.ndarray:
    return model.predict_proba(X) if task == "classification" else model.predict(X)


def result_summary(result: SearchResult, dataset_name: str, task: str) -> Dict:
    """The result.json schema."""
    history = result.history
    return {
        "method": result.info["method"],
        "dataset": dataset_name,
        "task": task,
        "metric": result.info["metric"],
        "final": result.info.get("final"),
        "space": result.info["space"],
        "n_evaluations": len(history),
        "n_failed": sum(obs.status not in ("ok", "infeasible") for obs in history),
        "n_infeasible": sum(obs.status == "infeasible" for obs in history),
        "constraints": result.info.get("constraints", []),
        "evaluation": result.info.get("evaluation", "holdout"),
        "cv": result.info.get("cv"),
        "rho": result.info.get("rho"),
        "ensemble_selection": result.info.get("ensemble_selection"),
        "val_error": result.val_loss,
        "test_error": result.test_loss,
        "ensemble": [
            {
                "index": i,
                "weight": float(w),
                "algorithm": history[i].algorithm,
                "val_error": history[i].val_loss,
                "config": history[i].config,
            }
            for i, w in zip(result.member_indices, result.weights)
        ],
        "suggest_seconds": [round(s, 6) for s in result.suggest_seconds],
        "total_seconds": result.total_seconds,
        "stopped": result.info.get("stopped"),
        "final_model": result.info.get("final_model"),
    }


def run(
    data,
    target: Optional[str] = None,
    task: str = "auto",
    out: Optional[str] = None,
    resume: bool = False,
    config: Optional[RunConfig] = None,
    *,
    started: Optional[float] = None,
    progress: Optional[Callable[[int, Optional[int], object], None]] = None,
    **options,
):
    """Load data, split 60/20/20, search, save ``result.json`` and ``model.joblib`` under ``out``.

    ``config`` (default: :data:`RUN_DEFAULTS`) holds the search's options; keyword ``options`` replace its fields.

    ``cv=k`` evaluates by k-fold cross-validation over the train+validation rows instead of the validation split;
    the saved model's members are then fitted on all of those rows. ``cv="auto"`` (the command line's default)
    chooses by the number of rows (:func:`~optdiv.cash.data.resolve_cv`).

    ``time_budget`` counts from ``started`` (a ``time.perf_counter()`` reading; default: the start of this call) and
    covers loading the data, the search, the final model and writing it.

    ``ensemble_loss`` / ``ensemble_bags`` change only the final model, so a resumed run may use other values.
    """
    import joblib

    started = time.perf_counter() if started is None else started

    from optdiv.cash.data import load_dataset

    config = RunConfig.from_options(config or RUN_DEFAULTS, **options)
    # bad constraint text fails before loading data; the time limit is stored as the seconds it stands for
    config = config.replace(constraints=parse_constraints(config.constraints),
                            time_limit=resolve_time_limit(config.time_limit, config.time_budget),
                            faults=parse_faults(config.faults, config.seed))
    dataset = load_dataset(data, target=target, task=task)
    splits = split(dataset, seed=config.seed)
    cv = resolve_cv(config.cv, len(splits.y_train) + len(splits.y_val))
    config = config.replace(cv=cv)
    if cv is not None:  # before the search, so the saved model's refit (fit_model) uses train+validation too
        splits = cross_validation_view(splits, cv, config.seed, dataset.task)
    store = None
    if out is not None:
        store = RunStore(out)
        settings = {"data": str(data), "target": target, "task": dataset.task, "seed": config.seed,
                    **config.settings()}
        if resume:
            store.check_meta(_as_stored(settings, store.read_meta()), ignore=("budget",))  # the budget may grow
        elif len(store) > 0:
            raise FileExistsError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
        else:
            store.write_meta(settings)
    n_classes = None if dataset.classes is None else len(dataset.classes)
    result = search(
        splits,
        dataset.task,
        config.replace(cv=None),  # the splits already carry the folds
        n_classes=n_classes,
        store=store,
        classes=dataset.classes,
        columns=list(dataset.X.columns),
        progress=progress,
        started=started,
    )
    try:
        if result.model is None:
            result.model = fit_model(
                result, result.space, splits, dataset.task, dataset.classes, list(dataset.X.columns), config.seed
            )
    finally:
        if result.pipelines is not None and store is None:
            result.pipelines.cleanup()  # a temporary folder; a run directory keeps models/ for a resume
    summary = result_summary(result, dataset.name, dataset.task)
    if store is not None:
        store.write_json("result.json", summary)
        joblib.dump(result.model, store.directory / "model.joblib")
    return result, summary


#: ``run``'s defaults: the product's, as ``optdiv run`` and the estimators have them.
RUN_DEFAULTS = RunConfig.product()


def _as_stored(settings: Dict, stored: Optional[Dict]) -> Dict:
    """``settings`` less the options a run stored before they were always written (a Python ``run`` stored only
    the options it was given) where they hold their default, so such a run still resumes."""
    if stored is None:
        return settings
    defaults = RunConfig().settings()
    return {k: v for k, v in settings.items() if k in stored or k not in defaults or v != defaults[k]}

