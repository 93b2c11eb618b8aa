"""auto-sklearn's estimators with an ``optdiv`` switch (plain subclasses that hand the callback to auto-sklearn's own
hook, built on first use), and the members of auto-sklearn's final ensemble."""

from __future__ import annotations

import inspect
from typing import Any, Dict, List

from optdiv.integrations.autosklearn.callback import callback_from_switch

_CLASSES: Dict[str, type] = {}


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

    def __init__(self, *, optdiv="optdivbo", optdiv_kwargs=None, **kwargs):
        base.__init__(self, **kwargs)
        self.optdiv = optdiv
        self.optdiv_kwargs = optdiv_kwargs

    def build_automl(self):
        """Hands auto-sklearn the optdiv callback through its own hook for this fit only."""
        callback = callback_from_switch(self.optdiv, self.optdiv_kwargs)
        self.optdiv_ = callback
        if callback is None:
            return base.build_automl(self)
        if self.get_smac_object_callback is not None:
            raise ValueError("give either optdiv=... or get_smac_object_callback=..., not both")
        self.get_smac_object_callback = callback
        try:
            return base.build_automl(self)
        finally:
            self.get_smac_object_callback = None

    # scikit-learn reads the parameters from the signature: the host's keywords plus the two switches
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
              for p in inspect.signature(base.__init__).parameters.values() if p.name != "self"]
    params += [inspect.Parameter("optdiv", inspect.Parameter.KEYWORD_ONLY, default="optdivbo"),
               inspect.Parameter("optdiv_kwargs", inspect.Parameter.KEYWORD_ONLY, default=None)]
    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
    doc = (f"auto-sklearn's {base.__name__} with ``optdiv='optdivbo' | 'divbo' | True | False``: the search's "
           f"acquisition maximiser re-ranks SMAC's candidates by diversity (see optdiv_smac). "
           f"``optdiv_kwargs`` go to optdiv_smac; after fit, ``optdiv_`` is the callback and "
           f"``optdiv_.report`` its report (None when optdiv is off).")
    cls = type(name, (base,), {"__init__": __init__, "build_automl": build_automl, "__doc__": doc,
                               "__module__": __package__})
    cls.__qualname__ = name
    _CLASSES[name] = cls
    return cls
