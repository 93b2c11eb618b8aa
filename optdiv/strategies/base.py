"""What a suggestion strategy is, and what every strategy reads of a history.

A strategy is one object with ``suggest(history, y_val) -> Suggestion``: the next configuration, a pure function of
the seed and the observations so far (a resumed run suggests what an uninterrupted one would), so there is no
``observe`` step. The pieces here are the ones several strategies share: the suggestion record, the losses a
surrogate learns (failures and timeouts imputed), and the successful runs of a history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Protocol, Sequence

import numpy as np

from optdiv.evaluation.observation import PENDING


@dataclass
class Suggestion:
    """The configuration a strategy proposes, the seconds it took to choose, and what it says about its choice."""

    config: Dict
    seconds: float
    info: Dict = field(default_factory=dict)


class Strategy(Protocol):
    """What the search loop asks of a strategy: the next configuration, from the observations so far."""

    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        ...


def losses_with_failures(history) -> np.ndarray:
    """Validation losses; failed runs get the worst successful loss, so they repel without distorting the fit.
    A pending pseudo-observation keeps its believed loss (the surrogate's own prediction for it); a timeout
    gets :func:`imputed_loss`, since running out of time says a configuration is slow, not that it is bad."""
    losses = np.array([obs.val_loss for obs in history], dtype=np.float64)
    ok = np.array([obs.status in ("ok", PENDING) and np.isfinite(obs.val_loss) for obs in history])
    worst = losses[ok].max() if ok.any() else 1.0
    typical = float(np.median(losses[ok])) if ok.any() else None
    for i in np.flatnonzero(~ok):
        losses[i] = imputed_loss(history[i], typical, worst) if history[i].status == "timeout" else worst
    return losses


def imputed_loss(obs, typical: Optional[float], fallback: float) -> float:
    """The loss a search believes of a timed-out evaluation: its finished folds at their loss, the unfinished
    ones at ``typical`` (the median successful loss).

    A cross-validation timeout's ``partial_loss`` is an honest but noisier estimate of its loss: every unfinished
    fold is shrunk to the median, so a timeout after 4 of 5 folds counts nearly at its partial loss, one after 1
    fold nearly at the median, and one with no finished fold (or a holdout timeout) at the median. The worst
    loss would mark the whole region as bad and push the search away from accurate but slow algorithms (e.g.
    gradient boosting under a tight limit); that the region is slow is what the model-based strategies' finish
    probability weighs. ``fallback`` is used when nothing is known.
    """
    partial = getattr(obs, "partial_loss", None)
    done = int(getattr(obs, "folds_done", 0) or 0)
    if partial is None or not np.isfinite(partial) or done <= 0:
        return float(typical) if typical is not None else float(fallback)
    if typical is None:
        return float(partial)
    total = max(done + 1, int(getattr(obs, "folds_total", 0) or 0))
    return float((done * partial + (total - done) * typical) / total)


def successful(history: Sequence) -> List[int]:
    """Positions of the runs that left predictions (the only ones a pool or an ensemble may hold)."""
    return [i for i, obs in enumerate(history) if obs.status == "ok" and obs.val_pred is not None]


def best_loss(history: Sequence, positions: Sequence[int]) -> float:
    """Lowest validation loss among the successful runs at ``positions`` (inf when none succeeded)."""
    losses = [history[i].val_loss for i in positions if history[i].status == "ok" and np.isfinite(history[i].val_loss)]
    return float(min(losses)) if losses else float("inf")
