"""Pending-aware re-ranking: a host's candidates ordered by the selector, with running configurations counted.

A suggestion made while other configurations are being evaluated (several workers, or the earlier slots of a
batch) must be diverse against them too, or DivBO / OptDivBO pick a configuration whose behaviour a running one
already covers. Each running configuration therefore enters the selector as a pseudo-observation for that one
call: its encoding, and validation predictions *believed* from its nearest finished neighbours
(:func:`optdiv.core.believers.believed_predictions`). The standalone engine's optimiser, the OpenBox advisors, the
auto-sklearn maximiser and the AutoGluon HPO searcher all choose through :func:`pick_with_pending`; each host keeps
its own candidates, performance acquisition and records, and hands arrays only.
"""

from __future__ import annotations

import time
from typing import Hashable, List, NamedTuple, Optional

import numpy as np

from .believers import BELIEVER_NEIGHBOURS, believed_predictions
from .selector import Selection


class Rows(NamedTuple):
    """The observations a pending-aware selection is fitted on: the finished ones, then the pending ones."""

    x: np.ndarray  # (f + r, d) encodings
    preds: np.ndarray  # (f + r, rows[, classes]) finished predictions as given, then the pending ones' believed
    pending: int  # r


def with_believers(finished_x, finished_preds, pending_x=None, pending_preds=None,
                   neighbours: int = BELIEVER_NEIGHBOURS) -> Rows:
    """The finished rows followed by one pseudo-observation per pending configuration.

    ``pending_preds``: the pending rows' predictions when the host believed them already (the engine believes
    them once over its whole history, before a strategy may see only part of it); by default each is the
    :func:`~optdiv.core.believers.believed_predictions` of the finished rows. Pending predictions take the
    finished ones' dtype, so a believer never changes the precision the selector works in. Without pending rows
    the finished arrays are returned as they are.
    """
    finished_x = np.asarray(finished_x, dtype=np.float64)
    finished_preds = np.asarray(finished_preds)
    if pending_x is None or len(pending_x) == 0:
        return Rows(finished_x, finished_preds, 0)
    pending_x = np.asarray(pending_x, dtype=np.float64)
    if pending_preds is None:
        pending_preds = np.stack(believed_predictions(finished_x, finished_preds, pending_x, neighbours))
    pending_preds = np.asarray(pending_preds)
    if pending_preds.shape[0] != pending_x.shape[0]:
        raise ValueError(f"need predictions for every pending configuration: {pending_x.shape[0]} encodings, "
                         f"predictions of shape {pending_preds.shape}")
    return Rows(np.concatenate([finished_x, pending_x]),
                np.concatenate([finished_preds, pending_preds.astype(finished_preds.dtype)]), len(pending_x))


class Pick(NamedTuple):
    """One slot of :func:`pick_with_pending`."""

    index: int  # the chosen candidate, as a position in the candidates given
    order: np.ndarray  # the candidates this slot ranked, best first (positions in the candidates given)
    selection: Selection  # the selector's answer; its arrays follow this slot's candidates in the order given
    first: int  # the chosen candidate's position among this slot's candidates (0: the host's own first)
    rows: int  # observations the selector was fitted on: finished, pending and the batch's earlier picks
    believers: int  # of which pending configurations and earlier picks
    seconds: float  # spent on this slot


def pick_with_pending(selector, candidates_x, perf_acq, finished_x, finished_preds, y_val, pending_x=None, *,
                      pending_preds=None, slots: int = 1, t: Optional[int] = None,
                      version: Optional[Hashable] = None, diversity=None) -> List[Pick]:
    """The next ``slots`` candidates, picked one after another by ``selector`` (a
    :class:`~optdiv.core.selector.DiversityAwareSelector`, refitted for every slot).

    Every slot fits the selector on the finished rows, the pending configurations (:func:`with_believers`) and
    the earlier slots' picks, each pick believed from the finished rows like a pending configuration, then
    ranks the candidates not picked yet, in the order given (a host's candidate list order breaks ties), by
    ``perf_acq`` (larger is better) and diversity. ``t``: the weight's step of the first slot, one more per later
    slot (None: the selector's default, the rows it is fitted on). ``version`` identifies the first slot's rows
    for the selector's refit check (later slots add picks, so their rows are hashed); ``diversity``: the first
    slot's precomputed pairwise diversity of those rows (one slot only). Fewer picks than ``slots`` come back
    when the candidates run out.
    """
    started = time.perf_counter()
    candidates_x = np.asarray(candidates_x, dtype=np.float64)
    perf_acq = np.asarray(perf_acq, dtype=np.float64)
    slots = max(1, int(slots))
    if diversity is not None and slots > 1:
        raise ValueError("a precomputed diversity matrix covers one slot's rows; later slots add their picks")
    base = with_believers(finished_x, finished_preds, pending_x, pending_preds)
    n_finished = base.x.shape[0] - base.pending
    picks: List[Pick] = []
    remaining = np.arange(candidates_x.shape[0])
    chosen: List[int] = []
    for slot in range(slots):
        if remaining.size == 0:
            break
        rows = base
        if chosen:
            picked = with_believers(base.x[:n_finished], base.preds[:n_finished], candidates_x[chosen])
            rows = Rows(np.concatenate([base.x, picked.x[n_finished:]]),
                        np.concatenate([base.preds, picked.preds[n_finished:]]), base.pending + len(chosen))
        selector.fit(rows.x, rows.preds, y_val, version=version if slot == 0 else None, diversity=diversity)
        selection = selector.score(candidates_x[remaining], perf_acq[remaining], None if t is None else t + slot)
        ranked = np.argsort(selection.scores, kind="stable")
        first = int(ranked[0])
        now = time.perf_counter()
        picks.append(Pick(int(remaining[first]), remaining[ranked], selection, first, int(rows.x.shape[0]),
                          rows.pending, now - started))
        started = now
        chosen.append(int(remaining[first]))
        remaining = np.delete(remaining, first)  # the rest stay in the host's order for the next slot
    return picks
