"""The baselines' own rules: Rising Bandit's rounds and eliminations, kBO's equal shares, EO's slots, NES."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.bench.replay import replay_search
from optdiv.evaluation.observation import Observation
from optdiv.spaces.candidates import LibraryCandidates
from optdiv.strategies.ensemble_optimization import EnsembleOptimization
from optdiv.strategies.rising_bandit import RisingBandit


class _Arms:
    """A stand-in candidate source with three named algorithms (the bandit only needs their names)."""

    def algorithms(self):
        return ["a", "b", "c"]


def _history(losses_by_position):
    return [Observation({"x": i}, "ok", loss, index=i) for i, loss in enumerate(losses_by_position)]


def test_rising_bandit_plays_rounds_of_trials_and_eliminates_hopeless_arms():
    rb = RisingBandit(space=None, metric="error", candidates=_Arms(), budget=60, alpha=1, trials=2)
    # round 1: a a b b c c ; round 2 the same order
    r1 = [0.30, 0.30, 0.40, 0.40, 0.60, 0.60]
    active, positions, eliminated, nxt = rb.state(_history(r1[:3]))
    assert active == ["a", "b", "c"] and positions["a"] == [0, 1] and positions["b"] == [2] and nxt == "b"
    # round 2: a stays at 0.30, b improves fast (0.40 -> 0.20), c stays at 0.60
    r2 = [0.30, 0.30, 0.20, 0.20, 0.60, 0.60]
    active, positions, eliminated, nxt = rb.state(_history(r1 + r2))
    # c cannot catch up (no improvement); a's flat curve is beaten by b's current best
    assert eliminated == ["a", "c"] and active == ["b"] and nxt == "b"
    # with one arm left, every later evaluation goes to it
    active, positions, _, nxt = rb.state(_history(r1 + r2 + [0.2, 0.2, 0.2]))
    assert positions["b"][-3:] == [12, 13, 14] and nxt == "b"


def test_rising_bandit_keeps_an_improving_arm_that_may_still_win():
    rb = RisingBandit(space=None, metric="error", candidates=_Arms(), budget=1000, alpha=1, trials=1)
    # b is behind a but improves by 0.1 per round with many rounds left: it stays
    history = _history([0.30, 0.60, 0.90] + [0.30, 0.50, 0.90])
    active, _, eliminated, _ = rb.state(history)
    assert "b" in active and eliminated == ["c"]


def test_rising_bandit_rejects_bad_settings():
    with pytest.raises(ValueError):
        RisingBandit(space=None, metric="error", candidates=_Arms(), alpha=0)


def test_kbo_gives_every_algorithm_an_equal_share(cls_library):
    arms = LibraryCandidates(cls_library).algorithms()
    budget = 2 * len(arms)
    result = replay_search(cls_library, "kbo-es", "error", seed=0, budget=budget, optimizer_options={"n_trees": 10})
    counts = {a: sum(obs.algorithm == a for obs in result.history) for a in arms}
    available = {a: sum(1 for x in cls_library.algorithms if x == a) for a in arms}
    short = sum(2 - available[a] for a in arms if available[a] < 2)
    assert sum(counts.values()) == budget
    for a in arms:
        assert counts[a] >= min(2, available[a])
        assert counts[a] <= 2 + short  # only the shortfall of tiny arms is handed to others


def test_eo_keeps_a_fixed_size_ensemble_renewed_slot_by_slot(cls_library):
    result = replay_search(cls_library, "eo", "error", seed=0, budget=30, optimizer_options={"n_trees": 10})
    eo = EnsembleOptimization(cls_library.space, "error", candidates=LibraryCandidates(cls_library), ensemble_size=12)
    members = eo.ensemble(result.history, cls_library.y_val)
    assert len(members) == 12
    assert all(result.history[m].status == "ok" for m in members)
    # an ensemble built step by step equals one built from scratch on the whole history
    fresh = EnsembleOptimization(cls_library.space, "error", candidates=LibraryCandidates(cls_library))
    for upto in range(1, 31):
        fresh.ensemble(result.history[:upto], cls_library.y_val)
    assert fresh.ensemble(result.history, cls_library.y_val) == members
    # the final model is EO's own ensemble, weights by multiplicity
    unique, counts = np.unique(members, return_counts=True)
    assert sorted(result.member_indices) == sorted(unique.tolist())
    np.testing.assert_allclose(sorted(result.weights), sorted(counts / 12))


def test_eo_slot_renewal_never_makes_the_ensemble_worse(cls_library):
    from optdiv.core.metrics import mean_loss

    result = replay_search(cls_library, "eo", "error", seed=1, budget=40, optimizer_options={"n_trees": 10})
    eo = EnsembleOptimization(cls_library.space, "error", candidates=LibraryCandidates(cls_library), ensemble_size=12)
    losses = []
    for upto in range(13, 41):
        members = eo.ensemble(result.history[:upto], cls_library.y_val)
        pred = np.mean([result.history[m].val_pred for m in members], axis=0)
        losses.append(mean_loss(pred, cls_library.y_val, "error"))
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:]))


def test_eo_does_not_stay_on_a_confident_constant_first_model():
    # The first success predicts class 1 with probability 1 on every row (as a degenerate pipeline can):
    # while it dominates the average every replacement ties, and taking the earliest tied model used to
    # fill all 12 slots with it for good. Ties now go to the model that is best on its own.
    y = np.array([0, 1] * 20)
    constant = np.tile([0.0, 1.0], (40, 1))
    good = np.where(y[:, None] == 1, [0.2, 0.8], [0.8, 0.2])
    decent = np.where(np.arange(40)[:, None] % 4 == 0, good[:, ::-1], good)  # wrong on every 4th row
    history = [Observation({"x": 0}, "ok", 0.5, val_pred=constant, index=0)]
    history += [Observation({"x": i}, "ok", 0.0, val_pred=(good if i % 2 else decent), index=i) for i in range(1, 30)]
    eo = EnsembleOptimization(space=None, metric="error", candidates=_Arms(), ensemble_size=12)
    members = eo.ensemble(history, y)
    assert 0 not in members
    pred = np.mean([history[m].val_pred for m in members], axis=0)
    assert np.mean(pred.argmax(axis=1) != y) == 0.0
    # while growing, the second slot already goes to the best model on its own (a perfect one), not to model 0
    assert eo.ensemble(history[:2], y) == [0, 1]
    assert eo.ensemble(history[:4], y) == [0, 1, 1, 1]


def test_nes_starts_random_then_mutates_ensemble_members(cls_library):
    from optdiv.bench.replay import LibraryEvaluator
    from optdiv.strategies.evolution import RegularisedEvolutionEnsemble

    nes = RegularisedEvolutionEnsemble(cls_library.space, "error", seed=0, candidates=LibraryCandidates(cls_library),
                                       population=10, ensemble_size=5)
    evaluator = LibraryEvaluator(cls_library, "error")
    history, infos = [], []
    for step in range(20):
        suggestion = nes.suggest(history, cls_library.y_val)
        infos.append(suggestion.info)
        history.append(evaluator.evaluate(suggestion.config, index=step))
    assert all(info["strategy"] == "random" for info in infos[:10])
    assert all(info["strategy"] == "nes" for info in infos[10:])
    for step, info in enumerate(infos[10:], start=10):
        parent = info["parent"]
        assert parent < step and history[parent].status == "ok"
        assert parent >= step - 10 - 3  # drawn from the aged population (the last 10 successful runs)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_algorithm_codes_read_the_algorithm_from_the_encoding(task):
    from optdiv.spaces import get_space
    from optdiv.spaces.candidates import algorithm_codes

    space = get_space("autosklearn", task)
    configs = space.sample(200, seed=4)
    codes = algorithm_codes(space, space.encode(configs))
    assert list(codes) == [space.algorithm_of(c) for c in configs]
    assert len(set(codes)) > 5


def test_live_candidates_restricted_to_one_algorithm():
    from optdiv.spaces import get_space
    from optdiv.spaces.candidates import SpaceCandidates

    space = get_space("autosklearn", "classification")
    source = SpaceCandidates(space)
    rng = np.random.default_rng(0)
    configs, encoded = source.candidates([], np.empty((0, space.n_hyperparameters)), rng, 500, 0, algorithm="lda")
    assert configs and all(space.algorithm_of(c) == "lda" for c in configs)
    assert encoded.shape == (len(configs), space.n_hyperparameters)
    assert space.algorithm_of(source.random(rng, set(), algorithm="k_nearest_neighbors")) == "k_nearest_neighbors"
