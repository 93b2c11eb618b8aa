"""DACOpt (Nguyen 2024): sub-spaces of similar algorithms, one BO each, and a contest that shares the budget.

The space's algorithms are split into at most ``max_groups`` sub-spaces by a fixed similarity hierarchy
(boosted trees, bagged trees, neighbours, discriminant analysis, linear models, kernel machines; unknown
algorithms stand alone), merging the closest groups first until few enough remain. Every sub-space is a
candidate running its own BO on its own observations.

- ``contest="highest"`` (DAC-H*): round 0 gives each candidate ``b_init`` evaluations (its initial design,
  charged to the budget) in a seeded random order; then ``R_max = floor(log_eta c)`` rounds keep the
  ``ceil(previous / eta)`` candidates with the best losses so far and share the round's budget equally among
  them (see optdiv.strategies.contest); what the floors leave goes to the best survivor at the end.
- ``contest="statistical"`` (DAC-S*): after round 0, survivors take one evaluation each per round; once each
  has more than 2 evaluations beyond its initial design, Friedman's (or Wilcoxon's) test on those losses,
  aligned by round, with Holm's correction, drops the significantly worse ones; a lone survivor gets the rest.

``inner`` chooses each candidate's optimiser: ``bo`` (PRF + EI, for the paper's BO4ML), ``tpe`` (for its
Hyperopt), or ``divbo`` / ``optdivbo`` with **one global pool and
one diversity surrogate**: the diversity term sees every observation of every sub-space (``context``), the
performance model only the candidate's own. The schedule is rebuilt from the history at every call, so a
resumed run continues exactly.
"""

from __future__ import annotations

import math
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.evaluation.observation import WORST_LOSS
from optdiv.spaces.candidates import SpaceCandidates, seen_keys
from optdiv.strategies.base import Suggestion, imputed_loss
from optdiv.strategies.contest import integer_log, round_budget, statistical_survivors, top_survivors
from optdiv.strategies.model_based import Optimizer

#: algorithm -> (family, super-family): the similarity tree the splitter merges along.
SIMILARITY = {
    "adaboost": ("boosting", "trees"),
    "gradient_boosting": ("boosting", "trees"),
    "lightgbm": ("boosting", "trees"),
    "catboost": ("boosting", "trees"),
    "xgboost": ("boosting", "trees"),
    "random_forest": ("bagging", "trees"),
    "extra_trees": ("bagging", "trees"),
    "decision_tree": ("bagging", "trees"),
    "k_nearest_neighbors": ("neighbours", "local"),
    "lda": ("discriminant", "linear"),
    "qda": ("discriminant", "linear"),
    "logistic_regression": ("linear", "linear"),
    "liblinear_svc": ("linear", "linear"),
    "liblinear_svr": ("linear", "linear"),
    "ridge": ("linear", "linear"),
    "linear": ("linear", "linear"),
    "sgd": ("linear", "linear"),
    "libsvm_svc": ("kernel", "kernel"),
    "libsvm_svr": ("kernel", "kernel"),
}


def split_algorithms(algorithms: Sequence[str], max_groups: int = 10) -> List[List[str]]:
    """Groups of similar algorithms, at most ``max_groups``: closest pairs (same family, then same
    super-family, then anything) are merged first, earliest groups first on ties."""
    if max_groups < 1:
        raise ValueError("max_groups must be at least 1")
    groups = [[a] for a in algorithms]

    def distance(a: List[str], b: List[str]) -> int:
        fa = {SIMILARITY.get(x, (x, x)) for x in a}
        fb = {SIMILARITY.get(x, (x, x)) for x in b}
        if {f for f, _ in fa} & {f for f, _ in fb}:
            return 1
        if {s for _, s in fa} & {s for _, s in fb}:
            return 2
        return 3

    while len(groups) > max_groups:
        best = min(((distance(groups[i], groups[j]), i, j) for i in range(len(groups))
                    for j in range(i + 1, len(groups))))
        _, i, j = best
        groups[i] = groups[i] + groups[j]
        del groups[j]
    return groups


class DACOpt:
    def __init__(self, space, metric: str, seed: int = 0, candidates=None, budget: Optional[int] = 250,
                 inner: str = "bo", contest: str = "highest", eta: int = 3, b_init: int = 5, max_groups: int = 10,
                 alpha: float = 0.05, selector_options: Optional[Dict] = None, **bo_options):
        if contest not in ("highest", "statistical"):
            raise ValueError(f"unknown contest {contest!r}; choose highest or statistical")
        if inner not in ("bo", "tpe", "divbo", "optdivbo"):
            raise ValueError(f"unknown inner optimiser {inner!r}; choose bo, tpe, divbo or optdivbo")
        if eta < 2 or b_init < 1:
            raise ValueError("DACOpt needs eta >= 2 and b_init >= 1")
        self.space, self.metric, self.seed = space, metric, int(seed)
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        groups = split_algorithms(self.source.algorithms(), max_groups)
        order = np.random.default_rng([self.seed, 7]).permutation(len(groups))  # the paper's RandomPermute
        self.groups = [groups[i] for i in order]
        self.inner = Optimizer(space, inner, metric, seed=seed, candidates=self.source,
                               n_initial=b_init, selector_options=selector_options, **bo_options)
        self.diverse = inner in ("divbo", "optdivbo")
        self.budget = int(budget) if budget is not None else 250
        self.contest, self.eta, self.b_init, self.alpha = contest, int(eta), int(b_init), float(alpha)

    # -- the schedule --------------------------------------------------------------------------------
    def assign(self, history: Sequence) -> Tuple[int, Dict[int, List[int]], List[int]]:
        """(candidate for the next evaluation, each candidate's history positions, survivors)."""
        c = len(self.groups)
        positions: Dict[int, List[int]] = {g: [] for g in range(c)}
        blocks: List[Tuple[int, int]] = [(g, self.b_init) for g in range(c)]  # round 0
        pos = 0

        def run_blocks(blocks) -> Optional[int]:
            nonlocal pos
            for g, count in blocks:
                for _ in range(count):
                    if pos >= len(history):
                        return g
                    positions[g].append(pos)
                    pos += 1
            return None

        nxt = run_blocks(blocks)
        if nxt is not None:
            return nxt, positions, list(range(c))
        survivors = list(range(c))
        if self.contest == "highest":
            r_max = integer_log(c, self.eta)
            for r in range(1, r_max + 1):
                keep = math.ceil(len(survivors) / self.eta)
                best = [self._best(history, positions[g]) for g in survivors]
                survivors = [survivors[i] for i in top_survivors(best, keep)]
                survivors.sort(key=lambda g: (self._best(history, positions[g]), g))
                b = round_budget(max(0, self.budget - pos), r, r_max, len(survivors))
                nxt = run_blocks([(g, b) for g in survivors])
                if nxt is not None:
                    return nxt, positions, survivors
            leader = min(survivors, key=lambda g: (self._best(history, positions[g]), g))
            run_blocks([(leader, len(history) - pos + 1)])  # what the floors left, to the best survivor
            return leader, positions, survivors
        while True:  # statistical contest: one evaluation per survivor per round
            extra = [positions[g][self.b_init:] for g in survivors]
            if len(survivors) > 1 and min(len(e) for e in extra) > 2:
                n = min(len(e) for e in extra)
                samples = [[self._loss(history, p) for p in e[:n]] for e in extra]
                survivors = [survivors[i] for i in statistical_survivors(samples, self.alpha)]
            nxt = run_blocks([(g, 1) for g in survivors])
            if nxt is not None:
                return nxt, positions, survivors

    def _loss(self, history: Sequence, position: int) -> float:
        """A run's loss; a timeout is imputed as the optimisers do (slow is not bad), other failures are worst."""
        obs = history[position]
        if obs.status == "ok" and np.isfinite(obs.val_loss):
            return obs.val_loss
        if obs.status == "timeout":
            ok = [o.val_loss for o in history if o.status == "ok" and np.isfinite(o.val_loss)]
            return imputed_loss(obs, float(np.median(ok)) if ok else None, WORST_LOSS[self.metric])
        return WORST_LOSS[self.metric]

    def _best(self, history: Sequence, positions: Sequence[int]) -> float:
        return min((self._loss(history, p) for p in positions), default=WORST_LOSS[self.metric])

    # -- suggestions ---------------------------------------------------------------------------------
    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        group, positions, survivors = self.assign(history)
        seen = seen_keys(history)
        order = [group] + [g for g in survivors if g != group] + [g for g in range(len(self.groups))
                                                                   if g not in survivors and g != group]
        for g in order:
            if not self.source.can_offer(seen, self.groups[g]):
                continue
            sub = [history[p] for p in positions[g]]
            suggestion = self.inner.suggest(sub, y_val, algorithm=self.groups[g], stream=1 + g, seen=seen,
                                            context=list(history) if self.diverse and len(sub) >= self.b_init
                                            else None)
            suggestion.info = {**suggestion.info, "subspace": g, "algorithms": list(self.groups[g]),
                               "survivors": len(survivors)}
            suggestion.seconds = time.perf_counter() - start
            return suggestion
        return self.inner.suggest(history, y_val, seen=seen)
