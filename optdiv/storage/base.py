"""The one interface a search keeps its observations through, whether in a run directory or in memory.

The engine and the search loop talk to a :class:`Store` only: :class:`~optdiv.storage.memory.MemoryStore` when the
search has no run directory, :class:`~optdiv.storage.files.RunStore` when it has one. So a rule of the search (the
issued log before every evaluation, every result appended as it ends, settings a resume must repeat) is written once
and holds either way; only a run directory outlives the process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, List, Optional

from optdiv.evaluation.observation import Observation
from optdiv.storage.atomic import to_jsonable
from optdiv.storage.issued import IssuedLog


class RunStoreError(ValueError):
    """A stored run cannot be used as asked (e.g. resumed with different settings)."""


def settings_differences(stored: dict, settings: dict, ignore: Iterable[str] = ()) -> List[str]:
    """Every setting that differs between the stored ``stored`` and ``settings`` (keys in ``ignore`` may differ,
    e.g. a budget extended on resume), one text each; compared in their JSON form."""
    now = to_jsonable(settings)
    skip = set(ignore)
    diffs = []
    for key in sorted(set(stored) | set(now)):
        if key in skip:
            continue
        if key not in now:
            diffs.append(f"{key}: stored {stored[key]!r}, now missing")
        elif key not in stored:
            diffs.append(f"{key}: not stored, now {now[key]!r}")
        elif stored[key] != now[key]:
            diffs.append(f"{key}: stored {stored[key]!r}, now {now[key]!r}")
    return diffs


class Store:
    """Where one search keeps what it did: its observations in index order, the issued log (``issued``), the
    validation targets its predictions are scored on, the settings a resume must repeat, and its result."""

    issued: IssuedLog

    #: Where the store is, for messages (a run directory's path).
    location: str = ""

    def load(self, predictions: bool = True) -> List[Observation]:
        """Every stored observation in evaluation-index order, as a new list (``predictions=False``: their arrays
        may be left out)."""
        raise NotImplementedError

    def append(self, obs: Observation) -> None:
        """Keep one more observation (it ended; it may not come in index order)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.load(predictions=False))

    def save_targets(self, y_val) -> None:
        """Keep the validation targets every stored prediction is scored on (the first search keeps them)."""
        raise NotImplementedError

    def load_targets(self):
        """The validation targets, or None when none were kept."""
        raise NotImplementedError

    def read_meta(self) -> Optional[dict]:
        """The stored settings of the run, or None before any were written."""
        raise NotImplementedError

    def write_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        """Keep the settings of a new run; for a run that has some, check they match instead."""
        raise NotImplementedError

    def check_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        """Raise :class:`RunStoreError` listing every setting that differs from the stored ones (keys in
        ``ignore`` may differ)."""
        raise NotImplementedError

    def models_folder(self) -> Optional[Path]:
        """Where the evaluator saves fitted pipelines for this run, or None: a temporary folder the search owns."""
        return None

    def save_result(self, summary: dict, model: Any) -> None:
        """Keep a finished run's summary (the ``result.json`` schema) and its final model."""
        raise NotImplementedError
