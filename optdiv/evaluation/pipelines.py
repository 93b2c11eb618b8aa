"""Fitted pipelines saved by the evaluator, so the final model is assembled from them instead of refitted.

Refitting every ensemble member after the search took as long as a good part of the search itself and was
outside any time budget. The evaluator's worker therefore saves each successful holdout fit (joblib) under
``FOLDER/ROWS/00007.joblib``, where ``ROWS`` is a digest of the training rows it was fitted on, so a model
is only ever reused for the very rows it would be refitted on (a refit on train+validation, or a resumed run
over other rows, finds nothing and refits). The folder is ``models/`` in a run directory, or a temporary
folder the search owns and removes once the final model is built. Disk use is bounded: only the
:data:`KEEP_BEST` best pipelines by validation loss (no more than :data:`KEEP_BYTES` of them) and those of the
search's current ensemble (a diverse member may rank low) are kept.
A cross-validated evaluation's fold pipelines are saved together, as one averaging model
(:class:`optdiv.evaluation.fitting.FoldBag`), when the search keeps fold models (``fold_models="bagged"``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

#: Best successful evaluations (by validation loss) whose fitted pipelines are kept, besides the current
#: ensemble's members; the others are deleted.
KEEP_BEST = 100

#: Most bytes of kept pipelines (the worst-ranked beyond it are deleted): a random forest can be tens of MB.
KEEP_BYTES = 2 * 1024**3

SUFFIX = ".joblib"


def rows_digest(X, y) -> str:
    """A short digest of the rows and targets a pipeline is fitted on (values, column names and row order)."""
    import pandas as pd

    digest = hashlib.sha256()
    digest.update("\x1f".join(map(str, X.columns)).encode("utf-8"))
    digest.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    digest.update(np.ascontiguousarray(np.asarray(y)).tobytes())
    return digest.hexdigest()[:16]


def splits_digest(X, y, folds=None) -> str:
    """The digest saved pipelines are filed under: the rows' (:func:`rows_digest`), and under cross-validation the
    fold assignment's too, since a saved fold bag holds one pipeline per fold of exactly those folds."""
    digest = rows_digest(X, y)
    if folds is None:
        return digest
    return digest + "-cv" + hashlib.sha256(np.ascontiguousarray(np.asarray(folds, dtype=np.int64))).hexdigest()[:8]


def part_rows_digest(digest: str, rows: int) -> str:
    """The digest a pipeline fitted on a sample of ``rows`` of ``digest``'s rows is filed under: kept apart from the
    fits on every row, so a member grown to part of the rows is never read back as refitted on all of them."""
    return f"{digest}-part{int(rows)}"


def pipeline_path(folder, digest: str, index: int) -> Path:
    return Path(folder) / digest / f"{int(index):05d}{SUFFIX}"


def save_pipeline(pipe, path) -> bool:
    """Write ``pipe`` to ``path`` through a temporary file (a worker ended mid-write leaves no torn model);
    False when it cannot be written (the final model then refits that member)."""
    import joblib

    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=str(path.parent))
        with os.fdopen(fd, "wb") as fh:
            joblib.dump(pipe, fh)
        os.replace(tmp, path)
        return True
    except Exception:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


class SavedPipelines:
    """The folder of one search's saved pipelines: where the evaluator writes, what the final model reads."""

    def __init__(self, folder=None):
        self.owned = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="optdiv-pipelines-") if folder is None else folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        # a temporary folder goes with this object at the latest (it also survives pickling as a plain path)
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.folder), True) if self.owned else None

    def path(self, digest: str, index: int) -> Path:
        return pipeline_path(self.folder, digest, index)

    def load(self, digest: str, index: int):
        """The pipeline evaluation ``index`` fitted on the rows of ``digest``, or None when it is not there
        (never saved, pruned, or unreadable)."""
        import joblib

        path = self.path(digest, index)
        if not path.exists():
            return None
        try:
            return joblib.load(path)
        except Exception:
            return None

    def has(self, digest: str, index: int) -> bool:
        """Whether evaluation ``index``'s pipeline for the rows of ``digest`` is saved."""
        return self.path(digest, index).is_file()

    def bytes_of(self, digest: str, indices: Sequence[int]) -> int:
        total = 0
        for index in indices:
            try:
                total += self.path(digest, index).stat().st_size
            except OSError:
                pass
        return total

    def prune(self, digest: str, history: Sequence, keep: int = KEEP_BEST, keep_bytes: int = KEEP_BYTES,
              protect: Iterable[int] = ()) -> None:
        """Delete the pipelines of ``digest`` that are not among the ``keep`` best successful evaluations
        (by validation loss, then index) or lie beyond ``keep_bytes`` in that ranking, unless their evaluation
        index is in ``protect`` (the members of the search's current ensemble)."""
        folder = self.folder / digest
        if not folder.is_dir():
            return
        ok = sorted((obs for obs in history if obs.status == "ok"), key=lambda obs: (obs.val_loss, obs.index))
        kept, total = {f"{int(index):05d}{SUFFIX}" for index in protect}, 0
        for obs in ok[:keep]:
            try:
                size = self.path(digest, obs.index).stat().st_size
            except OSError:
                continue
            if total + size > keep_bytes:
                break
            kept.add(f"{int(obs.index):05d}{SUFFIX}")
            total += size
        for obs in history:  # only finished ones: a parallel worker may be saving one not yet in the history
            if f"{int(obs.index):05d}{SUFFIX}" not in kept:
                try:
                    self.path(digest, obs.index).unlink()
                except OSError:
                    pass

    def cleanup(self) -> None:
        """Remove the folder if this search created it (a run directory's ``models/`` stays for a resume)."""
        if self._finalizer is not None:
            self._finalizer()

    def __getstate__(self):
        return {"owned": False, "folder": self.folder, "_finalizer": None}  # a copy never deletes the original
