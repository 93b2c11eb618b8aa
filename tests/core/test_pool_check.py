"""The check rows and the paired tests that say whether ensembling over more models predicts unseen rows better:
hand-worked cases, constructed pools, and a search's picking that must not count as skill."""

import math

import numpy as np
import pytest

from optdiv.core.metrics import per_example_loss
from optdiv.core.pool_check import (CHECK_SHARE, MIN_CHECK_ROWS, check_rows, paired_confidence,
                                    switch_confidence_cv, switch_confidence_heldout)

#: The AutoGluon hook's default switch_confidence: the bar these tests hold the confidences to.
HOOK_THRESHOLD = 0.9


def _phi(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def test_paired_confidence_by_hand():
    # d = 1, 1, 1, -1: mean 0.5, sample sd 1, n 4 -> z = 0.5 / (1 / 2) = 1
    assert paired_confidence([1.0, 1.0, 1.0, -1.0]) == pytest.approx(_phi(1.0)) == pytest.approx(0.8413447)
    assert paired_confidence([-1.0, -1.0, -1.0, 1.0]) == pytest.approx(1 - _phi(1.0))
    # no spread: the sign of the mean decides, a zero mean is a coin
    assert paired_confidence([0.2, 0.2, 0.2]) == 1.0 and paired_confidence([-0.1, -0.1]) == 0.0
    assert paired_confidence([0.0, 0.0]) == 0.5 and paired_confidence([3.0]) == 1.0


def test_check_rows_by_hand():
    y = np.array([0] * 40 + [1] * 20)
    mask = check_rows(y, "classification", seed=0, min_rows=10)
    assert mask.dtype == bool and mask[y == 0].sum() == 20 and mask[y == 1].sum() == 10  # half of each class
    np.testing.assert_array_equal(mask, check_rows(y, "classification", seed=0, min_rows=10))  # seeded
    assert check_rows(y, "classification", seed=0).sum() == 30  # 30 on each side: the least split
    assert check_rows(y[:58], "classification", seed=0) is None  # 29 check rows: too few to tell
    assert check_rows(np.arange(59.0), "regression", seed=0) is None  # 30 check rows would leave 29 to search
    assert check_rows(np.arange(60.0), "regression", seed=0).sum() == 30
    assert CHECK_SHARE == 0.5 and MIN_CHECK_ROWS == 30


def test_heldout_confidence_by_hand_with_best_single_models():
    # regression, y = 0 on 8 rows, the last 4 the check rows; model 0 (old) predicts 1 everywhere (loss 1 per
    # row); model 1 predicts 0.5 on the fit rows (loss 0.25, so it is the better single model there) and
    # 0, 0, 0, 1.5 on the check rows (losses 0, 0, 0, 2.25): d = 1, 1, 1, -1.25
    y = np.zeros(8)
    check = np.array([False] * 4 + [True] * 4)
    preds = np.array([[1.0] * 8, [0.5] * 4 + [0.0, 0.0, 0.0, 1.5]])
    d = np.array([1.0, 1.0, 1.0, -1.25])
    expected = _phi(d.mean() / (d.std(ddof=1) / 2.0))
    assert switch_confidence_heldout(preds, [0], y, check, "mse", ensemble=False) == pytest.approx(expected)
    assert expected == pytest.approx(0.7817, abs=1e-4)
    # the old pool alone on both sides: nothing to gain
    assert switch_confidence_heldout(preds[:1], [0], y, check, "mse", ensemble=False) == 0.5


def test_the_switch_is_cross_validated():
    """More models always fit the validation rows at least as well; the switch asks whether they help on rows the
    ensemble was not fitted on: noise models added to a good one do not, independent good models do."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)

    def model(accuracy):
        right = rng.random(len(y)) < accuracy
        p1 = np.where(right == (y == 1), accuracy, 1 - accuracy)  # calibrated
        return np.stack([1 - p1, p1], axis=1)

    good = model(0.75)
    noise = [np.stack([1 - p, p], axis=1) for p in rng.random((30, len(y)))]
    assert switch_confidence_cv(np.stack([good] + noise), [0], y, "error") < 0.5
    assert switch_confidence_cv(np.stack([good] + noise), [0], y, "log_loss") < HOOK_THRESHOLD
    independent = [model(0.75) for _ in range(4)]
    assert switch_confidence_cv(np.stack([good] + independent), [0], y, "error") > 0.99
    # a regression pool: a second unbiased model with independent noise halves the variance
    target = rng.normal(size=300)
    values = np.stack([target + rng.normal(size=300), target + rng.normal(size=300)])
    assert switch_confidence_cv(values, [0], target, "mse") > 0.99
    assert switch_confidence_cv(values, [0], target, "mse", ensemble=False) < 0.99  # one model, not both


def test_check_rows_do_not_count_a_searchs_picks_as_skill():
    """A search that keeps the 20 of 1,000 random variants of phase 1's model scoring best on the rows it is steered
    by, on a near-chance target of quake's size: no variant is better, yet cross-validating over the rows the
    picking saw is sometimes sure the larger pool is; the check rows, which the picking never saw, never are."""

    def picked_pools(seed):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 2, 440)
        right = rng.random(len(y)) < 0.58
        p1 = np.where(right == (y == 1), 0.58, 0.42)
        variants = np.clip(p1 + rng.uniform(-0.1, 0.1, (1000, len(y))), 0.01, 0.99)
        variants = np.stack([1 - variants, variants], axis=-1)

        def pool(rows):  # phase 1's model, then the 20 variants with the lowest log loss on ``rows``
            losses = per_example_loss(variants[:, rows], y[rows], "log_loss").mean(axis=1)
            return np.concatenate([np.stack([1 - p1, p1], axis=1)[None], variants[np.argsort(losses)[:20]]])

        check = check_rows(y, "classification", seed=seed)
        return y, check, pool(np.ones(len(y), dtype=bool)), pool(~check)

    old_rule, new_rule = [], []
    for seed in range(12):
        y, check, picked_on_all, picked_on_scored = picked_pools(seed)
        old_rule.append(switch_confidence_cv(picked_on_all, [0], y, "log_loss"))
        new_rule.append(switch_confidence_heldout(picked_on_scored, [0], y, check, "log_loss"))
    assert sum(c >= HOOK_THRESHOLD for c in old_rule) >= 2, old_rule
    assert max(new_rule) < HOOK_THRESHOLD and np.mean(new_rule) < np.mean(old_rule) - 0.2, new_rule

    # the check rows: half of each class, drawn by the seed; too few rows are not split (cross-validation then)
    assert check.sum() == pytest.approx(len(y) / 2, abs=2)
    for c in (0, 1):
        assert check[y == c].sum() == pytest.approx((y == c).sum() / 2, abs=1)
    assert not np.array_equal(check, check_rows(y, "classification", seed=99))
    assert check_rows(y[:50], "classification", seed=0) is None

    # a pool that is really better is still recognised on half the rows
    rng = np.random.default_rng(7)

    def model(accuracy):
        right = rng.random(len(y)) < accuracy
        p = np.where(right == (y == 1), accuracy, 1 - accuracy)
        return np.stack([1 - p, p], axis=1)

    better = np.stack([model(0.58)] + [model(0.62) for _ in range(6)])
    assert switch_confidence_heldout(better, [0], y, check, "error") > 0.99
    with pytest.raises(ValueError, match="check"):
        switch_confidence_heldout(better, [0], y, np.ones(len(y), dtype=bool), "error")
