"""auto-sklearn's estimators with an ``optdiv`` switch (plain subclasses that hand the callback and optdiv's ensemble
class to auto-sklearn's own hooks, built on first use), and the members of auto-sklearn's final ensemble."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from optdiv.integrations.autosklearn.callback import callback_from_switch, switch_on
from optdiv.integrations.autosklearn.ensemble import check_ensemble_kwargs, ensemble_class
from optdiv.integrations.autosklearn.refit import RefitReserve, holdout_train_size

_CLASSES: Dict[str, type] = {}

#: auto-sklearn's ``ensemble_class`` value meaning "none chosen": EnsembleSelection for one metric.
DEFAULT = "default"


def _needs_X(metric) -> bool:
    """Whether a metric (or any of several) scores with the rows' X, which optdiv's selection does not pass."""
    metrics = metric if isinstance(metric, (list, tuple)) else [metric]
    return any(getattr(m, "_needs_X", False) for m in metrics)


def ensemble_members(automl) -> List[Dict[str, Any]]:
    """auto-sklearn's final ensemble: ``model_id`` (num_run), ``weight``, ``type`` and validation ``cost``,
    heaviest first (from ``leaderboard(ensemble_only=True)``)."""
    board = automl.leaderboard(ensemble_only=True)
    out = [{"model_id": int(model_id), "weight": float(row["ensemble_weight"]), "type": str(row["type"]),
            "cost": float(row["cost"])} for model_id, row in board.iterrows()]
    return sorted(out, key=lambda m: (-m["weight"], m["model_id"]))


def estimator_class(name: str) -> type:
    """``OptDivAutoSklearnClassifier`` or ``OptDivAutoSklearnRegressor``, built on first use under the package's
    name (whose ``__getattr__`` builds them, so pickles find them there)."""
    if name in _CLASSES:
        return _CLASSES[name]
    if name == "OptDivAutoSklearnClassifier":
        from autosklearn.classification import AutoSklearnClassifier as base
    else:
        from autosklearn.regression import AutoSklearnRegressor as base
    from autosklearn.ensembles.ensemble_selection import EnsembleSelection

    def __init__(self, *, optdiv=True, optdiv_kwargs=None, optdiv_ensemble=True, optdiv_refit=True, **kwargs):
        ensemble = kwargs.get("ensemble_class", DEFAULT)
        base.__init__(self, **kwargs)
        # auto-sklearn resolves "default" here; keeping the value given lets build_automl tell a user's own class
        # from the default, also after get_params / clone
        self.ensemble_class = ensemble
        self.optdiv = optdiv
        self.optdiv_kwargs = optdiv_kwargs
        self.optdiv_ensemble = optdiv_ensemble
        self.optdiv_refit = optdiv_refit

    def _ensemble_for_fit(self, optdiv_on: bool, metric):
        """The ensemble class for this fit: the user's own if given, else optdiv's when optdiv is on and auto-sklearn
        would use its single-metric EnsembleSelection, else auto-sklearn's default."""
        if not (isinstance(self.ensemble_class, str) and self.ensemble_class == DEFAULT):
            return self.ensemble_class
        stock = base._resolve_ensemble_class(self, metric)
        if not (optdiv_on and self.optdiv_ensemble) or stock is not EnsembleSelection or _needs_X(metric):
            return stock
        check_ensemble_kwargs(self.ensemble_kwargs)
        return ensemble_class()

    def _refit_reserve(self, optdiv_on: bool):
        """The refit reserve for this fit: optdiv on, ``optdiv_refit``, an ensemble, and a holdout whose members
        saw part of the rows; else None."""
        if not (optdiv_on and self.optdiv_refit) or self.ensemble_class is None:
            return None
        train_size = holdout_train_size(self.resampling_strategy, self.resampling_strategy_arguments)
        if train_size is None:
            return None
        return RefitReserve(self.time_left_for_this_task, train_size, chained=self.get_trials_callback)

    def build_automl(self):
        """Hands auto-sklearn the optdiv callbacks and ensemble class through its own hooks for this fit only."""
        for flag in ("optdiv_ensemble", "optdiv_refit"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be True or False; got {getattr(self, flag)!r}")
        callback = callback_from_switch(self.optdiv, self.optdiv_kwargs)
        optdiv_on = switch_on(self.optdiv)
        self.optdiv_ = callback
        if callback is not None and self.get_smac_object_callback is not None:
            raise ValueError("give either optdiv='optdivbo' | 'divbo' or get_smac_object_callback=..., not both")
        reserve = self._refit_reserve(optdiv_on)
        self.optdiv_refit_ = reserve
        given, given_trials = self.ensemble_class, self.get_trials_callback
        self.ensemble_class = self._ensemble_for_fit(optdiv_on, self.metric)
        if callback is not None:
            self.get_smac_object_callback = callback
        if reserve is not None:
            self.get_trials_callback = reserve
            reserve.start()
        try:
            return base.build_automl(self)
        finally:
            self.ensemble_class, self.get_trials_callback = given, given_trials
            if callback is not None:
                self.get_smac_object_callback = None

    def fit(self, X, y, *args, **kwargs):
        """auto-sklearn's fit, then (optdiv on, a holdout) the final members refitted on every row given, as far
        as the time budget allows."""
        base.fit(self, X, y, *args, **kwargs)
        if self.optdiv_refit_ is not None:
            self.optdiv_refit_.refit(self, X, y)
        return self

    # scikit-learn reads the parameters from the signature: the host's keywords plus optdiv's four
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
              for p in inspect.signature(base.__init__).parameters.values() if p.name != "self"]
    params += [inspect.Parameter("optdiv", inspect.Parameter.KEYWORD_ONLY, default=True),
               inspect.Parameter("optdiv_kwargs", inspect.Parameter.KEYWORD_ONLY, default=None),
               inspect.Parameter("optdiv_ensemble", inspect.Parameter.KEYWORD_ONLY, default=True),
               inspect.Parameter("optdiv_refit", inspect.Parameter.KEYWORD_ONLY, default=True)]
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
    doc = (f"auto-sklearn's {base.__name__} with ``optdiv=True | 'optdivbo' | 'divbo' | False``. On (True, the "
           f"default), the final model is optdiv's: its ensemble selection (OptDivEnsemble, unless an "
           f"``ensemble_class`` is given or ``optdiv_ensemble=False``) and, with a holdout, the members refitted on "
           f"every row within ``time_left_for_this_task`` (``optdiv_refit=False`` keeps them as fitted; "
           f"``optdiv_refit_`` reports it). 'optdivbo' / 'divbo' also re-rank SMAC's candidates by diversity "
           f"(optdiv_smac, configured by ``optdiv_kwargs``; ``optdiv_`` is the callback, None otherwise).")
    cls = type(name, (base,), {"__init__": __init__, "build_automl": build_automl, "fit": fit,
                               "_ensemble_for_fit": _ensemble_for_fit, "_refit_reserve": _refit_reserve,
                               "__doc__": doc, "__module__": __package__})
    cls.__qualname__ = name
    _CLASSES[name] = cls
    return cls
