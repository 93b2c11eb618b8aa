"""Does a LightGBM with random split thresholds (``extra_trees``) make a better ensemble partner than a second plain one?

Measured before racing the switch as a search-space hyperparameter: on the race's stratified 80/20 split per seed,
three boosters at the built-in space's LightGBM defaults (500 rounds, 128 leaves, rate 0.1, depth at most 15) are
fitted on the training rows: a plain one, the same with ``extra_trees=True``, and a second plain one that differs
by its column subsample (0.8) and seed. Printed: each one's test error and that of the two equal-weight averages of
predicted probabilities (plain + randomised, plain + second plain). Classification sets only::

    python benchmarks/lightgbm_randomized_pair.py --data-dir ../shared/datasets \
        --datasets amazon_employee,satimage,wind,house_8L,cpu_act,cpu_small --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from race import dataset_names, make_split, read_table  # noqa: E402  the race's split and task rule

VARIANTS = {"plain": (False, 1.0, 0), "randomized": (True, 1.0, 0), "second_plain": (False, 0.8, 1)}


def _booster(extra_trees: bool, colsample: float, seed: int, threads: int):
    import lightgbm

    return lightgbm.LGBMClassifier(n_estimators=500, num_leaves=128, learning_rate=0.1, min_child_samples=20,
                                   subsample=1.0, subsample_freq=1, colsample_bytree=colsample, max_depth=15,
                                   extra_trees=extra_trees, random_state=seed, n_jobs=threads, verbose=-1)


def measure(csv: Path, seed: int, threads: int = 2):
    """Test errors (%) of the three boosters and the two pairs on ``csv``'s race split of ``seed``; None for a
    regression set."""
    X, y, task = read_table(csv)
    if task != "classification":
        return None
    _, codes = np.unique(y, return_inverse=True)
    train, test = make_split(y, task, seed)
    proba = {}
    for name, (extra_trees, colsample, offset) in VARIANTS.items():
        model = _booster(extra_trees, colsample, seed + offset, threads).fit(X[train], codes[train])
        proba[name] = model.predict_proba(X[test])

    def error(p):
        return 100.0 * float(np.mean(p.argmax(axis=1) != codes[test]))

    line = {"dataset": csv.stem, "seed": seed, **{name: error(p) for name, p in proba.items()}}
    line["plain+randomized"] = error((proba["plain"] + proba["randomized"]) / 2)
    line["plain+second_plain"] = error((proba["plain"] + proba["second_plain"]) / 2)
    return line


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--datasets", required=True, help="comma-separated CSV names without .csv, or 'all'")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    names = dataset_names(args.data_dir, args.datasets)
    for dataset in names:
        lines = []
        for seed in (int(s) for s in args.seeds.split(",")):
            line = measure(args.data_dir / f"{dataset}.csv", seed, args.threads)
            if line is None:
                print(f"{dataset}: regression, skipped")
                break
            print(json.dumps(line), flush=True)
            lines.append(line)
        if lines:
            means = {k: round(float(np.mean([line[k] for line in lines])), 3) for k in lines[0]
                     if k not in ("dataset", "seed")}
            print(f"{dataset}, mean over {len(lines)} seeds: {json.dumps(means)}", flush=True)


if __name__ == "__main__":
    main()
