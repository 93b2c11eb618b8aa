"""Neural Ensemble Search by regularised evolution (NES-RE; Zaidi et al., NeurIPS 2021), for CASH.

The population is the ``population`` (30 in DivBO/OptDivBO's setting) most recent successful runs; the
first ``population`` suggestions are random. Afterwards each step forward-selects an ensemble of
``ensemble_size`` from the population (ensemble selection with replacement), picks a parent uniformly
among its distinct members, and evaluates a mutation of it: a one-exchange neighbour in a live space,
one of the nearest unevaluated members in a replay library. Ageing drops the oldest member as each new
run arrives. The final ensemble is forward selection of ``ensemble_size`` over every run (NES's own
size, 10, rather than the post-hoc designs' 25: NES is not a post-hoc design).
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from optdiv.core.ensemble import ensemble_selection
from optdiv.core.selector import pool_loss
from optdiv.spaces.candidates import SpaceCandidates, seen_keys
from optdiv.strategies.base import Suggestion, successful


class RegularisedEvolutionEnsemble:
    def __init__(self, space, metric: str, seed: int = 0, candidates=None, population: int = 30,
                 ensemble_size: int = 10):
        if population < 2 or ensemble_size < 1:
            raise ValueError("NES needs a population of at least 2 and an ensemble size of at least 1")
        self.space, self.metric, self.seed = space, metric, int(seed)
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.population, self.ensemble_size = int(population), int(ensemble_size)

    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        rng = np.random.default_rng([self.seed, len(history)])
        seen = seen_keys(history)
        alive = successful(history)[-self.population:]
        if len(history) < self.population or len(alive) < 2:
            return Suggestion(self.source.random(rng, seen), time.perf_counter() - start, {"strategy": "random"})
        if y_val is None:
            raise ValueError("NES needs the validation targets (y_val) to select ensembles")
        preds = np.stack([history[i].val_pred for i in alive])
        loss = pool_loss(self.metric, preds.ndim == 3)
        weights = ensemble_selection(preds, y_val, loss, size=self.ensemble_size, seed=int(rng.integers(2**31))).weights
        parents = [alive[i] for i in np.flatnonzero(weights > 0)]
        parent = parents[int(rng.integers(len(parents)))]
        child = self.source.mutate(history[parent].config, rng, seen)
        return Suggestion(child, time.perf_counter() - start, {"strategy": "nes", "parent": int(parent)})
