"""Weight schedules, ranks and both diversity acquisitions on hand-sized arrays."""

import math

import numpy as np
import pytest

from optdiv.core.acquisition import (
    combine,
    divbo_acquisition,
    divbo_weight,
    optdivbo_acquisition,
    optdivbo_weight,
    ranks,
)


@pytest.mark.parametrize("t,want", [(0, 0.0), (5, 0.011553), (10, 0.019040), (20, 0.024101)])
def test_divbo_weight_hand_values(t, want):
    assert divbo_weight(t) == pytest.approx(want, abs=5e-7)


def test_divbo_weight_saturates_at_half_beta():
    assert divbo_weight(1e6) == pytest.approx(0.025)
    assert divbo_weight(1e6, beta=0.2) == pytest.approx(0.1)
    assert divbo_weight(30) < 0.025


def test_optdivbo_weight_hand_values():
    assert optdivbo_weight(0) == 0.0
    assert optdivbo_weight(np.inf) == 1.0
    assert optdivbo_weight(10) == pytest.approx(math.tanh(1.0))  # 2 (sigmoid(x) - 1/2) = tanh(x / 2)
    assert optdivbo_weight(5, tau=0.4) == pytest.approx(math.tanh(1.0))


def test_weights_accept_arrays():
    out = divbo_weight(np.array([0, 5, 10]))
    np.testing.assert_allclose(out, [0.0, 0.011553, 0.019040], atol=5e-7)
    assert np.all(np.diff(optdivbo_weight(np.arange(50))) > 0)
    assert isinstance(optdivbo_weight(3), float)


def test_ranks_best_is_one_and_ties_share_the_average():
    np.testing.assert_array_equal(ranks([3.0, 1.0, 2.0], higher_is_better=True), [1, 3, 2])
    np.testing.assert_array_equal(ranks([3.0, 1.0, 2.0], higher_is_better=False), [3, 1, 2])
    np.testing.assert_array_equal(ranks([1.0, 2.0, 2.0, 3.0], higher_is_better=False), [1, 2.5, 2.5, 4])
    np.testing.assert_array_equal(ranks([5.0, 5.0, 1.0], higher_is_better=True), [1.5, 1.5, 3])
    np.testing.assert_array_equal(ranks([-np.inf, 0.0], higher_is_better=True), [2, 1])


def test_ranks_reject_nan_and_matrices():
    with pytest.raises(ValueError, match="NaN"):
        ranks([1.0, np.nan], higher_is_better=True)
    with pytest.raises(ValueError, match="vector"):
        ranks(np.ones((2, 2)), higher_is_better=True)


def test_divbo_acquisition_hand_example():
    # 2 draws x 2 candidates x 3 pool members
    samples = np.array(
        [
            [[0.5, 0.2, 0.9], [0.1, 0.4, 0.3]],
            [[0.6, 0.4, 0.8], [0.3, 0.2, 0.7]],
        ]
    )
    # closest member (min) per draw: cand 0 -> 0.2, 0.4; cand 1 -> 0.1, 0.2
    np.testing.assert_allclose(divbo_acquisition(samples), [0.3, 0.15])
    # a smaller-is-better kind: the closest member is the maximum: cand 0 -> 0.9, 0.8; cand 1 -> 0.4, 0.7
    np.testing.assert_allclose(divbo_acquisition(samples, higher_is_more_diverse=False), [0.85, 0.55])


def test_divbo_acquisition_duplicate_of_a_pool_member_is_least_diverse():
    samples = np.array([[[0.0, 0.7], [0.5, 0.6]]])  # candidate 0 duplicates member 0
    div = divbo_acquisition(samples)
    assert div[0] == 0.0
    np.testing.assert_array_equal(ranks(div, higher_is_better=True), [2, 1])


def test_optdivbo_acquisition_hand_example():
    # K=2 members, 2 candidates, 2 pool members with multiplicities 2 and 1
    member_preds = np.array(
        [
            [[1.0, 2.0], [0.0, 1.0]],
            [[3.0, 0.0], [1.0, 1.0]],
        ]
    )
    weights = np.array([2.0, 1.0])
    # a_k(cand 0) = 4, 6 -> mu 5, sigma 1 ; a_k(cand 1) = 1, 3 -> mu 2, sigma 1
    np.testing.assert_allclose(optdivbo_acquisition(member_preds, weights), [4.0, 1.0])
    np.testing.assert_allclose(optdivbo_acquisition(member_preds, weights, kappa=2.0), [3.0, 0.0])
    np.testing.assert_allclose(optdivbo_acquisition(member_preds, weights, higher_is_more_diverse=True), [6.0, 3.0])


def test_optdivbo_acquisition_kappa_rewards_uncertainty():
    # same mean, different spread across members: the optimistic lower bound prefers the uncertain one
    member_preds = np.array([[[1.0], [0.0]], [[1.0], [2.0]]])
    div = optdivbo_acquisition(member_preds, np.ones(1), kappa=1.0)
    np.testing.assert_allclose(div, [1.0, 0.0])
    np.testing.assert_array_equal(ranks(div, higher_is_better=False), [2, 1])


def test_acquisition_shape_errors():
    with pytest.raises(ValueError, match="draws, candidates, pool members"):
        divbo_acquisition(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="one weight per pool member"):
        optdivbo_acquisition(np.zeros((2, 3, 4)), np.ones(3))
    with pytest.raises(ValueError, match="members, candidates, pool members"):
        optdivbo_acquisition(np.zeros((3, 4)), np.ones(4))


def test_combine_lowest_wins():
    perf = np.array([1.0, 2.0, 3.0])
    div = np.array([3.0, 1.0, 2.0])
    np.testing.assert_allclose(combine(perf, div, 0.0), perf)
    np.testing.assert_allclose(combine(perf, div, 0.5), [2.5, 2.5, 4.0])
    np.testing.assert_allclose(combine(perf, div, 0.9), [3.7, 2.9, 4.8])
    assert int(np.argmin(combine(perf, div, 0.9))) == 1
