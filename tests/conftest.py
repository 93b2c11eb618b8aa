"""Put tests/support on sys.path: its builders and spaces are top-level modules, so the evaluator's spawned worker
processes and Dask's workers (which inherit this sys.path) import them by name."""

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
