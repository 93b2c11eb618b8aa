"""OpenBox adapter: DivBO / OptDivBO as an option of OpenBox 0.9's own ``Advisor``.

Everything of OpenBox stays: its space, initial design, surrogate (PRF or GP), EI, acquisition
maximiser, random interleaving (``rand_prob``), history and the ask/tell and ``Optimizer`` loops. The
option changes one step: OpenBox's maximiser returns its candidate list (about 5,000 configurations
sorted by EI); :class:`OptDivAdvisor` re-orders that list with the core's
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
and :class:`OptDivOptimizer` takes one extra argument, ``optdiv=dict(y_val=y_val, metric="error")``.

Where the validation predictions live: :meth:`OptDivAdvisor.update_observation` moves the array out of
``extra_info`` into the advisor's own store and leaves the integer marker ``extra_info["optdiv_pred"]``
in its place, so OpenBox's ``History.save_json`` keeps working and stays small. Failed trials (any
``trial_state`` other than SUCCESS, or predictions with NaN/inf, which are recorded as FAILED like the
engine's failed runs) keep OpenBox's handling for the surrogate (the worst observed loss) and never
enter the pool or the final ensemble.

``method=None`` switches the option off: the advisor then suggests exactly what ``openbox.Advisor``
suggests with the same arguments (predictions are still kept, for :func:`final_ensemble`).

Differences from the papers, where OpenBox sets the terms (see docs/openbox.md): the candidates and
EI are OpenBox's; OpenBox's initial design (``initial_trials``, default 3) and ``rand_prob`` (0.1, only
in ``get_suggestion``; OpenBox's ``Optimizer`` calls ``get_suggestions``, which has none) replace the
papers' five random suggestions and 20% random picks.

Written against OpenBox 0.9.0 with ConfigSpace 0.6.1; OpenBox is imported when this module is.
"""

from __future__ import annotations

import inspect
import logging
import os
import pickle
import tempfile
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from openbox.core.generic_advisor import Advisor
from openbox.optimizer.generic_smbo import SMBO
from openbox.utils.constants import FAILED, SUCCESS

from optdiv.cash.encoding import ConfigEncoder
from optdiv.core.ensemble import ensemble_predict
from optdiv.core.metrics import mean_loss
from optdiv.core.metric_vocabulary import resolve_host, task_of
from optdiv.core.selector import DIVERSITY_METHODS, DiversityAwareSelector, pool_loss

logger = logging.getLogger(__name__)

__all__ = [
    "OptDivAdvisor",
    "OptDivOptimizer",
    "EnsembleMembers",
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
TASKS = ("classification", "regression")
#: The file format version of :meth:`OptDivAdvisor.save`.
SAVE_FORMAT = 1


def encode_configurations(configs: Sequence, config_space) -> np.ndarray:
    """``(count, dims)`` float64 in the core's convention: values in [0, 1], inactive -1
    (:class:`optdiv.cash.encoding.ConfigEncoder`, columns in the space's order)."""
    encoder = ConfigEncoder(config_space)
    return encoder.encode_vectors(encoder.vectors(list(configs)))


def _keys(vectors: np.ndarray) -> List[bytes]:
    """One hashable key per configuration: hashing ConfigSpace 0.6 ``Configuration`` objects costs
    about 0.2 ms each, too slow for 5,000 candidates per suggestion."""
    return [row.tobytes() for row in np.where(np.isnan(vectors), -1.0, vectors)]


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
    OpenBox's ``Advisor``'s (``initial_trials``, ``surrogate_type``, ``rand_prob``, ``random_state``, ...).

    After each diversity-aware suggestion ``selections`` gets a record (t, weight, pool members as
    history positions, the chosen candidate's EI rank, seconds spent re-ranking).
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
            if advisor_kwargs.get("num_objectives", 1) != 1 or advisor_kwargs.get("num_constraints", 0) != 0:
                raise ValueError("the diversity option supports one objective and no constraints")
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
        self.selections: List[Dict[str, Any]] = []
        super().__init__(config_space, **advisor_kwargs)
        if self.method is not None and self.optimization_strategy != "bo":
            logger.warning("OpenBox chose optimization_strategy=%r (it does so for spaces of 100+ "
                           "hyperparameters with surrogate_type='auto'); no BO step will run, so the "
                           "diversity option has no effect. Pass surrogate_type='prf' to keep BO.",
                           self.optimization_strategy)

    # ------------------------------------------------------------------ observations
    def update_observation(self, observation):
        """Record ``observation``; its ``extra_info["val_pred"]`` moves into the advisor's store.

        A successful trial must report predictions while the option is on; predictions with NaN or
        inf turn the trial into a FAILED one (objective inf), as the engine records such runs.
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
        """(history positions, stacked predictions) of the successful trials that reported predictions."""
        history = self.history if history is None else history
        rows, preds = [], []
        for i, obs in enumerate(history.observations):
            marker = obs.extra_info.get(MARKER_KEY) if isinstance(obs.extra_info, dict) else None
            if obs.trial_state == SUCCESS and isinstance(marker, int) and 0 <= marker < len(self._predictions):
                rows.append(i)
                preds.append(self._predictions[marker])
        if not preds:
            return [], None
        return rows, np.stack(preds)

    # ------------------------------------------------------------------ suggestions
    def _get_bo_candidates(self, history):
        """OpenBox's candidates, re-ordered by the selector; unchanged while the option is off.

        Both ``get_suggestion`` (ask/tell) and ``get_suggestions`` (what ``Optimizer`` calls) take the
        first not-yet-evaluated configurations of this list, so re-ordering it is the whole change.
        """
        candidates = super()._get_bo_candidates(history)
        if self.selector is None or history.get_success_count() < max(self.init_num, 1):
            return candidates  # OpenBox's own random fallback, or the option is off
        start = time.perf_counter()
        rows, preds = self.stored_predictions(history)
        if len(rows) < 2:
            return candidates  # no pair of models yet: diversity is undefined, EI order stands
        encoder = ConfigEncoder(self.config_space)
        cand_vectors = encoder.vectors(candidates)
        seen = set(_keys(encoder.vectors(history.configurations)))
        keep = [i for i, key in enumerate(_keys(cand_vectors)) if key not in seen]
        if not keep:
            return candidates
        fresh = [candidates[i] for i in keep]
        ei = np.asarray(self.acquisition_function(fresh), dtype=np.float64).reshape(-1)
        obs_x = encoder.encode_vectors(encoder.vectors([history.observations[i].config for i in rows]))
        cand_x = encoder.encode_vectors(cand_vectors[keep])
        t = len(history)
        choice = self.selector.select(cand_x, ei, obs_x, preds, self.y_val, t=t)
        order = np.argsort(choice.scores, kind="stable")
        self.selections.append({
            "t": t,
            "weight": float(choice.weight),
            "pool": [int(rows[i]) for i in np.asarray(choice.pool_indices)],
            "ei_rank": float(choice.perf_rank[order[0]]),
            "changed": bool(order[0] != 0),
            "seconds": time.perf_counter() - start,
        })
        return [fresh[i] for i in order]

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
        """The advisor :meth:`save` wrote to ``path``."""
        with open(path, "rb") as fh:
            data = pickle.load(fh)
        if not isinstance(data, dict) or data.get("format") != SAVE_FORMAT or not isinstance(data.get("advisor"), cls):
            raise ValueError(f"{path} is not an {cls.__name__} state written by save() (format {SAVE_FORMAT})")
        return data["advisor"]

    def final_ensemble(self, **kwargs) -> "EnsembleMembers":
        """:func:`final_ensemble` over this advisor's history."""
        return final_ensemble(self, **kwargs)


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
    """The fields of a run that ``optdiv.cash.final_ensemble.choose_members`` reads."""

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
    """Post-hoc ensemble over the advisor's stored validation predictions (failed trials excluded).

    ``builder``: ``"caruana"`` (ensemble selection with replacement, ``size`` rounds) or
    ``"agnostic_bayes"`` (posterior probability of being the best model). ``y_val`` is needed only when
    the advisor was built without it (option off).
    """
    from optdiv.cash.final_ensemble import choose_members

    if not isinstance(advisor, OptDivAdvisor):
        raise TypeError(f"final_ensemble needs an OptDivAdvisor; got {type(advisor).__name__}")
    y = advisor.y_val if y_val is None else _check_targets(y_val, advisor.task)
    if y is None:
        raise ValueError("pass y_val: this advisor was built without validation targets")
    rows, preds = advisor.stored_predictions()
    if not rows:
        raise RuntimeError("no successful trial reported validation predictions: there is no model to ensemble")
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


class OptDivOptimizer(SMBO):
    """OpenBox's ``Optimizer`` (``SMBO``) with one extra argument, ``optdiv``.

    ``optdiv=None`` is OpenBox's own ``Optimizer``, untouched. A mapping holds the
    :class:`OptDivAdvisor` options (``y_val``, ``metric``, ``method``, ``selector_options``, ...); the
    advisor gets every other argument exactly as OpenBox's would (``initial_runs``, ``surrogate_type``,
    ``random_state``, ``advisor_kwargs``, ...). An :class:`OptDivAdvisor` (e.g. from
    :meth:`OptDivAdvisor.load`) is used as it is and the loop continues after its history, so
    ``max_runs`` counts the trials already made.

    OpenBox 0.9's ``Optimizer`` builds its advisor from a fixed list of names, so the advisor is
    swapped in after OpenBox built its default one (no patching of OpenBox).
    """

    def __init__(self, objective_function, config_space, optdiv=None, **kwargs):
        super().__init__(objective_function, config_space, **kwargs)
        if optdiv is None:
            return
        args = inspect.signature(SMBO.__init__).bind(self, objective_function, config_space, **kwargs)
        args.apply_defaults()
        a = args.arguments
        problems = [
            f"{name}={a[name]!r} (needs {want!r})"
            for name, want in (("advisor_type", "default"), ("scheduler_type", "full"),
                               ("num_objectives", 1), ("num_constraints", 0), ("sample_strategy", "bo"))
            if a[name] != want
        ]
        if problems:
            raise ValueError("the optdiv option runs on OpenBox's default single-objective BO loop; got "
                             + ", ".join(problems))
        if isinstance(optdiv, OptDivAdvisor):
            advisor = optdiv
            self.iteration_id = len(advisor.history)
        elif isinstance(optdiv, Mapping):
            options = dict(optdiv)
            clash = sorted(set(options) & set(a["advisor_kwargs"] or {}))
            if clash:
                raise ValueError(f"{', '.join(clash)} given both in optdiv and in advisor_kwargs")
            advisor = OptDivAdvisor(
                config_space,
                initial_trials=a["initial_runs"],
                init_strategy=a["init_strategy"],
                initial_configurations=a["initial_configurations"],
                transfer_learning_history=a["transfer_learning_history"],
                optimization_strategy=a["sample_strategy"],
                surrogate_type=a["surrogate_type"],
                acq_type=a["acq_type"],
                acq_optimizer_type=a["acq_optimizer_type"],
                ref_point=a["ref_point"],
                early_stop=a["early_stop"],
                early_stop_kwargs=a["early_stop_kwargs"],
                output_dir=a["logging_dir"],
                task_id=a["task_id"],
                random_state=a["random_state"],
                logger_kwargs={"force_init": False},  # the optimizer already set OpenBox's logger up
                **(a["advisor_kwargs"] or {}),
                **options,
            )
        else:
            raise TypeError(f"optdiv must be None, a mapping of OptDivAdvisor options or an OptDivAdvisor; "
                            f"got {type(optdiv).__name__}")
        self.config_advisor = advisor
        from openbox.visualization import build_visualizer

        self.visualizer = build_visualizer(
            option=a["visualization"], history=self.get_history(), logging_dir=self.output_dir,
            optimizer=self, advisor=None, auto_open_html=a["auto_open_html"],
        )
        self.visualizer.setup()
