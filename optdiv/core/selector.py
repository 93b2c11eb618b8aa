"""``DiversityAwareSelector``: the one place where DivBO's and OptDivBO's suggestion logic lives.

Every host (the standalone engine, the OpenBox, auto-sklearn and AutoGluon adapters) keeps its own
search space and performance surrogate, encodes configurations as float vectors (values in [0, 1],
inactive = -1), computes its performance acquisition over a candidate set (larger is better, e.g. EI)
and asks this object which candidate to evaluate next::

    selector = DiversityAwareSelector(method="optdivbo", metric="error")
    choice = selector.select(candidates, ei, observations, val_preds, y_val)
    next_config = candidate_configs[choice.index]

Per call: the temporary pool P is built from the stored validation predictions, the pairwise diversity
of all observations is computed and the diversity surrogate is refitted (skipped when the data did not
change); then candidates are ranked by ``R_perf + w(t) R_div`` (docs/method.md, "Acquisition").
"""

from __future__ import annotations

import hashlib
from typing import Callable, Hashable, NamedTuple, Optional

import numpy as np

from .arrays import as_predictions, as_targets
from .acquisition import (
    combine,
    divbo_acquisition,
    divbo_weight,
    optdivbo_acquisition,
    optdivbo_weight,
    ranks,
)
from .diversity import (
    CLASSIFICATION_KINDS,
    KINDS,
    REGRESSION_KINDS,
    higher_is_more_diverse,
    kind_for_metric,
    pairwise_diversity,
)
from .metric_vocabulary import resolve_host, task_of
from .pool import POOL_BUILDERS, POOL_NBEST, Pool, build_pool
from .surrogates import DiversitySurrogate

#: The methods whose suggestion this selector makes (the rest of a host's methods never ask it).
DIVERSITY_METHODS = ("optdivbo", "divbo")


class Selection(NamedTuple):
    index: int  # the chosen candidate: argmin of ``scores``, lowest index on ties
    scores: np.ndarray  # (c,) perf_rank + weight * div_rank (perf_rank alone when diversity is off)
    perf_rank: np.ndarray  # (c,) 1 = largest performance acquisition
    div_rank: Optional[np.ndarray]  # (c,) 1 = most diverse; None when diversity is off
    div_acquisition: Optional[np.ndarray]  # (c,) raw diversity acquisition; None when diversity is off
    weight: float  # w(t) of the method's schedule (not applied when div_rank is None)
    pool_indices: np.ndarray  # (p,) observation indices of the unique pool members
    pool_weights: np.ndarray  # (p,) multiplicities (caruana) or scaled posterior weights; sum = ensemble_size


def pool_loss(metric: str, classification: bool) -> str:
    """The loss the pool's ensemble selection minimises for ``metric``: the metric vocabulary's host reading
    (a classification metric it does not know builds its pool on 0/1 error, the loss the papers' pools use)."""
    return resolve_host(metric, "classification" if classification else "regression").name


class DiversityAwareSelector:
    """Chooses the next configuration among a host's candidates by performance rank plus diversity rank.

    ``method``: ``"optdivbo"`` (pool-weighted confidence bound, w = 2(sigmoid(tau t) - 0.5)) or
    ``"divbo"`` (mean over ``n_samples`` draws of the minimum over the pool, w = beta(sigmoid(tau t) - 0.5)).
    ``kind``: the pairwise diversity (optdiv.core.diversity); defaults to ``"divbo"`` for DivBO and to
    the metric's own bound for OptDivBO. Any kind works with either method; the kind's direction decides
    the details (see optdiv.core.acquisition). ``metric``: the task metric, any name of the metric
    vocabulary (optdiv.core.metric_vocabulary), which sets the pool's loss (:func:`pool_loss`) and the
    default kind; a name it does not know is taken as a black-box classification metric. ``n_members`` and
    ``max_pairs`` configure the DiversitySurrogate, and ``diversity_target`` its target (``"raw"``, the
    papers' form, or ``"rank"``; see DiversitySurrogate). ``seed`` (non-negative) fixes the pool's
    tie-breaks, the surrogate and DivBO's draws.

    ``pool_scorer``: a host's own loss for a metric optdiv cannot compute, ``fn(y_true, y_pred) -> float``
    (lower is better) on an averaged ensemble prediction; the pool's ensemble selection then minimises it
    instead of the metric's loss, among the ``pool_nbest`` models with the lowest scorer loss of their own
    (it costs one call per model and round). The diversity kind stays the metric's. Caruana pools only:
    Agnostic Bayes needs per-example losses.

    Fitted state, for hosts that report it: ``pool_`` (Pool), ``diversity_`` ((t, t) matrix),
    ``surrogate_`` (None below 2 observations), ``observations_``.
    """

    def __init__(
        self,
        method: str = "optdivbo",
        metric: str = "error",
        kind: Optional[str] = None,
        ensemble_size: int = 25,
        pool_builder: str = "caruana",
        n_members: int = 5,
        max_pairs: int = 5_000,
        kappa: float = 1.0,
        beta: float = 0.05,
        tau: float = 0.2,
        n_samples: int = 20,
        seed: int = 0,
        fixed_weight: Optional[float] = None,
        diversity_target: str = "raw",
        paper_clip: bool = False,
        pool_scorer: Optional[Callable[[np.ndarray, np.ndarray], float]] = None,
        pool_nbest: int = POOL_NBEST,
    ):
        if method not in DIVERSITY_METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(DIVERSITY_METHODS)}")
        if pool_builder not in POOL_BUILDERS:
            raise ValueError(f"unknown pool builder {pool_builder!r}; choose one of {', '.join(POOL_BUILDERS)}")
        kind = kind if kind is not None else ("divbo" if method == "divbo" else kind_for_metric(metric, paper_clip))
        if kind not in KINDS:
            raise ValueError(f"unknown diversity kind {kind!r}; choose one of {', '.join(KINDS)}")
        if ensemble_size < 1 or n_samples < 1:
            raise ValueError("ensemble_size and n_samples must be at least 1")
        if int(seed) < 0:
            raise ValueError("seed must be a non-negative integer")
        if diversity_target not in DiversitySurrogate.TARGETS:
            raise ValueError(f"unknown diversity target {diversity_target!r}; choose one of "
                             f"{', '.join(DiversitySurrogate.TARGETS)}")
        if fixed_weight is not None and not (np.isfinite(fixed_weight) and fixed_weight >= 0):
            raise ValueError(f"fixed_weight must be a finite number >= 0; got {fixed_weight!r}")
        if pool_scorer is not None and not callable(pool_scorer):
            raise ValueError(f"pool_scorer must be a callable fn(y_true, y_pred) -> loss; got {pool_scorer!r}")
        if pool_scorer is not None and pool_builder != "caruana":
            raise ValueError(f"pool_scorer needs the caruana pool builder: {pool_builder!r} needs per-example "
                             f"losses, which a black-box scorer does not give")
        if isinstance(pool_nbest, bool) or not isinstance(pool_nbest, (int, np.integer)) or pool_nbest < 1:
            raise ValueError(f"pool_nbest must be a positive integer; got {pool_nbest!r}")
        self.method, self.metric, self.kind = method, metric, kind
        self.ensemble_size, self.pool_builder = int(ensemble_size), pool_builder
        self.n_members, self.max_pairs = int(n_members), int(max_pairs)
        self.kappa, self.beta, self.tau = float(kappa), float(beta), float(tau)
        self.n_samples, self.seed = int(n_samples), int(seed)
        self.fixed_weight = None if fixed_weight is None else float(fixed_weight)
        self.diversity_target = diversity_target
        self.pool_scorer, self.pool_nbest = pool_scorer, int(pool_nbest)

        self.pool_: Optional[Pool] = None
        self.diversity_: Optional[np.ndarray] = None  # (t, t) pairwise diversity of the observations
        self.surrogate_: Optional[DiversitySurrogate] = None  # None below 2 observations
        self.observations_: Optional[np.ndarray] = None
        self._fingerprint: Optional[Hashable] = None

    @property
    def n_observations_(self) -> int:
        return 0 if self.observations_ is None else self.observations_.shape[0]

    def weight(self, t) -> float:
        """The method's diversity weight after ``t`` observations (``fixed_weight``, DivBO's Table 8
        ablation, replaces the schedule)."""
        if self.fixed_weight is not None:
            return self.fixed_weight
        if self.method == "divbo":
            return divbo_weight(t, self.beta, self.tau)
        return optdivbo_weight(t, self.tau)

    def fit(
        self, observations, val_preds, y_val, version: Optional[Hashable] = None, diversity=None
    ) -> "DiversityAwareSelector":
        """Build the pool, the diversity matrix and the surrogate from all observations so far.

        ``observations`` (t, d) encoded configurations; ``val_preds`` (t, n) regression values or
        (t, n, k) class probabilities on the validation rows; ``y_val`` (n,) targets / class indices.
        Refitting is skipped when the data are unchanged: by ``version`` if the host passes one (e.g.
        the number of stored runs), else by a hash of the arrays. ``diversity`` is the (t, t)
        ``pairwise_diversity`` matrix of ``val_preds`` under this selector's kind, for hosts that keep it
        up to date incrementally (a new observation adds one row, not t^2 pairs).
        """
        X = np.asarray(observations, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] == 0:
            raise ValueError(f"observations must be a non-empty (count, dims) matrix; got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("observations contain NaN or inf values")
        preds = as_predictions(val_preds)
        if preds.shape[0] != X.shape[0]:
            raise ValueError(
                f"need validation predictions for every observation: {X.shape[0]} observations, "
                f"predictions of shape {preds.shape}"
            )
        y = as_targets(y_val, preds)
        fingerprint = ("version", version) if version is not None else _hash(X, preds, y)
        if fingerprint == self._fingerprint:
            return self

        classification = preds.ndim == 3
        loss = pool_loss(self.metric, classification) if self.pool_scorer is None else self.pool_scorer
        allowed = CLASSIFICATION_KINDS if classification else REGRESSION_KINDS
        if self.kind not in allowed:
            task = "classification" if classification else "regression"
            hint = "" if task_of(self.metric) is not None else (
                f" (metric {self.metric!r} is not a name optdiv knows, so its default kind is the black-box "
                f"classification mix; name the loss, e.g. 'mse', or pass kind)")
            raise ValueError(f"diversity kind {self.kind!r} does not apply to {task}; use one of {allowed}{hint}")

        pool = build_pool(preds, y, loss, size=self.ensemble_size, builder=self.pool_builder, seed=self.seed,
                          nbest=None if self.pool_scorer is None else self.pool_nbest)
        diversity_in, diversity, surrogate = diversity, None, None
        if X.shape[0] >= 2:
            if diversity_in is None:
                diversity = pairwise_diversity(preds, y, self.kind, self.ensemble_size)
            else:
                diversity = np.asarray(diversity_in, dtype=np.float64)
                if diversity.shape != (X.shape[0], X.shape[0]):
                    raise ValueError(f"diversity must be ({X.shape[0]}, {X.shape[0]}); got {diversity.shape}")
            surrogate = DiversitySurrogate(self.n_members, self.max_pairs, seed=self.seed,
                                           target=self.diversity_target).fit(X, diversity)
        # assigned together, so a failed fit leaves the previous state whole
        self.pool_, self.diversity_, self.surrogate_, self.observations_ = pool, diversity, surrogate, X
        self._fingerprint = fingerprint
        return self

    def score(self, candidates, perf_acq, t: Optional[int] = None) -> Selection:
        """Rank ``candidates`` (c, d) given the host's performance acquisition ``perf_acq`` (c,), larger = better.

        ``t`` (default: the number of fitted observations) sets the weight. DivBO's N draws come from a
        generator seeded by (seed, number of fitted observations), so a resumed search repeats them.
        """
        if self.observations_ is None:
            raise RuntimeError("the selector is not fitted; call fit(...) or select(...) first")
        C = np.asarray(candidates, dtype=np.float64)
        d = self.observations_.shape[1]
        if C.ndim != 2 or C.shape[0] == 0 or C.shape[1] != d:
            raise ValueError(f"candidates must be a non-empty (count, {d}) matrix; got shape {C.shape}")
        if not np.all(np.isfinite(C)):
            raise ValueError("candidates contain NaN or inf values")
        perf_acq = np.asarray(perf_acq, dtype=np.float64)
        if perf_acq.shape != (C.shape[0],):
            raise ValueError(f"need one performance acquisition value per candidate: {C.shape[0]} candidates, "
                             f"perf_acq of shape {perf_acq.shape}")
        t = self.n_observations_ if t is None else t
        w = self.weight(t)
        perf_rank = ranks(perf_acq, higher_is_better=True)
        pool = self.pool_
        if self.surrogate_ is None or w == 0:
            scores = perf_rank
            return Selection(int(np.argmin(scores)), scores, perf_rank, None, None, w, pool.indices, pool.weights)

        members = self.observations_[pool.indices]
        higher = higher_is_more_diverse(self.kind)
        if self.method == "divbo":
            mean, std = self.surrogate_.predict(C, members)
            rng = np.random.default_rng([self.seed, self.n_observations_])
            draws = mean + std * rng.standard_normal((self.n_samples,) + mean.shape)
            div_acq = divbo_acquisition(draws, higher_is_more_diverse=higher)
        else:
            member_preds = self.surrogate_.member_predictions(C, members)
            div_acq = optdivbo_acquisition(member_preds, pool.weights, self.kappa, higher_is_more_diverse=higher)
        div_rank = ranks(div_acq, higher_is_better=higher)
        scores = combine(perf_rank, div_rank, w)
        return Selection(int(np.argmin(scores)), scores, perf_rank, div_rank, div_acq, w, pool.indices, pool.weights)

    def select(
        self,
        candidates,
        perf_acq,
        observations,
        val_preds,
        y_val,
        t: Optional[int] = None,
        version: Optional[Hashable] = None,
    ) -> Selection:
        """``fit(observations, val_preds, y_val, version)`` then ``score(candidates, perf_acq, t)``."""
        return self.fit(observations, val_preds, y_val, version=version).score(candidates, perf_acq, t)


def _hash(X: np.ndarray, preds: np.ndarray, y: np.ndarray) -> tuple:
    """Shapes plus a digest of the bytes: cheap (~10 ms for 500 x 2,000 x 2 float32) next to a refit."""
    digest = hashlib.blake2b(digest_size=16)
    for arr in (X, preds, y):
        digest.update(np.ascontiguousarray(arr).view(np.uint8).ravel())
    return (X.shape, preds.shape, preds.dtype.str, y.shape, digest.hexdigest())
