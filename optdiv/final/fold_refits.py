"""Cross-validated members refitted on all the rows while the search still runs, so their time goes back to it.

A k-fold evaluation without fold bags saves no model: every final member is fitted on all the rows in the final
step, and the search keeps that refit's predicted time (with :data:`~optdiv.final.fit.REFIT_SAFETY`) back. When
that reserve is large, most of it is usually left unused and the call ends early. So when the search would stop for
the reserve, the likely members are refitted here, in the search's own process, and kept in memory: the reserve
then holds nothing for them, the time a refit quicker than predicted saves goes back to the search, and the final
step takes them as they are.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Sequence

from optdiv.evaluation.anytime import kept_rounds
from optdiv.final.fit import REFIT_SAFETY, fit_pipeline
from optdiv.final.refit_time import fold_refit_seconds

#: The members' refits are run ahead only when those still to do are predicted (safety included) to take at least
#: this long: shorter reserves cost the call little time, and refitting them each time the members change would
#: cost the search evaluations.
FOLD_REFITS_AHEAD_SECONDS = 5.0


class FoldRefits:
    """The members of a cross-validated search fitted on all its rows ahead of the final step (by evaluation index).

    ``X``, ``y``: every row of the cross-validation (its view's training part); ``threads``: each evaluation's, so
    a refit takes what its evaluation's fit times predict."""

    def __init__(self, space, X, y, task: str, seed: int, n_folds: int, threads: int = 1):
        self.space, self.X, self.y, self.task, self.seed = space, X, y, task, seed
        self.n_folds, self.threads = n_folds, threads
        self.pipelines: Dict[int, object] = {}  # evaluation index -> the member fitted on all rows
        self.failed: Dict[int, str] = {}  # evaluation index -> why its refit failed (the final step tries again)
        self.times: List[Dict] = []  # every refit run ahead, as the final-model report lists them

    def predicted(self, obs) -> float:
        """``obs``'s refit on all the rows, as the search's reserve predicts it."""
        return REFIT_SAFETY * fold_refit_seconds(obs.algorithm, obs.fit_seconds, self.n_folds)

    def has(self, obs) -> bool:
        """Whether ``obs`` is refitted already (the reserve keeps no time for it)."""
        return obs.index in self.pipelines

    def refit_ahead(self, members: Sequence, left: Callable[[], float]) -> bool:
        """Refit, in the order given, the ``members`` not refitted yet whose predicted refit fits in ``left()``
        seconds, when those still to do are predicted to take :data:`FOLD_REFITS_AHEAD_SECONDS` or more; refits of
        runs that are no longer among ``members`` are dropped, so memory follows the members. True when one ran."""
        keep = {obs.index for obs in members}
        self.pipelines = {i: pipe for i, pipe in self.pipelines.items() if i in keep}
        todo = [obs for obs in members if obs.index not in self.pipelines and obs.index not in self.failed]
        if sum(self.predicted(obs) for obs in todo) < FOLD_REFITS_AHEAD_SECONDS:
            return False
        ran = False
        for obs in todo:
            expected = self.predicted(obs)
            if expected > left():
                continue
            began = time.perf_counter()
            pipe, error = fit_pipeline(self.space, obs.config, self.X, self.y, self.seed, self.task, self.threads,
                                       kept_rounds(obs.measures))
            if pipe is None:
                self.failed[obs.index] = error
            else:
                self.pipelines[obs.index] = pipe
            self.times.append({"index": obs.index, "predicted": round(expected, 2),
                               "seconds": round(time.perf_counter() - began, 2), "ok": pipe is not None,
                               "ahead": True})
            ran = True
        return ran
