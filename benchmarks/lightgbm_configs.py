"""LightGBM alone at a few fixed settings, on the race's splits: is a configuration strong before a search sees it?

A start configuration of the product is chosen on some datasets and raced on others. This fits each named setting
once per (dataset, seed) on the same stratified 80/20 split as ``race.py`` (raw features, one thread) and prints the
test error (% for classification, MSE for regression) and the fit's seconds, then each setting's mean and how many
pairs it was lower than ``default`` in::

    python benchmarks/lightgbm_configs.py --data-dir ../shared/datasets --seeds 0,1,2 \\
        --datasets amazon_employee,bodyfat,cpu_act,cpu_small,quake,satimage,wine_quality
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from race import make_split, read_table, test_error  # noqa: E402  the race's split, task rule and error

#: ``default``: LightGBM's own defaults; ``large``: many leaves, small leaves, a slow rate and 90 % of the columns
#: (the kind of "large" booster AutoGluon's default model list holds), 500 or 1,000 rounds in place of early stopping.
SETTINGS = {
    "default": {"n_estimators": 100, "num_leaves": 31, "learning_rate": 0.1, "min_child_samples": 20},
    "large": {"n_estimators": 500, "num_leaves": 128, "learning_rate": 0.03, "min_child_samples": 5,
              "colsample_bytree": 0.9},
    "large1000": {"n_estimators": 1000, "num_leaves": 128, "learning_rate": 0.03, "min_child_samples": 5,
                  "colsample_bytree": 0.9},
}


def measure(csv: Path, seed: int, settings) -> list:
    """One line per setting: test error and fit seconds on ``csv``'s race split of ``seed``."""
    import lightgbm

    X, y, task = read_table(csv)
    train, test = make_split(y, task, seed)
    model_class = lightgbm.LGBMClassifier if task == "classification" else lightgbm.LGBMRegressor
    lines = []
    for name in settings:
        model = model_class(n_jobs=1, verbose=-1, random_state=0, **SETTINGS[name])
        began = time.perf_counter()
        model.fit(X[train], y[train])
        seconds = time.perf_counter() - began
        error = test_error(task, y[test], model.predict(X[test]))
        lines.append({"dataset": csv.stem, "seed": seed, "setting": name, "test_error": error,
                      "fit_seconds": round(seconds, 2)})
    return lines


def summary(lines: list) -> list:
    """Per setting: mean test error per dataset, and the (dataset, seed) pairs lower / higher than ``default``."""
    default = {(r["dataset"], r["seed"]): r["test_error"] for r in lines if r["setting"] == "default"}
    rows = []
    for name in dict.fromkeys(r["setting"] for r in lines):
        own = [r for r in lines if r["setting"] == name]
        means = {d: float(np.mean([r["test_error"] for r in own if r["dataset"] == d]))
                 for d in dict.fromkeys(r["dataset"] for r in own)}
        paired = [(r["test_error"], default[r["dataset"], r["seed"]]) for r in own
                  if (r["dataset"], r["seed"]) in default]
        rows.append({"setting": name, "means": means, "lower": sum(a < b for a, b in paired),
                     "higher": sum(a > b for a, b in paired)})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--datasets", required=True, help="comma-separated CSV names without .csv")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"of {', '.join(SETTINGS)}")
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown settings {unknown}; choose among {', '.join(SETTINGS)}")
    lines = []
    for dataset in args.datasets.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for line in measure(args.data_dir / f"{dataset}.csv", seed, settings):
                print(json.dumps(line), flush=True)
                lines.append(line)
    for row in summary(lines):
        means = ", ".join(f"{d} {m:.4g}" for d, m in row["means"].items())
        print(f"{row['setting']}: lower than default in {row['lower']}, higher in {row['higher']}; {means}")


if __name__ == "__main__":
    main()
