"""Pairwise diversity: hand examples, naive references, and the OptDivBO decomposition identities and bounds."""

import math

import numpy as np
import pytest

from optdiv.core.diversity import (
    KINDS,
    ZERO_ONE_CE_FLOOR,
    diversity_to_pool,
    higher_is_more_diverse,
    kind_for_metric,
    pairwise_diversity,
)
from optdiv.core.metrics import mean_loss

# Regression hand example: y = (1, 2); f1 perfect, f2 = (2, 2), f3 = (0, 4).
Y_REG = np.array([1.0, 2.0])
F_REG = np.array([[1.0, 2.0], [2.0, 2.0], [0.0, 4.0]])  # errors: (0,0), (-1,0), (1,-2)

# Classification hand example: y = (0, 1); p1 perfect, p2 uniform, p3 always wrong.
Y_CLS = np.array([0, 1])
P_CLS = np.array(
    [
        [[1.0, 0.0], [0.0, 1.0]],
        [[0.5, 0.5], [0.5, 0.5]],
        [[0.0, 1.0], [1.0, 0.0]],
    ]
)
EPS = 1e-15
S2 = math.sqrt(2.0)


def _ce_pair(qi, qj, n_ens):
    return np.mean([math.log(a * b / (a + b) ** 2) for a, b in zip(qi, qj)]) / n_ens


CE_Q = [(1.0, 1.0), (0.5, 0.5), (EPS, EPS)]

HAND = {
    ("mse", "reg"): [[0, 0, 0], [0, 1, -1], [0, -1, 5]],
    ("mae", "reg"): [[0, 0, 0], [0, S2 / 2, S2 / 2], [0, S2 / 2, 1.5 * S2]],
    ("divbo", "reg"): [[0, 0.5, 2.5], [0.5, 0, 4], [2.5, 4, 0]],
    ("brier", "cls"): [[0, 0, 0], [0, 1, 2], [0, 2, 4]],
    ("divbo", "cls"): [[0, 0.5, 1], [0.5, 0, 0.5], [1, 0.5, 0]],
    ("ce", "cls"): [[_ce_pair(CE_Q[i], CE_Q[j], 2) for j in range(3)] for i in range(3)],
}


@pytest.mark.parametrize("kind,task", sorted(HAND))
def test_hand_computed_3x3(kind, task):
    preds, y = (F_REG, Y_REG) if task == "reg" else (P_CLS, Y_CLS)
    got = pairwise_diversity(preds, y, kind, ensemble_size=2)
    np.testing.assert_allclose(got, np.array(HAND[kind, task]), rtol=1e-6, atol=1e-6)  # float32 logs


def test_hand_zero_one_paper_is_black_box_mix():
    got = pairwise_diversity(P_CLS, Y_CLS, "zero_one_paper", ensemble_size=2)
    want = 0.2 * np.array(HAND["ce", "cls"]) + 0.1 * np.array(HAND["brier", "cls"])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_zero_one_floors_the_true_class_probability():
    """Above the floor both forms agree; a row at probability 0 counts as the floor, not as 1e-15."""
    rng = np.random.default_rng(3)
    soft, y = _random_cls(rng, 4, 50, 3)
    soft = 0.5 * soft + 0.5 / 3  # every probability >= 1/6, far above the floor
    np.testing.assert_allclose(pairwise_diversity(soft, y, "zero_one"), pairwise_diversity(soft, y, "zero_one_paper"),
                               rtol=1e-6, atol=1e-9)
    hard = np.eye(3, dtype=np.float32)[(y + 1) % 3][None]  # wrong on every row, with certainty
    both = np.concatenate([soft[:1], hard])
    d = pairwise_diversity(both, y, "zero_one")
    q = soft[0, np.arange(50), y].astype(np.float64)
    ce_floor = np.mean(np.log(q * ZERO_ONE_CE_FLOOR / (q + ZERO_ONE_CE_FLOOR) ** 2)) / 25
    brier = 2 * np.mean(np.sum((np.eye(3)[y] - soft[0]) * (np.eye(3)[y] - hard[0]), axis=1))
    assert d[0, 1] == pytest.approx(0.2 * ce_floor + 0.1 * brier, rel=1e-5)
    assert pairwise_diversity(both, y, "zero_one_paper")[0, 1] < d[0, 1] - 0.1  # the paper's clip: a far larger bonus


def test_bounded_zero_one_prefers_the_calibrated_candidate_over_the_confidently_wrong_one():
    """Against one pool, a hard-label candidate with 37% error must not look better than a calibrated one
    with 20% error; the papers' clip ranks them the other way round."""
    rng = np.random.default_rng(0)
    n = 2000
    y = rng.integers(0, 2, n)

    def calibrated(error_rate):
        right = rng.random(n) >= error_rate
        confidence = rng.uniform(0.55, 0.95, n)
        p_true = np.where(right, confidence, 1.0 - confidence)
        return np.column_stack([np.where(y == 0, p_true, 1 - p_true), np.where(y == 1, p_true, 1 - p_true)])

    pool = np.stack([calibrated(0.15) for _ in range(5)])
    wrong = rng.random(n) < 0.37
    hard_labels = np.where(wrong, 1 - y, y)
    hard = np.eye(2)[hard_labels]
    candidates = np.stack([hard, calibrated(0.20)])
    bounded = diversity_to_pool(candidates, pool, y, "zero_one").mean(1)
    paper = diversity_to_pool(candidates, pool, y, "zero_one_paper").mean(1)
    assert bounded[1] < bounded[0]  # lower = better: the calibrated model wins
    assert paper[0] < paper[1]  # the defect the floor removes


def test_divbo_identical_is_zero_and_disjoint_one_hot_is_one():
    onehot_a = np.eye(3)[[0, 1, 2, 0]]
    onehot_b = np.eye(3)[[1, 2, 0, 2]]  # differs from a on every row
    d = pairwise_diversity(np.stack([onehot_a, onehot_a, onehot_b]), np.array([0, 1, 2, 0]), "divbo")
    assert d[0, 1] == pytest.approx(0.0, abs=1e-12)
    assert d[0, 2] == pytest.approx(1.0, rel=1e-6)
    assert d[1, 2] == pytest.approx(1.0, rel=1e-6)


def _naive(preds, y, kind, n_ens):
    """Direct per-pair formulas from docs/method.md, in float64, one pair at a time."""
    preds = preds.astype(np.float64)
    m = preds.shape[0]
    out = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            a, b = preds[i], preds[j]
            if preds.ndim == 2:
                ea, eb = y - a, y - b
                if kind == "mse":
                    v = 2 * np.mean(ea * eb)
                elif kind == "mae":
                    v = S2 * np.mean(np.sqrt(np.abs(ea * eb)))
                else:
                    v = np.mean((a - b) ** 2)
            else:
                onehot = np.eye(a.shape[1])[y]
                floor = ZERO_ONE_CE_FLOOR if kind == "zero_one" else EPS
                qa = np.clip(a[np.arange(len(y)), y], floor, 1)
                qb = np.clip(b[np.arange(len(y)), y], floor, 1)
                brier = 2 * np.mean(np.sum((onehot - a) * (onehot - b), axis=1))
                ce = np.mean(np.log(qa * qb / (qa + qb) ** 2)) / n_ens
                if kind == "brier":
                    v = brier
                elif kind == "ce":
                    v = ce
                elif kind in ("zero_one", "zero_one_paper"):
                    v = 0.2 * ce + 0.1 * brier
                else:
                    v = S2 / 2 * np.mean(np.linalg.norm(a - b, axis=1))
            out[i, j] = v
    return out


def _random_cls(rng, m, n, k, normalised=True):
    p = rng.dirichlet(np.ones(k), size=(m, n))
    if not normalised:
        p = p * rng.uniform(0.8, 1.0, size=(m, n, 1))
    return p.astype(np.float32), rng.integers(0, k, n)


@pytest.mark.parametrize("kind", ["brier", "ce", "zero_one", "divbo"])
@pytest.mark.parametrize("k,normalised", [(2, True), (2, False), (4, True)])
def test_classification_kinds_match_naive(kind, k, normalised):
    rng = np.random.default_rng(k)
    p, y = _random_cls(rng, 23, 57, k, normalised)
    np.testing.assert_allclose(
        pairwise_diversity(p, y, kind, ensemble_size=7), _naive(p, y, kind, 7), rtol=2e-5, atol=1e-7
    )


@pytest.mark.parametrize("kind", ["mse", "mae", "divbo"])
def test_regression_kinds_match_naive(kind):
    rng = np.random.default_rng(1)
    f = rng.normal(size=(19, 41)).astype(np.float32)
    y = rng.normal(size=41)
    np.testing.assert_allclose(pairwise_diversity(f, y, kind), _naive(f, y, kind, 25), rtol=1e-5, atol=1e-6)


def test_many_tiles_are_assembled_like_one(monkeypatch):
    import optdiv.core.diversity as div

    rng = np.random.default_rng(3)
    p, y = _random_cls(rng, 37, 64, 3)
    whole = pairwise_diversity(p, y, "ce")
    monkeypatch.setattr(div, "_TILE_ELEMENTS", 64 * 3 * 4)  # tiles of 2 x 2 models
    np.testing.assert_allclose(pairwise_diversity(p, y, "ce"), whole, rtol=1e-12)
    np.testing.assert_allclose(pairwise_diversity(p, y, "divbo"), _naive(p, y, "divbo", 25), rtol=2e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_symmetric_and_pool_form_agrees(kind):
    rng = np.random.default_rng(5)
    if kind in ("mse", "mae"):
        preds, y = rng.normal(size=(12, 30)).astype(np.float32), rng.normal(size=30)
    else:
        preds, y = _random_cls(rng, 12, 30, 3)
    full = pairwise_diversity(preds, y, kind)
    np.testing.assert_array_equal(full, full.T)
    cross = diversity_to_pool(preds[:5], preds[5:], y, kind)
    np.testing.assert_allclose(cross, full[:5, 5:], rtol=1e-6, atol=1e-9)


def test_mse_identity_average_of_models():
    rng = np.random.default_rng(7)
    n_models = 9
    f = rng.normal(size=(n_models, 200))
    y = rng.normal(size=200)
    d = pairwise_diversity(f, y, "mse")
    individual = sum(mean_loss(fi, y, "mse") for fi in f)
    upper = d[np.triu_indices(n_models, 1)].sum()
    assert mean_loss(f.mean(0), y, "mse") == pytest.approx((individual + upper) / n_models**2, rel=1e-5)


def test_brier_identity_average_of_models():
    rng = np.random.default_rng(8)
    p, y = _random_cls(rng, 6, 150, 3)
    p = p.astype(np.float64)
    d = pairwise_diversity(p, y, "brier")
    individual = sum(mean_loss(pi, y, "brier") for pi in p)
    upper = d[np.triu_indices(6, 1)].sum()
    assert mean_loss(p.mean(0), y, "brier") == pytest.approx((individual + upper) / 36, rel=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_mae_bound_seed000_eq6(seed):
    rng = np.random.default_rng(seed)
    n_models = int(rng.integers(2, 12))
    f = rng.normal(size=(n_models, 300)) * rng.uniform(0.1, 3)
    y = rng.normal(size=300)
    d = pairwise_diversity(f, y, "mae")
    bound = np.mean([mean_loss(fi, y, "mae") for fi in f]) + d[np.triu_indices(n_models, 1)].sum() / n_models
    assert mean_loss(f.mean(0), y, "mae") <= bound + 1e-9


@pytest.mark.parametrize("seed", range(5))
def test_ce_bound_seed000_eq8(seed):
    rng = np.random.default_rng(seed)
    n_models = int(rng.integers(2, 12))
    p, y = _random_cls(rng, n_models, 300, 3)
    p = p.astype(np.float64)
    d = pairwise_diversity(p, y, "ce", ensemble_size=n_models)
    mean_ce = np.mean([mean_loss(pi, y, "log_loss") for pi in p])
    bound = (
        mean_ce
        + math.log(n_models)
        - math.log(2) / n_models
        + d[np.triu_indices(n_models, 1)].sum() / n_models
    )
    ensemble_ce = mean_loss(p.mean(0), y, "log_loss")
    assert ensemble_ce <= bound + 1e-9
    assert ensemble_ce >= mean_ce - math.log(n_models) - 1e-9  # sanity: the bound's slack is finite


def test_float32_inputs_use_float64_sums():
    rng = np.random.default_rng(11)
    f = (1000.0 + rng.normal(size=(4, 20000))).astype(np.float32)
    y = np.full(20000, 1000.0)
    got = pairwise_diversity(f, y, "mse")
    want = _naive(f, y, "mse", 25)
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize(
    "preds,y,kind,match",
    [
        (np.zeros((2, 3)), np.zeros(3), "ce", "does not apply"),
        (np.zeros((2, 3, 2)), np.zeros(3, int), "mse", "does not apply"),
        (np.zeros((2, 3)), np.zeros(3), "nope", "unknown diversity kind"),
        (np.zeros(3), np.zeros(3), "mse", "predictions must be"),
        (np.zeros((2, 3)), np.zeros(4), "mse", "targets must be"),
        (np.full((2, 3), np.nan), np.zeros(3), "mse", "NaN"),
        (np.full((2, 3, 2), 0.5), np.array([0, 2, 1]), "brier", "class indices"),
    ],
)
def test_bad_input_is_named(preds, y, kind, match):
    with pytest.raises(ValueError, match=match):
        pairwise_diversity(preds, y, kind)


def test_direction_and_metric_mapping():
    assert higher_is_more_diverse("divbo") and not higher_is_more_diverse("mse")
    assert kind_for_metric("mse") == "mse" and kind_for_metric("log_loss") == "ce"
    assert kind_for_metric("balanced_accuracy") == "zero_one"
