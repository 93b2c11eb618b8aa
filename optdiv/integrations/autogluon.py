"""AutoGluon-Tabular adapter: DivBO / OptDivBO choose which models AutoGluon trains.

Two entry points, both driven by the core's one ``DiversityAwareSelector``:

* :func:`fit` -- the model-suggestion hook (the recommended route). An outer loop over AutoGluon's
  model families (GBM, CAT, XGB, RF, XT, KNN, LR; the installed ones) with AutoGluon's own
  hyperparameter ranges (``optdiv.cash.spaces.get_space("autogluon", task)``). Each suggestion is
  trained by AutoGluon itself (``TabularPredictor.fit`` for the first, ``fit_extra`` afterwards), its
  validation (or out-of-fold) predictions are read back from the predictor, and the next suggestion
  is made by ``optdiv.cash.optimizers.Optimizer`` (random forest EI re-ranked by the selector). The
  final weighted ensemble is AutoGluon's (``ensemble="autogluon"``) or optdiv's Caruana selection
  over the same stored predictions (``ensemble="optdiv"``).
* :class:`OptDivSearcher` -- a searcher for AutoGluon's own per-model HPO
  (``hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "optdivbo", ...}`` after
  :func:`register_searchers`). AutoGluon reports only a score to a searcher; the searcher reloads
  each finished trial model from disk and predicts AutoGluon's validation rows itself.

AutoGluon types stay in this module; ``optdiv.core`` sees numpy arrays only.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.cash.observation import Observation
from optdiv.cash.final_ensemble import choose_members
from optdiv.cash.optimizers import Optimizer
from optdiv.cash.spaces._assembly import selected
from optdiv.cash.spaces.autogluon_space import OPTIONAL, autogluon_space
from optdiv.core.metric_vocabulary import resolve_host, task_of
from optdiv.core.selector import DiversityAwareSelector
from optdiv.core.surrogates import ProbabilisticRandomForest, expected_improvement

logger = logging.getLogger(__name__)

#: AutoGluon model key -> algorithm name in optdiv's AutoGluon space.
FAMILIES = {
    "GBM": "lightgbm",
    "CAT": "catboost",
    "XGB": "xgboost",
    "RF": "random_forest",
    "XT": "extra_trees",
    "KNN": "k_nearest_neighbors",
    "LR": "linear",
}
_KEY_OF = {algorithm: key for key, algorithm in FAMILIES.items()}
#: The engine's strategies this searcher offers, named here so a new engine strategy is not offered unchecked.
METHODS = ("rs", "bo", "divbo", "optdivbo")
ENSEMBLES = ("autogluon", "optdiv", "none")
NAME_PREFIX = "_OD"  # model names become e.g. LightGBM_OD7: unique per trial, recognisable in the leaderboard


# --------------------------------------------------------------------------- #
# Families and configurations
# --------------------------------------------------------------------------- #


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # ImportError or a broken native library
        return False
    return True


def available_families() -> List[str]:
    """The AutoGluon model keys this environment can train (CAT / XGB need their packages)."""
    out = []
    for key, algorithm in FAMILIES.items():
        if algorithm in OPTIONAL and not _installed(OPTIONAL[algorithm]):
            continue
        out.append(key)
    return out


def _resolve_families(families: Optional[Sequence[str]]) -> List[str]:
    """Requested families, checked; missing optional packages are skipped with a warning only when
    the user did not ask for them by name (asking for an uninstalled family is an error)."""
    if families is None:
        missing = [k for k in FAMILIES if k not in available_families()]
        if missing:
            warnings.warn(
                "skipping AutoGluon model families %s: their packages (%s) are not installed"
                % (", ".join(missing), ", ".join(OPTIONAL[FAMILIES[k]] for k in missing)),
                UserWarning,
                stacklevel=3,
            )
        return available_families()
    if isinstance(families, str):
        families = [families]
    families = [str(f).upper() for f in families]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError("unknown AutoGluon model famil%s %s; choose from %s"
                         % ("y" if len(unknown) == 1 else "ies", unknown, ", ".join(FAMILIES)))
    if not families:
        raise ValueError("families must not be empty")
    absent = [f for f in families if f not in available_families()]
    if absent:
        raise ImportError("model famil%s %s need%s the package(s) %s, which are not installed"
                          % ("y" if len(absent) == 1 else "ies", absent, "s" if len(absent) == 1 else "",
                             ", ".join(OPTIONAL[FAMILIES[f]] for f in absent)))
    return list(dict.fromkeys(families))


def search_space(task: str, families: Optional[Sequence[str]] = None):
    """optdiv's AutoGluon space restricted to ``families`` (AutoGluon keys)."""
    keys = _resolve_families(families)
    return autogluon_space(task, algorithms=[FAMILIES[k] for k in keys])


def to_hyperparameters(config: Dict[str, Any], task: str) -> tuple:
    """``(model_key, params)`` for AutoGluon's ``hyperparameters`` dict from one space configuration.

    Only the searched hyperparameters are set; everything else (boosting rounds with early stopping on
    the validation rows, tree counts, threads) stays AutoGluon's default, so AutoGluon trains the
    model exactly as it would its own.
    """
    group = "classifier" if task == "classification" else "regressor"
    algorithm, p = selected(config, group)
    if algorithm not in _KEY_OF:
        raise ValueError("configuration chooses %r, which is not an AutoGluon family" % algorithm)
    if algorithm == "lightgbm":
        params = {"learning_rate": float(p["learning_rate"]), "feature_fraction": float(p["feature_fraction"]),
                  "min_data_in_leaf": int(p["min_data_in_leaf"]), "num_leaves": int(p["num_leaves"])}
    elif algorithm == "catboost":
        params = {"learning_rate": float(p["learning_rate"]), "depth": int(p["depth"]),
                  "l2_leaf_reg": float(p["l2_leaf_reg"])}
    elif algorithm == "xgboost":
        params = {"learning_rate": float(p["learning_rate"]), "max_depth": int(p["max_depth"]),
                  "min_child_weight": float(p["min_child_weight"]), "gamma": float(p["gamma"]),
                  "subsample": float(p["subsample"]), "colsample_bytree": float(p["colsample_bytree"]),
                  "reg_alpha": float(p["reg_alpha"]), "reg_lambda": float(p["reg_lambda"])}
    elif algorithm in ("random_forest", "extra_trees"):
        mf = p["max_features"]
        params = {"max_leaf_nodes": int(p["max_leaf_nodes"]), "min_samples_leaf": int(p["min_samples_leaf"]),
                  "max_features": mf if mf in ("sqrt", "log2") else float(mf)}
    elif algorithm == "k_nearest_neighbors":
        params = {"n_neighbors": int(p["n_neighbors"]), "weights": str(p["weights"]), "p": int(p["p"])}
    else:  # linear
        params = {"penalty": str(p["penalty"]), "C": float(p["C"])}
    return _KEY_OF[algorithm], params


# --------------------------------------------------------------------------- #
# Reading predictions back from a predictor
# --------------------------------------------------------------------------- #


def _task_of(predictor) -> str:
    return _task_of_problem(predictor.problem_type)


def _task_of_problem(problem_type: str) -> str:
    return "regression" if problem_type in ("regression", "quantile") else "classification"


def optdiv_metric(predictor) -> str:
    """The optdiv metric for the predictor's eval_metric: it picks the pool loss and diversity kind."""
    return _loss_for(predictor.eval_metric, _task_of(predictor))


def _loss_for(eval_metric, task: Optional[str]) -> str:
    """The loss whose pool and diversity serve AutoGluon's ``eval_metric`` (a Scorer, a name or None) in
    ``task`` (None: the metric's own task): the metric vocabulary's host reading, so AUC, F1, MAPE, ...
    and custom scorers share one rule with the other adapters (optdiv.core.metric_vocabulary)."""
    name = str(getattr(eval_metric, "name", eval_metric or "")) or None
    if task is None:
        task = (task_of(name) if name else None) or "classification"
    return resolve_host(name, task).name


def validation_targets(predictor) -> np.ndarray:
    """AutoGluon's internal labels of the rows its models are scored on: the validation rows, or
    the training rows when the predictor is bagged (out-of-fold predictions, no validation set)."""
    which = "val" if predictor.has_val else "train"
    _, y = predictor.load_data_internal(which, return_X=False, return_y=True)
    y = np.asarray(y)
    return y.astype(np.int64) if _task_of(predictor) == "classification" else y.astype(np.float64)


def validation_predictions(predictor, models: Sequence[str]) -> Dict[str, np.ndarray]:
    """``{model: (rows, classes) probabilities or (rows,) values}`` on the rows of
    :func:`validation_targets`, in AutoGluon's internal class order (float32)."""
    models = list(models)
    if not models:
        return {}
    if predictor.can_predict_proba:
        out = predictor.predict_proba_multi(models=models, as_pandas=False, as_multiclass=True,
                                            inverse_transform=False)
    else:
        out = predictor.predict_multi(models=models, as_pandas=False, inverse_transform=False)
    return {m: np.asarray(v, dtype=np.float32) for m, v in out.items()}


# --------------------------------------------------------------------------- #
# The model-suggestion hook
# --------------------------------------------------------------------------- #


@dataclass
class Trial:
    """One suggestion: its configuration, the AutoGluon model it became, and what happened."""

    index: int
    family: str  # AutoGluon key, e.g. "GBM"
    hyperparameters: Dict[str, Any]
    config: Dict[str, Any] = field(repr=False)
    model: Optional[str] = None  # AutoGluon model name; None when no model was trained
    status: str = "pending"  # "ok" | "failed"
    score_val: float = math.nan  # AutoGluon's validation score (higher is better)
    val_loss: float = math.nan  # the same as an error (eval_metric.convert_score_to_error)
    fit_seconds: float = 0.0
    suggest_seconds: float = 0.0
    error: Optional[str] = None
    info: Dict[str, Any] = field(default_factory=dict, repr=False)  # the optimizer's strategy, w(t), pool


class AutoGluonSearch:
    """What :func:`fit` returns: the fitted ``predictor`` plus the search record.

    ``trials`` lists every suggestion; ``history`` holds the optdiv observations (with the stored
    validation predictions); ``ensemble_members`` / ``ensemble_weights`` the final ensemble
    (AutoGluon's weighted ensemble's name alone for ``ensemble="autogluon"``).
    """

    def __init__(self, predictor, method, ensemble, trials, history, y_val, members, weights, seconds):
        self.predictor = predictor
        self.method = method
        self.ensemble = ensemble
        self.trials: List[Trial] = trials
        self.history: List[Observation] = history
        self.y_val = y_val
        self.ensemble_members: List[str] = members
        self.ensemble_weights: np.ndarray = weights
        self.seconds = seconds

    @property
    def models(self) -> List[str]:
        """AutoGluon names of the models this search trained."""
        return [t.model for t in self.trials if t.status == "ok"]

    def trials_frame(self):
        """The trials as a DataFrame (one row per suggestion, in order)."""
        import pandas as pd

        return pd.DataFrame([{k: getattr(t, k) for k in ("index", "family", "model", "status", "score_val",
                                                          "val_loss", "fit_seconds", "suggest_seconds",
                                                          "hyperparameters", "error")} for t in self.trials])

    def predict_proba(self, data):
        """Class probabilities of the final ensemble (columns = ``predictor.class_labels``)."""
        if self.ensemble == "optdiv" and not self.ensemble_members:
            raise RuntimeError("the search trained no model, so there is no ensemble to predict with")
        if self.ensemble != "optdiv":
            return self.predictor.predict_proba(data)
        probs = self.predictor.predict_proba_multi(data, models=self.ensemble_members, as_multiclass=True)
        out = None
        for name, w in zip(self.ensemble_members, self.ensemble_weights):
            out = probs[name] * float(w) if out is None else out + probs[name] * float(w)
        return out

    def predict(self, data):
        """Predictions of the final ensemble (original labels / values)."""
        if self.ensemble != "optdiv":
            return self.predictor.predict(data)
        if not self.ensemble_members:
            raise RuntimeError("the search trained no model, so there is no ensemble to predict with")
        if self.predictor.can_predict_proba:
            return self.predict_proba(data).idxmax(axis=1).rename(self.predictor.label)
        preds = self.predictor.predict_multi(data, models=self.ensemble_members)
        out = None
        for name, w in zip(self.ensemble_members, self.ensemble_weights):
            out = preds[name] * float(w) if out is None else out + preds[name] * float(w)
        return out

    def __repr__(self) -> str:
        ok = sum(t.status == "ok" for t in self.trials)
        return "AutoGluonSearch(method=%r, trials=%d, ok=%d, ensemble=%r, seconds=%.1f)" % (
            self.method, len(self.trials), ok, self.ensemble, self.seconds)


def fit(
    predictor,
    train_data=None,
    tuning_data=None,
    method: str = "optdivbo",
    n_models: int = 60,
    time_limit: Optional[float] = None,
    families: Optional[Sequence[str]] = None,
    ensemble: str = "autogluon",
    seed: int = 0,
    model_time_limit: Optional[float] = None,
    n_initial: int = 5,
    n_candidates: int = 5000,
    ensemble_size: int = 25,
    callback: Optional[Callable[[Trial], Any]] = None,
    **fit_kwargs,
) -> AutoGluonSearch:
    """Let DivBO / OptDivBO choose which models ``predictor`` trains, one at a time.

    ``predictor`` is an unfitted ``TabularPredictor`` (its label, eval_metric and path are used as
    given); ``train_data`` / ``tuning_data`` go to its first ``fit`` (give ``tuning_data`` to search
    and ensemble on your own validation rows; without it AutoGluon holds some out, or uses out-of-fold
    predictions when ``fit_kwargs`` turn bagging on). ``method``: ``optdivbo``, ``divbo``, ``bo`` or
    ``rs``. The loop stops after ``n_models`` suggestions or ``time_limit`` seconds (the ensemble's
    fit included), whichever comes first. ``families``: AutoGluon keys (default: every installed
    one). ``model_time_limit`` caps one model's training (AutoGluon's ``max_time_limit``). A model
    that fails to train is recorded as failed and the search goes on. ``ensemble``: ``autogluon``
    (AutoGluon's weighted ensemble over the trained models becomes the predictor's best model),
    ``optdiv`` (Caruana selection over the stored predictions; use the returned object's
    ``predict``) or ``none``. ``callback(trial)`` is called after every trial. Further keyword
    arguments go to the first ``TabularPredictor.fit``.
    """
    if method not in METHODS:
        raise ValueError("unknown method %r; choose one of %s" % (method, ", ".join(METHODS)))
    if ensemble not in ENSEMBLES:
        raise ValueError("unknown ensemble %r; choose one of %s" % (ensemble, ", ".join(ENSEMBLES)))
    if int(n_models) < 1:
        raise ValueError("n_models must be at least 1")
    if time_limit is not None and not float(time_limit) > 0:
        raise ValueError("time_limit must be a positive number of seconds (or None)")
    if model_time_limit is not None and not float(model_time_limit) > 0:
        raise ValueError("model_time_limit must be a positive number of seconds (or None)")
    if int(seed) < 0:
        raise ValueError("seed must be a non-negative integer")
    if n_initial < 1 or n_candidates < 2:
        raise ValueError("n_initial must be at least 1 and n_candidates at least 2")
    if not hasattr(predictor, "fit_extra") or not hasattr(predictor, "predict_proba_multi"):
        raise TypeError("predictor must be an autogluon.tabular.TabularPredictor; got %r" % type(predictor).__name__)
    if getattr(predictor, "is_fit", False):
        raise ValueError("the predictor is already fitted; pass a new TabularPredictor (the search must own "
                         "every model it reasons about)")
    if train_data is None:
        raise ValueError("train_data is required: the first suggestion is trained with TabularPredictor.fit")
    for key in ("hyperparameters", "hyperparameter_tune_kwargs", "presets"):
        if key in fit_kwargs:
            raise ValueError("%r is chosen by the search; do not pass it to optdiv's fit" % key)

    # resources apply to every AutoGluon call, not only the first fit
    resources = {k: fit_kwargs[k] for k in ("num_cpus", "num_gpus") if k in fit_kwargs}
    start = time.monotonic()
    deadline = None if time_limit is None else start + float(time_limit)
    reserve = 0.0 if time_limit is None else min(30.0, 0.1 * float(time_limit))  # for the final ensemble
    keys = _resolve_families(families)
    trials: List[Trial] = []
    history: List[Observation] = []
    optimizer = None
    space = None
    y_val = None
    n_local = min(50, n_candidates // 2)

    for index in range(int(n_models)):
        left = None if deadline is None else deadline - time.monotonic() - reserve
        if left is not None and left < 1.0:
            break
        t0 = time.monotonic()
        if space is None:
            # the task is known before AutoGluon has seen the data only if the user fixed it
            task = _task_before_fit(predictor, train_data)
            space = autogluon_space(task, algorithms=[FAMILIES[k] for k in keys])
            metric = _metric_before_fit(predictor, task)
            optimizer = Optimizer(space, method, metric, seed=seed, n_initial=n_initial,
                                  n_random=n_candidates - n_local, n_local=n_local)
        suggestion = optimizer.suggest(history, y_val)
        family, params = to_hyperparameters(suggestion.config, space.task)
        trial = Trial(index, family, dict(params), suggestion.config, suggest_seconds=time.monotonic() - t0,
                      info=dict(suggestion.info))
        model_args = dict(params)
        model_args["ag_args"] = {"name_suffix": "%s%d" % (NAME_PREFIX, index)}
        if model_time_limit is not None:
            model_args["ag_args_fit"] = {"max_time_limit": float(model_time_limit)}
        before = set(predictor.model_names()) if getattr(predictor, "is_fit", False) else set()
        t1 = time.monotonic()
        left = None if deadline is None else max(1.0, deadline - time.monotonic() - reserve)
        try:
            if not getattr(predictor, "is_fit", False):
                predictor.fit(train_data, tuning_data=tuning_data, hyperparameters={family: [model_args]},
                              time_limit=left, fit_weighted_ensemble=False, raise_on_no_models_fitted=False,
                              **fit_kwargs)
                if predictor.is_fit and _task_of(predictor) != space.task:
                    raise _TaskMismatch("AutoGluon chose problem_type %r but the search expected %s; pass "
                                       "problem_type= to TabularPredictor" % (predictor.problem_type, space.task))
                y_val = validation_targets(predictor)
                optimizer.metric = optdiv_metric(predictor)  # eval_metric is final only after fit
            else:
                predictor.fit_extra({family: [model_args]}, time_limit=left, fit_weighted_ensemble=False,
                                    **resources)
        except _TaskMismatch:
            raise
        except Exception as exc:  # an AutoGluon-level failure of this one model: record, go on
            trial.error = "%s: %s" % (type(exc).__name__, exc)
        if not getattr(predictor, "is_fit", False):
            raise RuntimeError("AutoGluon could not fit the predictor at all (%s)" % trial.error)
        trial.fit_seconds = time.monotonic() - t1
        new = [m for m in predictor.model_names() if m not in before and _is_trial_model(m, index)]
        if new:
            trial.model = new[0]
            preds = validation_predictions(predictor, [trial.model])[trial.model]
            if np.all(np.isfinite(preds)):
                trial.status = "ok"
                trial.score_val = _score_val(predictor, trial.model)
                trial.val_loss = float(predictor.eval_metric.convert_score_to_error(trial.score_val))
            else:
                trial.status, trial.error, preds = "failed", "non-finite validation predictions", None
        else:
            trial.status, preds = "failed", None
            trial.error = trial.error or _failure_reason(predictor, index)
        if trial.status == "failed":
            logger.info("optdiv trial %d (%s) failed: %s", index, family, trial.error)
        history.append(Observation(config=suggestion.config, status=trial.status,
                                   val_loss=trial.val_loss if trial.status == "ok" else math.inf,
                                   fit_seconds=trial.fit_seconds, val_pred=preds, index=index,
                                   algorithm=FAMILIES[family]))
        trials.append(trial)
        if callback is not None:
            callback(trial)

    if not getattr(predictor, "is_fit", False):
        raise RuntimeError("time_limit left no time to train a single model")
    members, weights = _final_ensemble(predictor, ensemble, history, trials, y_val, ensemble_size, seed, deadline,
                                       resources)
    return AutoGluonSearch(predictor, method, ensemble, trials, history, y_val, members, weights,
                           time.monotonic() - start)


class _TaskMismatch(RuntimeError):
    """AutoGluon inferred another problem type than the search was built for."""


def _task_before_fit(predictor, train_data) -> str:
    """Task from the predictor's problem_type if set, else from the label column as AutoGluon would."""
    problem_type = predictor.problem_type
    if problem_type:
        return _task_of_problem(problem_type)
    import pandas as pd

    if isinstance(train_data, str):
        train_data = pd.read_csv(train_data)
    if predictor.label not in train_data.columns:
        raise ValueError("train_data has no label column %r; columns: %s"
                         % (predictor.label, ", ".join(map(str, train_data.columns))))
    from autogluon.core.utils.utils import infer_problem_type

    inferred = infer_problem_type(train_data[predictor.label], silent=True)
    return _task_of_problem(inferred)


def _metric_before_fit(predictor, task: str) -> str:
    metric = getattr(predictor, "_learner", None) and getattr(predictor._learner, "eval_metric", None)
    return _loss_for(metric, task)


def _is_trial_model(name: str, index: int) -> bool:
    """Whether AutoGluon's model ``name`` is trial ``index`` (bagged models get a ``_BAG_L1`` suffix)."""
    return re.search(r"%s%d(_BAG_L\d+)?$" % (NAME_PREFIX, index), name) is not None


def _score_val(predictor, model: str) -> float:
    board = predictor.leaderboard()
    row = board.loc[board["model"] == model, "score_val"]
    return float(row.iloc[0]) if len(row) else math.nan


def _failure_reason(predictor, index: int) -> str:
    try:
        failures = predictor.model_failures()
    except Exception:  # no failure record (e.g. the model was skipped for time)
        failures = None
    if failures is not None and len(failures):
        hit = failures[[_is_trial_model(str(m), index) for m in failures["model"]]]
        if len(hit):
            return "%s: %s" % (hit["exc_type"].iloc[-1], str(hit["exc_str"].iloc[-1]).strip())
    return "AutoGluon trained no model (skipped, e.g. not enough time left)"


def _final_ensemble(predictor, ensemble, history, trials, y_val, size, seed, deadline, resources):
    ok = [t.model for t in trials if t.status == "ok"]
    if not ok or ensemble == "none":
        if not ok:
            warnings.warn("every suggested model failed; the predictor has no model", RuntimeWarning, stacklevel=3)
        return [], np.zeros(0)
    if ensemble == "optdiv":
        loss = optdiv_metric(predictor)
        idx, weights = choose_members(history, y_val, loss, size=size, seed=seed)
        return [trials[i].model for i in idx], np.asarray(weights, dtype=np.float64)
    left = None if deadline is None else max(1.0, deadline - time.monotonic())
    names = predictor.fit_weighted_ensemble(base_models=ok, name_suffix="_OptDiv", time_limit=left, **resources)
    if not names:
        return [], np.zeros(0)
    predictor.set_model_best(names[0], save_trainer=True)
    return [names[0]], np.ones(1)


# --------------------------------------------------------------------------- #
# A searcher for AutoGluon's per-model HPO
# --------------------------------------------------------------------------- #


def _local_random_searcher():
    from autogluon.core.searcher.local_random_searcher import LocalRandomSearcher

    return LocalRandomSearcher


class _SearcherMixin:
    """DivBO / OptDivBO over one AutoGluon model's search space, inside AutoGluon's own HPO loop.

    AutoGluon tells a searcher only each trial's validation score. Validation predictions are
    obtained by loading the finished trial model (``<model path>/T<trial+1>``, the path AutoGluon's
    ``model_trial`` saves to) and predicting the validation rows AutoGluon wrote for the HPO run
    (``val_path`` in the scheduler's ``train_fn_kwargs``). Bagged models are trained on folds and
    report out-of-fold scores; this searcher then falls back to performance-only EI (no diversity).
    """

    def __init__(self, *, method: str = "optdivbo", n_initial: int = 5, n_candidates: int = 1000,
                 seed: int = 0, callback: Optional[Callable[[dict], Any]] = None, **kwargs):
        if method not in ("optdivbo", "divbo", "bo"):
            raise ValueError("unknown method %r; choose optdivbo, divbo or bo" % method)
        kwargs.setdefault("random_seed", seed)
        super().__init__(**kwargs)
        self.method, self.n_initial, self.n_candidates = method, int(n_initial), int(n_candidates)
        self.seed, self.callback = int(seed), callback
        self._trial_paths = None  # (model_cls, model root, val_path, problem_type, eval_metric)
        self._observed: List[dict] = []  # {"config", "reward", "pred"}
        self._y_val = None

    # ---- AutoGluon hooks --------------------------------------------------
    def configure_scheduler(self, scheduler):
        super().configure_scheduler(scheduler)
        kw = getattr(scheduler, "train_fn_kwargs", None) or {}
        params = kw.get("init_params") or {}
        if "model_cls" in kw and "val_path" in kw and "path" in params and "name" in params:
            self._trial_paths = (kw["model_cls"], os.path.join(params["path"], params["name"]), kw["val_path"],
                                 params.get("problem_type"), params.get("eval_metric"))

    def get_config(self, **kwargs) -> dict:
        done = [o for o in self._observed if np.isfinite(o["reward"])]
        if len(self._observed) < self.n_initial or len(done) < 2 or not self._params_space:
            return super().get_config(**kwargs)
        candidates = self._unseen_candidates()
        if not candidates:
            return super().get_config(**kwargs)
        obs_x = self.encode([o["config"] for o in self._observed])
        rewards = np.array([o["reward"] for o in self._observed], dtype=np.float64)
        losses = -rewards
        losses[~np.isfinite(losses)] = np.nanmax(losses[np.isfinite(losses)])
        cand_x = self.encode(candidates)
        forest = ProbabilisticRandomForest(n_trees=50, seed=self.seed + len(self._observed))
        mean, var = forest.fit(obs_x, losses).predict(cand_x)
        ei = expected_improvement(mean, var, float(losses.min()))
        index = int(np.argmax(ei))
        with_preds = [i for i, o in enumerate(self._observed) if o["pred"] is not None]
        selection = None
        if self.method != "bo" and len(with_preds) >= 2 and self._y_val is not None:
            selector = DiversityAwareSelector(method=self.method, metric=self._metric(),
                                              seed=self.seed + len(self._observed))
            preds = np.stack([self._observed[i]["pred"] for i in with_preds])
            selection = selector.select(cand_x, ei, obs_x[with_preds], preds, self._y_val,
                                        t=len(self._observed))
            index = selection.index
        config = candidates[index]
        self._add_result(config, self._reward_while_pending())
        return config

    def update(self, config: dict, **kwargs):
        super().update(config, **kwargs)
        reward = float(kwargs.get(self._reward_attribute, -math.inf))
        pred = self._trial_predictions(kwargs.get("trial"))
        self._observed.append({"config": dict(config), "reward": reward, "pred": pred})
        if self.callback is not None:
            self.callback({"trial": kwargs.get("trial"), "config": dict(config), "reward": reward,
                           "has_predictions": pred is not None})

    def evaluation_failed(self, config, **kwargs):
        super().evaluation_failed(config, **kwargs)
        self._observed.append({"config": dict(config), "reward": -math.inf, "pred": None})

    # ---- helpers ------------------------------------------------------------
    @property
    def observations(self) -> List[dict]:
        """Every finished trial: config, reward and (when readable) validation predictions."""
        return list(self._observed)

    def _metric(self) -> str:
        problem_type, metric = (self._trial_paths or (None,) * 5)[3:5]
        task = None if problem_type is None else _task_of_problem(problem_type)
        return _loss_for(metric, task)

    def _trial_predictions(self, trial) -> Optional[np.ndarray]:
        """The finished trial model's predictions on AutoGluon's validation rows, or None."""
        if trial is None or self._trial_paths is None:
            return None
        model_cls, root, val_path, problem_type, _ = self._trial_paths
        try:
            from autogluon.core.utils.loaders import load_pkl

            model = model_cls.load(os.path.join(root, "T%d" % (int(trial) + 1)))
            if model._get_tags().get("valid_oof", False) and hasattr(model, "get_oof_pred_proba"):
                return None  # bagged: scored out of fold, not on val rows
            X_val, y_val = load_pkl.load(val_path)
            raw = np.asarray(model.predict_proba(X_val), dtype=np.float32)
        except Exception as exc:  # the trial saved no model (failed / timed out)
            logger.debug("no predictions for trial %s: %s", trial, exc)
            return None
        if problem_type in ("regression", "quantile"):
            pred = raw.reshape(-1)
        elif raw.ndim == 1:  # AutoGluon gives binary models' positive-class probability only
            pred = np.stack([1.0 - raw, raw], axis=1).astype(np.float32)
        else:
            pred = raw
        if self._y_val is None:
            y = np.asarray(y_val)
            self._y_val = y.astype(np.float64) if pred.ndim == 1 else y.astype(np.int64)
        return pred if np.all(np.isfinite(pred)) else None

    def _unseen_candidates(self) -> List[dict]:
        from sklearn.model_selection import ParameterSampler

        out, seen = [], set(self._results)
        for params in ParameterSampler(self._params_space, n_iter=self.n_candidates, random_state=self.random_state):
            params = {k: float(v) if isinstance(v, np.floating) else v for k, v in params.items()}
            params.update(self._params_static)
            key = self._pickle_config(params)
            if key not in seen:
                seen.add(key)
                out.append(params)
        return out

    def encode(self, configs: Sequence[dict]) -> np.ndarray:
        """(count, searched hyperparameters) in [0, 1]: log scale where AutoGluon's space is log,
        categorical index / (k - 1); the layout the core's surrogates expect."""
        from autogluon.common import space as ag_space

        names = [k for k, v in self.search_space.items() if isinstance(v, ag_space.Space)]
        out = np.zeros((len(configs), len(names)), dtype=np.float64)
        for col, name in enumerate(names):
            hp = self.search_space[name]
            for row, config in enumerate(configs):
                value = config[name]
                if isinstance(hp, ag_space.Categorical):
                    k = len(hp.data)
                    pos = next((i for i, c in enumerate(hp.data) if c == value), 0)
                    out[row, col] = pos / (k - 1) if k > 1 else 0.0
                elif isinstance(hp, (ag_space.Real, ag_space.Int)):
                    lo, hi, v = float(hp.lower), float(hp.upper), float(value)
                    if getattr(hp, "log", False) and lo > 0:
                        lo, hi, v = math.log(lo), math.log(hi), math.log(max(v, 1e-300))
                    out[row, col] = 0.0 if hi <= lo else min(max((v - lo) / (hi - lo), 0.0), 1.0)
                else:  # Bool or another discrete space: its position among the choices
                    out[row, col] = float(bool(value))
        return out


@functools.lru_cache(maxsize=None)
def _searcher_class():
    """The searcher class, built on AutoGluon's LocalRandomSearcher when AutoGluon is imported."""
    return type("OptDivSearcher", (_SearcherMixin, _local_random_searcher()), {"__module__": __name__,
                                                                              "__doc__": _SearcherMixin.__doc__})


def __getattr__(name):  # OptDivSearcher needs AutoGluon; build it only when asked for
    if name == "OptDivSearcher":
        return _searcher_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def register_searchers() -> List[str]:
    """Make ``"optdivbo"`` and ``"divbo"`` valid ``hyperparameter_tune_kwargs["searcher"]`` names.

    AutoGluon 1.6.3 builds a searcher per model from its name (``searcher_factory``), with that
    model's search space; registering the class is how every model family gets its own searcher.
    """
    import importlib

    # the package re-exports the function under the module's name: fetch the module itself
    factory = importlib.import_module("autogluon.core.searcher.searcher_factory")

    cls = _searcher_class()
    for method in ("optdivbo", "divbo"):
        factory.SEARCHER_CONFIGS[method] = {"searcher_cls": functools.partial(cls, method=method)}
    return ["optdivbo", "divbo"]


__all__ = [
    "fit",
    "AutoGluonSearch",
    "Trial",
    "FAMILIES",
    "available_families",
    "search_space",
    "to_hyperparameters",
    "validation_predictions",
    "validation_targets",
    "register_searchers",
    "OptDivSearcher",
]
