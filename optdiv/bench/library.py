"""Replay libraries: random configurations evaluated once per dataset and split, then searched over.

A library is a run store of random search without an ensemble (``rs-``) on one dataset and split seed,
with every evaluation's validation and test predictions. Random suggestions are a pure function of
(seed, step), so a library of 300 is the first 300 members of a library of 400: growing it resumes the
store instead of starting again, and a library can be built over several sittings.

Replay methods then search *within* the library (candidates are the members not yet chosen), so
twelve methods x ten seeds x 250 iterations cost no model fitting beyond the library itself.
Every result produced this way must say so: the numbers answer "which configurations would each
method choose from this fixed set", not "what would a live run reach".

Each member keeps the measures its evaluation recorded (optdiv.evaluation.constraints), so replay runs can be
constrained like live ones. Members evaluated before ``predict_seconds`` was recorded lack it; a
constraint on a measure that some successful member lacks is refused (:meth:`Library.require_measures`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from optdiv.core.metrics import mean_loss
from optdiv.data import load_dataset, split
from optdiv.engine.search import resolve_metric, search
from optdiv.evaluation.constraints import MEASURES
from optdiv.evaluation.observation import WORST_LOSS
from optdiv.spaces import SearchSpace, get_space
from optdiv.storage.files import RunStore

LIBRARY_TIME_LIMIT = 60.0


def library_dir(cache: Union[str, Path], dataset_name: str, split_seed: int = 0, space: str = "autosklearn") -> Path:
    return Path(cache) / "library" / space / dataset_name / f"split-{split_seed}"


@dataclass
class Library:
    """The first ``size`` evaluations of a library store, as arrays the replay optimisers index."""

    name: str
    task: str
    space: SearchSpace
    configs: List[dict]
    algorithms: List[str]
    ok: np.ndarray  # (m,) bool: the evaluation left predictions
    val_preds: np.ndarray  # (m, n_val[, k]) float32; zeros where not ok
    test_preds: np.ndarray  # (m, n_test[, k])
    y_val: np.ndarray
    y_test: np.ndarray
    fit_seconds: np.ndarray
    encoded: np.ndarray  # (m, d) the space's encoding, for the surrogates
    #: measure name -> (m,) values, NaN where a member lacks it; fit_seconds lives in ``fit_seconds``
    measures: Dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.configs)

    def measure(self, name: str) -> np.ndarray:
        """(m,) values of one measure (NaN where a member lacks it)."""
        if name == "fit_seconds":
            return np.asarray(self.fit_seconds, dtype=np.float64)
        values = self.measures.get(name)
        return np.full(len(self), np.nan) if values is None else np.asarray(values, dtype=np.float64)

    def require_measures(self, names: Iterable[str], where: Optional[str] = None) -> None:
        """Raise ValueError when a successful member lacks one of ``names`` (a library built before that
        measure was recorded): its constraint could not be decided for that member."""
        for name in names:
            missing = int(np.sum(self.ok & ~np.isfinite(self.measure(name))))
            if missing:
                raise ValueError(_missing_measure_message(name, missing, int(np.sum(self.ok)),
                                                          where or f"library {self.name!r}"))

    def val_losses(self, metric: str) -> np.ndarray:
        """Per-member validation loss under ``metric``; failed members get the metric's worst loss."""
        return self._losses(self.val_preds, self.y_val, metric)

    def test_losses(self, metric: str) -> np.ndarray:
        return self._losses(self.test_preds, self.y_test, metric)

    def _losses(self, preds, y, metric):
        out = np.full(len(self), WORST_LOSS[metric], dtype=np.float64)
        for i in np.flatnonzero(self.ok):
            out[i] = mean_loss(preds[i], y, metric)
        return out


def _missing_measure_message(name: str, missing: int, total: int, where: str) -> str:
    return (
        f"{where} has no {name!r} for {missing} of its {total} successful members (it was built before "
        f"{name} was recorded), so a constraint on it cannot be checked; rebuild the library (delete its "
        f"directory and run the bench again: growing it only measures the new members), or constrain "
        f"fit_seconds, which every library has"
    )


def check_library_measures(directory: Union[str, Path], size: int, names: Sequence[str]) -> None:
    """:meth:`Library.require_measures` on a stored library without loading its predictions (a cheap check
    before a bench starts its searches)."""
    history = RunStore(directory).load(predictions=False)[:size]
    ok = [obs for obs in history if obs.status == "ok"]
    for name in names:
        if name == "fit_seconds":
            continue
        missing = sum(1 for obs in ok if obs.measures.get(name) is None)
        if missing:
            raise ValueError(_missing_measure_message(name, missing, len(ok), f"library {str(directory)!r}"))


#: How a regression library's members predict; stored in its meta.json (libraries without it are unclipped).
REGRESSION_MEMBERS = "clipped to the training target range"


def build_library(
    data: Union[str, Path],
    cache: Union[str, Path],
    size: int = 300,
    split_seed: int = 0,
    space: str = "autosklearn",
    time_limit: float = LIBRARY_TIME_LIMIT,
    progress: Optional[Callable] = None,
    workers: Optional[int] = None,
) -> Path:
    """Evaluate (or finish evaluating) ``size`` random configurations; returns the store directory.

    ``workers`` evaluates them on a local Dask cluster: random search suggests without looking at results
    and the store loads in index order, so the library holds the same configurations at the same places."""
    dataset = load_dataset(data)
    directory = library_dir(cache, dataset.name, split_seed, space)
    store = RunStore(directory)
    settings = {"data_name": dataset.name, "task": dataset.task, "split_seed": split_seed, "space": space,
                "time_limit": time_limit, "n_rows": int(len(dataset.y))}
    if dataset.task == "regression":
        # Members are clipped near the training targets' range (optdiv.evaluation.target_range); a library grown
        # from members evaluated before the clip existed would mix two protocols, so resuming one refuses.
        settings["regression_members"] = REGRESSION_MEMBERS
    if store.read_meta() is None:
        store.write_meta(settings)
    else:
        store.check_meta(settings)
    if len(store) >= size:
        return directory
    splits = split(dataset, seed=split_seed)
    start = time.perf_counter()
    search(
        splits,
        dataset.task,
        n_classes=dataset.n_classes,
        method="rs-",
        metric=resolve_metric(None, dataset.task),
        space=space,
        budget=size,
        time_limit=time_limit,
        seed=split_seed,
        store=store,
        progress=progress,
        workers=workers,
    )
    store.write_json("timing.json", {"size": size, "last_sitting_seconds": time.perf_counter() - start})
    return directory


def load_library(data: Union[str, Path], cache: Union[str, Path], size: int, split_seed: int = 0,
                 space: str = "autosklearn") -> Library:
    """The first ``size`` members of a built library; raises if fewer were evaluated."""
    dataset = load_dataset(data)
    directory = library_dir(cache, dataset.name, split_seed, space)
    store = RunStore(directory)
    if len(store) < size:
        raise FileNotFoundError(
            f"library {directory} holds {len(store)} of {size} evaluations; build it first with "
            f"`optdiv bench --library {size} --build-only` (or the same bench command: it builds what is missing)"
        )
    splits = split(dataset, seed=split_seed)
    history = store.load()[:size]
    space_obj = get_space(space, dataset.task)
    ok = np.array([obs.status == "ok" and obs.val_pred is not None for obs in history])
    template = next(obs for obs in history if obs.val_pred is not None)
    val = np.zeros((size,) + template.val_pred.shape, dtype=np.float32)
    test = np.zeros((size,) + template.test_pred.shape, dtype=np.float32)
    for i, obs in enumerate(history):
        if ok[i]:
            val[i] = obs.val_pred
            test[i] = obs.test_pred
    configs = [obs.config for obs in history]
    measures = {name: np.array([obs.measures.get(name, np.nan) for obs in history], dtype=np.float64)
                for name in MEASURES if name != "fit_seconds"}
    return Library(
        name=dataset.name,
        task=dataset.task,
        space=space_obj,
        configs=configs,
        algorithms=[obs.algorithm for obs in history],
        ok=ok,
        val_preds=val,
        test_preds=test,
        y_val=splits.y_val,
        y_test=splits.y_test,
        fit_seconds=np.array([obs.fit_seconds or 0.0 for obs in history], dtype=np.float64),
        encoded=space_obj.encode(configs),
        measures=measures,
    )
