"""Time one engine suggestion for bo, divbo and optdivbo at several history sizes.

The history is synthetic (random configurations of the space with random binary validation
probabilities), so the figure is the optimiser's own cost: candidate sampling and encoding, the
performance forest and EI, and for DivBO/OptDivBO the pool, pairwise diversity, diversity surrogate
and re-ranking. The setting measured in docs/results.md: 5,000 candidates, 2,000 validation rows, pool of 25.

    python benchmarks/suggest_speed.py --sizes 50,100,250,500 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.evaluation.observation import Observation
from optdiv.spaces import get_space
from optdiv.strategies.model_based import Optimizer


def synthetic_history(space, size: int, rows: int, seed: int) -> (List[Observation], np.ndarray):
    rng = np.random.default_rng(seed)
    y_val = rng.integers(0, 2, rows)
    history = []
    for i, config in enumerate(space.sample(size, seed)):
        p = rng.random(rows).astype(np.float32)
        history.append(
            Observation(config, "ok", float(rng.random()), val_pred=np.stack([1 - p, p], axis=1), index=i,
                        algorithm=space.algorithm_of(config))
        )
    return history, y_val


def suggest_speed(sizes=(50, 100, 250, 500), methods=("bo", "divbo", "optdivbo"), repeats: int = 5,
                  rows: int = 2000, space: str = "autosklearn", seed: int = 0) -> Dict:
    space_obj = get_space(space, "classification")
    table: Dict[str, Dict[int, float]] = {m: {} for m in methods}
    for size in sizes:
        history, y_val = synthetic_history(space_obj, size, rows, seed)
        if size <= repeats:
            raise ValueError("every size must exceed the number of repeats")
        for method in methods:
            optimizer = Optimizer(space_obj, method, "error", seed=seed)
            # as in a real run, each suggestion follows the previous one with one more observation
            optimizer.suggest(history[: size - repeats], y_val=y_val)
            times = [optimizer.suggest(history[: size - repeats + r + 1], y_val=y_val).seconds
                     for r in range(repeats)]
            table[method][size] = float(np.median(times))
    ratios = {m: {s: table[m][s] / table["bo"][s] for s in sizes} for m in methods if "bo" in table}
    return {"median_seconds": table, "ratio_to_bo": ratios, "rows": rows, "candidates": 5000,
            "machine": f"{platform.machine()}, {platform.python_version()}"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100,250,500")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    report = suggest_speed(sizes, repeats=args.repeats, rows=args.rows)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
