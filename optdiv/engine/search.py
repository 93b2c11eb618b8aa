"""One search on splits: :func:`search` (prepare, the loop of optdiv.engine.loop, finish);
:func:`optdiv.engine.run.run` loads the data and keeps the run directory around it.

``search`` is three steps: :func:`prepare` (every check that needs the data or the space, the strategy, the
evaluator and its runner, the stored history, the deadline), :func:`optdiv.engine.loop.search_loop` and
:func:`finish` (the final members, the final model, the result). The options themselves are a
:class:`~optdiv.config.RunConfig`, which checks each one when it is made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.budget import FINISH_SECONDS, Deadline, DurationPredictor, deadline_for, resolve_time_limit
from optdiv.config import RunConfig
from optdiv.core.metric_vocabulary import resolve
from optdiv.core.metrics import mean_loss
from optdiv.data import Splits, cross_validation_view, make_preprocessor, resolve_search_rows, row_sample_view
from optdiv.engine.loop import WORKERS_WOULD_NOT_START, LoopResult, search_loop
from optdiv.engine.result import SearchResult
from optdiv.evaluation.constraints import Constraint, InfeasibleSearchError, parse_constraints, settings_form
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.fault_plan import parse_faults
from optdiv.evaluation.faults import inject_faults
from optdiv.evaluation.memory import resolve_memory_limit, splits_mb
from optdiv.evaluation.observation import worker_start_failed
from optdiv.evaluation.pipelines import SavedPipelines
from optdiv.execution.factory import make_runner
from optdiv.execution.runner import Runner
from optdiv.final.choice import FinalSettings, finalize, resolve_selection
from optdiv.final.fit import Refitter, fit_model
from optdiv.final.fold_refits import FoldRefits
from optdiv.final.model import model_prediction
from optdiv.final.reserve import FinishReserve, worker_refit_seconds
from optdiv.spaces import SearchSpace, get_space
from optdiv.spaces.portfolio import is_auto_portfolio, resolve_portfolio
from optdiv.storage.base import RunStoreError, Store
from optdiv.storage.memory import MemoryStore
from optdiv.strategies.methods import MethodSpec, get_method
from optdiv.strategies.registry import MODEL_BASED, STRATEGIES, make_strategy


def resolve_metric(metric: Optional[str], task: str) -> str:
    """The loss a metric name stands for (the metric vocabulary's :func:`~optdiv.core.metric_vocabulary.resolve`);
    defaults are error (classification) and mse (regression)."""
    return resolve(metric, task).name


def search(
    splits: Splits,
    task: str,
    config: Optional[RunConfig] = None,
    *,
    n_classes: Optional[int] = None,
    store: Optional[Store] = None,
    classes=None,
    columns: Optional[List[str]] = None,
    progress: Optional[Callable[[int, Optional[int], object], None]] = None,
    candidates=None,
    evaluator=None,
    started: Optional[float] = None,
    **options,
) -> SearchResult:
    """Run a search until ``budget`` evaluations and/or ``time_budget`` seconds, then build the final model.

    ``config`` (a :class:`~optdiv.config.RunConfig`) holds the search's options; keyword ``options``
    replace its fields (or the papers' defaults without one), so ``search(splits, task, method="bo-es")`` works too.

    ``store``: where the search keeps its observations (a :class:`~optdiv.storage.files.RunStore` for a run
    directory; default: a :class:`~optdiv.storage.memory.MemoryStore`). With a store that already holds
    observations (a resumed run) the loop continues after them.
    ``candidates`` and ``evaluator`` replace the space's sampler and the live evaluator (replay runs
    over a library pass both; see optdiv.bench.replay). An evaluator derives from
    :class:`~optdiv.evaluation.interface.EvaluatorInterface`, which tells the runners how it may run.

    ``constraints`` (texts such as ``"predict_seconds<=0.01"`` or :class:`Constraint`): every successful
    evaluation that violates one is stored and kept as ``"infeasible"``, without predictions, so no strategy
    learns from it as a success and no final model uses it; it still counts against the budget.

    The search is three steps: :func:`prepare` (every check that needs the data or the space, the strategy, the
    evaluator and its runner, the stored history, the deadline), :func:`optdiv.engine.loop.search_loop` and
    :func:`finish` (the final model).

    ``workers=N`` (a local Dask cluster) or ``scheduler=ADDRESS`` (an existing one) evaluate asynchronously
    in parallel (optdiv.execution.dask_runner; needs the ``dask`` extra). Either way, an evaluation that was in flight
    when a stored run stopped is evaluated again first, at its index, with its configuration. ``faults``
    (``"raise=0.3,hang=0.1,nan=0.05"`` or a FaultPlan) injects faults into that fraction of evaluations
    (optdiv.evaluation.faults). ``memory_limit_mb`` caps each evaluation's process.

    ``cv=k`` evaluates by k-fold cross-validation over the train+validation rows (their
    :func:`~optdiv.data.cross_validation_view`; splits that already carry ``folds`` are such a view): every
    validation loss and prediction is out-of-fold, and Agnostic Bayes's rho is tuned on them. ``time_limit`` then
    bounds each fold's fit, so one evaluation may take up to ``cv * time_limit`` seconds; an evaluation that times
    out after some folds is stored as a ``"timeout"`` with those folds' ``partial_loss``, which the optimisers use
    (see :func:`optdiv.strategies.base.imputed_loss`) but no final model does (it has no predictions).

    ``time_budget`` counts from ``started`` (a ``time.perf_counter()`` reading; default: now), so a caller
    such as ``OptDivClassifier.fit`` counts its own preparation too, and covers the final model: the search
    keeps back the predicted time of building it (:class:`~optdiv.final.reserve.FinishReserve`), starts no
    evaluation whose predicted duration (:class:`~optdiv.budget.DurationPredictor`) does not fit in the time left,
    and caps every evaluation at the time left. An evaluation cut at the deadline is discarded, not stored. The
    live evaluator saves each fitted pipeline (``models/`` of the run directory, or a temporary folder) so
    :func:`~optdiv.final.fit.fit_model` loads the members instead of refitting them.

    ``portfolio`` ("builtin", a portfolio file, or a list of configurations; see optdiv.spaces.portfolio)
    replaces the random initial design of the BO-family strategies: its configurations are evaluated first.

    ``cost_aware`` (BO-family strategies, under a ``time_budget``): EI is weighted down for candidates predicted
    to take more than a tenth of the search's time left (:class:`~optdiv.strategies.model_based.Optimizer`).

    ``ensemble_loss`` (default: the run's metric) is what the final Caruana selection minimises, and
    ``ensemble_bags > 0`` averages that many selections over bootstrap samples of the validation rows; DivBO's
    and OptDivBO's temporary pool keeps the run's metric. ``"auto"`` for either is the measured choice of
    :func:`~optdiv.final.choice.resolve_selection` (the estimators' and ``run``'s default).
    """
    store = MemoryStore() if store is None else store
    prepared = prepare(splits, task, RunConfig.from_options(config, **options), n_classes=n_classes, store=store,
                       candidates=candidates, evaluator=evaluator, started=started)
    c = prepared.config
    try:
        store.save_targets(prepared.splits.y_val)  # the targets every stored prediction is scored on, for reading back
        outcome = search_loop(
            prepared.strategy, prepared.runner, prepared.history, y_val=prepared.splits.y_val, space=prepared.space,
            seed=c.seed, loss=prepared.loss, budget=c.evaluations(), predictor=prepared.predictor, store=store,
            time_left=prepared.time_left, run_left=prepared.run_left, fill_in=candidates is None,
            constraints=prepared.constraints, progress=progress, on_finished=prepared.finished,
            ahead=(None if (prepared.refitter is None and prepared.fold_refits is None)
                   or prepared.all_rows is not None or not c.refit_ahead else prepared.refit_ahead))
        return finish(prepared, outcome, classes, columns)
    except BaseException:  # the refit worker started with the search ends with it (fit_model ends it otherwise)
        if prepared.refitter is not None:
            prepared.refitter.close()
        raise


@dataclass
class PreparedSearch:
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
    reserve: FinishReserve
    refitter: Optional[Refitter] = None  # started now, so the final refits need not wait for a worker
    fold_refits: Optional[FoldRefits] = None  # cross-validation without fold bags: members refitted ahead, in memory
    all_rows: Optional[Splits] = None  # the splits before ``search_rows`` sampled ``splits`` from them
    threads: int = 1  # each evaluation's threads (optdiv.evaluation.threads)
    refit_threads: int = 1  # each final refit's threads: every core, as the search has ended

    @property
    def time_left(self) -> Optional[Callable[[], float]]:
        """The seconds the search may still use (a callable), or None without a time budget."""
        return None if self.deadline is None else self.reserve.search_left

    @property
    def run_left(self) -> Optional[Callable[[], float]]:
        """The seconds an evaluation already running may still use (a callable; past :attr:`time_left` by a share
        of the optional refits, :data:`~optdiv.final.reserve.REFIT_OVERRUN_SHARE`), or None without a time budget."""
        return None if self.deadline is None else self.reserve.run_left

    def refit_ahead(self, done: List) -> bool:
        """When the search would stop to keep time for the final model: refit now the members the final model would
        hold if the search stopped here (heaviest first), then the reserve's likely members, those not refitted yet,
        each while its predicted refit fits; the final model's reserve shrinks to what is still to do, and the time
        a refit quicker than predicted saves goes back to the search. True when a refit ran (the loop then checks
        the time left again). Under cross-validation without fold bags the same members are refitted on all rows
        in this process instead (:class:`~optdiv.final.fold_refits.FoldRefits`)."""
        if self.refitter is None and self.fold_refits is None:
            return False
        self.reserve.follow(done)
        self.reserve.seconds()  # the likely members of this history
        members = self.final_members(done)
        chosen = {obs.index for obs in members}
        members += [obs for obs in self.reserve.members if obs.index not in chosen]
        if self.fold_refits is not None:
            ran = self.fold_refits.refit_ahead(members, lambda: self.deadline.left() - FINISH_SECONDS)
        else:
            ran = self.refitter.refit_ahead(members, lambda obs: worker_refit_seconds(obs, self.reserve.rows))
        self.reserve.forget()
        return bool(ran)

    def final_settings(self) -> FinalSettings:
        """How the final model is chosen over the history (the method's final step, the product's selection)."""
        c = self.config
        return FinalSettings(self.loss, c.ensemble, c.ensemble_size, c.seed, self.task, self.n_classes,
                             sampler=c.sampler, vote=bool(c.vote), tune_rho=self.n_folds is not None,
                             selection_loss=self.ensemble_loss, bags=self.ensemble_bags)

    def final_members(self, done: List) -> List:
        """The members the final model would hold if the search stopped now, heaviest first ([] when it cannot be
        chosen yet, e.g. no successful run)."""
        try:
            choice, _ = finalize(self.method, self.strategy, done, self.splits.y_val, self.final_settings())
        except (ValueError, RuntimeError):
            return []
        order = sorted(range(len(choice.members)), key=lambda p: (-float(choice.weights[p]), p))
        return [done[choice.members[p]] for p in order]

    def finished(self, done: List, ensemble: Sequence[int] = ()) -> None:
        """After each recorded evaluation: the finishing reserve follows the history, and saved pipelines that
        can no longer be members are deleted (those of ``ensemble``, the current suggestion's pool, are kept)."""
        self.reserve.follow(done)
        if self.refitter is not None:
            self.refitter.start()  # once the evaluation workers are up: its start-up no longer delays theirs
        if self.digest is not None:
            self.pipelines.prune(self.digest, done, protect=ensemble)


#: On a row sample, the most share of the time budget kept back for refitting the members on every row: the search
#: still gets the rest, and the refits take the heaviest members that fit in what is left.
SAMPLE_REFITS_SHARE = 0.5


def prepare(splits: Splits, task: str, config: RunConfig, *, n_classes, store: Store, candidates, evaluator,
            started) -> PreparedSearch:
    """Check what the options need of the data and the space, make the evaluator, its runner and the strategy,
    load the stored history and set the deadline: a stored run that cannot continue this way is refused before a
    worker starts. (Each option alone was checked when ``config`` was made.)"""
    c = config
    method, metric, space, time_budget, seed = c.method, c.metric, c.space, c.time_budget, c.seed
    budget = c.evaluations()  # None: the time budget alone ends the search
    ensemble_size, ensemble_loss, ensemble_bags = c.ensemble_size, c.ensemble_loss, c.ensemble_bags
    pool, cv, portfolio, cost_aware, optimizer_options = c.pool, c.cv, c.portfolio, c.cost_aware, c.optimizer_options
    if evaluator is not None and (cv is not None or (getattr(splits, "folds", None) is not None
                                                     and getattr(evaluator, "splits", None) is not splits)):
        raise ValueError("cross-validation needs the live evaluator's out-of-fold predictions; the evaluator "
                         "given (e.g. a replay library's, which holds holdout predictions) cannot make them")
    if cv is not None:
        splits = cross_validation_view(splits, cv, seed, task)
    folds = getattr(splits, "folds", None)
    n_folds = None if folds is None else int(np.max(folds)) + 1
    check_stored_cv(store, n_folds)
    constraints = parse_constraints(c.constraints)
    check_stored_constraints(store, constraints)
    if budget is None and time_budget is None:
        raise ValueError("give a budget in evaluations, in seconds, or both")
    time_limit = resolve_time_limit(c.time_limit, time_budget)
    spec = get_method(method)
    loss = resolve_metric(metric, task)
    ensemble_loss, ensemble_bags = resolve_selection(task, loss, ensemble_loss, ensemble_bags)
    if ensemble_loss is not None:
        ensemble_loss = resolve_metric(ensemble_loss, task)
    space = get_space(space, task) if isinstance(space, str) else space
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
    faults = parse_faults(c.faults, seed)
    start = time.perf_counter()
    deadline = deadline_for(time_budget, start if started is None else started)
    all_rows = None  # the splits whose every row the final members are refitted on, when the search samples them
    sample = resolve_search_rows(c.search_rows, time_budget)
    if evaluator is None and folds is None and sample is not None and len(splits.y_train) > sample:
        all_rows, splits = splits, row_sample_view(splits, sample, seed, task)
    if evaluator is None and splits.X_train is not None:
        space, optimizer_options = switches_that_apply(space, splits.X_train, optimizer_options)
    rows = None if splits.y_train is None else len(splits.y_train)  # a replay's splits may hold no rows
    threads = c.evaluation_threads(rows)  # each evaluation's threads
    refit_threads = c.refit_threads(rows)
    pipelines = None
    if evaluator is None:
        if c.scheduler is None:  # a remote cluster's workers cannot write into this machine's folder
            pipelines = SavedPipelines(store.models_folder())
        data_mb = splits_mb(splits) if c.memory_limit_mb == "auto" else 0.0  # what each evaluation's worker holds
        memory_limit = resolve_memory_limit(c.memory_limit_mb, data_mb, at_once=c.evaluations_at_once(),
                                            local=c.scheduler is None)
        evaluator = Evaluator(space.build, splits, task, loss, n_classes=n_classes, time_limit=time_limit, seed=seed,
                              memory_limit_mb=memory_limit, threads=threads,
                              pipelines_dir=None if pipelines is None else pipelines.folder,
                              bag_folds=c.fold_models == "bagged")
    digest = evaluator.rows_digest  # None: nothing is saved (cross-validation, a replay)
    history = store.load()
    refitter = None  # the final refits' worker, started with the first result so its start-up runs beside the search
    refit_rows = splits if all_rows is None else all_rows  # the rows the final members are refitted on
    if c.refit and deadline is not None and pipelines is not None and folds is None and digest is not None:
        import pandas as pd

        refitter = Refitter(space, pd.concat([refit_rows.X_train, refit_rows.X_val], axis=0),
                            np.concatenate([refit_rows.y_train, refit_rows.y_val]), task, n_classes, seed, pipelines,
                            deadline, threads=refit_threads, start=bool(history))  # a resumed run's at once
    fold_refits = None  # cross-validation saves no member without fold bags: all-row refits can run ahead
    if folds is not None and digest is None and deadline is not None and all_rows is None and c.refit_ahead:
        fold_refits = FoldRefits(space, splits.X_train, splits.y_train, task, seed, n_folds, threads=threads)
    refit_from_to = (3, 4)  # rows fitted on, rows refitted on: train, train+validation (a replay may hold none)
    if refit_rows.y_train is not None and refit_rows.y_val is not None and splits.y_train is not None:
        refit_from_to = (max(len(splits.y_train), 1), len(refit_rows.y_train) + len(refit_rows.y_val))
    reserve = FinishReserve(deadline, splits.y_val, ensemble_loss or loss, c.ensemble_size, seed, c.refit, n_folds,
                            pipelines, digest, history, started=refitter is not None,
                            rows=refit_from_to,
                            refits_cap=(None if all_rows is None or time_budget is None
                                        else SAMPLE_REFITS_SHARE * time_budget),
                            refitted=(fold_refits.has if fold_refits is not None
                                      else None if refitter is None else refitter.done),
                            pace=None if refitter is None else refitter.pace)
    try:
        # cost-aware suggestion weighs candidates by the search's time left; ADMM weighs the constraints themselves
        strategy = make_strategy(spec, space, loss, seed=seed, candidates=candidates, budget=budget,
                                 optimizer_options=optimizer_options,
                                 time_left=None if deadline is None or not cost_aware else reserve.search_left,
                                 constraints=constraints)
        runner = make_runner(inject_faults(evaluator, faults), c.workers, c.scheduler, c.parallel_evaluations())
    except BaseException:  # e.g. no Dask for workers=N: the refit worker started above ends with the search
        if refitter is not None:
            refitter.close()
        raise
    return PreparedSearch(
        config=c, splits=splits, task=task, n_classes=n_classes, method=spec,
        strategy=strategy, space=space, loss=loss, ensemble_loss=ensemble_loss, ensemble_bags=ensemble_bags,
        constraints=constraints, n_folds=n_folds, runner=runner, history=history,
        predictor=DurationPredictor(history), deadline=deadline, start=start, started=started, pipelines=pipelines,
        digest=digest, reserve=reserve, refitter=refitter, fold_refits=fold_refits, all_rows=all_rows,
        threads=threads,
        refit_threads=refit_threads)


def switches_that_apply(space: SearchSpace, X_train, optimizer_options: dict) -> Tuple[SearchSpace, dict]:
    """The space without a switch that builds the same model either way on these rows (the value-shares switch
    where no column qualifies, :func:`optdiv.spaces.autosklearn_space.for_columns`), and the start configurations
    without its setting."""
    from optdiv.spaces.autosklearn_space import VALUE_SHARES, for_columns  # the space's models, on first use

    if VALUE_SHARES not in space.hyperparameter_names:
        return space, optimizer_options
    narrowed = for_columns(space, make_preprocessor(X_train).fit_transform(X_train))
    if narrowed is space:
        return space, optimizer_options
    initial = optimizer_options.get("initial")
    if initial is not None:
        initial = [{k: v for k, v in config.items() if k != VALUE_SHARES} for config in initial]
        optimizer_options = {**optimizer_options, "initial": initial}
    return narrowed, optimizer_options


def finish(prepared: PreparedSearch, outcome: LoopResult, classes, columns) -> SearchResult:
    """Choose the final members over the history, score them on the test rows and make the result."""
    p, c = prepared, prepared.config
    spec, splits, space, loss, task, seed = p.method, p.splits, p.space, p.loss, p.task, c.seed
    history, stopped, constraints, n_folds = outcome.history, outcome.stopped, p.constraints, p.n_folds
    search_seconds = time.perf_counter() - (p.start if p.started is None else p.started)
    if not any(obs.status == "ok" for obs in history) and stopped is not None:
        failed = [obs for obs in history if obs.status == "failed" and obs.error]
        if stopped.startswith(WORKERS_WOULD_NOT_START):  # with or without a time budget
            first = next(obs for obs in history if worker_start_failed(obs)).error.strip().splitlines()[0]
            raise RuntimeError(f"no evaluation finished: the search stopped after {len(history)} evaluations, "
                               f"whose worker processes could not start; the first with: {first}")
        if history and len(failed) == len(history):  # more time would not help: say what failed
            first = failed[0].error.strip().splitlines()[0]
            raise RuntimeError(f"no evaluation finished within the time budget of {c.time_budget:g} s: all "
                               f"{len(history)} failed, the first with: {first}")
        raise RuntimeError(f"no evaluation finished within the time budget of {c.time_budget:g} s "
                           f"({len(history)} evaluated); raise the time budget")
    if constraints:
        require_feasible(history, constraints)
    choice, val_pred = finalize(spec, p.strategy, history, splits.y_val, p.final_settings())
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
              "search_seconds": search_seconds, "threads": p.threads,
              "refit_threads": p.refit_threads,
              **({} if stopped is None else {"stopped": stopped}),
              **({"ensemble_selection": {"loss": p.ensemble_loss or loss, "bags": int(p.ensemble_bags)}}
                 if spec.final == "ensemble" and spec.options.get("builder", c.ensemble) == "caruana" else {}),
              **({"time_fill_ins": outcome.fill_ins} if outcome.fill_ins else {}),
              **({"went_on_after_refits": outcome.went_on} if outcome.went_on else {})},
        stacker=choice.stacker,
        vote=choice.vote,
        pipelines=p.pipelines,
        deadline=p.deadline,
        refitter=p.refitter,
        fold_refits=p.fold_refits,
        fitted_on=None if p.all_rows is None else splits,
    )
    if p.all_rows is not None:
        result.info["search_rows"] = {"train": len(splits.y_train), "validation": len(splits.y_val),
                                      "of_train": len(p.all_rows.y_train), "of_validation": len(p.all_rows.y_val)}
        splits = p.all_rows  # the final model is refitted on, and scored on the test rows of, every row
    if splits.y_test is not None:
        if c.refit:
            model = fit_model(result, space, splits, task, classes, columns, seed, refit=True, deadline=p.deadline,
                              threads=p.refit_threads)
            test_pred = model_prediction(model, splits.X_test, task)
        else:
            test_pred = choice.combine([history[i].test_pred for i in choice.members])
            model = None
        result.test_loss = float(mean_loss(test_pred, splits.y_test, loss))
        result.model = model
    return result


def check_stored_constraints(store: Store, constraints: List[Constraint]) -> None:
    """A stored run continues only under the constraints it was searched with (its infeasible runs have no
    predictions, so they could not become feasible later)."""
    _refuse_changed_setting(
        store, "constraints", lambda stored: settings_form(stored or []), settings_form(constraints),
        lambda stored, now: f"it was searched under constraints {stored or 'none'}, now {now or 'none'}; use a new "
                            f"run directory or the original --constraint options")


def check_stored_cv(store: Store, n_folds: Optional[int]) -> None:
    """A stored run continues only under the evaluation it began with (its losses are holdout or out-of-fold)."""
    _refuse_changed_setting(
        store, "cv", lambda stored: stored, n_folds,
        lambda stored, now: f"it was evaluated by {_evaluation(stored)}, now by {_evaluation(now)}; use a new run "
                            f"directory or the original --cv")


def _refuse_changed_setting(store: Store, key: str, read, now, explain) -> None:
    """RunStoreError when the stored run's ``key`` (as ``read`` normalises it) differs from ``now``; settings a
    run stored before that key existed count as absent (None)."""
    meta = store.read_meta()
    if meta is None:
        return
    stored = read(meta.get(key))
    if stored != now:
        raise RunStoreError(f"cannot resume run {store.location!r}: {explain(stored, now)}")


def _evaluation(n_folds: Optional[int]) -> str:
    return "a holdout split" if n_folds is None else f"{n_folds}-fold cross-validation"


def require_feasible(history: List, constraints: List[Constraint]) -> None:
    if any(obs.status == "ok" and obs.val_pred is not None for obs in history):
        return
    infeasible = sum(obs.status == "infeasible" for obs in history)
    failed = len(history) - infeasible
    raise InfeasibleSearchError(
        f"no feasible run: of {len(history)} evaluations, {infeasible} violated the constraints "
        f"({', '.join(str(c) for c in constraints)}) and {failed} failed, so there is no model to build; "
        f"relax the constraints or raise the budget (in a new run directory)"
    )
