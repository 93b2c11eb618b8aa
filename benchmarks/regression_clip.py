"""How much clipping regression members near the training targets' range changes the final ensemble, in replay.

Each regression library's stored validation and test predictions are clipped to [min - m * span, max + m * span]
of its split's training targets, as optdiv.evaluation.target_range does inside every live pipeline, and the same
replay searches run over the clipped and the raw library. Reported: the final ensemble's validation and test
MSE per margin, mean over seeds, and a Wilcoxon test of each margin's test MSE against the raw library's.

    python benchmarks/regression_clip.py --data-dir ../shared/datasets --datasets bodyfat,space_ga \\
        --cache .cache --methods bo-es,optdivbo --seeds 0-9 --budget 50 --margins 0.1,0.25,0.5
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.bench.harness import parse_seeds
from optdiv.bench.library import library_dir, load_library
from optdiv.bench.replay import replay_search
from optdiv.bench.stats import paired_p
from optdiv.data import load_dataset, split
from optdiv.evaluation.target_range import target_bounds
from optdiv.storage.files import RunStore


def clipped(library, y_train: np.ndarray, margin: float):
    a, b = target_bounds(y_train, margin)
    return dataclasses.replace(library, val_preds=np.clip(library.val_preds, a, b),
                               test_preds=np.clip(library.test_preds, a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", default="bodyfat,space_ga")
    parser.add_argument("--cache", default=".cache")
    parser.add_argument("--methods", default="bo-es,optdivbo")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--margins", default="0.1,0.25,0.5")
    args = parser.parse_args(argv)
    margins = [float(m) for m in args.margins.split(",")]
    seeds = parse_seeds(args.seeds)
    print("| dataset | method | raw: val / test MSE | " + " | ".join(f"margin {m}: val / test (p)" for m in margins) + " |")
    print("|---|---|---|" + "---|" * len(margins))
    for name in args.datasets.split(","):
        path = Path(args.data_dir) / f"{name}.csv"
        dataset = load_dataset(path)
        size = len(RunStore(library_dir(args.cache, dataset.name)))
        raw = load_library(path, args.cache, size)
        y_train = split(dataset, seed=0).y_train
        variants = [raw] + [clipped(raw, y_train, m) for m in margins]
        for method in args.methods.split(","):
            cells, raw_test = [], None
            for k, lib in enumerate(variants):
                runs = [replay_search(lib, method, "mse", seed, args.budget) for seed in seeds]
                val = [r.val_loss for r in runs]
                test = [r.test_loss for r in runs]
                if k == 0:
                    raw_test = test
                    cells.append(f"{np.mean(val):.4g} / {np.mean(test):.4g}")
                else:
                    cells.append(f"{np.mean(val):.4g} / {np.mean(test):.4g} ({paired_p(test, raw_test):.3f})")
            print(f"| {name} | {method} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
