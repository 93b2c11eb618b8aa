"""Measure the Dask scale-out on a live run: wall time of N workers against one, and the final test error of the
asynchronous search against the sequential one at the same number of evaluations.

    python benchmarks/parallel_speedup.py --data sklearn:breast_cancer --workers 1 2 --budget 50 \\
        --method optdivbo --out runs/speedup [--seeds 0 1 2] [--space autosklearn] [--time-limit 120]

Per seed it runs the sequential engine once and the asynchronous one once per worker count, on the same split.
Wall seconds include starting the local cluster (reported apart as ``startup_seconds``); the speedup divides
the one-worker wall time by each count's. Writes ``parallel_speedup.json`` (every run) and
``parallel_speedup.md`` (the means) under ``--out``. Workers beyond the machine's free cores measure
contention, not scale-out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))


def measure(data: str, workers: Sequence[int], budget: int, method: str = "optdivbo", seeds: Sequence[int] = (0,),
            space: str = "autosklearn", time_limit: float = 120.0, target: Optional[str] = None,
            say=lambda message: None) -> List[Dict]:
    """One row per (seed, mode): mode ``sequential`` or ``async-<N>``, with wall seconds and errors."""
    from optdiv.data import load_dataset, split
    from optdiv.engine.search import search

    dataset = load_dataset(data, target=target)
    rows = []
    for seed in seeds:
        splits = split(dataset, seed=seed)
        for count in [None] + list(workers):
            mode = "sequential" if count is None else f"async-{count}"
            began = time.perf_counter()
            result = search(splits, dataset.task, n_classes=dataset.n_classes, method=method, space=space,
                            budget=budget, time_limit=time_limit, seed=seed, workers=count)
            wall = time.perf_counter() - began
            parallel = result.info.get("parallel") or {}
            rows.append({
                "dataset": dataset.name, "method": method, "seed": seed, "mode": mode, "workers": count or 0,
                "budget": budget, "n_evaluations": len(result.history),
                "n_failed": sum(obs.status != "ok" for obs in result.history),
                "wall_seconds": round(wall, 3), "startup_seconds": round(parallel.get("startup_seconds", 0.0), 3),
                "suggest_seconds": round(sum(result.suggest_seconds), 3),
                "fit_seconds": round(sum(obs.fit_seconds for obs in result.history), 3),
                "val_error": result.val_loss, "test_error": result.test_loss,
                "requeued": len(parallel.get("requeued", [])), "lost": len(parallel.get("lost", [])),
            })
            say(f"seed {seed} {mode}: {wall:.1f} s, test error {result.test_loss:.4f}")
    return rows


def summarize(rows: List[Dict]) -> Dict:
    """Means per mode, the speedup of each worker count over one worker, and async minus sequential test error."""
    modes: Dict[str, Dict] = {}
    for mode in dict.fromkeys(row["mode"] for row in rows):
        mine = [row for row in rows if row["mode"] == mode]
        modes[mode] = {
            "runs": len(mine),
            "workers": mine[0]["workers"],
            "wall_seconds": float(np.mean([r["wall_seconds"] for r in mine])),
            "startup_seconds": float(np.mean([r["startup_seconds"] for r in mine])),
            # the work done: asynchronous runs suggest other configurations, which may cost more or less
            "fit_seconds": float(np.mean([r.get("fit_seconds", np.nan) for r in mine])),
            "test_error": float(np.mean([r["test_error"] for r in mine])),
            "val_error": float(np.mean([r["val_error"] for r in mine])),
        }
    one = modes.get("async-1")
    sequential = modes.get("sequential")
    for summary in modes.values():
        if one is not None and summary["workers"]:
            summary["speedup_vs_1_worker"] = one["wall_seconds"] / summary["wall_seconds"]
        if sequential is not None:
            summary["test_error_minus_sequential"] = summary["test_error"] - sequential["test_error"]
    return modes


def write(out: Path, rows: List[Dict], summary: Dict, settings: Dict) -> Path:
    from optdiv.storage.atomic import atomic_write_json

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "parallel_speedup.json", {"settings": settings, "summary": summary, "runs": rows})
    lines = [
        f"# Dask scale-out: {settings['method']} on {settings['data']}, {settings['budget']} evaluations, "
        f"seeds {settings['seeds']}",
        "",
        f"Machine: {os.cpu_count()} logical CPUs. Wall seconds include starting the local cluster.",
        "",
        "| mode | runs | wall s | cluster start s | fits s (sum) | speedup vs 1 worker | test error "
        "| test error - sequential |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, s in summary.items():
        speedup = f"{s['speedup_vs_1_worker']:.2f}" if "speedup_vs_1_worker" in s else ""
        delta = f"{s['test_error_minus_sequential']:+.4f}" if "test_error_minus_sequential" in s else ""
        lines.append(f"| {mode} | {s['runs']} | {s['wall_seconds']:.1f} | {s['startup_seconds']:.1f} | "
                     f"{s['fit_seconds']:.1f} | {speedup} | "
                     f"{s['test_error']:.4f} | {delta} |")
    path = out / "parallel_speedup.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/parallel_speedup.py", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="file.csv, sklearn:NAME or openml:ID")
    parser.add_argument("--target", help="target column of a CSV")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument("--budget", type=int, default=50, help="evaluations per run")
    parser.add_argument("--method", default="optdivbo")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--space", default="autosklearn")
    parser.add_argument("--time-limit", type=float, default=120.0, help="wall-time limit of one evaluation")
    parser.add_argument("--out", required=True, help="folder for parallel_speedup.json and .md")
    args = parser.parse_args(argv)
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    rows = measure(args.data, args.workers, args.budget, args.method, args.seeds, args.space, args.time_limit,
                   args.target, say)
    settings = {"data": args.data, "workers": args.workers, "budget": args.budget, "method": args.method,
                "seeds": args.seeds, "space": args.space, "time_limit": args.time_limit}
    path = write(Path(args.out), rows, summarize(rows), settings)
    print(path.read_text(), end="")
    print(f"wrote {path} and {Path(args.out) / 'parallel_speedup.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
