"""A tiny CASH problem for the OpenBox adapter tests: three fast sklearn models on breast_cancer.

Only ConfigSpace and scikit-learn are imported here; the tests import OpenBox inside their functions.
"""

from __future__ import annotations

import functools

import numpy as np
from ConfigSpace import (
    CategoricalHyperparameter,
    ConfigurationSpace,
    EqualsCondition,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)


def make_space(seed: int = 0) -> ConfigurationSpace:
    """k-NN, decision tree or logistic regression, each with two or fewer hyperparameters."""
    cs = ConfigurationSpace(seed=seed)
    algorithm = CategoricalHyperparameter("algorithm", ["knn", "tree", "logreg"], default_value="tree")
    k = UniformIntegerHyperparameter("n_neighbors", 1, 60, default_value=5, log=True)
    weights = CategoricalHyperparameter("weights", ["uniform", "distance"])
    depth = UniformIntegerHyperparameter("max_depth", 1, 12, default_value=4)
    leaf = UniformIntegerHyperparameter("min_samples_leaf", 1, 30, default_value=1, log=True)
    C = UniformFloatHyperparameter("C", 1e-4, 1e3, default_value=1.0, log=True)
    cs.add_hyperparameters([algorithm, k, weights, depth, leaf, C])
    cs.add_conditions([
        EqualsCondition(k, algorithm, "knn"),
        EqualsCondition(weights, algorithm, "knn"),
        EqualsCondition(depth, algorithm, "tree"),
        EqualsCondition(leaf, algorithm, "tree"),
        EqualsCondition(C, algorithm, "logreg"),
    ])
    return cs


def build(values: dict):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    algorithm = values["algorithm"]
    if algorithm == "knn":
        return make_pipeline(StandardScaler(), KNeighborsClassifier(values["n_neighbors"], weights=values["weights"]))
    if algorithm == "tree":
        return DecisionTreeClassifier(max_depth=values["max_depth"], min_samples_leaf=values["min_samples_leaf"],
                                      random_state=0)
    return make_pipeline(StandardScaler(), LogisticRegression(C=values["C"], max_iter=300))


@functools.lru_cache(maxsize=None)
def data():
    """breast_cancer split 60/20/20 (stratified, fixed seed): X_train, y_train, X_val, y_val, X_test, y_test."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.25, random_state=1, stratify=y_rest)
    return X_train, y_train, X_val, y_val, X_test, y_test


@functools.lru_cache(maxsize=None)
def _fit(key: tuple):
    X_train, y_train, X_val, y_val, X_test, _ = data()
    model = build(dict(key)).fit(X_train, y_train)
    return model.predict_proba(X_val), model.predict_proba(X_test)


def evaluate(config):
    """(validation error, validation probabilities, test probabilities) of a configuration (cached)."""
    values = config.get_dictionary() if hasattr(config, "get_dictionary") else dict(config)
    val, test = _fit(tuple(sorted(values.items())))
    y_val = data()[3]
    return float(np.mean(np.argmax(val, axis=1) != y_val)), val.copy(), test.copy()


def objective(config) -> dict:
    """An OpenBox objective: validation error plus the validation predictions in extra_info."""
    loss, val, _ = evaluate(config)
    return {"objectives": [loss], "extra_info": {"val_pred": val}}


def worker_objective(config) -> dict:
    """``objective`` for OpenBox's worker processes, with OpenMP held to one thread.

    ParallelOptimizer forks its workers; scikit-learn's k-NN runs GNU OpenMP, whose thread pool does not survive a
    fork, so a worker deadlocks once this (test) process has used it. One thread never touches that pool.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        return objective(config)


def make_openbox_space(seed: int = 0):
    """The same three model families written with OpenBox's own ``openbox.space`` classes."""
    from openbox import space as sp

    space = sp.Space(seed=seed)
    algorithm = sp.Categorical("algorithm", ["knn", "tree", "logreg"], default_value="tree")
    k = sp.Int("n_neighbors", 1, 60, default_value=5, log=True)
    weights = sp.Categorical("weights", ["uniform", "distance"])
    depth = sp.Int("max_depth", 1, 12, default_value=4)
    leaf = sp.Int("min_samples_leaf", 1, 30, default_value=1, log=True)
    C = sp.Real("C", 1e-4, 1e3, default_value=1.0, log=True)
    space.add_variables([algorithm, k, weights, depth, leaf, C])
    space.add_conditions([sp.EqualsCondition(child, algorithm, value) for child, value in
                          ((k, "knn"), (weights, "knn"), (depth, "tree"), (leaf, "tree"), (C, "logreg"))])
    return space


def constrained_objective(config) -> dict:
    """``objective`` plus one constraint (feasible when <= 0): trees and k-NN with more than 30 neighbours
    are ruled out, as a deployment rule could rule model families out."""
    values = config.get_dictionary()
    out = objective(config)
    if values["algorithm"] == "tree":
        out["constraints"] = [1.0]
    elif values["algorithm"] == "knn":
        out["constraints"] = [float(values["n_neighbors"] - 30)]
    else:
        out["constraints"] = [-1.0]
    return out


# --------------------------------------------------------------------------- regression: diabetes


def make_regression_space(seed: int = 0) -> ConfigurationSpace:
    """Ridge, k-NN or a decision tree regressor, each with one or two hyperparameters."""
    cs = ConfigurationSpace(seed=seed)
    algorithm = CategoricalHyperparameter("algorithm", ["ridge", "knn", "tree"], default_value="ridge")
    alpha = UniformFloatHyperparameter("alpha", 1e-4, 1e3, default_value=1.0, log=True)
    k = UniformIntegerHyperparameter("n_neighbors", 1, 50, default_value=5, log=True)
    depth = UniformIntegerHyperparameter("max_depth", 1, 10, default_value=3)
    leaf = UniformIntegerHyperparameter("min_samples_leaf", 1, 30, default_value=5, log=True)
    cs.add_hyperparameters([algorithm, alpha, k, depth, leaf])
    cs.add_conditions([
        EqualsCondition(alpha, algorithm, "ridge"),
        EqualsCondition(k, algorithm, "knn"),
        EqualsCondition(depth, algorithm, "tree"),
        EqualsCondition(leaf, algorithm, "tree"),
    ])
    return cs


@functools.lru_cache(maxsize=None)
def regression_data():
    """diabetes split 60/20/20 (fixed seed), targets scaled to unit variance."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    X, y = load_diabetes(return_X_y=True)
    y = (y - y.mean()) / y.std()
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.25, random_state=1)
    return X_train, y_train, X_val, y_val, X_test, y_test


def build_regressor(values: dict):
    from sklearn.linear_model import Ridge
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.tree import DecisionTreeRegressor

    if values["algorithm"] == "ridge":
        return Ridge(alpha=values["alpha"])
    if values["algorithm"] == "knn":
        return KNeighborsRegressor(values["n_neighbors"])
    return DecisionTreeRegressor(max_depth=values["max_depth"], min_samples_leaf=values["min_samples_leaf"],
                                 random_state=0)


@functools.lru_cache(maxsize=None)
def _fit_regressor(key: tuple):
    X_train, y_train, X_val, _, _, _ = regression_data()
    return build_regressor(dict(key)).fit(X_train, y_train).predict(X_val)


def regression_objective(config) -> dict:
    """Validation MSE plus the validation predictions (rows,) in extra_info."""
    values = config.get_dictionary() if hasattr(config, "get_dictionary") else dict(config)
    pred = _fit_regressor(tuple(sorted(values.items())))
    y_val = regression_data()[3]
    return {"objectives": [float(np.mean((pred - y_val) ** 2))], "extra_info": {"val_pred": pred.copy()}}
