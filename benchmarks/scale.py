"""What more cores and more rows buy: optdiv's defaults on 1, 2 and all cores at equal wall time, LightGBM beside.

Each fit runs in a subprocess pinned to its cores (CPU affinity, which the estimator's ``n_jobs=-1`` reads), on one
80/20 split per (data, seed), stratified for classification, shuffled for regression::

    python benchmarks/scale.py run --data synthetic:10000,synthetic:100000,synthetic:1000000 --cores 1,2 \\
        --seconds 200 --seeds 0 --out runs/scale
    python benchmarks/scale.py run --data-dir ../shared/datasets --data all --cores 1,all --seconds 60 --jobs 2 \\
        --seeds 0,1,2 --out runs/cores
    python benchmarks/scale.py report --out runs/scale

``synthetic:N`` is ``make_classification(n_samples=N, n_features=30, n_informative=12, n_redundant=6, flip_y=0.03,
class_sep=0.8, random_state=0)``; other names are CSV files of ``--data-dir`` (last column the target). Per fit it
records the test error (%, or MSE), the evaluations and how many failed, the wall time against the budget, the
peak resident memory of the driver, of its largest worker and of the whole process tree at once (and the three
evaluations that peaked highest, with their algorithm and preprocessor), which algorithms were evaluated and
which failed, and where the cores' time went: the share of the fit's cores busy (anything running on them counts,
so run nothing else there), the evaluations' fit seconds and the suggestions' seconds, summed; ``lightgbm`` is
``LGBMClassifier()`` / ``LGBMRegressor()`` at their defaults on the same cores and rows. A rerun skips the fits
already in ``OUT/results.jsonl``. ``--jobs 2`` runs two fits at once on disjoint cores (fewest cores first; a fit
waits until its cores are free), so one-core fits pair up on a 2-core machine. ``report`` writes ``OUT/table.md``
with a Wilcoxon test of the most cores against one, and per core count where the fits' core-seconds went
(:func:`time_shares`); ``compare --out OUT --against OTHER/results.jsonl`` pairs two runs of the same fits (two
versions of the code).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
SYNTHETIC = "synthetic:"


def available_cores() -> list:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def parse_cores(text: str) -> list:
    n = len(available_cores())
    out = []
    for part in text.split(","):
        part = part.strip()
        count = n if part == "all" else int(part)
        if not 1 <= count <= n:
            raise ValueError(f"--cores {part}: this machine has {n} cores")
        if count not in out:
            out.append(count)
    return out


def load(data: str, data_dir: str, seed: int):
    """(X_train, y_train, X_test, y_test, task) of one 80/20 split."""
    import numpy as np
    import pandas as pd
    from sklearn.model_selection import train_test_split

    if data.startswith(SYNTHETIC):
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=int(data[len(SYNTHETIC):]), n_features=30, n_informative=12,
                                   n_redundant=6, flip_y=0.03, class_sep=0.8, random_state=0)
        X = pd.DataFrame(X.astype(np.float32), columns=[f"x{i}" for i in range(X.shape[1])])
        task = "classification"
    else:
        frame = pd.read_csv(Path(data_dir) / f"{data}.csv")
        X, y = frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy()
        task = "classification" if frame.iloc[:, -1].dtype == object or len(np.unique(y)) <= 30 else "regression"
    stratify = y if task == "classification" else None
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=stratify)
    return X_train, y_train, X_test, y_test, task


def score(task: str, y_test, pred) -> float:
    import numpy as np

    if task == "classification":
        return float(np.mean(np.asarray(pred) != np.asarray(y_test)) * 100.0)
    return float(np.mean((np.asarray(pred, dtype=float) - np.asarray(y_test, dtype=float)) ** 2))


class TreePeak:
    """The largest resident set of this process and all its descendants together, sampled every ``every`` s: the
    memory the fit asked of the machine at once (driver, search workers and refit worker summed)."""

    def __init__(self, every: float = 0.5):
        import threading

        from optdiv.evaluation.memory import resident_mb

        self.peak, self._stop = 0.0, threading.Event()

        def sample():
            while not self._stop.is_set():
                self.peak = max(self.peak, resident_mb(os.getpid()) or 0.0)
                self._stop.wait(every)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def core_ticks(cores) -> tuple:
    """(busy, all) clock ticks so far of ``cores`` (Linux's /proc/stat; (0, 0) elsewhere)."""
    busy = total = 0
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            ticks = [int(v) for v in values]
            total += sum(ticks[:8])
            busy += sum(ticks[:8]) - ticks[3] - ticks[4]  # all but idle and waiting for I/O
    return busy, total


def fit(job: dict) -> dict:
    """One pinned fit (runs in the subprocess)."""
    cores = job.get("core_ids") or available_cores()[: job["cores"]]
    os.sched_setaffinity(0, cores)  # before the libraries start their thread pools
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    X_train, y_train, X_test, y_test, task = load(job["data"], job["data_dir"], job["seed"])
    out = {**job, "task": task, "rows": len(X_train) + len(X_test), "status": "ok"}
    began = time.perf_counter()
    if job["system"] == "lightgbm":
        import lightgbm

        cls = lightgbm.LGBMClassifier if task == "classification" else lightgbm.LGBMRegressor
        model = cls(n_jobs=job["cores"], verbose=-1, random_state=job["seed"]).fit(X_train, y_train)
        out.update(wall_seconds=time.perf_counter() - began, test_error=score(task, y_test, model.predict(X_test)))
        return out
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor

    cls = OptDivClassifier if task == "classification" else OptDivRegressor
    tree = TreePeak()
    ticks = core_ticks(cores)
    model = cls(time_budget=job["seconds"], seed=job["seed"], **job.get("options", {})).fit(X_train, y_train)
    wall = time.perf_counter() - began
    busy, total = (after - before for after, before in zip(core_ticks(cores), ticks))
    tree_mb = tree.stop()
    history = model.result_.history
    memory = model.result_.info.get("peak_memory_mb") or {}
    out.update(wall_seconds=wall, test_error=score(task, y_test, model.predict(X_test)), evaluations=len(history),
               failed=sum(obs.status not in ("ok", "infeasible") for obs in history),
               threads=model.result_.info.get("threads"), driver_mb=memory.get("driver"),
               worker_mb=memory.get("largest_worker"), tree_mb=tree_mb,
               failures=sorted({(obs.error or obs.status).splitlines()[-1][:120] for obs in history
                                if obs.status not in ("ok", "infeasible")})[:5],
               failed_algorithms=[obs.algorithm for obs in history if obs.status not in ("ok", "infeasible")],
               algorithms=[obs.algorithm for obs in history],
               search_seconds=model.result_.info.get("search_seconds"), stopped=model.result_.info.get("stopped"),
               final_model=model.result_.info.get("final_model"),
               cut=sum("rounds_fitted" in obs.measures for obs in history), largest=largest_evaluations(history),
               cores_busy=round(busy / total, 3) if total else None,
               fit_seconds=round(sum(obs.fit_seconds for obs in history), 2),
               suggest_seconds=round(sum(model.result_.suggest_seconds), 2))
    return out


def largest_evaluations(history, count: int = 3) -> list:
    """The ``count`` evaluations whose worker peaked highest: what a memory target has to bound."""
    peaks = [(obs.measures.get("peak_mb"), obs) for obs in history if (obs.measures or {}).get("peak_mb")]
    return [{"index": obs.index, "peak_mb": peak, "algorithm": obs.algorithm, "status": obs.status,
             "preprocessor": (obs.config or {}).get("feature_preprocessor:__choice__")}
            for peak, obs in sorted(peaks, key=lambda item: -item[0])[:count]]


def pending(args) -> list:
    """The fits still to run, fewest cores first so that --jobs can run one-core fits side by side."""
    results = Path(args.out) / "results.jsonl"
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["data"], r["cores"], r["seed"], r["system"]))
    names = [d.strip() for d in args.data.split(",") if d.strip()]
    if names == ["all"]:
        names = sorted(p.stem for p in Path(args.data_dir).glob("*.csv"))
    options = json.loads(args.options) if args.options else {}
    jobs = []
    for cores in sorted(parse_cores(args.cores)):
        for data in names:
            for seed in [int(s) for s in args.seeds.split(",")]:
                for system in ("optdiv", "lightgbm"):
                    if (data, cores, seed, system) not in done:
                        jobs.append({"data": data, "data_dir": args.data_dir, "seed": seed, "cores": cores,
                                     "system": system, "seconds": args.seconds, "options": options})
    return jobs


def run(args) -> int:
    """Run the pending fits, up to --jobs at once on disjoint cores, in order (a fit waits for its cores)."""
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    jobs, free, running = pending(args), available_cores(), []
    while jobs or running:
        while jobs and len(running) < args.jobs and jobs[0]["cores"] <= len(free):
            job = jobs.pop(0)
            job["core_ids"], free = free[: job["cores"]], free[job["cores"]:]
            name = f"{job['data']}-{job['seed']}-{job['cores']}-{job['system']}".replace(":", "_")
            stdout, stderr = (open(out / "logs" / f"{name}.{kind}", "w+") for kind in ("out", "err"))
            proc = subprocess.Popen([sys.executable, str(SCRIPT), "fit", json.dumps(job)], stdout=stdout,
                                    stderr=stderr, text=True)
            running.append((proc, job, stdout, stderr, time.perf_counter()))
        time.sleep(0.2)
        for item in [r for r in running if r[0].poll() is not None
                     or time.perf_counter() - r[4] > args.seconds * 3 + 600]:
            proc, job, stdout, stderr, began = item
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            running.remove(item)
            free = sorted(free + job["core_ids"])
            stdout.seek(0), stderr.seek(0)
            lines, errors = stdout.read().strip().splitlines(), stderr.read()
            stdout.close(), stderr.close()
            try:
                record = json.loads(lines[-1])
            except (IndexError, ValueError):
                record = {**job, "status": "failed", "error": errors[-2000:]}
            record["process_seconds"] = time.perf_counter() - began
            record["console_lines"] = len([ln for ln in errors.splitlines() if ln.strip()])
            with (out / "results.jsonl").open("a") as fh:
                fh.write(json.dumps(record) + "\n")
            print(f"{job['data']} seed {job['seed']} {job['cores']} cores {job['system']}: "
                  f"{record.get('test_error')} ({record.get('evaluations')} evaluations, {record.get('failed')} "
                  f"failed, {record.get('wall_seconds', 0):.0f} s)", file=sys.stderr, flush=True)
    return 0


def report(args) -> int:
    from statistics import mean

    records = [json.loads(line) for line in (Path(args.out) / "results.jsonl").read_text().splitlines()]
    ok = [r for r in records if r.get("status") == "ok"]
    rows = ["| data | cores | optdiv test error | evaluations | failed | wall s (budget) | driver MB | largest worker MB "
            "| tree MB | LightGBM defaults | seeds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["data"], r["cores"]) for r in ok}, key=lambda k: (k[0], k[1]))
    for data, cores in keys:
        mine = [r for r in ok if r["data"] == data and r["cores"] == cores and r["system"] == "optdiv"]
        light = [r for r in ok if r["data"] == data and r["cores"] == cores and r["system"] == "lightgbm"]
        if not mine:
            continue
        lightgbm = "-"
        if light:
            lightgbm = (f"{mean(r['test_error'] for r in light):.3f} in "
                        f"{mean(r['wall_seconds'] for r in light):.0f} s")
        rows.append(f"| {data} | {cores} | {mean(r['test_error'] for r in mine):.3f} "
                    f"| {mean(r['evaluations'] for r in mine):.0f} | {mean(r['failed'] for r in mine):.1f} "
                    f"| {max(r['wall_seconds'] for r in mine):.0f} ({mine[0]['seconds']:.0f}) "
                    f"| {max(r['driver_mb'] or 0 for r in mine):.0f} | {max(r['worker_mb'] or 0 for r in mine):.0f} "
                    f"| {max(r.get('tree_mb') or 0 for r in mine):.0f} "
                    f"| {lightgbm} | {len(mine)} |")
    lines = ["# optdiv's defaults by cores and rows", "", *rows, ""]
    cores = sorted({r["cores"] for r in ok})
    if len(cores) > 1:
        few, most = cores[0], cores[-1]
        pairs = {}
        for r in ok:
            if r["system"] == "optdiv" and r["cores"] in (few, most):
                pairs.setdefault((r["data"], r["seed"]), {})[r["cores"]] = r["test_error"]
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from optdiv.bench.stats import relative_pairs_line

        # relative differences: the sets' errors and MSEs are on different scales, and the test ranks them together
        both = [p for p in pairs.values() if few in p and most in p]
        lines.append(relative_pairs_line(f"{most} cores against {few}", [p[most] for p in both],
                                         [p[few] for p in both]) + ".")
    lines += [line for count in cores if (line := time_shares([r for r in ok if r["cores"] == count]))]
    late = [r for r in ok if r["system"] == "optdiv" and abs(r["wall_seconds"] - r["seconds"]) > 10]
    lines.append(f"Fits ending more than 10 s from their budget: {len(late)} of "
                 f"{sum(r['system'] == 'optdiv' for r in ok)}.")
    text = "\n".join(lines) + "\n"
    (Path(args.out) / "table.md").write_text(text)
    print(text)
    return 0


def time_shares(records) -> str:
    """Where the optdiv fits' core-seconds (wall time times cores) went, as shares: busy, the evaluations' fits, the
    refits of final members (ahead, in the search, and after it), the suggestions, the rest of the busy time (workers'
    start-up, the driver's own work); empty for records without the busy share."""
    fits = [r for r in records if r["system"] == "optdiv" and r.get("cores_busy") is not None]
    if not fits:
        return ""
    total = sum(r["wall_seconds"] * r["cores"] for r in fits)
    busy = sum(r["wall_seconds"] * r["cores"] * r["cores_busy"] for r in fits)
    refits = sum(t.get("seconds") or 0.0 for r in fits for t in (r.get("final_model") or {}).get("refit_times", []))
    fitted, suggested = sum(r["fit_seconds"] for r in fits), sum(r["suggest_seconds"] for r in fits)
    rest = busy - fitted - refits - suggested
    return (f"{fits[0]['cores']} cores, where {total:.0f} core-seconds of {len(fits)} fits went: busy "
            f"{busy / total:.0%}, evaluations' fits {fitted / total:.0%}, refits {refits / total:.0%}, suggestions "
            f"{suggested / total:.0%}, the rest {rest / total:.0%}; {sum(r['evaluations'] for r in fits)} evaluations.")


def compare(args) -> int:
    """Two runs of the same fits (e.g. two versions of the code): the new run's optdiv fits paired with the old's by
    (data, seed, cores), with a Wilcoxon test of their test errors and each run's fits ending more than 10 s early
    or late."""
    from statistics import mean

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from optdiv.bench.stats import relative_pairs_line

    def fits(path):
        records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        return {(r["data"], r["seed"], r["cores"]): r for r in records
                if r.get("status") == "ok" and r["system"] == "optdiv"}

    new, old = fits(Path(args.out) / "results.jsonl"), fits(args.against)
    keys = sorted(set(new) & set(old), key=lambda k: (k[2], k[0], k[1]))
    lines = [f"# {args.out} against {args.against}", ""]
    for cores in sorted({k[2] for k in keys}):
        both = [k for k in keys if k[2] == cores]
        lines.append(relative_pairs_line(f"{cores} cores", [new[k]["test_error"] for k in both],
                                         [old[k]["test_error"] for k in both]) + ".")
        for name, run_ in (("new", new), ("old", old)):
            walls = [run_[k]["wall_seconds"] - run_[k]["seconds"] for k in both]
            lines.append(f"- {name}: {sum(w < -10 for w in walls)} of {len(both)} fits ended more than 10 s early, "
                         f"{sum(w > 10 for w in walls)} more than 10 s late; mean end {mean(walls):+.1f} s from the "
                         f"budget; {sum(run_[k]['evaluations'] for k in both)} evaluations")
    text = "\n".join(lines) + "\n"
    print(text)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    runner = sub.add_parser("run")
    runner.add_argument("--data", default="synthetic:10000,synthetic:100000",
                        help="comma-separated: synthetic:ROWS or CSV names of --data-dir, or 'all'")
    runner.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    runner.add_argument("--cores", default="1,all", help="comma-separated core counts, 'all' for every core")
    runner.add_argument("--seconds", type=float, default=120.0)
    runner.add_argument("--seeds", default="0")
    runner.add_argument("--jobs", type=int, default=1,
                        help="fits at once, each on its own cores (one-core fits side by side on a 2-core machine)")
    runner.add_argument("--options", help="optdiv constructor options as JSON, e.g. '{\"n_jobs\": 1}'")
    runner.add_argument("--out", default="runs/scale")
    reporter = sub.add_parser("report")
    reporter.add_argument("--out", default="runs/scale")
    against = sub.add_parser("compare", help="pair this run's fits with another run's (e.g. an older version)")
    against.add_argument("--out", default="runs/scale")
    against.add_argument("--against", required=True, help="the other run's results.jsonl")
    one = sub.add_parser("fit")
    one.add_argument("job")
    args = parser.parse_args(argv)
    if args.command == "fit":
        try:
            record = fit(json.loads(args.job))
        except BaseException as exc:  # noqa: BLE001 - one failed fit is a record, not a lost run
            record = {**json.loads(args.job), "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-3000:]}
        print(json.dumps(record), flush=True)
        return 0
    return {"run": run, "report": report, "compare": compare}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
