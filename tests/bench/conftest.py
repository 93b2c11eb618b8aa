"""Tests of the product's harness, ``optdiv bench`` (live and replay) and ``optdiv report``, and of the search
methods run through it. The research scripts of benchmarks/ are tested in tests/benchmarks.

Fixtures: a synthetic replay library, real auto-sklearn-space configurations, made-up predictions, no fitting.

Each algorithm has its own skill and each member its own noise, so methods that model performance
beat random choice, ensembles beat single members, and the run takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.bench.library import Library
from optdiv.spaces import get_space


def synthetic_library(task: str = "classification", n: int = 60, rows: int = 120, seed: int = 0,
                      failed: int = 3) -> Library:
    space = get_space("autosklearn", task)
    configs = space.sample(n, seed=seed)
    algorithms = [space.algorithm_of(c) for c in configs]
    rng = np.random.default_rng(seed)
    names = sorted(set(algorithms))
    skill = {a: rng.uniform(0.5, 2.5) for a in names}
    y_val = rng.integers(0, 2, rows) if task == "classification" else rng.normal(size=rows)
    y_test = rng.integers(0, 2, rows) if task == "classification" else rng.normal(size=rows)

    def predictions(y, k):
        noise = np.random.default_rng([seed, k]).normal(size=len(y))
        strength = skill[algorithms[k]] * (0.5 + np.random.default_rng([seed, k, 1]).random())
        if task == "classification":
            logit = 0.4 * strength * (2 * y - 1) + 1.5 * noise
            p1 = 1 / (1 + np.exp(-logit))
            return np.stack([1 - p1, p1], axis=1).astype(np.float32)
        return (y + noise / strength).astype(np.float32)

    val = np.stack([predictions(y_val, k) for k in range(n)])
    test = np.stack([predictions(y_test, k) for k in range(n)])
    ok = np.ones(n, dtype=bool)
    ok[rng.choice(n, failed, replace=False)] = False
    val[~ok] = 0
    test[~ok] = 0
    return Library(name=f"synthetic_{task}", task=task, space=space, configs=configs, algorithms=algorithms, ok=ok,
                   val_preds=val, test_preds=test, y_val=y_val, y_test=y_test,
                   fit_seconds=np.full(n, 0.1), encoded=space.encode(configs))


@pytest.fixture(scope="session")
def cls_library() -> Library:
    return synthetic_library("classification")


@pytest.fixture(scope="session")
def reg_library() -> Library:
    return synthetic_library("regression", seed=1)


@pytest.fixture(scope="session")
def wide_cls_library() -> Library:
    """Enough members per algorithm for strategies that stay on one algorithm for a while (ADMM's blocks)."""
    return synthetic_library("classification", n=400, seed=4, failed=6)


@pytest.fixture(scope="session")
def library_factory():
    """``synthetic_library`` itself, for tests that need fresh copies to alter."""
    return synthetic_library
