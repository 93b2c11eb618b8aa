"""OpenBox adapter: DivBO / OptDivBO as an option of OpenBox 0.9's own advisors and optimizers.

Everything of OpenBox stays: its space (``openbox.space.Space`` or ConfigSpace), initial design, surrogate
(PRF or GP), EI (constrained EI with constraints), acquisition maximiser, random interleaving
(``rand_prob``), batch strategies, history and the ask/tell, ``Optimizer`` and ``ParallelOptimizer`` loops.
The option changes one step: OpenBox's maximiser returns its candidate list (about 5,000 configurations
sorted by EI); the advisor re-orders that list with the core's
:class:`~optdiv.core.selector.DiversityAwareSelector` (EI rank + w(t) * diversity rank) before OpenBox
takes the first configuration it has not evaluated yet::

    from openbox import Observation
    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble

    advisor = OptDivAdvisor(space, y_val=y_val, metric="error", method="optdivbo", random_state=0)
    for _ in range(40):
        config = advisor.get_suggestion()
        loss, val_proba = fit_and_score(config)          # your code: (rows, classes) probabilities
        advisor.update_observation(Observation(config, [loss], extra_info={"val_pred": val_proba}))
    members = final_ensemble(advisor)                     # Caruana ensemble over the history

With OpenBox's ``Optimizer`` the objective returns ``{"objectives": [loss], "extra_info": {"val_pred": p}}``
and :class:`OptDivOptimizer` takes one extra argument, ``optdiv=dict(y_val=y_val, metric="error")``;
:class:`OptDivParallelOptimizer` does the same for ``ParallelOptimizer`` (sync and async).

Parallel batches: a suggestion made while other configurations are in flight (the earlier slots of a
batch, or the trials still running in async mode) treats them as pending observations whose validation
predictions are *believed* (:func:`optdiv.core.believers.believed_predictions`, the rule the engine and the
auto-sklearn adapter use), so the slots of a batch cover different behaviour. OpenBox's batch strategy
still sets the performance side of each slot: ``"default"`` ranks every slot from one candidate list,
``"median_imputation"`` refits the surrogate with the median loss imputed for the configurations in flight.

Where the validation predictions live: :meth:`OptDivAdvisor.update_observation` moves the array out of
``extra_info`` into the advisor's own store and leaves the integer marker ``extra_info["optdiv_pred"]``
in its place, so OpenBox's ``History.save_json`` keeps working and stays small. Failed trials (any
``trial_state`` other than SUCCESS, or predictions with NaN/inf, which are recorded as FAILED like the
engine's failed runs) keep OpenBox's handling for the surrogate (the worst observed loss) and never
enter the pool or the final ensemble; nor do infeasible trials (a constraint value above 0).

``method=None`` switches the option off: the advisor then suggests exactly what the OpenBox advisor it
extends suggests with the same arguments (predictions are still kept, for :func:`final_ensemble`).

Differences from the papers, where OpenBox sets the terms (see docs/openbox.md): the candidates and
EI are OpenBox's; OpenBox's initial design (``initial_trials``, default 3) and ``rand_prob`` (0.1, only
in ``get_suggestion``; OpenBox's ``Optimizer`` calls ``get_suggestions``, which has none) replace the
papers' five random suggestions and 20% random picks.

Written against OpenBox 0.9.0 with ConfigSpace 0.6.1; OpenBox is imported when this module is. The
OpenBox internals the option relies on are checked when an advisor with the option on is built
(:func:`check_host`): a changed OpenBox raises :class:`HostVersionError` instead of searching in OpenBox's
own order unnoticed.
"""

from __future__ import annotations

import inspect
import logging
import os
import pickle
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from ConfigSpace import Configuration
from openbox.core.async_batch_advisor import AsyncBatchAdvisor
from openbox.core.generic_advisor import Advisor
from openbox.core.sync_batch_advisor import SyncBatchAdvisor
from openbox.optimizer.generic_smbo import SMBO
from openbox.optimizer.parallel_smbo import pSMBO
from openbox.utils.constants import FAILED, SUCCESS

from optdiv.spaces.encoding import ConfigEncoder
from optdiv.core.believers import believed_predictions
from optdiv.core.ensemble import ensemble_predict
from optdiv.core.metrics import mean_loss
from optdiv.core.metric_vocabulary import TASKS, resolve_host, task_of
from optdiv.core.selector import DIVERSITY_METHODS, DiversityAwareSelector, pool_loss
from optdiv.integrations.host_check import Problems, covers, parameters as _parameters, refers_to, same

logger = logging.getLogger(__name__)

__all__ = [
    "OptDivAdvisor",
    "OptDivSyncBatchAdvisor",
    "OptDivAsyncBatchAdvisor",
    "OptDivOptimizer",
    "OptDivParallelOptimizer",
    "EnsembleMembers",
    "HostVersionError",
    "check_host",
    "final_ensemble",
    "encode_configurations",
    "PRED_KEY",
    "MARKER_KEY",
]

#: ``extra_info`` key under which the objective reports its validation predictions.
PRED_KEY = "val_pred"
#: ``extra_info`` key the advisor leaves behind: the index of the predictions in its store.
MARKER_KEY = "optdiv_pred"
#: ``method`` values that switch the diversity option off (plain OpenBox suggestions).
OFF = (None, False, "off", "none", "bo")
#: The file format version of :meth:`OptDivAdvisor.save`.
SAVE_FORMAT = 1
#: OpenBox batch strategies under which every slot goes through the re-ranked candidate list.
BATCH_STRATEGIES = ("default", "median_imputation")


# --------------------------------------------------------------------------- #
# The OpenBox internals the option relies on
# --------------------------------------------------------------------------- #

#: The host version this adapter was written and tested for.
WRITTEN_FOR = "OpenBox 0.9.0"


class HostVersionError(RuntimeError):
    """OpenBox differs from the version the adapter was written for in something the option relies on."""


#: Arguments the optimizers hand to the advisors they build (OpenBox's own factory passes the same).
_ADVISOR_KEYWORDS = ("num_objectives", "num_constraints", "initial_trials", "initial_configurations",
                     "init_strategy", "transfer_learning_history", "rand_prob", "optimization_strategy",
                     "surrogate_type", "acq_type", "acq_optimizer_type", "ref_point", "early_stop",
                     "early_stop_kwargs", "output_dir", "task_id", "random_state", "logger_kwargs")
#: ``Optimizer`` (SMBO) arguments :class:`OptDivOptimizer` reads.
_SMBO_KEYWORDS = ("num_objectives", "num_constraints", "sample_strategy", "advisor_type", "surrogate_type",
                  "acq_type", "acq_optimizer_type", "initial_runs", "init_strategy", "initial_configurations",
                  "ref_point", "transfer_learning_history", "early_stop", "early_stop_kwargs", "logging_dir",
                  "task_id", "visualization", "auto_open_html", "random_state", "advisor_kwargs",
                  "scheduler_type")
#: ``ParallelOptimizer`` (pSMBO) arguments :class:`OptDivParallelOptimizer` reads.
_PSMBO_KEYWORDS = ("num_objectives", "num_constraints", "parallel_strategy", "sample_strategy", "batch_size",
                   "batch_strategy", "surrogate_type", "acq_type", "acq_optimizer_type", "initial_runs",
                   "init_strategy", "initial_configurations", "ref_point", "transfer_learning_history",
                   "logging_dir", "task_id", "random_state", "advisor_kwargs")
_OBSERVATION_FIELDS = ("config", "objectives", "constraints", "trial_state", "extra_info")


def _host_problems() -> List[str]:
    """Every relied-on OpenBox internal that is missing or has another signature (empty: all as expected)."""
    problems = Problems()

    def calls(owner, method: str, *names: str) -> Optional[str]:
        function = vars(owner).get(method)
        if function is None:
            return f"{owner.__name__} defines no {method} of its own"
        missing = [name for name in names if not refers_to(function, name, in_constants=True)]
        return None if not missing else f"{owner.__name__}.{method} no longer uses {', '.join(missing)}"

    def candidates():
        # the hook: the one method that returns OpenBox's candidate list, fed by the acquisition maximiser
        return (same(_parameters(Advisor._get_bo_candidates), ("self", "history"))
                or calls(Advisor, "_get_bo_candidates", "maximize", "config_to_original"))

    def suggestions():
        return (calls(Advisor, "get_suggestion", "_get_bo_candidates")
                or calls(Advisor, "get_suggestions", "_get_bo_candidates")
                or same(_parameters(Advisor.get_suggestions), ("self", "batch_size", "history"))
                or covers(_parameters(Advisor.update_observation), ("self", "observation"))
                or covers(_parameters(Advisor.__init__), _ADVISOR_KEYWORDS))

    def acquisition():
        from openbox.acq_optimizer.basic_maximizer import AcquisitionFunctionMaximizer

        return covers(_parameters(AcquisitionFunctionMaximizer.maximize)[:4],
                      ("self", "acquisition_function", "history", "num_points"))

    def sync_batch():
        return (same(_parameters(SyncBatchAdvisor.get_suggestions), ("self", "batch_size", "history"))
                or calls(SyncBatchAdvisor, "get_suggestions", "_get_bo_candidates", "get_suggestion",
                         *BATCH_STRATEGIES)
                or covers(_parameters(SyncBatchAdvisor.__init__), ("batch_size", "batch_strategy")))

    def async_batch():
        return (calls(AsyncBatchAdvisor, "get_suggestion", "_get_suggestion", "running_configs")
                or calls(AsyncBatchAdvisor, "_get_suggestion", "_get_bo_candidates", "get_suggestion",
                         *BATCH_STRATEGIES)
                or calls(AsyncBatchAdvisor, "update_observation", "running_configs")
                or covers(_parameters(AsyncBatchAdvisor.__init__), ("batch_size", "batch_strategy")))

    def history():
        from openbox.utils.history import History, Observation

        found = covers([n for n in ("configurations", "get_success_count", "get_objectives")
                        if hasattr(History, n)], ("configurations", "get_success_count", "get_objectives"))
        return (found or covers(_parameters(Observation.__init__), _OBSERVATION_FIELDS)
                or covers(_parameters(History.__init__), ("num_constraints",)))

    def optimizers():
        return (covers(_parameters(SMBO.__init__), _SMBO_KEYWORDS)
                or covers(_parameters(pSMBO.__init__), _PSMBO_KEYWORDS)
                or calls(pSMBO, "sync_run", "get_suggestions", "update_observation")
                or calls(pSMBO, "async_run", "get_suggestion", "running_configs"))

    problems.check("openbox Advisor._get_bo_candidates (the candidate list the option re-orders)", candidates)
    problems.check("openbox Advisor suggestion methods", suggestions)
    problems.check("openbox acquisition maximiser", acquisition)
    problems.check("openbox SyncBatchAdvisor", sync_batch)
    problems.check("openbox AsyncBatchAdvisor", async_batch)
    problems.check("openbox History / Observation", history)
    problems.check("openbox Optimizer / ParallelOptimizer", optimizers)
    return problems


def _installed() -> str:
    try:
        import openbox

        return f"openbox {openbox.__version__}"
    except Exception:  # no version attribute
        return "openbox (version unknown)"


def check_host() -> None:
    """Raise :class:`HostVersionError` unless every OpenBox internal the option relies on is there with the
    expected signature. Called when an advisor or optimizer with the option on is built, so a changed
    OpenBox stops the search at its start instead of searching in OpenBox's own order unnoticed."""
    problems = _host_problems()
    if problems:
        raise HostVersionError(
            f"optdiv's OpenBox adapter was written for {WRITTEN_FOR} and relies on internals that differ in "
            f"this environment ({_installed()}):\n  - " + "\n  - ".join(problems)
            + f"\nInstall {WRITTEN_FOR} (pip install openbox==0.9.0), or run with method=None.")


def _host_changed(what: str) -> HostVersionError:
    return HostVersionError(f"optdiv's OpenBox adapter was written for {WRITTEN_FOR}: {what} ({_installed()}). "
                            f"Install {WRITTEN_FOR}, or run with method=None.")


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def encode_configurations(configs: Sequence, config_space) -> np.ndarray:
    """``(count, dims)`` float64 in the core's convention: values in [0, 1], inactive -1
    (:class:`optdiv.spaces.encoding.ConfigEncoder`, columns in the space's order)."""
    encoder = ConfigEncoder(config_space)
    return encoder.encode_vectors(encoder.vectors(list(configs)))


def _keys(vectors: np.ndarray) -> List[bytes]:
    """One hashable key per configuration: hashing ConfigSpace 0.6 ``Configuration`` objects costs
    about 0.2 ms each, too slow for 5,000 candidates per suggestion."""
    return [row.tobytes() for row in np.where(np.isnan(vectors), -1.0, vectors)]


def _feasible(observation) -> bool:
    """OpenBox's reading: every constraint value <= 0 (no constraints: feasible)."""
    constraints = observation.constraints
    return constraints is None or bool(np.all(np.asarray(constraints, dtype=np.float64) <= 0))


def _method_of(method) -> Optional[str]:
    if isinstance(method, str) and method.lower() in DIVERSITY_METHODS:
        return method.lower()
    if method in OFF or (isinstance(method, str) and method.lower() in OFF):
        return None
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(DIVERSITY_METHODS)} "
                     f"(or None for plain OpenBox)")


def _task_of(task: Optional[str], metric: str) -> str:
    """``task``, checked against the metric; by default the task the metric vocabulary gives the name
    (classification for a name it does not know, a black-box metric like AUC)."""
    if task is None:
        return task_of(metric) or "classification"
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    resolve_host(metric, task)  # raises for a metric of the other task
    return task


def _check_targets(y_val, task: str) -> Optional[np.ndarray]:
    if y_val is None:
        return None
    y = np.asarray(y_val)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y_val must be a non-empty 1-D array of validation targets; got shape {y.shape}")
    if task == "regression":
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y_val contains NaN or inf values")
        return y
    if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or y.min() < 0:
        raise ValueError("classification y_val must hold class indices 0..k-1 (encode the labels first)")
    return y.astype(np.int64)


# --------------------------------------------------------------------------- #
# Advisors
# --------------------------------------------------------------------------- #


class OptDivAdvisor(Advisor):
    """OpenBox's ``Advisor`` with a diversity-aware re-ranking of its candidates.

    ``y_val``: validation targets (class indices 0..k-1, or values), the rows the objective's
    ``extra_info["val_pred"]`` predictions are for: ``(rows, classes)`` probabilities for
    classification, ``(rows,)`` values for regression. ``metric``: the task metric, a name of the metric
    vocabulary (``error``, ``log_loss``, ``brier``, ``f1``, ...; ``mse``, ``rmse``, ``r2``, ``mae``,
    ``median_absolute_error``, ...) or any other name, a black-box metric of the task; it sets the
    diversity kind and the pool's loss (:func:`optdiv.core.metric_vocabulary.resolve_host`). ``task`` is
    checked against the metric (default: implied by it, classification for a name the vocabulary lacks).
    ``method``: ``"optdivbo"``, ``"divbo"`` or ``None`` (off: plain OpenBox). ``selector_options`` go to
    :class:`DiversityAwareSelector` (``kind``, ``ensemble_size``, ``tau``, ``beta``, ``kappa``, ...);
    ``selector_seed`` defaults to ``random_state`` (0 when that is not an int). Every other keyword is
    OpenBox's ``Advisor``'s (``initial_trials``, ``surrogate_type``, ``rand_prob``, ``random_state``,
    ``num_constraints``, ...).

    After each diversity-aware pick ``selections`` gets a record: t, weight, pool members as history
    positions, the chosen candidate's EI rank, whether diversity changed OpenBox's pick, the batch slot,
    the pending configurations that entered with believed predictions, the observations the selector
    saw (finished plus pending), the chosen configuration as a dict, seconds spent re-ranking.
    """

    def __init__(
        self,
        config_space,
        y_val=None,
        metric: str = "error",
        method: Optional[str] = "optdivbo",
        task: Optional[str] = None,
        selector_options: Optional[Mapping[str, Any]] = None,
        selector_seed: Optional[int] = None,
        **advisor_kwargs,
    ):
        if not isinstance(metric, str):
            raise TypeError(f"metric must be a string; got {type(metric).__name__}")
        self.method = _method_of(method)
        self.metric = metric.lower()
        self.task = _task_of(task, self.metric)
        self.y_val = _check_targets(y_val, self.task)
        if self.method is not None:
            if self.y_val is None:
                raise ValueError(f"method={self.method!r} needs y_val, the validation targets the "
                                 f"predictions are measured against")
            if advisor_kwargs.get("num_objectives", 1) != 1:
                raise ValueError("the diversity option supports one objective (constraints are fine)")
            self._check_batch_strategy(advisor_kwargs)
            check_host()
        if selector_seed is None:
            state = advisor_kwargs.get("random_state")
            selector_seed = int(state) if isinstance(state, (int, np.integer)) and state >= 0 else 0
        self.selector_options = dict(selector_options or {})
        self.selector: Optional[DiversityAwareSelector] = None
        if self.method is not None:
            self.selector = DiversityAwareSelector(
                method=self.method, metric=resolve_host(self.metric, self.task).name, seed=int(selector_seed),
                **self.selector_options,
            )
        self._predictions: List[np.ndarray] = []
        self._n_classes: Optional[int] = None
        self._n_rows: Optional[int] = None if self.y_val is None else len(self.y_val)
        self._slots = 1  # picks to rank from the next candidate list (a batch taken from one list)
        self.selections: List[Dict[str, Any]] = []
        super().__init__(config_space, **advisor_kwargs)
        if self.method is not None and self.optimization_strategy != "bo":
            logger.warning("OpenBox chose optimization_strategy=%r (it does so for spaces of 100+ "
                           "hyperparameters with surrogate_type='auto'); no BO step will run, so the "
                           "diversity option has no effect. Pass surrogate_type='prf' to keep BO.",
                           self.optimization_strategy)

    def _check_batch_strategy(self, advisor_kwargs) -> None:
        """Only batch advisors have a batch strategy to check."""

    # ------------------------------------------------------------------ observations
    def update_observation(self, observation):
        """Record ``observation``; its ``extra_info["val_pred"]`` moves into the advisor's store.

        A successful trial must report predictions while the option is on; predictions with NaN or
        inf turn the trial into a FAILED one (objective inf), as the engine records such runs.
        Constraint values go to OpenBox unchanged (its constrained EI reads them).
        """
        info = observation.extra_info if isinstance(observation.extra_info, dict) else None
        if info is not None:
            info.pop(MARKER_KEY, None)  # a marker can only come from this advisor's own store
        raw = info.get(PRED_KEY) if info is not None else None
        if observation.trial_state == SUCCESS and raw is None and self.method is not None:
            raise ValueError(f"a successful observation needs its validation predictions in "
                             f"extra_info[{PRED_KEY!r}] while method={self.method!r} is on")
        pred = None
        if observation.trial_state == SUCCESS and raw is not None:
            pred = self._check_prediction(raw)  # raises on a bad shape before anything changes
            if pred is None:
                logger.warning("validation predictions contain NaN or inf; recording the trial as FAILED")
                observation.trial_state = FAILED
                observation.objectives = [float("inf")] * len(observation.objectives)
        if info is not None:
            info.pop(PRED_KEY, None)
        result = super().update_observation(observation)  # OpenBox's own checks may still refuse it
        if pred is not None:  # the history holds this very observation, so the marker lands there
            info[MARKER_KEY] = len(self._predictions)
            self._predictions.append(pred)
        return result

    def _check_prediction(self, pred) -> Optional[np.ndarray]:
        """The prediction as float32 in the core's shape, None when it holds NaN/inf; raises on a bad shape."""
        arr = np.asarray(pred, dtype=np.float64)
        if self.task == "regression":
            if arr.ndim == 2 and arr.shape[1] == 1:
                arr = arr[:, 0]
            if arr.ndim != 1:
                raise ValueError(f"regression predictions must be (rows,) values; got shape {arr.shape}")
        elif arr.ndim != 2 or arr.shape[1] < 2:
            raise ValueError(f"classification predictions must be (rows, classes) probabilities; got shape {arr.shape}")
        if self._n_rows is not None and arr.shape[0] != self._n_rows:
            raise ValueError(f"predictions cover {arr.shape[0]} rows but the validation set has {self._n_rows}")
        if self.task == "classification":
            k = arr.shape[1]
            if self._n_classes is not None and k != self._n_classes:
                raise ValueError(f"predictions have {k} classes; earlier ones had {self._n_classes}")
            if self.y_val is not None and int(self.y_val.max()) >= k:
                raise ValueError(f"y_val holds class index {int(self.y_val.max())} but predictions have {k} classes")
            self._n_classes = k
        self._n_rows = arr.shape[0]
        if not np.all(np.isfinite(arr)):
            return None
        return arr.astype(np.float32)

    def stored_predictions(self, history=None):
        """(history positions, stacked predictions) of the successful, feasible trials that reported
        predictions: the models the pool and the final ensemble may use."""
        history = self.history if history is None else history
        rows, preds = [], []
        for i, obs in enumerate(history.observations):
            marker = obs.extra_info.get(MARKER_KEY) if isinstance(obs.extra_info, dict) else None
            if (obs.trial_state == SUCCESS and isinstance(marker, int) and 0 <= marker < len(self._predictions)
                    and _feasible(obs)):
                rows.append(i)
                preds.append(self._predictions[marker])
        if not preds:
            return [], None
        return rows, np.stack(preds)

    # ------------------------------------------------------------------ suggestions
    def get_suggestions(self, batch_size=None, history=None):
        """OpenBox's ``get_suggestions``; a batch OpenBox takes from one candidate list gets each of its
        slots ranked with the earlier slots as pending observations."""
        self._slots = max(1, int(self._default_batch_size() if batch_size is None else batch_size))
        if not self._one_list_batches():
            self._slots = 1
        try:
            return super().get_suggestions(batch_size=batch_size, history=history)
        finally:
            self._slots = 1

    def _default_batch_size(self) -> int:
        return 1  # OpenBox's Advisor.get_suggestions default

    def _one_list_batches(self) -> bool:
        """Whether OpenBox's ``get_suggestions`` takes a whole batch from one candidate list."""
        return True

    def _get_bo_candidates(self, history):
        """OpenBox's candidates, re-ordered by the selector; unchanged while the option is off.

        ``get_suggestion`` (ask/tell, async slots, median-imputation slots) and ``get_suggestions``
        (``Optimizer``, sync ``default`` batches) take the first not-yet-evaluated configurations of this
        list, so re-ordering it is the whole change.
        """
        candidates = super()._get_bo_candidates(history)
        if self.selector is None or history.get_success_count() < max(self.init_num, 1):
            return candidates  # OpenBox's own random fallback, or the option is off
        return self._rerank(candidates, history, self._pending(history), getattr(self, "_slots", 1))

    def _encoder(self) -> ConfigEncoder:
        encoder = getattr(self, "_config_encoder", None)
        if encoder is None:
            encoder = self._config_encoder = ConfigEncoder(self.config_space)
        return encoder

    def _pending(self, history) -> List[Any]:
        """Configurations in flight, which enter the selector with believed predictions: those OpenBox
        imputed into ``history`` (median imputation: successful, no predictions, not in the advisor's own
        history) and those still running (async)."""
        encoder = self._encoder()
        own = set(_keys(encoder.vectors(self.history.configurations))) if len(self.history) else set()
        pending, seen = [], set()
        imputed = [] if history is self.history else [
            obs.config for obs in history.observations
            if obs.trial_state == SUCCESS and not (isinstance(obs.extra_info, dict) and MARKER_KEY in obs.extra_info)]
        running = list(getattr(self, "running_configs", None) or [])
        configs = imputed + running
        if not configs:
            return []
        for config, key in zip(configs, _keys(encoder.vectors(configs))):
            if key not in own and key not in seen:
                seen.add(key)
                pending.append(config)
        return pending

    def _rerank(self, candidates, history, pending: Sequence, slots: int = 1) -> list:
        """The fresh candidates (not evaluated, not pending), the first ``slots`` picked one after another
        by the selector, each with the pending configurations and the earlier picks as believers; the rest
        follow in the last pick's order."""
        start = time.perf_counter()
        rows, preds = self.stored_predictions(history)
        if len(rows) < 2:
            return candidates  # no pair of models yet: diversity is undefined, EI order stands
        if not isinstance(candidates, list) or not all(isinstance(c, Configuration) for c in candidates):
            kinds = sorted({type(c).__name__ for c in candidates}) if isinstance(candidates, (list, tuple)) else []
            raise _host_changed(f"the acquisition maximiser returned {type(candidates).__name__} of "
                                f"{', '.join(kinds) or 'nothing'}, not a list of Configuration")
        encoder = self._encoder()
        cand_vectors = encoder.vectors(candidates)
        in_history = set(_keys(encoder.vectors(history.configurations)))
        pending = list(pending)
        pending_keys = set(_keys(encoder.vectors(pending))) if pending else set()
        taken = in_history | pending_keys
        keep, seen = [], set()
        for i, key in enumerate(_keys(cand_vectors)):
            if key not in taken and key not in seen:
                seen.add(key)
                keep.append(i)
        if not keep:
            return candidates
        fresh = [candidates[i] for i in keep]
        ei = np.asarray(self.acquisition_function(fresh), dtype=np.float64).reshape(-1)
        if ei.shape != (len(fresh),):
            raise _host_changed(f"the acquisition function gave {ei.size} values for {len(fresh)} candidates")
        obs_x = encoder.encode_vectors(encoder.vectors([history.observations[i].config for i in rows]))
        fresh_x = encoder.encode_vectors(cand_vectors[keep])
        pending_x = encoder.encode_vectors(encoder.vectors(pending)) if pending else fresh_x[:0]
        t0 = len(history) + sum(1 for key in pending_keys if key not in in_history)
        picks: List[int] = []
        remaining = np.arange(len(fresh))
        tail = remaining
        for slot in range(max(1, int(slots))):
            if remaining.size == 0:
                break
            extra_x = np.concatenate([pending_x, fresh_x[picks]])
            X, P = obs_x, preds
            if len(extra_x):
                believed = np.stack(believed_predictions(obs_x, preds, extra_x)).astype(preds.dtype)
                X, P = np.concatenate([obs_x, extra_x]), np.concatenate([preds, believed])
            choice = self.selector.select(fresh_x[remaining], ei[remaining], X, P, self.y_val, t=t0 + slot)
            order = np.argsort(choice.scores, kind="stable")
            chosen = int(remaining[order[0]])
            self.selections.append({
                "t": t0 + slot,
                "weight": float(choice.weight),
                "pool": [int(rows[i]) for i in np.asarray(choice.pool_indices) if i < len(rows)],
                "ei_rank": float(choice.perf_rank[order[0]]),
                "changed": bool(order[0] != 0),
                "slot": slot,
                "pending": int(len(extra_x)),
                "observations": int(X.shape[0]),
                "config": fresh[chosen].get_dictionary(),
                "seconds": time.perf_counter() - start,
            })
            picks.append(chosen)
            tail = remaining[order[1:]]
            remaining = np.delete(remaining, order[0])  # stays in OpenBox's order for the next slot
            start = time.perf_counter()
        return [fresh[i] for i in picks] + [fresh[i] for i in tail]

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the whole advisor state (history, predictions, surrogate, selector, random states).

        :meth:`load` continues the run exactly where it stopped: the resumed advisor suggests what the
        uninterrupted one would. The file is a pickle: load only files you wrote yourself.
        """
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump({"format": SAVE_FORMAT, "advisor": self}, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)  # atomic: an interrupted save never leaves a half-written state
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    @classmethod
    def load(cls, path) -> "OptDivAdvisor":
        """The advisor :meth:`save` wrote to ``path`` (OpenBox's internals are checked again)."""
        with open(path, "rb") as fh:
            data = pickle.load(fh)
        if not isinstance(data, dict) or data.get("format") != SAVE_FORMAT or not isinstance(data.get("advisor"), cls):
            raise ValueError(f"{path} is not an {cls.__name__} state written by save() (format {SAVE_FORMAT})")
        if data["advisor"].method is not None:
            check_host()
        return data["advisor"]

    def final_ensemble(self, **kwargs) -> "EnsembleMembers":
        """:func:`final_ensemble` over this advisor's history."""
        return final_ensemble(self, **kwargs)


class _BatchStrategyCheck:
    """Refuses, while the option is on, the batch strategies whose slots bypass the candidate list."""

    def _check_batch_strategy(self, advisor_kwargs) -> None:
        strategy = advisor_kwargs.get("batch_strategy") or "default"
        if strategy not in BATCH_STRATEGIES:
            raise ValueError(
                f"batch_strategy={strategy!r}: its slots maximise the acquisition function directly, "
                f"past the candidate list the diversity option re-ranks; use one of "
                f"{', '.join(BATCH_STRATEGIES)} (or method=None)")


class OptDivSyncBatchAdvisor(_BatchStrategyCheck, OptDivAdvisor, SyncBatchAdvisor):
    """OpenBox's ``SyncBatchAdvisor`` (``ParallelOptimizer(parallel_strategy="sync")``) with the option.

    ``batch_strategy="default"``: OpenBox ranks one candidate list per batch; the selector picks the slots
    one after another, each with the earlier picks as believers. ``"median_imputation"``: OpenBox refits
    its surrogate per slot with the median loss imputed for the earlier picks; the selector ranks that
    slot's list with them as believers. Arguments: :class:`OptDivAdvisor`'s plus ``batch_size`` and
    ``batch_strategy``.
    """

    def _default_batch_size(self) -> int:
        return int(self.batch_size)

    def _one_list_batches(self) -> bool:
        return (self.batch_strategy or "default") == "default"


class OptDivAsyncBatchAdvisor(_BatchStrategyCheck, OptDivAdvisor, AsyncBatchAdvisor):
    """OpenBox's ``AsyncBatchAdvisor`` (``ParallelOptimizer(parallel_strategy="async")``) with the option:
    each suggestion is ranked with the configurations still running as believers. Arguments:
    :class:`OptDivAdvisor`'s plus ``batch_size`` and ``batch_strategy``."""


# --------------------------------------------------------------------------- #
# Final ensemble
# --------------------------------------------------------------------------- #


class EnsembleMembers(NamedTuple):
    indices: List[int]  # positions in the advisor's history
    weights: np.ndarray  # sum to 1
    configs: List[Any]  # the members' configurations
    val_prediction: np.ndarray  # the ensemble's validation prediction
    val_loss: float  # the ensemble's validation loss under the pool loss of the metric

    def predict(self, member_predictions) -> np.ndarray:
        """Weighted average of the members' predictions on new rows (one array per member, in order)."""
        preds = np.stack([np.asarray(p, dtype=np.float64) for p in member_predictions])
        return ensemble_predict(preds, self.weights)


class _Run(NamedTuple):
    """The fields of a run that ``optdiv.final.choice.choose_members`` reads."""

    status: str
    val_pred: Optional[np.ndarray]
    val_loss: float


def final_ensemble(
    advisor: OptDivAdvisor,
    builder: str = "caruana",
    size: int = 25,
    seed: int = 0,
    y_val=None,
) -> EnsembleMembers:
    """Post-hoc ensemble over the advisor's stored validation predictions (failed and infeasible trials
    excluded).

    ``builder``: ``"caruana"`` (ensemble selection with replacement, ``size`` rounds) or
    ``"agnostic_bayes"`` (posterior probability of being the best model). ``y_val`` is needed only when
    the advisor was built without it (option off).
    """
    from optdiv.final.choice import choose_members

    if not isinstance(advisor, OptDivAdvisor):
        raise TypeError(f"final_ensemble needs an OptDivAdvisor; got {type(advisor).__name__}")
    y = advisor.y_val if y_val is None else _check_targets(y_val, advisor.task)
    if y is None:
        raise ValueError("pass y_val: this advisor was built without validation targets")
    rows, preds = advisor.stored_predictions()
    if not rows:
        raise RuntimeError("no successful, feasible trial reported validation predictions: there is no model "
                           "to ensemble")
    if preds.shape[1] != len(y):
        raise ValueError(f"y_val has {len(y)} rows but the stored predictions cover {preds.shape[1]}")
    loss = pool_loss(advisor.metric, advisor.task == "classification")
    objectives = advisor.history.get_objectives(transform="none", warn_invalid_value=False)[:, 0]
    runs = [_Run("ok", preds[j], float(objectives[i])) for j, i in enumerate(rows)]
    picked, weights = choose_members(runs, y, loss, builder=builder, size=size, seed=seed)
    member_preds = preds[picked]
    val_prediction = ensemble_predict(member_preds, weights)
    return EnsembleMembers(
        indices=[int(rows[j]) for j in picked],
        weights=np.asarray(weights, dtype=np.float64),
        configs=[advisor.history.observations[rows[j]].config for j in picked],
        val_prediction=val_prediction,
        val_loss=float(mean_loss(val_prediction, y, loss)),
    )


# --------------------------------------------------------------------------- #
# Optimizers
# --------------------------------------------------------------------------- #


def _arguments(function, *args, **kwargs) -> Dict[str, Any]:
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _advisor_from(optdiv, cls, advisor_kwargs: Mapping, build: Callable[..., OptDivAdvisor]) -> OptDivAdvisor:
    """The advisor an optimizer's ``optdiv`` argument names: an advisor as it is, or ``build(**options)``."""
    if isinstance(optdiv, OptDivAdvisor):
        if type(optdiv) is not cls:
            raise TypeError(f"this loop needs an {cls.__name__}; got an {type(optdiv).__name__}")
        if optdiv.method is not None:
            check_host()
        return optdiv
    if isinstance(optdiv, Mapping):
        options = dict(optdiv)
        clash = sorted(set(options) & set(advisor_kwargs or {}))
        if clash:
            raise ValueError(f"{', '.join(clash)} given both in optdiv and in advisor_kwargs")
        return build(**dict(advisor_kwargs or {}), **options)
    raise TypeError(f"optdiv must be None, a mapping of {cls.__name__} options or an {cls.__name__}; "
                    f"got {type(optdiv).__name__}")


def _advisor_arguments(a: dict) -> dict:
    """The advisor arguments that OpenBox's ``Optimizer`` and ``ParallelOptimizer`` both derive from
    their own (``a``: the optimizer's bound arguments), under the advisor's names."""
    return dict(
        num_objectives=a["num_objectives"],
        num_constraints=a["num_constraints"],
        initial_trials=a["initial_runs"],
        init_strategy=a["init_strategy"],
        initial_configurations=a["initial_configurations"],
        transfer_learning_history=a["transfer_learning_history"],
        optimization_strategy=a["sample_strategy"],
        surrogate_type=a["surrogate_type"],
        acq_type=a["acq_type"],
        acq_optimizer_type=a["acq_optimizer_type"],
        ref_point=a["ref_point"],
        output_dir=a["logging_dir"],
        task_id=a["task_id"],
        random_state=a["random_state"],
        logger_kwargs={"force_init": False},  # the optimizer already set OpenBox's logger up
    )


class OptDivOptimizer(SMBO):
    """OpenBox's ``Optimizer`` (``SMBO``) with one extra argument, ``optdiv``.

    ``optdiv=None`` is OpenBox's own ``Optimizer``, untouched. A mapping holds the
    :class:`OptDivAdvisor` options (``y_val``, ``metric``, ``method``, ``selector_options``, ...); the
    advisor gets every other argument exactly as OpenBox's would (``initial_runs``, ``surrogate_type``,
    ``num_constraints``, ``random_state``, ``advisor_kwargs``, ...). An :class:`OptDivAdvisor` (e.g. from
    :meth:`OptDivAdvisor.load`) is used as it is and the loop continues after its history, so
    ``max_runs`` counts the trials already made.

    OpenBox 0.9's ``Optimizer`` builds its advisor from a fixed list of names, so the advisor is
    swapped in after OpenBox built its default one (no patching of OpenBox).
    """

    def __init__(self, objective_function, config_space, optdiv=None, **kwargs):
        super().__init__(objective_function, config_space, **kwargs)
        if optdiv is None:
            return
        a = _arguments(SMBO.__init__, self, objective_function, config_space, **kwargs)
        problems = [
            f"{name}={a[name]!r} (needs {want!r})"
            for name, want in (("advisor_type", "default"), ("scheduler_type", "full"),
                               ("num_objectives", 1), ("sample_strategy", "bo"))
            if a[name] != want
        ]
        if problems:
            raise ValueError("the optdiv option runs on OpenBox's default single-objective BO loop; got "
                             + ", ".join(problems))

        def build(**options):
            return OptDivAdvisor(
                config_space, **_advisor_arguments(a),
                early_stop=a["early_stop"], early_stop_kwargs=a["early_stop_kwargs"], **options,
            )

        advisor = _advisor_from(optdiv, OptDivAdvisor, a["advisor_kwargs"], build)
        if advisor is optdiv:
            self.iteration_id = len(advisor.history)
        self.config_advisor = advisor
        from openbox.visualization import build_visualizer

        self.visualizer = build_visualizer(
            option=a["visualization"], history=self.get_history(), logging_dir=self.output_dir,
            optimizer=self, advisor=None, auto_open_html=a["auto_open_html"],
        )
        self.visualizer.setup()


class OptDivParallelOptimizer(pSMBO):
    """OpenBox's ``ParallelOptimizer`` (``pSMBO``) with one extra argument, ``optdiv``.

    ``optdiv=None`` is OpenBox's own ``ParallelOptimizer``, untouched. A mapping holds the
    :class:`OptDivAdvisor` options; the advisor (:class:`OptDivSyncBatchAdvisor` for
    ``parallel_strategy="sync"``, :class:`OptDivAsyncBatchAdvisor` for ``"async"``) gets every other
    argument exactly as OpenBox's would (``batch_size``, ``batch_strategy``, ``initial_runs``,
    ``num_constraints``, ``random_state``, ``advisor_kwargs``, ...). An advisor of that class is used as it
    is. The objective returns ``{"objectives": [loss], "extra_info": {"val_pred": p}}`` (plus
    ``"constraints"``), and must be picklable: OpenBox evaluates it in worker processes.
    """

    def __init__(self, objective_function, config_space, optdiv=None, **kwargs):
        super().__init__(objective_function, config_space, **kwargs)
        if optdiv is None:
            return
        a = _arguments(pSMBO.__init__, self, objective_function, config_space, **kwargs)
        problems = [
            f"{name}={a[name]!r} (needs {want!r})"
            for name, want in (("num_objectives", 1), ("sample_strategy", "bo"))
            if a[name] != want
        ]
        if problems:
            raise ValueError("the optdiv option runs on OpenBox's single-objective BO batch advisors; got "
                             + ", ".join(problems))
        cls = OptDivSyncBatchAdvisor if a["parallel_strategy"] == "sync" else OptDivAsyncBatchAdvisor

        def build(**options):
            return cls(
                config_space, **_advisor_arguments(a),
                batch_size=a["batch_size"], batch_strategy=a["batch_strategy"], **options,
            )

        advisor = _advisor_from(optdiv, cls, a["advisor_kwargs"], build)
        if advisor is optdiv:
            self.iteration_id = len(advisor.history)
        self.config_advisor = advisor
