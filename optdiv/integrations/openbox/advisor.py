"""OpenBox's advisors with the diversity option: :class:`OptDivAdvisor` re-orders OpenBox's own candidate list
with the core's selector (:func:`optdiv.core.pending.pick_with_pending`), and the batch advisors pick a batch's
slots one after another with the earlier picks and the running trials as believers. The validation predictions
move out of ``extra_info`` into the advisor's own store (see the package docstring)."""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from ConfigSpace import Configuration
from openbox.core.async_batch_advisor import AsyncBatchAdvisor
from openbox.core.generic_advisor import Advisor
from openbox.core.sync_batch_advisor import SyncBatchAdvisor
from openbox.utils.constants import FAILED, SUCCESS

from optdiv.core.metric_vocabulary import TASKS, resolve_host, task_of
from optdiv.core.pending import pick_with_pending
from optdiv.core.selector import DIVERSITY_METHODS, DiversityAwareSelector
from optdiv.integrations.openbox.ensemble import EnsembleMembers, check_targets, final_ensemble
from optdiv.integrations.openbox.host import BATCH_STRATEGIES, changed_host_error, check_host
from optdiv.spaces.encoding import ConfigEncoder

logger = logging.getLogger(__name__)

#: ``extra_info`` key under which the objective reports its validation predictions.
PRED_KEY = "val_pred"
#: ``extra_info`` key the advisor leaves behind: the index of the predictions in its store.
MARKER_KEY = "optdiv_pred"
#: ``method`` values that switch the diversity option off (plain OpenBox suggestions).
OFF = (None, False, "off", "none", "bo")
#: The file format version of :meth:`OptDivAdvisor.save`.
SAVE_FORMAT = 1


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


class OptDivAdvisor(Advisor):
    """OpenBox's ``Advisor`` that keeps each trial's validation predictions for optdiv's final model
    (:func:`final_ensemble`), and with ``method="optdivbo"`` or ``"divbo"`` re-ranks OpenBox's candidates by diversity.

    The re-ranking is off by default: on sets the final model was not chosen on (30 iterations, 5 seeds) it was level
    with OpenBox's own suggestions when both ended with optdiv's final model, as it had been before (docs/openbox.md).

    ``y_val``: validation targets (class indices 0..k-1, or values), the rows the objective's
    ``extra_info["val_pred"]`` predictions are for: ``(rows, classes)`` probabilities for
    classification, ``(rows,)`` values for regression. ``metric``: the task metric, a name of the metric
    vocabulary (``error``, ``log_loss``, ``brier``, ``f1``, ...; ``mse``, ``rmse``, ``r2``, ``mae``,
    ``median_absolute_error``, ...) or any other name, a black-box metric of the task; it sets the
    diversity kind and the pool's loss (:func:`optdiv.core.metric_vocabulary.resolve_host`). ``task`` is
    checked against the metric (default: implied by it, classification for a name the vocabulary lacks).
    ``method``: ``None`` (default: OpenBox's own suggestions), ``"optdivbo"`` or ``"divbo"``. ``selector_options`` go to
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
        method: Optional[str] = None,
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
        self.y_val = check_targets(y_val, self.task)
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
        if observation.trial_state == SUCCESS and raw is None and (self.method is not None or self.y_val is not None):
            why = f"method={self.method!r} is on" if self.method is not None else "y_val is given (the final model)"
            raise ValueError(f"a successful observation needs its validation predictions in "
                             f"extra_info[{PRED_KEY!r}] while {why}")
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
            raise changed_host_error(f"the acquisition maximiser returned {type(candidates).__name__} of "
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
            raise changed_host_error(f"the acquisition function gave {ei.size} values for {len(fresh)} candidates")
        obs_x = encoder.encode_vectors(encoder.vectors([history.observations[i].config for i in rows]))
        fresh_x = encoder.encode_vectors(cand_vectors[keep])
        pending_x = encoder.encode_vectors(encoder.vectors(pending)) if pending else None
        t0 = len(history) + sum(1 for key in pending_keys if key not in in_history)
        setup = time.perf_counter() - start
        picks = pick_with_pending(self.selector, fresh_x, ei, obs_x, preds, self.y_val, pending_x, slots=slots, t=t0)
        for slot, pick in enumerate(picks):
            self.selections.append({
                "t": t0 + slot,
                "weight": float(pick.selection.weight),
                "pool": [int(rows[i]) for i in np.asarray(pick.selection.pool_indices) if i < len(rows)],
                "ei_rank": float(pick.selection.perf_rank[pick.first]),
                "changed": pick.first != 0,
                "slot": slot,
                "pending": pick.believers,
                "observations": pick.rows,
                "config": fresh[pick.index].get_dictionary(),
                "seconds": pick.seconds + (setup if slot == 0 else 0.0),
            })
        return [fresh[p.index] for p in picks] + [fresh[i] for i in picks[-1].order[1:]]

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

    def final_ensemble(self, **kwargs) -> EnsembleMembers:
        """:func:`~optdiv.integrations.openbox.ensemble.final_ensemble` over this advisor's history."""
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
