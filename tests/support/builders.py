"""Builders for the evaluator tests: top-level, so a spawned worker can import them by reference."""

from __future__ import annotations

import os
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def logreg(config, seed):
    return make_pipeline(StandardScaler(), LogisticRegression(C=config.get("C", 1.0), max_iter=500, random_state=seed))


def ridge(config, seed):
    return Ridge(alpha=config.get("alpha", 1.0))


class MajorityLabel(BaseEstimator, ClassifierMixin):
    """Predicts the most frequent training label; has no predict_proba."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.label_ = np.bincount(y).argmax()
        return self

    def predict(self, X):
        return np.full(len(X), self.label_)


class RefusingProba(MajorityLabel):
    """Has predict_proba, but it raises (like SVC(probability=False))."""

    def predict_proba(self, X):
        raise NotImplementedError("predict_proba is not available when probability=False")


class Sleeper(MajorityLabel):
    def __init__(self, seconds=0.0):
        self.seconds = seconds

    def fit(self, X, y):
        time.sleep(self.seconds)
        return super().fit(X, y)


class SlowOnLarge(MajorityLabel):
    """Sleeps ``seconds`` in fit when it gets more than ``rows`` training rows: with uneven folds, only the fold
    whose training part is largest is slow."""

    def __init__(self, rows=0, seconds=0.0):
        self.rows = rows
        self.seconds = seconds

    def fit(self, X, y):
        if len(X) > self.rows:
            time.sleep(self.seconds)
        return super().fit(X, y)


class NaNProba(MajorityLabel):
    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), np.nan)


class Exiter(MajorityLabel):
    def fit(self, X, y):
        os._exit(3)


class Raiser(MajorityLabel):
    def fit(self, X, y):
        raise ValueError("boom: this configuration cannot be fitted")


class Hog(MajorityLabel):
    """Reserves ``gib`` GiB of address space without touching it (no real memory used without a limit)."""

    def __init__(self, gib=16):
        self.gib = gib

    def fit(self, X, y):
        self.blob_ = np.empty(int(self.gib * 1024**3) // 8)
        return super().fit(X, y)


class Grower(MajorityLabel):
    """Touches ``mb`` MB of memory, 20 MB every 20 ms, then keeps it while it sleeps ``hold`` seconds: a resident
    set that grows as a real model's does."""

    def __init__(self, mb=2000, hold=5.0):
        self.mb, self.hold = mb, hold

    def fit(self, X, y):
        import time

        blocks = []
        for _ in range(int(self.mb) // 20):
            blocks.append(np.ones(20 * 1024 * 1024 // 8))
            time.sleep(0.02)
        time.sleep(self.hold)
        self.size_ = sum(b.nbytes for b in blocks)
        return super().fit(X, y)


def svc(config, seed):
    """A kernel SVC without probability estimates: labels and a decision_function only."""
    from sklearn.svm import SVC

    return SVC(random_state=seed)


def majority(config, seed):
    return MajorityLabel()


def refusing(config, seed):
    return RefusingProba()


def sleeper(config, seed):
    return Sleeper(config.get("sleep", 0.0))


def slow_on_large(config, seed):
    return SlowOnLarge(config["rows"], config["sleep"])


def nan_proba(config, seed):
    return NaNProba()


def exiter(config, seed):
    return Exiter()


def raiser(config, seed):
    return Raiser()


def hog(config, seed):
    return Hog(config.get("gib", 16))


def grower(config, seed):
    return Grower(config.get("mb", 2000), config.get("hold", 5.0))


def long_boost(config, seed):
    """AdaBoost of far more rounds of stumps than any test's time limit allows (never a perfect round)."""
    from sklearn.ensemble import AdaBoostClassifier
    from sklearn.tree import DecisionTreeClassifier

    return AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=config.get("rounds", 1_000_000),
                              learning_rate=0.01, random_state=seed)


def by_name(config, seed):
    """Dispatch on config["algorithm"], so one worker can serve every kind of model."""
    return {
        "logreg": logreg, "majority": majority, "refusing": refusing, "sleeper": sleeper, "nan": nan_proba,
        "exit": exiter, "raise": raiser, "hog": hog, "grower": grower, "ridge": ridge, "svc": svc, "slow_on_large": slow_on_large,
        "long_boost": long_boost,
    }[config["algorithm"]](config, seed)


def report_threads(config, seed):
    """Fails on purpose, naming the worker's OpenMP thread cap in the error."""
    raise RuntimeError(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
