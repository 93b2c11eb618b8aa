"""Cost-aware suggestion: under a time budget, candidates predicted not to leave room for more runs lose EI."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.data import from_frame, split
from optdiv.engine.search import search
from optdiv.evaluation.observation import Observation
from optdiv.spaces.candidates import SpaceCandidates
from optdiv.strategies.model_based import RUNS_LEFT, Optimizer

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}


def _history(space):
    configs = space.sample(12, seed=1)
    seconds = {"linear": 0.1, "tree": 10.0}
    return [Observation(c, "ok", 0.1, fit_seconds=seconds[space.algorithm_of(c)], index=i,
                        algorithm=space.algorithm_of(c)) for i, c in enumerate(configs)]


def test_slow_candidates_lose_weight_as_the_time_runs_out():
    space = tiny_space("classification")
    history = _history(space)
    assert {obs.algorithm for obs in history} == {"linear", "tree"}
    unbudgeted = Optimizer(space, "bo", "error", seed=0, cost_aware=True, **FAST)
    source = SpaceCandidates(space)
    obs_x = source.encode_history(history)
    candidates = space.sample(40, seed=2)
    cand_x = space.encode(candidates)
    algorithms = np.array([space.algorithm_of(c) for c in candidates])
    assert unbudgeted._fits_time_left(history, obs_x, cand_x, 12, 0) is None  # no time budget: no weighting
    optimizer = Optimizer(space, "bo", "error", seed=0, cost_aware=True, time_left=lambda: 20.0, **FAST)
    weights = optimizer._fits_time_left(history, obs_x, cand_x, 12, 0)
    assert np.all(weights[algorithms == "linear"] == 1.0)  # 0.1 s fits 20 s many times over
    slow = weights[algorithms == "tree"]
    assert np.median(slow) == pytest.approx(20.0 / (RUNS_LEFT * 10.0), abs=0.02) and slow.max() < 1.0
    plain = Optimizer(space, "bo", "error", seed=0, time_left=lambda: 20.0, **FAST)
    assert plain._fits_time_left(history, obs_x, cand_x, 12, 0) is None  # off unless asked for


def test_cost_aware_needs_a_bo_family_method():
    frame = load_breast_cancer(as_frame=True).frame.sample(120, random_state=0)
    splits = split(from_frame(frame, target="target", name="bc"), seed=0)
    with pytest.raises(ValueError, match="cannot weigh candidates"):
        search(splits, "classification", n_classes=2, method="rb-es", space=tiny_space("classification"),
               budget=2, cost_aware=True)
