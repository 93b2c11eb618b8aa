"""Table 6 comparison: AutoGluon-Tabular's defaults vs AutoGluon + optdiv at the same wall-time budget.

Every run gets the same data and the same budget: the papers' 60/20/20 split (``optdiv.data.split``,
stratified, one split per seed), train on the 60%, validation (AutoGluon's ``tuning_data``: early stopping,
the search and the weighted ensemble) on the 20%, test error on the last 20%. ``autogluon`` is
``TabularPredictor.fit`` with its default presets; ``optdivbo``, ``divbo`` (and ``bo``, ``rs``) are
``optdiv.integrations.autogluon.fit`` with the same arguments: AutoGluon's own fit first, then suggestions
of that method in the time AutoGluon leaves, then AutoGluon's weighted ensemble refitted over every model, then the
final model refitted on train + validation (``--hook`` picks an earlier design). ``autogluon-refit`` (AutoGluon
alone with its own ``refit_full`` of the best model) and ``autogluon-bagged`` (AutoGluon alone, 8-fold bagged over
train + validation) separate what a lever of the hook owes to AutoGluon's own feature.

    python benchmarks/autogluon_compare.py --data ../shared/datasets/quake.csv --seeds 0 \\
        --time-budget 60 --out .cache/ag_compare/tiny

Each finished run is appended to ``OUT/runs.jsonl`` (a rerun skips runs already there, so an
interrupted comparison resumes; optdiv runs of an earlier design of the hook, without ``hook`` =
:data:`HOOK`, are run again); ``OUT/summary.md`` holds the table with the papers' numbers beside.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

METHODS = ("autogluon", "autogluon-refit", "autogluon-bagged", "optdivbo", "divbo", "bo", "rs")
#: The hook's designs the optdiv runs measure. "refit-check" (the default): AutoGluon's own fit, then the search in
#: the time left, steered by half the validation rows, the switch to the refitted ensemble tested on the other half,
#: then the final model refitted on train + validation. "phases-check": the same without the refit. "bagged-check":
#: both phases bagged over train + validation (the switch checked on out-of-fold rows), no refit. Records of "phases"
#: (the switch cross-validated over all the rows the search had scored) are earlier measurements.
HOOKS = {"refit-check": {"refit": "auto"}, "phases-check": {"refit": False},
         "bagged-check": {"refit": False, "bagging": "auto"}}
HOOK = "refit-check"

#: Test error (%) published for the AutoGluon space: OptDivBO (KDD 2024) Table 6 and DivBO
#: (NeurIPS 2022) Table 12. Keys: (column, dataset).
PAPER = {
    "AutoGluon-Tabular (T6)": {"elevators": 9.08, "house_8L": 9.95, "pol": 1.20, "quake": 44.70, "wind": 14.32},
    "OptDivBO AG space (T6)": {"elevators": 9.00, "house_8L": 10.00, "pol": 1.15, "quake": 44.72, "wind": 14.22},
    "AutoGluon-Tabular (T12)": {"elevators": 9.10, "house_8L": 9.98, "pol": 1.23, "quake": 44.72, "wind": 14.37},
    "DivBO AG space (T12)": {"elevators": 9.01, "house_8L": 10.06, "pol": 1.18, "quake": 44.75, "wind": 14.24},
}


def _frames(dataset, seed: int, label: str):
    """Train / validation / test DataFrames with the original labels, from optdiv's 60/20/20 split."""
    from optdiv.data import split

    parts = split(dataset, seed)
    out = []
    for X, y in ((parts.X_train, parts.y_train), (parts.X_val, parts.y_val), (parts.X_test, parts.y_test)):
        frame = X.copy()
        frame[label] = dataset.classes[y] if dataset.task == "classification" else y
        out.append(frame)
    return out


def _label_for(dataset) -> str:
    label = "target"
    while label in dataset.X.columns:  # never collide with a feature
        label = "_" + label
    return label


def run_one(dataset, method: str, seed: int, budget: float, model_dir: Path, n_models: int,
            model_time_limit=None, num_cpus="auto", hook: str = HOOK) -> Dict:
    """One run: fit under ``budget`` seconds, then the test error (% for classification, MSE otherwise)."""
    import pandas as pd
    from autogluon.tabular import TabularPredictor

    label = _label_for(dataset)
    train, val, test = _frames(dataset, seed, label)
    classification = dataset.task == "classification"
    eval_metric = "accuracy" if classification else "mean_squared_error"
    path = model_dir / ("%s-%s-%d" % (dataset.name, method, seed))
    shutil.rmtree(path, ignore_errors=True)
    predictor = TabularPredictor(label=label, eval_metric=eval_metric, path=str(path), verbosity=0)
    start = time.monotonic()
    info: Dict = {}
    if method == "autogluon":
        predictor.fit(train, tuning_data=val, time_limit=budget, num_cpus=num_cpus)
    elif method == "autogluon-refit":  # AutoGluon alone with its own refit of the best model on every row
        predictor.fit(train, tuning_data=val, time_limit=budget, num_cpus=num_cpus, refit_full=True,
                      set_best_to_refit_full=True)
    elif method == "autogluon-bagged":  # AutoGluon alone with the bagging the hook asks for: what bagging gives
        from optdiv.integrations.autogluon.hook import BAG_FOLDS

        predictor.fit(pd.concat([train, val], ignore_index=True), time_limit=budget, num_cpus=num_cpus,
                      num_bag_folds=BAG_FOLDS)
    else:
        from optdiv.integrations import autogluon as oag

        result = oag.fit(predictor, train, tuning_data=val, time_limit=budget, num_cpus=num_cpus, method=method,
                         n_models=n_models, seed=seed, model_time_limit=model_time_limit, **HOOKS[hook])
        info = {"hook": hook, "refitted": result.refitted, "phase1_seconds": round(result.phase1_seconds, 1),
                "phase1_models": sum(not m.startswith("WeightedEnsemble") for m in result.phase1_models),
                "trials": len(result.trials), "failed": sum(t.status != "ok" for t in result.trials),
                "families": sorted({t.family for t in result.trials}), "autogluon_best": result.autogluon_best,
                "val_scores": result.scores,  # AutoGluon's best and the refitted ensemble, on the validation rows
                "switch_confidence": result.confidence,
                "check_rows": None if result.check is None else int(result.check.sum())}
    seconds = time.monotonic() - start
    pred = predictor.predict(test)
    if classification:
        error = 100.0 * float(np.mean(pred.to_numpy() != test[label].to_numpy()))
    else:
        error = float(np.mean((pred.to_numpy(dtype=float) - test[label].to_numpy(dtype=float)) ** 2))
    board = predictor.leaderboard()
    if info.get("val_scores"):  # both candidates of the final choice on the test rows, to calibrate the switch
        on_test = predictor.leaderboard(test).set_index("model")["score_test"]
        info["test_scores"] = {m: float(on_test[m]) for m in info["val_scores"] if m in on_test.index}
    return {
        "dataset": dataset.name, "method": method, "seed": seed, "budget_s": budget, "num_cpus": num_cpus,
        "seconds": round(seconds, 1),
        "test_error": error, "metric": "error_%" if classification else "mse",
        "models": int((~board["model"].str.startswith("WeightedEnsemble")).sum()),
        "best_model": predictor.model_best, **info,
    }


def _load_runs(path: Path) -> List[Dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def column_of(run: Dict, hook: str = HOOK) -> str:
    """The table column of a run: its method, or for an optdiv run of an earlier design of the hook, the method and
    that design (so the measurements before and after a change of the hook stand side by side)."""
    if run["method"].startswith("autogluon") or run.get("hook") == hook:
        return run["method"]
    return "%s (hook %s)" % (run["method"], run.get("hook", "single-phase"))


def summary_table(runs: List[Dict], methods, datasets, hook: str = HOOK) -> str:
    """Markdown: mean +- std test error per dataset and method (earlier hooks' runs in columns of their own), the
    (dataset, seed) pairs where each optdiv method is lower / level / higher than AutoGluon's defaults, and the
    papers' numbers beside."""
    present = {column_of(r, hook) for r in runs}
    columns = [m for m in methods] + sorted(present - set(methods))
    compared = [c for c in columns if c != "autogluon" and c in present] if "autogluon" in present else []
    head = (["dataset"] + ["%s (this run)" % c for c in columns] + ["%s vs AutoGluon (pairs)" % c for c in compared]
            + list(PAPER))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    error = {(r["dataset"], column_of(r, hook), r["seed"]): r["test_error"] for r in runs}
    for name in datasets:
        row = [name]
        for c in columns:
            errs = [v for (d, col, _), v in error.items() if d == name and col == c]
            row.append("%.2f ± %.2f (n=%d)" % (np.mean(errs), np.std(errs), len(errs)) if errs else "-")
        for c in compared:
            pairs = [(v, error[name, "autogluon", seed]) for (d, col, seed), v in error.items()
                     if d == name and col == c and (name, "autogluon", seed) in error]
            row.append("%d / %d / %d" % (sum(a < b for a, b in pairs), sum(a == b for a, b in pairs),
                                         sum(a > b for a, b in pairs)) if pairs else "-")
        row += ["%.2f" % PAPER[col][name] if name in PAPER[col] else "-" for col in PAPER]
        lines.append("| " + " | ".join(row) + " |")
    for c in compared:
        lines.append("\n" + pooled_comparison(c, [(v, error[d, "autogluon", seed]) for (d, col, seed), v in
                                                    error.items() if col == c and d in datasets
                                                    and (d, "autogluon", seed) in error]))
    return "\n".join(lines)


def pooled_comparison(column: str, pairs) -> str:
    """One line: over every (dataset, seed) pair, how often ``column`` is lower / level / higher than AutoGluon's
    defaults, the median relative difference and the two-sided Wilcoxon p of the relative differences (level
    pairs dropped, as the signed-rank test does)."""
    rel = np.array([(a - b) / b if b else 0.0 for a, b in pairs])
    if not len(rel):
        return "%s: no pairs" % column
    p = float("nan")
    if np.any(rel != 0):
        from scipy.stats import wilcoxon

        p = float(wilcoxon(rel[rel != 0]).pvalue) if np.sum(rel != 0) >= 2 else 1.0
    return ("%s vs AutoGluon over %d pairs: %d lower / %d level / %d higher, median %+.1f %%, Wilcoxon p = %.3g"
            % (column, len(rel), np.sum(rel < 0), np.sum(rel == 0), np.sum(rel > 0), 100 * np.median(rel), p))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/autogluon_compare.py", description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="CSV files (target column 'target' or the last)")
    parser.add_argument("--methods", nargs="+", default=["autogluon", "optdivbo", "divbo"], choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--time-budget", type=float, default=180.0, help="wall-time seconds per run (all methods)")
    parser.add_argument("--n-models", type=int, default=1000,
                        help="most suggestions per optdiv run (default: so many that the budget decides)")
    parser.add_argument("--num-cpus", default="auto",
                        help="AutoGluon's num_cpus for every method (default: AutoGluon's own choice)")
    parser.add_argument("--model-time-limit", type=float, default=None, help="cap on one model's training (s)")
    parser.add_argument("--hook", default=HOOK, choices=sorted(HOOKS),
                        help="the hook's design for the optdiv runs (default: %(default)s)")
    parser.add_argument("--out", default=".cache/ag_compare", help="folder for runs.jsonl and summary.md")
    parser.add_argument("--keep-models", action="store_true", help="keep AutoGluon's model folders")
    args = parser.parse_args(argv)
    if args.time_budget <= 0:
        parser.error("--time-budget must be positive")
    if any(s < 0 for s in args.seeds):
        parser.error("--seeds must be non-negative")
    num_cpus = args.num_cpus
    if num_cpus != "auto":
        if not num_cpus.isdigit() or int(num_cpus) < 1:
            parser.error("--num-cpus must be a positive integer or auto")
        num_cpus = int(num_cpus)

    from optdiv.data import DataError, load_dataset

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "runs.jsonl"
    runs = _load_runs(log)
    hook = args.hook
    current = [r for r in runs if r["method"].startswith("autogluon") or r.get("hook") == hook]  # others: run again
    done = {(r["dataset"], r["method"], r["seed"], r["budget_s"], r.get("num_cpus", "auto")) for r in current}
    datasets = []
    for spec in args.data:
        try:
            dataset = load_dataset(spec)
        except DataError as exc:
            parser.error(str(exc))
        dataset.name = Path(spec).stem if os.path.exists(spec) else dataset.name
        datasets.append(dataset)
    total = len(datasets) * len(args.seeds) * len(args.methods)
    print("%d runs x %.0f s budget: about %.0f min (plus prediction and set-up)"
          % (total, args.time_budget, total * args.time_budget / 60), flush=True)
    for dataset in datasets:
        for seed in args.seeds:
            for method in args.methods:
                if (dataset.name, method, seed, args.time_budget, num_cpus) in done:
                    continue
                record = run_one(dataset, method, seed, args.time_budget, out / "models", args.n_models,
                                 args.model_time_limit, num_cpus, hook)
                print("%-10s %-9s seed %d: test %s %.3f  (%d models, %.0f s)" % (
                    record["dataset"], method, seed, record["metric"], record["test_error"], record["models"],
                    record["seconds"]), flush=True)
                with log.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
                runs.append(record)
                if not args.keep_models:
                    shutil.rmtree(out / "models" / ("%s-%s-%d" % (dataset.name, method, seed)), ignore_errors=True)
    names = [d.name for d in datasets]
    runs = [r for r in runs if r["budget_s"] == args.time_budget and r.get("num_cpus", "auto") == num_cpus]
    table = summary_table(runs, args.methods, names, hook)
    note = ("Test error (%%) on the 20%% test split, %.0f s per run, seeds %s; pairs: (dataset, seed) pairs lower / "
            "level / higher than AutoGluon's defaults; paper columns: OptDivBO (KDD 2024) Table 6 and DivBO "
            "(NeurIPS 2022) Table 12.\n\n" % (args.time_budget, args.seeds))
    (out / "summary.md").write_text(note + table + "\n")
    print()
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
