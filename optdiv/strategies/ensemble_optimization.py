"""Ensemble Optimization (EO; Levesque et al., 2016): BO whose objective is the ensemble, one slot at a time.

EO keeps a fixed-size ensemble (12 in DivBO/OptDivBO's setting) of observed models, averaged uniformly.
Each iteration picks the slot ``j`` to renew (cycling once the ensemble is full) and scores every observed
model ``h`` by the validation loss of the ensemble with slot ``j`` replaced by ``h`` (while the ensemble is
still growing: with ``h`` added). A probabilistic random forest learns configuration -> that score, and
the candidate with the highest expected improvement on it is evaluated. Afterwards slot ``j`` takes the
observed model (new or old) that scores best. The final ensemble is EO's own.

The ensemble is a pure function of the history; it is extended one observation at a time and rebuilt
from scratch when a history is not an extension of the cached one (another run, a resume).
"""

from __future__ import annotations

import time
from typing import List, Sequence, Tuple

import numpy as np

from optdiv.core.ensemble import addition_losses, tied_minima
from optdiv.core.surrogates import ProbabilisticRandomForest, expected_improvement
from optdiv.evaluation.observation import WORST_LOSS
from optdiv.spaces.candidates import SpaceCandidates, as_dict, observation_key, seen_keys
from optdiv.strategies.base import Suggestion


class EnsembleOptimization:
    def __init__(self, space, metric: str, seed: int = 0, candidates=None, ensemble_size: int = 12,
                 n_initial: int = 5, n_random: int = 4950, n_local: int = 50, n_trees: int = 50):
        if ensemble_size < 1:
            raise ValueError("EO's ensemble size must be at least 1")
        self.space, self.metric, self.seed = space, metric, int(seed)
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.size, self.n_initial = int(ensemble_size), int(n_initial)
        self.n_random, self.n_local, self.n_trees = n_random, n_local, n_trees
        self._cache: Tuple[List[tuple], List[int]] = ([], [])

    # -- the ensemble --------------------------------------------------------------------------------
    def ensemble(self, history: Sequence, y_val) -> List[int]:
        """EO's ensemble (history positions, a multiset) after all of ``history``."""
        keys = [(obs.index, observation_key(obs), obs.status) for obs in history]
        cached_keys, members = self._cache
        if keys[: len(cached_keys)] != cached_keys:
            cached_keys, members = [], []
        members = list(members)
        for s in range(len(cached_keys), len(history)):
            members = self._update(history[: s + 1], members, y_val)
        self._cache = (keys, members)
        return members

    def _next_slot(self, history: Sequence, members: List[int]) -> int:
        """The slot the next successful run renews: the next free one, then cycling 0, 1, ..., size-1."""
        if len(members) < self.size:
            return len(members)
        successes = sum(1 for obs in history if obs.status == "ok" and obs.val_pred is not None)
        return (successes - self.size) % self.size

    def _scores(self, history: Sequence, members: List[int], y_val, slot: int) -> np.ndarray:
        """Each observation's ensemble loss when it takes ``slot``; failed runs get the worst loss."""
        ok = [i for i, obs in enumerate(history) if obs.status == "ok" and obs.val_pred is not None]
        scores = np.full(len(history), WORST_LOSS[self.metric], dtype=np.float64)
        if not ok:
            return scores
        preds = np.stack([history[i].val_pred for i in ok]).astype(np.float64)
        where = {h: k for k, h in enumerate(ok)}
        kept = [m for n, m in enumerate(members) if n != slot]
        running = np.zeros(preds.shape[1:])
        for m in kept:
            running += preds[where[m]]
        scores[ok] = addition_losses(preds, y_val, self.metric)(running, len(kept) + 1)
        return scores

    def _update(self, history: Sequence, members: List[int], y_val) -> List[int]:
        obs = history[-1]
        if obs.status != "ok" or obs.val_pred is None:
            return members  # a failed run changes nothing
        slot = self._next_slot(history[:-1], members)
        scores = self._scores(history, members, y_val, slot)
        pick = self._best_of_ties(history, scores, y_val)
        out = list(members)
        if slot < len(out):
            out[slot] = pick
        else:
            out.append(pick)
        return out

    def _best_of_ties(self, history: Sequence, scores: np.ndarray, y_val) -> int:
        """The lowest score; among ties, the model that is best on its own (then the earliest).

        Ties are common while a confident member dominates the average (a constant predictor with hard
        probabilities leaves every replacement at the same error); taking the earliest model there fills
        every slot with the first success and the ensemble can never leave it.
        """
        tied = tied_minima(scores)
        if len(tied) == 1:
            return int(tied[0])
        preds = np.stack([history[i].val_pred for i in tied]).astype(np.float64)
        alone = addition_losses(preds, y_val, self.metric)(np.zeros(preds.shape[1:]), 1)
        return int(tied[int(np.argmin(alone))])

    # -- suggestions ---------------------------------------------------------------------------------
    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        step = len(history)
        rng = np.random.default_rng([self.seed, step])
        seen = seen_keys(history)
        if step < self.n_initial:
            return Suggestion(self.source.random(rng, seen), time.perf_counter() - start, {"strategy": "random"})
        if y_val is None:
            raise ValueError("EO needs the validation targets (y_val) to score ensembles")
        members = self.ensemble(history, y_val)
        slot = self._next_slot(history, members)
        scores = self._scores(history, members, y_val, slot)
        obs_x = self.source.encode_history(history)
        candidates, cand_x = self.source.candidates(history, obs_x, rng, self.n_random, self.n_local)
        if not candidates:
            return Suggestion(self.source.random(rng, seen), time.perf_counter() - start, {"strategy": "random"})
        forest = ProbabilisticRandomForest(n_trees=self.n_trees, seed=int(rng.integers(2**31)))
        forest.fit(obs_x, scores)
        mean, var = forest.predict(cand_x)
        index = int(np.argmax(expected_improvement(mean, var, float(scores.min()))))
        info = {"strategy": "eo", "slot": int(slot), "ensemble": [int(m) for m in members]}
        return Suggestion(as_dict(candidates[index]), time.perf_counter() - start, info)

    def final_members(self, history: Sequence, y_val) -> Tuple[List[int], np.ndarray]:
        members = self.ensemble(history, y_val)
        if not members:
            raise RuntimeError("every evaluation failed: there is no model to build an ensemble from")
        unique, counts = np.unique(members, return_counts=True)
        return [int(u) for u in unique], counts / counts.sum()
