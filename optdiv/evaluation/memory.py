"""Memory of a run: the driver's and its largest evaluation worker's peak resident set, and the per-evaluation
limit the parent enforces by watching each worker's resident set.

The driver's peak is the operating system's own account (``getrusage``). Each worker reports its own peak
(:func:`own_peak_mb`, Linux's ``VmHWM``) with every result it sends, and :func:`note_worker_peak` keeps the
largest: the children's ``getrusage`` figure would not do, as a spawned child inherits its parent's peak at the
moment it was started. Both are this process's so far (a second fit in the same process starts from the first's).

The limit is on the resident set (the worker's and its children's), not the address space: an address-space cap
(``RLIMIT_AS``) also counts thread stacks, malloc arenas and memory mapped but never touched, so a threaded
booster can fail under it while using a fraction of the memory it names.
"""

from __future__ import annotations

import numbers
import os
import sys
from typing import Dict, Optional

#: The per-evaluation limit of ``memory_limit_mb="auto"`` on small data: auto-sklearn's default.
AUTO_MEMORY_MB = 3072

#: Under ``"auto"`` a worker may also hold this many times the data it receives, plus a gigabyte.
AUTO_DATA_FACTOR = 4

#: Under ``"auto"`` on this machine, the evaluations running at once may hold at most this share of its memory.
AUTO_MACHINE_SHARE = 0.5


def _megabytes(maxrss: int) -> float:
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS
    return round(maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


_LARGEST_WORKER = [0.0]


def _status_mb(process: str, field: str) -> Optional[float]:
    """A kB field of Linux's ``/proc/PROCESS/status`` (``VmHWM``, ``VmRSS``) in MB, None where there is none."""
    try:
        with open(f"/proc/{process}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def own_peak_mb() -> Optional[float]:
    """This process's own peak resident set in MB (``VmHWM``), None where the OS does not say."""
    peak = _status_mb("self", "VmHWM")
    return None if peak is None else round(peak, 1)


def note_worker_peak(megabytes) -> None:
    """Keep a worker's reported peak if it is the largest so far."""
    if isinstance(megabytes, (int, float)) and megabytes > _LARGEST_WORKER[0]:
        _LARGEST_WORKER[0] = float(megabytes)


def peak_memory_mb() -> Optional[Dict[str, float]]:
    """{"driver": MB, "largest_worker": MB or None} so far, or None where the OS does not say (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return {"driver": _megabytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
            "largest_worker": _LARGEST_WORKER[0] or None}


def _children(pid: int) -> list:
    """The direct children of ``pid`` (Linux's ``/proc/PID/task/TID/children``), [] where unknown."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def resident_mb(pid: int) -> Optional[float]:
    """The resident set of process ``pid`` and its descendants in MB (a model's own worker processes count); None
    where the OS does not say (no ``/proc`` and no psutil) or the process is gone."""
    own = _status_mb(str(pid), "VmRSS")
    if own is not None:
        total, seen, todo = own, {pid}, _children(pid)
        while todo:
            child = todo.pop()
            if child in seen:
                continue
            seen.add(child)
            total += _status_mb(str(child), "VmRSS") or 0.0
            todo.extend(_children(child))
        return total
    try:
        import psutil
    except ImportError:
        return None
    try:
        proc = psutil.Process(pid)
        procs = [proc] + proc.children(recursive=True)
        return sum(p.memory_info().rss for p in procs) / (1024 * 1024)
    except psutil.Error:
        return None


def can_watch_memory() -> bool:
    """Whether :func:`resident_mb` can read a process's resident set on this machine."""
    return resident_mb(os.getpid()) is not None


def total_memory_mb() -> Optional[float]:
    """This machine's physical memory in MB, None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1024 * 1024)
    except (AttributeError, ValueError, OSError):
        return None


def resolve_memory_limit(value, data_mb: float = 0.0, at_once: int = 1, local: bool = True) -> Optional[int]:
    """The per-evaluation limit in MB for ``memory_limit_mb`` (None: none; a number: that many MB).

    ``"auto"``: auto-sklearn's 3 GB, or 1 GB plus four times the data a worker holds (``data_mb``) where that is
    more, so large data is not refused outright; on this machine (``local``) at most half its memory shared among
    the ``at_once`` evaluations that run together (never below 1 GB), so they cannot take the machine between them.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"memory_limit_mb must be a number of MB, None or 'auto'; got {value!r}")
        limit = max(AUTO_MEMORY_MB, 1024 + AUTO_DATA_FACTOR * float(data_mb))
        total = total_memory_mb() if local else None
        if total is not None:
            limit = min(limit, max(1024.0, AUTO_MACHINE_SHARE * total / max(1, int(at_once))))
        return int(limit)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"memory_limit_mb must be a positive number of MB, None or 'auto'; got {value!r}")
    return int(value)


def frames_mb(*frames) -> float:
    """The memory of data frames and arrays in MB (object columns counted deeply); None entries count nothing."""
    total = 0.0
    for frame in frames:
        if frame is None:
            continue
        usage = getattr(frame, "memory_usage", None)
        if callable(usage):
            used = usage(deep=True)
            total += float(used.sum() if hasattr(used, "sum") else used)
        else:
            total += float(getattr(frame, "nbytes", 0))
    return total / (1024 * 1024)


def splits_mb(splits) -> float:
    """The memory of every part of a split (what an evaluation worker receives) in MB."""
    return frames_mb(splits.X_train, splits.X_val, splits.X_test, splits.y_train, splits.y_val, splits.y_test)
