"""Helpers of the parallel-search tests: a driver process to SIGKILL, and a space whose fits take a while.

Top-level builders, so Dask workers and the evaluator's processes import them by name (tests/support is on
their ``sys.path``: spawned processes inherit the parent's).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sklearn.base import BaseEstimator, ClassifierMixin
from tiny_space import build, tiny_space

from optdiv.evaluation.fault_plan import FAULT_KEY, FaultPlan
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.spaces import SearchSpace

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}

#: Seconds every fit of :func:`sleepy_space` takes on top of the model's own fit.
SLEEP_SECONDS = 1.0


class Sleepy(BaseEstimator, ClassifierMixin):
    """A classifier that sleeps, then fits its inner model: an evaluation long enough to kill mid-way."""

    def __init__(self, model=None):
        self.model = model

    def fit(self, X, y):
        time.sleep(SLEEP_SECONDS)
        self.model.fit(X, y)
        self.classes_ = self.model.classes_
        return self

    def predict_proba(self, X):
        return self.model.predict_proba(X)

    def predict(self, X):
        return self.model.predict(X)


def build_sleepy(config, seed):
    return Sleepy(build(config, seed))


def sleepy_space() -> SearchSpace:
    base = tiny_space("classification")
    return SearchSpace.from_configspace(base.configspace, build_sleepy, "classification", name="sleepy",
                                        algorithm_key="algorithm")


def drive(csv: str, out: str, budget: int, where: str = "none") -> None:
    """One tiny optdivbo run stored in ``out``, resumed when ``out`` holds one. ``where``: ``none``
    (sequential), a number of local Dask workers, or a scheduler address."""
    from optdiv.engine.run import run

    parallel = {}
    if where.isdigit():
        parallel["workers"] = int(where)
    elif where != "none":
        parallel["scheduler"] = where
    run(csv, target="target", out=out, resume=(Path(out) / "meta.json").exists(), seed=3, method="optdivbo",
        space=tiny_space("classification"), budget=budget, optimizer_options=FAST, time_limit=60, **parallel)


class CustomEvaluator(EvaluatorInterface):
    """An evaluator without a worker recipe (as a replay's or a user's): it can only run in the search's process."""

    def evaluate(self, config, index):
        raise AssertionError("not reached")

    def close(self):
        pass


def config_key(config):
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def fault_seed(kinds=("raise", "hang", "nan"), budget=12):
    return next(seed for seed in range(1000)
                if set(kinds) <= {FaultPlan(0.3, 0.1, 0.05, seed).fault_for(i) for i in range(budget)}
                and [FaultPlan(0.3, 0.1, 0.05, seed).fault_for(i) for i in range(budget)].count("hang") <= 1)


def check_faults(history, plan):
    for obs in history:
        fault = plan.fault_for(obs.index)
        expected = {None: "ok", "raise": "failed", "nan": "failed", "hang": "timeout"}[fault]
        assert obs.status == expected, (obs.index, fault, obs.error)
        if fault == "raise":
            assert "InjectedFault" in obs.error
        if fault == "nan":
            assert "NaN" in obs.error
        assert FAULT_KEY not in obs.config


if __name__ == "__main__":
    drive(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
