"""auto-sklearn adapter: DivBO / OptDivBO inside auto-sklearn's own SMAC loop, switched on by one keyword.

auto-sklearn builds its SMAC object through a public hook, ``get_smac_object_callback``. :func:`optdiv_smac`
returns such a callback. It builds SMAC exactly as auto-sklearn's default ``get_smac_object`` does (same
scenario, run history, ``RunHistory2EPM4LogCost``, intensifier, meta-learning initial design, random
forest, EI and random interleaving) and swaps one class: the acquisition maximiser. The replacement runs
SMAC's own local + sorted random search, then re-orders SMAC's whole candidate list with the core's
:class:`~optdiv.core.selector.DiversityAwareSelector` (EI rank + w(t) * diversity rank)::

    from autosklearn.classification import AutoSklearnClassifier
    from optdiv.integrations.autosklearn import optdiv_smac

    callback = optdiv_smac(method="optdivbo")
    automl = AutoSklearnClassifier(time_left_for_this_task=120, get_smac_object_callback=callback)
    automl.fit(X, y)
    print(callback.report.summary())

:class:`OptDivAutoSklearnClassifier` / :class:`OptDivAutoSklearnRegressor` are the same with an
``optdiv="optdivbo" | "divbo" | False`` keyword: plain subclasses that hand the callback to auto-sklearn's
hook, no patching.

Data the selector sees: every finished SMAC run whose status is SUCCESS (or DONOTADVANCE) is mapped by its
``additional_info["num_run"]`` to auto-sklearn's run folder ``runs/<seed>_<num_run>_<budget>/`` and its
``predictions_ensemble_*.npy`` (auto-sklearn's validation, i.e. "optimisation set", predictions) is read
once and kept in memory, because auto-sklearn deletes the folders of weak runs later
(``max_models_on_disc``). Targets come from ``backend.load_targets_ensemble()``. Crashed, timed-out and
memory-out runs write no predictions and are skipped. auto-sklearn's ensemble builder still makes the
final ensemble; :func:`ensemble_members` lists it.

auto-sklearn's metric: when optdiv computes it exactly (accuracy, log_loss, r2, mean_squared_error, ...; the
metric vocabulary's :func:`~optdiv.core.metric_vocabulary.resolve` knows it) the selector uses that loss; any
other metric (balanced_accuracy, f1, roc_auc, a custom scorer) builds the temporary pool with auto-sklearn's
own ``calculate_loss`` for it, as its ensemble builder does, and measures diversity with the vocabulary's kind
for it (the black-box mix for classification).

Several workers (``n_jobs > 1``): configurations SMAC has submitted and not yet finished (RUNNING in its run
history) enter the selector for that call with believed predictions, the mean of their three nearest
finished runs' predictions (:mod:`optdiv.core.believers`, the engine's rule), so the next suggestion is
diverse against them too.

Host internals this relies on are checked when auto-sklearn builds SMAC (:func:`check_host`): a changed
host raises :class:`HostVersionError` instead of quietly searching in SMAC's own order.

Written against auto-sklearn 0.15.0 and SMAC 1.2 (:data:`WRITTEN_FOR`; both imported lazily: importing this
module does not need them). Differences from the papers, where a host sets the terms: candidates are SMAC's (5,000
sorted random configurations plus local-search results, acq_opt_challengers) and the performance
acquisition is SMAC's EI on log cost; auto-sklearn's initial design (default + meta-learning
configurations) replaces the papers' five random suggestions; SMAC's random interleaving (rand_prob)
is kept, so roughly every other suggestion is a random configuration that no maximiser sees.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np

from optdiv.core.believers import believed_predictions
from optdiv.core.metric_vocabulary import resolve, resolve_host
from optdiv.core.selector import DIVERSITY_METHODS, DiversityAwareSelector
from optdiv.integrations.host_check import Problems, covers, parameters as _parameters, refers_to, same

logger = logging.getLogger(__name__)

__all__ = [
    "OptDivSMAC",
    "OptDivReport",
    "HostVersionError",
    "WRITTEN_FOR",
    "check_host",
    "optdiv_smac",
    "selector_metric",
    "ensemble_members",
    "OptDivAutoSklearnClassifier",
    "OptDivAutoSklearnRegressor",
]


def selector_metric(autosklearn_metric: Optional[str], classification: bool) -> str:
    """The selector's loss for an auto-sklearn metric name: the metric vocabulary's host reading
    (:func:`~optdiv.core.metric_vocabulary.resolve_host`), so a classification metric optdiv cannot compute
    per example (balanced_accuracy, f1, roc_auc, ...) uses 0/1 error's pool and black-box diversity."""
    name = None if autosklearn_metric is None else str(autosklearn_metric)
    return resolve_host(name, "classification" if classification else "regression").name


def computes_exactly(autosklearn_metric: str, classification: bool) -> bool:
    """Whether optdiv computes this auto-sklearn metric itself (the vocabulary's exact tier: a loss or an
    alias such as accuracy or r2); if not, the pool is built with auto-sklearn's own loss for it."""
    try:
        resolve(str(autosklearn_metric), "classification" if classification else "regression")
    except ValueError:
        return False
    return True


class _HostLoss:
    """auto-sklearn's loss for its Scorer (lower is better) on an averaged prediction: the number its own
    ensemble builder minimises, so the temporary pool is chosen the way auto-sklearn's ensemble will be."""

    def __init__(self, scorer, task_type: int):
        self.scorer, self.task_type = scorer, int(task_type)

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        from autosklearn.metrics import calculate_loss

        return float(calculate_loss(y_true, y_pred, self.task_type, self.scorer))

    def __repr__(self) -> str:
        return f"<auto-sklearn loss of {self.scorer.name}>"


# --------------------------------------------------------------------------- #
# The host internals the adapter relies on, checked when SMAC is built
# --------------------------------------------------------------------------- #

#: The host versions this adapter was written and tested for.
WRITTEN_FOR = "auto-sklearn 0.15.0 with SMAC 1.2"


class HostVersionError(RuntimeError):
    """auto-sklearn or SMAC differ from the versions the adapter was written for in something it relies on."""


#: ``autosklearn.smbo.get_smac_object``'s parameters, in order: ``OptDivSMAC.__call__`` mirrors that function.
_GET_SMAC_OBJECT = ("scenario_dict", "seed", "ta", "ta_kwargs", "metalearning_configurations", "n_jobs",
                    "dask_client", "multi_objective_algorithm", "multi_objective_kwargs")
_SMAC4AC_KEYWORDS = ("scenario", "rng", "runhistory2epm", "tae_runner", "tae_runner_kwargs",
                     "initial_configurations", "run_id", "intensifier", "dask_client", "n_jobs",
                     "multi_objective_algorithm", "multi_objective_kwargs", "acquisition_function_optimizer",
                     "acquisition_function_optimizer_kwargs")
_MAXIMIZER_INIT = ("self", "acquisition_function", "config_space", "rng", "max_steps", "n_steps_plateau_walk",
                   "n_sls_iterations")
_BACKEND_METHODS = {"get_numrun_directory": ("seed", "num_run", "budget"),
                    "get_prediction_filename": ("subset", "automl_seed", "idx", "budget"),
                    "load_targets_ensemble": (), "load_datamanager": ()}


def _host_problems(backend=None, ta_kwargs=None) -> List[str]:
    """Every relied-on host internal that is missing or has another signature (empty: all as expected)."""
    problems = Problems()
    if ta_kwargs is not None:
        missing = [key for key in ("backend", "metrics") if key not in ta_kwargs]
        if missing:
            problems.append(f"the callback's ta_kwargs: missing {', '.join(missing)}")

    def get_smac_object():
        from autosklearn.smbo import get_smac_object

        return same(_parameters(get_smac_object), _GET_SMAC_OBJECT)

    def smac4ac():
        from smac.facade.smac_ac_facade import SMAC4AC

        return covers(_parameters(SMAC4AC.__init__), _SMAC4AC_KEYWORDS)

    def maximizer():
        from smac.optimizer.ei_optimization import AcquisitionFunctionMaximizer, LocalAndSortedRandomSearch

        if "_maximize" not in vars(LocalAndSortedRandomSearch):
            return "LocalAndSortedRandomSearch defines no _maximize of its own"
        if not refers_to(AcquisitionFunctionMaximizer.maximize, "_maximize"):
            return "AcquisitionFunctionMaximizer.maximize no longer calls _maximize"
        return (same(_parameters(LocalAndSortedRandomSearch.__init__), _MAXIMIZER_INIT)
                or same(_parameters(LocalAndSortedRandomSearch._maximize),
                        ("self", "runhistory", "stats", "num_points")))

    def status_type():
        from smac.tae import StatusType

        return covers([s.name for s in StatusType], ("SUCCESS", "DONOTADVANCE", "RUNNING"))

    def run_history():
        from smac.runhistory.runhistory import RunHistory, RunKey, RunValue

        rh = RunHistory()
        found = covers([n for n in ("data", "ids_config", "config_ids", "get_all_configs") if hasattr(rh, n)],
                       ("data", "ids_config", "config_ids", "get_all_configs"))
        return (found or covers(RunKey._fields, ("config_id", "budget"))
                or covers(RunValue._fields, ("status", "additional_info")))

    def backend_methods():
        if backend is None:
            from autosklearn.automl_common.common.utils.backend import Backend as owner
        else:
            owner = backend
        for name, params in _BACKEND_METHODS.items():
            method = getattr(owner, name, None)
            if method is None:
                return f"no {name}"
            actual = [p for p in _parameters(method) if p != "self"]
            if tuple(actual) != params:
                return f"{name}{tuple(actual)}, expected {name}{params}"
        return None

    def loss():
        from autosklearn.metrics import calculate_loss

        return covers(_parameters(calculate_loss)[:4], ("solution", "prediction", "task_type", "metric"))

    def task_constants():
        import autosklearn.constants as constants

        names = ("BINARY_CLASSIFICATION", "MULTICLASS_CLASSIFICATION", "MULTILABEL_CLASSIFICATION", "REGRESSION",
                 "MULTIOUTPUT_REGRESSION")
        return covers([n for n in names if hasattr(constants, n)], names)

    problems.check("autosklearn.smbo.get_smac_object (the callback mirrors it)", get_smac_object)
    problems.check("smac SMAC4AC keywords", smac4ac)
    problems.check("smac LocalAndSortedRandomSearch (the maximiser subclasses it)", maximizer)
    problems.check("smac StatusType", status_type)
    problems.check("smac RunHistory / RunKey / RunValue", run_history)
    problems.check("auto-sklearn backend (run folders, prediction files, targets)", backend_methods)
    problems.check("autosklearn.metrics.calculate_loss", loss)
    problems.check("autosklearn.constants task types", task_constants)
    return problems


def _installed() -> str:
    versions = []
    for module, label in (("autosklearn", "auto-sklearn"), ("smac", "SMAC")):
        try:
            versions.append(f"{label} {__import__(module).__version__}")
        except Exception:  # not installed or no version attribute
            versions.append(f"{label} (version unknown)")
    return " with ".join(versions)


def check_host(backend=None, ta_kwargs: Optional[Dict] = None) -> None:
    """Raise :class:`HostVersionError` unless every auto-sklearn / SMAC internal the adapter relies on is there
    with the expected signature (``backend``, ``ta_kwargs``: also check what auto-sklearn handed the callback).
    Called when SMAC is built, so an incompatible host stops the fit at its start instead of searching in
    SMAC's order unnoticed."""
    problems = _host_problems(backend, ta_kwargs)
    if problems:
        raise HostVersionError(
            f"optdiv's auto-sklearn adapter was written for {WRITTEN_FOR} and relies on internals that differ "
            f"in this environment ({_installed()}):\n  - " + "\n  - ".join(problems)
            + f"\nInstall {WRITTEN_FOR} (pip install auto-sklearn==0.15.0), or fit without optdiv.")


# --------------------------------------------------------------------------- #
# Report: the proof that (and how) the optdiv maximiser ran
# --------------------------------------------------------------------------- #


class OptDivReport:
    """What the optdiv maximiser did during one auto-sklearn fit.

    ``calls`` holds one dict per call of the maximiser (SMAC asks it only after the initial design, and
    only when its random interleaving does not pick a random configuration): ``finished_runs`` (finished
    runs in SMAC's history at that moment), ``observations`` (runs with predictions), ``candidates``, ``weight``
    w(t), ``diversity_ranked`` (the diversity rank entered the order), ``changed`` (the first new
    candidate has a lower EI than SMAC's best), ``ei_rank`` of the chosen candidate, ``config`` (the chosen
    candidate as a dict: the configuration SMAC runs next), ``running`` (configurations still being evaluated
    that entered the selector with believed predictions), ``pool_size`` and ``seconds``.

    ``metric`` is the vocabulary's loss that sets the diversity kind; ``pool_metric`` what the temporary pool
    minimises: the same loss, or auto-sklearn's metric name (e.g. ``"roc_auc"``) when optdiv cannot compute
    that metric and the pool uses auto-sklearn's own loss for it.
    """

    def __init__(self, method: str):
        self.method = method
        self.metric: Optional[str] = None
        self.pool_metric: Optional[str] = None
        self.initial_design_size: Optional[int] = None
        self.calls: List[Dict[str, Any]] = []
        self.n_fallbacks = 0
        self.runs_read = 0
        self.runs_skipped = 0
        self.last_error: Optional[str] = None

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def n_diversity_ranked(self) -> int:
        """Suggestions whose order the diversity rank entered (weight > 0 and a fitted surrogate)."""
        return sum(1 for c in self.calls if c["diversity_ranked"])

    @property
    def n_changed(self) -> int:
        """Suggestions where diversity picked another configuration than EI alone would have."""
        return sum(1 for c in self.calls if c["changed"])

    @property
    def n_with_running(self) -> int:
        """Suggestions made while other configurations were running, which the selector took into account."""
        return sum(1 for c in self.calls if c["running"])

    def summary(self) -> str:
        return (f"optdiv ({self.method}, pool on {self.pool_metric}): {self.n_calls} maximiser calls, "
                f"{self.n_diversity_ranked} diversity-ranked, {self.n_changed} changed by diversity, "
                f"{self.n_with_running} with running configurations; runs read {self.runs_read}, "
                f"skipped {self.runs_skipped} (failed or without predictions); fallbacks {self.n_fallbacks}")

    def __repr__(self) -> str:
        return f"<OptDivReport {self.summary()}>"


# --------------------------------------------------------------------------- #
# Run predictions (host types stay here; the core sees arrays)
# --------------------------------------------------------------------------- #


class _RunPredictions:
    """Validation predictions of every successful run, read once from auto-sklearn's run folders."""

    def __init__(self, backend, autosklearn_seed: int, encoder, report: OptDivReport):
        self.backend, self.seed, self.encoder, self.report = backend, int(autosklearn_seed), encoder, report
        self._done: set = set()
        self.num_runs: List[int] = []
        self.config_ids: List[int] = []
        self.X: List[np.ndarray] = []
        self.preds: List[np.ndarray] = []
        self._y: Optional[np.ndarray] = None
        self._shape: Optional[tuple] = None

    def path(self, num_run: int, budget: float) -> str:
        folder = self.backend.get_numrun_directory(self.seed, num_run, budget)
        return os.path.join(folder, self.backend.get_prediction_filename("ensemble", self.seed, num_run, budget))

    def update(self, runhistory) -> None:
        from smac.tae import StatusType

        usable = (StatusType.SUCCESS, StatusType.DONOTADVANCE)
        for key, value in list(runhistory.data.items()):
            if key in self._done or value.status == StatusType.RUNNING:
                continue
            self._done.add(key)
            num_run = (value.additional_info or {}).get("num_run")
            if value.status not in usable or num_run is None:
                self.report.runs_skipped += 1
                continue
            path = self.path(int(num_run), key.budget)
            try:
                with open(path, "rb") as fh:
                    arr = np.load(fh, allow_pickle=True)
            except (OSError, ValueError, EOFError) as exc:  # deleted, not written (disable_evaluator_output)
                logger.debug("optdiv: no predictions for run %s (%s)", num_run, exc)
                self.report.runs_skipped += 1
                continue
            arr = np.asarray(arr, dtype=np.float32)
            if arr.ndim == 2 and arr.shape[1] == 1:
                arr = arr[:, 0]
            if self._shape is None:
                self._shape = arr.shape
            if arr.shape != self._shape or not np.all(np.isfinite(arr)):
                logger.warning("optdiv: skipping run %s: predictions of shape %s (expected %s) or non-finite",
                               num_run, arr.shape, self._shape)
                self.report.runs_skipped += 1
                continue
            self.num_runs.append(int(num_run))
            self.config_ids.append(int(key.config_id))
            self.X.append(self.encoder.encode([runhistory.ids_config[key.config_id]])[0])
            self.preds.append(arr)
            self.report.runs_read += 1

    def running(self, runhistory) -> List[int]:
        """Config ids of the runs SMAC has submitted and not finished (several workers), without any already
        observed, in run-history order."""
        from smac.tae import StatusType

        observed, out = set(self.config_ids), []
        for key, value in list(runhistory.data.items()):
            if value.status == StatusType.RUNNING and key.config_id not in observed and key.config_id not in out:
                out.append(int(key.config_id))
        return out

    def targets(self, classification: bool) -> np.ndarray:
        if self._y is None:
            y = np.asarray(self.backend.load_targets_ensemble())
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1:
                raise ValueError(f"optdiv supports single-target tasks; auto-sklearn's targets have shape {y.shape}")
            if classification:
                if not np.all(np.equal(np.mod(y, 1), 0)):
                    raise ValueError("auto-sklearn's classification targets are not class indices")
                y = y.astype(np.int64)
            else:
                y = y.astype(np.float64)
            self._y = y
        return self._y


# --------------------------------------------------------------------------- #
# The maximiser (a SMAC class, built on first use so that importing this module needs no SMAC)
# --------------------------------------------------------------------------- #

_CLASSES: Dict[str, type] = {}


def _maximizer_class() -> type:
    if "maximizer" in _CLASSES:
        return _CLASSES["maximizer"]
    from smac.optimizer.ei_optimization import LocalAndSortedRandomSearch
    from smac.tae import StatusType

    from optdiv.spaces.encoding import ConfigEncoder

    class OptDivLocalAndSortedRandomSearch(LocalAndSortedRandomSearch):
        """SMAC's default maximiser, whose candidate list is re-ordered by the diversity-aware selector.

        SMAC's ChallengerList hands the intensifier the first configuration of the returned list that was
        not run yet, so the order is the suggestion. Already-run candidates are moved to the end.
        """

        def __init__(self, acquisition_function, config_space, rng=None, max_steps=None,
                     n_steps_plateau_walk=10, n_sls_iterations=10, *, selector, backend,
                     autosklearn_seed, classification, report, strict=False):
            super().__init__(acquisition_function, config_space, rng, max_steps=max_steps,
                             n_steps_plateau_walk=n_steps_plateau_walk, n_sls_iterations=n_sls_iterations)
            self.selector = selector
            self.classification = bool(classification)
            self.report = report
            self.strict = bool(strict)
            self.encoder = ConfigEncoder(config_space)
            self.runs = _RunPredictions(backend, autosklearn_seed, self.encoder, report)

        def _maximize(self, runhistory, stats, num_points):
            ranked = super()._maximize(runhistory, stats, num_points)
            start = time.perf_counter()
            try:
                return self._rerank(ranked, runhistory, start)
            except Exception as exc:  # never let a diversity problem stop auto-sklearn's search
                if self.strict:
                    raise
                self.report.n_fallbacks += 1
                self.report.last_error = f"{type(exc).__name__}: {exc}"
                logger.warning("optdiv: diversity re-ranking failed (%s); using SMAC's EI order", exc)
                return ranked

        def _rerank(self, ranked, runhistory, start):
            self.runs.update(runhistory)
            n_obs = len(self.runs.num_runs)
            used = set(runhistory.get_all_configs())
            seen, fresh, old = set(), [], []
            for acq, config in ranked:
                if config in seen:
                    continue
                seen.add(config)
                (old if config in used else fresh).append((acq, config))
            n_finished = sum(1 for value in list(runhistory.data.values()) if value.status != StatusType.RUNNING)
            call = {"finished_runs": n_finished, "observations": n_obs, "running": 0,
                    "candidates": len(fresh), "weight": 0.0, "diversity_ranked": False, "changed": False,
                    "ei_rank": 1.0, "pool_size": 0, "seconds": 0.0,
                    "config": fresh[0][1].get_dictionary() if fresh else None}
            if n_obs == 0 or not fresh:
                call["seconds"] = time.perf_counter() - start
                self.report.calls.append(call)
                return ranked
            acq = np.array([float(np.asarray(a).ravel()[0]) for a, _ in fresh], dtype=np.float64)
            finite = np.isfinite(acq)
            acq = np.where(finite, acq, acq[finite].min() if finite.any() else 0.0)
            candidates = self.encoder.encode([c for _, c in fresh])
            observations, preds = np.stack(self.runs.X), np.stack(self.runs.preds)
            if self.classification and preds.ndim != 3:
                raise ValueError(f"classification run predictions must be (rows, classes); got {preds.shape[1:]}")
            if not self.classification and preds.ndim != 2:
                raise ValueError(f"regression run predictions must be (rows,); got {preds.shape[1:]}")
            # several workers: configurations still running enter this call with believed predictions
            running = self.runs.running(runhistory)
            if running:
                running_x = self.encoder.encode([runhistory.ids_config[i] for i in running])
                believed = np.stack(believed_predictions(observations, preds, running_x))
                observations = np.concatenate([observations, running_x])
                preds = np.concatenate([preds, believed.astype(preds.dtype)])
            y = self.runs.targets(self.classification)
            selection = self.selector.select(candidates, acq, observations, preds, y,
                                             version=(n_obs, self.runs.num_runs[-1], tuple(running)))
            order = np.argsort(selection.scores, kind="stable")
            call.update(config=fresh[order[0]][1].get_dictionary(), weight=float(selection.weight),
                        running=len(running),
                        diversity_ranked=selection.div_rank is not None and selection.weight > 0,
                        changed=bool(acq[order[0]] < acq.max()),
                        ei_rank=float(selection.perf_rank[order[0]]),
                        pool_size=int(len(selection.pool_indices)),
                        seconds=time.perf_counter() - start)
            self.report.calls.append(call)
            logger.info("optdiv: %d observations, %d running, %d candidates, w=%.3f, chose EI rank %g",
                        n_obs, len(running), len(fresh), selection.weight, call["ei_rank"])
            return [fresh[i] for i in order] + old

    OptDivLocalAndSortedRandomSearch.__module__ = __name__
    OptDivLocalAndSortedRandomSearch.__qualname__ = "OptDivLocalAndSortedRandomSearch"
    _CLASSES["maximizer"] = OptDivLocalAndSortedRandomSearch
    return OptDivLocalAndSortedRandomSearch


# --------------------------------------------------------------------------- #
# The get_smac_object_callback
# --------------------------------------------------------------------------- #


class OptDivSMAC:
    """auto-sklearn ``get_smac_object_callback`` that builds SMAC like auto-sklearn, with the optdiv maximiser.

    ``method``: ``"optdivbo"`` or ``"divbo"``. ``metric``: the selector's metric (``error``, ``log_loss``,
    ``brier``, ``mse``, ``mae``, ...); default: auto-sklearn's metric, computed by optdiv where it can
    (:func:`computes_exactly`), else the pool uses auto-sklearn's own loss for it and the diversity the
    vocabulary's kind (:func:`selector_metric`). Giving ``metric`` uses that loss for the pool as well.
    ``ensemble_size``: size of the temporary pool (ensemble selection rounds). ``seed``: the selector's
    seed; default: auto-sklearn's seed. ``strict``: raise instead of falling back to SMAC's EI order
    when the re-ranking fails (tests use it). ``selector_kwargs``: further
    :class:`~optdiv.core.selector.DiversityAwareSelector` arguments (``kind``, ``beta``, ``tau``, ...).

    One object serves one fit: its :attr:`report` records what the maximiser did.
    """

    def __init__(self, method: str = "optdivbo", metric: Optional[str] = None, ensemble_size: int = 25,
                 seed: Optional[int] = None, strict: bool = False, selector_kwargs: Optional[Dict] = None):
        if method not in DIVERSITY_METHODS:
            raise ValueError(f"unknown optdiv method {method!r}; choose one of {', '.join(DIVERSITY_METHODS)}")
        if isinstance(ensemble_size, bool) or not isinstance(ensemble_size, (int, np.integer)) or ensemble_size < 1:
            raise ValueError(f"ensemble_size must be a positive integer; got {ensemble_size!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None; got {seed!r}")
        selector_kwargs = dict(selector_kwargs or {})
        clash = {"method", "metric", "ensemble_size", "seed"} & set(selector_kwargs)
        if clash:
            raise ValueError(f"pass {', '.join(sorted(clash))} as optdiv_smac arguments, not in selector_kwargs")
        if "pool_scorer" in selector_kwargs:
            raise ValueError("pool_scorer is set from auto-sklearn's metric; pass metric=... to choose the pool's loss")
        # fail now, not minutes into a fit, on a bad selector argument
        DiversityAwareSelector(method=method, metric=metric or "error", ensemble_size=int(ensemble_size),
                               **selector_kwargs)
        self.method, self.metric, self.ensemble_size = method, metric, int(ensemble_size)
        self.seed, self.strict, self.selector_kwargs = seed, bool(strict), selector_kwargs
        self.report = OptDivReport(method)

    def __repr__(self) -> str:
        return f"optdiv_smac(method={self.method!r}, metric={self.metric!r}, ensemble_size={self.ensemble_size})"

    def __call__(self, scenario_dict, seed, ta, ta_kwargs, metalearning_configurations, n_jobs, dask_client,
                 multi_objective_algorithm=None, multi_objective_kwargs=None):
        """Mirror of ``autosklearn.smbo.get_smac_object`` (0.15.0) plus the acquisition maximiser."""
        from smac.facade.smac_ac_facade import SMAC4AC
        from smac.intensification.intensification import Intensifier
        from smac.intensification.simple_intensifier import SimpleIntensifier
        from smac.runhistory.runhistory2epm import RunHistory2EPM4LogCost
        from smac.scenario.scenario import Scenario

        check_host(ta_kwargs.get("backend"), ta_kwargs)  # before anything is built: a changed host fails here
        if multi_objective_algorithm is not None:
            raise ValueError("optdiv needs a single auto-sklearn metric; got several (multi-objective search)")
        backend = ta_kwargs["backend"]
        task_type = backend.load_datamanager().info["task"]
        classification = self._is_classification(task_type)
        metrics = ta_kwargs.get("metrics") or []
        host_metric = metrics[0] if metrics else None
        pool_scorer = None
        if self.metric is not None:
            metric = pool_metric = self.metric
        else:  # auto-sklearn's metric: optdiv's own loss where it computes it, else the host's loss for the pool
            metric = pool_metric = selector_metric(None if host_metric is None else host_metric.name, classification)
            if host_metric is not None and not computes_exactly(host_metric.name, classification):
                pool_scorer, pool_metric = _HostLoss(host_metric, task_type), str(host_metric.name)
                if self.selector_kwargs.get("pool_builder", "caruana") != "caruana":
                    raise ValueError(
                        f"optdiv does not compute auto-sklearn's metric {host_metric.name!r}, so the pool is built "
                        f"with auto-sklearn's loss for it, which needs pool_builder='caruana'; pass metric=... "
                        f"(e.g. 'error') to build a {self.selector_kwargs['pool_builder']} pool on that loss")
        self.report.metric, self.report.pool_metric = metric, pool_metric
        selector = DiversityAwareSelector(method=self.method, metric=metric, ensemble_size=self.ensemble_size,
                                          seed=int(seed) if self.seed is None else int(self.seed),
                                          pool_scorer=pool_scorer, **self.selector_kwargs)

        intensifier = Intensifier if len(scenario_dict["instances"]) > 1 else SimpleIntensifier
        scenario = Scenario(scenario_dict)
        if len(metalearning_configurations) > 0:
            initial_configurations = [scenario.cs.get_default_configuration()] + list(metalearning_configurations)
        else:
            initial_configurations = None
        # SMAC fills these two from the scenario only for its own default maximiser
        maximizer_kwargs = {
            "max_steps": scenario.sls_max_steps,
            "n_steps_plateau_walk": scenario.sls_n_steps_plateau_walk,
            "selector": selector,
            "backend": backend,
            "autosklearn_seed": ta_kwargs.get("autosklearn_seed", seed),
            "classification": classification,
            "report": self.report,
            "strict": self.strict,
        }
        smac = SMAC4AC(
            scenario=scenario,
            rng=seed,
            runhistory2epm=RunHistory2EPM4LogCost,
            tae_runner=ta,
            tae_runner_kwargs=ta_kwargs,
            initial_configurations=initial_configurations,
            run_id=seed,
            intensifier=intensifier,
            dask_client=dask_client,
            n_jobs=n_jobs,
            multi_objective_algorithm=multi_objective_algorithm,
            multi_objective_kwargs=multi_objective_kwargs or {},
            acquisition_function_optimizer=_maximizer_class(),
            acquisition_function_optimizer_kwargs=maximizer_kwargs,
        )
        self.report.initial_design_size = int(smac.solver.initial_design.init_budget)
        logger.info("optdiv: SMAC built with the %s maximiser (metric %s, pool on %s, initial design %d)",
                    self.method, metric, pool_metric, self.report.initial_design_size)
        return smac

    @staticmethod
    def _is_classification(task) -> bool:
        from autosklearn.constants import (BINARY_CLASSIFICATION, MULTICLASS_CLASSIFICATION,
                                           MULTILABEL_CLASSIFICATION, MULTIOUTPUT_REGRESSION, REGRESSION)

        if task in (BINARY_CLASSIFICATION, MULTICLASS_CLASSIFICATION):
            return True
        if task == REGRESSION:
            return False
        if task in (MULTILABEL_CLASSIFICATION, MULTIOUTPUT_REGRESSION):
            raise ValueError("optdiv supports binary/multiclass classification and single-output regression, "
                             "not multilabel or multi-output tasks")
        raise ValueError(f"unknown auto-sklearn task type {task!r}")


def optdiv_smac(method: str = "optdivbo", **kwargs) -> OptDivSMAC:
    """The flag: ``AutoSklearnClassifier(get_smac_object_callback=optdiv_smac("optdivbo"))``.

    Use a fresh callback per fit; ``callback.report`` tells what it did. Arguments: see :class:`OptDivSMAC`.
    """
    return OptDivSMAC(method=method, **kwargs)


def _callback_from_switch(optdiv, optdiv_kwargs) -> Optional[OptDivSMAC]:
    if optdiv is None or optdiv is False:
        return None
    if optdiv is True:
        optdiv = "optdivbo"
    if not isinstance(optdiv, str) or optdiv not in DIVERSITY_METHODS:
        raise ValueError(f"optdiv must be True, False, None or one of {', '.join(DIVERSITY_METHODS)}; got {optdiv!r}")
    if optdiv_kwargs is not None and not isinstance(optdiv_kwargs, dict):
        raise ValueError(f"optdiv_kwargs must be a dict of optdiv_smac arguments; got {type(optdiv_kwargs).__name__}")
    return OptDivSMAC(method=optdiv, **(optdiv_kwargs or {}))


# --------------------------------------------------------------------------- #
# Final ensemble and the convenience estimators
# --------------------------------------------------------------------------- #


def ensemble_members(automl) -> List[Dict[str, Any]]:
    """auto-sklearn's final ensemble: ``model_id`` (num_run), ``weight``, ``type`` and validation ``cost``,
    heaviest first (from ``leaderboard(ensemble_only=True)``)."""
    board = automl.leaderboard(ensemble_only=True)
    out = [{"model_id": int(model_id), "weight": float(row["ensemble_weight"]), "type": str(row["type"]),
            "cost": float(row["cost"])} for model_id, row in board.iterrows()]
    return sorted(out, key=lambda m: (-m["weight"], m["model_id"]))


def _estimator_class(name: str) -> type:
    if name in _CLASSES:
        return _CLASSES[name]
    if name == "OptDivAutoSklearnClassifier":
        from autosklearn.classification import AutoSklearnClassifier as base
    else:
        from autosklearn.regression import AutoSklearnRegressor as base

    def __init__(self, *, optdiv="optdivbo", optdiv_kwargs=None, **kwargs):
        base.__init__(self, **kwargs)
        self.optdiv = optdiv
        self.optdiv_kwargs = optdiv_kwargs

    def build_automl(self):
        """Hands auto-sklearn the optdiv callback through its own hook for this fit only."""
        callback = _callback_from_switch(self.optdiv, self.optdiv_kwargs)
        self.optdiv_ = callback
        if callback is None:
            return base.build_automl(self)
        if self.get_smac_object_callback is not None:
            raise ValueError("give either optdiv=... or get_smac_object_callback=..., not both")
        self.get_smac_object_callback = callback
        try:
            return base.build_automl(self)
        finally:
            self.get_smac_object_callback = None

    # scikit-learn reads the parameters from the signature: the host's keywords plus the two switches
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
              for p in inspect.signature(base.__init__).parameters.values() if p.name != "self"]
    params += [inspect.Parameter("optdiv", inspect.Parameter.KEYWORD_ONLY, default="optdivbo"),
               inspect.Parameter("optdiv_kwargs", inspect.Parameter.KEYWORD_ONLY, default=None)]
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
    doc = (f"auto-sklearn's {base.__name__} with ``optdiv='optdivbo' | 'divbo' | True | False``: the search's "
           f"acquisition maximiser re-ranks SMAC's candidates by diversity (see optdiv_smac). "
           f"``optdiv_kwargs`` go to optdiv_smac; after fit, ``optdiv_`` is the callback and "
           f"``optdiv_.report`` its report (None when optdiv is off).")
    cls = type(name, (base,), {"__init__": __init__, "build_automl": build_automl, "__doc__": doc,
                               "__module__": __name__})
    cls.__qualname__ = name
    _CLASSES[name] = cls
    return cls


def __getattr__(name: str):
    """Host classes are built on first access, so importing this module does not import auto-sklearn."""
    if name in ("OptDivAutoSklearnClassifier", "OptDivAutoSklearnRegressor"):
        cls = _estimator_class(name)
        globals()[name] = cls
        return cls
    if name == "OptDivLocalAndSortedRandomSearch":
        cls = _maximizer_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
