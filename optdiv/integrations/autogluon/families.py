"""AutoGluon's model families in optdiv's AutoGluon space: which are installed, a space configuration as AutoGluon
``hyperparameters`` and back (the configuration nearest to a model AutoGluon trained), and a trained model's family
read from its ``model_info``."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from optdiv.integrations.autogluon.host import MODEL_CLASSES, WRITTEN_FOR, HostVersionError
from optdiv.spaces import cs_compat
from optdiv.spaces.assembly import selected
from optdiv.spaces.autogluon_space import OPTIONAL, autogluon_space

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


def resolve_families(families: Optional[Sequence[str]]) -> List[str]:
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
    keys = resolve_families(families)
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


def model_params(info: Dict[str, Any]) -> Dict[str, Any]:
    """``model_hyperparameters(name, output_format="all")`` from a ``model_info`` already read (bagged: the
    children's), without reading the model's info a second time."""
    try:
        params = info["bagged_info"]["child_hyperparameters"] if "bagged_info" in info else info["hyperparameters"]
    except KeyError as exc:
        raise HostVersionError("model_info() has no %s (written for %s)" % (exc, WRITTEN_FOR)) from None
    return dict(params)


def family_of(info: Dict[str, Any]) -> Optional[str]:
    """The AutoGluon key of a trained model from its ``model_info`` (bagged: its children's class)."""
    if "model_type" not in info:
        raise HostVersionError("model_info() has no 'model_type' (written for %s)" % WRITTEN_FOR)
    model_type = info["model_type"]
    if "bagged_info" in info:
        model_type = info["bagged_info"].get("child_model_type", model_type)
    return next((key for key, cls in MODEL_CLASSES.items() if cls == model_type), None)
