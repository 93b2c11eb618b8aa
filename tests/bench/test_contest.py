"""DACOpt contest arithmetic: the seed-notes test targets."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.cash.baselines.contest import (
    _holm_rejections,
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
    assert _holm_rejections([0.01, 0.04, 0.03], 0.05) == [0]  # 0.01 <= 0.05/3; 0.03 > 0.05/2 stops
    assert sorted(_holm_rejections([0.001, 0.02, 0.04], 0.05)) == [0, 1, 2]
