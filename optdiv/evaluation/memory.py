"""Peak memory of a run: the driver process's and its largest evaluation worker's resident set.

The driver's is the operating system's own account (``getrusage``). Each worker reports its own peak
(:func:`own_peak_mb`, Linux's ``VmHWM``) with every result it sends, and :func:`note_worker_peak` keeps the
largest: the children's ``getrusage`` figure would not do, as a spawned child inherits its parent's peak at the
moment it was started. Both are this process's so far (a second fit in the same process starts from the first's).
"""

from __future__ import annotations

import sys
from typing import Dict, Optional


def _megabytes(maxrss: int) -> float:
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS
    return round(maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


_LARGEST_WORKER = [0.0]


def own_peak_mb() -> Optional[float]:
    """This process's own peak resident set in MB (``VmHWM``), None where the OS does not say."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


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
