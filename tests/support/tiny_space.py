"""A two-algorithm search space whose models fit in milliseconds, for engine tests.

Top-level builders so the evaluator's spawned worker can import them; ``crash`` lets a test plant a
configuration that always raises. ``latency_space`` has a fast and a slow-predicting algorithm, for
constraint tests.
"""

from __future__ import annotations

import time

from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from optdiv.spaces import cs_compat
from optdiv.spaces import SearchSpace


def build(config, seed):
    algorithm = config["algorithm"]
    if algorithm == "crash":
        raise RuntimeError("this configuration always fails")
    if algorithm == "linear":
        if config["task"] == "classification":
            return make_pipeline(StandardScaler(), LogisticRegression(C=config["C"], max_iter=300))
        return make_pipeline(StandardScaler(), Ridge(alpha=1.0 / config["C"]))
    tree = DecisionTreeClassifier if config["task"] == "classification" else DecisionTreeRegressor
    return tree(max_depth=config["depth"], min_samples_leaf=config["leaf"], random_state=seed)


def tiny_space(task: str, with_crash: bool = False) -> SearchSpace:
    space = cs_compat.new_space("tiny", seed=0)
    algorithms = ["linear", "tree"] + (["crash"] if with_crash else [])
    algorithm = cs_compat.categorical("algorithm", algorithms, default="linear")
    c = cs_compat.uniform_float("C", 1e-3, 1e3, default=1.0, log=True)
    depth = cs_compat.uniform_int("depth", 1, 12, default=3)
    leaf = cs_compat.uniform_int("leaf", 1, 30, default=1)
    task_hp = cs_compat.constant("task", task)
    cs_compat.add_hyperparameters(space, [algorithm, c, depth, leaf, task_hp])
    cs_compat.add_conditions(
        space,
        [
            cs_compat.equals(c, algorithm, "linear"),
            cs_compat.equals(depth, algorithm, "tree"),
            cs_compat.equals(leaf, algorithm, "tree"),
        ],
    )
    return SearchSpace.from_configspace(space, build, task, name="tiny", algorithm_key="algorithm")


class SlowPredictor(BaseEstimator, ClassifierMixin):
    """Logistic regression whose every predict_proba sleeps ``delay`` seconds: a deterministic latency
    for constraint tests (fitting stays instant)."""

    def __init__(self, C=1.0, delay=0.0):
        self.C = C
        self.delay = delay

    def fit(self, X, y):
        self.model_ = LogisticRegression(C=self.C, max_iter=300).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        time.sleep(self.delay)
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


#: Seconds each predict call of the ``slow`` algorithm of :func:`latency_space` sleeps.
SLOW_PREDICT_SECONDS = 0.3


def build_latency(config, seed):
    delay = SLOW_PREDICT_SECONDS if config["algorithm"] == "slow" else 0.0
    return make_pipeline(StandardScaler(), SlowPredictor(C=config["C"], delay=delay))


def latency_space() -> SearchSpace:
    """Classification space of two algorithms that differ only in prediction latency: ``fast`` and ``slow``."""
    space = cs_compat.new_space("latency", seed=0)
    algorithm = cs_compat.categorical("algorithm", ["fast", "slow"], default="fast")
    c = cs_compat.uniform_float("C", 1e-2, 1e2, default=1.0, log=True)
    cs_compat.add_hyperparameters(space, [algorithm, c])
    return SearchSpace.from_configspace(space, build_latency, "classification", name="latency",
                                        algorithm_key="algorithm")


#: Fits of :class:`CountingTree` in this process (the evaluator's worker counts its own): a refit of a final
#: model in the test process shows here.
FITS = {"count": 0}


class CountingTree(DecisionTreeClassifier):
    def fit(self, X, y, sample_weight=None, check_input=True):
        FITS["count"] += 1
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


#: Seconds the ``slow`` algorithm of :func:`timed_space` sleeps in ``fit``: past any test's time budget.
SLOW_FIT_SECONDS = 30.0


class SlowFit(BaseEstimator, ClassifierMixin):
    """Sleeps ``seconds`` in fit, then predicts like a logistic regression."""

    def __init__(self, seconds=0.0):
        self.seconds = seconds

    def fit(self, X, y):
        time.sleep(self.seconds)
        self.model_ = LogisticRegression(max_iter=300).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.model_.predict(X)


def build_timed(config, seed):
    if config["algorithm"] == "slow":
        return SlowFit(SLOW_FIT_SECONDS)
    return CountingTree(max_depth=config["depth"], min_samples_leaf=config["leaf"], random_state=seed)


def timed_space(with_slow: bool = True) -> SearchSpace:
    """Classification space of a fast counting tree and (``with_slow``) a model that fits for 30 s: for time
    budget tests."""
    space = cs_compat.new_space("timed", seed=0)
    algorithm = cs_compat.categorical("algorithm", ["tree", "slow"] if with_slow else ["tree"], default="tree")
    depth = cs_compat.uniform_int("depth", 1, 8, default=3)
    leaf = cs_compat.uniform_int("leaf", 1, 50, default=1)
    cs_compat.add_hyperparameters(space, [algorithm, depth, leaf])
    cs_compat.add_conditions(space, [cs_compat.equals(depth, algorithm, "tree"),
                                     cs_compat.equals(leaf, algorithm, "tree")])
    return SearchSpace.from_configspace(space, build_timed, "classification", name="timed",
                                        algorithm_key="algorithm")
