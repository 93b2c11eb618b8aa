"""Stock auto-sklearn against auto-sklearn + optdiv (OptDivBO, DivBO) on the same data, budget and seed.

Per dataset and seed, the data are split 60/20/20 with ``optdiv.data.split``. auto-sklearn gets the
training and validation rows with its holdout set to exactly the validation rows (``holdout``, no shuffle,
training rows first), so every method searches on the same rows and its ensemble builder (Caruana, size 25)
selects on them. The test rows are used only for the reported test error: classification error in %,
or MSE for regression. With ``--optdiv-ensemble`` each fit's final ensemble is built a second time from the same
runs with optdiv's ``OptDivEnsemble`` (auto-sklearn's ``fit_ensemble``), recorded as method ``<method>+ens``: the
two ensembles differ only in how they choose weights. Every finished fit is appended to
``--out/results.jsonl``; a rerun skips the (dataset, seed, method) triples already there, so an interrupted
benchmark resumes.

    python benchmarks/autosklearn_compare.py --data ../shared/datasets/quake.csv ../shared/datasets/wind.csv \\
        --seeds 0 1 2 --time 300 --out .cache/autosklearn_compare

Needs the auto-sklearn environment (Python 3.9, auto-sklearn 0.15).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.data import load_dataset, split

#: stock: auto-sklearn untouched; optdivbo / divbo: only the SMAC callback; optdiv: the switch as users get it
#: (``OptDivAutoSklearn*`` with its defaults: auto-sklearn's search, optdiv's ensemble, the members refitted);
#: optdiv-optdivbo: the switch with ``optdiv="optdivbo"`` (the same final model after the diversity re-ranking).
SWITCH = {"optdiv": True, "optdiv-optdivbo": "optdivbo"}
METHODS = ("stock", "optdivbo", "divbo", *SWITCH)


def _fit_one(splits, task: str, method: str, seed: int, seconds: int, per_run: Optional[int], memory_mb: int,
             ensemble_size: int, tmp: Path, include: Optional[List[str]], metalearning: int = 25,
             optdiv_ensemble: bool = False) -> List[Dict]:
    """One auto-sklearn fit; returns the records written to results.jsonl (two with ``optdiv_ensemble``)."""
    from optdiv.integrations import autosklearn as adapter
    from optdiv.integrations.autosklearn import ensemble_members, optdiv_smac

    if method in SWITCH:
        Estimator = getattr(adapter, "OptDivAutoSklearnClassifier" if task == "classification"
                            else "OptDivAutoSklearnRegressor")
    elif task == "classification":
        from autosklearn.classification import AutoSklearnClassifier as Estimator
    else:
        from autosklearn.regression import AutoSklearnRegressor as Estimator

    X = pd.concat([splits.X_train, splits.X_val], ignore_index=True)
    y = np.concatenate([splits.y_train, splits.y_val])
    n_train = len(splits.y_train)
    # holdout without shuffling takes the first floor(train_size * n) rows for training: exactly ours
    train_size = (n_train + 0.5) / len(y)
    callback = None if method == "stock" or method in SWITCH else optdiv_smac(method=method,
                                                                              ensemble_size=ensemble_size)
    kwargs = dict(
        time_left_for_this_task=int(seconds),
        per_run_time_limit=per_run,
        memory_limit=memory_mb,
        n_jobs=1,
        seed=int(seed),
        initial_configurations_via_metalearning=int(metalearning),
        ensemble_kwargs={"ensemble_size": ensemble_size},
        resampling_strategy="holdout",
        resampling_strategy_arguments={"train_size": train_size, "shuffle": False},
        dataset_compression=False,  # keep every row, in order, so the holdout stays our validation split
        tmp_folder=str(tmp),
        delete_tmp_folder_after_terminate=not optdiv_ensemble,  # fit_ensemble reads the runs' predictions
    )
    if method in SWITCH:
        kwargs["optdiv"] = SWITCH[method]
        if SWITCH[method] is not True:
            kwargs["optdiv_kwargs"] = {"ensemble_size": ensemble_size}
    else:
        kwargs["get_smac_object_callback"] = callback
    if include:
        group = "classifier" if task == "classification" else "regressor"
        kwargs["include"] = {group: list(include)}
    automl = Estimator(**kwargs)
    start = time.perf_counter()
    automl.fit(X, y)
    wall = time.perf_counter() - start

    def test_error_of(pred) -> float:
        if task == "classification":
            return 100.0 * float(np.mean(np.asarray(pred).astype(np.int64) != splits.y_test))
        return float(np.mean((np.asarray(pred, dtype=np.float64) - splits.y_test) ** 2))

    test_error = test_error_of(automl.predict(splits.X_test))
    statuses = [str(s) for s in automl.cv_results_["status"]]
    members = ensemble_members(automl)
    record = {
        "method": method,
        "seed": int(seed),
        "test_error": test_error,
        "runs": len(statuses),
        "successful_runs": sum(s == "Success" for s in statuses),
        "ensemble_members": len(members),
        "members": members,
        "wall_seconds": round(wall, 1),
    }
    callback = callback if callback is not None else getattr(automl, "optdiv_", None)
    if callback is not None:
        report = callback.report
        record.update(diversity_ranked=report.n_diversity_ranked, maximiser_calls=report.n_calls,
                      changed_by_diversity=report.n_changed, fallbacks=report.n_fallbacks)
    if getattr(automl, "optdiv_refit_", None) is not None:
        record["refit"] = automl.optdiv_refit_.summary()
    records = [record]
    if optdiv_ensemble:
        from optdiv.integrations.autosklearn import OptDivEnsemble

        start = time.perf_counter()
        # auto-sklearn's builder refits only when its candidates changed, and fit_ensemble then loads the ensemble
        # file of the highest iteration while the new one is saved as iteration 0: forget both
        internals = Path(automl.automl_._backend.internals_directory)
        (internals / "previous_ensemble_building_candidates.pkl").unlink()
        for old in (internals / "ensembles").glob("*.ensemble"):
            old.unlink()
        automl.fit_ensemble(y, ensemble_class=OptDivEnsemble, ensemble_kwargs={"ensemble_size": ensemble_size})
        members = ensemble_members(automl)
        records.append({**record, "method": method + "+ens",
                        "test_error": test_error_of(automl.predict(splits.X_test)),
                        "ensemble_members": len(members), "members": members,
                        "ensemble_seconds": round(time.perf_counter() - start, 1),
                        "selection_loss": automl.automl_.ensemble_.selection_loss_})
        shutil.rmtree(tmp, ignore_errors=True)
    return records


def _done(path: Path) -> set:
    if not path.exists():
        return set()
    out = set()
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out.add((r["dataset"], r["seed"], r["method"]))
    return out


def summarise(records: Sequence[Dict]) -> str:
    """Mean +- std of the test error per dataset and method, as a Markdown table."""
    if not records:
        return "(no results)"
    frame = pd.DataFrame([{k: r[k] for k in ("dataset", "method", "seed", "test_error", "runs")} for r in records])
    lines = ["| dataset | method | seeds | test error (mean +- std) | runs per fit |", "|---|---|---|---|---|"]
    for (dataset, method), group in frame.groupby(["dataset", "method"], sort=True):
        err = group["test_error"].to_numpy(dtype=float)
        std = float(np.std(err, ddof=1)) if len(err) > 1 else 0.0
        lines.append(f"| {dataset} | {method} | {len(err)} | {err.mean():.3f} +- {std:.3f} | "
                     f"{group['runs'].mean():.1f} |")
    return "\n".join(lines)


def paired_line(records: Sequence[Dict], datasets, methods, seeds) -> str:
    """Over the (dataset, seed) pairs: each method against stock auto-sklearn, and optdiv's ensemble of the same
    runs against the method's own (``+ens``): lower / level / higher and the Wilcoxon p of the relative
    differences (level pairs dropped)."""
    from optdiv.bench.stats import relative_pairs_line

    error = {(r["dataset"], r["seed"], r["method"]): r["test_error"] for r in records
             if r["dataset"] in datasets and r["seed"] in seeds}
    lines = []
    for method in methods:
        for ours, theirs in ((method, "stock"), (method + "+ens", method)):
            if ours == theirs:
                continue
            keys = sorted((d, s) for (d, s, m) in error if m == theirs and (d, s, ours) in error and error[d, s, m])
            if keys:
                lines.append(relative_pairs_line(f"{ours} vs {theirs}", [error[k + (ours,)] for k in keys],
                                                 [error[k + (theirs,)] for k in keys]))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/autosklearn_compare.py", description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="CSV paths (target column 'target' or the last one)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--time", type=int, default=300, help="auto-sklearn's time_left_for_this_task per fit (s)")
    parser.add_argument("--per-run-time", type=int, default=None, help="per_run_time_limit (default: auto-sklearn's, time/10)")
    parser.add_argument("--memory", type=int, default=4096, help="memory_limit per run in MB")
    parser.add_argument("--ensemble-size", type=int, default=25)
    parser.add_argument("--metalearning", type=int, default=25,
                        help="auto-sklearn's meta-learning initial configurations (its default: 25)")
    parser.add_argument("--optdiv-ensemble", action="store_true",
                        help="also rebuild each fit's ensemble with optdiv's OptDivEnsemble (method <method>+ens)")
    parser.add_argument("--include", nargs="*", default=None, help="restrict the model families (quick checks only)")
    parser.add_argument("--out", default=".cache/autosklearn_compare")
    args = parser.parse_args(argv)

    if args.time < 30:
        parser.error("--time must be at least 30 s (auto-sklearn's minimum)")
    if any(s < 0 for s in args.seeds):
        parser.error("--seeds must be non-negative")
    if args.metalearning < 0:
        parser.error("--metalearning must be >= 0")
    if args.ensemble_size < 1:
        parser.error("--ensemble-size must be at least 1")
    missing = [p for p in args.data if not Path(p).is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done = _done(results)
    for path in args.data:
        dataset = load_dataset(path)
        name = Path(path).stem
        for seed in args.seeds:
            splits = split(dataset, seed=seed)
            for method in args.methods:
                if (name, seed, method) in done:
                    print(f"{name} seed {seed} {method}: already in {results}, skipped", flush=True)
                    continue
                tmp = out / "tmp" / f"{name}_{seed}_{method}_{os.getpid()}"
                if tmp.exists():
                    shutil.rmtree(tmp)
                fitted = _fit_one(splits, dataset.task, method, seed, args.time, args.per_run_time, args.memory,
                                  args.ensemble_size, tmp, args.include, args.metalearning, args.optdiv_ensemble)
                fitted = [{"dataset": name, "task": dataset.task, "time_budget": args.time, **r} for r in fitted]
                with results.open("a") as fh:
                    for r in fitted:
                        fh.write(json.dumps(r) + "\n")
                record = fitted[0]
                extra = (f", {record['diversity_ranked']} diversity-ranked suggestions"
                         if "diversity_ranked" in record else "")
                print(f"{name} seed {seed} {method}: test error {record['test_error']:.3f} "
                      f"({record['runs']} runs, {record['ensemble_members']} ensemble members{extra}, "
                      f"{record['wall_seconds']:.0f} s)", flush=True)
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    wanted = {Path(p).stem for p in args.data}
    shown = set(args.methods) | ({m + "+ens" for m in args.methods} if args.optdiv_ensemble else set())
    table = summarise([r for r in records if r["dataset"] in wanted and r["method"] in shown
                       and r["seed"] in args.seeds])
    pairs = paired_line(records, wanted, args.methods, args.seeds)
    if pairs:
        table += "\n\n" + pairs
    (out / "summary.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
