"""What a search returns (:class:`SearchResult`) and the ``result.json`` schema it is summarised in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional

import numpy as np

from optdiv.budget import Deadline
from optdiv.data import Splits
from optdiv.evaluation.pipelines import SavedPipelines
from optdiv.evaluation.memory import peak_memory_mb
from optdiv.final.choice import Stacker
from optdiv.final.model import EnsembleModel
from optdiv.spaces.base import SearchSpace

if TYPE_CHECKING:  # the refit worker a search starts; optdiv.final.fit imports this module's result for its hints
    from optdiv.final.fit import Refitter
    from optdiv.final.fold_refits import FoldRefits


@dataclass
class SearchResult:
    """One finished search: every observation (``history``), the final members (positions in it) and their weights,
    the final model's validation and test loss, each suggestion's seconds, and what the search reports in ``info``
    (the method, the metric, why it stopped, the final model's making). ``model`` is the final model once built."""

    history: List
    member_indices: List[int]
    weights: np.ndarray
    val_loss: float
    test_loss: Optional[float]
    suggest_seconds: List[float]
    total_seconds: float
    space: Optional[SearchSpace] = None
    model: Optional[EnsembleModel] = None
    info: Dict = field(default_factory=dict)
    stacker: Optional[Stacker] = None
    vote: bool = False
    pipelines: Optional[SavedPipelines] = None  # the evaluator's saved fits, which fit_model loads
    deadline: Optional[Deadline] = None  # when the whole call must end (fit_model keeps to it too)
    refitter: Optional[Refitter] = None  # the worker started during the search for fit_model's refits
    fold_refits: Optional[FoldRefits] = None  # cross-validated members refitted on all rows during the search
    fitted_on: Optional[Splits] = None  # the row sample the search fitted its members on (search_rows), if any


def result_summary(result: SearchResult, dataset_name: str, task: str) -> Dict:
    """The result.json schema (``peak_memory_mb``: the process's and its largest worker's peak so far, see
    optdiv.evaluation.memory)."""
    history = result.history
    return {
        "method": result.info["method"],
        "dataset": dataset_name,
        "task": task,
        "metric": result.info["metric"],
        "final": result.info.get("final"),
        "space": result.info["space"],
        "n_evaluations": len(history),
        "n_failed": sum(obs.status not in ("ok", "infeasible") for obs in history),
        "n_infeasible": sum(obs.status == "infeasible" for obs in history),
        "constraints": result.info.get("constraints", []),
        "evaluation": result.info.get("evaluation", "holdout"),
        "cv": result.info.get("cv"),
        "rho": result.info.get("rho"),
        "ensemble_selection": result.info.get("ensemble_selection"),
        "val_error": result.val_loss,
        "test_error": result.test_loss,
        "ensemble": [
            {
                "index": i,
                "weight": float(w),
                "algorithm": history[i].algorithm,
                "val_error": history[i].val_loss,
                "config": history[i].config,
            }
            for i, w in zip(result.member_indices, result.weights)
        ],
        "suggest_seconds": [round(s, 6) for s in result.suggest_seconds],
        "total_seconds": result.total_seconds,
        "stopped": result.info.get("stopped"),
        "final_model": result.info.get("final_model"),
        "threads": result.info.get("threads"),
        "peak_memory_mb": peak_memory_mb(),
    }
