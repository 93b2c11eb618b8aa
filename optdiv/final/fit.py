"""Fitting the chosen members into the final model after the search: loaded where the evaluator saved them,
refitted on train+validation where asked and where the time budget allows, heaviest weight first.

The search keeps back the predicted time of this step (optdiv.final.reserve); here the deadline is kept as the
members are fitted: a refit predicted not to fit is skipped (the member stays fitted on train), one that overruns
in its worker process is stopped there, and a member whose fit fails is left out with the weights rescaled.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.budget import FINISH_SECONDS, Deadline
from optdiv.data import Splits
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.anytime import kept_rounds
from optdiv.evaluation.fitting import build_pipeline
from optdiv.evaluation.threads import with_threads
from optdiv.evaluation.pipelines import SavedPipelines, part_rows_digest, splits_digest
from optdiv.final.model import EnsembleModel
from optdiv.final.refit_time import RefitPace, fold_refit_seconds, refit_seconds, rows_within

if TYPE_CHECKING:  # the engine's result, which fit_model completes; the engine imports this module, not back
    from optdiv.engine.result import SearchResult

#: A member's refit in this process is predicted from its evaluation's fit time grown with the rows as its
#: algorithm's fit grows (optdiv.final.refit_time), times this:
#: some models cost more than linearly in the rows (kernel machines, neighbour searches), the machine may be busier
#: than when the member was evaluated, and a refit in this process that overruns the time budget cannot be taken
#: back.
REFIT_SAFETY = 1.5
#: The same factor for refits run in a worker process under the deadline (every refit under a time budget): a
#: refit that overruns is cut there and its member keeps its fit on the training rows, so the expected cost is
#: reserved and the time budget is used instead of being kept back for the worst case.
WORKER_REFIT_SAFETY = 1.0
#: Seconds reserved for starting the refit worker process (interpreter, imports, the rows).
REFIT_WORKER_START = 3.0
#: Once no member's corrected prediction fits the time left, the member with the shortest one is still attempted when
#: that prediction is at most this many times the time left (predicted refits on every row took a quarter to all of
#: their prediction), and at least :data:`ATTEMPT_MIN_SECONDS` are left.
ATTEMPT_REACH = 2.0
ATTEMPT_MIN_SECONDS = 5.0
#: A search on a row sample: once no member's refit on every row fits the time left, the heaviest member still on
#: the sample is refitted on as many rows as its prediction (at its algorithm's pace) fits in this share of the
#: time left (the rest covers a refit slower than predicted), instead of an attempt on every row that the deadline
#: would stop; then the next, while :data:`ATTEMPT_MIN_SECONDS` are left.
GROW_SHARE = 0.8
#: A member is grown only to at least this many times the rows it was fitted on: fewer add too little to pay for
#: the refit.
GROW_MIN_RATIO = 1.5


def fit_model(result: SearchResult, space, splits: Splits, task, classes, columns, seed, refit=False,
              deadline: Optional[Deadline] = None, threads: int = 1) -> EnsembleModel:
    """The chosen members (fitted on train, or train+validation with ``refit``) as one predictor.

    A member the evaluator saved for the same rows (``result.pipelines``) is loaded, not refitted: a holdout
    fit, or under cross-validation the member's fold pipelines averaged (``fold_models="bagged"``). The others
    (an older run without saved pipelines, cross-validation without fold bags, a pruned one) are refitted. Under a
    ``deadline`` (default: the search's) only the members whose refit on train+validation is predicted to fit in
    the time left are refitted, heaviest weight first, each in a worker process that is stopped at the deadline;
    a member left out is taken when its prediction, corrected by the pace its algorithm's refits took
    (:class:`~optdiv.final.refit_time.RefitPace`), fits what the refits before it left, and once none fits, the one
    likeliest to end is attempted in the time left (:data:`ATTEMPT_REACH`); after a search on a row sample the
    heaviest members left are grown on the rows their refits fit in instead (:data:`GROW_SHARE`). The others (and
    one whose refit is stopped or fails) stay fitted on train, and ``result.info["final_model"]`` says how many.
    Cross-validation splits' ``X_train`` already holds the train+validation rows, so ``refit`` adds nothing; a
    member without a saved fold bag must be refitted there (or is taken as the search refitted it ahead,
    ``result.fold_refits``), so under a deadline the lightest such members whose
    refits are predicted not to fit are left out (the heaviest always stays) and the others' weights rescaled to
    the same total: ``result.member_indices`` and ``result.weights`` then describe the model as built, and the
    final-model report says what was left out.
    """
    began = time.perf_counter()
    deadline = result.deadline if deadline is None else deadline
    fitted_on = splits if result.fitted_on is None else result.fitted_on  # a search on a row sample fitted on that
    X, y = fitted_on.X_train, fitted_on.y_train
    folds = getattr(splits, "folds", None)
    cross_validated = folds is not None
    report = {"rows": "train+validation" if cross_validated else "train"}
    saved = result.pipelines
    digest = None if saved is None else splits_digest(X, y, folds)
    # cross-validation: members the search refitted on all rows ahead of this step (optdiv.final.fold_refits)
    fold_ahead = {} if not cross_validated or result.fold_refits is None else result.fold_refits.pipelines
    if cross_validated and deadline is not None and result.stacker is None:
        ready = {i for i in result.member_indices if result.history[i].index in fold_ahead or (
            digest is not None and saved.has(digest, result.history[i].index))}  # fold bags, or refitted ahead
        drop_members_that_do_not_fit(result, splits, deadline.left() - FINISH_SECONDS, report, ready)
    on_all, refitter, ready = set(), None, set()  # positions in member_indices to refit on train+validation, and
    # where; history positions of the members refitted during the search (or whose refit failed there)
    if refit and not cross_validated:
        import pandas as pd

        X_all = pd.concat([splits.X_train, splits.X_val], axis=0)
        y_all = np.concatenate([splits.y_train, splits.y_val])
        in_worker = deadline is not None and saved is not None
        refitter = result.refitter if in_worker else None  # started by the search, so no start-up to wait for
        start = REFIT_WORKER_START if in_worker and refitter is None else 0.0
        left = None if deadline is None else deadline.left() - FINISH_SECONDS - start
        safety = WORKER_REFIT_SAFETY if in_worker else REFIT_SAFETY

        def predicted(obs, rows: Optional[int] = None) -> float:
            """``obs``'s refit on ``rows`` rows (default: every row of train+validation), times the safety factor."""
            return safety * refit_seconds(obs.algorithm, obs.fit_seconds, max(len(X), 1),
                                          len(X_all) if rows is None else rows)

        # members refitted during the search (or whose refit failed there) need no more time
        ready = set() if refitter is None else {i for i in result.member_indices if refitter.done(result.history[i])}
        on_all = members_to_refit(result, predicted, left, free=ready)
        if in_worker and on_all and refitter is None:
            refitter = Refitter(space, X_all, y_all, task, None if classes is None else len(classes), seed, saved,
                                deadline, threads=threads)
    members, info, failed = [], [], []
    try:
        refits = {}  # position -> (pipeline or None, error), heaviest first, so a refit cut at the deadline is a
        # light one; then, in the time the planned refits left (they may take less than predicted), the heaviest
        # of the others whose refit is now predicted to fit; then attempts in the time no prediction fits
        by_weight = sorted(range(len(result.member_indices)), key=lambda p: (-float(result.weights[p]), p))
        later, ahead = [], []
        grown = {}  # position -> (pipeline or None, rows): members of a row-sampled search fitted on more rows
        if refitter is not None and refitter.ahead_times:
            report["refit_times"] = list(refitter.ahead_times)  # every refit run ahead, member or not any more
        elif cross_validated and result.fold_refits is not None and result.fold_refits.times:
            report["refit_times"] = list(result.fold_refits.times)
        if refit and not cross_validated and deadline is not None and (refitter is not None or not in_worker):
            later = [p for p in by_weight if p not in on_all]
        # the later members' predictions follow what the refits so far took, those run ahead included
        pace = refitter.pace if refitter is not None else RefitPace()

        def corrected(position: int) -> float:
            """The member at ``position``'s predicted refit seconds at its algorithm's pace so far."""
            obs = result.history[result.member_indices[position]]
            return pace.correct(obs.algorithm, predicted(obs))

        def refit_member(position: int, rows: Optional[int] = None, **extra) -> bool:
            """Refit the member at ``position`` on every row of train+validation (or read back its refit run
            ahead), or grow it on ``rows`` of them; True when it is refitted. Each refit is reported with its
            prediction, that prediction at its algorithm's pace so far (``paced``) and what it took, and sets
            the pace for the next."""
            obs = result.history[result.member_indices[position]]
            rounds = kept_rounds(obs.measures)  # a member whose evaluation was cut is refitted as it was scored
            if rows is None and result.member_indices[position] in ready:
                refits[position] = refitter.fit(obs)  # refitted ahead, during the search: read back
                if refits[position][0] is not None:
                    ahead.append(obs.index)
                return refits[position][0] is not None
            expected = predicted(obs, rows)
            paced, refit_began = pace.correct(obs.algorithm, expected), time.perf_counter()
            if rows is None:
                refits[position] = (refitter.fit(obs) if refitter is not None
                                    else fit_pipeline(space, obs.config, X_all, y_all, seed, task, threads, rounds))
                pipe = refits[position][0]
            else:
                pipe, error = refitter.fit_rows(obs, rows)
                grown[position] = (pipe, rows)
                extra = {**extra, "rows": rows}
                if pipe is None:  # stopped at the deadline, or failed: the member keeps its fit on the sample
                    report.setdefault("refit_failed", []).append({"index": obs.index, "error": error})
            # predicted against taken, per refit: what the search's reserve for the refits can be checked on
            taken, ok = time.perf_counter() - refit_began, pipe is not None
            if ok:
                pace.record(obs.algorithm, expected, taken)
            report.setdefault("refit_times", []).append(
                {"index": obs.index, "predicted": round(expected, 2), "paced": round(paced, 2),
                 "seconds": round(taken, 2), "ok": ok, **extra})
            return ok

        for position in [p for p in by_weight if p in on_all] + later:
            if position not in on_all:
                if corrected(position) > deadline.left() - FINISH_SECONDS:
                    continue
                on_all.add(position)
            refit_member(position)
        if refit and not cross_validated and refitter is not None and result.fitted_on is not None:
            # a search on a row sample: the time no refit on every row fits grows the heaviest members still on the
            # sample to the rows their refits are predicted to fit in (GROW_SHARE of the time left)
            while True:
                left = deadline.left() - FINISH_SECONDS
                growable = [(p, rows) for p in by_weight if p not in on_all and p not in grown
                            for obs in [result.history[result.member_indices[p]]]
                            for rows in [rows_within(obs.algorithm, obs.fit_seconds, len(X), len(X_all),
                                                     GROW_SHARE * left / pace.correct(obs.algorithm, safety))]
                            if rows >= GROW_MIN_RATIO * len(X)]
                if left < ATTEMPT_MIN_SECONDS or not growable:
                    break
                position, rows = growable[0]
                if rows >= len(X_all):  # the whole refit fits after all (a pace set since it was planned)
                    on_all.add(position)
                    if refit_member(position):
                        continue
                    on_all.discard(position)  # stopped or failed: kept on the sample, not tried again
                    grown[position] = (None, rows)
                    break
                if not refit_member(position, rows=rows):
                    break
        elif refit and not cross_validated and refitter is not None:
            # the time no prediction fits is spent on attempts: a refit that does not end in time is stopped at the
            # deadline in its worker and its member keeps its fit on train, so an attempt costs only idle seconds
            while True:
                left = deadline.left() - FINISH_SECONDS
                reach = [(seconds, p) for p in by_weight if p not in on_all
                         for seconds in [corrected(p)] if seconds <= ATTEMPT_REACH * left]
                if left < ATTEMPT_MIN_SECONDS or not reach:
                    break
                position = min(reach)[1]  # the likeliest to end in time
                on_all.add(position)
                if not refit_member(position, attempt=True):  # stopped at the deadline: the member stays on train
                    on_all.discard(position)
                    break
        grown_ok = {p: rows for p, (pipe, rows) in grown.items() if pipe is not None}
        if grown_ok:
            report["grown"] = [{"index": result.history[result.member_indices[p]].index, "rows": rows}
                               for p, rows in grown_ok.items()]
        if refit and not cross_validated:
            n_members = len(result.member_indices)
            if len(on_all) == n_members:
                report["rows"] = "train+validation"
            else:
                if on_all or grown_ok:
                    report["rows"] = (f"train+validation for {len(on_all)} of {n_members} members"
                                      + (f", part of it for {len(grown_ok)}" if grown_ok else "")
                                      + (", train for the others" if len(on_all) + len(grown_ok) < n_members
                                         else ""))
                report["refit_skipped"] = (f"refitting {n_members - len(on_all)} of {n_members} members on "
                                           f"train+validation was predicted not to fit in the time budget: they stay "
                                           f"fitted on train" + (f" ({len(grown_ok)} of them on more of their rows: "
                                                                 f"'grown')" if grown_ok else ""))
                if deadline is not None:  # which, and what their refits were predicted to take (after the pace)
                    report["left_on_train"] = [
                        {"index": obs.index, "algorithm": obs.algorithm, "weight": round(float(result.weights[p]), 4),
                         "predicted": round(corrected(p), 2)}
                        for p in by_weight if p not in on_all and p not in grown_ok
                        for obs in [result.history[result.member_indices[p]]]]
        for position, (i, weight) in enumerate(zip(result.member_indices, result.weights)):
            obs = result.history[i]
            pipe = None if digest is None or position in on_all else saved.load(digest, obs.index)
            source, on_all_rows = "saved", position in on_all or cross_validated
            rows_label = None
            if position in grown_ok:
                pipe, source = grown[position][0], "refitted"
                rows_label = f"{grown_ok[position]} rows of train+validation"
            elif pipe is None and position in on_all:
                pipe, error = refits[position]
                if pipe is None:  # e.g. a preprocessor that overflows on the added rows, or a refit stopped at the
                    # deadline: the member fitted on train stays, as when its refit does not fit in time
                    report.setdefault("refit_failed", []).append({"index": i, "error": error})
                    on_all_rows = False
                    pipe = None if digest is None else saved.load(digest, obs.index)
                else:
                    source = "refitted"
            if pipe is None and obs.index in fold_ahead:
                pipe, source = fold_ahead[obs.index], "refitted"
                ahead.append(obs.index)
            if pipe is None:  # not saved (cross-validation, an older run), or its refit on all rows failed
                pipe, error = fit_pipeline(space, obs.config, X, y, seed, task, threads, kept_rounds(obs.measures))
                source = "refitted"
                if pipe is None:
                    failed.append((position, i, error))
                    continue
            members.append(pipe)
            info.append({"index": i, "weight": float(weight), "config": obs.config, "val_loss": obs.val_loss,
                         "source": source,
                         "rows": rows_label or ("train+validation" if on_all_rows else "train")})
    finally:
        for worker in {id(r): r for r in (refitter, result.refitter) if r is not None}.values():
            worker.close()
        result.refitter = None
        result.fold_refits = None  # the members it held are in the model now (or no longer members)
    if ahead:  # read back from the refit worker, or taken from the cross-validated refits run ahead
        report["refitted_ahead"] = len(ahead)
    if failed:
        leave_out_failed_members(result, failed, report)
    report["loaded"] = sum(member["source"] == "saved" for member in info)
    report["refitted"] = len(info) - report["loaded"]
    report["seconds"] = time.perf_counter() - began
    result.info["final_model"] = report
    columns = list(columns) if columns is not None else list(X.columns)
    return EnsembleModel(members, result.weights, task, classes, columns, info, stacker=result.stacker,
                         vote=result.vote)


class Refitter:
    """Refits members on train+validation in a worker process, each stopped at the deadline (less the time kept
    for the end of the call), so a refit slower than predicted cannot overrun the time budget. Its worker is
    started when the refitter is made, or with ``start=False`` at :meth:`start` (the search starts it once its first
    evaluation is recorded, so its start-up does not compete with the evaluation workers' own), so the refits do not
    wait for one."""

    def __init__(self, space, X_all, y_all, task, n_classes, seed, saved: SavedPipelines, deadline: Deadline,
                 threads: int = 1, start: bool = True):
        self.splits = Splits(X_all, y_all, None, None, None, None)
        self.digest = splits_digest(X_all, y_all)
        self.saved, self.deadline = saved, deadline
        self.evaluator = Evaluator(space.build, self.splits, task, "error" if task == "classification" else "mse",
                                   n_classes=n_classes, seed=seed, time_limit=max(deadline.left(), 1.0),
                                   pipelines_dir=saved.folder, threads=threads)
        if start:
            self.start()
        self.failed: Dict[int, str] = {}  # evaluation index -> why its refit failed (it is not tried again)
        self.ahead_times: List[Dict] = []  # the refits run ahead, during the search (:meth:`refit_ahead`)
        self.pace = RefitPace()  # what the refits taken so far took of their predictions

    def start(self) -> None:
        """Start the refit worker without waiting for it (a no-op once started)."""
        self.evaluator.spawn()

    def fit(self, obs):
        """(the member refitted on train+validation, None) or (None, why not); a member already refitted
        (:meth:`refit_ahead`) is read back, and one whose refit failed there is not tried again."""
        if obs.index in self.failed:
            return None, self.failed[obs.index]
        if not self.has(obs):
            error = self._refit(obs)
            if error is not None:
                return None, error
        pipe = self.saved.load(self.digest, obs.index)
        return (pipe, None) if pipe is not None else (None, "the refitted pipeline could not be read back")

    def fit_rows(self, obs, rows: int):
        """(``obs``'s pipeline fitted on a sample of ``rows`` rows of train+validation, None) or (None, why not),
        under the deadline: a member of a row-sampled search grown towards every row as far as the time left
        allows, saved apart from the refits on every row."""
        left = self.deadline.left() - FINISH_SECONDS
        if left <= 0:
            return None, "no time left for the refit"
        error = self.evaluator.fit_and_save(obs.config, obs.index, left, kept_rounds(obs.measures), rows=rows)
        if error is not None:
            return None, error
        pipe = self.saved.load(part_rows_digest(self.digest, rows), obs.index)
        return (pipe, None) if pipe is not None else (None, "the refitted pipeline could not be read back")

    def has(self, obs) -> bool:
        """Whether ``obs``'s refit on train+validation is saved (by this search, or a run it resumes)."""
        return self.saved.has(self.digest, obs.index)

    def done(self, obs) -> bool:
        """Whether the final model needs no more time for ``obs``'s refit: saved, or already failed."""
        return obs.index in self.failed or self.has(obs)

    def refit_ahead(self, members: Sequence, predicted: Callable[[Any], float]) -> List[Dict]:
        """Refit now, in the order given, the ``members`` not refitted yet whose ``predicted`` refit seconds
        (corrected by the pace of the refits so far, :attr:`pace`) fit in the time left: the search runs this when
        it would otherwise stop for the final model's reserve, so a refit quicker than predicted gives its time back
        to the search. What each took, as fit_model reports it."""
        times = []
        for obs in members:
            expected = predicted(obs)
            paced = self.pace.correct(obs.algorithm, expected)
            if self.done(obs) or paced > self.deadline.left() - FINISH_SECONDS:
                continue
            began = time.perf_counter()
            error = self._refit(obs)
            taken = time.perf_counter() - began
            if error is None:
                self.pace.record(obs.algorithm, expected, taken)
            times.append({"index": obs.index, "predicted": round(expected, 2), "paced": round(paced, 2),
                          "seconds": round(taken, 2), "ok": error is None, "ahead": True})
        self.ahead_times.extend(times)
        return times

    def _refit(self, obs) -> Optional[str]:
        """Refit and save ``obs``'s pipeline under the deadline; None when saved, else why not (remembered)."""
        left = self.deadline.left() - FINISH_SECONDS
        error = ("no time left for the refit" if left <= 0 else
                 self.evaluator.fit_and_save(obs.config, obs.index, left, kept_rounds(obs.measures)))
        if error is not None:
            self.failed[obs.index] = error
        return error

    def close(self) -> None:
        self.evaluator.close()


def fit_pipeline(space, config, X, y, seed, task, threads: int = 1, rounds: Optional[int] = None):
    """(the pipeline of ``config`` fitted on X, y, None) or (None, the error) when the fit raises; ``rounds``: those
    its evaluation kept (optdiv.evaluation.anytime)."""
    pipe = build_pipeline(with_threads(space.build, threads), config, X, seed, task, rounds)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the same chatter the evaluator already silenced for this model
            pipe.fit(X, y)
    except Exception as exc:  # noqa: BLE001 - one member's failure must not lose the whole search
        return None, f"{type(exc).__name__}: {exc}"
    return pipe, None


def leave_out_failed_members(result: SearchResult, failed: List, report: Dict) -> None:
    """Members whose final fit raised (their evaluation succeeded on other rows) are left out and the other
    weights rescaled to the same total; with none left, or with a stacker that needs every member, it raises."""
    if result.stacker is not None or len(failed) == len(result.member_indices):
        raise RuntimeError(f"the final model could not be fitted: member {failed[0][1]} failed with {failed[0][2]}")
    gone = {position for position, _, _ in failed}
    report["members_failed"] = [{"index": i, "error": error} for _, i, error in failed]
    keep_members(result, [p for p in range(len(result.member_indices)) if p not in gone])


def keep_members(result: SearchResult, kept: List[int]) -> float:
    """Keep the members at positions ``kept``, their weights rescaled to the old total; the share of the weight
    that was left out."""
    weights = np.asarray(result.weights, dtype=np.float64)
    total, kept_total = float(weights.sum()), float(weights[kept].sum())
    result.member_indices = [result.member_indices[p] for p in kept]
    result.weights = weights[kept] * (total / kept_total if kept_total > 0 else 1.0)
    return (total - kept_total) / total if total > 0 else 0.0


def members_to_refit(result: SearchResult, predicted: Callable[[Any], float], left: Optional[float],
                     free: Sequence[int] = ()) -> set:
    """Positions of the members to refit: all without a deadline; under one, the heaviest weights first, each
    while its ``predicted`` refit seconds (of its observation) still fit, so the time left buys the refits that
    matter most instead of none. Members whose position in the history is in ``free`` cost nothing and are always
    chosen (loaded, not refitted: a saved fold bag, a refit run ahead)."""
    positions = sorted(range(len(result.member_indices)), key=lambda p: (-float(result.weights[p]), p))
    if left is None:
        return set(positions)
    chosen, spent = set(), 0.0
    for position in positions:
        i = result.member_indices[position]
        if i in free:  # already done: chosen even when no time is left
            chosen.add(position)
            continue
        cost = predicted(result.history[i])
        if spent + cost <= left:
            chosen.add(position)
            spent += cost
    return chosen


def drop_members_that_do_not_fit(result: SearchResult, splits: Splits, left: float, report: Dict,
                                  bagged: Sequence[int] = ()) -> None:
    """Cross-validation: keep the members whose refits on all rows are predicted to fit in ``left`` seconds
    (:func:`members_to_refit`; a k-fold evaluation's fit time covers k fits on (k-1)/k of the rows; a member in
    ``bagged``, whose fold pipelines are saved, needs no refit), and at least the heaviest; rescale the kept
    weights to the same total and say in ``report`` what was left out."""
    n_folds = int(np.max(splits.folds)) + 1

    def predicted(obs) -> float:
        return REFIT_SAFETY * fold_refit_seconds(obs.algorithm, obs.fit_seconds, n_folds)

    keep = members_to_refit(result, predicted, left, free=bagged)
    n_members = len(result.member_indices)
    if len(keep) == n_members:
        return
    if not keep:
        keep = {min(range(n_members), key=lambda p: (-float(result.weights[p]), p))}
    kept = sorted(keep)
    report["members_dropped"] = n_members - len(kept)
    report["weight_dropped"] = keep_members(result, kept)
    report["drop_reason"] = (f"refitting {n_members - len(kept)} of {n_members} members on all rows was predicted "
                             f"not to fit in the time budget: they were left out and the other weights rescaled")
