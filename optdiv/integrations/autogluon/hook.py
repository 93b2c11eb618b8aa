"""The hook, :func:`fit`: AutoGluon's own fit, then diversity-aware ``fit_extra`` models in the time it leaves, then
AutoGluon's weighted ensemble refitted over every model, kept only when the check rows confirm the gain (see the
package docstring)."""

from __future__ import annotations

import inspect
import logging
import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.core.pool_check import check_rows, switch_confidence_cv, switch_confidence_heldout
from optdiv.evaluation.observation import Observation
from optdiv.integrations.autogluon.families import (FAMILIES, available_families, family_of, from_hyperparameters,
                                                    model_params, resolve_families, to_hyperparameters)
from optdiv.integrations.autogluon.host import POST_FIT, check_host
from optdiv.integrations.autogluon.predictions import (metric_loss, optdiv_metric, predictor_task,
                                                       validation_predictions, validation_targets)
from optdiv.spaces.autogluon_space import autogluon_space
from optdiv.strategies.model_based import Optimizer

logger = logging.getLogger(__name__)

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
#: Folds of the bagged fit the hook asks for when your settings leave bagging open (AutoGluon's own count when its
#: presets stack). Out-of-fold predictions cover every training row, so the search is steered and the switch is
#: checked on all of them instead of a holdout's few thousand, and each model becomes an average of fold models.
BAG_FOLDS = 8
#: Refit time predicted from the first fit: its fit time x the rows' growth x this margin (boosters refit for the
#: rounds early stopping found; the margin covers a slower refit, e.g. on a loaded machine).
REFIT_MARGIN = 1.5
#: fit keywords the hook cannot honour, with the reason.
_REFUSED = {
    "infer_limit": "the final ensemble is chosen on validation score alone, not under an inference-time limit",
    "use_bag_holdout": "AutoGluon's refitted weighted ensemble ignores the bag holdout; fit without optdiv",
}


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
        #: the final model refitted on the training and tuning rows (``refit="auto"``), None when not refitted
        self.refitted: Optional[str] = None

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
        return ("AutoGluonSearch(method=%r, phase1_models=%d, trials=%d, ok=%d, final_model=%r, refitted=%r, "
                "seconds=%.1f of %.0f)" % (self.method, len(self.phase1_models), len(self.trials), ok,
                                            self.final_model, self.refitted, self.seconds, self.time_limit))


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
    bagging=False,
    refit="auto",
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
    is at least ``switch_confidence`` sure that it generalises better (0: the score alone); then the final model
    is refitted (``refit``), AutoGluon's post-fit steps the arguments ask for run, and the predictor is saved
    (``TabularPredictor.load`` gives it back). ``time_limit`` defaults to the presets' own, else
    :data:`DEFAULT_TIME_LIMIT`.
    ``refit``: ``"auto"`` refits the final model (and its members) on the training and tuning rows together with
    AutoGluon's ``refit_full``, as the standalone engine refits its members, when the models were scored on a
    holdout, your keywords and presets leave ``refit_full`` open, and the predicted refit fits in the time left (the
    search keeps that time back); ``False`` never.
    ``bagging``: ``"auto"`` bags both phases with :data:`BAG_FOLDS` folds unless your keywords or presets decide
    bagging (``num_bag_folds``, ``auto_stack``), in which case they are kept; ``tuning_data`` then joins the
    training rows (every row gets out-of-fold predictions). An integer >= 2 sets the folds; ``False`` (the default:
    bagging bought no measured gain at equal time) keeps AutoGluon's settings as you gave them.
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
    keys = resolve_families(families)
    start = time.monotonic()
    effective = _effective_fit_kwargs(presets, hyperparameters, fit_kwargs)
    bag_folds = _bag_folds(bagging, effective)
    if refit not in ("auto", False):
        raise ValueError("refit must be 'auto' or False; got %r" % (refit,))
    refit_open = refit == "auto" and "refit_full" not in effective and "set_best_to_refit_full" not in effective
    for key, reason in _REFUSED.items():
        if effective.get(key) not in (None, False):
            raise ValueError("%s=%r is not supported by optdiv's AutoGluon hook: %s" % (key, effective[key], reason))
    deferred = [k for k in POST_FIT if k in effective]
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
    kwargs.update({k: False for k in POST_FIT})
    kwargs["raise_on_no_models_fitted"] = False
    if bag_folds:
        kwargs["num_bag_folds"] = bag_folds
        train_data, tuning_data = _with_tuning_rows(train_data, tuning_data), None
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
    refit_ratio = _refit_ratio(predictor) if refit_open and phase1_models else None
    search_reserve = reserve
    if refit_ratio is not None:  # keep back the refit of AutoGluon's best, the model most likely to stay final
        search_reserve += _refit_seconds(predictor, autogluon_best, refit_ratio)
    if n_models > 0 and deadline - search_reserve - time.monotonic() >= MIN_MODEL_SECONDS:
        y_val, check, history, trials = _phase2(predictor, method, keys, int(n_models), seed, model_time_limit,
                                                n_initial, n_candidates, callback, resources, deadline,
                                                search_reserve)
    if not predictor.model_names():
        raise RuntimeError("AutoGluon trained no model in %.0f s (see predictor.model_failures())" % budget)

    final_model, scores, confidence = _final_model(predictor, autogluon_best,
                                                   [t.model for t in trials if t.status == "ok"], fit_weighted,
                                                   resources, deadline, y_val, check, switch_confidence, history,
                                                   seed)
    if refit_ratio is not None and final_model is not None:
        needed = _refit_seconds(predictor, final_model, refit_ratio)
        if needed <= deadline - time.monotonic():
            post_fit.update(refit_full="best", set_best_to_refit_full=True)
        else:
            logger.info("optdiv: %s is not refitted on every row: %.0f s predicted, %.0f s left", final_model,
                        needed, deadline - time.monotonic())
    run_on = {"num_cpus": effective.get("num_cpus", "auto"), "num_gpus": effective.get("num_gpus", "auto"),
              "fit_strategy": effective.get("fit_strategy", "sequential")}
    refitted = _refit_full(predictor, final_model, post_fit, run_on)
    predictor._post_fit(**post_fit, infer_limit=None, raise_on_no_models_fitted=False, **run_on)
    predictor.save()
    search = AutoGluonSearch(predictor, method, budget, phase1_models, autogluon_best, trials, history, y_val,
                             final_model, scores, confidence, phase1_seconds, time.monotonic() - start, check)
    search.refitted = refitted
    return search


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


def _refit_full(predictor, final_model: Optional[str], post_fit: Dict[str, Any], run_on) -> Optional[str]:
    """AutoGluon's ``refit_full`` as ``post_fit`` asks, for the hook's final model: AutoGluon's own post-fit step
    would refit the model with the best validation score, not the one the hook chose. Clears the step in
    ``post_fit``; returns the refitted final model's name when it became ``model_best``."""
    how, set_best = post_fit.pop("refit_full", False), post_fit.pop("set_best_to_refit_full", False)
    post_fit.update(refit_full=False, set_best_to_refit_full=False)
    if how is False or final_model is None:
        return None
    if how is True:  # AutoGluon's reading of True: every model, or only the best when the rest is deleted anyway
        how = "best" if post_fit.get("keep_only_best") else "all"
    model = final_model if how == "best" else how  # "all" or a model the user named
    mapping = predictor.refit_full(model=model, set_best_to_refit_full=final_model if set_best else False, **run_on)
    refitted = mapping.get(final_model)
    return refitted if set_best and refitted is not None and predictor.model_best == refitted else None


def _refit_ratio(predictor) -> Optional[float]:
    """Rows of a refit on training + tuning rows per training row (None: no holdout, nothing to add)."""
    if not predictor.has_val:
        return None
    n_train = predictor.load_data_internal("train", return_X=False, return_y=True)[1].shape[0]
    n_val = predictor.load_data_internal("val", return_X=False, return_y=True)[1].shape[0]
    return (n_train + n_val) / max(1, n_train)


def _refit_seconds(predictor, model: Optional[str], ratio: float) -> float:
    """Predicted seconds to refit ``model`` and the models it is built on over ``ratio`` times the rows."""
    if model is None:
        return 0.0
    board = predictor.leaderboard().set_index("model")["fit_time"]  # the model's and its base models' fit time
    return REFIT_MARGIN * ratio * float(board.get(model) or 0.0)


def _bag_folds(bagging, effective: Dict[str, Any]) -> Optional[int]:
    """The ``num_bag_folds`` the hook sets (None: leave AutoGluon's settings as they are)."""
    if bagging is False or bagging is None:
        return None
    if bagging == "auto":
        decided = effective.get("num_bag_folds") is not None or effective.get("auto_stack")
        return None if decided else BAG_FOLDS
    if isinstance(bagging, bool) or not isinstance(bagging, int) or bagging < 2:
        raise ValueError("bagging must be 'auto', False or a number of folds >= 2; got %r" % (bagging,))
    if effective.get("num_bag_folds") not in (None, bagging):
        raise ValueError("bagging=%d contradicts num_bag_folds=%r; set one of them" % (bagging,
                                                                                   effective["num_bag_folds"]))
    return bagging


def _with_tuning_rows(train_data, tuning_data):
    """Training rows for a bagged fit: the tuning rows join them (bagging scores every row out of fold, and
    AutoGluon takes no tuning data when it bags)."""
    if tuning_data is None:
        return train_data
    import pandas as pd
    from autogluon.tabular import TabularDataset

    frames = [TabularDataset(d) if isinstance(d, str) else d for d in (train_data, tuning_data)]
    return pd.concat(frames, ignore_index=True)


def _post_fit_defaults(predictor) -> Dict[str, Any]:
    """AutoGluon's own defaults of the post-fit keywords (read from AutoGluon, not copied)."""
    defaults = predictor._fit_extra_kwargs_dict()
    out = {k: defaults[k] for k in POST_FIT if k in defaults}
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
        family = family_of(info)
        if family is None or score.get(name) is None or not np.isfinite(score[name]):
            continue
        config = from_hyperparameters(family, model_params(info), space)
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
    task = predictor_task(predictor)
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


def _on_rows(predictor, obs: Observation, rows: Optional[np.ndarray], y: np.ndarray) -> Observation:
    """``obs`` as the search sees it: its predictions on ``rows`` and its loss there (None: all rows, as is)."""
    if rows is None or obs.val_pred is None:
        return obs
    pred = obs.val_pred[rows]
    return replace(obs, val_pred=pred, val_loss=metric_loss(predictor, pred, y[rows]))


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
