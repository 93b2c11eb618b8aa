"""Wall time of ``OptDivClassifier/OptDivRegressor(budget=None, time_budget=B).fit`` against B.

Fits the estimator (classification or regression, as each dataset's target says) once per dataset and seed,
timing the whole ``fit`` call, and prints one table row per run: whether it ended within max(5 %, 10 s) of
the budget, the tolerance ``--time-budget`` promises, how many evaluations the search made, and how long the
first one took to be recorded (the start-up: worker processes, their imports, the data sent to them)::

    python benchmarks/time_budget.py --budget 60 --datasets quake,space_ga,wind,cpu_small,bodyfat --seeds 0,1

Datasets are CSV files named DATASET.csv in ``--data-dir`` whose last column is the target.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(REPO))


def tolerance(budget: float) -> float:
    """How far past its budget a call may end: max(5 %, 10 s)."""
    return max(0.05 * budget, 10.0)


def run_one(path: Path, seed: int, method: str, budget: float, time_limit) -> dict:
    import pandas as pd

    from optdiv.data import load_dataset
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor

    dataset = load_dataset(str(path), target=pd.read_csv(path, nrows=0).columns[-1])
    estimator = OptDivClassifier if dataset.task == "classification" else OptDivRegressor
    y = dataset.y if dataset.classes is None else dataset.classes[dataset.y]
    model = estimator(method=method, budget=None, time_budget=budget, time_limit=time_limit, seed=seed)
    began, began_epoch = time.perf_counter(), time.time()
    model.fit(dataset.X, y)
    wall = time.perf_counter() - began
    recorded = [obs.recorded_at for obs in model.result_.history if obs.recorded_at is not None]
    final = model.result_.info.get("final_model", {})
    return {"dataset": path.stem, "task": dataset.task, "seed": seed, "method": method, "budget": budget,
            "wall": wall, "overrun": wall - budget, "within": wall <= budget + tolerance(budget),
            "evaluations": len(model.result_.history), "loaded": final.get("loaded"),
            "refitted": final.get("refitted"), "stopped": model.result_.info.get("stopped"),
            "search_seconds": model.result_.info.get("search_seconds"), "final_seconds": final.get("seconds"),
            "first_result": min(recorded) - began_epoch if recorded else None}


def _time_limit(text: str):
    return text if text == "auto" else float(text)


def table(rows) -> str:
    lines = ["| dataset | task | seed | method | budget s | wall s | overrun s | within max(5%, 10 s) | evaluations "
             "| members loaded/refitted | first result s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['task']} | {r['seed']} | {r['method']} | {r['budget']:g} | "
                     f"{r['wall']:.1f} | {r['overrun']:+.1f} | {'yes' if r['within'] else 'NO'} | "
                     f"{r['evaluations']} | {r['loaded']}/{r['refitted']} | "
                     f"{'-' if r.get('first_result') is None else format(r['first_result'], '.1f')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    parser.add_argument("--datasets", default="quake,space_ga,wind,cpu_small,bodyfat")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--method", default="optdivbo")
    parser.add_argument("--budget", type=float, default=60.0, help="time budget of each fit, seconds")
    parser.add_argument("--time-limit", type=_time_limit, default=30.0,
                        help="per-evaluation limit, seconds, or auto (the estimators' default)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in args.datasets.split(","):
            row = run_one(Path(args.data_dir) / f"{name}.csv", seed, args.method, args.budget, args.time_limit)
            rows.append(row)
            print(f"{row['dataset']} seed {seed}: {row['wall']:.1f} s for a {row['budget']:g} s budget "
                  f"({row['evaluations']} evaluations; search ended at {row['search_seconds'] or 0:.1f} s, final "
                  f"model {row['final_seconds'] or 0:.1f} s; {row['stopped']})", flush=True)
    print(table(rows))
    within = sum(r["within"] for r in rows)
    overruns = [r["overrun"] for r in rows]
    print(f"\n{within}/{len(rows)} runs within max(5%, 10 s); overrun mean {sum(overruns) / len(rows):+.1f} s, "
          f"max {max(overruns):+.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if within == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
