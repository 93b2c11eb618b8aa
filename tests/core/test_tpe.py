"""The Parzen ratio prefers candidates near the good observations and handles inactive values."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.core.tpe import ParzenRatio


def test_candidates_near_the_good_region_score_higher():
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    losses = (X[:, 0] - 0.2) ** 2 + 0.1 * rng.random(60)  # good near x0 = 0.2
    tpe = ParzenRatio().fit(X, losses)
    near, far = np.array([[0.2, 0.5]]), np.array([[0.9, 0.5]])
    assert tpe.score(near)[0] > tpe.score(far)[0]


def test_inactive_values_are_scored_by_how_often_good_runs_had_them():
    X = np.array([[-1.0, 0.5]] * 10 + [[0.5, 0.5]] * 10)
    losses = np.array([0.1] * 10 + [0.9] * 10)  # the inactive ones were good
    tpe = ParzenRatio(gamma=0.5).fit(X, losses)
    assert tpe.score(np.array([[-1.0, 0.5]]))[0] > tpe.score(np.array([[0.5, 0.5]]))[0]


def test_bad_input():
    with pytest.raises(ValueError):
        ParzenRatio(gamma=1.5)
    with pytest.raises(ValueError):
        ParzenRatio().fit(np.zeros((1, 2)), np.zeros(1))
