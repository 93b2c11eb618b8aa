"""AutoGluon-Tabular adapter: DivBO / OptDivBO add good and different models to what AutoGluon trains.

Two entry points, both driven by the core's one ``DiversityAwareSelector``:

* :func:`fit` -- the hook (the recommended route), called where ``predictor.fit`` was, with the same
  arguments. Phase 1 is the fit the user asked AutoGluon for: their ``presets`` and ``hyperparameters``
  (AutoGluon's default portfolio when they give none), bagging and stacking as they set them. Phase 2
  spends the rest of ``time_limit`` on suggestions over AutoGluon's model families (GBM, CAT, XGB, RF, XT,
  KNN, LR; the installed ones), each trained by AutoGluon through ``fit_extra``. The suggestions'
  history starts with phase 1's models and their validation (or, bagged, out-of-fold) predictions, so
  diversity is measured against what AutoGluon already has. At the end AutoGluon refits its weighted
  ensemble over every model; the predictor keeps it only if it beats AutoGluon's own best model on
  validation, and a test on check rows that phase 2 never scored says the gain is not just the search's picks
  fitting the rows they were picked on, so the result is never worse there than AutoGluon alone. AutoGluon's post-fit steps
  (refit_full, calibration, keep_only_best, save_space) run once, on the final predictor.
* :class:`OptDivSearcher` -- a searcher for AutoGluon's own per-model HPO
  (``hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "optdivbo", ...}`` after
  :func:`register_searchers`). AutoGluon reports only a score to a searcher; the searcher reloads each
  finished trial model from disk and reads its validation predictions (bagged: its out-of-fold ones).

Both routes encode configurations with the engine's ``optdiv.spaces.encoding.ConfigEncoder`` (the hook's
space is a ConfigSpace space; the searcher turns AutoGluon's ``space`` objects into one) and read
AutoGluon's ``eval_metric`` through the core's metric vocabulary.

The adapter relies on AutoGluon internals; :func:`check_host` checks them when a fit or a searcher starts,
and a changed host raises :class:`HostVersionError` instead of searching in AutoGluon's own order unnoticed.
Written against AutoGluon-Tabular 1.6.3 (:data:`WRITTEN_FOR`). AutoGluon types stay in this module;
``optdiv.core`` sees numpy arrays only.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.spaces import cs_compat
from optdiv.spaces.encoding import ConfigEncoder
from optdiv.evaluation.observation import Observation
from optdiv.strategies.model_based import Optimizer
from optdiv.spaces.assembly import selected
from optdiv.spaces.autogluon_space import OPTIONAL, autogluon_space
from optdiv.core.metric_vocabulary import resolve_host, task_of
from optdiv.core.metrics import per_example_loss
from optdiv.core.selector import DiversityAwareSelector
from optdiv.core.surrogates import ProbabilisticRandomForest, expected_improvement
from optdiv.integrations.host_check import Problems, covers as _covers, parameters as _parameters

logger = logging.getLogger(__name__)

WRITTEN_FOR = "AutoGluon-Tabular 1.6.3"

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
#: AutoGluon's model class of each family (``model_info(...)["model_type"]`` names the class).
_MODEL_CLASSES = {"GBM": "LGBModel", "CAT": "CatBoostModel", "XGB": "XGBoostModel", "RF": "RFModel",
                  "XT": "XTModel", "KNN": "KNNModel", "LR": "LinearModel"}
#: The engine's strategies the hook offers, named here so a new engine strategy is not offered unchecked.
METHODS = ("rs", "bo", "divbo", "optdivbo")
NAME_PREFIX = "_OD"  # phase-2 models are named e.g. LightGBM_OD7: unique per trial, recognisable in the leaderboard
ENSEMBLE_SUFFIX = "_OptDiv"  # the refitted weighted ensemble, e.g. WeightedEnsemble_L2_OptDiv
#: Budget when neither ``time_limit`` nor the presets set one: the hour AutoGluon's quality presets give
#: themselves. Phase 2 also stops after ``n_models`` suggestions, so small data finish well before it.
DEFAULT_TIME_LIMIT = 3600.0
#: Phase 2 starts only with at least this many seconds left (one small model plus fit_extra's own overhead).
MIN_MODEL_SECONDS = 1.5
#: The refitted ensemble replaces AutoGluon's best only when a test on the check rows is at least this sure that
#: ensembling over every model generalises better than over phase 1's (:func:`switch_confidence_heldout`): phase 2
#: picks its models by their scores on the other rows, so a higher score there is partly the picking.
SWITCH_CONFIDENCE = 0.9
#: Share of the rows models are scored on (validation rows; out-of-fold training rows when bagged) that phase 2
#: never scores: the check rows. Each class is split in this share. The search steers by the other rows only, so
#: the check rows can tell a better pool from one picked to fit the rows it was scored on.
CHECK_SHARE = 0.5
#: Below this many check rows (or rows left for the search) the rows are not split and the switch falls back to a
#: cross-validation over all of them (:func:`switch_confidence_cv`).
MIN_CHECK_ROWS = 30
#: AutoGluon's post-fit steps: run once at the end (on the final ensemble), not after phase 1.
_POST_FIT = ("refit_full", "set_best_to_refit_full", "keep_only_best", "save_space", "calibrate",
             "calibrate_decision_threshold")
#: fit keywords the hook cannot honour, with the reason.
_REFUSED = {
    "infer_limit": "the final ensemble is chosen on validation score alone, not under an inference-time limit",
    "use_bag_holdout": "AutoGluon's refitted weighted ensemble ignores the bag holdout; fit without optdiv",
}


# --------------------------------------------------------------------------- #
# Host version: the internals the adapter relies on
# --------------------------------------------------------------------------- #


class HostVersionError(RuntimeError):
    """AutoGluon differs from the version the adapter was written for in something it relies on."""


def _signature_problem(cls, needs: Dict[str, Tuple[str, ...]]) -> Optional[str]:
    """The first method of ``needs`` (name -> parameters it must take) that ``cls`` lacks or takes otherwise."""
    for name, params in needs.items():
        method = getattr(cls, name, None)
        if method is None:
            return "%s has no %s" % (cls.__name__, name)
        found = _covers(_parameters(method), params)
        if found:
            return "%s.%s: %s" % (cls.__name__, name, found)
    return None


def _hook_problems() -> List[str]:
    """Every internal the hook relies on that is missing or has another signature (empty: all as expected)."""
    problems = Problems()

    def predictor():
        from autogluon.tabular import TabularPredictor as P

        needs = {
            "fit": ("train_data", "tuning_data", "time_limit", "presets", "hyperparameters", "fit_weighted_ensemble",
                    "calibrate_decision_threshold", "num_cpus", "num_gpus", "fit_strategy"),
            "fit_extra": ("hyperparameters", "time_limit", "fit_weighted_ensemble", "num_cpus", "num_gpus"),
            "predict_proba_multi": ("data", "models", "as_pandas", "as_multiclass", "inverse_transform"),
            "predict_multi": ("data", "models", "as_pandas", "inverse_transform"),
            "load_data_internal": ("data", "return_X", "return_y"),
            "fit_weighted_ensemble": ("base_models", "name_suffix", "time_limit", "num_cpus", "num_gpus"),
            "set_model_best": ("model", "save_trainer"),
            "model_hyperparameters": ("model", "include_ag_args_ensemble", "output_format"),
            "model_info": ("model",), "leaderboard": (), "model_failures": (), "model_names": ("stack_name",),
            "_post_fit": _POST_FIT + ("infer_limit", "num_cpus", "num_gpus", "fit_strategy",
                                      "raise_on_no_models_fitted"),
        }
        return _signature_problem(P, needs)

    def fit_extra_keywords():
        from autogluon.tabular import TabularPredictor as P

        from types import SimpleNamespace

        keys = P._fit_extra_kwargs_dict(SimpleNamespace(verbosity=0))  # it reads nothing else of the predictor
        return _covers(keys, ("ag_args", "ag_args_fit", "calibrate", "refit_full", "set_best_to_refit_full",
                               "keep_only_best", "save_space", "raise_on_no_models_fitted", "name_suffix"))

    def presets():
        from autogluon.common.utils.decorators import _apply_presets
        from autogluon.tabular.configs.presets_configs import tabular_presets_alias, tabular_presets_dict

        found = _covers(_parameters(_apply_presets), ("preset_dict", "presets_alias"))
        if found:
            return "_apply_presets: " + found
        if not isinstance(tabular_presets_dict, dict) or not isinstance(tabular_presets_alias, dict):
            return "tabular_presets_dict / tabular_presets_alias are not dicts"
        return None

    def model_classes():
        import autogluon.tabular.models as models

        wrong = [key for key, cls in _MODEL_CLASSES.items()
                 if getattr(getattr(models, cls, None), "ag_key", None) != key]
        return None if not wrong else "model classes of %s are gone or renamed" % ", ".join(wrong)

    def scoring():
        from autogluon.core.metrics import Scorer, compute_metric
        from autogluon.core.utils import get_pred_from_proba

        found = (_covers(_parameters(compute_metric), ("y", "metric", "y_pred", "y_pred_proba", "as_error"))
                 or _covers(_parameters(get_pred_from_proba), ("y_pred_proba", "problem_type")))
        if found:
            return found
        missing = [name for name in ("needs_pred", "needs_quantile") if not hasattr(Scorer, name)]
        return None if not missing else "Scorer has no %s" % ", ".join(missing)

    problems.check("autogluon.tabular.TabularPredictor methods", predictor)
    problems.check("scoring predictions (autogluon.core.metrics.compute_metric, get_pred_from_proba)", scoring)
    problems.check("TabularPredictor._fit_extra_kwargs_dict", fit_extra_keywords)
    problems.check("preset resolution (autogluon.common.utils.decorators)", presets)
    problems.check("autogluon.tabular.models (family of a trained model)", model_classes)
    return problems


def _searcher_problems() -> List[str]:
    """Every internal the HPO searcher relies on that is missing or has another signature."""
    problems = Problems()

    def factory():
        import importlib

        module = importlib.import_module("autogluon.core.searcher.searcher_factory")
        configs = getattr(module, "SEARCHER_CONFIGS", None)
        if not isinstance(configs, dict):
            return "no module-level SEARCHER_CONFIGS dict"
        if not all("searcher_cls" in c for c in configs.values()):
            return "SEARCHER_CONFIGS entries no longer hold searcher_cls"
        return None

    def searcher():
        from autogluon.common import space
        from autogluon.core.searcher.local_random_searcher import LocalRandomSearcher as S

        found = _signature_problem(S, {"get_config": (), "update": ("config",), "evaluation_failed": ("config",),
                                       "configure_scheduler": ("scheduler",), "_pickle_config": ("config",),
                                       "_add_result": ("config", "result"), "_reward_while_pending": ()})
        if found:
            return found
        probe = S(search_space={"x": space.Real(0.0, 1.0)}, reward_attribute="reward")
        gone = [a for a in ("search_space", "_results", "_params_space", "_params_static", "random_state",
                            "_reward_attribute") if not hasattr(probe, a)]
        return None if not gone else "LocalRandomSearcher instances lack %s" % ", ".join(gone)

    def trial_layout():
        from autogluon.core.models.abstract import model_trial

        if "T{task_id + 1}" not in inspect.getsource(model_trial.init_model):
            return "model_trial.init_model no longer saves trial models under T<trial + 1>"
        return None

    def bagged():
        from autogluon.core.models import BaggedEnsembleModel

        method = getattr(BaggedEnsembleModel, "load_oof", None)
        return "no load_oof" if method is None else _covers(_parameters(method), ("path",))

    problems.check("autogluon.core.searcher.searcher_factory", factory)
    problems.check("autogluon.core.searcher.LocalRandomSearcher (the searcher subclasses it)", searcher)
    problems.check("trial model path layout (autogluon.core.models.abstract.model_trial)", trial_layout)
    problems.check("BaggedEnsembleModel (out-of-fold predictions of bagged trials)", bagged)
    return problems


def _installed() -> str:
    try:
        import autogluon.tabular

        return "AutoGluon-Tabular %s" % autogluon.tabular.__version__
    except Exception:  # not installed or no version attribute
        return "AutoGluon-Tabular (version unknown)"


def _raise_if(problems: List[str], what: str) -> None:
    if problems:
        raise HostVersionError(
            "optdiv's AutoGluon %s was written for %s and relies on internals that differ in this environment "
            "(%s):\n  - %s\nInstall %s (pip install \"autogluon.tabular==1.6.3\"), or fit without optdiv."
            % (what, WRITTEN_FOR, _installed(), "\n  - ".join(problems), WRITTEN_FOR))


def check_host(searcher: bool = False) -> None:
    """Raise :class:`HostVersionError` unless every AutoGluon internal the hook (``searcher=True``: the HPO
    searcher) relies on is there with the expected signature. Called when a fit or a searcher starts."""
    if searcher:
        _raise_if(_searcher_problems(), "searcher")
    else:
        _raise_if(_hook_problems(), "hook")


# --------------------------------------------------------------------------- #
# Families and configurations
# --------------------------------------------------------------------------- #


def _installed_module(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # ImportError or a broken native library
        return False
    return True


def available_families() -> List[str]:
    """The AutoGluon model keys this environment can train (CAT / XGB need their packages)."""
    return [key for key, algorithm in FAMILIES.items()
            if algorithm not in OPTIONAL or _installed_module(OPTIONAL[algorithm])]


def _resolve_families(families: Optional[Sequence[str]]) -> List[str]:
    """Requested families, checked. Without a request: every installed family (missing optional packages are
    skipped); asking for an uninstalled family by name is an error."""
    if families is None:
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
    """optdiv's AutoGluon space (a ConfigSpace space) restricted to ``families`` (AutoGluon keys)."""
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


#: What a model uses for a searched hyperparameter AutoGluon leaves to the library (absent from
#: ``model_hyperparameters``): the library's own default. ``None``: the space's default.
_LIBRARY_DEFAULTS = {
    "lightgbm": {"feature_fraction": 1.0, "min_data_in_leaf": 20, "num_leaves": 31},
    "catboost": {"depth": 6, "l2_leaf_reg": 3.0},
    "xgboost": {"max_depth": 6, "min_child_weight": 1.0, "gamma": 0.0, "subsample": 1.0, "colsample_bytree": 1.0,
                "reg_alpha": 0.0, "reg_lambda": 1.0},
    "random_forest": {"min_samples_leaf": 1},
    "extra_trees": {"min_samples_leaf": 1},
    "k_nearest_neighbors": {"n_neighbors": 5, "p": 2},
    "linear": {},
}


def from_hyperparameters(family: str, params: Dict[str, Any], space) -> Optional[Dict[str, Any]]:
    """The configuration of ``space`` nearest to a model AutoGluon trained with ``params`` (its
    ``model_hyperparameters(..., output_format="all")``): numbers clipped into the space's ranges, values the
    space does not know replaced by the library's default. None when ``space`` has no such family. Settings
    outside the space (LightGBM's ``extra_trees``, a forest's criterion) are dropped, so two such models can
    share a configuration; their predictions still differ, which is what the diversity is measured on."""
    algorithm = FAMILIES.get(family)
    if algorithm is None or algorithm not in space.algorithms:
        return None
    group = "classifier" if space.task == "classification" else "regressor"
    prefix = "%s:%s:" % (group, algorithm)
    config: Dict[str, Any] = {"%s:__choice__" % group: algorithm}
    defaults = _LIBRARY_DEFAULTS[algorithm]
    for name in space.hyperparameter_names:
        if not name.startswith(prefix):
            continue
        local = name[len(prefix):]
        hp = cs_compat.get_hyperparameter(space.configspace, name)
        value = params.get(local, defaults.get(local))
        if local == "max_features" and value is None and family in ("RF", "XT"):
            value = "sqrt" if space.task == "classification" else 1.0  # scikit-learn's forest defaults
        config[name] = _nearest(hp, value)
    try:
        return space.validate(config)
    except Exception:  # a value the space refuses after all: the model joins the ensemble, not the search
        return None


def _nearest(hp, value):
    """``value`` as a legal value of ``hp``: clipped into a numerical range, matched to a categorical choice
    by its text or by the nearest number among numerical choices; the default where nothing matches."""
    if cs_compat.is_categorical(hp):
        choices = [str(c) for c in cs_compat.choices_of(hp)]
        text = str(value)
        if text in choices:
            return text
        try:
            number = float(value)
        except (TypeError, ValueError):
            return str(hp.default_value)
        numeric = [(abs(float(c) - number), c) for c in choices if _is_number(c)]
        return min(numeric)[1] if numeric else str(hp.default_value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return hp.default_value
    if not math.isfinite(number):
        return hp.default_value
    number = min(max(number, float(hp.lower)), float(hp.upper))
    return int(round(number)) if type(hp).__name__.endswith("IntegerHyperparameter") else number


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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


def _model_params(info: Dict[str, Any]) -> Dict[str, Any]:
    """``model_hyperparameters(name, output_format="all")`` from a ``model_info`` already read (bagged: the
    children's), without reading the model's info a second time."""
    try:
        params = info["bagged_info"]["child_hyperparameters"] if "bagged_info" in info else info["hyperparameters"]
    except KeyError as exc:
        raise HostVersionError("model_info() has no %s (written for %s)" % (exc, WRITTEN_FOR)) from None
    return dict(params)


def _family_of(info: Dict[str, Any]) -> Optional[str]:
    """The AutoGluon key of a trained model from its ``model_info`` (bagged: its children's class)."""
    if "model_type" not in info:
        raise HostVersionError("model_info() has no 'model_type' (written for %s)" % WRITTEN_FOR)
    model_type = info["model_type"]
    if "bagged_info" in info:
        model_type = info["bagged_info"].get("child_model_type", model_type)
    return next((key for key, cls in _MODEL_CLASSES.items() if cls == model_type), None)


# --------------------------------------------------------------------------- #
# The hook
# --------------------------------------------------------------------------- #


@dataclass
class Trial:
    """One phase-2 suggestion: its configuration, the AutoGluon model it became, and what happened."""

    index: int
    family: str  # AutoGluon key, e.g. "GBM"
    hyperparameters: Dict[str, Any]
    config: Dict[str, Any] = field(repr=False)
    model: Optional[str] = None  # AutoGluon model name; None when no model was trained
    status: str = "pending"  # "ok" | "failed" | "timeout"
    score_val: float = math.nan  # AutoGluon's validation score (higher is better)
    val_loss: float = math.nan  # the same as an error (eval_metric.convert_score_to_error)
    fit_seconds: float = 0.0
    suggest_seconds: float = 0.0
    error: Optional[str] = None
    info: Dict[str, Any] = field(default_factory=dict, repr=False)  # the optimizer's strategy, w(t), pool


class AutoGluonSearch:
    """What :func:`fit` returns: the fitted ``predictor`` and the record of both phases.

    ``phase1_models``: what AutoGluon trained for the user's own fit; ``autogluon_best``: AutoGluon's best
    model after it; ``trials``: phase 2's suggestions; ``history``: the observations the suggestions were made
    from (phase 1's models first, with their stored predictions); ``final_model``: ``predictor.model_best``
    at the end (before any refit_full), AutoGluon's best unless the refitted ensemble beat it on validation
    and on the check rows. ``check``: the boolean mask of the rows of ``y_val`` that phase 2 never scored (None
    when there were too few rows to split; the switch was then cross-validated over all of them).
    """

    def __init__(self, predictor, method, budget, phase1_models, autogluon_best, trials, history, y_val,
                 final_model, scores, confidence, phase1_seconds, seconds, check=None):
        self.predictor = predictor
        self.method = method
        self.time_limit = budget
        self.phase1_models: List[str] = phase1_models
        self.autogluon_best: Optional[str] = autogluon_best
        self.trials: List[Trial] = trials
        self.history: List[Observation] = history
        self.y_val = y_val
        self.final_model: Optional[str] = final_model
        self.scores: Dict[str, float] = scores  # validation scores of AutoGluon's best and the refitted ensemble
        #: how sure the check rows are that ensembling over every model beats phase 1's (None: not compared)
        self.confidence: Optional[float] = confidence
        self.phase1_seconds = phase1_seconds
        self.seconds = seconds
        self.check: Optional[np.ndarray] = check

    @property
    def models(self) -> List[str]:
        """AutoGluon names of the models phase 2 trained."""
        return [t.model for t in self.trials if t.status == "ok"]

    def trials_frame(self):
        """Phase 2's suggestions as a DataFrame (one row per suggestion, in order)."""
        import pandas as pd

        return pd.DataFrame([{k: getattr(t, k) for k in ("index", "family", "model", "status", "score_val",
                                                          "val_loss", "fit_seconds", "suggest_seconds",
                                                          "hyperparameters", "error")} for t in self.trials])

    def __repr__(self) -> str:
        ok = sum(t.status == "ok" for t in self.trials)
        return ("AutoGluonSearch(method=%r, phase1_models=%d, trials=%d, ok=%d, final_model=%r, seconds=%.1f of %.0f)"
                % (self.method, len(self.phase1_models), len(self.trials), ok, self.final_model, self.seconds,
                   self.time_limit))


def fit(
    predictor,
    train_data=None,
    tuning_data=None,
    time_limit: Optional[float] = None,
    presets=None,
    hyperparameters=None,
    *,
    method: str = "optdivbo",
    families: Optional[Sequence[str]] = None,
    n_models: int = 100,
    seed: int = 0,
    model_time_limit: Optional[float] = None,
    n_initial: int = 5,
    n_candidates: int = 5000,
    switch_confidence: float = SWITCH_CONFIDENCE,
    callback: Optional[Callable[[Trial], Any]] = None,
    **fit_kwargs,
) -> AutoGluonSearch:
    """``predictor.fit(train_data, tuning_data, time_limit, presets, hyperparameters, **fit_kwargs)``, then
    diversity-aware models in the time AutoGluon leaves unused.

    Phase 1 is AutoGluon's own fit with every argument as given (``hyperparameters=None``: AutoGluon's
    default portfolio; bagging and stacking keywords included), given the whole ``time_limit`` except a
    small reserve for the final ensemble. Phase 2 then suggests up to ``n_models`` models over ``families``
    (AutoGluon keys; default every installed one) with ``method`` (``optdivbo``, ``divbo``, ``bo``, ``rs``)
    and trains each with ``fit_extra``, capped at the time left (and at ``model_time_limit`` when given);
    it starts from phase 1's models and steers by their scores on all rows but the check rows
    (:data:`CHECK_SHARE`). At the end AutoGluon's weighted ensemble is refitted over every model and becomes
    ``predictor.model_best`` only if its validation score beats AutoGluon's own best and a test on the check rows
    is at least ``switch_confidence`` sure that it generalises better (0: the score alone); then AutoGluon's post-fit steps the arguments ask for run, and the predictor is
    saved (``TabularPredictor.load`` gives it back). ``time_limit`` defaults to the presets' own, else
    :data:`DEFAULT_TIME_LIMIT`.
    ``callback(trial)`` is called after every phase-2 model. Stacking works; phase-2 models join level 1
    (they feed the final weighted ensemble, not the stack's upper levels).
    """
    check_host()
    if method not in METHODS:
        raise ValueError("unknown method %r; choose one of %s" % (method, ", ".join(METHODS)))
    if isinstance(n_models, bool) or int(n_models) != n_models or n_models < 0:
        raise ValueError("n_models must be a non-negative integer (0: AutoGluon's own fit only)")
    for name, value in (("time_limit", time_limit), ("model_time_limit", model_time_limit)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError("%s must be a positive number of seconds (or None); got %r" % (name, value))
    if int(seed) < 0:
        raise ValueError("seed must be a non-negative integer")
    if n_initial < 1 or n_candidates < 2:
        raise ValueError("n_initial must be at least 1 and n_candidates at least 2")
    if not (isinstance(switch_confidence, (int, float)) and 0.0 <= switch_confidence < 1.0):
        raise ValueError("switch_confidence must be in [0, 1); got %r" % (switch_confidence,))
    if not hasattr(predictor, "fit_extra") or not hasattr(predictor, "predict_proba_multi"):
        raise TypeError("predictor must be an autogluon.tabular.TabularPredictor; got %r" % type(predictor).__name__)
    if getattr(predictor, "is_fit", False):
        raise ValueError("the predictor is already fitted; pass a new TabularPredictor (the search must know "
                         "every model it reasons about)")
    if train_data is None:
        raise ValueError("train_data is required (the data of AutoGluon's own fit)")
    keys = _resolve_families(families)
    start = time.monotonic()
    effective = _effective_fit_kwargs(presets, hyperparameters, fit_kwargs)
    for key, reason in _REFUSED.items():
        if effective.get(key) not in (None, False):
            raise ValueError("%s=%r is not supported by optdiv's AutoGluon hook: %s" % (key, effective[key], reason))
    deferred = [k for k in _POST_FIT if k in effective]
    budget = float(time_limit if time_limit is not None else effective.get("time_limit") or DEFAULT_TIME_LIMIT)
    deadline = start + budget
    reserve = _reserve(budget)
    resources = {k: effective[k] for k in ("num_cpus", "num_gpus") if k in effective}
    post_fit = {k: effective.get(k, v) for k, v in _post_fit_defaults(predictor).items()}
    fit_weighted = bool(effective.get("fit_weighted_ensemble", True))
    if deferred:
        logger.info("optdiv: %s run once at the end, on the final predictor", ", ".join(deferred))

    # Phase 1: the user's own AutoGluon fit; AutoGluon's post-fit steps wait for the final ensemble.
    kwargs = dict(fit_kwargs)
    kwargs.update({k: False for k in _POST_FIT})
    kwargs["raise_on_no_models_fitted"] = False
    for name, value in (("presets", presets), ("hyperparameters", hyperparameters)):
        if value is not None:  # passing None would override the presets' own choice (explicit keywords win)
            kwargs[name] = value
    predictor.fit(train_data, tuning_data=tuning_data, time_limit=max(1.0, deadline - reserve - time.monotonic()),
                  **kwargs)
    phase1_seconds = time.monotonic() - start
    phase1_models = list(predictor.model_names())
    autogluon_best = predictor.model_best if phase1_models else None

    trials: List[Trial] = []
    history: List[Observation] = []
    y_val = check = None
    if n_models > 0 and deadline - reserve - time.monotonic() >= MIN_MODEL_SECONDS:
        y_val, check, history, trials = _phase2(predictor, method, keys, int(n_models), seed, model_time_limit,
                                                n_initial, n_candidates, callback, resources, deadline, reserve)
    if not predictor.model_names():
        raise RuntimeError("AutoGluon trained no model in %.0f s (see predictor.model_failures())" % budget)

    final_model, scores, confidence = _final_model(predictor, autogluon_best,
                                                   [t.model for t in trials if t.status == "ok"], fit_weighted,
                                                   resources, deadline, y_val, check, switch_confidence, history,
                                                   seed)
    predictor._post_fit(**post_fit, infer_limit=None, num_cpus=effective.get("num_cpus", "auto"),
                        num_gpus=effective.get("num_gpus", "auto"),
                        fit_strategy=effective.get("fit_strategy", "sequential"), raise_on_no_models_fitted=False)
    predictor.save()
    return AutoGluonSearch(predictor, method, budget, phase1_models, autogluon_best, trials, history, y_val,
                           final_model, scores, confidence, phase1_seconds, time.monotonic() - start, check)


def _effective_fit_kwargs(presets, hyperparameters, fit_kwargs) -> Dict[str, Any]:
    """The keywords AutoGluon's fit will see once the presets are applied (explicit keywords win, as in
    AutoGluon): where the budget, the post-fit steps and the resources come from."""
    from autogluon.common.utils.decorators import _apply_presets
    from autogluon.tabular.configs.presets_configs import tabular_presets_alias, tabular_presets_dict

    kwargs = dict(fit_kwargs)
    if hyperparameters is not None:
        kwargs["hyperparameters"] = hyperparameters
    if presets is not None:
        kwargs["presets"] = presets
    _, resolved = _apply_presets(tabular_presets_dict, tabular_presets_alias, **kwargs)
    return resolved


def _post_fit_defaults(predictor) -> Dict[str, Any]:
    """AutoGluon's own defaults of the post-fit keywords (read from AutoGluon, not copied)."""
    defaults = predictor._fit_extra_kwargs_dict()
    out = {k: defaults[k] for k in _POST_FIT if k in defaults}
    out["calibrate_decision_threshold"] = inspect.signature(type(predictor).fit).parameters[
        "calibrate_decision_threshold"].default
    return out


def _reserve(budget: float) -> float:
    """Seconds kept back from both phases for the refitted weighted ensemble and saving: 5% of the budget,
    at least 2 s and at most 30 s (a few seconds suffice on small data; large data need more to predict)."""
    return min(30.0, max(2.0, 0.05 * budget))


def _scores(predictor) -> Dict[str, float]:
    """AutoGluon's validation score of every model (the leaderboard reads stored attributes; fast)."""
    board = predictor.leaderboard()
    return {str(m): float(v) for m, v in zip(board["model"], board["score_val"])}


def _inventory(predictor, space, y_rows: int) -> Tuple[List[Observation], List[Observation]]:
    """Phase 1's models as observations: (level-1 models, higher-level stackers). Each has its configuration
    in ``space`` (the nearest one, :func:`from_hyperparameters`), AutoGluon's validation score as a loss and
    its stored predictions. Weighted ensembles and models of families outside the space are left out."""
    board = predictor.leaderboard()
    level = dict(zip(board["model"], board["stack_level"]))
    fit_time = dict(zip(board["model"], board["fit_time"]))
    score = dict(zip(board["model"], board["score_val"]))
    rows = {}
    for name in predictor.model_names(stack_name="core"):  # every model but the weighted ensembles
        info = predictor.model_info(name)
        family = _family_of(info)
        if family is None or score.get(name) is None or not np.isfinite(score[name]):
            continue
        config = from_hyperparameters(family, _model_params(info), space)
        if config is not None:
            rows[name] = (family, config)
    preds = validation_predictions(predictor, list(rows)) if rows else {}
    base: List[Observation] = []
    stacked: List[Observation] = []
    for name, (family, config) in rows.items():
        pred = preds.get(name)
        if pred is None or pred.shape[0] != y_rows or not np.all(np.isfinite(pred)):
            continue
        obs = Observation(config=config, status="ok",
                          val_loss=float(predictor.eval_metric.convert_score_to_error(float(score[name]))),
                          fit_seconds=float(fit_time.get(name) or 0.0), val_pred=pred, algorithm=FAMILIES[family])
        obs.model_name = name
        (base if int(level.get(name, 1)) <= 1 else stacked).append(obs)
    return base, stacked


def _phase2(predictor, method, keys, n_models, seed, model_time_limit, n_initial, n_candidates, callback,
            resources, deadline, reserve):
    """Suggest, train with fit_extra, read back, until ``n_models`` suggestions or the deadline less the reserve."""
    task = _task_of(predictor)
    installed = available_families()
    # the space covers every installed family, so phase 1's models are all encodable; suggestions keep to ``keys``
    space = autogluon_space(task, algorithms=[FAMILIES[k] for k in installed])
    allowed = None if set(keys) == set(installed) else [FAMILIES[k] for k in keys]
    y_val = validation_targets(predictor)
    loss = optdiv_metric(predictor)
    check = check_rows(y_val, task, seed)
    scored = None if check is None else ~check  # the rows the search steers by
    y_scored = y_val if scored is None else y_val[scored]
    history, stacked = _inventory(predictor, space, len(y_val))
    for i, obs in enumerate(stacked + history):
        obs.index = i
    # what the optimizer sees: the same observations on the scored rows only
    seen = [_on_rows(predictor, obs, scored, y_val) for obs in history]
    seen_stacked = [_on_rows(predictor, obs, scored, y_val) for obs in stacked]
    n_local = min(50, n_candidates // 2)
    optimizer = Optimizer(space, method, loss, seed=seed, n_initial=n_initial,
                          n_random=n_candidates - n_local, n_local=n_local, cost_aware=True)
    optimizer.time_left = lambda: deadline - reserve - time.monotonic()
    trials: List[Trial] = []
    for index in range(n_models):
        left = deadline - reserve - time.monotonic()
        if left < MIN_MODEL_SECONDS:
            break
        t0 = time.monotonic()
        context = seen_stacked + seen if stacked and method in ("divbo", "optdivbo") else None
        suggestion = optimizer.suggest(seen, y_scored, algorithm=allowed, context=context)
        family, params = to_hyperparameters(suggestion.config, task)
        trial = Trial(index, family, dict(params), suggestion.config, suggest_seconds=time.monotonic() - t0,
                      info=dict(suggestion.info))
        left = deadline - reserve - time.monotonic()
        cap = left if model_time_limit is None else min(left, float(model_time_limit))
        model_args = dict(params)
        model_args["ag_args"] = {"name_suffix": "%s%d" % (NAME_PREFIX, index)}
        model_args["ag_args_fit"] = {"max_time_limit": max(1.0, cap)}
        before = set(predictor.model_names())
        t1 = time.monotonic()
        try:
            predictor.fit_extra({family: [model_args]}, time_limit=max(1.0, left), fit_weighted_ensemble=False,
                                calibrate=False, raise_on_no_models_fitted=False, **resources)
        except Exception as exc:  # an AutoGluon-level failure of this one model: record, go on
            trial.error = "%s: %s" % (type(exc).__name__, exc)
        trial.fit_seconds = time.monotonic() - t1
        new = [m for m in predictor.model_names() if m not in before and _is_trial_model(m, index)]
        preds = None
        if new:
            trial.model = new[0]
            preds = validation_predictions(predictor, [trial.model])[trial.model]
            if np.all(np.isfinite(preds)):
                trial.status = "ok"
                trial.score_val = _scores(predictor)[trial.model]
                trial.val_loss = float(predictor.eval_metric.convert_score_to_error(trial.score_val))
            else:
                trial.status, trial.error, preds = "failed", "non-finite validation predictions", None
        else:
            trial.error = trial.error or _failure_reason(predictor, index)
            trial.status = "timeout" if "TimeLimitExceeded" in trial.error else "failed"
        if trial.status != "ok":
            logger.info("optdiv trial %d (%s) %s: %s", index, family, trial.status, trial.error)
        obs = Observation(config=suggestion.config, status=trial.status,
                          val_loss=trial.val_loss if trial.status == "ok" else math.inf,
                          fit_seconds=trial.fit_seconds, val_pred=preds, index=len(stacked) + len(history),
                          algorithm=FAMILIES[family])
        obs.model_name = trial.model
        history.append(obs)
        seen.append(_on_rows(predictor, obs, scored, y_val))
        trials.append(trial)
        if callback is not None:
            callback(trial)
    return y_val, check, stacked + history, trials


def check_rows(y, task: str, seed: int, share: float = CHECK_SHARE) -> Optional[np.ndarray]:
    """Boolean mask of the rows phase 2 never scores (``share`` of each class, or of all rows for regression),
    drawn with ``seed``; None when either side would have fewer than :data:`MIN_CHECK_ROWS` rows."""
    y = np.asarray(y)
    n = len(y)
    n_check = int(round(share * n))
    if n_check < MIN_CHECK_ROWS or n - n_check < MIN_CHECK_ROWS:
        return None
    rng = np.random.default_rng([int(seed), 0xC4EC])
    mask = np.zeros(n, dtype=bool)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if task == "classification" else [np.arange(n)]
    for rows in groups:
        mask[rng.permutation(rows)[:int(round(share * len(rows)))]] = True
    return mask


def _on_rows(predictor, obs: Observation, rows: Optional[np.ndarray], y: np.ndarray) -> Observation:
    """``obs`` as the search sees it: its predictions on ``rows`` and its loss there (None: all rows, as is)."""
    if rows is None or obs.val_pred is None:
        return obs
    pred = obs.val_pred[rows]
    return replace(obs, val_pred=pred, val_loss=metric_loss(predictor, pred, y[rows]))


def metric_loss(predictor, pred: np.ndarray, y: np.ndarray) -> float:
    """The predictor's ``eval_metric`` as an error for predictions in the layout of :func:`validation_predictions`
    on rows with the internal labels ``y``: what AutoGluon's validation score would be on those rows alone, so the
    search steers by your metric (AUC, F1, ... included) on the rows it may see."""
    from autogluon.core.metrics import compute_metric
    from autogluon.core.utils import get_pred_from_proba

    metric, problem = predictor.eval_metric, predictor.problem_type
    proba = pred[:, 1] if problem == "binary" and pred.ndim == 2 else pred  # AutoGluon's binary layout
    y_pred = get_pred_from_proba(proba, problem_type=problem) if metric.needs_pred or metric.needs_quantile else None
    return float(compute_metric(y, metric, y_pred=y_pred, y_pred_proba=None if y_pred is not None else proba,
                                as_error=True))


def _is_trial_model(name: str, index: int) -> bool:
    """Whether AutoGluon's model ``name`` is trial ``index`` (bagged models get a ``_BAG_L1`` suffix)."""
    return re.search(r"%s%d(_BAG_L\d+)?$" % (NAME_PREFIX, index), name) is not None


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


def _final_model(predictor, autogluon_best, new_models, fit_weighted, resources, deadline, y_val, check,
                 switch_confidence, history, seed):
    """AutoGluon's weighted ensemble refitted over every model (or, without weighted ensembles, the best single
    model), kept as ``model_best`` only when its validation score beats AutoGluon's own best and the test on the
    ``check`` rows (:func:`_switch_confidence`) is at least ``switch_confidence`` sure that ensembling over every
    model generalises better than over phase 1's. Returns (chosen, scores, confidence)."""
    scores: Dict[str, float] = {}
    if not new_models:
        if autogluon_best is not None:
            scores[autogluon_best] = _scores(predictor)[autogluon_best]
        return autogluon_best, scores, None
    candidate = None
    if fit_weighted:
        left = max(5.0, deadline - time.monotonic())
        try:  # base_models=None: every model except the weighted ensembles, phase 1's and phase 2's
            names = predictor.fit_weighted_ensemble(name_suffix=ENSEMBLE_SUFFIX, time_limit=left, **resources)
        except Exception as exc:  # keep AutoGluon's own ensemble
            logger.warning("optdiv: the refitted weighted ensemble failed (%s: %s); AutoGluon's best stays",
                           type(exc).__name__, exc)
            names = []
        candidate = names[0] if names else None
    all_scores = _scores(predictor)
    if not fit_weighted:
        candidate = max(new_models, key=lambda m: all_scores[m])
    if autogluon_best is not None:
        scores[autogluon_best] = all_scores[autogluon_best]
    chosen, confidence = autogluon_best, None
    if candidate is not None:
        scores[candidate] = all_scores[candidate]
        if autogluon_best is None:
            chosen = candidate
        elif scores[candidate] > scores[autogluon_best]:
            confidence = _switch_confidence(predictor, set(new_models), y_val, check, history, seed,
                                            ensemble=fit_weighted) if switch_confidence > 0 else None
            if confidence is None or confidence >= switch_confidence:
                chosen = candidate
    if chosen is not None:
        predictor.set_model_best(chosen, save_trainer=True)
    return chosen, scores, confidence


#: Folds of the cross-validation that decides whether the refitted ensemble is kept when the rows were too few to
#: keep check rows apart.
SWITCH_FOLDS = 5


def _switch_confidence(predictor, new_models, y_val, check, history, seed: int, ensemble: bool = True) -> float:
    """How sure the rows of :func:`validation_targets` are that ensembling the predictor's models beats phase 1's:
    :func:`switch_confidence_heldout` on the ``check`` rows, or :func:`switch_confidence_cv` over all rows when
    there are none; with the predictions the search stored (the others read from AutoGluon)."""
    stored = {obs.model_name: obs.val_pred for obs in history if obs.val_pred is not None}
    models = list(predictor.model_names(stack_name="core"))
    stored.update(validation_predictions(predictor, [m for m in models if m not in stored]))
    models = [m for m in models if stored.get(m) is not None and np.all(np.isfinite(stored[m]))
              and stored[m].shape[0] == len(y_val)]
    old = [i for i, m in enumerate(models) if m not in new_models]
    if not old or len(old) == len(models):
        return 0.5
    preds = np.stack([stored[m] for m in models])
    loss = optdiv_metric(predictor)
    if check is None:
        return switch_confidence_cv(preds, old, y_val, loss, seed=seed, ensemble=ensemble)
    return switch_confidence_heldout(preds, old, y_val, check, loss, seed=seed, ensemble=ensemble)


def switch_confidence_cv(preds, old: Sequence[int], y, loss: str, seed: int = 0, ensemble: bool = True,
                         folds: int = SWITCH_FOLDS, size: int = 25) -> float:
    """How sure a cross-validation over the rows of ``y`` is that a weighted ensemble over every model of ``preds``
    ((models, rows, classes) probabilities or (models, rows) values) predicts unseen rows better than one over
    the models ``old`` alone.

    On ``folds`` folds of the rows, Caruana's selection (``optdiv.core.ensemble``, the greedy method AutoGluon's
    weighted ensemble uses; ``size`` rounds) is fitted on the other folds, once over ``old`` and once over all, and
    each row's ``loss`` is taken where it was held out; the confidence is :func:`paired_confidence` of those losses.
    Unlike the two ensembles' validation scores, the held-out losses do not reward the larger pool for fitting the
    rows it is scored on; they still reward models that a search picked by their scores on these very rows, which
    :func:`switch_confidence_heldout` does not. ``ensemble=False`` compares the best single model of each pool
    instead. ``loss`` is the metric vocabulary's for the eval_metric (the metric itself for accuracy, log_loss,
    MSE, RMSE, R2 and MAE; 0/1 error, MSE or MAE standing in for metrics without a per-row loss, such as AUC or
    F1)."""
    preds = np.asarray(preds, dtype=np.float64)
    y = np.asarray(y)
    n = len(y)
    fold_of = np.random.default_rng([seed, 0x5717C4]).permutation(n) % max(2, min(folds, n))
    held_out = np.zeros((2, n))
    for fold in np.unique(fold_of):
        test_rows = fold_of == fold
        held_out[:, test_rows] = _held_out_losses(preds, list(old), y, ~test_rows, test_rows, loss, seed, ensemble,
                                                  size)
    return paired_confidence(held_out[0] - held_out[1])


def switch_confidence_heldout(preds, old: Sequence[int], y, check, loss: str, seed: int = 0, ensemble: bool = True,
                              size: int = 25) -> float:
    """How sure the ``check`` rows (a boolean mask over the rows of ``y``) are that a weighted ensemble over every
    model of ``preds`` predicts unseen rows better than one over the models ``old`` alone: both ensembles are
    fitted (Caruana, ``size`` rounds) on the other rows, each check row's ``loss`` is taken under both, and the
    confidence is :func:`paired_confidence` of the differences. When a search picked the other models by their
    scores on the other rows, the check rows are the only ones on which the picking does not count as skill."""
    preds = np.asarray(preds, dtype=np.float64)
    y = np.asarray(y)
    check = np.asarray(check, dtype=bool)
    if check.shape != y.shape or check.all() or not check.any():
        raise ValueError("check must be a boolean mask over the rows of y with rows on both sides")
    held_out = _held_out_losses(preds, list(old), y, ~check, check, loss, seed, ensemble, size)
    return paired_confidence(held_out[0] - held_out[1])


def _held_out_losses(preds, old, y, fit_rows, test_rows, loss, seed, ensemble, size) -> np.ndarray:
    """(2, test rows) losses of the ensembles (or best single models) over ``old`` and over every model, each
    chosen on ``fit_rows`` and applied to ``test_rows``."""
    from optdiv.core.ensemble import ensemble_predict, ensemble_selection

    out = np.zeros((2, int(np.count_nonzero(test_rows))))
    for j, pool in enumerate((old, list(range(preds.shape[0])))):
        sub = preds[pool][:, fit_rows]
        if ensemble:
            weights = ensemble_selection(sub, y[fit_rows], loss, size=size, seed=seed).weights
        else:
            weights = np.zeros(len(pool))
            weights[int(np.argmin(per_example_loss(sub, y[fit_rows], loss).mean(axis=1)))] = 1.0
        out[j] = per_example_loss(ensemble_predict(preds[pool][:, test_rows], weights), y[test_rows], loss)
    return out


def paired_confidence(d) -> float:
    """One-sided paired z-test that the mean of the differences ``d`` (old loss minus new, per row) is above 0:
    Phi(mean(d) / (sd(d) / sqrt(n)))."""
    d = np.asarray(d, dtype=np.float64)
    n = len(d)
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if not sd > 0:
        return 0.5 if mean == 0 else (1.0 if mean > 0 else 0.0)
    return 0.5 * (1.0 + math.erf(mean / (sd / math.sqrt(n)) / math.sqrt(2.0)))


# --------------------------------------------------------------------------- #
# A searcher for AutoGluon's per-model HPO
# --------------------------------------------------------------------------- #


def configspace_of(ag_search_space: Dict[str, Any]):
    """AutoGluon's search space of one model (a dict with ``autogluon.common.space`` values) as a ConfigSpace
    space with the same ranges, so configurations are encoded by the engine's ``ConfigEncoder``.

    ``Real`` keeps its log scale; ``Int`` (and ``Bool``) become integers; a ``Categorical``'s choices become
    their positions ("0", "1", ...), since its values may be any Python object. Fixed values are left out
    (they are the same in every configuration). Returns ``(configspace, names)``.
    """
    from autogluon.common import space as ag_space

    cs = cs_compat.new_space(name="autogluon-hpo")
    hps, names = [], []
    for name, hp in ag_search_space.items():
        if not isinstance(hp, ag_space.Space):
            continue
        if isinstance(hp, ag_space.Categorical):
            default = next((i for i, c in enumerate(hp.data) if c == hp.default), 0)
            new = cs_compat.categorical(name, [str(i) for i in range(len(hp.data))], str(default))
        elif isinstance(hp, ag_space.Real):
            if not float(hp.upper) > float(hp.lower):
                continue
            new = cs_compat.uniform_float(name, hp.lower, hp.upper, None, log=bool(getattr(hp, "log", False)))
        elif isinstance(hp, ag_space.Int):
            if not int(hp.upper) > int(hp.lower):
                continue
            new = cs_compat.uniform_int(name, hp.lower, hp.upper, None)
        else:
            raise ValueError("optdiv's searcher handles Real, Int, Bool and Categorical search spaces; %r is a %s"
                             % (name, type(hp).__name__))
        hps.append(new)
        names.append(name)
    cs_compat.add_hyperparameters(cs, hps)
    return cs, names


def _local_random_searcher():
    from autogluon.core.searcher.local_random_searcher import LocalRandomSearcher

    return LocalRandomSearcher


class _SearcherMixin:
    """DivBO / OptDivBO over one AutoGluon model's search space, inside AutoGluon's own HPO loop.

    AutoGluon tells a searcher only each trial's score. Predictions are obtained by loading the finished trial
    model (``<model path>/T<trial+1>``, where AutoGluon's ``model_trial`` saves it) and predicting the
    validation rows AutoGluon wrote for the HPO run (``val_path`` in the scheduler's ``train_fn_kwargs``). A
    bagged trial model is scored out of fold; its out-of-fold predictions and the training labels
    (``train_path``) are used instead. ``selector_options`` go to the ``DiversityAwareSelector`` (e.g.
    ``fixed_weight``).
    """

    def __init__(self, *, method: str = "optdivbo", n_initial: int = 5, n_candidates: int = 1000,
                 seed: int = 0, callback: Optional[Callable[[dict], Any]] = None,
                 selector_options: Optional[Dict[str, Any]] = None, **kwargs):
        check_host(searcher=True)
        if method not in ("optdivbo", "divbo", "bo"):
            raise ValueError("unknown method %r; choose optdivbo, divbo or bo" % method)
        kwargs.setdefault("random_seed", seed)
        super().__init__(**kwargs)
        self.method, self.n_initial, self.n_candidates = method, int(n_initial), int(n_candidates)
        self.seed, self.callback = int(seed), callback
        self.selector_options = dict(selector_options or {})
        self.configspace, names = configspace_of(self.search_space)
        self.encoder = ConfigEncoder(self.configspace, names)
        self._trial_paths = None  # (model_cls, model root, val_path, train_path, problem_type, eval_metric, bagged)
        self._observed: List[dict] = []  # {"config", "reward", "pred"}
        self._choices: Dict[bytes, dict] = {}  # guided suggestions: did the selector change EI's choice?
        self._y_val = None

    # ---- AutoGluon hooks --------------------------------------------------
    def configure_scheduler(self, scheduler):
        super().configure_scheduler(scheduler)
        kw = getattr(scheduler, "train_fn_kwargs", None) or {}
        params = kw.get("init_params") or {}
        missing = [k for k in ("model_cls", "val_path", "train_path", "init_params") if k not in kw]
        missing += ["init_params[%r]" % k for k in ("path", "name") if k not in params]
        if missing:
            raise HostVersionError(
                "AutoGluon's HPO scheduler no longer hands its searcher %s (train_fn_kwargs; written for %s): "
                "the optdiv searcher cannot find the trial models" % (", ".join(missing), WRITTEN_FOR))
        self._trial_paths = (kw["model_cls"], os.path.join(params["path"], params["name"]), kw["val_path"],
                             kw["train_path"], params.get("problem_type"), params.get("eval_metric"),
                             bool(kw.get("is_bagged_model", False)))

    def get_config(self, **kwargs) -> dict:
        done = [o for o in self._observed if np.isfinite(o["reward"])]
        if len(self._observed) < self.n_initial or len(done) < 2 or not self.encoder.width:
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
        ei_index = index = int(np.argmax(ei))
        with_preds = [i for i, o in enumerate(self._observed) if o["pred"] is not None]
        weight = None
        if self.method != "bo" and len(with_preds) >= 2 and self._y_val is not None:
            selector = DiversityAwareSelector(method=self.method, metric=self._metric(),
                                              seed=self.seed + len(self._observed), **self.selector_options)
            preds = np.stack([self._observed[i]["pred"] for i in with_preds])
            selection = selector.select(cand_x, ei, obs_x[with_preds], preds, self._y_val, t=len(self._observed))
            index, weight = selection.index, float(selection.weight)
        config = candidates[index]
        self._choices[self._pickle_config(config)] = {"selector_changed": index != ei_index, "weight": weight,
                                                      "ei_choice": candidates[ei_index]}
        self._add_result(config, self._reward_while_pending())
        return config

    def update(self, config: dict, **kwargs):
        super().update(config, **kwargs)
        reward = float(kwargs.get(self._reward_attribute, -math.inf))
        pred = self._trial_predictions(kwargs.get("trial"))
        self._observed.append({"config": dict(config), "reward": reward, "pred": pred})
        if self.callback is not None:
            choice = self._choices.get(self._pickle_config(config), {})
            self.callback({"trial": kwargs.get("trial"), "config": dict(config), "reward": reward,
                           "has_predictions": pred is not None,
                           "selector_changed": bool(choice.get("selector_changed", False)),
                           "weight": choice.get("weight"), "searcher": self})

    def evaluation_failed(self, config, **kwargs):
        super().evaluation_failed(config, **kwargs)
        self._observed.append({"config": dict(config), "reward": -math.inf, "pred": None})

    # ---- helpers ------------------------------------------------------------
    @property
    def observations(self) -> List[dict]:
        """Every finished trial: config, reward and (when readable) validation or out-of-fold predictions."""
        return list(self._observed)

    @property
    def choices(self) -> List[dict]:
        """The guided suggestions in order: whether the selector changed EI's choice, w(t), EI's own choice."""
        return list(self._choices.values())

    def _metric(self) -> str:
        problem_type, metric = (self._trial_paths or (None,) * 7)[4:6]
        task = None if problem_type is None else _task_of_problem(problem_type)
        return _loss_for(metric, task)

    def _trial_predictions(self, trial) -> Optional[np.ndarray]:
        """The finished trial model's predictions on AutoGluon's validation rows (bagged: out of fold on the
        training rows), or None when the trial saved no model."""
        if trial is None or self._trial_paths is None:
            return None
        model_cls, root, val_path, train_path, problem_type, _, bagged = self._trial_paths
        path = os.path.join(root, "T%d" % (int(trial) + 1))
        try:
            from autogluon.core.utils.loaders import load_pkl

            if bagged:  # scored out of fold: its out-of-fold predictions, on the training rows
                raw = np.asarray(model_cls.load_oof(path), dtype=np.float32)
                _, y = load_pkl.load(train_path)
            else:
                X_val, y = load_pkl.load(val_path)
                raw = np.asarray(model_cls.load(path).predict_proba(X_val), dtype=np.float32)
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
            y = np.asarray(y)
            self._y_val = y.astype(np.float64) if pred.ndim == 1 else y.astype(np.int64)
        if pred.shape[0] != len(self._y_val) or not np.all(np.isfinite(pred)):
            return None
        return pred

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
        """(count, searched hyperparameters) in [0, 1]: the engine's ConfigEncoder on the ConfigSpace form of
        AutoGluon's space (:func:`configspace_of`)."""
        from autogluon.common import space as ag_space

        rows = []
        for config in configs:
            row = {}
            for name in self.encoder.names:
                hp, value = self.search_space[name], config[name]
                if isinstance(hp, ag_space.Categorical):
                    value = str(next((i for i, c in enumerate(hp.data) if c == value), 0))
                elif isinstance(hp, ag_space.Int):
                    value = int(value)
                else:
                    value = float(value)
                row[name] = value
            rows.append(row)
        if not rows:
            return np.empty((0, self.encoder.width))
        return self.encoder.encode(rows)


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

    check_host(searcher=True)
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
    "HostVersionError",
    "WRITTEN_FOR",
    "check_host",
    "available_families",
    "search_space",
    "to_hyperparameters",
    "from_hyperparameters",
    "configspace_of",
    "switch_confidence_cv",
    "switch_confidence_heldout",
    "check_rows",
    "metric_loss",
    "validation_predictions",
    "validation_targets",
    "register_searchers",
    "OptDivSearcher",
]
