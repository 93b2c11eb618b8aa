"""ADMM as a search strategy: its schedule, its bandit, its penalties, constraints and resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optdiv.bench.replay import replay_search
from optdiv.evaluation.constraints import Constraint
from optdiv.evaluation.observation import Observation
from optdiv.spaces.candidates import LibraryCandidates
from optdiv.strategies.admm import ADMM, PULLS, module_keys, theta_block_size

FAST = {"n_trees": 10}


@pytest.fixture
def library(wide_cls_library):
    return wide_cls_library


def _admm(library, seed=0, constraints=()):
    return ADMM(library.space, "error", seed=seed, candidates=LibraryCandidates(library),
                constraints=[Constraint.parse(c) for c in constraints], **FAST)


def test_adaptive_schedule_and_modules(library):
    assert [theta_block_size(t) for t in (0, 1, 2, 14, 100)] == [16, 24, 32, 128, 128]
    assert module_keys(library.space) == ["classifier:__choice__", "feature_preprocessor:__choice__",
                                          "rescaling:__choice__"]


def test_phases_follow_algorithm_1_and_z_moves_to_the_best_contender(library):
    budget = theta_block_size(0) + PULLS + 3
    result = replay_search(library, "admm", "error", seed=2, budget=budget, optimizer_options=FAST)
    admm = _admm(library, seed=2)
    history = result.history
    first_z = admm.replay([])[0].z
    estimator = library.space.algorithm_key
    # theta-min keeps the estimator of z^(0) for its whole block
    assert {obs.config[estimator] for obs in history[:16]} == {first_z[estimator]}
    state, arms = admm.replay(history[:16])
    assert state.phase == "pull" and state.t == 0
    state, arms = admm.replay(history[: 16 + PULLS])
    assert state.phase == "theta" and state.t == 1
    # every pull credited once per module; priors untouched elsewhere
    for module in module_keys(library.space):
        assert sum(n for (m, _), n, _ in [(k, p, r) for k, p, r in arms.counts()] if m == module) == PULLS
    losses = np.array([o.val_loss if o.ok else np.inf for o in history[: 16 + PULLS]])
    best_theta = min(range(16), key=lambda i: (losses[i] + admm._penalty(history[i].config, admm.replay(
        history[:15])[0]), i))
    contenders = [best_theta] + list(range(16, 16 + PULLS))
    winner = min((i for i in contenders if np.isfinite(losses[i])), key=lambda i: (losses[i], i))
    assert state.z == admm.z_of(history[winner].config)
    assert {obs.config[estimator] for obs in history[16 + PULLS:]} == {state.z[estimator]}


def test_a_resumed_run_suggests_what_an_uninterrupted_run_did(library):
    full = replay_search(library, "admm-es", "error", seed=5, budget=30, optimizer_options=FAST)
    short = replay_search(library, "admm-es", "error", seed=5, budget=19, optimizer_options=FAST)
    assert full.info["library_indices"][:19] == short.info["library_indices"]
    admm = _admm(library, seed=5)
    for k in (0, 7, 16, 21, 29):  # a fresh strategy from the stored history continues the same way
        assert admm.suggest(full.history[:k]).config == full.history[k].config


def test_integer_penalty_is_zero_at_delta_and_grows_with_distance(library):
    admm = _admm(library)
    state = admm.replay([])[0]
    name = "classifier:random_forest:min_samples_split"
    if name not in admm.integers:
        name = sorted(admm.integers)[0]
    lower, upper, default, _ = admm.integers[name]
    assert state.delta[name] == default and state.lam[name] == 0.0
    assert admm._penalty({name: default}, state) == 0.0
    near, far = min(default + 1, upper), upper if upper - default >= default - lower else lower
    assert 0.0 < admm._penalty({name: near}, state) <= admm._penalty({name: far}, state)
    assert admm._penalty({name: far}, state) == pytest.approx(0.5 * ((far - default) / (upper - lower)) ** 2)


def test_constraint_terms_follow_algorithm_2(library):
    admm = _admm(library, constraints=["predict_seconds<=0.5"])
    feasible = Observation(config={}, status="ok", val_loss=0.2, measures={"predict_seconds": 0.25})
    violating = Observation(config={}, status="infeasible", val_loss=0.1, measures={"predict_seconds": 1.5})
    (r_ok, p_ok), = admm._constraint_terms(feasible, [0.0])
    (r_bad, p_bad), = admm._constraint_terms(violating, [0.0])
    assert (r_ok, p_ok) == (0.0, 0.0)  # slack u = eps - g absorbs a feasible run
    assert r_bad == pytest.approx(2.0) and p_bad == pytest.approx(2.0)  # g = 3, eps = 1 (scaled by the bound)
    losses = np.array([0.2, 0.1])
    assert admm._objective([feasible, violating], losses, 1, [0.0]) == pytest.approx(2.1)
    assert admm._objective([feasible, violating], losses, 0, [0.0]) == pytest.approx(0.2)
    lower = ADMM(library.space, "error", candidates=LibraryCandidates(library),
                 constraints=[Constraint.parse("predict_seconds>=1")])
    (r_low, _), = lower._constraint_terms(feasible, [0.0])
    assert r_low == pytest.approx(0.75)  # -0.25 <= -1 is violated by 0.75


def test_constrained_admm_prefers_feasible_runs(library):
    slow = np.where(np.arange(len(library)) % 3 == 0, 0.5, 0.05)
    slowed = dataclasses.replace(library, fit_seconds=slow)
    result = replay_search(slowed, "admm-es", "error", seed=1, budget=40, constraints=["fit_seconds<=0.1"],
                           optimizer_options=FAST)
    statuses = [o.status for o in result.history]
    assert "infeasible" in statuses
    assert all(result.history[m].status == "ok" for m in result.member_indices)
    admm = _admm(slowed, seed=1, constraints=["fit_seconds<=0.1"])
    state, _ = admm.replay(result.history)
    assert len(state.mu) == 1 and np.isfinite(state.mu[0])


@pytest.mark.parametrize("metric", ["mse", "mae"])
def test_regression_rewards_use_loss_quantiles(reg_library, metric):
    result = replay_search(reg_library, "admm-es", metric, seed=0, budget=26, optimizer_options=FAST)
    assert len(result.history) == 26 and np.isfinite(result.test_loss)
    admm = ADMM(reg_library.space, metric, candidates=LibraryCandidates(reg_library))
    objectives = np.array([3.0, 1.0, np.inf, 2.0])
    assert [admm._reward_loss(objectives, i) for i in range(4)] == [1.0, 0.5, np.inf, pytest.approx(2 / 3)]


def test_bad_settings_are_refused(library):
    with pytest.raises(ValueError, match="rho > 0"):
        ADMM(library.space, "error", rho=0.0)
    with pytest.raises(ValueError, match="pull"):
        ADMM(library.space, "error", pulls=0)
