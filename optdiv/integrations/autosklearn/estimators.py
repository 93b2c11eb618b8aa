"""auto-sklearn's estimators with an ``optdiv`` switch (plain subclasses that hand the callback and optdiv's ensemble
class to auto-sklearn's own hooks, built on first use), and the members of auto-sklearn's final ensemble."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from optdiv.integrations.autosklearn.callback import callback_from_switch
from optdiv.integrations.autosklearn.ensemble import check_ensemble_kwargs, ensemble_class

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

    def __init__(self, *, optdiv="optdivbo", optdiv_kwargs=None, optdiv_ensemble=True, **kwargs):
        ensemble = kwargs.get("ensemble_class", DEFAULT)
        base.__init__(self, **kwargs)
        # auto-sklearn resolves "default" here; keeping the value given lets build_automl tell a user's own class
        # from the default, also after get_params / clone
        self.ensemble_class = ensemble
        self.optdiv = optdiv
        self.optdiv_kwargs = optdiv_kwargs
        self.optdiv_ensemble = optdiv_ensemble

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

    def build_automl(self):
        """Hands auto-sklearn the optdiv callback and ensemble class through its own hooks for this fit only."""
        if not isinstance(self.optdiv_ensemble, bool):
            raise ValueError(f"optdiv_ensemble must be True or False; got {self.optdiv_ensemble!r}")
        callback = callback_from_switch(self.optdiv, self.optdiv_kwargs)
        self.optdiv_ = callback
        if callback is not None and self.get_smac_object_callback is not None:
            raise ValueError("give either optdiv=... or get_smac_object_callback=..., not both")
        given = self.ensemble_class
        self.ensemble_class = self._ensemble_for_fit(callback is not None, self.metric)
        if callback is not None:
            self.get_smac_object_callback = callback
        try:
            return base.build_automl(self)
        finally:
            self.ensemble_class = given
            if callback is not None:
                self.get_smac_object_callback = None

    # scikit-learn reads the parameters from the signature: the host's keywords plus optdiv's three
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
              for p in inspect.signature(base.__init__).parameters.values() if p.name != "self"]
    params += [inspect.Parameter("optdiv", inspect.Parameter.KEYWORD_ONLY, default="optdivbo"),
               inspect.Parameter("optdiv_kwargs", inspect.Parameter.KEYWORD_ONLY, default=None),
               inspect.Parameter("optdiv_ensemble", inspect.Parameter.KEYWORD_ONLY, default=True)]
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
    doc = (f"auto-sklearn's {base.__name__} with ``optdiv='optdivbo' | 'divbo' | True | False``: the search's "
           f"acquisition maximiser re-ranks SMAC's candidates by diversity (see optdiv_smac). "
           f"``optdiv_kwargs`` go to optdiv_smac; after fit, ``optdiv_`` is the callback and "
           f"``optdiv_.report`` its report (None when optdiv is off). With optdiv on and no ``ensemble_class`` "
           f"given, the final ensemble is optdiv's (OptDivEnsemble); ``optdiv_ensemble=False`` keeps "
           f"auto-sklearn's EnsembleSelection.")
    cls = type(name, (base,), {"__init__": __init__, "build_automl": build_automl,
                               "_ensemble_for_fit": _ensemble_for_fit, "__doc__": doc, "__module__": __package__})
    cls.__qualname__ = name
    _CLASSES[name] = cls
    return cls
