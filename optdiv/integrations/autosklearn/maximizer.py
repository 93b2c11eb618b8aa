"""The acquisition maximiser the callback hands SMAC: SMAC's own local and sorted random search, whose candidate
list is re-ordered by the core's selector (:func:`optdiv.core.pending.pick_with_pending`), with the runs' validation
predictions read from auto-sklearn's run folders and the runs still going entered as believers. Its report
(:class:`OptDivReport`) records what it did."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np

from optdiv.core.pending import pick_with_pending

logger = logging.getLogger(__name__)


class OptDivReport:
    """What the optdiv maximiser did during one auto-sklearn fit.

    ``calls`` holds one dict per call of the maximiser (SMAC asks it only after the initial design, and
    only when its random interleaving does not pick a random configuration): ``finished_runs`` (finished
    runs in SMAC's history at that moment), ``observations`` (runs with predictions), ``candidates``, ``weight``
    w(t), ``diversity_ranked`` (the diversity rank entered the order), ``changed`` (the first new
    candidate has a lower EI than SMAC's best), ``ei_rank`` of the chosen candidate, ``config`` (the chosen
    candidate as a dict: the configuration SMAC runs next), ``running`` (configurations still being evaluated
    that entered the selector with believed predictions), ``pool_size`` and ``seconds``.

    ``metric`` is the vocabulary's loss that sets the diversity kind; ``pool_metric`` what the temporary pool
    minimises: the same loss, or auto-sklearn's metric name (e.g. ``"roc_auc"``) when optdiv cannot compute
    that metric and the pool uses auto-sklearn's own loss for it.
    """

    def __init__(self, method: str):
        self.method = method
        self.metric: Optional[str] = None
        self.pool_metric: Optional[str] = None
        self.initial_design_size: Optional[int] = None
        self.calls: List[Dict[str, Any]] = []
        self.n_fallbacks = 0
        self.runs_read = 0
        self.runs_skipped = 0
        self.last_error: Optional[str] = None

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def n_diversity_ranked(self) -> int:
        """Suggestions whose order the diversity rank entered (weight > 0 and a fitted surrogate)."""
        return sum(1 for c in self.calls if c["diversity_ranked"])

    @property
    def n_changed(self) -> int:
        """Suggestions where diversity picked another configuration than EI alone would have."""
        return sum(1 for c in self.calls if c["changed"])

    @property
    def n_with_running(self) -> int:
        """Suggestions made while other configurations were running, which the selector took into account."""
        return sum(1 for c in self.calls if c["running"])

    def summary(self) -> str:
        return (f"optdiv ({self.method}, pool on {self.pool_metric}): {self.n_calls} maximiser calls, "
                f"{self.n_diversity_ranked} diversity-ranked, {self.n_changed} changed by diversity, "
                f"{self.n_with_running} with running configurations; runs read {self.runs_read}, "
                f"skipped {self.runs_skipped} (failed or without predictions); fallbacks {self.n_fallbacks}")

    def __repr__(self) -> str:
        return f"<OptDivReport {self.summary()}>"


class _RunPredictions:
    """Validation predictions of every successful run, read once from auto-sklearn's run folders."""

    def __init__(self, backend, autosklearn_seed: int, encoder, report: OptDivReport):
        self.backend, self.seed, self.encoder, self.report = backend, int(autosklearn_seed), encoder, report
        self._done: set = set()
        self.num_runs: List[int] = []
        self.config_ids: List[int] = []
        self.X: List[np.ndarray] = []
        self.preds: List[np.ndarray] = []
        self._y: Optional[np.ndarray] = None
        self._shape: Optional[tuple] = None

    def path(self, num_run: int, budget: float) -> str:
        folder = self.backend.get_numrun_directory(self.seed, num_run, budget)
        return os.path.join(folder, self.backend.get_prediction_filename("ensemble", self.seed, num_run, budget))

    def update(self, runhistory) -> None:
        from smac.tae import StatusType

        usable = (StatusType.SUCCESS, StatusType.DONOTADVANCE)
        for key, value in list(runhistory.data.items()):
            if key in self._done or value.status == StatusType.RUNNING:
                continue
            self._done.add(key)
            num_run = (value.additional_info or {}).get("num_run")
            if value.status not in usable or num_run is None:
                self.report.runs_skipped += 1
                continue
            path = self.path(int(num_run), key.budget)
            try:
                with open(path, "rb") as fh:
                    arr = np.load(fh, allow_pickle=True)
            except (OSError, ValueError, EOFError) as exc:  # deleted, not written (disable_evaluator_output)
                logger.debug("optdiv: no predictions for run %s (%s)", num_run, exc)
                self.report.runs_skipped += 1
                continue
            arr = np.asarray(arr, dtype=np.float32)
            if arr.ndim == 2 and arr.shape[1] == 1:
                arr = arr[:, 0]
            if self._shape is None:
                self._shape = arr.shape
            if arr.shape != self._shape or not np.all(np.isfinite(arr)):
                logger.warning("optdiv: skipping run %s: predictions of shape %s (expected %s) or non-finite",
                               num_run, arr.shape, self._shape)
                self.report.runs_skipped += 1
                continue
            self.num_runs.append(int(num_run))
            self.config_ids.append(int(key.config_id))
            self.X.append(self.encoder.encode([runhistory.ids_config[key.config_id]])[0])
            self.preds.append(arr)
            self.report.runs_read += 1

    def running(self, runhistory) -> List[int]:
        """Config ids of the runs SMAC has submitted and not finished (several workers), without any already
        observed, in run-history order."""
        from smac.tae import StatusType

        observed, out = set(self.config_ids), []
        for key, value in list(runhistory.data.items()):
            if value.status == StatusType.RUNNING and key.config_id not in observed and key.config_id not in out:
                out.append(int(key.config_id))
        return out

    def targets(self, classification: bool) -> np.ndarray:
        if self._y is None:
            y = np.asarray(self.backend.load_targets_ensemble())
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1:
                raise ValueError(f"optdiv supports single-target tasks; auto-sklearn's targets have shape {y.shape}")
            if classification:
                if not np.all(np.equal(np.mod(y, 1), 0)):
                    raise ValueError("auto-sklearn's classification targets are not class indices")
                y = y.astype(np.int64)
            else:
                y = y.astype(np.float64)
            self._y = y
        return self._y


_CLASSES: Dict[str, type] = {}


def maximizer_class() -> type:
    """The maximiser class, built on first use: importing the adapter needs no SMAC."""
    if "maximizer" in _CLASSES:
        return _CLASSES["maximizer"]
    from smac.optimizer.ei_optimization import LocalAndSortedRandomSearch
    from smac.tae import StatusType

    from optdiv.spaces.encoding import ConfigEncoder

    class OptDivLocalAndSortedRandomSearch(LocalAndSortedRandomSearch):
        """SMAC's default maximiser, whose candidate list is re-ordered by the diversity-aware selector.

        SMAC's ChallengerList hands the intensifier the first configuration of the returned list that was
        not run yet, so the order is the suggestion. Already-run candidates are moved to the end.
        """

        def __init__(self, acquisition_function, config_space, rng=None, max_steps=None,
                     n_steps_plateau_walk=10, n_sls_iterations=10, *, selector, backend,
                     autosklearn_seed, classification, report, strict=False):
            super().__init__(acquisition_function, config_space, rng, max_steps=max_steps,
                             n_steps_plateau_walk=n_steps_plateau_walk, n_sls_iterations=n_sls_iterations)
            self.selector = selector
            self.classification = bool(classification)
            self.report = report
            self.strict = bool(strict)
            self.encoder = ConfigEncoder(config_space)
            self.runs = _RunPredictions(backend, autosklearn_seed, self.encoder, report)

        def _maximize(self, runhistory, stats, num_points):
            ranked = super()._maximize(runhistory, stats, num_points)
            start = time.perf_counter()
            try:
                return self._rerank(ranked, runhistory, start)
            except Exception as exc:  # never let a diversity problem stop auto-sklearn's search
                if self.strict:
                    raise
                self.report.n_fallbacks += 1
                self.report.last_error = f"{type(exc).__name__}: {exc}"
                logger.warning("optdiv: diversity re-ranking failed (%s); using SMAC's EI order", exc)
                return ranked

        def _rerank(self, ranked, runhistory, start):
            self.runs.update(runhistory)
            n_obs = len(self.runs.num_runs)
            used = set(runhistory.get_all_configs())
            seen, fresh, old = set(), [], []
            for acq, config in ranked:
                if config in seen:
                    continue
                seen.add(config)
                (old if config in used else fresh).append((acq, config))
            n_finished = sum(1 for value in list(runhistory.data.values()) if value.status != StatusType.RUNNING)
            call = {"finished_runs": n_finished, "observations": n_obs, "running": 0,
                    "candidates": len(fresh), "weight": 0.0, "diversity_ranked": False, "changed": False,
                    "ei_rank": 1.0, "pool_size": 0, "seconds": 0.0,
                    "config": fresh[0][1].get_dictionary() if fresh else None}
            if n_obs == 0 or not fresh:
                call["seconds"] = time.perf_counter() - start
                self.report.calls.append(call)
                return ranked
            acq = np.array([float(np.asarray(a).ravel()[0]) for a, _ in fresh], dtype=np.float64)
            finite = np.isfinite(acq)
            acq = np.where(finite, acq, acq[finite].min() if finite.any() else 0.0)
            candidates = self.encoder.encode([c for _, c in fresh])
            observations, preds = np.stack(self.runs.X), np.stack(self.runs.preds)
            if self.classification and preds.ndim != 3:
                raise ValueError(f"classification run predictions must be (rows, classes); got {preds.shape[1:]}")
            if not self.classification and preds.ndim != 2:
                raise ValueError(f"regression run predictions must be (rows,); got {preds.shape[1:]}")
            # several workers: configurations still running enter this call with believed predictions
            running = self.runs.running(runhistory)
            running_x = self.encoder.encode([runhistory.ids_config[i] for i in running]) if running else None
            (pick,) = pick_with_pending(self.selector, candidates, acq, observations, preds,
                                        self.runs.targets(self.classification), running_x,
                                        version=(n_obs, self.runs.num_runs[-1], tuple(running)))
            selection = pick.selection
            call.update(config=fresh[pick.index][1].get_dictionary(), weight=float(selection.weight),
                        running=len(running),
                        diversity_ranked=selection.div_rank is not None and selection.weight > 0,
                        changed=bool(acq[pick.index] < acq.max()),
                        ei_rank=float(selection.perf_rank[pick.first]),
                        pool_size=int(len(selection.pool_indices)),
                        seconds=time.perf_counter() - start)
            self.report.calls.append(call)
            logger.info("optdiv: %d observations, %d running, %d candidates, w=%.3f, chose EI rank %g",
                        n_obs, len(running), len(fresh), selection.weight, call["ei_rank"])
            return [fresh[i] for i in pick.order] + old

    OptDivLocalAndSortedRandomSearch.__module__ = __package__  # the package builds it on access: pickles name it
    OptDivLocalAndSortedRandomSearch.__qualname__ = "OptDivLocalAndSortedRandomSearch"
    _CLASSES["maximizer"] = OptDivLocalAndSortedRandomSearch
    return OptDivLocalAndSortedRandomSearch
