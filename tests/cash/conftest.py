"""Put tests/cash on sys.path so the spawned evaluator workers can import ``builders`` by name."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
