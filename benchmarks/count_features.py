"""Are integer columns identifiers? Each one's value counts as an extra feature, one model at a time, on the race's splits.

amazon_employee's nine columns are identifiers written as integers (a resource, a manager, a role), and every
system in the race reads them as numbers. Trees then split on the identifiers' order, which means nothing. A common
remedy is to add, per such column, how often its value occurs in the training rows. This checks, before any search
sees it, whether that helps the strong models at their library's defaults (LightGBM, a random forest of 100 trees, one
thread each) on the same stratified / shuffled 80/20 split per seed as ``race.py``, and whether it hurts where the
integer columns are quantities (counts of system calls, coordinates, votes)::

    python benchmarks/count_features.py --data-dir ../shared/datasets --datasets all --seeds 0,1,2

A column qualifies when every training value is a whole number, it holds more than ``--min-distinct`` values and each
value occurs ``--min-repeat`` times on average (so a near-unique column, whose count is 1 almost everywhere, does not).
A value the training rows never hold counts 0. Sets without such a column print one line and are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from race import dataset_names, make_split, read_table, test_error  # noqa: E402  the race's split, task rule and error

from optdiv.spaces.value_shares import identifier_columns, looked_up  # noqa: E402  the space switch's rule

MODELS = ("lightgbm", "random_forest")


def with_counts(train: np.ndarray, other: np.ndarray, columns: List[int]):
    """``train`` and ``other`` with one column appended per chosen column: its value's count in ``train``."""
    added_train, added_other = [], []
    for j in columns:
        values, counts = np.unique(train[:, j], return_counts=True)
        for rows, added in ((train, added_train), (other, added_other)):
            added.append(looked_up(values, counts, rows[:, j]))
    return np.column_stack([train, *added_train]), np.column_stack([other, *added_other])


def _model(name: str, task: str):
    if name == "lightgbm":
        import lightgbm

        cls = lightgbm.LGBMClassifier if task == "classification" else lightgbm.LGBMRegressor
        return cls(n_jobs=1, verbose=-1, random_state=0)
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    return cls(n_estimators=100, n_jobs=1, random_state=0)


def measure(csv: Path, seed: int, min_distinct: int = 50, min_repeat: float = 2.0) -> list:
    """One line per model on ``csv``'s race split of ``seed``: test error without and with the counts; no line
    where no column qualifies."""
    X, y, task = read_table(csv)
    train, test = make_split(y, task, seed)
    columns = identifier_columns(X[train], min_distinct, min_repeat)
    if not columns:
        return []
    counted_train, counted_test = with_counts(X[train], X[test], columns)
    lines = []
    for name in MODELS:
        plain = test_error(task, y[test], _model(name, task).fit(X[train], y[train]).predict(X[test]))
        counted = test_error(task, y[test], _model(name, task).fit(counted_train, y[train]).predict(counted_test))
        lines.append({"dataset": csv.stem, "seed": seed, "model": name, "columns": len(columns),
                      "plain": plain, "counted": counted})
    return lines


def main(argv=None) -> None:
    from optdiv.bench.stats import relative_pairs_line

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--datasets", required=True, help="comma-separated CSV names without .csv, or 'all'")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--min-distinct", type=int, default=50)
    parser.add_argument("--min-repeat", type=float, default=2.0)
    args = parser.parse_args(argv)
    names = dataset_names(args.data_dir, args.datasets)
    lines = []
    for dataset in names:
        for seed in (int(s) for s in args.seeds.split(",")):
            found = measure(args.data_dir / f"{dataset}.csv", seed, args.min_distinct, args.min_repeat)
            if not found:
                print(f"{dataset}: no integer column qualifies")
                break
            for line in found:
                print(json.dumps(line), flush=True)
            lines += found
    for dataset in dict.fromkeys(line["dataset"] for line in lines):
        own = [line for line in lines if line["dataset"] == dataset]
        print(relative_pairs_line(f"{dataset}, counts against none", [line["counted"] for line in own],
                                  [line["plain"] for line in own]))


if __name__ == "__main__":
    main()
