"""Fits that stop growing at a time budget: an ensemble of trees that would overrun its evaluation's limit keeps
the rounds it has fitted instead of being ended with nothing.

A time-out costs the search the whole limit and teaches it only that the configuration was slow. A forest or a
booster is useful after a part of its rounds, so under a budget it is grown in stages: scikit-learn's forests,
gradient boosting and histogram gradient boosting continue a fit exactly through ``warm_start`` (the same trees
as one fit of the same size), and AdaBoost and LightGBM stop boosting at the deadline (AdaBoost's fit ends cleanly
when a boosting step returns no sample weights; LightGBM's through a callback, as its own early stopping does).
A fit that finishes in time is the configured model; one that is cut records how many rounds it holds. Other
models fit as before: they have no rounds to keep.
"""

from __future__ import annotations

import math
import random
import time
from typing import Callable, Dict, Optional, Tuple

import numpy as np

#: Share of the configured rounds fitted in the first stage: large enough that its time predicts the rest,
#: small enough to leave room for the rest.
FIRST_STAGE = 1 / 32

#: Share of the predicted time left that a next stage may plan to use (a round's time varies).
STAGE_MARGIN = 0.85


def _growth(model) -> Optional[Tuple[str, Callable[[object], int]]]:
    """(rounds parameter, fitted rounds of a fitted model) of an estimator whose warm start continues a fit
    exactly; None for every other."""
    try:
        from sklearn.ensemble import (
            ExtraTreesClassifier, ExtraTreesRegressor, GradientBoostingClassifier, GradientBoostingRegressor,
            RandomForestClassifier, RandomForestRegressor,
        )
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        return None
    forests = (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor)
    if isinstance(model, forests):
        return "n_estimators", lambda m: len(m.estimators_)
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        return "n_estimators", lambda m: int(m.n_estimators_)
    try:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    except ImportError:  # scikit-learn 0.24 keeps them behind an experimental import
        try:
            from sklearn.experimental import enable_hist_gradient_boosting  # noqa: F401
            from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
        except ImportError:
            return None
    if isinstance(model, (HistGradientBoostingClassifier, HistGradientBoostingRegressor)):
        return "max_iter", lambda m: int(m.n_iter_)
    return None


def _is_lightgbm(model) -> bool:
    try:
        import lightgbm
    except ImportError:  # pragma: no cover - lightgbm is a dependency
        return False
    return isinstance(model, lightgbm.LGBMModel)


def _is_adaboost(model) -> bool:
    from sklearn.ensemble import AdaBoostClassifier, AdaBoostRegressor

    return isinstance(model, (AdaBoostClassifier, AdaBoostRegressor)) and callable(getattr(model, "_boost", None))


def can_grow(model) -> bool:
    """Whether :func:`fit_within` can keep a part of ``model``'s rounds when its budget runs out."""
    return _growth(model) is not None or _is_adaboost(model) or _is_lightgbm(model)


def kept_rounds(measures: Dict[str, float]) -> Optional[int]:
    """The rounds an evaluation kept when its fit was cut (its measures say), else None."""
    done, configured = measures.get("rounds_fitted"), measures.get("rounds_configured")
    return int(done) if done and configured and configured > done else None


def set_rounds(model, rounds: Optional[int]) -> None:
    """Give ``model`` the ``rounds`` an evaluation of its configuration kept, so a refit on more rows is the model
    that was scored (not one of every configured round); None, or a model without rounds: unchanged."""
    if rounds is None:
        return
    growth = _growth(model)
    if growth is not None:
        model.set_params(**{growth[0]: int(rounds)})
    elif _is_adaboost(model) or _is_lightgbm(model):
        model.set_params(n_estimators=int(rounds))


def fit_within(pipe, model, X, y, seconds: Optional[float]) -> Dict[str, float]:
    """Fit ``pipe`` (whose final estimator is ``model``) on ``X, y`` in about ``seconds``.

    Returns ``{"rounds_fitted": k, "rounds_configured": n}`` when the fit was cut at ``k`` of its ``n`` rounds,
    else an empty dict. ``seconds`` None, or a model without rounds: one plain fit.
    """
    if seconds is None or seconds <= 0:
        pipe.fit(X, y)
        return {}
    growth = _growth(model)
    if growth is not None:
        return _fit_in_stages(pipe, model, X, y, float(seconds), *growth)
    if _is_adaboost(model):
        return _boost_until(pipe, model, X, y, float(seconds))
    if _is_lightgbm(model):
        return _lightgbm_until(pipe, model, X, y, float(seconds))
    pipe.fit(X, y)
    return {}


def _fit_above(estimator, X, y):
    """Fit every transformer above the final model once, as the pipeline's own fit would; (the rows the model
    sees, the model). Pipelines (nested ones too) and the regression range clip are walked through."""
    from sklearn.pipeline import Pipeline

    from optdiv.evaluation.target_range import RangeClippedRegressor, target_bounds

    if isinstance(estimator, Pipeline):
        if len(estimator.steps) > 1:
            X = estimator[:-1].fit_transform(X, y)  # a slice holds the same step objects
        return _fit_above(estimator.steps[-1][1], X, y)
    if isinstance(estimator, RangeClippedRegressor):
        estimator.low_, estimator.high_ = target_bounds(y, estimator.margin)
        estimator.regressor_ = estimator.regressor
        return _fit_above(estimator.regressor, X, y)
    return X, estimator


def _rows_for(pipe, model, X, y):
    """The rows ``model`` sees once the transformers above it are fitted; None when the pipeline ends in another
    estimator than ``model`` (a wrapper not walked through), which is then fitted once, as a plain fit would."""
    Xt, final = _fit_above(pipe, X, y)
    if final is not model:
        final.fit(Xt, y)
        return None
    return Xt


def _fit_in_stages(pipe, model, X, y, seconds: float, parameter: str, fitted_rounds) -> Dict[str, float]:
    """Grow ``model`` by warm start on rows transformed once: a first stage of :data:`FIRST_STAGE` of its
    rounds, then as many more as its time per round predicts fit in the budget, until all rounds are fitted,
    early stopping ends the fit, or no round more fits. Each stage starts from the global random state the
    model's one fit would have started from, so a fit in time equals that one fit."""
    began = time.perf_counter()
    Xt = _rows_for(pipe, model, X, y)
    if Xt is None:
        return {}
    total = int(getattr(model, parameter))
    warm = model.get_params()["warm_start"]
    rounds = max(1, int(math.ceil(total * FIRST_STAGE)))
    numpy_state, python_state = np.random.get_state(), random.getstate()
    first = None  # seconds of the first stage: more than any later stage's fixed cost (e.g. binning the rows)
    try:
        model.set_params(warm_start=True)
        while True:
            model.set_params(**{parameter: rounds})
            np.random.set_state(numpy_state)
            random.setstate(python_state)
            model.fit(Xt, y)
            done = fitted_rounds(model)
            if rounds >= total or done < rounds:  # all rounds fitted, or the model's early stopping ended it
                return {}
            elapsed = time.perf_counter() - began
            first = elapsed if first is None else first
            per_round = elapsed / rounds  # the transformers' and each stage's fixed cost included: an over-estimate
            room = (seconds - elapsed) * STAGE_MARGIN
            more = int(room / per_round) if per_round > 0 else total
            if more < 1 or room < first:
                return {"rounds_fitted": float(done), "rounds_configured": float(total)}
            rounds = min(total, rounds + more)
    finally:
        model.set_params(warm_start=warm)


def _boost_until(pipe, model, X, y, seconds: float) -> Dict[str, float]:
    """Fit an AdaBoost model whose boosting stops at the deadline once it holds one round: scikit-learn's
    fit ends early, keeping the rounds so far, when a boosting step returns no sample weights."""
    deadline = time.perf_counter() + seconds
    boost = model._boost
    cut = []

    def boost_until_deadline(iboost, *args, **kwargs):
        if iboost > 0 and time.perf_counter() > deadline:
            cut.append(iboost)
            return None, None, None
        return boost(iboost, *args, **kwargs)

    model._boost = boost_until_deadline  # an instance attribute, removed again below so the model pickles
    try:
        pipe.fit(X, y)
    finally:
        del model._boost
    if not cut:  # complete, or ended by its own early termination (a perfect or a useless round)
        return {}
    return {"rounds_fitted": float(len(model.estimators_)), "rounds_configured": float(model.n_estimators)}


def _lightgbm_until(pipe, model, X, y, seconds: float) -> Dict[str, float]:
    """Fit a LightGBM model whose boosting stops at the deadline once it holds one round: a callback ends
    training the way LightGBM's own early stopping does, and the model predicts with the rounds it has."""
    from lightgbm.callback import EarlyStopException

    deadline = time.perf_counter() + seconds
    Xt = _rows_for(pipe, model, X, y)
    if Xt is None:
        return {}
    cut = []

    def stop_at_deadline(env) -> None:
        if time.perf_counter() > deadline and env.iteration + 1 < env.end_iteration:
            cut.append(env.iteration + 1)
            raise EarlyStopException(env.iteration, env.evaluation_result_list or [])

    model.fit(Xt, y, callbacks=[stop_at_deadline])
    if not cut:
        return {}
    return {"rounds_fitted": float(cut[0]), "rounds_configured": float(model.n_estimators)}
