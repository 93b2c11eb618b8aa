"""Replay runs: any method searches a library instead of the live space (see optdiv.bench.library).

The engine's own search loop runs unchanged; only its candidate source (`LibraryCandidates`) and its
evaluator (`LibraryEvaluator`, a lookup of the stored predictions) differ. A replay evaluation costs
microseconds, so a run's time is the method's own suggestion time.

Constraints work as in live runs: the evaluator hands out each member's stored measures and the engine
marks the violating members ``infeasible``. A constraint on a measure the library never recorded is
refused before the search starts.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from optdiv.core.metrics import mean_loss
from optdiv.data import Splits
from optdiv.engine.result import SearchResult
from optdiv.engine.search import search
from optdiv.evaluation.constraints import parse_constraints
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.evaluation.observation import WORST_LOSS, Observation
from optdiv.spaces.candidates import LibraryCandidates, config_key


class LibraryEvaluator(EvaluatorInterface):
    """Looks up a library member's stored outcome; losses are recomputed under the run's metric. It runs in this
    process only and takes no time limit (an evaluation costs microseconds)."""

    def __init__(self, library, metric: str):
        self.library, self.metric = library, metric
        self.index_of = {}
        for i, config in enumerate(library.configs):
            self.index_of.setdefault(config_key(config), i)
        self.val_losses = library.val_losses(metric)
        self.evaluated = []  # library indices in evaluation order

    def evaluate(self, config, index: int = -1) -> Observation:
        key = config_key(config)
        if key not in self.index_of:
            raise KeyError("a replay run suggested a configuration outside its library")
        i = self.index_of[key]
        self.evaluated.append(i)
        lib = self.library
        measures = self._measures(i)
        if not lib.ok[i]:
            return Observation(dict(lib.configs[i]), "failed", WORST_LOSS[self.metric], fit_seconds=float(lib.fit_seconds[i]),
                               error="failed in the library", index=index, algorithm=lib.algorithms[i],
                               measures=measures)
        return Observation(
            dict(lib.configs[i]),
            "ok",
            float(self.val_losses[i]),
            test_loss=float(mean_loss(lib.test_preds[i], lib.y_test, self.metric)),
            fit_seconds=float(lib.fit_seconds[i]),
            val_pred=lib.val_preds[i],
            test_pred=lib.test_preds[i],
            index=index,
            algorithm=lib.algorithms[i],
            measures=measures,
        )

    def _measures(self, i: int) -> dict:
        """The member's recorded measures (those it lacks left out), fit_seconds always."""
        out = {name: float(values[i]) for name, values in self.library.measures.items() if np.isfinite(values[i])}
        out["fit_seconds"] = float(self.library.fit_seconds[i])
        return out

    def close(self) -> None:
        pass


def replay_search(library, method: str, metric: str, seed: int, budget: int, ensemble: str = "caruana",
                  ensemble_size: int = 25, optimizer_options: Optional[dict] = None,
                  constraints: Optional[Sequence] = None) -> SearchResult:
    """One replay run of ``method`` over ``library``; ``SearchResult.info["library_indices"]`` maps the history.

    ``constraints`` as in :func:`optdiv.engine.search.search`; ValueError when a successful member lacks a
    constrained measure (a library built before it was recorded).
    """
    if budget > int(np.sum(LibraryCandidates(library).offerable)):
        raise ValueError(f"budget {budget} exceeds the {len(library)} members of library {library.name!r}")
    constraints = parse_constraints(constraints)
    library.require_measures(sorted({c.measure for c in constraints}))
    evaluator = LibraryEvaluator(library, metric)
    splits = Splits(None, None, None, library.y_val, None, library.y_test)
    n_classes = library.val_preds.shape[2] if library.val_preds.ndim == 3 else None
    result = search(
        splits,
        library.task,
        n_classes=n_classes,
        method=method,
        metric=metric,
        space=library.space,
        budget=budget,
        seed=seed,
        ensemble=ensemble,
        ensemble_size=ensemble_size,
        optimizer_options=optimizer_options,
        candidates=LibraryCandidates(library),
        evaluator=evaluator,
        constraints=constraints,
    )
    result.info["library_indices"] = list(evaluator.evaluated)
    return result
