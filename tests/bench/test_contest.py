"""DACOpt contest arithmetic against hand-worked targets."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.strategies.contest import (
    holm_rejections,
    integer_log,
    round_budget,
    statistical_survivors,
    survivors_per_round,
    top_survivors,
)


def test_integer_log_avoids_the_float_pitfall():
    assert integer_log(10, 3) == 2
    assert integer_log(243, 3) == 5  # floor(math.log(243, 3)) gives 4
    assert integer_log(1, 3) == 0 and integer_log(2, 3) == 0 and integer_log(9, 3) == 2
    with pytest.raises(ValueError):
        integer_log(0, 3)


def test_survivor_schedule_10_4_2():
    assert survivors_per_round(10, 3) == [10, 4, 2]
    assert survivors_per_round(27, 3) == [27, 9, 3, 1]


def test_round_budgets_never_exceed_the_total_and_last_round_takes_the_rest():
    budget, r_max, spent = 200, 2, 0
    for r, alive in enumerate(survivors_per_round(10, 3)):
        b = round_budget(budget - spent, r, r_max, alive)
        spent += b * alive
    assert spent <= 200
    assert round_budget(90, 2, 2, 2) == 45  # the last round divides by 1, not by zero


def test_top_survivors_keep_the_best_found():
    assert top_survivors([0.3, 0.1, 0.5, 0.1], 2) == [1, 3]


def test_statistical_contest_drops_clearly_worse_candidates_and_keeps_equal_ones():
    rng = np.random.default_rng(0)
    good = rng.normal(0.1, 0.01, 12)
    bad = rng.normal(0.5, 0.01, 12)
    assert statistical_survivors([good, bad, bad + 0.01]) == [0]
    same = [rng.normal(0.3, 0.05, 12) for _ in range(3)]
    assert statistical_survivors(same) == [0, 1, 2]
    assert statistical_survivors([good[:2], bad[:2]]) == [0, 1]  # 2 samples: no test yet
    assert statistical_survivors([good, bad]) == [0]  # two candidates: Wilcoxon


def test_holm_step_down():
    assert holm_rejections([0.01, 0.04, 0.03], 0.05) == [0]  # 0.01 <= 0.05/3; 0.03 > 0.05/2 stops
    assert sorted(holm_rejections([0.001, 0.02, 0.04], 0.05)) == [0, 1, 2]


class _TenArms:
    def algorithms(self):
        return [f"a{i}" for i in range(10)]


def _obs(i, loss):
    from optdiv.evaluation.observation import Observation

    return Observation({"x": i}, "ok", loss, index=i)


def test_dacopt_highest_contest_schedule_10_4_2_within_budget():
    from optdiv.strategies.dacopt import DACOpt

    dac = DACOpt(space=None, metric="error", seed=0, candidates=_TenArms(), budget=100, b_init=5)
    assert len(dac.groups) == 10
    quality = {g: 0.1 * (k + 1) for k, g in enumerate(range(10))}  # group g's loss
    history = []
    counts = []
    for step in range(100):
        g, positions, survivors = dac.assign(history)
        counts.append(len(survivors))
        history.append(_obs(step, quality[g]))
    g, positions, survivors = dac.assign(history)
    assert sum(len(p) for p in positions.values()) == 100
    assert all(len(positions[g]) >= 5 for g in range(10))  # round 0: b_init each
    assert sorted(set(counts)) == [2, 4, 10]
    # the two best groups (losses 0.1, 0.2) are the last survivors and get the late budget
    assert sorted(survivors) == [0, 1]
    late = [g for g in range(10) if any(p >= 74 for p in positions[g])]
    assert sorted(late) == [0, 1]
    # round 1: 4 survivors x floor(floor(50 / 2) / 4) = 6 each; round 2: floor(26 / 1) / 2 = 13 each
    assert sorted(len(positions[g]) for g in range(4)) == [11, 11, 5 + 6 + 13, 5 + 6 + 13]


def test_dacopt_statistical_contest_drops_a_clearly_worse_group():
    from optdiv.strategies.dacopt import DACOpt

    class _Three:
        def algorithms(self):
            return ["a", "b", "c"]

    dac = DACOpt(space=None, metric="error", seed=1, candidates=_Three(), budget=60, b_init=2,
                 contest="statistical")
    rng = np.random.default_rng(0)
    loss = {0: 0.1, 1: 0.5, 2: 0.52}
    history = []
    for step in range(60):
        g, _, survivors = dac.assign(history)
        history.append(_obs(step, loss[g] + rng.normal(0, 0.005)))
    _, positions, survivors = dac.assign(history)
    best = min(range(3), key=lambda g: loss[g])
    assert survivors == [best]
    assert len(positions[best]) > 30


def test_optdivbo_dac_uses_one_global_pool(cls_library):
    from optdiv.bench.replay import LibraryEvaluator
    from optdiv.spaces.candidates import LibraryCandidates
    from optdiv.strategies.dacopt import DACOpt

    dac = DACOpt(cls_library.space, "error", seed=0, candidates=LibraryCandidates(cls_library), budget=40,
                 inner="optdivbo", b_init=3, max_groups=4, n_trees=10)
    evaluator = LibraryEvaluator(cls_library, "error")
    history, pools = [], []
    for step in range(40):
        suggestion = dac.suggest(history, cls_library.y_val)
        if "pool" in suggestion.info:
            group = suggestion.info["subspace"]
            _, positions, _ = dac.assign(history)
            pools.append((group, set(suggestion.info["pool"]), set(positions[group])))
        history.append(evaluator.evaluate(suggestion.config, index=step))
    assert pools, "the diversity term never ran"
    # the pool is drawn from every sub-space's runs, not just the suggesting one's
    assert any(pool - own for _, pool, own in pools)
    assert len({obs.algorithm for obs in history}) > 3


def test_tied_losses_use_the_signed_rank_normal_approximation():
    """Replay libraries repeat losses; the p-value then comes from the tie-corrected normal approximation
    (zeros dropped), not from scipy's permutation fallback that made a contest take half an hour."""
    from math import erf, sqrt

    from scipy.stats import rankdata, wilcoxon

    from optdiv.strategies.contest import wilcoxon_p

    a = np.array([0.30, 0.30, 0.25, 0.40, 0.40, 0.35, 0.30, 0.45, 0.30, 0.50, 0.30, 0.40])
    b = np.array([0.30, 0.20, 0.20, 0.30, 0.30, 0.35, 0.20, 0.30, 0.25, 0.30, 0.20, 0.30])
    d = (a - b)[a != b]
    n = d.size
    ranks = rankdata(np.abs(d))
    t_plus = ranks[d > 0].sum()
    _, counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - (counts ** 3 - counts).sum() / 48
    z = (min(t_plus, n * (n + 1) / 2 - t_plus) - n * (n + 1) / 4) / sqrt(var)
    expected = 2 * 0.5 * (1 + erf(z / sqrt(2)))
    assert abs(wilcoxon_p(a, b, wilcoxon) - expected) < 1e-9
    assert wilcoxon_p(a, a.copy(), wilcoxon) == 1.0
