"""Replay libraries: random configurations evaluated once per dataset and split, then searched over.

A library is a run store of random search without an ensemble (``rs-``) on one dataset and split seed,
with every evaluation's validation and test predictions. Random suggestions are a pure function of
(seed, step), so a library of 300 is the first 300 members of a library of 400: growing it resumes the
store instead of starting again, and a library can be built over several sittings.

Replay methods then search *within* the library (candidates are the members not yet chosen), so
twelve methods x ten seeds x 250 iterations cost no model fitting beyond the library itself.
Every result produced this way must say so: the numbers answer "which configurations would each
method choose from this fixed set", not "what would a live run reach".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Union

import numpy as np

from optdiv.cash.data import load_dataset, split
from optdiv.cash.engine import resolve_metric, search
from optdiv.cash.evaluator import WORST_LOSS
from optdiv.cash.spaces import SearchSpace, get_space
from optdiv.cash.store import RunStore
from optdiv.core.metrics import mean_loss

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

    def __len__(self) -> int:
        return len(self.configs)

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


def build_library(
    data: Union[str, Path],
    cache: Union[str, Path],
    size: int = 300,
    split_seed: int = 0,
    space: str = "autosklearn",
    time_limit: float = LIBRARY_TIME_LIMIT,
    progress: Optional[Callable] = None,
) -> Path:
    """Evaluate (or finish evaluating) ``size`` random configurations; returns the store directory."""
    dataset = load_dataset(data)
    directory = library_dir(cache, dataset.name, split_seed, space)
    store = RunStore(directory)
    settings = {"data_name": dataset.name, "task": dataset.task, "split_seed": split_seed, "space": space,
                "time_limit": time_limit, "n_rows": int(len(dataset.y))}
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
    )
