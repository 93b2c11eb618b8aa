"""Which runs the final model keeps, and with what weights: chosen over the stored validation predictions.

Choosing members needs no fit (the stored predictions are enough): each kind of final model (:data:`FINALS`) and
each ensemble builder (:data:`ENSEMBLE_BUILDERS`) is a function of the history, and a stacking choice fits only its
meta-model (:class:`Stacker`) on those predictions. :mod:`optdiv.final.fit` then makes the chosen members one
predictor (:class:`~optdiv.final.model.EnsembleModel`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.core.agnostic_baselines import amin_weights, tuned_agnostic_bayes, tuned_smin, weighted_vote
from optdiv.core.agnostic_bayes import SAMPLERS
from optdiv.core.ensemble import agnostic_bayes_weights, bagged_ensemble_selection, ensemble_selection
from optdiv.core.metric_vocabulary import LOSSES, REGRESSION_LOSSES, auto_selection
from optdiv.core.metrics import per_example_loss

#: ``ensemble_loss`` / ``ensemble_bags`` value meaning "what was measured to over-fit the validation rows least"
#: (:func:`resolve_selection`); the papers' protocol is ``ensemble_loss=None, ensemble_bags=0``.
AUTO = "auto"

#: Bootstrap selections averaged for a regression ensemble under ``ensemble_bags="auto"``.
REGRESSION_BAGS = 20


@dataclass
class FinalChoice:
    """The members of the final model, their weights, and (stacking only) the meta-model combining them."""

    members: List[int]
    weights: np.ndarray
    stacker: Optional["Stacker"] = None
    vote: bool = False
    info: Dict = field(default_factory=dict)  # what the builder chose besides weights (Agnostic Bayes's rho)

    def combine(self, member_preds) -> np.ndarray:
        if self.stacker is not None:
            return self.stacker.predict(member_preds)
        return weighted_prediction(member_preds, self.weights, vote=self.vote)


@dataclass(frozen=True)
class FinalSettings:
    """The run's settings a final-model builder may use (see :func:`finalize`)."""

    loss: str
    ensemble: str = "caruana"
    ensemble_size: int = 25
    seed: int = 0
    task: str = "classification"
    n_classes: Optional[int] = None
    sampler: str = "bootstrap"
    vote: bool = False
    tune_rho: bool = False
    selection_loss: Optional[str] = None
    bags: int = 0


def _final_single(method, strategy, history, y_val, s: FinalSettings) -> FinalChoice:
    return FinalChoice(*best_single(history))


def _final_ensemble(method, strategy, history, y_val, s: FinalSettings) -> FinalChoice:
    info: Dict = {}
    members, weights = choose_members(history, y_val, s.loss, method.options.get("builder", s.ensemble),
                                      method.ensemble_size or s.ensemble_size, s.seed, sampler=s.sampler, vote=s.vote,
                                      tune_rho=s.tune_rho, info=info, selection_loss=s.selection_loss, bags=s.bags)
    return FinalChoice(members, weights, vote=s.vote, info=info)


def _final_own(method, strategy, history, y_val, s: FinalSettings) -> FinalChoice:
    return FinalChoice(*strategy.final_members(history, y_val))


def _final_bagging(method, strategy, history, y_val, s: FinalSettings) -> FinalChoice:
    return FinalChoice(*top_k(history, 5))


def _final_stacking(method, strategy, history, y_val, s: FinalSettings) -> FinalChoice:
    members, weights = top_k(history, 5)
    stacker = Stacker(s.task, s.n_classes, s.seed).fit([history[i].val_pred for i in members], y_val)
    return FinalChoice(members, weights, stacker)


#: How each kind of final model is built: ``builder(method, strategy, history, y_val, settings) -> FinalChoice``.
#: ``own`` asks the strategy (``final_members``), so only a strategy that keeps its own ensemble (EO) may use it.
FINALS: Dict[str, Callable[..., FinalChoice]] = {
    "single": _final_single,
    "ensemble": _final_ensemble,
    "own": _final_own,
    "bagging": _final_bagging,
    "stacking": _final_stacking,
}


def finalize(method, strategy, history: List, y_val: np.ndarray, settings: FinalSettings):
    """The method's final model over ``history``: (FinalChoice, its validation prediction).

    ``settings.vote`` combines a classification ensemble by weighted majority vote instead of averaging
    probabilities; ``tune_rho`` (out-of-fold predictions, k-fold CV) tunes Agnostic Bayes's rho on the paper's grid
    instead of keeping rho = 1; ``selection_loss`` and ``bags`` change what ensemble selection minimises and bag it
    (:func:`choose_members`). A stacking model's validation prediction is cross-validated, not in-sample.
    """
    if method.final not in FINALS:
        raise ValueError(f"unknown final model {method.final!r}; choose one of {', '.join(FINALS)}")
    if settings.vote and settings.task != "classification":
        settings = replace(settings, vote=False)
    choice = FINALS[method.final](method, strategy, history, y_val, settings)
    preds = [history[i].val_pred for i in choice.members]
    if choice.stacker is not None:
        return choice, choice.stacker.cross_validated(preds, y_val)
    return choice, choice.combine(preds)


def resolve_selection(task: str, metric: str, ensemble_loss=AUTO, ensemble_bags=AUTO) -> Tuple[Optional[str], int]:
    """(selection loss or None for the run's metric, bags) for the product's final ensemble.

    ``"auto"`` picks what replay measurements over the papers' datasets favoured (docs/method.md, "Final
    ensembles"): for a 0/1-error classification run, selection on log loss (test error lower on 3 of 4
    libraries, level on the fourth); for regression, 20 bootstrap selections on the metric (lower test MSE on
    one of two libraries, level on the other). Explicit values pass through.
    """
    if isinstance(ensemble_loss, str) and ensemble_loss == AUTO:
        ensemble_loss = auto_selection(metric)
    if isinstance(ensemble_bags, str):
        if ensemble_bags != AUTO:
            raise ValueError(f"ensemble_bags must be a number or {AUTO!r}, not {ensemble_bags!r}")
        ensemble_bags = REGRESSION_BAGS if task == "regression" else 0
    return ensemble_loss, int(ensemble_bags or 0)


def check_selection_settings(size, ensemble_loss=AUTO, ensemble_bags=AUTO, task: Optional[str] = None,
                             own_metric: str = "the run's metric", guard: Optional[float] = None) -> None:
    """Refuse a bad final-selection setting where a user gives it (an adapter's option), not at the search's end."""
    if guard is not None and (isinstance(guard, (bool, str)) or not guard >= 0):
        raise ValueError(f"selection_guard must be None or a non-negative z value; got {guard!r}")
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"ensemble_size must be a positive integer; got {size!r}")
    if ensemble_loss is not None and ensemble_loss != AUTO:
        if ensemble_loss not in LOSSES:
            raise ValueError(f"ensemble_loss must be {AUTO!r}, None ({own_metric}) or one of {', '.join(LOSSES)}; "
                             f"got {ensemble_loss!r}")
        if task is not None and (ensemble_loss in REGRESSION_LOSSES) != (task == "regression"):
            raise ValueError(f"ensemble_loss {ensemble_loss!r} does not fit a {task} task")
    if isinstance(ensemble_bags, str):
        if ensemble_bags != AUTO:
            raise ValueError(f"ensemble_bags must be a number or {AUTO!r}; got {ensemble_bags!r}")
    elif isinstance(ensemble_bags, bool) or not isinstance(ensemble_bags, numbers.Integral) or ensemble_bags < 0:
        raise ValueError(f"ensemble_bags must be 0 (one selection), more, or {AUTO!r}; got {ensemble_bags!r}")


def _caruana_weights(preds, y_val, s) -> np.ndarray:
    target = s["selection_loss"] or s["loss"]
    if s["bags"]:
        return bagged_ensemble_selection(preds, y_val, target, size=s["size"], bags=s["bags"], seed=s["seed"])
    return ensemble_selection(preds, y_val, target, size=s["size"], seed=s["seed"]).weights


def _agnostic_bayes_weights(preds, y_val, s) -> np.ndarray:
    if s["tune_rho"]:
        rho, weights = tuned_agnostic_bayes(preds, y_val, s["loss"], sampler=s["sampler"], seed=s["seed"],
                                            vote=s["vote"])
    else:
        rho, weights = 1.0, agnostic_bayes_weights(per_example_loss(preds, y_val, s["loss"]).T,
                                                   sampler=s["sampler"], seed=s["seed"])
    if s["info"] is not None:
        s["info"]["rho"] = float(rho)
    return weights


def _amin_weights(preds, y_val, s) -> np.ndarray:
    return amin_weights(per_example_loss(preds, y_val, s["loss"]).T, seed=s["seed"])


def _smin_weights(preds, y_val, s) -> np.ndarray:
    return tuned_smin(preds, y_val, s["loss"], vote=s["vote"])[1]


#: How each ensemble builder weighs the successful runs' validation predictions. caruana: ensemble selection;
#: agnostic_bayes: posterior of being best (Lacoste et al., ICML 2014); amin: the lowest validation risk, ties at
#: random; smin: Gibbs weights exp(-beta risk), beta tuned on the validation rows.
_WEIGHTS = {"caruana": _caruana_weights, "agnostic_bayes": _agnostic_bayes_weights, "amin": _amin_weights,
            "smin": _smin_weights}
ENSEMBLE_BUILDERS = tuple(_WEIGHTS)


def choose_members(
    history: Sequence, y_val: np.ndarray, loss: str, builder: str = "caruana", size: int = 25, seed: int = 0,
    sampler: str = "bootstrap", vote: bool = False, tune_rho: bool = False, info: Optional[Dict] = None,
    selection_loss: Optional[str] = None, bags: int = 0, guard: Optional[float] = None,
) -> Tuple[List[int], np.ndarray]:
    """Indices into ``history`` and their weights (summing to 1); only successful runs take part.

    ``sampler`` is Agnostic Bayes's posterior sampler; ``vote`` tunes SMin for a weighted vote.
    ``tune_rho``: the validation predictions are out-of-fold (k-fold CV), so Agnostic Bayes's effective
    sample-size ratio rho is tuned on the paper's grid by the ensemble's own loss on them; otherwise
    (a holdout split, the paper's single-split protocol) rho is 1. A dict passed as ``info`` receives the
    ``rho`` used by ``agnostic_bayes``.

    ``caruana`` only: ``selection_loss`` replaces ``loss`` as what the selection minimises (e.g. log loss for a
    0/1-error run: a smooth loss fits the validation rows' noise less), and ``bags > 0`` averages that many
    selections on bootstrap samples of the rows (:func:`~optdiv.core.ensemble.bagged_ensemble_selection`).

    ``guard`` (a z value; ``caruana`` with a ``selection_loss`` only): the selection on ``loss`` itself is made too,
    and kept instead when its ensemble is better on the validation rows by more than ``guard`` standard errors of
    the paired per-row difference in ``loss`` (:func:`guarded_choice`); ``info["guard"]`` says which was kept.
    """
    if builder not in ENSEMBLE_BUILDERS:
        raise ValueError(f"unknown ensemble builder {builder!r}; choose one of {', '.join(ENSEMBLE_BUILDERS)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown Agnostic Bayes sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    ok = _successful(history)
    preds = np.stack([history[i].val_pred for i in ok])
    settings = {"loss": loss, "size": size, "seed": seed, "sampler": sampler, "vote": vote, "tune_rho": tune_rho,
                "info": info, "selection_loss": selection_loss, "bags": bags}
    weights = _WEIGHTS[builder](preds, y_val, settings)
    if guard is not None and builder == "caruana" and selection_loss not in (None, loss):
        own = _WEIGHTS[builder](preds, y_val, dict(settings, selection_loss=None))
        weights, verdict = guarded_choice(preds, y_val, loss, weights, own, guard)
        if info is not None:
            info["guard"] = verdict
    keep = np.flatnonzero(weights > 1e-6)
    return [ok[i] for i in keep], weights[keep] / weights[keep].sum()


def guarded_choice(preds: np.ndarray, y_val: np.ndarray, loss: str, smooth: np.ndarray, own: np.ndarray,
                   z: float) -> Tuple[np.ndarray, Dict]:
    """``own``'s weights when its ensemble beats ``smooth``'s on ``loss`` by more than ``z`` paired standard errors,
    else ``smooth``'s; and the verdict (z reached, which was kept).

    Why: a selection on a smooth loss (log loss for 0/1 error) over-fits the validation rows less on average, but
    with few candidates it can keep members whose own metric is clearly worse, and the test rows follow the metric.
    For 0/1 error the statistic is McNemar's on the rows where the two ensembles disagree.
    """
    difference = (per_example_loss(weighted_prediction(preds, smooth), y_val, loss)
                  - per_example_loss(weighted_prediction(preds, own), y_val, loss))
    spread = float(np.std(difference, ddof=1)) if difference.size > 1 else 0.0
    mean = float(np.mean(difference))
    statistic = 0.0 if spread == 0.0 else mean / (spread / np.sqrt(difference.size))
    switched = statistic > z
    return (own if switched else smooth), {"z": round(statistic, 3), "threshold": float(z),
                                           "kept": "own" if switched else "smooth"}


def top_k(history: Sequence, k: int = 5) -> Tuple[List[int], np.ndarray]:
    """The ``k`` best successful runs by validation loss, equally weighted (bagging of the top k)."""
    ok = sorted(_successful(history), key=lambda i: (history[i].val_loss, i))[:k]
    return ok, np.full(len(ok), 1.0 / len(ok))


class Stacker:
    """A meta-model over the members' predictions (DivBO's "stacking of the 5 best").

    Classification: multinomial logistic regression on the concatenated class probabilities; regression:
    ridge regression on the members' values. Fitted on the validation rows, since the members were fitted
    on the training rows; its own validation loss is therefore measured by 5-fold cross-validation.
    """

    def __init__(self, task: str, n_classes: Optional[int] = None, seed: int = 0):
        self.task, self.n_classes, self.seed = task, n_classes, int(seed)
        self.model_ = None

    def _features(self, member_preds: Sequence[np.ndarray]) -> np.ndarray:
        stacked = [np.asarray(p, dtype=np.float64) for p in member_preds]
        return np.hstack([p.reshape(len(p), -1) for p in stacked])

    def _make(self):
        from sklearn.linear_model import LogisticRegression, Ridge

        if self.task == "classification":
            return LogisticRegression(C=1.0, max_iter=1000)
        return Ridge(alpha=1e-3)

    def fit(self, member_preds: Sequence[np.ndarray], y: np.ndarray) -> "Stacker":
        self.model_ = self._make().fit(self._features(member_preds), y)
        return self

    def cross_validated(self, member_preds: Sequence[np.ndarray], y: np.ndarray) -> np.ndarray:
        """Out-of-fold predictions on the rows the stacker is fitted on (an honest validation estimate)."""
        from sklearn.model_selection import KFold, StratifiedKFold

        X = self._features(member_preds)
        folds = (StratifiedKFold if self.task == "classification" else KFold)(5, shuffle=True, random_state=self.seed)
        out = np.zeros((len(y), self.n_classes) if self.task == "classification" else len(y))
        for train, test in folds.split(X, y):
            model = self._make().fit(X[train], y[train])
            out[test] = self._predict(model, X[test])
        return out

    def _predict(self, model, X) -> np.ndarray:
        if self.task != "classification":
            return model.predict(X)
        probs = np.zeros((len(X), self.n_classes))
        probs[:, model.classes_.astype(int)] = model.predict_proba(X)
        return probs

    def predict(self, member_preds: Sequence[np.ndarray]) -> np.ndarray:
        return self._predict(self.model_, self._features(member_preds))


def best_single(history: Sequence) -> Tuple[List[int], np.ndarray]:
    ok = _successful(history)
    best = min(ok, key=lambda i: (history[i].val_loss, i))
    return [best], np.ones(1)


def _successful(history: Sequence) -> List[int]:
    """Positions of the runs that left predictions; failed runs never enter an ensemble."""
    ok = [i for i, obs in enumerate(history) if obs.status == "ok" and obs.val_pred is not None]
    if not ok:
        raise RuntimeError("every evaluation failed: there is no model to build an ensemble from")
    return ok


def weighted_prediction(stored: Sequence[np.ndarray], weights: np.ndarray, vote: bool = False) -> np.ndarray:
    """Weighted average of the members' predictions; with ``vote`` (class probabilities only), the
    weighted majority vote's shares per class (Agnostic Bayes's decision rule)."""
    if vote:
        return weighted_vote(np.stack(stored), np.asarray(weights, dtype=np.float64))
    return np.tensordot(np.asarray(weights, dtype=np.float64), np.stack(stored).astype(np.float64), axes=1)
