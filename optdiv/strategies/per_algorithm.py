"""kBO: one BO per algorithm, each given an equal share of the budget (DivBO's Table 11 "kBO-ES").

Evaluations go round-robin over the algorithms, so after t evaluations each has had t / k of them
(about 22 of 250 for the auto-sklearn space's 11 classifiers); each algorithm's BO sees only its own
observations. An algorithm with nothing left to offer (replay libraries) drops out of the rotation.
"""

from __future__ import annotations

import time
from typing import Optional, Sequence

from optdiv.spaces.candidates import SpaceCandidates, seen_keys
from optdiv.strategies.base import Suggestion
from optdiv.strategies.model_based import Optimizer


class PerAlgorithmBO:
    def __init__(self, space, metric: str, seed: int = 0, candidates=None, **bo_options):
        self.space = space
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.arms = self.source.algorithms()
        self.inner = Optimizer(space, "bo", metric, seed=seed, candidates=self.source, **bo_options)

    def _arm_of(self, obs) -> Optional[str]:
        arm = obs.algorithm or self.space.algorithm_of(obs.config)
        return arm if arm in self.arms else None

    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        seen = seen_keys(history)
        counts = {arm: 0 for arm in self.arms}
        for obs in history:
            arm = self._arm_of(obs)
            if arm is not None:
                counts[arm] += 1
        open_arms = [arm for arm in self.arms if self.source.can_offer(seen, arm)]
        if not open_arms:
            return self.inner.suggest(history, y_val, seen=seen)
        arm = min(open_arms, key=lambda a: (counts[a], self.arms.index(a)))
        arm_history = [obs for obs in history if self._arm_of(obs) == arm]
        suggestion = self.inner.suggest(arm_history, y_val, algorithm=arm, stream=1 + self.arms.index(arm), seen=seen)
        suggestion.info = {**suggestion.info, "arm": arm}
        suggestion.seconds = time.perf_counter() - start
        return suggestion
