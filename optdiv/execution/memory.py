"""Peak memory of a run: the driver process's and its largest evaluation worker's resident set.

Read from the operating system's own accounting (``getrusage``), so it costs nothing while the run goes on. A
worker counts once it has ended and been reaped, which every evaluator and refit worker is by the end of a run.
"""

from __future__ import annotations

import sys
from typing import Dict, Optional


def _megabytes(maxrss: int) -> float:
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS
    return round(maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def peak_memory_mb() -> Optional[Dict[str, float]]:
    """{"driver": MB, "largest_worker": MB} so far, or None where the OS does not say (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return {"driver": _megabytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
            "largest_worker": _megabytes(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)}
