"""Pending-aware re-ranking: believer rows, slot-by-slot picks, and what the selector is asked each slot."""

import numpy as np
import pytest

from optdiv.core.pending import pick_with_pending, with_believers
from optdiv.core.selector import DiversityAwareSelector, Selection

# four finished 1-D configurations; two families of (rows,) predictions: 0 near x = 0, 10 near x = 1
FINISHED_X = np.array([[0.0], [0.1], [0.9], [1.0]])
FINISHED_PREDS = np.array([[0.0, 0.0], [0.0, 3.0], [10.0, 10.0], [10.0, 13.0]], dtype=np.float32)


def test_with_believers_appends_the_mean_of_the_three_nearest_finished_predictions():
    rows = with_believers(FINISHED_X, FINISHED_PREDS, [[0.05], [0.97]])
    assert rows.pending == 2 and rows.x.shape == (6, 1) and rows.preds.shape == (6, 2)
    np.testing.assert_array_equal(rows.x[4:], [[0.05], [0.97]])
    # 0.05: nearest 0.0, 0.1 (0.05 each), then 0.9 (0.85) -> mean of rows 0, 1, 2
    np.testing.assert_allclose(rows.preds[4], [10 / 3, 13 / 3], rtol=1e-6)
    # 0.97: nearest 1.0 (0.03), 0.9 (0.07), then 0.1 (0.87) -> mean of rows 3, 2, 1
    np.testing.assert_allclose(rows.preds[5], [20 / 3, 26 / 3], rtol=1e-6)
    np.testing.assert_array_equal(rows.preds[:4], FINISHED_PREDS)
    assert rows.preds.dtype == np.float32


def test_with_believers_keeps_the_finished_dtype_and_arrays_and_takes_given_beliefs():
    as_float64 = with_believers(FINISHED_X, FINISHED_PREDS.astype(np.float64), [[0.05]])
    assert as_float64.preds.dtype == np.float64  # the believer takes the finished precision
    alone = with_believers(FINISHED_X, FINISHED_PREDS)
    assert alone.pending == 0 and alone.preds is FINISHED_PREDS and alone.x is FINISHED_X
    assert with_believers(FINISHED_X, FINISHED_PREDS, np.empty((0, 1))).pending == 0
    given = with_believers(FINISHED_X, FINISHED_PREDS, [[0.05]], pending_preds=np.array([[7.0, 8.0]]))
    np.testing.assert_array_equal(given.preds[4], [7.0, 8.0])  # believed elsewhere: used as given
    with pytest.raises(ValueError, match="every pending configuration"):
        with_believers(FINISHED_X, FINISHED_PREDS, [[0.05], [0.5]], pending_preds=np.zeros((1, 2)))


class ScriptedSelector:
    """Records what each slot fits on and prefers the candidate nearest to ``target`` (ties: rank in order),
    performance acquisition ignored, so the expected picks can be worked out by hand."""

    def __init__(self, target: float):
        self.target = target
        self.fits, self.scores = [], []

    def fit(self, X, P, y, version=None, diversity=None):
        self.fits.append({"X": np.array(X), "P": np.array(P), "version": version, "diversity": diversity})
        return self

    def score(self, C, perf_acq, t=None):
        self.scores.append({"C": np.array(C), "acq": np.array(perf_acq), "t": t})
        scores = np.abs(np.asarray(C)[:, 0] - self.target)
        empty = np.empty(0)
        return Selection(int(np.argmin(scores)), scores, np.arange(1.0, len(C) + 1), None, None, 0.5, empty, empty)


CANDIDATES = np.array([[0.25], [0.75], [0.5], [0.625], [0.375]])  # exact in binary: ties are ties
EI = np.array([5.0, 4.0, 3.0, 2.0, 1.0])


def test_slots_are_picked_one_after_another_with_the_earlier_picks_as_believers():
    selector = ScriptedSelector(target=0.5)
    picks = pick_with_pending(selector, CANDIDATES, EI, FINISHED_X, FINISHED_PREDS, [0.0, 1.0], [[0.05]],
                              slots=3, t=7, version="v1")
    # distances to 0.5: 0.25, 0.25, 0, 0.125, 0.125 -> 0.5 first; then 0.625 and 0.375 tie and the earlier
    # candidate (0.625) wins; then 0.375; the two at 0.25 keep their given order behind them
    assert [p.index for p in picks] == [2, 3, 4]
    assert [p.first for p in picks] == [2, 2, 2]  # positions among each slot's open candidates
    np.testing.assert_array_equal(picks[0].order, [2, 3, 4, 0, 1])
    np.testing.assert_array_equal(picks[1].order, [3, 4, 0, 1])
    np.testing.assert_array_equal(picks[2].order, [4, 0, 1])
    assert [(p.rows, p.believers) for p in picks] == [(5, 1), (6, 2), (7, 3)]
    assert [s["t"] for s in selector.scores] == [7, 8, 9]
    assert [f["version"] for f in selector.fits] == ["v1", None, None]  # later slots' rows differ
    np.testing.assert_array_equal(selector.scores[1]["C"][:, 0], [0.25, 0.75, 0.625, 0.375])  # the pick is gone
    np.testing.assert_array_equal(selector.scores[1]["acq"], [5.0, 4.0, 2.0, 1.0])  # acquisition follows
    last = selector.fits[2]
    np.testing.assert_array_equal(last["X"][:, 0], [0.0, 0.1, 0.9, 1.0, 0.05, 0.5, 0.625])
    # the picks are believed from the finished rows only (not from the pending one at 0.05):
    # 0.5: nearest 0.1 and 0.9 (0.4 each), then 0.0 and 1.0 tie at 0.5 and the earlier (0.0) counts
    np.testing.assert_allclose(last["P"][5], [10 / 3, 13 / 3], rtol=1e-6)
    # 0.625: nearest 0.9 (0.275), 1.0 (0.375), 0.1 (0.525)
    np.testing.assert_allclose(last["P"][6], [20 / 3, 26 / 3], rtol=1e-6)
    np.testing.assert_allclose(last["P"][4], [10 / 3, 13 / 3], rtol=1e-6)  # the pending one, as in slot 0


def test_fewer_picks_when_the_candidates_run_out_and_the_rest_follow_the_last_order():
    selector = ScriptedSelector(target=1.0)
    picks = pick_with_pending(selector, CANDIDATES[:2], EI[:2], FINISHED_X, FINISHED_PREDS, [0.0, 1.0], slots=4)
    assert [p.index for p in picks] == [1, 0] and [p.believers for p in picks] == [0, 1]
    assert picks[-1].order[1:].size == 0
    assert [s["t"] for s in selector.scores] == [None, None]  # None: the selector's own default per slot


def test_without_pending_one_slot_is_the_selectors_own_choice_on_the_finished_rows():
    rng = np.random.default_rng(0)
    X = rng.random((12, 3))
    y = rng.integers(0, 2, 80)
    p1 = np.clip(y[None, :] * 0.6 + 0.2 + rng.normal(0, 0.25, (12, 80)), 0.01, 0.99)
    P = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
    C, ei = rng.random((300, 3)), rng.random(300)
    expected = DiversityAwareSelector(seed=3, fixed_weight=5.0).select(C, ei, X, P, y, t=40)
    (pick,) = pick_with_pending(DiversityAwareSelector(seed=3, fixed_weight=5.0), C, ei, X, P, y, t=40)
    assert pick.index == expected.index == pick.first
    np.testing.assert_array_equal(pick.selection.scores, expected.scores)
    np.testing.assert_array_equal(pick.order, np.argsort(expected.scores, kind="stable"))
    assert pick.index != int(np.argmax(ei))  # the diversity weight of 5 moved the pick off EI's best


def test_a_pending_configuration_enters_the_real_selector_as_a_believer():
    rng = np.random.default_rng(1)
    X = rng.random((10, 2))
    y = rng.integers(0, 2, 60)
    p1 = np.clip(0.5 + (y[None, :] - 0.5) * X[:, :1] + rng.normal(0, 0.1, (10, 60)), 0.01, 0.99)
    P = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
    C, ei = rng.random((200, 2)), rng.random(200)
    running = np.array([[0.5, 0.5]])
    selector = DiversityAwareSelector(seed=1, fixed_weight=1.0)
    (pick,) = pick_with_pending(selector, C, ei, X, P, y, running, version=("run", 10))
    rows = with_believers(X, P, running)
    np.testing.assert_array_equal(selector.observations_, rows.x)
    by_hand = DiversityAwareSelector(seed=1, fixed_weight=1.0).select(C, ei, rows.x, rows.preds, y)
    np.testing.assert_array_equal(pick.selection.scores, by_hand.scores)
    assert (pick.rows, pick.believers) == (11, 1)


def test_a_precomputed_diversity_goes_to_the_first_slot_only():
    selector = ScriptedSelector(target=0.5)
    marker = np.zeros((4, 4))
    pick_with_pending(selector, CANDIDATES, EI, FINISHED_X, FINISHED_PREDS, [0.0, 1.0], diversity=marker)
    assert selector.fits[0]["diversity"] is marker
    with pytest.raises(ValueError, match="one slot"):
        pick_with_pending(selector, CANDIDATES, EI, FINISHED_X, FINISHED_PREDS, [0.0, 1.0], slots=2, diversity=marker)

