"""Do two `optdiv bench` directories hold the same searches? Everything but timings and provenance must match.

A refactoring that claims unchanged behaviour runs the same replay bench before and after and compares:

    optdiv bench --datasets bodyfat,quake --data-dir DATA --methods optdivbo,divbo,bo-es,rb-es,nes,eo,dac-hb-es,\\
        admm-es,optdivbo-ab,kbo-es,tpe-es,rs-es --seeds 0-1 --budget 40 --library 300 --regression-metrics mse \\
        --cache CACHE --out before          # and again, on the changed code, with --out after
    python benchmarks/same_replays.py before after

Replays are deterministic (a library's stored outcomes, seeded suggestions), so any difference in a result, a
trace or a member list is a change of behaviour. Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import List

from optdiv.storage.layout import RESULTS_NAME

#: Columns and keys that measure the machine, not the search.
TIMINGS = ("wall_seconds", "optimizer_seconds")


def _rows(directory: Path) -> list:
    with open(directory / RESULTS_NAME, newline="") as handle:
        return sorted(tuple((k, v) for k, v in row.items() if k not in TIMINGS) for row in csv.DictReader(handle))


def _result(path: Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("provenance", None)
    for key in TIMINGS:
        data.get("row", {}).pop(key, None)
    return data


def differences(before: Path, after: Path) -> List[str]:
    """What differs between the two bench directories (empty when they hold the same searches)."""
    found = []
    if _rows(before) != _rows(after):
        found.append(RESULTS_NAME)
    for path in sorted(p for p in (before / "runs").rglob("*") if p.is_file()):
        other = after / path.relative_to(before)
        name = str(path.relative_to(before))
        if not other.exists():
            found.append(f"{name} (missing after)")
        elif path.suffix == ".json":
            if _result(path) != _result(other):
                found.append(name)
        elif path.read_bytes() != other.read_bytes():
            found.append(name)
    found += [f"{p.relative_to(after)} (new after)" for p in sorted((after / "runs").rglob("*"))
              if p.is_file() and not (before / p.relative_to(after)).exists()]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="same_replays.py", description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    found = differences(args.before, args.after)
    files = sum(1 for p in (args.before / "runs").rglob("*") if p.is_file())
    for name in found:
        print("differs:", name)
    print(f"{files} run files compared, {len(found)} differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
