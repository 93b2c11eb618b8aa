"""DiversityAwareSelector: the performance-only limit, diversity flips, refits, determinism and errors."""

import numpy as np
import pytest

from optdiv.core import selector as selector_module
from optdiv.core.acquisition import divbo_acquisition, divbo_weight, optdivbo_acquisition, optdivbo_weight
from optdiv.core.selector import DiversityAwareSelector, pool_loss
from optdiv.core.surrogates import DiversitySurrogate


def _classification(rng, t=30, d=6, n=300):
    X = rng.random((t, d))
    X[rng.random((t, d)) < 0.2] = -1.0
    y = rng.integers(0, 2, n)
    logit = rng.uniform(0.3, 2.0, (t, 1)) * np.where(y == 1, 1.0, -1.0) + rng.normal(0, 1.2, (t, n))
    p1 = 1.0 / (1.0 + np.exp(-logit))
    return X, np.stack([1 - p1, p1], axis=-1), y


def _candidates(rng, c=200, d=6):
    C = rng.random((c, d))
    C[rng.random((c, d)) < 0.2] = -1.0
    return C


@pytest.mark.parametrize("method", ["optdivbo", "divbo"])
def test_zero_weight_is_argmax_of_performance(method):
    rng = np.random.default_rng(0)
    X, P, y = _classification(rng)
    C = _candidates(rng)
    ei = rng.random(200)
    sel = DiversityAwareSelector(method=method).fit(X, P, y)
    choice = sel.score(C, ei, t=0)
    assert choice.weight == 0.0 and choice.index == int(np.argmax(ei))
    assert choice.div_rank is None and choice.div_acquisition is None
    ei[[3, 7]] = ei.max() + 1.0  # ties: the lowest index wins, as np.argmax
    assert sel.score(C, ei, t=0).index == 3
    if method == "divbo":
        no_beta = DiversityAwareSelector(method="divbo", beta=0.0).fit(X, P, y).score(C, ei)
        assert no_beta.index == 3


def test_one_observation_has_no_diversity_term():
    rng = np.random.default_rng(1)
    X, P, y = _classification(rng, t=1)
    C = _candidates(rng)
    ei = rng.random(200)
    sel = DiversityAwareSelector().fit(X, P, y)
    assert sel.surrogate_ is None
    choice = sel.score(C, ei, t=100)
    assert choice.index == int(np.argmax(ei)) and choice.div_rank is None
    np.testing.assert_array_equal(choice.pool_indices, [0])
    assert choice.pool_weights.sum() == 25


def test_divbo_diversity_flips_the_choice_once_t_is_large():
    # 1-D configurations whose class-1 probability is the configuration itself: divbo diversity
    # |x_i - x_j|; every row is class 1, so the Brier pool is 25 copies of the largest x
    rng = np.random.default_rng(2)
    x = np.concatenate([[0.98], rng.random(29)])[:, None]
    p1 = np.repeat(x, 50, axis=1)
    P = np.stack([1 - p1, p1], axis=-1)
    y = np.ones(50, dtype=int)
    C = np.concatenate([[[0.99], [0.0]], 0.9 + 0.1 * rng.random((98, 1))])
    ei = np.concatenate([[1.0, 0.99], 0.5 * rng.random(98)])
    sel = DiversityAwareSelector(method="divbo", metric="brier", seed=0).fit(x, P, y)
    np.testing.assert_array_equal(sel.pool_.indices, [0])
    assert sel.score(C, ei, t=0).index == 0
    late = sel.score(C, ei, t=100)
    assert late.weight == pytest.approx(0.025)
    assert late.div_rank[1] == 1.0 and late.div_rank[0] > 50  # the far candidate is the most diverse
    assert late.index == 1


def test_optdivbo_diversity_flips_the_choice_once_t_is_large():
    # regression errors e_i = (0.1 + x_i) v: the MSE pool is 25 copies of the smallest x, and the
    # mse term 2 mean(e_i e_j) = 2 (0.1 + x_i)(0.1 + x_j) is smallest (best) for the smallest x
    rng = np.random.default_rng(3)
    x = np.concatenate([[0.01], 0.05 + 0.95 * rng.random(29)])[:, None]
    v = rng.choice([-1.0, 1.0], 60)
    y = rng.normal(size=60)
    preds = y[None, :] - (0.1 + x) * v[None, :]
    C = np.concatenate([[[1.0], [0.0]], 0.8 + 0.2 * rng.random((8, 1))])
    ei = np.concatenate([[1.0, 0.99], 0.5 * rng.random(8)])
    sel = DiversityAwareSelector(method="optdivbo", metric="mse", seed=0).fit(x, preds, y)
    assert sel.kind == "mse"
    np.testing.assert_array_equal(sel.pool_.indices, [0])
    assert sel.score(C, ei, t=0).index == 0
    late = sel.score(C, ei, t=50)
    assert late.weight == pytest.approx(optdivbo_weight(50))
    assert late.div_rank[1] == 1.0
    assert late.index == 1


@pytest.mark.parametrize("method", ["optdivbo", "divbo"])
def test_selection_is_consistent(method):
    rng = np.random.default_rng(4)
    X, P, y = _classification(rng)
    C = _candidates(rng)
    ei = rng.random(200)
    choice = DiversityAwareSelector(method=method).select(C, ei, X, P, y)
    w = divbo_weight(30) if method == "divbo" else optdivbo_weight(30)
    assert choice.weight == pytest.approx(w)
    np.testing.assert_allclose(choice.scores, choice.perf_rank + w * choice.div_rank)
    assert choice.index == int(np.argmin(choice.scores))
    assert choice.pool_weights.sum() == 25
    assert sorted(choice.perf_rank) == list(range(1, 201))  # no ties in random EI
    best_div = np.argmin(choice.div_rank)
    if method == "divbo":  # larger is more diverse
        assert choice.div_acquisition[best_div] == choice.div_acquisition.max()
    else:  # the default kind for "error" is the black-box mix, smaller is better
        assert choice.div_acquisition[best_div] == choice.div_acquisition.min()


def test_acquisitions_are_wired_to_the_pool_and_the_surrogate():
    rng = np.random.default_rng(9)
    X, P, y = _classification(rng)
    C, ei = _candidates(rng), rng.random(200)
    opt = DiversityAwareSelector(method="optdivbo", kappa=0.5, seed=2).fit(X, P, y)
    members = X[opt.pool_.indices]
    want = optdivbo_acquisition(opt.surrogate_.member_predictions(C, members), opt.pool_.weights, kappa=0.5)
    np.testing.assert_allclose(opt.score(C, ei).div_acquisition, want)

    div = DiversityAwareSelector(method="divbo", n_samples=7, seed=2).fit(X, P, y)
    mean, std = div.surrogate_.predict(C, X[div.pool_.indices])
    draws = mean + std * np.random.default_rng([2, 30]).standard_normal((7,) + mean.shape)  # documented seeding
    got = div.score(C, ei)
    np.testing.assert_allclose(got.div_acquisition, divbo_acquisition(draws))
    np.testing.assert_array_equal(div.score(C, ei).div_acquisition, got.div_acquisition)  # repeatable


def test_agnostic_bayes_pool_and_a_lower_is_better_kind_for_divbo():
    rng = np.random.default_rng(5)
    X, P, y = _classification(rng)
    choice = DiversityAwareSelector(method="divbo", kind="brier", pool_builder="agnostic_bayes").select(
        _candidates(rng), rng.random(200), X, P, y
    )
    assert choice.pool_weights.sum() == pytest.approx(25.0)
    best_div = np.argmin(choice.div_rank)
    assert choice.div_acquisition[best_div] == choice.div_acquisition.min()


def test_refit_is_skipped_on_identical_data(monkeypatch):
    fits = []
    real_fit = DiversitySurrogate.fit

    def counting_fit(self, X, D):
        fits.append(X.shape[0])
        return real_fit(self, X, D)

    monkeypatch.setattr(selector_module.DiversitySurrogate, "fit", counting_fit)
    rng = np.random.default_rng(6)
    X, P, y = _classification(rng)
    C, ei = _candidates(rng), rng.random(200)
    sel = DiversityAwareSelector()
    first = sel.select(C, ei, X, P, y)
    second = sel.select(C, ei, X.copy(), P.copy(), y.copy())  # equal content, new arrays
    assert fits == [30]
    np.testing.assert_array_equal(first.scores, second.scores)
    sel.select(C, ei, X[:20], P[:20], y)  # changed data: refit
    assert fits == [30, 20]
    P2 = P.copy()
    P2[0, 0] = P2[0, 0][::-1]
    sel.select(C, ei, X[:20], P2[:20], y)  # same shapes, different predictions: refit
    assert fits == [30, 20, 20]
    sel.fit(X, P, y, version=7)
    sel.fit(X[:10], P[:10], y, version=7)  # an explicit version is trusted
    assert fits == [30, 20, 20, 30]


@pytest.mark.parametrize("method", ["optdivbo", "divbo"])
def test_deterministic_with_a_seed(method):
    rng = np.random.default_rng(7)
    X, P, y = _classification(rng)
    C, ei = _candidates(rng), rng.random(200)
    a = DiversityAwareSelector(method=method, seed=3).select(C, ei, X, P, y)
    b = DiversityAwareSelector(method=method, seed=3).select(C, ei, X, P, y)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.div_acquisition, b.div_acquisition)
    assert a.index == b.index
    c = DiversityAwareSelector(method=method, seed=4).select(C, ei, X, P, y)
    assert not np.array_equal(a.div_acquisition, c.div_acquisition)


def test_rank_diversity_target_reaches_the_surrogate_and_changes_only_the_diversity_scale():
    rng = np.random.default_rng(9)
    X, P, y = _classification(rng)
    C, ei = _candidates(rng), rng.random(200)
    raw = DiversityAwareSelector(seed=3).select(C, ei, X, P, y)
    ranked_selector = DiversityAwareSelector(seed=3, diversity_target="rank")
    ranked = ranked_selector.select(C, ei, X, P, y)
    assert ranked_selector.surrogate_.target == "rank"
    np.testing.assert_array_equal(ranked.perf_rank, raw.perf_rank)
    assert not np.array_equal(ranked.div_acquisition, raw.div_acquisition)
    # the multiplicity-weighted sum of (0, 1) ranks, minus kappa * spread, stays below the pool's size
    assert np.all(ranked.div_acquisition < ranked.pool_weights.sum()) and ranked.pool_weights.sum() == 25
    with pytest.raises(ValueError, match="unknown diversity target"):
        DiversityAwareSelector(diversity_target="quantile")


def test_default_kinds_and_pool_losses():
    assert DiversityAwareSelector(method="divbo", metric="mse").kind == "divbo"
    assert DiversityAwareSelector(metric="error").kind == "zero_one"
    assert DiversityAwareSelector(metric="log_loss").kind == "ce"
    assert DiversityAwareSelector(metric="rmse").kind == "mse"
    assert DiversityAwareSelector(metric="balanced_accuracy").kind == "zero_one"
    assert DiversityAwareSelector(metric="error", paper_clip=True).kind == "zero_one_paper"
    assert DiversityAwareSelector(metric="mse", paper_clip=True).kind == "mse"  # regression has no clip
    assert DiversityAwareSelector(metric="log_loss", paper_clip=True).kind == "ce"
    assert pool_loss("log_loss", True) == "log_loss"
    assert pool_loss("brier", True) == "brier"
    assert pool_loss("roc_auc", True) == "error"
    assert pool_loss("rmse", False) == "mse"
    assert pool_loss("mae", False) == "mae"
    with pytest.raises(ValueError, match="regression metric"):
        pool_loss("mse", True)
    assert pool_loss("r2", False) == "mse" and pool_loss("median_absolute_error", False) == "mae"
    assert pool_loss("pearsonr", False) == "mse"  # a host's black-box regression metric: the fallback
    with pytest.raises(ValueError, match="does not fit a regression task"):
        pool_loss("accuracy", False)


def test_unknown_regression_metric_names_the_kind_it_needs():
    X, P, y = np.random.default_rng(0).random((4, 2)), np.random.default_rng(1).random((4, 10)), np.zeros(10)
    with pytest.raises(ValueError, match="not a name optdiv knows"):
        DiversityAwareSelector(metric="my_score").fit(X, P.astype(np.float32), y)
    assert DiversityAwareSelector(metric="my_score", kind="mse").fit(X, P.astype(np.float32), y).kind == "mse"


def test_clear_errors():
    rng = np.random.default_rng(8)
    X, P, y = _classification(rng, t=10)
    with pytest.raises(ValueError, match="unknown method"):
        DiversityAwareSelector(method="bo")
    with pytest.raises(ValueError, match="unknown diversity kind"):
        DiversityAwareSelector(kind="cosine")
    with pytest.raises(ValueError, match="pool builder"):
        DiversityAwareSelector(pool_builder="stacking")
    with pytest.raises(ValueError, match="non-negative"):
        DiversityAwareSelector(seed=-1)
    sel = DiversityAwareSelector()
    with pytest.raises(RuntimeError, match="not fitted"):
        sel.score(_candidates(rng), rng.random(200))
    with pytest.raises(ValueError, match="every observation"):
        sel.fit(X[:9], P, y)
    with pytest.raises(ValueError, match="targets"):
        sel.fit(X, P, y[:-1])
    with pytest.raises(ValueError, match="observations"):
        sel.fit(X[0], P[:1], y)
    with pytest.raises(ValueError, match="does not apply to classification"):
        DiversityAwareSelector(kind="mse").fit(X, P, y)
    with pytest.raises(ValueError, match="regression metric"):
        DiversityAwareSelector(metric="mse", kind="brier").fit(X, P, y)
    sel.fit(X, P, y)
    with pytest.raises(ValueError, match=r"\(count, 6\)"):
        sel.score(rng.random((5, 4)), rng.random(5))
    with pytest.raises(ValueError, match="one performance acquisition value per candidate"):
        sel.score(rng.random((5, 6)), rng.random(4))
    with pytest.raises(ValueError, match="NaN"):
        sel.score(np.full((2, 6), np.nan), rng.random(2))


def _balanced_error(y_true, y_pred):
    """1 - balanced accuracy of probabilities: a black-box metric (not a mean of per-example losses)."""
    label = np.argmax(y_pred, axis=-1)
    recalls = [np.mean(label[y_true == c] == c) for c in np.unique(y_true)]
    return 1.0 - float(np.mean(recalls))


def _majority_and_minority_models(rng, n=400):
    """Models 0-4 share one confident decision that misses most minority rows (low 0/1 error, poor balanced
    error); models 5-9 share one hesitant decision that finds every minority row at the price of false alarms
    (higher 0/1 error, lower balanced error). Each model flips a few rows of its group's decision."""
    y = (rng.random(n) < 0.2).astype(np.int64)
    majority = (y == 1) & (rng.random(n) < 0.3)
    minority = (y == 1) | (rng.random(n) < 0.3)
    preds = []
    for m in range(10):
        base, sure = (majority, 0.95) if m < 5 else (minority, 0.65)
        say_one = base ^ (rng.random(n) < 0.03)
        preds.append(np.stack([np.where(say_one, 1 - sure, sure), np.where(say_one, sure, 1 - sure)], axis=-1))
    return rng.random((10, 3)), np.array(preds, dtype=np.float32), y


def _ensemble(P, pool):
    return np.tensordot(pool.weights, P[pool.indices].astype(np.float64), axes=1) / pool.weights.sum()


def test_pool_follows_a_black_box_scorer():
    rng = np.random.default_rng(21)
    X, P, y = _majority_and_minority_models(rng)
    by_error = DiversityAwareSelector(metric="balanced_accuracy", seed=1).fit(X, P, y)
    by_scorer = DiversityAwareSelector(metric="balanced_accuracy", seed=1, pool_scorer=_balanced_error).fit(X, P, y)
    assert by_error.kind == by_scorer.kind == "zero_one"  # the diversity stays the metric's black-box mix

    def minority_weight(pool):
        return float(pool.weights[pool.indices >= 5].sum())

    assert minority_weight(by_scorer.pool_) >= minority_weight(by_error.pool_) + 5  # of 25 rounds
    error_ens, scorer_ens = _ensemble(P, by_error.pool_), _ensemble(P, by_scorer.pool_)
    assert _balanced_error(y, scorer_ens) < _balanced_error(y, error_ens) - 0.1
    assert np.mean(scorer_ens.argmax(-1) != y) > np.mean(error_ens.argmax(-1) != y)


def test_scorer_pool_is_chosen_among_the_best_models_by_their_own_loss():
    # regression; model 3 is the worst alone but cancels the others' bias, so an unrestricted pool takes it
    y = np.zeros(4)
    P = np.array([[0.5] * 4, [0.55] * 4, [0.6] * 4, [-1.2] * 4], dtype=np.float32)
    X = np.random.default_rng(0).random((4, 2))
    calls = []

    def mse(y_true, y_pred):
        calls.append(1)
        return float(np.mean((y_pred - y_true) ** 2))

    everything = DiversityAwareSelector(metric="mse", ensemble_size=5, pool_scorer=mse).fit(X, P, y)
    assert 3 in everything.pool_.indices
    assert len(calls) == 5 * 4  # m < pool_nbest: no ranking calls, one call per model and round
    calls.clear()
    best3 = DiversityAwareSelector(metric="mse", ensemble_size=5, pool_scorer=mse, pool_nbest=3).fit(X, P, y)
    assert set(best3.pool_.indices.tolist()) <= {0, 1, 2}
    assert len(calls) == 4 + 5 * 3  # each model's own loss once, then three candidates per round
    named = DiversityAwareSelector(metric="mse", ensemble_size=5, pool_nbest=3).fit(X, P, y)
    assert 3 in named.pool_.indices  # a named loss never restricts: the engine's pools are unchanged


def test_scorer_is_refused_where_it_cannot_work():
    with pytest.raises(ValueError, match="caruana"):
        DiversityAwareSelector(pool_scorer=_balanced_error, pool_builder="agnostic_bayes")
    with pytest.raises(ValueError, match="callable"):
        DiversityAwareSelector(pool_scorer="roc_auc")
    with pytest.raises(ValueError, match="pool_nbest"):
        DiversityAwareSelector(pool_scorer=_balanced_error, pool_nbest=0)
