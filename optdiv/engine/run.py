"""``run``: load data, split them, search, and keep the run directory (or, without one, the in-memory store): the
settings a resume must repeat, every evaluation, ``result.json`` and ``model.joblib``."""

from __future__ import annotations

import time
from typing import Callable, Dict, Optional

from optdiv.budget import resolve_time_limit
from optdiv.config import RunConfig
from optdiv.data import cross_validation_view, load_dataset, resolve_cv, resolve_search_rows, split
from optdiv.engine.result import result_summary
from optdiv.engine.search import search
from optdiv.evaluation.constraints import parse_constraints
from optdiv.evaluation.fault_plan import parse_faults
from optdiv.final.fit import fit_model
from optdiv.storage.files import RunStore
from optdiv.storage.memory import MemoryStore


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
    each saved member is then the bag of its fold models (``fold_models="bagged"``, the product default) or one
    model refitted on all of those rows (``"refit"``). ``cv="auto"`` (the command line's default)
    chooses by the number of rows (:func:`~optdiv.data.resolve_cv`).

    ``time_budget`` counts from ``started`` (a ``time.perf_counter()`` reading; default: the start of this call) and
    covers loading the data, the search, the final model and writing it.

    ``ensemble_loss`` / ``ensemble_bags`` change only the final model, so a resumed run may use other values.
    """
    started = time.perf_counter() if started is None else started
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
    store = MemoryStore() if out is None else RunStore(out)
    settings = {"data": str(data), "target": target, "task": dataset.task, "seed": config.seed, **config.settings()}
    sample = None if cv is not None else resolve_search_rows(config.search_rows, config.time_budget)
    if sample is not None and len(splits.y_train) > sample:  # the search fits on a row sample (optdiv.data): a
        settings["search_rows"] = sample  # resume must draw the same one, so its validation rows stay the same
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
                result, result.space, splits, dataset.task, dataset.classes, list(dataset.X.columns), config.seed,
                threads=result.info.get("refit_threads", result.info.get("threads", 1)),
            )
    finally:
        if result.pipelines is not None:
            result.pipelines.cleanup()  # removes a temporary folder only; a run directory keeps models/ for a resume
    summary = result_summary(result, dataset.name, dataset.task)
    store.save_result(summary, result.model)
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

