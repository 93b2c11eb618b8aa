"""scikit-learn's bundled small datasets written as CSV files (last column ``target``), for the race and the other
benchmarks that read a ``--data-dir``: small data outside the project's collection, on which a default that acts
only on cross-validated data (at most 4,000 rows) can be chosen before it is reported on the collection's small
sets. Nothing is downloaded::

    python benchmarks/bundled_sets.py --out runs/bundled
    python benchmarks/race.py run --data-dir runs/bundled --datasets diabetes,digits --seeds 0,1,2,3,4 \\
        --seconds 180 --systems 'optdiv,optdiv:fold_models=bagged' --out runs/race-bundled
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.data import SKLEARN_BUNDLED, load_dataset  # noqa: E402  the engine's own loader of these sets


def write_sets(out: Path, names=SKLEARN_BUNDLED) -> list:
    """Write ``OUT/NAME.csv`` (the features, then ``target``) for each of ``names``; the paths written."""
    unknown = sorted(set(names) - set(SKLEARN_BUNDLED))
    if unknown:
        raise ValueError(f"unknown bundled set {', '.join(unknown)}; choose from {', '.join(SKLEARN_BUNDLED)}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        data = load_dataset(f"sklearn:{name}")
        path = out / f"{name}.csv"
        data.X.assign(target=data.y).to_csv(path, index=False)
        written.append(path)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--datasets", default=",".join(SKLEARN_BUNDLED), help="comma-separated (default: all)")
    args = parser.parse_args(argv)
    for path in write_sets(args.out, [x for x in args.datasets.split(",") if x]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
