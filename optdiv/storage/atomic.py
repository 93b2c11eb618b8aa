"""Crash-safe writes: every file but an append-only log is written to a temporary name in its own directory,
flushed, fsynced and moved into place with ``os.replace``, so a reader sees the old file or the new one, never half
of one; an append-only log's line torn by a crash is cut off before the next append. Also the plain JSON form of the
values a run writes (numpy numbers and arrays, paths, non-finite floats)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for ``obj``: numpy scalars and arrays become Python numbers and lists, tuples
    become lists, paths become strings, and non-finite floats become ``None`` (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def fsync_dir(directory: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_UMASK = []


def _umask() -> int:
    """The process's umask, read once (reading it means setting it, so not on every write)."""
    if not _UMASK:
        mask = os.umask(0o022)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]


def atomic_write(path: Path, write, mode: Optional[int] = None) -> None:
    """Write ``path`` through ``write(binary file)`` via a fsynced temporary file and ``os.replace``.

    The temporary file is private; ``mode`` (e.g. 0o666, less the umask as ``open`` would) widens the result."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, str(path))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: Union[str, os.PathLike], obj: Any) -> None:
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True, allow_nan=False) + "\n"
    atomic_write(Path(path), lambda fh: fh.write(text.encode("utf-8")))


def atomic_save_npy(path: Union[str, os.PathLike], array: np.ndarray) -> None:
    atomic_write(Path(path), lambda fh: np.save(fh, np.asarray(array), allow_pickle=False))


def cut_torn_line(path: Union[str, os.PathLike]) -> None:
    """Drop the bytes after the last newline of an append-only log: a line torn by a crash mid-append."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        pos = size
        keep = 0
        while pos > 0:  # scan back in blocks for the last newline
            step = min(65536, pos)
            pos -= step
            fh.seek(pos)
            block = fh.read(step)
            nl = block.rfind(b"\n")
            if nl >= 0:
                keep = pos + nl + 1
                break
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
