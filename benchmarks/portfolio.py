"""Build warm-start portfolios from replay libraries, and measure them in replay, leaving each dataset out.

Replay libraries of one space and task hold the same random configurations (random suggestions are a pure
function of the seed and step), so their validation losses form a (configurations x datasets) matrix over the
configurations every library holds. ``build`` chooses a greedy portfolio on it (optdiv.spaces.portfolio),
using validation losses only; ``--exclude`` leaves datasets out, so a portfolio reported on a dataset was never
chosen with that dataset's data.

``replay`` measures the lever: for each dataset, the portfolio built without it replaces the random initial
design of each method, in replay over that dataset's library, against the same method with the random design.
It reports the test loss of the final ensemble after each budget, mean over seeds, with a Wilcoxon test over
the seeds per dataset and the better / level / worse count over datasets.

    python benchmarks/portfolio.py build --data-dir ../shared/datasets \\
        --datasets quake,wind,cpu_act,cpu_small --cache .cache --out optdiv/spaces/portfolios/autosklearn-classification.json
    python benchmarks/portfolio.py leave-out --data-dir ../shared/datasets --datasets quake,wind,cpu_act,cpu_small,\\
        bodyfat,space_ga --for amazon_employee,bank32nh,... --cache .cache --out runs/portfolios
    python benchmarks/portfolio.py replay --data-dir ../shared/datasets \\
        --datasets quake,wind,cpu_act,cpu_small --cache .cache --methods bo-es,optdivbo --seeds 0-9 \\
        --budgets 25,50 --out runs/portfolio-classification
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.bench.harness import parse_seeds
from optdiv.bench.library import library_dir, load_library
from optdiv.bench.replay import replay_search
from optdiv.bench.stats import compare, paired_p
from optdiv.data import load_dataset
from optdiv.spaces.candidates import config_key
from optdiv.spaces.portfolio import greedy_portfolio, write_portfolio
from optdiv.storage.files import RunStore

DEFAULT_SIZE = 8
#: A configuration enters a portfolio only if its fit took at most this long on every library (a portfolio
#: runs first, when a wall-time budget has the least room for a slow model).
DEFAULT_MAX_FIT = 10.0


def _library(data_dir: Path, name: str, cache: Path, space: str):
    """The whole stored library of ``name`` (as many members as were evaluated so far)."""
    dataset = load_dataset(data_dir / f"{name}.csv")
    size = len(RunStore(library_dir(cache, dataset.name, 0, space)))
    return load_library(data_dir / f"{name}.csv", cache, size, space=space)


def loss_matrix(libraries: Sequence, metric: str):
    """(configs, losses, fit_seconds) over the configurations every library holds: validation losses (inf for a
    failed member) and fit times, one column per library, rows in the first library's order."""
    index = [{config_key(c): i for i, c in reversed(list(enumerate(lib.configs)))} for lib in libraries]
    common = [key for key in index[0] if all(key in other for other in index[1:])]
    losses = np.full((len(common), len(libraries)), np.inf)
    seconds = np.zeros((len(common), len(libraries)))
    for j, lib in enumerate(libraries):
        val = lib.val_losses(metric)
        rows = np.array([index[j][key] for key in common], dtype=np.intp)
        losses[:, j] = np.where(lib.ok[rows], val[rows], np.inf)
        seconds[:, j] = lib.fit_seconds[rows]
    configs = [dict(libraries[0].configs[index[0][key]]) for key in common]
    return configs, losses, seconds


def choose(libraries: Sequence, metric: str, size: int, max_fit: float, among: Sequence = (),
           per_algorithm: int = 0) -> List[Dict]:
    """Greedy portfolio over ``libraries``; ``among``: more libraries that only restrict the candidates to the
    configurations they hold too (their losses are not looked at)."""
    configs, losses, seconds = loss_matrix(list(libraries) + list(among), metric)
    k = len(libraries)
    algorithms = [libraries[0].space.algorithm_of(c) for c in configs]
    picks = greedy_portfolio(losses[:, :k], size, allowed=(seconds[:, :k] <= max_fit).all(axis=1),
                             groups=algorithms, per_group=per_algorithm or None)
    return [configs[i] for i in picks]


def _metric(task: str, regression_metric: str) -> str:
    return "error" if task == "classification" else regression_metric


def build(args) -> int:
    names = args.datasets.split(",")
    excluded = set(args.exclude.split(",")) if args.exclude else set()
    libraries = [_library(Path(args.data_dir), n, Path(args.cache), args.space) for n in names if n not in excluded]
    tasks = {lib.task for lib in libraries}
    if len(tasks) != 1:
        raise SystemExit(f"the libraries mix tasks ({sorted(tasks)}): build one portfolio per task")
    task = tasks.pop()
    metric = _metric(task, args.regression_metric)
    configs = choose(libraries, metric, args.size, args.max_fit, per_algorithm=args.per_algorithm)
    write_portfolio(args.out, configs, space=args.space, task=task, metric=metric,
                    datasets=[lib.name for lib in libraries], library_sizes=[len(lib.configs) for lib in libraries],
                    size=args.size, max_fit_seconds=args.max_fit, per_algorithm=args.per_algorithm,
                    chosen_by="greedy over validation losses, normalised regret capped at the median "
                              "(benchmarks/portfolio.py build)")
    print(f"wrote {args.out}: {len(configs)} configurations from {', '.join(lib.name for lib in libraries)}")
    for c in configs:
        print("  ", libraries[0].space.algorithm_of(c))
    return 0


def leave_out(args) -> int:
    """One portfolio file per dataset of ``--for``, each chosen without that dataset's own library (a dataset
    without a library gets the portfolio of every library of its task)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    libraries = [_library(Path(args.data_dir), n, Path(args.cache), args.space) for n in args.datasets.split(",")]
    for name in args.for_datasets.split(","):
        task = load_dataset(Path(args.data_dir) / f"{name}.csv").task
        chosen_from = [lib for lib in libraries if lib.task == task and lib.name != name]
        if not chosen_from:
            raise SystemExit(f"no {task} library other than {name}'s to choose its portfolio from")
        metric = _metric(task, args.regression_metric)
        configs = choose(chosen_from, metric, args.size, args.max_fit, per_algorithm=args.per_algorithm)
        write_portfolio(out / f"{name}.json", configs, space=args.space, task=task, metric=metric,
                        datasets=[lib.name for lib in chosen_from], left_out=name, size=args.size,
                        max_fit_seconds=args.max_fit, per_algorithm=args.per_algorithm)
        print(f"{name}: {len(configs)} configurations from {', '.join(lib.name for lib in chosen_from)}")
    return 0


def replay(args) -> int:
    names = args.datasets.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done = set()
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["dataset"], r["method"], r["start"], r["seed"], r["budget"]))
    libraries = {n: _library(Path(args.data_dir), n, Path(args.cache), args.space) for n in names}
    seeds = parse_seeds(args.seeds)
    budgets = [int(b) for b in args.budgets.split(",")]
    for name in names:
        lib = libraries[name]
        others = [libraries[n] for n in names if n != name and libraries[n].task == lib.task]
        if not others:
            print(f"{name}: no other {lib.task} library to build a portfolio from; skipped")
            continue
        metric = _metric(lib.task, args.regression_metric)
        portfolio = choose(others, metric, args.size, args.max_fit, among=[lib], per_algorithm=args.per_algorithm)
        (out / f"portfolio-without-{name}.json").write_text(json.dumps(portfolio, indent=1, sort_keys=True))
        for method in args.methods.split(","):
            for start in ("random", "portfolio"):
                options = {"initial": portfolio} if start == "portfolio" else None
                for seed in seeds:
                    for budget in budgets:
                        if (name, method, start, seed, budget) in done:
                            continue
                        t0 = time.perf_counter()
                        result = replay_search(lib, method, metric, seed, budget, optimizer_options=options)
                        row = {"dataset": name, "method": method, "start": start, "seed": seed, "budget": budget,
                               "metric": metric, "test_loss": result.test_loss, "val_loss": result.val_loss,
                               "best_single_val": float(min(o.val_loss for o in result.history if o.ok)),
                               "seconds": time.perf_counter() - t0}
                        with results_path.open("a") as fh:
                            fh.write(json.dumps(row) + "\n")
                        print(f"{name} {method} {start} seed {seed} budget {budget}: test {result.test_loss:.4f}",
                              flush=True)
    print(report(results_path))
    return 0


def report(results_path: Path) -> str:
    rows = [json.loads(line) for line in Path(results_path).read_text().splitlines()]
    lines = []
    for budget in sorted({r["budget"] for r in rows}):
        for method in sorted({r["method"] for r in rows}):
            lines.append(f"\n### {method}, budget {budget}: test loss, random start -> portfolio (mean over seeds)\n")
            lines.append("| dataset | random | portfolio | p (Wilcoxon) | portfolio is |")
            lines.append("|---|---|---|---|---|")
            counts = {"better": 0, "same": 0, "worse": 0}
            for name in sorted({r["dataset"] for r in rows}):
                def losses(start):
                    chosen = {r["seed"]: r["test_loss"] for r in rows if r["dataset"] == name and r["method"] == method
                              and r["start"] == start and r["budget"] == budget}
                    return chosen
                a, b = losses("random"), losses("portfolio")
                seeds = sorted(set(a) & set(b))
                if not seeds:
                    continue
                ra, rb = [a[s] for s in seeds], [b[s] for s in seeds]
                verdict = compare(rb, ra)
                counts[verdict] += 1
                scale = 100.0 if all(r["metric"] == "error" for r in rows if r["dataset"] == name) else 1.0
                lines.append(f"| {name} | {scale * np.mean(ra):.3f} | {scale * np.mean(rb):.3f} | "
                             f"{paired_p(rb, ra):.3f} | {verdict} ({len(seeds)} seeds) |")
            lines.append(f"\nportfolio better / same / worse (Wilcoxon, p <= 0.05) on {counts['better']} / "
                         f"{counts['same']} / {counts['worse']} datasets")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "replay", "leave-out"):
        p = sub.add_parser(name)
        p.add_argument("--data-dir", required=True)
        p.add_argument("--datasets", required=True, help="comma-separated dataset names with built libraries")
        p.add_argument("--cache", default=".cache", help="where the replay libraries are kept")
        p.add_argument("--space", default="autosklearn")
        p.add_argument("--size", type=int, default=DEFAULT_SIZE, help="configurations in a portfolio")
        p.add_argument("--max-fit", type=float, default=DEFAULT_MAX_FIT,
                       help="longest fit (s) on any library a portfolio configuration may have")
        p.add_argument("--per-algorithm", type=int, default=2, help="most configurations of one algorithm (0: any)")
        p.add_argument("--regression-metric", default="mse")
        p.add_argument("--out", required=True)
    sub.choices["build"].add_argument("--exclude", default="", help="datasets left out of the portfolio")
    sub.choices["leave-out"].add_argument("--for", dest="for_datasets", required=True,
                                          help="datasets to write a portfolio file for (OUT/NAME.json)")
    sub.choices["replay"].add_argument("--methods", default="bo-es,optdivbo")
    sub.choices["replay"].add_argument("--seeds", default="0-9")
    sub.choices["replay"].add_argument("--budgets", default="25,50")
    sub.add_parser("report").add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        return build(args)
    if args.command == "replay":
        return replay(args)
    if args.command == "leave-out":
        return leave_out(args)
    print(report(Path(args.out) / "results.jsonl"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
