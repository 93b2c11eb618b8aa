"""The final selection's guard: a log-loss selection is replaced by the selection on 0/1 error only when that one's
ensemble is clearly better on the validation rows, by the paired per-row statistic."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from optdiv.final.choice import choose_members, guarded_choice


def _runs(preds):
    return [SimpleNamespace(status="ok", val_pred=p, val_loss=0.0) for p in preds]


def _confident_but_wrong(n=400, seed=0):
    """Model 0: right on every row, but only just (0.55); model 1: very sure, wrong on a tenth of the rows. Log loss
    prefers model 1 (its wrong rows cost less than model 0's doubt on every row); 0/1 error prefers model 0."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    cautious = np.where(y[:, None] == np.arange(2), 0.55, 0.45)
    sure = np.where(y[:, None] == np.arange(2), 0.97, 0.03)
    wrong = rng.random(n) < 0.10
    sure[wrong] = sure[wrong][:, ::-1]
    return np.stack([cautious, sure]), y


def test_the_guard_keeps_the_own_metric_selection_when_the_log_loss_one_is_clearly_worse():
    preds, y = _confident_but_wrong()
    picked, weights = choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=5)
    assert 1 in picked and _error(preds[picked], weights, y) > 0.05  # the trap: log loss keeps the sure member
    info = {}
    picked, weights = choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=5, guard=1.645,
                                     info=info)
    assert picked == [0] and weights.tolist() == [1.0]
    assert info["guard"]["kept"] == "own" and info["guard"]["z"] > 5  # dozens of errors against none
    # a threshold above the statistic keeps the log-loss selection
    info = {}
    picked, _ = choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=5,
                               guard=info_z(preds, y) + 0.1, info=info)
    assert 1 in picked and info["guard"]["kept"] == "smooth"


def _error(member_preds, weights, y):
    return float(np.mean(np.argmax(np.tensordot(weights, member_preds, axes=1), axis=1) != y))


def info_z(preds, y):
    info = {}
    choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=5, guard=0.0, info=info)
    return info["guard"]["z"]


def test_the_guard_leaves_a_log_loss_selection_that_is_not_worse():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 300)
    preds = rng.dirichlet(np.ones(3), size=(6, 300))
    preds[:, np.arange(300), y] += 0.6  # every model mostly right
    preds /= preds.sum(-1, keepdims=True)
    plain = choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=10)
    info = {}
    guarded = choose_members(_runs(preds), y, "error", selection_loss="log_loss", size=10, guard=1.645, info=info)
    assert info["guard"]["kept"] == "smooth" and info["guard"]["z"] <= 1.645
    assert guarded[0] == plain[0]
    np.testing.assert_allclose(guarded[1], plain[1])


def test_no_guard_without_a_second_loss():
    preds, y = _confident_but_wrong()
    info = {}
    choose_members(_runs(preds), y, "error", size=5, guard=1.645, info=info)  # selects on 0/1 error already
    assert "guard" not in info


@pytest.mark.parametrize("z", [0.0, 1.0, 3.0])
def test_guarded_choice_is_a_paired_z_on_the_metric(z):
    preds, y = _confident_but_wrong(n=200, seed=3)
    smooth, own = np.array([0.0, 1.0]), np.array([1.0, 0.0])
    weights, verdict = guarded_choice(preds, y, "error", smooth, own, z)
    difference = (np.argmax(preds[1], 1) != y).astype(float) - (np.argmax(preds[0], 1) != y).astype(float)
    expected = difference.mean() / (difference.std(ddof=1) / np.sqrt(len(y)))
    assert verdict["z"] == pytest.approx(expected, abs=1e-3)
    assert (weights is own) == (expected > z)
