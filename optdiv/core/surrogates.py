"""Surrogates of the search: LightGBM members over configuration pairs, and a random forest over loss.

Both use ``lightgbm.train`` directly (its scikit-learn wrapper would pull in scikit-learn) with fixed
seeds, ``deterministic=True`` and a fixed thread count, so one seed gives one model on every machine.
Small-data settings (``min_data_in_bin=1``, a minimum leaf size that shrinks with the data) keep
the trees from being constant on the few observations of an early search.
"""

from __future__ import annotations

import math
import os
from typing import List, Optional, Tuple

import lightgbm as lgb
import numpy as np
from scipy.stats import norm, rankdata

#: Pair rows built per prediction chunk: ~100 MB of float32 features at 200 columns, bounded memory.
PREDICT_CHUNK_ROWS = 1 << 17

#: Threads for the diversity surrogate's prediction: one large row-parallel call per chunk, where a
#: second thread pays off (training stays single-threaded; see DIVERSITY_PARAMS). Rows are predicted
#: independently, so the result does not depend on it.
PREDICT_THREADS = min(2, os.cpu_count() or 1)

#: Bootstrap redraws allowed before a member falls back to every pair (only tiny t can need them).
MAX_BOOTSTRAP_DRAWS = 100

_LIGHTGBM_MAJOR = int(lgb.__version__.split(".")[0])

#: Diversity members: few depth-4 trees on half the features, because the fit and the prediction over
#: ~5,000 candidates x 25 pool members run at every suggestion (speed target in the benchmark); the
#: depth cap bounds prediction cost (leaf-wise trees grow deep) and, on breast_cancer, 8 rounds of
#: 15 leaves at depth 4 ranked held-out pairs better (tau 0.40 / 0.55 for divbo / zero_one) than
#: 10 rounds of 7 unbounded leaves (0.37 / 0.52) at about the same prediction cost. One
#: thread: OpenMP threads competing for few cores (the evaluator runs beside the search) made small
#: fits 10-20x slower in our measurements, and one thread is deterministic everywhere.
DIVERSITY_PARAMS = {
    "learning_rate": 0.4,
    "num_leaves": 15,
    "max_depth": 4,
    "feature_fraction": 0.5,
    "lambda_l2": 1e-3,
    "min_data_in_leaf": 1,
    "max_bin": 63,
    "min_data_in_bin": 1,
    "bin_construct_sample_cnt": 1000,
    "feature_pre_filter": False,
    "force_col_wise": True,
    "deterministic": True,
    "num_threads": 1,
    "verbose": -1,
}

#: LightGBM's row bagging misbehaves on a handful of rows (empty bags with garbage or NaN leaves, every
#: tree drawing the same bag), so fewer observations are tiled up to this many rows; ``min_data_in_leaf``
#: is scaled by about the copies of one observation that land in a bag.
MIN_FOREST_ROWS = 32

#: Random-forest mode: subsampled rows and features make the trees differ, which is the variance.
#: Features are sampled per split (as in Breiman's and SMAC's forests), not per tree: LightGBM's per-tree
#: draws repeat across trees (seed 3 on a 3-feature problem left the one informative feature out of 38
#: of 50 trees, and the held-out rank correlation swung from 0.53 to 0.92 with the seed).
#: 31 bins and 32 leaves: ~0.09 s for 50 trees on 250 x 100 (255 bins / 64 leaves took 0.57 s for the
#: same held-out rank correlation). One thread, as for the diversity members.
FOREST_PARAMS = {
    "objective": "regression",
    "boosting": "rf",
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 1.0,
    "feature_fraction_bynode": 0.8,
    "num_leaves": 32,
    "min_sum_hessian_in_leaf": 1e-6,
    "lambda_l2": 0.0,
    "max_bin": 31,
    "min_data_in_bin": 1,
    "feature_pre_filter": False,
    "deterministic": True,
    "num_threads": 1,
    "verbose": -1,
}


def pair_features(xi, xj) -> np.ndarray:
    """``[x_i + x_j, |x_i - x_j|]`` (float32) for broadcastable (..., d) inputs.

    Both halves are exactly symmetric in floating point, so a model on them is symmetric in the pair.
    """
    xi = np.asarray(xi, dtype=np.float32)
    xj = np.asarray(xj, dtype=np.float32)
    shape = np.broadcast_shapes(xi.shape, xj.shape)
    d = shape[-1]
    out = np.empty(shape[:-1] + (2 * d,), dtype=np.float32)
    np.add(xi, xj, out=out[..., :d])
    np.subtract(xi, xj, out=out[..., d:])
    np.abs(out[..., d:], out=out[..., d:])
    return out


class DiversitySurrogate:
    """Predicts the pairwise diversity of two configurations, with uncertainty from K bootstrap members.

    Member k is trained on the pairs of a bootstrap resample of the *configurations*
    (docs/method.md, "Surrogates"). A pair drawn ``c_i * c_j`` times enters with that weight: the same
    squared-error objective as repeating it. Only pairs of two different observations exist in the
    data, so self-pairs and pairs of two bootstrap copies of one observation never appear. With more
    than ``max_pairs`` distinct pairs, a uniform subsample of ``max_pairs`` of them is shared by the
    members, and a member whose multiset still exceeds the cap is thinned uniformly (without
    replacement) to exactly ``max_pairs``; so fit time stops growing once t(t-1)/2 > max_pairs.

    Default cap 5,000, not the 40,000 first planned: binning the pairs is LightGBM's slowest step
    here (~25 us per 200-feature row on one core), and the cap barely matters for accuracy. On
    breast_cancer (170 configurations of the auto-sklearn space, 14,365 pairs) Kendall's tau between
    predicted and true divbo diversity of held-out x training pairs was 0.38 / 0.37 / 0.37 with caps
    of 2,000 / 5,000 / 40,000 (1,000 lost ~0.04), while 40,000 alone would exceed the selector's 0.7 s
    budget at 250 observations (tests/benchmarks/test_selector_speed.py).

    The K members are the K outputs of one LightGBM booster (``num_class=K`` with a custom objective):
    output k's trees see only member k's gradients, so they are K independent regressors, but the pairs
    are binned once and one prediction call serves all members (LightGBM's per-call, per-row work would
    otherwise be paid K times). ``min_sum_hessian_in_leaf`` counts bootstrap-weighted pairs and shrinks
    with the data, so 15 pairs still give non-constant trees.

    ``target``: ``"raw"`` fits the diversity values themselves (the papers' form); ``"rank"`` fits their
    ranks among the training pairs, scaled to (0, 1), so predictions are on that scale. Regression
    diversity spans many orders of magnitude (one configuration predicting 1e4 on a target in [0, 50]
    makes every pair it is in 1e8 or more), and squared error on raw values spends the trees on those
    few pairs: over 300-member auto-sklearn-space libraries, Kendall's tau of OptDivBO's diversity on
    held-out pairs rose from 0.03-0.39 (raw) to 0.31-0.56 (rank) on space_ga, bodyfat and wine_quality (mse
    and mae) and did not drop on quake or wind (``python benchmarks/surrogate_tau.py --library 300
    --target raw,rank``; docs/results.md). The acquisitions only rank candidates, so the scale does not
    matter to them.
    """

    TARGETS = ("raw", "rank")

    def __init__(
        self,
        n_members: int = 5,
        max_pairs: int = 5_000,
        seed: int = 0,
        num_boost_round: int = 8,
        params: Optional[dict] = None,
        target: str = "raw",
    ):
        if target not in self.TARGETS:
            raise ValueError(f"unknown diversity target {target!r}; choose one of {', '.join(self.TARGETS)}")
        if n_members < 1:
            raise ValueError("n_members must be at least 1")
        if max_pairs < 1:
            raise ValueError("max_pairs must be at least 1")
        if num_boost_round < 1:
            raise ValueError("num_boost_round must be at least 1")
        self.n_members = int(n_members)
        self.max_pairs = int(max_pairs)
        self.seed = int(seed)
        self.num_boost_round = int(num_boost_round)
        self.params = dict(params or {})
        self.target = target
        self.booster_: Optional[lgb.Booster] = None
        self.offsets_: Optional[np.ndarray] = None  # (K,) weighted target mean each output starts from
        #: Per member: (i, j, weight) of the distinct observation pairs it was trained on.
        self.training_pairs_: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.n_features_: Optional[int] = None

    def fit(self, X, D) -> "DiversitySurrogate":
        """Fit on configurations X (t, d) and their symmetric pairwise diversity D (t, t); needs t >= 2."""
        X = _as_matrix(X, "configurations")
        t = X.shape[0]
        if t < 2:
            raise ValueError(f"the diversity surrogate needs at least 2 configurations (pairs); got {t}")
        D = np.asarray(D, dtype=np.float64)
        if D.shape != (t, t):
            raise ValueError(f"diversity matrix must be ({t}, {t}) for {t} configurations; got {D.shape}")
        if not np.all(np.isfinite(D)):
            raise ValueError("diversity matrix contains NaN or inf values")

        pair_stream, lightgbm_stream, *member_streams = np.random.SeedSequence(self.seed).spawn(self.n_members + 2)
        ii, jj = np.triu_indices(t, 1)
        if ii.size > self.max_pairs:
            keep = np.random.default_rng(pair_stream).choice(ii.size, self.max_pairs, replace=False)
            ii, jj = ii[np.sort(keep)], jj[np.sort(keep)]
        target = 0.5 * (D[ii, jj] + D[jj, ii])
        if self.target == "rank":
            target = (rankdata(target) - 0.5) / target.size
        counts = np.stack([self._member_weights(np.random.default_rng(s), t, ii, jj) for s in member_streams], axis=1)
        weights = counts.astype(np.float64)  # (pairs, K)
        offsets = weights.T @ target / weights.sum(axis=0)
        seeds = np.random.default_rng(lightgbm_stream).integers(2**31 - 1, size=2)
        params = {
            **DIVERSITY_PARAMS,
            "num_class": self.n_members,
            "min_sum_hessian_in_leaf": float(_min_leaf_size(int(counts.sum(axis=0).min()), 25, 20)),
            "data_random_seed": int(seeds[0]),
            "feature_fraction_seed": int(seeds[1]),
            **self.params,
        }
        data = lgb.Dataset(pair_features(X[ii], X[jj]), target, params=params)
        objective = _weighted_squared_error(target, weights, offsets)
        self.booster_ = _train_custom(params, data, objective, self.num_boost_round)
        self.offsets_ = offsets
        self.training_pairs_ = [(ii[c > 0], jj[c > 0], c[c > 0]) for c in counts.T]
        self.n_features_ = X.shape[1]
        return self

    def _member_weights(self, rng: np.random.Generator, t: int, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """Multiplicity of each distinct pair in one bootstrap resample of the configurations."""
        for _ in range(MAX_BOOTSTRAP_DRAWS):
            counts = np.bincount(rng.integers(0, t, t), minlength=t).astype(np.int64)
            weights = counts[ii] * counts[jj]
            if weights.any():
                break
        else:  # t = 2 draws one configuration twice with probability 1/2; never loop forever
            weights = np.ones(ii.size, dtype=np.int64)
        if weights.sum() > self.max_pairs:
            weights = rng.multivariate_hypergeometric(weights, self.max_pairs)
        return weights

    def member_predictions(self, XA, XB) -> np.ndarray:
        """(K, a, b) predicted diversity of every pair (XA[i], XB[j]) by each member.

        Pair features are built for a block of XA rows against all of XB, and one call predicts every
        member on the block; blocks only bound memory.
        """
        self._check_fitted()
        XA = _as_matrix(XA, "XA", self.n_features_)
        XB = _as_matrix(XB, "XB", self.n_features_)
        a, b, k = XA.shape[0], XB.shape[0], self.n_members
        out = np.empty((k, a, b), dtype=np.float64)
        if a == 0 or b == 0:
            return out
        step = max(1, PREDICT_CHUNK_ROWS // b)
        threads = self.params.get("num_threads", PREDICT_THREADS)
        for start in range(0, a, step):
            stop = min(a, start + step)
            feats = pair_features(XA[start:stop, None, :], XB[None, :, :]).reshape((stop - start) * b, -1)
            raw = self.booster_.predict(feats, raw_score=True, num_threads=threads)
            raw = np.asarray(raw, dtype=np.float64).reshape(-1, k) + self.offsets_
            out[:, start:stop] = raw.T.reshape(k, stop - start, b)
        return out

    def predict(self, XA, XB) -> Tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation (over members, ddof=0) of the pair diversity, each (a, b)."""
        preds = self.member_predictions(XA, XB)
        return preds.mean(axis=0), preds.std(axis=0)

    def _check_fitted(self) -> None:
        if self.booster_ is None:
            raise RuntimeError("the diversity surrogate is not fitted; call fit(X, D) first")


def _weighted_squared_error(target: np.ndarray, weights: np.ndarray, offsets: np.ndarray):
    """Custom objective: output k's half squared error, each pair weighted by member k's multiplicity."""

    def objective(preds, _data):
        flat = preds.ndim == 1  # LightGBM < 4 (and K = 1) pass scores flat, class-major
        scores = preds.reshape(weights.shape[1], -1).T if flat else preds
        grad = weights * (scores + offsets - target[:, None])
        if flat:
            return grad.T.ravel(), weights.T.ravel()
        return grad, weights

    return objective


def _train_custom(params: dict, data: lgb.Dataset, objective, rounds: int) -> lgb.Booster:
    """``lightgbm.train`` with a custom objective: a callable in params from 4.0, ``fobj`` before."""
    if _LIGHTGBM_MAJOR >= 4:
        return lgb.train({**params, "objective": objective}, data, num_boost_round=rounds)
    return lgb.train({**params, "objective": "none"}, data, num_boost_round=rounds, fobj=objective)


class ProbabilisticRandomForest:
    """Performance surrogate: mean and variance of the loss across the trees of a LightGBM random forest.

    Per-tree outputs come from one ``pred_leaf`` call and a (trees, leaves) table of leaf values built
    once per fit, instead of one prediction call per tree. The trees see subsamples of the rows (80%,
    without replacement: LightGBM's bagging, unlike SMAC's bootstrap) and 80% of the features per split.
    """

    def __init__(
        self,
        n_trees: int = 50,
        seed: int = 0,
        params: Optional[dict] = None,
        variance_floor: float = 1e-10,
    ):
        if n_trees < 1:
            raise ValueError("n_trees must be at least 1")
        self.n_trees = int(n_trees)
        self.seed = int(seed)
        self.params = dict(params or {})
        self.variance_floor = float(variance_floor)
        self.booster_: Optional[lgb.Booster] = None
        self.leaf_values_: Optional[np.ndarray] = None  # (trees, max leaves)
        self.n_features_: Optional[int] = None

    def fit(self, X, y) -> "ProbabilisticRandomForest":
        """Fit on configurations X (n, d) and their losses y (n,); needs n >= 2."""
        X = _as_matrix(X, "configurations")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (X.shape[0],):
            raise ValueError(f"need one loss per configuration: X has {X.shape[0]} rows, y has shape {y.shape}")
        if X.shape[0] < 2:
            raise ValueError(f"the random forest needs at least 2 observations; got {X.shape[0]}")
        if not np.all(np.isfinite(y)):
            raise ValueError("losses contain NaN or inf values")
        reps = max(1, math.ceil(MIN_FOREST_ROWS / X.shape[0]))
        rng = np.random.default_rng(self.seed)
        params = {
            **FOREST_PARAMS,
            "min_data_in_leaf": max(1, reps * _min_leaf_size(X.shape[0], 5, 3) // 2),
            "data_random_seed": int(rng.integers(2**31 - 1)),
            "bagging_seed": int(rng.integers(2**31 - 1)),
            "feature_fraction_seed": int(rng.integers(2**31 - 1)),
            **self.params,
        }
        data = lgb.Dataset(np.tile(X, (reps, 1)).astype(np.float32), np.tile(y, reps), params=params)
        booster = lgb.train(params, data, num_boost_round=self.n_trees)
        n_leaves = [int(line[len("num_leaves="):]) for line in booster.model_to_string().splitlines()
                    if line.startswith("num_leaves=")]
        table = np.zeros((len(n_leaves), max(n_leaves)), dtype=np.float64)
        for tree, count in enumerate(n_leaves):  # once per fit: trees x leaves scalar look-ups
            table[tree, :count] = [booster.get_leaf_output(tree, leaf) for leaf in range(count)]
        # LightGBM's rf mode stores a tree that found no split as a residual without its bias (e.g. every
        # tree of a constant target but the first predicts ~0); such a tree's honest output is the mean.
        table[np.asarray(n_leaves) == 1, 0] = y.mean()
        self.booster_, self.leaf_values_, self.n_features_ = booster, table, X.shape[1]
        return self

    def tree_predictions(self, X) -> np.ndarray:
        """(n, trees) output of every tree."""
        if self.booster_ is None:
            raise RuntimeError("the random forest is not fitted; call fit(X, y) first")
        X = _as_matrix(X, "configurations", self.n_features_)
        threads = self.params.get("num_threads", FOREST_PARAMS["num_threads"])
        leaves = self.booster_.predict(X.astype(np.float32), pred_leaf=True, num_threads=threads)
        leaves = np.asarray(leaves, dtype=np.intp).reshape(X.shape[0], -1)
        return self.leaf_values_[np.arange(leaves.shape[1])[None, :], leaves]

    def predict(self, X) -> Tuple[np.ndarray, np.ndarray]:
        """Mean and variance (plus ``variance_floor``) over trees, each (n,)."""
        per_tree = self.tree_predictions(X)
        return per_tree.mean(axis=1), per_tree.var(axis=1) + self.variance_floor


def expected_improvement(mean, variance, best) -> np.ndarray:
    """EI of a loss to be MINIMISED below ``best``; at zero variance it is max(best - mean, 0)."""
    mean = np.asarray(mean, dtype=np.float64)
    variance = np.asarray(variance, dtype=np.float64)
    std = np.sqrt(np.maximum(variance, 0.0))
    improvement = best - mean
    spread = std > 0
    z = improvement / np.where(spread, std, 1.0)
    ei = np.where(spread, improvement * norm.cdf(z) + std * norm.pdf(z), improvement)
    return np.maximum(ei, 0.0)


def _as_matrix(X, name: str, dims: Optional[int] = None) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a (count, dims) matrix; got shape {X.shape}")
    if dims is not None and X.shape[1] != dims:
        raise ValueError(f"{name} has {X.shape[1]} dims; the model was fitted on {dims}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contain NaN or inf values")
    return X


def _min_leaf_size(rows: int, rows_per_unit: int, cap: int) -> int:
    """Grows with the data up to LightGBM-like defaults; 1 on tiny data so trees can still split."""
    return int(max(1, min(cap, rows // rows_per_unit)))
