"""How long building the final model will take, predicted during the search so the search keeps that time back.

A time budget covers the whole call, final model included: the search stops early enough to choose the members,
load the saved ones and refit those it will refit (optdiv.final.fit). What it keeps time for follows the members the
final ensemble would hold if the search stopped now (:func:`likely_members`), not a fixed number of runs.
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.budget import FINISH_SECONDS, LOAD_BYTES_PER_SECOND, Deadline
from optdiv.core.ensemble import ensemble_selection
from optdiv.evaluation.pipelines import SavedPipelines
from optdiv.final.fit import REFIT_SAFETY, REFIT_WORKER_START, WORKER_REFIT_SAFETY
from optdiv.final.refit_time import RefitPace, fold_refit_seconds, refit_seconds

#: Members whose refit time is reserved when the likely final members cannot be chosen (no validation targets):
#: about as many distinct members as ensemble selection keeps.
REFIT_MEMBERS = 10
#: The likely final members (whose loading and refits the search keeps time for) are chosen by one ensemble
#: selection over this many of the best successful runs: cheap enough to repeat after every evaluation.
LIKELY_POOL = 50
#: Share of the worker refits' reserve that an evaluation already running may still use: the search starts an
#: evaluation only when its predicted duration fits before the whole reserve, but one that runs longer than
#: predicted is let finish as long as half the refits' time is left (instead of being cut at the search's end
#: and thrown away with the time it ran); the refits then take the heaviest members that still fit.
REFIT_OVERRUN_SHARE = 0.5


def likely_members(history: Sequence, y_val, loss: str, size: int, seed: int) -> List:
    """The observations the final ensemble would hold if the search stopped now: one ensemble selection on
    ``loss`` over the :data:`LIKELY_POOL` best successful runs (the :data:`REFIT_MEMBERS` best without
    validation targets). What the search keeps time for follows these members, not a fixed number of runs."""
    ok = sorted((obs for obs in history if obs.status == "ok" and obs.val_pred is not None),
                key=lambda obs: (obs.val_loss, obs.index))
    if len(ok) <= 1 or y_val is None:
        return ok[:REFIT_MEMBERS]
    pool = ok[:LIKELY_POOL]
    try:
        weights = ensemble_selection(np.stack([obs.val_pred for obs in pool]), y_val, loss, size=max(1, size),
                                     seed=seed).weights
    except ValueError:  # a loss selection cannot use here: fall back to the best runs
        return ok[:REFIT_MEMBERS]
    return [obs for obs, weight in zip(pool, weights) if weight > 0]


def worker_refit_seconds(obs, rows: Tuple[float, float]) -> float:
    """A member's predicted refit in the refit worker: its fit time grown from ``rows[0]`` to ``rows[1]`` rows as its
    algorithm's fit grows (:func:`optdiv.final.refit_time.refit_seconds`)."""
    return WORKER_REFIT_SAFETY * refit_seconds(obs.algorithm, obs.fit_seconds, *rows)


def finish_reserve(members: Sequence, pipelines: Optional[SavedPipelines], digest: Optional[str], refit: bool,
                   n_folds: Optional[int], started: bool = False, refits_share: float = 1.0,
                   rows: Tuple[float, float] = (3, 4), refits_cap: Optional[float] = None,
                   refitted: Optional[Callable[[object], bool]] = None,
                   pace: Optional[RefitPace] = None) -> float:
    """Predicted seconds from the end of the search to the end of the call for the final ``members``:
    :data:`FINISH_SECONDS`, loading (and saving again) the saved ones, and the refits
    :func:`optdiv.final.fit.fit_model` does.

    A k-fold evaluation's ``fit_seconds`` covers k fits on (k-1)/k of the rows, one refit on all rows a k-th of it
    grown to k/(k-1) of the rows (needed only when its fold pipelines are not saved); a refit on train+validation
    fits ``rows`` = (rows the member was fitted on, rows of train+validation): a third more than a 75 % training
    part, far more when the search fitted on a row sample; each refit's time grows with the rows as its algorithm's
    does (:func:`optdiv.final.refit_time.refit_seconds`). The refits run in a worker process under the deadline
    (:data:`~optdiv.final.fit.WORKER_REFIT_SAFETY`; :data:`~optdiv.final.fit.REFIT_WORKER_START` unless that worker
    was ``started`` during the search). ``refits_share`` counts that share of those worker refits only: they are
    optional (a member whose refit does not fit stays fitted on train), so an evaluation already running may use
    the rest (:data:`REFIT_OVERRUN_SHARE`). ``refits_cap``: the most seconds those refits are reserved (a search on a
    row sample, whose refits on every row could otherwise claim the whole budget before the search has begun); a member
    whose own refit is predicted over the cap is left out of it, since it will stay fitted on the sample. A member
    ``refitted`` says is done (refitted ahead, during the search) costs its loading only; ``pace`` corrects each
    worker refit's prediction by what the refits already taken (ahead) took of theirs.
    """
    reserve = FINISH_SECONDS
    if digest is not None and pipelines is not None:
        reserve += 2 * pipelines.bytes_of(digest, [obs.index for obs in members]) / LOAD_BYTES_PER_SECOND
    if n_folds is not None:
        if digest is None:  # refitted in the final step's own process, unless ``refitted`` ahead of it
            reserve += REFIT_SAFETY * sum(fold_refit_seconds(obs.algorithm, obs.fit_seconds, n_folds)
                                          for obs in members if refitted is None or not refitted(obs))
    elif refit:
        each = [worker_refit_seconds(obs, rows) if pace is None
                else pace.correct(obs.algorithm, worker_refit_seconds(obs, rows))
                for obs in members if refitted is None or not refitted(obs)]
        refits = sum(each)
        if refits_cap is not None:  # a member whose own refit is over the cap is never refitted: nothing kept for it
            refits = min(sum(t for t in each if t <= refits_cap), refits_cap)
        reserve += (0.0 if started else REFIT_WORKER_START) + refits_share * refits
    elif digest is None:
        reserve += REFIT_SAFETY * sum(obs.fit_seconds for obs in members)
    return reserve


class FinishReserve:
    """The seconds the search may still use: the time left before ``deadline`` less the predicted time of building
    the final model from the history as it stands (recomputed when an evaluation was recorded since, or the time
    left changed by a tenth of a second: a refit predicted longer than the time left is kept no time for).
    ``started``: the refit worker was started with the search (:class:`optdiv.final.fit.Refitter`), so its
    start-up is not reserved; ``pace``: that worker's record of what its refits took of their predictions."""

    def __init__(self, deadline: Optional[Deadline], y_val, loss: str, ensemble_size: int, seed: int, refit: bool,
                 n_folds: Optional[int], pipelines: Optional[SavedPipelines], digest: Optional[str],
                 history: Sequence = (), started: bool = False, rows: Tuple[float, float] = (3, 4),
                 refits_cap: Optional[float] = None, refitted: Optional[Callable[[object], bool]] = None,
                 pace: Optional[RefitPace] = None):
        self.deadline, self.y_val, self.loss, self.ensemble_size, self.seed = deadline, y_val, loss, ensemble_size, seed
        self.pace = pace
        self.refit, self.n_folds, self.pipelines, self.digest = refit, n_folds, pipelines, digest
        self.started, self.rows, self.refits_cap, self.refitted = started, rows, refits_cap, refitted
        self.latest: Sequence = history  # the history as the loop last handed it over
        self.computed: Optional[tuple] = None  # (history key, seconds, seconds less the overrun) last computed
        self.members: List = []  # the likely final members of the history last computed

    def follow(self, history: Sequence) -> None:
        """The history after a recorded evaluation: the next :meth:`seconds` plans for it."""
        self.latest = history

    def seconds(self, overrun: bool = False) -> float:
        """Predicted seconds of building the final model from the history as it stands; ``overrun``: less the
        refits a late evaluation may take (:data:`REFIT_OVERRUN_SHARE`)."""
        key = (len(self.latest), self.latest[-1].index if self.latest else None)
        cap = self.refits_cap
        if self.deadline is not None:
            # a refit longer than the time left will not happen (fit_model skips it): keeping time for it would only
            # end the search early; in tenths of a second, so the plan is redone at most ten times a second
            left = math.floor(10 * max(0.0, self.deadline.left() - FINISH_SECONDS)) / 10
            cap = left if cap is None else min(cap, left)
        if self.computed is None or self.computed[0] != key or self.computed[1] != cap:
            if self.computed is None or self.computed[0] != key:
                self.members = likely_members(self.latest, self.y_val, self.loss, self.ensemble_size, self.seed)
            both = [finish_reserve(self.members, self.pipelines, self.digest, self.refit, self.n_folds,
                                   started=self.started, refits_share=share, rows=self.rows,
                                   refits_cap=cap, refitted=self.refitted, pace=self.pace)
                    for share in (1.0, 1.0 - REFIT_OVERRUN_SHARE)]
            self.computed = (key, cap, *both)
        return self.computed[3 if overrun else 2]

    def forget(self) -> None:
        """Plan again at the next :meth:`seconds` (members were refitted ahead: their refits need no more time)."""
        self.computed = None

    def search_left(self) -> float:
        """Seconds the search may still use: the time left less what building the final model needs."""
        return self.deadline.left() - self.seconds()

    def run_left(self) -> float:
        """Seconds an evaluation already running may still use: the time left less the final model's reserve
        without the share of its optional refits that a late evaluation may take (:data:`REFIT_OVERRUN_SHARE`)."""
        return self.deadline.left() - self.seconds(overrun=True)
