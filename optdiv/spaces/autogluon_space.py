"""AutoGluon's model families with AutoGluon's own hyperparameter ranges.

Algorithms (``classifier:__choice__`` / ``regressor:__choice__``):

* ``lightgbm`` -- always;
* ``catboost`` -- only when the ``catboost`` package can be imported;
* ``xgboost`` -- only when the ``xgboost`` package can be imported;
* ``random_forest``, ``extra_trees``, ``k_nearest_neighbors``, ``linear`` -- always (scikit-learn).

So the space holds 5 algorithms (16 hyperparameters) without the optional packages and 7 (27
hyperparameters) with both; ``autogluon_space(task, algorithms=[...])`` picks a fixed subset
(and raises if a requested optional package is missing), which keeps a space identical across
machines.

Where the ranges come from (AutoGluon's source, read for this module; nothing copied):

* LightGBM: ``tabular/src/autogluon/tabular/models/lgb/hyperparameters/searchspaces.py``
  (learning_rate 5e-3..0.2 log, feature_fraction 0.75..1, min_data_in_leaf 2..60, num_leaves 16..96);
* CatBoost: ``tabular/src/autogluon/tabular/models/catboost/hyperparameters/searchspaces.py``
  (learning_rate 5e-3..0.2 log, depth 5..8, l2_leaf_reg 1..5);
* XGBoost: ``tabular/src/autogluon/tabular/models/xgboost/hyperparameters/searchspaces.py``
  (learning_rate 5e-3..0.2 log, max_depth 3..10, min_child_weight 1..5, gamma 0..5, subsample
  0.5..1, colsample_bytree 0.5..1, reg_alpha 0..10, reg_lambda 0..10);
* linear: ``tabular/src/autogluon/tabular/models/lr/hyperparameters/searchspaces.py`` (C 0.1..1e3,
  penalty L2/L1) and ``lr_model.py`` (LogisticRegression for classification, Ridge/Lasso with
  alpha = 1/C for regression, standardised inputs). C is searched on a log scale here;
* random forest / extra trees / KNN: AutoGluon's own models have no search space (``rf_model.py``
  keeps it commented out), so the ranges are those of AutoGluon's zero-shot portfolio generator,
  ``autogluon/tabrepo`` ``tabrepo/models/{random_forest,extra_trees,knn}/generate.py``
  (max_leaf_nodes 5000..50000, min_samples_leaf 1..80, max_features sqrt/log2/0.5/0.75/1.0;
  n_neighbors 3..50, weights, p 1/2). Their categorical integer lists become log-scaled integers.

Fixed settings: AutoGluon trains boosted trees for up to 10000 rounds with early stopping on a
holdout; optdiv fits on the given rows only, so LightGBM/XGBoost/CatBoost use 500 rounds. Extra
trees use AutoGluon's default 300 trees; random forests 100, because AutoGluon's 300 use all cores
and a single-threaded 300-tree forest with ``max_features=1.0`` takes about 3 minutes on 10k x 50
(100 trees: about 1 minute; extra trees with 300: about 30 s). ``n_jobs``/threads are 1 everywhere.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Optional, Sequence

from optdiv.spaces import cs_compat as C
from optdiv.spaces.assembly import Component, Group, selected
from optdiv.spaces.base import SearchSpace, check_task

_BOOST_ROUNDS = 500
_FOREST_TREES = {"random_forest": 100, "extra_trees": 300}
_LINEAR_MAX_ITER = 1000
ALGORITHMS = ("lightgbm", "catboost", "xgboost", "random_forest", "extra_trees", "k_nearest_neighbors", "linear")
OPTIONAL = {"catboost": "catboost", "xgboost": "xgboost"}


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:  # ImportError, or a broken native library
        return False
    return True


def available_algorithms() -> list:
    """The algorithms this Python environment can build."""
    return [a for a in ALGORITHMS if a not in OPTIONAL or _importable(OPTIONAL[a])]


def _components(task: str, algorithms: Sequence[str]):
    out = []
    for name in algorithms:
        c = Component(name)
        if name == "lightgbm":
            c.float("learning_rate", 5e-3, 0.2, 0.05, log=True)
            c.float("feature_fraction", 0.75, 1.0, 1.0)
            c.int("min_data_in_leaf", 2, 60, 20)
            c.int("num_leaves", 16, 96, 31)
        elif name == "catboost":
            c.float("learning_rate", 5e-3, 0.2, 0.05, log=True)
            c.int("depth", 5, 8, 6)
            c.float("l2_leaf_reg", 1.0, 5.0, 3.0)
        elif name == "xgboost":
            c.float("learning_rate", 5e-3, 0.2, 0.1, log=True)
            c.int("max_depth", 3, 10, 3)
            c.int("min_child_weight", 1, 5, 1)
            c.float("gamma", 0.0, 5.0, 0.01)
            c.float("subsample", 0.5, 1.0, 1.0)
            c.float("colsample_bytree", 0.5, 1.0, 1.0)
            c.float("reg_alpha", 0.0, 10.0, 0.0)
            c.float("reg_lambda", 0.0, 10.0, 1.0)
        elif name in ("random_forest", "extra_trees"):
            c.int("max_leaf_nodes", 5000, 50000, 15000)
            c.int("min_samples_leaf", 1, 80, 1, log=True)
            c.categorical("max_features", ["sqrt", "log2", "0.5", "0.75", "1.0"],
                          "sqrt" if task == "classification" else "1.0")
        elif name == "k_nearest_neighbors":
            c.int("n_neighbors", 3, 50, 5, log=True)
            c.categorical("weights", ["uniform", "distance"], "uniform")
            c.categorical("p", ["2", "1"], "2")
        elif name == "linear":
            c.categorical("penalty", ["L2", "L1"], "L2")
            c.float("C", 0.1, 1000.0, 1.0, log=True)
        else:
            raise ValueError("unknown AutoGluon algorithm %r" % name)
        out.append(c)
    return out


def autogluon_space(task: str = "classification", algorithms: Optional[Sequence[str]] = None) -> SearchSpace:
    """AutoGluon-style space for ``task``; ``algorithms`` defaults to every importable one."""
    check_task(task)
    if algorithms is None:
        algorithms = available_algorithms()
    else:
        algorithms = list(algorithms)
        unknown = [a for a in algorithms if a not in ALGORITHMS]
        if unknown:
            raise ValueError("unknown AutoGluon algorithm(s) %s; known: %s" % (unknown, ", ".join(ALGORITHMS)))
        missing = [a for a in algorithms if a in OPTIONAL and not _importable(OPTIONAL[a])]
        if missing:
            raise ImportError("algorithm(s) %s need the optional package(s) %s"
                              % (missing, ", ".join(OPTIONAL[a] for a in missing)))
        if not algorithms:
            raise ValueError("algorithms must not be empty")
    group_name = "classifier" if task == "classification" else "regressor"
    space = C.new_space(name="optdiv-autogluon-%s" % task)
    group = Group(group_name, _components(task, algorithms), algorithms[0])
    group.add_to(space)
    return SearchSpace("autogluon", task, space, AutoGluonBuilder(task), algorithm_key=group.choice_name)


class AutoGluonBuilder:
    """``builder(config, seed)`` of :func:`autogluon_space` (a picklable callable)."""

    def __init__(self, task: str):
        self.task = check_task(task)

    def __call__(self, config: Dict[str, Any], seed: int):
        group = "classifier" if self.task == "classification" else "regressor"
        kind, p = selected(config, group)
        return _build(self.task, kind, p, seed)


def _max_features(value: str):
    return value if value in ("sqrt", "log2") else float(value)


def _build(task: str, kind: str, p: Dict[str, Any], seed: int):
    clf = task == "classification"
    if kind == "lightgbm":
        import lightgbm

        from optdiv.spaces.sklearn_models import LIGHTGBM_HISTOGRAM_MB

        cls = lightgbm.LGBMClassifier if clf else lightgbm.LGBMRegressor
        return cls(n_estimators=_BOOST_ROUNDS, learning_rate=float(p["learning_rate"]),
                   colsample_bytree=float(p["feature_fraction"]), min_child_samples=int(p["min_data_in_leaf"]),
                   num_leaves=int(p["num_leaves"]), random_state=seed, n_jobs=1,
                   histogram_pool_size=LIGHTGBM_HISTOGRAM_MB, verbose=-1)
    if kind == "catboost":
        import catboost

        cls = catboost.CatBoostClassifier if clf else catboost.CatBoostRegressor
        return cls(iterations=_BOOST_ROUNDS, learning_rate=float(p["learning_rate"]), depth=int(p["depth"]),
                   l2_leaf_reg=float(p["l2_leaf_reg"]), random_seed=seed, thread_count=1, verbose=False,
                   allow_writing_files=False)
    if kind == "xgboost":
        import xgboost

        cls = xgboost.XGBClassifier if clf else xgboost.XGBRegressor
        return cls(n_estimators=_BOOST_ROUNDS, learning_rate=float(p["learning_rate"]), max_depth=int(p["max_depth"]),
                   min_child_weight=float(p["min_child_weight"]), gamma=float(p["gamma"]),
                   subsample=float(p["subsample"]), colsample_bytree=float(p["colsample_bytree"]),
                   reg_alpha=float(p["reg_alpha"]), reg_lambda=float(p["reg_lambda"]), tree_method="hist",
                   random_state=seed, n_jobs=1, verbosity=0)
    if kind in ("random_forest", "extra_trees"):
        from sklearn import ensemble

        name = ("RandomForest" if kind == "random_forest" else "ExtraTrees") + ("Classifier" if clf else "Regressor")
        return getattr(ensemble, name)(
            n_estimators=_FOREST_TREES[kind], max_leaf_nodes=int(p["max_leaf_nodes"]),
            min_samples_leaf=int(p["min_samples_leaf"]), max_features=_max_features(p["max_features"]),
            bootstrap=kind == "random_forest", n_jobs=1, random_state=seed)
    if kind == "k_nearest_neighbors":
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        cls = KNeighborsClassifier if clf else KNeighborsRegressor
        return cls(n_neighbors=int(p["n_neighbors"]), weights=p["weights"], p=int(p["p"]), n_jobs=1)
    if kind == "linear":
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        C_value = float(p["C"])
        if clf:
            from optdiv.spaces.sklearn_models import logistic_regression

            penalty = p["penalty"].lower()
            model = logistic_regression(penalty, C_value, 1e-4, "lbfgs" if penalty == "l2" else "saga",
                                        None, seed, max_iter=_LINEAR_MAX_ITER)
        elif p["penalty"] == "L2":
            from sklearn.linear_model import Ridge

            model = Ridge(alpha=1.0 / C_value, random_state=seed)
        else:
            from sklearn.linear_model import Lasso

            model = Lasso(alpha=1.0 / C_value, max_iter=_LINEAR_MAX_ITER, random_state=seed)
        return Pipeline([("scaler", StandardScaler()), ("model", model)])
    raise ValueError("unknown AutoGluon algorithm %r" % kind)


__all__ = ["autogluon_space", "available_algorithms", "ALGORITHMS", "AutoGluonBuilder"]
