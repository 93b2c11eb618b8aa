"""Rising Bandit (RB; Li et al., AAAI 2020), the algorithm-selection layer of VolcanoML.

Each algorithm is an arm running its own BO over that algorithm's hyperparameters. The arms still
active play in rounds, ``trials`` evaluations each (5 in DivBO/OptDivBO's setting). After a round,
every arm's best-so-far loss is a pessimistic bound on where it ends (it can only improve), and the
arm's recent rate of improvement, extrapolated over the remaining rounds, an optimistic one. An arm whose
optimistic bound is still worse than another arm's current best is eliminated. ``alpha`` is the number
of past rounds the improvement rate is measured over (the papers' "alpha = 3"; at least one).

The schedule is rebuilt from the history at every call, so a resumed run continues exactly. When an
arm has no configuration left to offer (a replay library holds few members per algorithm), it leaves the
active set; if every active arm is exhausted, the eliminated arms come back, best first.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.spaces.candidates import SpaceCandidates, seen_keys
from optdiv.strategies.base import Suggestion, best_loss
from optdiv.strategies.model_based import Optimizer


class RisingBandit:
    def __init__(self, space, metric: str, seed: int = 0, candidates=None, budget: Optional[int] = 250,
                 alpha: int = 3, trials: int = 5, **bo_options):
        if alpha < 1 or trials < 1:
            raise ValueError("Rising Bandit needs alpha >= 1 and trials >= 1")
        self.space = space
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.arms = self.source.algorithms()
        self.inner = Optimizer(space, "bo", metric, seed=seed, candidates=self.source, **bo_options)
        self.budget, self.alpha, self.trials = budget, int(alpha), int(trials)

    def state(self, history: Sequence) -> Tuple[List[str], Dict[str, List[int]], List[str], str]:
        """(active arms, each arm's history positions, eliminated arms in order, the arm to play next)."""
        active = list(self.arms)
        positions: Dict[str, List[int]] = {arm: [] for arm in self.arms}
        curves: Dict[str, List[float]] = {arm: [] for arm in self.arms}
        eliminated: List[str] = []
        pos = 0
        budget = self.budget if self.budget is not None else len(history) + 100
        while True:
            need = len(active) * self.trials
            done = min(need, len(history) - pos)
            for k in range(done):
                positions[active[k // self.trials]].append(pos + k)
            if done < need:
                return active, positions, eliminated, active[done // self.trials]
            pos += need
            for arm in active:
                curves[arm].append(best_loss(history, positions[arm]))
            if len(active) > 1:
                remaining_rounds = max(0.0, (budget - pos) / (len(active) * self.trials))
                leader = min(curves[arm][-1] for arm in active)
                survivors = [arm for arm in active if self._optimistic(curves[arm], remaining_rounds) <= leader]
                eliminated += [arm for arm in active if arm not in survivors]
                active = survivors or [min(active, key=lambda a: curves[a][-1])]

    def _optimistic(self, curve: List[float], remaining_rounds: float) -> float:
        """The best loss the arm could reach if it kept improving at its recent rate."""
        if not np.isfinite(curve[-1]):
            return np.inf if len(curve) > self.alpha else -np.inf  # nothing succeeded yet: patience, then out
        window = min(self.alpha, len(curve) - 1)
        if window < 1 or not np.isfinite(curve[-1 - window]):
            return -np.inf  # no rate measured yet: the arm stays
        slope = (curve[-1 - window] - curve[-1]) / window
        return curve[-1] - slope * remaining_rounds

    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        active, positions, eliminated, next_arm = self.state(history)
        seen = seen_keys(history)
        order = [next_arm] + [a for a in active if a != next_arm] + list(reversed(eliminated))
        for arm in order:
            if not self.source.can_offer(seen, arm):
                continue
            arm_history = [history[i] for i in positions[arm]]
            suggestion = self.inner.suggest(arm_history, y_val, algorithm=arm, stream=1 + self.arms.index(arm),
                                            seen=seen)
            suggestion.info = {**suggestion.info, "arm": arm, "active_arms": len(active)}
            suggestion.seconds = time.perf_counter() - start
            return suggestion
        suggestion = self.inner.suggest(history, y_val, seen=seen)
        suggestion.info = {**suggestion.info, "arm": None}
        return suggestion
