"""Suggestion strategies over a `SearchSpace`: random search, BO, DivBO and OptDivBO.

Every suggestion is a pure function of (seed, history): the generators are seeded with the seed and
the number of observations, so a resumed run suggests exactly what an uninterrupted run would.
BO follows DivBO's loop: the first `n_initial` suggestions are random; afterwards a probabilistic
random forest over the encoded configurations gives EI on `n_random` random plus `n_local`
one-exchange neighbours of the best observations. DivBO/OptDivBO re-rank those candidates with
the core's `DiversityAwareSelector`, the same object every host adapter uses.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.core.diversity import diversity_to_pool
from optdiv.core.pending import pick_with_pending
from optdiv.core.selector import DiversityAwareSelector
from optdiv.core.surrogates import ProbabilisticRandomForest, expected_improvement
from optdiv.core.tpe import ParzenRatio
from optdiv.evaluation.observation import PENDING
from optdiv.spaces.candidates import SpaceCandidates, as_dict, config_key, observation_key, seen_keys
from optdiv.strategies.base import Suggestion, losses_with_failures

#: The strategies this class implements (registered in optdiv.strategies.registry; optdiv.strategies.methods names
#: the methods built on them).
FAMILY = ("rs", "bo", "tpe", "divbo", "optdivbo")

#: Cost-aware suggestion (``cost_aware``): a candidate predicted to take more than 1/RUNS_LEFT of the search's time
#: left is down-weighted in proportion.
RUNS_LEFT = 10


class Optimizer:
    """Suggests the next configuration from the history of observations."""

    def __init__(
        self,
        space,
        method: str,
        metric: str,
        seed: int = 0,
        n_initial: int = 5,
        n_random: int = 4950,
        n_local: int = 50,
        n_trees: int = 50,
        selector_options: Optional[Dict] = None,
        candidates=None,
        initial: Optional[Sequence[Dict]] = None,
        cost_aware: bool = False,
        max_share: Optional[float] = None,
        time_left: Optional[Callable[[], float]] = None,
    ):
        if method not in FAMILY:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(FAMILY)}")
        self.space = space
        #: the most share of the evaluations one algorithm may take (None: no cap); see :meth:`_capped`
        self.max_share = None if max_share is None else float(max_share)
        self.cost_aware = bool(cost_aware)
        #: under a wall-time budget, a callable giving the seconds the search may still use (cost-aware weighting)
        self.time_left = time_left
        self.initial = [dict(c) for c in initial] if initial else []
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.method = method
        self.metric = metric
        self.seed = int(seed)
        self.n_initial = n_initial
        self.n_random = n_random
        self.n_local = n_local
        self.n_trees = n_trees
        self.selector_options = dict(selector_options or {})

    def suggest(
        self,
        history: Sequence,
        y_val: Optional[np.ndarray] = None,
        algorithm=None,
        stream: int = 0,
        seen: Optional[set] = None,
        context: Optional[Sequence] = None,
    ) -> Suggestion:
        """Next configuration; `history` holds Observations (config, status, val_loss, val_pred).

        ``algorithm`` restricts the suggestion to one algorithm or a collection of them (an arm of a
        bandit that passes only that arm's observations as ``history``), ``stream`` keeps arms' random
        draws apart, and ``seen`` holds the keys of every evaluated configuration when ``history`` is such
        a subset. ``context``: the whole history, when the diversity term (pool, pairwise diversity,
        surrogate and the weight's t) must see every observation while the performance model sees only
        ``history`` (OptDivBO inside a DACOpt sub-space).
        """
        start = time.perf_counter()
        step = len(history)
        rng = np.random.default_rng([self.seed, step] if stream == 0 else [self.seed, step, stream])
        seen = seen if seen is not None else seen_keys(history)
        if self.initial and step < len(self.initial) and algorithm is None:
            config = self._from_portfolio(step, seen)
            if config is not None:
                return Suggestion(config, time.perf_counter() - start, {"strategy": "portfolio"})
        if algorithm is None and self.max_share is not None:
            algorithm = self._capped(history)
        if algorithm is None and getattr(self.space, "start_only", None):
            algorithm = self.space.searched_algorithms  # the start list alone evaluates the others
        if self.method == "rs" or step < self.n_initial:
            config = self.source.random(rng, seen, algorithm)
            return Suggestion(config, time.perf_counter() - start, {"strategy": "random"})
        obs_x = self.source.encode_history(history)
        candidates, cand_x = self.source.candidates(history, obs_x, rng, self.n_random, self.n_local, algorithm,
                                                    seen=seen)
        if not candidates:
            config = self.source.random(rng, seen, algorithm)
            return Suggestion(config, time.perf_counter() - start, {"strategy": "random (space exhausted)"})
        losses = losses_with_failures(history)
        finish = self._finish_probability(history, obs_x, cand_x, step, stream)
        if self.method == "tpe":
            scores = ParzenRatio().fit(obs_x, losses).score(cand_x)
            if finish is not None:
                scores = scores + np.log(np.maximum(finish, 1e-12))
            index = int(np.argmax(scores))
            return Suggestion(as_dict(candidates[index]), time.perf_counter() - start, {"strategy": "tpe"})
        forest = ProbabilisticRandomForest(n_trees=self.n_trees, seed=int(rng.integers(2**31)))
        forest.fit(obs_x, losses)
        mean, var = forest.predict(cand_x)
        ei = expected_improvement(mean, var, float(losses.min()))
        if finish is not None:
            ei = ei * finish
        info: Dict = {"strategy": self.method}
        fits = self._fits_time_left(history, obs_x, cand_x, step, stream)
        if fits is not None:
            ei = ei * fits
            info["cost_aware"] = True
        if self.method == "bo":
            index = int(np.argmax(ei))
        elif context is not None:
            context_x = self.source.encode_history(context)
            index, info = self._diversity_choice(context, context_x, cand_x, ei, y_val, rng, info)
        else:
            index, info = self._diversity_choice(history, obs_x, cand_x, ei, y_val, rng, info)
        return Suggestion(as_dict(candidates[index]), time.perf_counter() - start, info)

    def _capped(self, history) -> Optional[List[str]]:
        """The algorithms the next suggestion may use under ``max_share``: those that would still hold at most that
        share of the evaluations (pending ones included) after it; None (any algorithm) when none is over.

        A BO search settles on the first algorithm that does well and spends most of its budget tuning it, so the
        ensemble is built from one family and the others were never tuned; the cap hands the evaluations beyond
        the share to the other algorithms, where EI (and the diversity term) still choose among them."""
        counts: Dict[str, int] = {}
        for obs in history:
            counts[obs.algorithm] = counts.get(obs.algorithm, 0) + 1
        limit = self.max_share * (len(history) + 1)
        over = {name for name, count in counts.items() if count + 1 > limit}
        if not over:
            return None
        allowed = [name for name in self.source.algorithms() if name not in over]
        return allowed or None

    def _from_portfolio(self, step: int, seen: set) -> Optional[Dict]:
        """The first portfolio entry from position ``step`` on that is not evaluated yet and that the source
        can offer (a replay library may lack it; a live space refuses one that is not valid in it). Indexing
        by step means an entry the engine replaced (predicted not to fit the time left) is not offered again."""
        for config in self.initial[step:]:
            offered = self.source.offer(config)
            if offered is not None and config_key(offered) not in seen:
                return offered
        return None

    def _finish_probability(self, history, obs_x, cand_x, step: int, stream: int) -> Optional[np.ndarray]:
        """Each candidate's probability of finishing within the time limit, from a forest over the timeouts so far
        (the unknown-constraint weighting of EI); None when nothing timed out, which leaves suggestions as they were.

        A timeout's imputed loss (:func:`~optdiv.strategies.base.imputed_loss`) says how good its region may be; this
        says whether a run there would finish at all, so a region where everything times out is not suggested again
        and again.
        """
        timed_out = np.array([obs.status == "timeout" for obs in history], dtype=np.float64)
        if not timed_out.any():
            return None
        seed = int(np.random.default_rng([self.seed, step, stream, 0x7100]).integers(2**31))
        forest = ProbabilisticRandomForest(n_trees=self.n_trees, seed=seed).fit(obs_x, timed_out)
        mean, _ = forest.predict(cand_x)
        return np.clip(1.0 - mean, 0.0, 1.0)

    def _fits_time_left(self, history, obs_x, cand_x, step: int, stream: int) -> Optional[np.ndarray]:
        """With ``cost_aware`` under a time budget: each candidate's weight min(1, left / (RUNS_LEFT x predicted
        seconds)), the predicted seconds from a forest over the observations' log fit times. A candidate that
        would leave room for fewer than :data:`RUNS_LEFT` more runs of its kind loses EI in proportion, so at
        equal promise the search prefers what fits the time left, and the preference grows as the time runs out.
        None (no weighting) without a time budget or before three timed observations."""
        if not self.cost_aware or self.time_left is None:
            return None
        seconds = np.array([obs.fit_seconds or np.nan for obs in history], dtype=np.float64)
        known = np.isfinite(seconds) & (seconds > 0)
        if known.sum() < 3:
            return None
        left = max(float(self.time_left()), 0.0)
        seed = int(np.random.default_rng([self.seed, step, stream, 0xC057]).integers(2**31))
        forest = ProbabilisticRandomForest(n_trees=self.n_trees, seed=seed).fit(obs_x[known], np.log(seconds[known]))
        predicted, _ = forest.predict(cand_x)
        return np.clip(left / (RUNS_LEFT * np.exp(predicted)), 0.0, 1.0)

    def _diversity_choice(self, history, obs_x, cand_x, ei, y_val, rng, info):
        ok = [i for i, obs in enumerate(history) if obs.val_pred is not None]
        if y_val is None:
            raise ValueError("DivBO/OptDivBO need the validation targets (y_val) to measure diversity")
        if len(ok) < 2:
            return int(np.argmax(ei)), {**info, "diversity": "off (fewer than 2 successful runs)"}
        selector = DiversityAwareSelector(
            method=self.method, metric=self.metric, seed=int(rng.integers(2**31)), **self.selector_options
        )
        # pending pseudo-observations come last in the history (optdiv.engine.loop), already believed over the whole
        # history, and are never cached
        real = [i for i in ok if history[i].status != PENDING]
        pending = [i for i in ok if history[i].status == PENDING]
        rows = real + pending
        preds = np.stack([history[i].val_pred for i in rows])
        keys = [(history[i].index, observation_key(history[i])) for i in real]
        diversity = self._diversity_matrix(rows, preds, y_val, selector.kind, selector.ensemble_size, keys=keys)
        (pick,) = pick_with_pending(selector, cand_x, ei, obs_x[real], preds[:len(real)], y_val, obs_x[pending],
                                    pending_preds=preds[len(real):], t=len(history), diversity=diversity)
        choice = pick.selection
        info = {
            **info,
            "weight": float(choice.weight),
            "diversity_kind": selector.kind,
            "pool": [int(rows[i]) for i in np.asarray(choice.pool_indices)],
            "ei_rank": float(choice.perf_rank[pick.first]),
        }
        if pending:
            info["n_pending"] = len(pending)
        return pick.index, info

    def _diversity_matrix(self, ok: List[int], preds: np.ndarray, y_val, kind: str, ensemble_size: int,
                          keys: Optional[List] = None):
        """Pairwise diversity of the successful runs, extended by the new runs' rows only.

        Row ``j`` is always ``diversity_to_pool(preds[j], preds[:j + 1])`` (mirrored above the diagonal), so
        a matrix rebuilt from nothing (a resumed run) is bit-identical to one grown a row at a time, and a
        resumed search suggests exactly what the uninterrupted one did. The cache covers the first
        ``len(keys)`` rows (default: all of ``ok``), keyed by ``keys`` (default: the history positions
        ``ok``); rows past them (pending pseudo-observations) are computed afresh on every call. A history
        that does not extend the cached keys (another run, another kind) recomputes everything.
        """
        keys = list(ok) if keys is None else list(keys)
        n_cacheable = len(keys)
        cached = getattr(self, "_diversity_cache", None)
        n_old = 0
        if cached is not None and cached[0] == (kind, ensemble_size) and cached[1] == keys[: len(cached[1])]:
            n_old = len(cached[1])
        matrix = np.empty((len(ok), len(ok)))
        if n_old:
            matrix[:n_old, :n_old] = cached[2]
        for j in range(n_old, len(ok)):
            row = diversity_to_pool(preds[j : j + 1], preds[: j + 1], y_val, kind, ensemble_size)[0]
            matrix[j, : j + 1] = row
            matrix[: j + 1, j] = row
        self._diversity_cache = ((kind, ensemble_size), keys[:n_cacheable], matrix[:n_cacheable, :n_cacheable].copy())
        return matrix
