"""Small pieces the baselines share: successful runs, their losses and stacked validation predictions."""

from __future__ import annotations

from typing import List, Sequence

import numpy as np


def successful(history: Sequence) -> List[int]:
    return [i for i, obs in enumerate(history) if obs.status == "ok" and obs.val_pred is not None]


def best_loss(history: Sequence, positions: Sequence[int]) -> float:
    """Lowest validation loss among the successful runs at ``positions`` (inf when none succeeded)."""
    losses = [history[i].val_loss for i in positions if history[i].status == "ok" and np.isfinite(history[i].val_loss)]
    return float(min(losses)) if losses else float("inf")
