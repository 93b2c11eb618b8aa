"""The final ensemble's members refitted on every row within auto-sklearn's own time budget.

With a holdout, auto-sklearn's members are fitted on the training part only. Refitting them on the training and
holdout rows together is the lever that gained most in the engine and the other hosts, but auto-sklearn's own
``refit`` has no time limit and the search uses the whole budget. :class:`RefitReserve` is a SMAC trials callback
(auto-sklearn's ``get_trials_callback`` hook) that stops the search once the time left is what the likely members'
refits need; after the fit, :meth:`RefitReserve.refit` refits the members heaviest first, each only while its
predicted time fits before the deadline, and leaves the others as auto-sklearn fitted them.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, Callable, Dict, List, Optional

logger = logging.getLogger(__name__)

#: auto-sklearn's resampling strategies whose members are fitted on part of the rows (the others already use all).
HOLDOUT_STRATEGIES = ("holdout", "holdout-iterative-fit")
#: auto-sklearn's default holdout training share.
DEFAULT_TRAIN_SIZE = 0.67
#: Predicted refit = the run's recorded time x the rows' growth x this: a run's time also covers its predictions, so
#: it already overstates the fit; the factor covers slower fits on the larger rows.
REFIT_MARGIN = 1.25
#: Members whose refits the search keeps time for: the best runs by validation cost (the ensemble's likely heaviest).
RESERVED_MEMBERS = 3
#: The reserve never takes more than this share of the budget: the search still needs the time to find members.
RESERVE_CAP = 0.3
#: What auto-sklearn does after the search stops (the last ensemble build, loading the members), in seconds.
AFTER_SEARCH_SECONDS = 6.0


def holdout_train_size(resampling_strategy, resampling_strategy_arguments) -> Optional[float]:
    """The training share of a holdout strategy, or None where the members already see every row (or the split
    is a user's object whose rows optdiv cannot know)."""
    if not isinstance(resampling_strategy, str) or resampling_strategy not in HOLDOUT_STRATEGIES:
        return None
    size = (resampling_strategy_arguments or {}).get("train_size", DEFAULT_TRAIN_SIZE)
    size = float(size)
    return size if 0.0 < size < 1.0 else None


class RefitReserve:
    """A SMAC trials callback that keeps time for the refit, then the refit itself.

    ``budget``: the fit's whole time in seconds (auto-sklearn's ``time_left_for_this_task``); ``train_size``: the
    holdout's training share (the refit fits ``1 / train_size`` times the rows); ``chained``: the user's own trials
    callback, called first (its False still stops the search). After the fit, ``refits`` lists one dict per member:
    ``num_run``, ``weight``, ``predicted`` and ``seconds`` (None when not run), ``refitted`` and, when it failed,
    ``error``; ``stopped_search`` is the fit's elapsed time when the reserve stopped the search (None if it did not).
    """

    def __init__(self, budget: float, train_size: float, chained: Optional[Callable] = None,
                 clock: Callable[[], float] = time.monotonic):
        if not budget or budget <= 0:
            raise ValueError(f"budget must be a positive number of seconds; got {budget!r}")
        if not 0.0 < train_size < 1.0:
            raise ValueError(f"train_size must be in (0, 1); got {train_size!r}")
        self.budget, self.train_size, self.chained, self.clock = float(budget), float(train_size), chained, clock
        self.growth = 1.0 / self.train_size
        self.started: Optional[float] = None
        self.runs: Dict[int, Dict[str, float]] = {}
        self.refits: List[Dict[str, Any]] = []
        self.stopped_search: Optional[float] = None
        self.refit_seconds = 0.0

    def start(self) -> None:
        """Starts the fit's clock (the estimator calls it as its fit begins)."""
        self.started = self.clock()
        self.runs, self.refits, self.stopped_search, self.refit_seconds = {}, [], None, 0.0

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def predicted(self, num_run: int) -> Optional[float]:
        """Predicted refit seconds of a run, None for a run the search did not record."""
        run = self.runs.get(int(num_run))
        return None if run is None else run["seconds"] * self.growth * REFIT_MARGIN

    def reserve_seconds(self) -> float:
        """The time kept for the refit: the best recorded runs' predicted refits, at most RESERVE_CAP x budget."""
        best = sorted(self.runs, key=lambda n: (self.runs[n]["cost"], n))[:RESERVED_MEMBERS]
        return min(sum(self.predicted(n) for n in best), RESERVE_CAP * self.budget)

    def record(self, num_run: Any, cost: Any, seconds: Any) -> None:
        """Records a successful run (num_run from auto-sklearn's additional info)."""
        try:
            self.runs[int(num_run)] = {"cost": float(cost), "seconds": max(float(seconds), 0.0)}
        except (TypeError, ValueError):
            return

    def __call__(self, smbo, run_info, result, time_left) -> Optional[bool]:
        """SMAC's trials callback: False stops the search once only the reserve is left."""
        answer = self.chained(smbo, run_info, result, time_left) if self.chained is not None else None
        if answer is False:
            return False
        if getattr(getattr(result, "status", None), "name", "") == "SUCCESS":
            info = getattr(result, "additional_info", None) or {}
            self.record(info.get("num_run"), result.cost, result.time)
        if self.started is None:
            return answer
        left = self.budget - self.elapsed()
        if left <= self.reserve_seconds() + AFTER_SEARCH_SECONDS:
            self.stopped_search = round(self.elapsed(), 1)
            logger.info("optdiv stopped auto-sklearn's search at %.1f s to refit the final members", self.elapsed())
            return False
        return answer

    def refit(self, automl, X, y) -> List[Dict[str, Any]]:
        """Refits the final ensemble's members of a fitted auto-sklearn estimator on ``X, y`` (the rows given to
        fit), heaviest first while each prediction fits the time left; a failed refit keeps the member as it was."""
        inner = automl.automl_
        if inner.ensemble_ is None or not inner.models_:
            inner._load_models()
        if inner.ensemble_ is None or not inner.models_:
            return self.refits
        X_all, y_all = inner.InputValidator.transform(X, y)
        searched = _searched_rows(inner)
        if searched:  # auto-sklearn's dataset compression may have searched on a row sample
            self.growth = max(len(y_all) / (searched * self.train_size), 1.0)
        members = sorted(inner.ensemble_.get_identifiers_with_weights(), key=lambda pair: (-pair[1], pair[0]))
        began = self.clock()
        for identifier, weight in members:
            if weight <= 0 or identifier not in inner.models_:
                continue
            num_run = int(identifier[1])
            predicted = self.predicted(num_run)
            entry: Dict[str, Any] = {"num_run": num_run, "weight": float(weight), "refitted": False,
                                     "predicted": None if predicted is None else round(predicted, 2), "seconds": None}
            self.refits.append(entry)
            if predicted is None or self.elapsed() + predicted > self.budget:
                continue
            start = self.clock()
            try:
                model = copy.deepcopy(inner.models_[identifier])
                _fit_quietly(inner, model, X_all, y_all)
            except Exception as error:  # one member's failure keeps it as fitted; the others still refit
                entry["error"] = f"{type(error).__name__}: {error}"[:300]
                logger.warning("optdiv could not refit auto-sklearn run %d (%s); it keeps its holdout fit",
                               num_run, entry["error"])
            else:
                inner.models_[identifier] = model
                entry["refitted"] = True
            entry["seconds"] = round(self.clock() - start, 2)
        self.refit_seconds = round(self.clock() - began, 2)
        return self.refits

    def summary(self) -> Dict[str, Any]:
        """What the reserve did in the last fit, for logs and benchmark records."""
        done = [r for r in self.refits if r["refitted"]]
        return {"stopped_search": self.stopped_search, "members": len(self.refits), "refitted": len(done),
                "refitted_weight": round(sum(r["weight"] for r in done), 4), "refit_seconds": self.refit_seconds,
                "failed": sum("error" in r for r in self.refits)}


def _searched_rows(inner) -> Optional[int]:
    """The rows auto-sklearn's search split into training and holdout (fewer than given when its dataset
    compression subsampled them), or None where its data manager cannot be read."""
    try:
        return int(len(inner._backend.load_datamanager().data["Y_train"]))
    except Exception:  # no backend or data manager: keep the growth the search assumed
        return None


def refit_threads(n_jobs) -> Optional[int]:
    """Threads for the refits: the cores auto-sklearn was given (None: all, for ``n_jobs=-1``). auto-sklearn runs
    each evaluation on one thread, so its recorded times predict a refit on as many; unlimited OpenMP threads on a
    busy machine run slower than one (a histogram boosting fit 2.2 times slower on two threads beside one busy
    process, and a refit beside a second auto-sklearn fit took 186 s where its run had taken under 14 s)."""
    if n_jobs is None:
        return 1
    n_jobs = int(n_jobs)
    return None if n_jobs < 0 else max(n_jobs, 1)


def _fit_quietly(inner, model, X, y) -> None:
    """Fits one member as auto-sklearn's own refit does (its warnings to auto-sklearn's log), on the threads
    auto-sklearn was given."""
    from autosklearn.evaluation.abstract_evaluator import _fit_and_suppress_warnings
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=refit_threads(getattr(inner, "_n_jobs", 1))):
        _fit_and_suppress_warnings(inner._logger, model, X, y)
