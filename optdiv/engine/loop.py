"""The search loop: suggest, issue, run, record, until the budget, over any runner (optdiv.execution.runner).

One loop serves one evaluation at a time (:class:`~optdiv.execution.sequential.SequentialRunner`) and many at once
(:class:`~optdiv.execution.dask_runner.DaskRunner`), so a rule of the search (the time budget, exact resume,
constraints, pruning of saved pipelines) is written once and holds however the evaluations run.

Each round: re-issue what a stopped run left in flight, then, while the runner has room and the budget and the
time left allow, suggest, write the suggestion to the issued log and submit it; then wait for evaluations to end
and record them.

Pending evaluations
-------------------
A suggestion made while evaluations run sees the finished observations (in index order) followed by one
pseudo-observation per running configuration, status :data:`~optdiv.evaluation.observation.PENDING`:

- performance, a Kriging believer: its ``val_loss`` is the mean of a random forest over the finished
  observations (the mean successful loss while fewer than two are finished), so BO's expected improvement
  is pushed away from it;
- diversity: its ``val_pred`` is the mean validation prediction of the three nearest successful
  configurations in the encoding, so DivBO / OptDivBO's pool and diversity see its predicted behaviour
  and a batch is diverse within itself too.

The pseudo-observations exist only inside that one ``suggest`` call: they never reach the store, the final
ensemble or the result. The history handed to ``suggest`` has one entry per issued evaluation, so its length is
the new evaluation's index and suggestions stay pure functions of (seed, history). Strategies other than
rs / bo / tpe / divbo / optdivbo see a pending entry as a failed run (a pessimistic liar). With one evaluation
at a time nothing is ever pending, so one Dask worker makes the history a sequential run makes.

Exact resume
------------
Every evaluation is written, fsynced, to the store's issued log (:class:`~optdiv.storage.issued.IssuedLog`, a run
directory's ``issued.jsonl``) before it is submitted; results are appended to the store as they end. A
resumed run first re-submits every issued index without a result (same index, same configuration), so a
kill at any point loses and duplicates nothing, whichever runner ran it.

Lost evaluations
----------------
A runner reports an evaluation it lost (worker killed, task cancelled, no result in time); it is re-queued
once, and recorded as ``"failed"`` with the reason when it is lost again.

Time budget
-----------
Under a time budget (``time_left``: the seconds the search may still use) the loop issues an evaluation only
while one may fit: the last suggestion's seconds plus the fastest algorithm's predicted duration (nothing
while some algorithm is untried). A suggestion predicted not to fit is replaced by a random configuration of
an algorithm that does (:func:`fitting_configuration`; the live space only), so the time left still buys
evaluations; that holds with several workers too, since each evaluation is capped at the time left on its own.
That cap (``run_left``) may reach past the search's own end into the part of the final model's reserve that is
optional (refits on more rows), so an evaluation that runs longer than predicted still counts instead of being
thrown away with the time it ran.
When nothing fits any more, ``ahead`` (the engine's refits of the likely final members) may first do part of the final
model's work; when that gives time back (the reserve was larger than the work), the search goes on, also after an
evaluation was cut at the deadline or when the next suggestion does not fit the time left.
An evaluation cut at the deadline (:data:`~optdiv.evaluation.observation.DEADLINE`) is not recorded: it stays issued
without a result, so a resumed run evaluates it again. Evaluations still running :data:`GIVE_UP_SECONDS` past
the search's end are cancelled.
"""

from __future__ import annotations

import bisect
import json
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.core.believers import BELIEVER_NEIGHBOURS, BELIEVER_TREES, believed_losses, believed_predictions
from optdiv.evaluation.constraints import enforce
from optdiv.evaluation.observation import (DEADLINE, PENDING, WORST_LOSS, Observation, algorithm_of,
                                           worker_start_failed)
from optdiv.spaces.base import searched_algorithms
from optdiv.spaces.candidates import SpaceCandidates, seen_keys
from optdiv.storage.atomic import to_jsonable
from optdiv.storage.base import Store
from optdiv.strategies.base import losses_with_failures

#: Times one evaluation may be lost (worker killed, task cancelled, deadline passed) before it is recorded
#: as failed: lost once it is re-queued, lost twice it fails.
MAX_LOSSES = 2

#: Seconds past the end of a time-budgeted search after which evaluations still running are cancelled (each
#: is capped at the deadline already: this covers a worker that does not answer).
GIVE_UP_SECONDS = 3.0

#: Evaluations in a row whose worker process died starting, before any evaluation succeeded, after which the search
#: stops (:func:`~optdiv.evaluation.observation.worker_start_failed`): the cause is the same for every later start,
#: and a time budget of an hour would otherwise be spent restarting workers before the error is named.
START_FAILURES_TO_STOP = 3

#: Why a search stopped whose time ran out while evaluations were running, and whose refits run ahead (asked once
#: those ended) gave no time back.
RAN_OUT = "time budget: the search's time ran out"

#: ``LoopResult.stopped`` of a search stopped by :data:`START_FAILURES_TO_STOP`.
WORKERS_WOULD_NOT_START = "worker processes could not start"


@dataclass
class LoopResult:
    """What the loop hands to the final step."""

    history: List[Observation]  # every recorded observation, in index order
    suggest_seconds: List[float]  # of this session's suggestions that were recorded, in index order
    stopped: Optional[str] = None  # why the search stopped before its budget (the time budget), if it did
    fill_ins: int = 0  # suggestions replaced by a configuration that fits in the time left
    went_on: int = 0  # times the search went on after refits run ahead gave back time it had kept for them
    parallel: Optional[Dict] = None  # the runner's report plus re-queued, lost and re-issued indices


def search_loop(strategy, runner, history: List[Observation], *, y_val, space, seed: int, loss: str,
                budget: Optional[int], predictor, store: Store, time_left: Optional[Callable[[], float]] = None,
                run_left: Optional[Callable[[], float]] = None, fill_in: bool = True, constraints: Sequence = (),
                progress: Optional[Callable[[int, Optional[int], Observation], None]] = None,
                on_finished: Optional[Callable[[List[Observation], Sequence[int]], None]] = None,
                ahead: Optional[Callable[[List[Observation]], bool]] = None) -> LoopResult:
    """Run evaluations on ``runner`` until ``budget`` evaluations are recorded or the time is up.

    ``history``: the stored observations (a resumed run), extended in place in index order; ``store``: where every
    evaluation is issued and recorded (its issued log, its observations). ``loss``: the run's
    metric (a lost evaluation's recorded loss). ``predictor``: a :class:`~optdiv.budget.DurationPredictor`.
    ``time_left()``: seconds the search may still use (None: no time budget); ``run_left()`` (default:
    ``time_left``): seconds an evaluation already started may still use, its cap. ``fill_in``: replace a suggestion
    that does not fit in the time left (False for a replay, whose library has only the members it has).
    ``on_finished(history, ensemble)`` runs after each recorded observation, with the evaluation indices of the
    ensemble the latest suggestion was made for (saved pipelines to keep); ``progress(recorded, budget, obs)`` too.
    The search also stops after :data:`START_FAILURES_TO_STOP` evaluations in a row whose worker died starting.
    ``ahead(history)``: run when the time left would end the search, to do part of the final model's work now (the
    refits); True when it did some, and the loop then checks the time left again.
    """
    done = history  # kept in index order; with one evaluation at a time every record appends
    log = store.issued
    records = log.load()
    recorded = {int(obs.index) for obs in done}
    reissue = sorted(i for i in records if i not in recorded)
    next_index = max(list(recorded) + list(records), default=-1) + 1
    missing = sorted(set(range(next_index)) - recorded - set(records))
    if missing:
        raise ValueError(f"run {store.location}: evaluations {missing[:10]} were neither issued "
                         f"nor recorded; the run directory is damaged")
    state = {"stopped": None, "last_seconds": 0.0, "ensemble": [], "ahead": 0, "cut": False, "ran_out": False,
             "broken_starts": 0,
             "succeeded": any(obs.status == "ok" for obs in done)}
    stats = {"requeued": [], "lost": [], "reissued": list(reissue)}
    suggested: Dict[int, float] = {}
    running: Dict[int, dict] = {}  # index -> configuration, of every evaluation submitted and not yet ended
    losses: Dict[int, int] = {}
    fill_ins = 0
    believer = None

    running_left = time_left if run_left is None else run_left

    def cap() -> Optional[float]:
        return None if time_left is None else max(running_left(), 0.0)

    def submit(index: int, config: dict, limit: Optional[float]) -> None:
        running[index] = config
        runner.submit(index, config, limit)

    def may_issue() -> bool:
        if state["stopped"] is not None or not (budget is None or next_index < budget):
            return False
        if time_left is not None and not fits():
            if ahead is None or not ahead(done) or not fits():
                state["stopped"] = ("time budget: the last evaluation was stopped at the deadline and discarded"
                                    if state["cut"] else RAN_OUT if state["ran_out"]
                                    else "time budget: no evaluation fits in the time left")
                return False
            state["ahead"] += 1
        state["cut"] = state["ran_out"] = False  # the search goes on: a later stop is for its own reason
        return True

    def fits() -> bool:
        return time_left() > state["last_seconds"] + least_duration(space, predictor)

    def record(obs: Observation, seconds: float) -> None:
        predictor.observe(obs.algorithm, seconds)
        if obs.status == DEADLINE:  # the run's time ran out, not the configuration's: nothing to learn, and it
            # stays issued without a result, so a resumed run evaluates it again; the search ends unless refits
            # run ahead give time back (may_issue)
            state["cut"] = True
            return
        obs = enforce(obs, constraints)
        if obs.recorded_at is None:  # for progress against wall time (optdiv.show.view); no search reads it
            obs.recorded_at = time.time()
        store.append(obs)
        if done and done[-1].index > obs.index:
            done.insert(bisect.bisect([o.index for o in done], obs.index), obs)
        else:
            done.append(obs)
        note_start(obs)
        if on_finished is not None:
            on_finished(done, state["ensemble"])
        if progress is not None:
            progress(len(done), budget, obs)

    def note_start(obs: Observation) -> None:
        state["succeeded"] = state["succeeded"] or obs.status == "ok"
        broke = worker_start_failed(obs) and not state["succeeded"]
        state["broken_starts"] = state["broken_starts"] + 1 if broke else 0
        if state["broken_starts"] >= START_FAILURES_TO_STOP and state["stopped"] is None:
            state["stopped"] = (f"{WORKERS_WOULD_NOT_START}: {state['broken_starts']} evaluations in a row failed "
                                f"while their worker process started, before any evaluation succeeded")

    def ended(item) -> None:
        running.pop(item.index, None)
        if item.observation is not None:
            record(item.observation, item.seconds)
            return
        losses[item.index] = losses.get(item.index, 0) + 1
        if losses[item.index] < MAX_LOSSES:
            stats["requeued"].append(item.index)
            submit(item.index, item.config, cap())
            return
        stats["lost"].append(item.index)
        record(Observation(config=dict(item.config), status="failed", val_loss=WORST_LOSS[loss],
                           fit_seconds=item.seconds, index=item.index, algorithm=algorithm_of(item.config),
                           error=f"evaluation lost {MAX_LOSSES} times (re-queued once): {item.lost}"[:3000],
                           measures={"fit_seconds": item.seconds}), item.seconds)

    runner.open()
    try:
        while True:
            while runner.running < runner.capacity:
                if reissue and (time_left is None or time_left() > 0):
                    index = reissue.pop(0)
                    submit(index, dict(records[index]["config"]), cap())
                    continue
                if not may_issue():
                    break
                pending = sorted(running)
                seen = done
                if pending:
                    believer = believer or BelieverModel(space, seed)
                    seen = with_pending(done, [(i, running[i]) for i in pending], believer)
                suggestion = strategy.suggest(seen, y_val=y_val)
                config = suggestion.config
                limit = None
                if time_left is not None:
                    left = time_left()
                    if left > 0 and predictor.predict(algorithm_of(config)) > left:
                        other = fitting_configuration(space, predictor, left, seen, seed) if fill_in else None
                        fill_ins += other is not None
                        if other is not None:
                            config = other
                        elif algorithm_of(config) not in predictor.seconds:
                            pass  # nothing known fits, and this one is untried: try it, capped at the deadline
                        else:
                            config = None
                    if left <= 0 or config is None:
                        if ahead is not None and ahead(done) and time_left() > left:
                            state["ahead"] += 1  # the refits run ahead gave time back: suggest again
                            continue
                        name = algorithm_of(suggestion.config) or "unknown"
                        state["stopped"] = (f"time budget: the next evaluation ({name}) would not fit in the "
                                            f"{max(left, 0.0):.1f} s left")
                        break
                    limit = max(running_left(), left)
                if runner.canonical_configs:
                    config = canonical_config(config)
                index = next_index
                next_index += 1
                suggested[index] = state["last_seconds"] = suggestion.seconds
                state["ensemble"] = current_ensemble(suggestion, seen)
                log.append(index, config, pending)  # persisted before it runs anywhere
                submit(index, config, limit)
            if not runner.running:
                break
            give_up = None
            if time_left is not None:
                left = time_left()
                give_up = time.perf_counter() + max(running_left(), left) + GIVE_UP_SECONDS
                # not a stop yet: once the running evaluations end, the refits run ahead may give time back
                state["ran_out"] = state["ran_out"] or left <= 0
            finished = runner.wait(give_up)
            if finished is None:  # past the deadline with evaluations still running: closing the runner cancels them
                state["stopped"] = state["stopped"] or RAN_OUT
                break
            for item in finished:
                ended(item)
    finally:
        runner.close()
    report = runner.describe()
    parallel = None if report is None else {"workers": report["workers"], **stats,
                                            "startup_seconds": report["startup_seconds"], "stopped": state["stopped"]}
    recorded = {obs.index for obs in done}
    return LoopResult(history=done, suggest_seconds=[suggested[i] for i in sorted(suggested) if i in recorded],
                      stopped=state["stopped"], fill_ins=fill_ins, parallel=parallel, went_on=state["ahead"])


def canonical_config(config: dict) -> dict:
    """The configuration as the issued log gives it back on resume (plain JSON types), so a resumed run
    evaluates the very values an uninterrupted one does."""
    return json.loads(json.dumps(to_jsonable(dict(config)), sort_keys=True))


def current_ensemble(suggestion, history: Sequence) -> List[int]:
    """Evaluation indices of the ensemble a diversity-aware suggestion was made for (its pool), if it says."""
    info = getattr(suggestion, "info", None)
    pool = info.get("pool", ()) if isinstance(info, dict) else ()
    return [history[i].index for i in pool if 0 <= int(i) < len(history)]


# --------------------------------------------------------------------------- the time budget


def fitting_configuration(space, predictor, left: float, history: Sequence, seed: int) -> Optional[Dict]:
    """A random new configuration of an algorithm already seen to fit in ``left`` seconds, or, when none is, of
    one not yet tried (its duration is unknown, so it may fit), or None.

    Near the deadline the strategy's suggestion may be predicted not to fit while faster algorithms would: the
    time left then still buys evaluations (random ones, as in the initial design), instead of being lost.
    Deterministic in (seed, number of evaluations), so a resumed run draws the same.
    """
    fitting = [a for a in searched_algorithms(space) if a in predictor.seconds and predictor.predict(a) <= left]
    if not fitting:  # e.g. the only algorithm tried so far timed out: an untried one may still fit
        fitting = untried_algorithms(space, predictor)
    if not fitting:
        return None
    rng = np.random.default_rng([int(seed), len(history), 0x71AE])
    try:
        return SpaceCandidates(space).random(rng, seen_keys(history), algorithm=fitting)
    except RuntimeError:
        return None


def untried_algorithms(space, predictor) -> List[str]:
    """The algorithms the search may suggest with no observed duration yet."""
    return [a for a in searched_algorithms(space) if a not in predictor.seconds]


def least_duration(space, predictor) -> float:
    """The shortest duration an evaluation may have: 0 while some algorithm of the space is untried (nothing is
    known of it), else the fastest algorithm's predicted duration."""
    return 0.0 if untried_algorithms(space, predictor) else predictor.fastest()


# --------------------------------------------------------------------------- pending pseudo-observations


class BelieverModel:
    """Pseudo-observations for pending configurations: believed loss and believed predictions (see the
    module docstring; the rules are the core's, :mod:`optdiv.core.believers`). Deterministic in (seed, number
    of finished and pending evaluations)."""

    def __init__(self, space, seed: int = 0, n_trees: int = BELIEVER_TREES, neighbours: int = BELIEVER_NEIGHBOURS):
        self.source = SpaceCandidates(space)
        self.seed, self.n_trees, self.neighbours = int(seed), int(n_trees), int(neighbours)

    def believers(self, finished: Sequence, pending: Sequence[Tuple[int, dict]]) -> List[Observation]:
        if not pending:
            return []
        configs = [dict(config) for _, config in pending]
        pending_x = self.source.space.encode(configs)
        losses = self._believed_losses(finished, pending_x, len(finished) + len(pending))
        preds = self._believed_predictions(finished, pending_x)
        return [
            Observation(config=config, status=PENDING, val_loss=float(loss), index=int(index),
                        algorithm=algorithm_of(config), val_pred=pred)
            for (index, _), config, loss, pred in zip(pending, configs, losses, preds)
        ]

    def _believed_losses(self, finished: Sequence, pending_x: np.ndarray, step: int) -> np.ndarray:
        ok = [obs.val_loss for obs in finished if obs.status == "ok" and np.isfinite(obs.val_loss)]
        fallback = float(np.mean(ok)) if ok else float("nan")  # nan: optimisers read it as a failure
        if len(finished) < 2:  # no forest yet, and nothing to encode or impute (the core falls back alike)
            return np.full(len(pending_x), fallback)
        seed = int(np.random.default_rng([self.seed, step, 0xBE11]).integers(2**31))
        return believed_losses(self.source.encode_history(finished), losses_with_failures(finished), pending_x,
                               fallback, seed, self.n_trees)

    def _believed_predictions(self, finished: Sequence, pending_x: np.ndarray) -> List[Optional[np.ndarray]]:
        ok = [obs for obs in finished if obs.status == "ok" and obs.val_pred is not None]
        if not ok:
            return [None] * len(pending_x)
        return believed_predictions(self.source.encode_history(ok), np.stack([obs.val_pred for obs in ok]),
                                    pending_x, self.neighbours)


def with_pending(finished: Sequence, pending: Sequence[Tuple[int, dict]], believer: BelieverModel) -> List:
    """The history a suggestion sees: the finished observations followed by believers for the pending ones."""
    return list(finished) + believer.believers(finished, pending)
