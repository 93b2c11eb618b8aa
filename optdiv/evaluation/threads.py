"""How many cores a run uses, and handing them to the models an evaluation fits.

``n_jobs`` follows scikit-learn's convention: a positive number of cores, ``-1`` every core this process may run
on, ``-2`` all but one, and so on. A local search fits one configuration at a time, so its cores go to the model
itself: the tree ensembles, LightGBM and KNN take them as threads (about 1.8x faster on two cores for the forests),
and the OpenMP/BLAS caps of the evaluation's process are raised to match. Models without a thread option (an SVM,
a linear model) keep one.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

#: Fewest training rows on which an evaluation's model gets more than one thread. Below it starting the threads
#: costs more than they save (100 extra trees on 250 rows: 0.08 s on one thread, 0.14 s on two; break-even near
#: 2,000 rows; 1.6x faster at 10,000).
THREADED_MIN_ROWS = 4000

#: The estimator parameters that set a model's thread count (scikit-learn, LightGBM, XGBoost, CatBoost).
THREAD_PARAMETERS = ("n_jobs", "num_threads", "nthread", "thread_count")

#: Models whose ``n_jobs`` means threads. Others (logistic regression's one-vs-rest, bagging) start process pools,
#: which outlive the fit by minutes and hold the interpreter's exit until they time out, so they keep one job.
THREADED_MODELS = ("RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor",
                   "KNeighborsClassifier", "KNeighborsRegressor")

#: Libraries whose every thread option is native threads.
THREADED_LIBRARIES = ("lightgbm", "xgboost", "catboost")


def _takes_threads(owner: Any) -> bool:
    cls = type(owner)
    return cls.__name__ in THREADED_MODELS or cls.__module__.split(".")[0] in THREADED_LIBRARIES


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_n_jobs(n_jobs: Optional[int]) -> int:
    """The number of cores ``n_jobs`` asks for (None: one); a ValueError for 0 or a non-integer."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) and not str(n_jobs).lstrip("-").isdigit():
        raise ValueError(f"n_jobs must be a whole number of cores (-1: all of them); got {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs must not be 0: use a positive number of cores, or -1 for all of them")
    cores = available_cores()
    return min(n_jobs, cores) if n_jobs > 0 else max(1, cores + 1 + n_jobs)


def set_model_threads(model: Any, threads: int) -> Any:
    """Give the thread option of ``model`` and of each estimator nested in it ``threads`` where that option means
    threads (:data:`THREADED_MODELS`, :data:`THREADED_LIBRARIES`); returns the model."""
    get_params = getattr(model, "get_params", None)
    if get_params is None or threads is None:
        return model
    try:
        params = get_params(deep=True)
    except Exception:  # noqa: BLE001 - an estimator whose parameters cannot be listed keeps its own threads
        return model
    wanted = {}
    for name, value in params.items():
        owner_path, _, option = name.rpartition("__")
        owner = params.get(owner_path) if owner_path else model
        if option in THREAD_PARAMETERS and not isinstance(value, bool) and _takes_threads(owner):
            wanted[name] = int(threads)
    if wanted:
        model.set_params(**wanted)
    return model


class ThreadedBuild:
    """``build(config, seed)`` whose models use ``threads`` threads; picklable when ``build`` is, so a worker
    process (or a Dask worker) builds the same model."""

    def __init__(self, build: Callable[[dict, int], Any], threads: int):
        self.build = build.build if isinstance(build, ThreadedBuild) else build
        self.threads = int(threads)

    def __call__(self, config: dict, seed: int) -> Any:
        return set_model_threads(self.build(config, seed), self.threads)

    def __eq__(self, other) -> bool:  # an evaluator rebuilt from another's settings has an equal build
        return isinstance(other, ThreadedBuild) and (self.build, self.threads) == (other.build, other.threads)

    def __hash__(self) -> int:
        return hash((self.build, self.threads))

    def __repr__(self) -> str:
        return f"ThreadedBuild({self.build!r}, threads={self.threads})"


def with_threads(build: Callable[[dict, int], Any], threads: Optional[int]) -> Callable[[dict, int], Any]:
    """``build`` whose models use ``threads`` threads; ``build`` itself for one thread or None."""
    if threads is None or int(threads) <= 1:
        return build.build if isinstance(build, ThreadedBuild) else build
    return ThreadedBuild(build, threads)
