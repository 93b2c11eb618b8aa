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

#: name: the ``sklearn.datasets`` loader (regression: diabetes; classification: the others).
LOADERS = {"diabetes": "load_diabetes", "digits": "load_digits", "breast_cancer": "load_breast_cancer",
           "wine": "load_wine"}


def write_sets(out: Path, names=tuple(LOADERS)) -> list:
    """Write ``OUT/NAME.csv`` for each of ``names``; the paths written."""
    import sklearn.datasets

    unknown = sorted(set(names) - set(LOADERS))
    if unknown:
        raise ValueError(f"unknown bundled set {', '.join(unknown)}; choose from {', '.join(LOADERS)}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        frame = getattr(sklearn.datasets, LOADERS[name])(as_frame=True).frame
        columns = [c for c in frame.columns if c != "target"] + ["target"]
        path = out / f"{name}.csv"
        frame[columns].to_csv(path, index=False)
        written.append(path)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--datasets", default=",".join(LOADERS), help="comma-separated (default: all four)")
    args = parser.parse_args(argv)
    for path in write_sets(args.out, [x for x in args.datasets.split(",") if x]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
