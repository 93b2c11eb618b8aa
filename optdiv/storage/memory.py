"""A search without a run directory: the store lives in memory, as long as the search that uses it."""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

import numpy as np

from optdiv.evaluation.observation import Observation
from optdiv.storage.atomic import to_jsonable
from optdiv.storage.base import RunStoreError, Store, settings_differences
from optdiv.storage.issued import IssuedLog


class MemoryStore(Store):
    """Keeps the observations, the issued log, the targets, the settings and the result in this process: what a
    search without ``--out`` (``optdiv.search``, the estimators) keeps, through the same interface as a run
    directory. Nothing outlives the process, so there is nothing to resume: settings are checked only against
    settings written to this same store."""

    location = "in memory"

    def __init__(self):
        self.issued = IssuedLog()
        self.observations: List[Observation] = []
        self.targets: Optional[np.ndarray] = None
        self.meta: Optional[dict] = None
        self.summary: Optional[dict] = None
        self.model: Any = None

    def load(self, predictions: bool = True) -> List[Observation]:
        return sorted(self.observations, key=lambda obs: obs.index)

    def append(self, obs: Observation) -> None:
        self.observations.append(obs)

    def save_targets(self, y_val) -> None:
        if self.targets is None:
            self.targets = np.asarray(y_val)

    def load_targets(self) -> Optional[np.ndarray]:
        return self.targets

    def read_meta(self) -> Optional[dict]:
        return self.meta

    def write_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        if self.meta is not None:
            self.check_meta(settings, ignore=ignore)
            return
        self.meta = to_jsonable(settings)

    def check_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        if self.meta is None:
            return  # nothing was stored here to differ from
        diffs = settings_differences(self.meta, settings, ignore)
        if diffs:
            raise RunStoreError(f"cannot resume the run {self.location}: its settings differ ({'; '.join(diffs)})")

    def save_result(self, summary: dict, model: Any) -> None:
        self.summary, self.model = summary, model
