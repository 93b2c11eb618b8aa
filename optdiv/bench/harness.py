"""`optdiv bench`: every (dataset, metric, method, seed) run, in parallel, resumable, one row each.

Layout under ``--out``::

    results.csv                                     one row per finished run (rebuilt from the runs on start)
    runs/<dataset>/<metric>/<method>/seed-<s>/result.json, trace.csv   (result.json records its provenance)
    search/<dataset>/<metric>/<group>/seed-<s>/     live runs' evaluation stores (resumable mid-run)
    bench.json                                      the settings, checked on resume

Methods that share a search strategy (``bo``, ``bo-es``, ``bo-es100``; ``divbo``, ``divbo-``,
``divbo-bagging``, ``divbo-stacking``; ...) differ only in their final model, so one search serves all of
them: their rows share the search's wall and optimiser seconds. A run whose ``result.json`` exists is
never redone.

Modes. *Live*: real evaluations; the data are split 60/20/20 with the run's seed. *Replay*
(``library=N``): the first N random configurations of a library per dataset (split seed 0, built once
and cached under ``cache``) are the only candidates, so seeds vary the search, not the split. Every row
says which mode produced it.

Constraints (``--constraint``, optdiv.evaluation.constraints) apply to every search of a bench and are part of
its settings; ``n_infeasible`` counts the runs that violated them (empty in rows written before it existed).

``--workers N`` (live mode): every search evaluates asynchronously on its own local Dask cluster of N
workers (optdiv.execution.dask_runner); part of the settings only when given. With ``--jobs J`` that is J x N workers.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from optdiv.bench.layout import run_dir
from optdiv.storage.layout import BENCH_NAME, RESULT_NAME, RESULTS_NAME, TRACE_NAME
from optdiv.strategies.methods import SEARCH_OPTIONS, get_method

RESULT_COLUMNS = [
    "dataset", "task", "metric", "mode", "method", "seed", "budget", "library_size", "best_val_error",
    "val_error", "test_error", "n_evaluations", "n_failed", "wall_seconds", "optimizer_seconds", "search_group",
    "n_infeasible",
]
CLASSIFICATION_METRICS = ("error",)


@dataclass(frozen=True)
class DatasetRef:
    spec: str  # what load_dataset reads: a CSV path, sklearn:NAME, ...
    name: str
    task: str


def resolve_datasets(datasets: str, data_dir: Optional[str] = None) -> List[DatasetRef]:
    """``DIR`` (every CSV in it), or comma-separated CSV paths, names in ``data_dir``, or ``sklearn:NAME``."""
    from optdiv.data import load_dataset

    path = Path(datasets)
    if path.is_dir():
        specs = [str(p) for p in sorted(path.glob("*.csv"))]
        if not specs:
            raise FileNotFoundError(f"no CSV files in {datasets}")
    else:
        specs = []
        for item in [s.strip() for s in datasets.split(",") if s.strip()]:
            if data_dir is not None and ":" not in item and not item.endswith(".csv"):
                item = str(Path(data_dir) / f"{item}.csv")
            specs.append(item)
    refs = []
    for spec in specs:
        dataset = load_dataset(spec)
        refs.append(DatasetRef(spec, dataset.name, dataset.task))
    return refs


def parse_seeds(text: str) -> List[int]:
    """``0-9``, ``0,3,5`` or a mix."""
    seeds: List[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.extend(range(int(lo), int(hi) + 1))
        elif part:
            seeds.append(int(part))
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must be non-negative integers, e.g. 0-9; got {text!r}")
    return sorted(set(seeds))


def search_group(method: str) -> str:
    """Methods with the same group run the same search (they differ only in the final model)."""
    spec = get_method(method)
    options = {k: v for k, v in sorted(spec.options.items()) if k in SEARCH_OPTIONS}
    return spec.strategy + "".join(f"_{k}{v}" for k, v in options.items())


@dataclass
class Bench:
    datasets: List[DatasetRef]
    methods: List[str]
    seeds: List[int]
    out: Path
    budget: int = 250
    library: Optional[int] = None
    cache: str = ".cache"
    regression_metrics: Sequence[str] = ("mse", "mae")
    time_limit: float = 120.0
    space: str = "autosklearn"
    trace_every: int = 10
    ensemble_size: int = 25
    constraints: Sequence[str] = ()
    workers: Optional[int] = None  # Dask workers per live search, or per library being built in replay mode

    def __post_init__(self):
        from optdiv.evaluation.constraints import settings_form

        for method in self.methods:
            get_method(method)  # unknown names fail before anything runs
        self.constraints = settings_form(self.constraints)  # malformed ones fail here too
        self.out = Path(self.out)
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")
        if self.library is not None and self.library < self.budget:
            raise ValueError(f"a replay library of {self.library} cannot serve a budget of {self.budget}")

    @property
    def mode(self) -> str:
        return "live" if self.library is None else "replay"

    def metrics_for(self, task: str) -> List[str]:
        return list(CLASSIFICATION_METRICS) if task == "classification" else list(self.regression_metrics)

    def settings(self) -> Dict:
        settings = {"mode": self.mode, "budget": self.budget, "library": self.library, "space": self.space,
                    "time_limit": self.time_limit if self.mode == "live" else None,
                    "ensemble_size": self.ensemble_size, "constraints": list(self.constraints)}
        if self.workers is not None and self.mode == "live":  # asynchronous searches differ; absent = sequential
            settings["workers"] = int(self.workers)
        return settings

    def units(self) -> List[Dict]:
        """One unit per (dataset, metric, search group, seed) with at least one unfinished method."""
        units = []
        for ref in self.datasets:
            for metric in self.metrics_for(ref.task):
                groups: Dict[str, List[str]] = {}
                for method in self.methods:
                    groups.setdefault(search_group(method), []).append(method)
                for seed in self.seeds:
                    for group, methods in groups.items():
                        todo = [m for m in methods
                                if not (run_dir(self.out, ref.name, metric, m, seed) / RESULT_NAME).exists()]
                        if todo:
                            units.append({
                                "dataset": ref.__dict__, "metric": metric, "group": group, "methods": todo,
                                "seed": seed, "budget": self.budget, "library": self.library, "cache": self.cache,
                                "out": str(self.out), "time_limit": self.time_limit, "space": self.space,
                                "trace_every": self.trace_every, "ensemble_size": self.ensemble_size,
                                "constraints": list(self.constraints),
                                "workers": self.workers if self.mode == "live" else None,
                            })
        # seed-major: an interrupted bench leaves every dataset with the same seeds done
        return sorted(units, key=lambda u: u["seed"])

    def run(self, jobs: int = 1, progress: Optional[Callable[[str], None]] = None) -> Path:
        say = progress or (lambda message: None)
        self.out.mkdir(parents=True, exist_ok=True)
        _check_settings(self.out / BENCH_NAME, self.settings())
        if self.library is not None:
            self.build_libraries(jobs, say)
            self.check_library_measures()
        rows_path = self.out / RESULTS_NAME
        rebuild_results(self.out)
        units = self.units()
        say(f"{len(units)} searches to run ({self.mode} mode, {jobs} job(s))")
        done = 0
        if jobs <= 1:
            for unit in units:
                _append_rows(rows_path, run_unit(unit))
                done += 1
                say(f"[{done}/{len(units)}] {_describe(unit)}")
        else:
            with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(run_unit, unit): unit for unit in units}
                for future in cf.as_completed(futures):
                    unit = futures[future]
                    done += 1
                    try:
                        _append_rows(rows_path, future.result())
                        say(f"[{done}/{len(units)}] {_describe(unit)}")
                    except Exception as exc:  # one failing search must not lose the others
                        say(f"[{done}/{len(units)}] FAILED {_describe(unit)}: {type(exc).__name__}: {exc}")
        rebuild_results(self.out)
        return rows_path

    def build_libraries(self, jobs: int, say) -> None:
        from optdiv.bench.library import build_library

        todo = [ref for ref in self.datasets if not _library_ready(ref, self)]
        if not todo:
            return
        say(f"building replay libraries of {self.library} configurations for {', '.join(r.name for r in todo)}")
        args = [(ref.spec, self.cache, self.library, 0, self.space) for ref in todo]
        options = {"workers": self.workers}  # a library is the same random configurations however it is built
        if jobs <= 1:
            for a in args:
                build_library(*a, **options)
        else:
            with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                for future in cf.as_completed([pool.submit(build_library, *a, **options) for a in args]):
                    future.result()

    def check_library_measures(self) -> None:
        """Refuse, before any search, constraints on a measure some library never recorded."""
        from optdiv.bench.library import check_library_measures, library_dir
        from optdiv.evaluation.constraints import parse_constraints

        names = sorted({c.measure for c in parse_constraints(self.constraints)})
        if not names:
            return
        for ref in self.datasets:
            check_library_measures(library_dir(self.cache, ref.name, 0, self.space), self.library, names)


def _library_ready(ref: DatasetRef, bench: Bench) -> bool:
    from optdiv.bench.library import library_dir
    from optdiv.storage.files import RunStore

    directory = library_dir(bench.cache, ref.name, 0, bench.space)
    return directory.exists() and len(RunStore(directory)) >= bench.library


def _describe(unit: Dict) -> str:
    return f"{unit['dataset']['name']} {unit['metric']} {','.join(unit['methods'])} seed {unit['seed']}"


def _check_settings(path: Path, settings: Dict) -> None:
    if path.exists():
        stored = json.loads(path.read_text())
        stored.setdefault("constraints", [])  # benches started before constraints existed had none
        if stored != settings:
            raise ValueError(f"{path.parent} holds a bench with other settings ({stored}); use another --out")
    else:
        from optdiv.storage.atomic import atomic_write_json

        atomic_write_json(path, settings)


def _append_rows(path: Path, rows: List[Dict]) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
        fh.flush()
        os.fsync(fh.fileno())


def rebuild_results(out: Path) -> None:
    """results.csv from every finished run's result.json (a crash mid-append never leaves it wrong)."""
    rows = []
    for result in sorted(Path(out).glob("runs/*/*/*/seed-*/result.json")):
        rows.append(json.loads(result.read_text())["row"])
    rows.sort(key=lambda r: (r["dataset"], r["metric"], r["method"], int(r["seed"])))
    tmp = Path(out) / (RESULTS_NAME + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, Path(out) / RESULTS_NAME)


# --------------------------------------------------------------------------- one search (in a worker)


@lru_cache(maxsize=4)
def _library(spec: str, cache: str, size: int, space: str):
    from optdiv.bench.library import load_library

    return load_library(spec, cache, size, 0, space)


@lru_cache(maxsize=4)
def _library_digest(spec: str, cache: str, size: int, space: str) -> str:
    from optdiv.bench.provenance import library_digest

    return library_digest(_library(spec, cache, size, space))


def run_unit(unit: Dict) -> List[Dict]:
    """Run one search and write result.json + trace.csv for each of its methods; returns their rows."""
    from optdiv.bench.provenance import dataset_digest, environment
    from optdiv.bench.trace import search_trace
    from optdiv.engine.search import search
    from optdiv.strategies.registry import make_strategy

    ref = DatasetRef(**unit["dataset"])
    metric, seed, budget, methods = unit["metric"], int(unit["seed"]), int(unit["budget"]), unit["methods"]
    out = Path(unit["out"])
    constraints = list(unit.get("constraints") or [])
    start = time.perf_counter()
    provenance = {"environment": environment()}
    if unit["library"] is not None:
        from optdiv.bench.replay import replay_search

        library = _library(ref.spec, unit["cache"], int(unit["library"]), unit["space"])
        provenance["library_digest"] = _library_digest(ref.spec, unit["cache"], int(unit["library"]), unit["space"])
        result = replay_search(library, methods[0], metric, seed, budget, ensemble_size=unit["ensemble_size"],
                               constraints=constraints)
        y_val, y_test, space, task = library.y_val, library.y_test, library.space, library.task
        n_classes = library.val_preds.shape[2] if library.val_preds.ndim == 3 else None
    else:
        from optdiv.data import load_dataset, split
        from optdiv.storage.files import RunStore

        dataset = load_dataset(ref.spec)
        provenance["data_digest"] = dataset_digest(dataset)
        splits = split(dataset, seed=seed)
        store = RunStore(out / "search" / ref.name / metric / unit["group"] / f"seed-{seed}")
        meta = {"method_group": unit["group"], "seed": seed, "space": unit["space"], "time_limit": unit["time_limit"]}
        if constraints:  # only when given, so stores of benches from before constraints still match
            meta["constraints"] = constraints
        store.write_meta(meta)
        result = search(splits, dataset.task, n_classes=dataset.n_classes, method=methods[0], metric=metric,
                        space=unit["space"], budget=budget, time_limit=unit["time_limit"], seed=seed, store=store,
                        ensemble_size=unit["ensemble_size"], constraints=constraints,
                        workers=unit.get("workers"))
        y_val, y_test, space, task, n_classes = splits.y_val, splits.y_test, result.space, dataset.task, \
            dataset.n_classes
    wall = time.perf_counter() - start
    history = result.history
    finals = {}
    for method in methods:
        spec = get_method(method)
        strategy = make_strategy(spec, space, metric, seed=seed, budget=budget) if spec.final == "own" else None
        finals[method] = _bind_final(spec, strategy, y_val, metric, unit["ensemble_size"], seed, task, n_classes)
    traces = search_trace(history, y_val, y_test, metric, finals, every=int(unit["trace_every"]))
    rows = []
    for method in methods:
        choice, val_pred = finals[method](history)
        from optdiv.core.metrics import mean_loss

        val_error = float(mean_loss(val_pred, y_val, metric))
        test_error = float(mean_loss(choice.combine([history[i].test_pred for i in choice.members]), y_test, metric))
        ok_losses = [obs.val_loss for obs in history if obs.status == "ok"]
        row = {
            "dataset": ref.name, "task": task, "metric": metric, "mode": "live" if unit["library"] is None else "replay",
            "method": method, "seed": seed, "budget": budget, "library_size": unit["library"] or "",
            "best_val_error": min(ok_losses) if ok_losses else float("nan"), "val_error": val_error,
            "test_error": test_error, "n_evaluations": len(history),
            "n_failed": sum(obs.status not in ("ok", "infeasible") for obs in history),
            "wall_seconds": round(wall, 3), "optimizer_seconds": round(sum(result.suggest_seconds), 3),
            "search_group": unit["group"], "n_infeasible": sum(obs.status == "infeasible" for obs in history),
        }
        _write_run(run_dir(out, ref.name, metric, method, seed), row, traces[method], choice, history, y_val, result,
                   provenance)
        rows.append(row)
    return rows


def _bind_final(spec, strategy, y_val, metric, ensemble_size, seed, task, n_classes):
    from optdiv.final.choice import FinalSettings, finalize

    settings = FinalSettings(metric, "caruana", ensemble_size, seed, task, n_classes)

    def final(prefix):
        return finalize(spec, strategy, prefix, y_val, settings)

    return final


def _write_run(directory: Path, row: Dict, trace: List[Dict], choice, history, y_val, result,
               provenance: Dict) -> None:
    from optdiv.bench.trace import member_diversity
    from optdiv.storage.atomic import atomic_write_json

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / (TRACE_NAME + ".tmp"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["iteration", "best_single_val", "val", "test", "min_diversity"])
        writer.writeheader()
        writer.writerows(trace)
    os.replace(directory / (TRACE_NAME + ".tmp"), directory / TRACE_NAME)
    library_indices = result.info.get("library_indices")
    members = [int(i) for i in choice.members]
    atomic_write_json(directory / RESULT_NAME, {
        "row": row,
        "members": members,
        "weights": [float(w) for w in choice.weights],
        "algorithms": [history[i].algorithm for i in members],
        "library_members": [int(library_indices[i]) for i in members] if library_indices else None,
        "member_diversity": member_diversity(history, members, y_val),
        "suggested_algorithms": [obs.algorithm for obs in history],
        "provenance": provenance,
    })
