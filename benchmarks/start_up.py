"""How soon a fit's first evaluation is recorded, measured as a user's script meets it.

Each fit runs in a fresh interpreter whose main module imports pandas, scikit-learn and optdiv at its top, as a
user's script does: a worker process started with ``spawn`` imports that main module again before it reads its
data, so the start-up depends on it (a benchmark script that imports little would hide it). Prints, per dataset
and seed, the seconds from ``fit`` to the first recorded evaluation, the evaluations made and the test error on
the same stratified 80/20 split as ``race.py``::

    python benchmarks/start_up.py --data-dir ../shared/datasets --datasets wind,satimage,house_8L --seeds 0,1 \\
        --budget 30 [--n-jobs 1]

Datasets are CSV files named DATASET.csv in ``--data-dir`` whose last column is the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd  # noqa: F401  (imported at the top, as a user's script does: the workers import it again)
import sklearn  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(REPO))

import optdiv.sklearn  # noqa: E402,F401


def fit_one(path: Path, seed: int, budget: float, n_jobs: int) -> dict:
    """One fit of the estimator's defaults (``time_budget``, ``seed``, ``n_jobs``) on the race's split."""
    from sklearn.model_selection import train_test_split

    from optdiv.data import load_dataset
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor

    dataset = load_dataset(str(path), target=pd.read_csv(path, nrows=0).columns[-1])
    classify = dataset.task == "classification"
    y = dataset.y if dataset.classes is None else dataset.classes[dataset.y]
    X_train, X_test, y_train, y_test = train_test_split(dataset.X, y, test_size=0.2, random_state=seed,
                                                        stratify=y if classify else None)
    model = (OptDivClassifier if classify else OptDivRegressor)(time_budget=budget, seed=seed, n_jobs=n_jobs)
    began, began_epoch = time.perf_counter(), time.time()
    model.fit(X_train, y_train)
    wall = time.perf_counter() - began
    recorded = [obs.recorded_at for obs in model.result_.history if obs.recorded_at is not None]
    predicted = model.predict(X_test)
    error = (100.0 * float((predicted != y_test).mean()) if classify
             else float(((predicted - y_test) ** 2).mean()))
    return {"dataset": path.stem, "seed": seed, "budget": budget, "n_jobs": n_jobs, "wall": round(wall, 2),
            "first_result": None if not recorded else round(min(recorded) - began_epoch, 2),
            "evaluations": len(model.result_.history), "test_error": error}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    parser.add_argument("--datasets", default="wind,satimage,house_8L")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--budget", type=float, default=30.0, help="time budget of each fit, seconds")
    parser.add_argument("--n-jobs", type=int, default=-1, help="the estimator's n_jobs (-1: every core)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--fit", help=argparse.SUPPRESS)  # one fit, in the fresh interpreter this script starts
    args = parser.parse_args(argv)
    if args.fit:
        job = json.loads(args.fit)
        print(json.dumps(fit_one(Path(job["path"]), job["seed"], job["budget"], job["n_jobs"])))
        return 0
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in args.datasets.split(","):
            job = {"path": str(Path(args.data_dir) / f"{name}.csv"), "seed": seed, "budget": args.budget,
                   "n_jobs": args.n_jobs}
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--fit", json.dumps(job)],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"{name} seed {seed}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                return 1
            row = json.loads(lines[-1])
            rows.append(row)
            print(f"{name} seed {seed}: first result at {row['first_result']} s, {row['evaluations']} evaluations, "
                  f"{row['wall']} s, test error {row['test_error']:.4g}", flush=True)
    firsts = [r["first_result"] for r in rows if r["first_result"] is not None]
    print(f"\nfirst result: median {statistics.median(firsts):.1f} s, range {min(firsts):.1f}-{max(firsts):.1f} s; "
          f"evaluations {sum(r['evaluations'] for r in rows)} in {len(rows)} fits")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
