"""A run directory: settings, an append-only observation log and prediction arrays, crash-safe.

Layout::

    RUN/
      meta.json              settings of the run, written once; a resumed run must match them
      observations.jsonl     one JSON object per observation (no predictions inline), append-only
      issued.jsonl           every evaluation before it started: index, configuration, indices then running
      preds/00007_val.npy    float32 validation predictions of observation 7
      preds/00007_test.npy   float32 test predictions of observation 7
      preds/y_val.npy        the validation targets every validation prediction is scored on (out-of-fold rows
                             under cross-validation), written once when a search starts, so a run that is still
                             going or was killed can be scored and drawn (optdiv.show.view)
      models/ROWS/00007.joblib  the fitted pipeline of observation 7, kept for the final model while it ranks
                             among the best (optdiv.evaluation.pipelines; ROWS: a digest of its training rows)
      result.json            the finished run's summary, and model.joblib its final model (:meth:`RunStore.save_result`)
      ...                    other documents, written with :meth:`RunStore.write_json`

Crash safety: every file except the log is written to a temporary name in its own directory, flushed,
fsynced and moved into place with ``os.replace``, so a reader sees the old file or the new one, never
half of one. For an observation, its arrays are written **before** its log line, so a complete log line
always has its arrays. A crash while appending leaves at most a torn last line (no trailing newline):
:meth:`RunStore.load` ignores it and the next :meth:`RunStore.append` cuts it off before writing.
A log line whose arrays are missing (deleted by hand) is skipped with a warning.

``issued.jsonl`` (:class:`~optdiv.storage.issued.IssuedLog`) is written, fsynced, before an evaluation starts, so
an index issued without a result is one that was in flight when the run stopped: a resume evaluates it again with
the same configuration instead of suggesting another there (optdiv.engine.loop). The file names are
:mod:`optdiv.storage.layout`'s.

Each log line also carries the observation's ``measures`` (what black-box constraints can name) and, for a
cross-validation timeout, the censored ``partial_loss`` with ``folds_done`` / ``folds_total`` (a resumed
search imputes it as the uninterrupted one did); lines written before these were recorded load with an empty
dict and ``None`` / 0. Each line also carries ``recorded_at``, seconds since the epoch when the search recorded it
(the wall-time axis of ``optdiv show``); older lines load with ``None``.

One writer per run directory at a time.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, List, Optional, Union

import numpy as np

from optdiv.evaluation.observation import Observation
from optdiv.storage.atomic import atomic_save_npy, atomic_write_json, cut_torn_line, to_jsonable
from optdiv.storage.base import RunStoreError, Store, settings_differences
from optdiv.storage.issued import IssuedLog
from optdiv.storage.layout import LOG_NAME, META_NAME, MODEL_NAME, MODELS_DIR, PREDS_DIR, RESULT_NAME, TARGETS_NAME


def _read_measures(stored: Any) -> dict:
    """A log line's measures as floats; absent (an older log) or unreadable entries give nothing."""
    if not isinstance(stored, dict):
        return {}
    out = {}
    for name, value in stored.items():
        try:
            value = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            out[str(name)] = value
    return out


def _read_float(stored: Any) -> Optional[float]:
    """A finite float, or None for an absent (older log) or unreadable entry."""
    try:
        value = float(stored)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class RunStore(Store):
    """Read and append the observations of one run directory (created when missing)."""

    def __init__(self, directory: Union[str, os.PathLike]):
        self.directory = Path(directory)
        self.location = str(self.directory)
        self.preds_dir = self.directory / PREDS_DIR
        self.log_path = self.directory / LOG_NAME
        self.meta_path = self.directory / META_NAME
        self.issued = IssuedLog(self.directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise RunStoreError(f"run directory {str(self.directory)!r} exists and is not a directory")
        self.preds_dir.mkdir(parents=True, exist_ok=True)

    # -- settings -----------------------------------------------------------------------------------

    def read_meta(self) -> Optional[dict]:
        if not self.meta_path.exists():
            return None
        with open(self.meta_path, "r", encoding="utf-8") as fh:
            return json.load(fh)

    def write_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        """Write ``meta.json`` for a new run; for an existing one, check the settings match instead."""
        if self.meta_path.exists():
            self.check_meta(settings, ignore=ignore)
            return
        atomic_write_json(self.meta_path, settings)

    def check_meta(self, settings: dict, ignore: Iterable[str] = ()) -> None:
        """Raise :class:`RunStoreError` listing every setting that differs from the stored ``meta.json``
        (keys in ``ignore`` may differ, e.g. a budget extended on resume)."""
        stored = self.read_meta()
        if stored is None:
            raise RunStoreError(f"run directory {str(self.directory)!r} has no {META_NAME} to check against")
        diffs = settings_differences(stored, settings, ignore)
        if diffs:
            raise RunStoreError(
                f"cannot resume run {str(self.directory)!r}: its settings differ ({'; '.join(diffs)}); "
                f"use a new run directory or the original settings"
            )

    # -- observations -------------------------------------------------------------------------------

    def save_targets(self, y_val) -> None:
        """Keep the validation targets once (atomically): the first search into this directory writes them and a
        resumed one, scoring the same rows, leaves them."""
        path = self.preds_dir / TARGETS_NAME
        if not path.exists():
            atomic_save_npy(path, np.asarray(y_val))

    def load_targets(self) -> Optional[np.ndarray]:
        """The validation targets, or None for a run directory written before they were kept."""
        path = self.preds_dir / TARGETS_NAME
        return np.load(str(path), allow_pickle=False) if path.exists() else None

    def pred_path(self, index: int, part: str) -> Path:
        return self.preds_dir / f"{int(index):05d}_{part}.npy"

    def append(self, obs: Observation) -> None:
        """Persist one observation: its arrays first (atomically), then its log line (fsynced)."""
        record = self._record(obs)
        for part, arr in (("val", obs.val_pred), ("test", obs.test_pred)):
            if arr is not None:
                atomic_save_npy(self.pred_path(obs.index, part), np.asarray(arr, dtype=np.float32))
                record[f"{part}_pred"] = f"{PREDS_DIR}/{self.pred_path(obs.index, part).name}"
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
        self._repair_log()
        with open(self.log_path, "ab") as fh:
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def load(self, predictions: bool = True) -> List[Observation]:
        """All complete observations in evaluation-index order (a torn last line and lines without arrays
        skipped). A run with several workers appends them as they finish, not in index order."""
        out = []
        for record in self._records():
            paths = {}
            for part in ("val", "test"):
                rel = record.get(f"{part}_pred")
                if rel:
                    paths[part] = self.directory / rel
            lost = [str(p) for p in paths.values() if not p.exists()]
            if lost:
                warnings.warn(
                    f"{self.log_path}: skipping observation {record.get('index')}: prediction file(s) missing: "
                    f"{', '.join(lost)}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            arrays = {part: np.load(str(p), allow_pickle=False) if predictions else None for part, p in paths.items()}
            out.append(
                Observation(
                    config=record.get("config", {}),
                    status=record["status"],
                    val_loss=float(record["val_loss"]),
                    test_loss=None if record.get("test_loss") is None else float(record["test_loss"]),
                    fit_seconds=float(record.get("fit_seconds") or 0.0),
                    error=record.get("error"),
                    val_pred=arrays.get("val"),
                    test_pred=arrays.get("test"),
                    index=int(record["index"]),
                    algorithm=record.get("algorithm", ""),
                    measures=_read_measures(record.get("measures")),
                    partial_loss=_read_float(record.get("partial_loss")),
                    folds_done=int(record.get("folds_done") or 0),
                    folds_total=int(record.get("folds_total") or 0),
                    recorded_at=_read_float(record.get("recorded_at")),
                )
            )
        out.sort(key=lambda obs: obs.index)  # stable: a sequential log is already in this order
        return out

    def __len__(self) -> int:
        return len(self.load(predictions=False))

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``name`` (e.g. ``result.json``) in the run directory atomically; returns its path."""
        path = self.directory / name
        atomic_write_json(path, obj)
        return path

    def read_json(self, name: str) -> Any:
        with open(self.directory / name, "r", encoding="utf-8") as fh:
            return json.load(fh)

    def models_folder(self) -> Path:
        return self.directory / MODELS_DIR

    def save_result(self, summary: dict, model: Any) -> None:
        """``result.json`` and ``model.joblib``, each written atomically."""
        import joblib

        self.write_json(RESULT_NAME, summary)
        joblib.dump(model, self.directory / MODEL_NAME)

    # -- internals ----------------------------------------------------------------------------------

    @staticmethod
    def _record(obs: Observation) -> dict:
        val_loss = float(obs.val_loss)
        if not math.isfinite(val_loss):
            raise ValueError(f"observation {obs.index}: val_loss must be finite (got {val_loss})")
        return {
            "index": int(obs.index),
            "algorithm": str(obs.algorithm or ""),
            "status": str(obs.status),
            "val_loss": val_loss,
            "test_loss": to_jsonable(obs.test_loss),
            "fit_seconds": to_jsonable(obs.fit_seconds),
            "error": obs.error,
            "config": to_jsonable(dict(obs.config)),
            "measures": to_jsonable(dict(getattr(obs, "measures", None) or {})),
            "partial_loss": to_jsonable(getattr(obs, "partial_loss", None)),
            "folds_done": int(getattr(obs, "folds_done", 0) or 0),
            "folds_total": int(getattr(obs, "folds_total", 0) or 0),
            "recorded_at": to_jsonable(obs.recorded_at if getattr(obs, "recorded_at", None) is not None
                                       else time.time()),
            "val_pred": None,
            "test_pred": None,
        }

    def _records(self) -> List[dict]:
        if not self.log_path.exists():
            return []
        with open(self.log_path, "rb") as fh:
            data = fh.read()
        lines = data.split(b"\n")
        # the piece after the last newline is empty, or a torn line from a crash mid-append: ignored
        complete = lines[:-1]
        records = []
        for number, raw in enumerate(complete, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                if not isinstance(record, dict) or "index" not in record or "status" not in record:
                    raise ValueError("not an observation record")
            except ValueError as exc:
                warnings.warn(f"{self.log_path}:{number}: skipping unreadable line ({exc})", RuntimeWarning,
                              stacklevel=3)
                continue
            records.append(record)
        return records

    def _repair_log(self) -> None:
        """Cut a torn last line (bytes after the last newline) left by a crash during an append."""
        cut_torn_line(self.log_path)


