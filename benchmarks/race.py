"""Test error of optdiv, auto-sklearn and AutoGluon after the same wall time on the same machine.

The comparison a user makes when choosing between ``OptDivClassifier(...).fit(X, y)`` (or ``OptDivRegressor``),
stock ``AutoSklearnClassifier(time_left_for_this_task=T)`` and stock ``TabularPredictor(label=...).fit(train,
time_limit=T)``: per dataset and seed, one 80/20 split (stratified for classification, shuffled for regression)
computed once here and handed to every system as row indices; each system fits the same 80 % within T seconds on
one core, in a subprocess of its own environment's interpreter, and is scored on the same 20 % (classification
error in %, regression MSE)::

    python benchmarks/race.py run --data-dir ../shared/datasets --datasets all --seeds 0,1,2 --seconds 180 \\
        --jobs 2 --out runs/race
    python benchmarks/race.py report --out runs/race

Systems: ``autosklearn``, ``autogluon``, ``autogluon-best`` (AutoGluon with ``presets="best_quality"``; all three
stock: only the time, one core, the seed, the preset and where they keep their files are set) and ``optdiv`` variants, ``optdiv:KEY=VALUE;KEY=VALUE`` with the estimator's constructor options
(values parsed as JSON where they parse, else taken as strings), e.g. ``optdiv:method=bo-es`` or
``'optdiv:method=optdivbo;refit=true'``; ``budget=None``, ``time_budget=T`` and ``seed`` are set by the race.
A ``portfolio`` value containing ``{dataset}`` is formatted with the dataset's name (relative paths from the
repository root), so each dataset can get a portfolio chosen without its own library:
``'optdiv:portfolio=runs/portfolios/{dataset}.json'`` after ``benchmarks/portfolio.py leave-out``.
Each fit appends one JSON line to ``OUT/results.jsonl``; a rerun skips the (dataset, seed, system) triples
already recorded (``--retry-failed`` reruns the failed ones). ``report`` writes ``OUT/table.md``.

The worker half (``race.py worker JOB RESULT``) runs under the auto-sklearn environment's Python 3.9 too, so this
module imports only the standard library at the top and numpy/pandas inside the worker.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]

PEERS = ("autosklearn", "autogluon", "autogluon-best")
BASE_SYSTEMS = ("autosklearn", "autogluon", "autogluon-best", "optdiv")
#: The environment each stock system runs in (``autogluon-best`` is AutoGluon with ``presets="best_quality"``, the
#: setting its users pick for accuracy: bagged and stacked models that use the whole time limit).
ENVIRONMENT = {"autosklearn": "autosklearn", "autogluon": "autogluon", "autogluon-best": "autogluon",
               "optdiv": "optdiv"}
AUTOGLUON_PRESETS = {"autogluon": None, "autogluon-best": "best_quality"}
#: optdiv constructor arguments the race sets itself.
RACE_SET = ("budget", "time_budget", "seed")
#: Default interpreter of each stock system, relative to the repository root, and the nox session building it.
NOX_PYTHON = {"autosklearn": ".nox/autosklearn/bin/python", "autogluon": ".nox/autogluon/bin/python"}
HOST_MODULE = {"autosklearn": "autosklearn", "autogluon": "autogluon.tabular", "optdiv": "sklearn"}
#: auto-sklearn's metalearning base names most of these datasets as OpenML does (quake, cpu_act, house_8l, ...);
#: the fit passes the dataset's name so that auto-sklearn drops the dataset's own entry, as a user's new dataset
#: has none (its entry holds configurations tuned on all rows, test rows included). Where a file name differs from
#: the OpenML name, this maps it.
AUTOSKLEARN_NAME = {"eeg": "eeg-eye-state"}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
TEST_SIZE = 0.2
#: Lines whose machines' calibration times differ by more than this share were raced at different speeds.
SPEED_TOLERANCE = 0.15


def tolerance(seconds: float) -> float:
    """How far past T a fit may end: max(5 %, 10 s), as benchmarks/time_budget.py."""
    return max(0.05 * seconds, 10.0)


def kill_after(seconds: float) -> float:
    """When the parent kills a fit: 2 T + 120 s."""
    return 2.0 * seconds + 120.0


# --------------------------------------------------------------------------- #
# Systems: "autosklearn", "autogluon", "optdiv" or "optdiv:KEY=VALUE;KEY=VALUE".
# --------------------------------------------------------------------------- #

def _split_top(text: str, sep: str) -> list:
    """``text`` split at ``sep`` outside brackets, braces and double quotes (so JSON values may hold commas)."""
    parts, depth, quoted, current = [], 0, False, []
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "[{":
            depth += 1
        elif not quoted and ch in "]}":
            depth -= 1
        if ch == sep and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse_value(raw: str):
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _format_value(value) -> str:
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value  # bo-es, not "bo-es"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def parse_system(spec: str) -> tuple:
    """(base system, optdiv options) of one system spec; ValueError naming the problem."""
    base, colon, rest = spec.strip().partition(":")
    base = base.strip()
    if base not in BASE_SYSTEMS:
        raise ValueError(f"unknown system {spec.strip()!r}; use {', '.join(BASE_SYSTEMS)} or optdiv:KEY=VALUE;...")
    options: dict = {}
    if colon and rest.strip():
        if base != "optdiv":
            raise ValueError(f"{spec.strip()!r}: {base} runs stock, without options (only optdiv takes variants)")
        for item in _split_top(rest, ";"):
            if not item.strip():
                continue
            key, eq, raw = item.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError(f"{spec.strip()!r}: option {item.strip()!r} is not KEY=VALUE")
            if key in RACE_SET:
                raise ValueError(f"{spec.strip()!r}: {key} is set by the race (budget=None, time_budget=T, seed)")
            if key in options:
                raise ValueError(f"{spec.strip()!r}: option {key} given twice")
            options[key] = _parse_value(raw.strip())
    return base, options


def system_name(base: str, options: dict) -> str:
    """The canonical name of a system (options sorted by key): the name results and tables use."""
    if not options:
        return base
    return base + ":" + ";".join(f"{k}={_format_value(v)}" for k, v in sorted(options.items()))


def parse_systems(text: str) -> list:
    """Canonical system names of a comma-separated list, duplicates dropped."""
    names: list = []
    for part in _split_top(text, ","):
        if part.strip():
            name = system_name(*parse_system(part))
            if name not in names:
                names.append(name)
    if not names:
        raise ValueError("no systems given")
    return names


def effective_system(system: str, n_train: int) -> str:
    """The system a fit on ``n_train`` rows really is: options that change nothing there are dropped, so such a
    fit is run (and recorded) once. ``fold_models`` acts only under cross-validation, which ``cv`` (default
    "auto": small data only) decides from the rows."""
    base, options = parse_system(system)
    if base != "optdiv" or "fold_models" not in options:
        return system
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from optdiv.data import resolve_cv

    if resolve_cv(options.get("cv", "auto"), n_train) is None:
        options = {key: value for key, value in options.items() if key != "fold_models"}
    return system_name(base, options)


def with_same_fits(records) -> list:
    """``records`` plus, for each optdiv system and (dataset, seed) it lacks, the record of the system it is on
    that dataset (:func:`effective_system`), under its own name and marked ``same_as``."""
    n_train = {r["dataset"]: r["n_train"] for r in records if r.get("n_train")}
    have = {(r["dataset"], r["seed"], r["system"]) for r in records}
    by_triple = {(r["dataset"], r["seed"], r["system"]): r for r in chosen_records(records).values()}
    pairs = sorted({(r["dataset"], r["seed"]) for r in records})
    out = list(records)
    for system in sorted({r["system"] for r in records}):
        for dataset, seed in pairs:
            if (dataset, seed, system) in have or dataset not in n_train:
                continue
            same = effective_system(system, n_train[dataset])
            if same != system and (dataset, seed, same) in by_triple:
                out.append({**by_triple[dataset, seed, same], "system": system, "same_as": same})
    return out


def check_optdiv_options(systems) -> None:
    """Options must be constructor arguments of OptDivClassifier/OptDivRegressor and methods must exist."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from optdiv.sklearn import OptDivClassifier
    from optdiv.strategies.methods import get_method

    known = set(OptDivClassifier().get_params())
    for name in systems:
        base, options = parse_system(name)
        if base != "optdiv":
            continue
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"{name}: {', '.join(unknown)} not an OptDivClassifier option "
                             f"(options: {', '.join(sorted(known - set(RACE_SET)))})")
        if "method" in options:
            get_method(options["method"])  # raises naming the known methods


# --------------------------------------------------------------------------- #
# Splits: computed once, here, and handed to the workers as row indices.
# --------------------------------------------------------------------------- #

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_task(csv: Path) -> str:
    """classification or regression, by optdiv's rule on the target (the last column)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from optdiv.data import load_dataset

    return load_dataset(str(csv)).task


def dataset_names(data_dir: Path, text: str) -> list:
    """The CSV names (without .csv) that ``text`` gives: "all" for every CSV in ``data_dir``, else a,b,c; every one
    must exist there."""
    data_dir = Path(data_dir)
    if text.strip() == "all":
        names = sorted(p.stem for p in data_dir.glob("*.csv"))
    else:
        names = [d.strip() for d in text.split(",") if d.strip()]
    missing = [d for d in names if not (data_dir / f"{d}.csv").is_file()]
    if missing or not names:
        raise SystemExit(f"no {', '.join(f'{d}.csv' for d in missing) or 'CSV files'} in {data_dir}")
    return names


def read_table(csv: Path) -> tuple:
    """(features as float64, target, task) of a CSV whose last column is the target, the task by optdiv's rule
    (the rows read once, then checked by optdiv as its loader checks them)."""
    import numpy as np
    import pandas as pd

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from optdiv.data import from_frame

    frame = pd.read_csv(csv)
    task = from_frame(frame, name=csv.stem).task
    return frame.iloc[:, :-1].to_numpy(np.float64), frame.iloc[:, -1].to_numpy(), task


def make_split(y, task: str, seed: int, test_size: float = TEST_SIZE) -> tuple:
    """(train rows, test rows): stratified for classification, shuffled for regression, both by ``seed``."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    rows = np.arange(len(y))
    train, test = train_test_split(rows, test_size=test_size, random_state=seed, shuffle=True,
                                   stratify=np.asarray(y) if task == "classification" else None)
    return train, test


def ensure_split(out: Path, dataset: str, csv: Path, seed: int, task: str = None) -> Path:
    """OUT/splits/DATASET-seedSEED.json, written on the first call and reused (checked against the data) after."""
    path = out / "splits" / f"{dataset}-seed{seed}.json"
    digest = _sha256(csv)
    if path.exists():
        info = json.loads(path.read_text())
        if info["csv_sha256"] != digest:
            raise RuntimeError(f"{csv} changed since {path} was written; use a fresh --out")
        return path
    import pandas as pd

    frame = pd.read_csv(csv)
    task = task or dataset_task(csv)
    y = frame.iloc[:, -1]
    train, test = make_split(y, task, seed)
    info = {"dataset": dataset, "seed": seed, "task": task, "csv": csv.name, "csv_sha256": digest,
            "target": str(frame.columns[-1]), "n_rows": len(frame), "test_size": TEST_SIZE,
            "n_classes": int(y.nunique()) if task == "classification" else None,
            "train": [int(i) for i in train], "test": [int(i) for i in test]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)
    return path


def read_split(path: Path) -> dict:
    return json.loads(Path(path).read_text())


# --------------------------------------------------------------------------- #
# Worker: one fit, in the system's own interpreter.
# --------------------------------------------------------------------------- #

def test_error(task: str, y_true, y_pred) -> float:
    """Classification error in % or regression MSE."""
    import numpy as np

    y_true = np.asarray(y_true).reshape(-1)
    y_pred = np.asarray(y_pred).reshape(-1)
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_pred)} predictions for {len(y_true)} test rows")
    if task == "regression":
        y_pred = y_pred.astype(float)
        if not np.all(np.isfinite(y_pred)):
            raise ValueError("non-finite regression predictions")
        return float(np.mean((y_true.astype(float) - y_pred) ** 2))
    numeric = y_true.dtype.kind in "biuf" and y_pred.dtype.kind in "biuf"
    wrong = y_true.astype(float) != y_pred.astype(float) if numeric else y_true.astype(str) != y_pred.astype(str)
    return 100.0 * float(np.mean(wrong))


def _versions(names) -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _fit_autosklearn(job, X, y, X_test):
    from autosklearn.classification import AutoSklearnClassifier
    from autosklearn.regression import AutoSklearnRegressor

    cls = AutoSklearnClassifier if job["task"] == "classification" else AutoSklearnRegressor
    tmp = Path(job["work_dir"]) / "autosklearn-tmp"  # must not exist yet; the parent deletes work_dir afterwards
    try:
        began = time.perf_counter()
        model = cls(time_left_for_this_task=int(round(job["seconds"])), n_jobs=1, seed=job["seed"],
                    memory_limit=job["memory_limit"], tmp_folder=str(tmp))
        model.fit(X, y, dataset_name=AUTOSKLEARN_NAME.get(job["dataset"], job["dataset"]))
        wall = time.perf_counter() - began
        pred = model.predict(X_test)
        statuses: dict = {}
        for status in model.cv_results_["status"]:
            statuses[str(status)] = statuses.get(str(status), 0) + 1
        extra = {"runhistory": len(model.automl_.runhistory_.data), "statuses": statuses,
                 "ensemble_members": len(model.get_models_with_weights())}
        models = len(model.cv_results_["params"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pred, wall, models, extra, _versions(["auto-sklearn", "scikit-learn", "numpy", "pandas", "smac"])


def _fit_autogluon(job, train, label, X_test):
    from autogluon.tabular import TabularPredictor

    presets = AUTOGLUON_PRESETS[job["base"]]
    if job["task"] == "regression":
        problem_type = "regression"  # said, not inferred: a float target with few values would be read as classes
    else:
        problem_type = "binary" if job["n_classes"] == 2 else "multiclass"
    path = Path(job["work_dir"]) / "autogluon"
    try:
        began = time.perf_counter()
        predictor = TabularPredictor(label=label, problem_type=problem_type, path=str(path), verbosity=1)
        predictor.fit(train, time_limit=job["seconds"], num_cpus=1, num_gpus=0,
                      **({} if presets is None else {"presets": presets}))
        wall = time.perf_counter() - began
        pred = predictor.predict(X_test)
        board = predictor.leaderboard(silent=True)
        extra = {"best_model": str(predictor.model_best), **({} if presets is None else {"presets": presets})}
        models = len(board)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return pred, wall, models, extra, _versions(["autogluon.tabular", "scikit-learn", "numpy", "pandas", "lightgbm",
                                                 "catboost", "xgboost", "xgboost-cpu"])


def _search_summary(result) -> dict:
    """What a lost race is read from afterwards: statuses and algorithms of the evaluations, the final members, the
    best single model's and the ensemble's validation loss, the slowest fits, and how many evaluations and how much
    of the final weight had the value-shares switch on."""
    from optdiv.spaces.autosklearn_space import VALUE_SHARES

    history = result.history
    statuses, algorithms = {}, {}
    for obs in history:
        statuses[obs.status] = statuses.get(obs.status, 0) + 1
        algorithms[obs.algorithm] = algorithms.get(obs.algorithm, 0) + 1
    ok = [obs for obs in history if obs.ok]
    members = {}
    for index, weight in zip(result.member_indices, result.weights):
        name = history[index].algorithm
        members[name] = round(members.get(name, 0.0) + float(weight), 4)
    switched = {i for i, obs in enumerate(history) if dict(obs.config).get(VALUE_SHARES) == "on"}
    switched_weight = sum(float(w) for i, w in zip(result.member_indices, result.weights) if i in switched)
    return {"statuses": statuses, "algorithms": algorithms, "member_weights": members,
            "value_shares": {"evaluations_on": len(switched), "weight_on": round(switched_weight, 4)},
            "best_single_val": min((obs.val_loss for obs in ok), default=None),
            "ensemble_val": float(result.val_loss),
            "fit_seconds_max": max((obs.fit_seconds for obs in history), default=None),
            "cv_folds": result.info.get("cv")}


def _fit_optdiv(job, X, y, X_test):
    if job["repo"] not in sys.path:
        sys.path.insert(0, job["repo"])  # the checkout's optdiv, as benchmarks/time_budget.py
    import optdiv
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor

    cls = OptDivClassifier if job["task"] == "classification" else OptDivRegressor
    options = dict(job["options"])
    portfolio = options.get("portfolio")
    if isinstance(portfolio, str) and "{dataset}" in portfolio:  # one portfolio per dataset, e.g. left out of it
        path = Path(portfolio.format(dataset=job["dataset"]))
        path = path if path.is_absolute() else Path(job["repo"]) / path
        if not path.exists():
            raise FileNotFoundError(f"portfolio {path} for {job['dataset']} not found "
                                    f"(benchmarks/portfolio.py leave-out writes one per dataset)")
        options["portfolio"] = str(path)
    began = time.perf_counter()
    if "n_jobs" in cls().get_params() and "n_jobs" not in options:
        options["n_jobs"] = 1  # one core, as every peer (the product default takes all of them)
    model = cls(budget=None, time_budget=job["seconds"], seed=job["seed"], **options)
    model.fit(X, y)
    wall = time.perf_counter() - began
    pred = model.predict(X_test)
    result = model.result_
    final = result.info.get("final_model", {})
    extra = {"stopped": result.info.get("stopped"), "members_loaded": final.get("loaded"),
             "members_refitted": final.get("refitted"), "search_seconds": result.info.get("search_seconds"),
             "final_model_seconds": final.get("seconds"), **_search_summary(result)}
    versions = _versions(["scikit-learn", "numpy", "pandas", "lightgbm"])
    versions["optdiv"] = optdiv.__version__
    return pred, wall, len(model.result_.history), extra, versions


def run_worker(job_path: str, result_path: str) -> int:
    """Fit one system on the split's training rows and score it on the test rows; write RESULT as JSON."""
    job = json.loads(Path(job_path).read_text())
    result = {"status": "failed", "error": None, "test_error": None, "wall_seconds": None, "models_evaluated": None,
              "versions": {"python": platform.python_version()}, "extra": {}}
    try:
        import pandas as pd

        frame = pd.read_csv(job["csv"])
        split = read_split(job["split"])
        if len(frame) != split["n_rows"]:
            raise ValueError(f"{job['csv']} has {len(frame)} rows, the split {split['n_rows']}")
        label = frame.columns[-1]
        train = frame.iloc[split["train"]].reset_index(drop=True)
        test = frame.iloc[split["test"]].reset_index(drop=True)
        X, y = train.drop(columns=[label]), train[label]
        X_test, y_test = test.drop(columns=[label]), test[label]
        base = job["base"]
        if base == "autosklearn":
            out = _fit_autosklearn(job, X, y, X_test)
        elif base in AUTOGLUON_PRESETS:
            out = _fit_autogluon(job, train, label, X_test)
        else:
            out = _fit_optdiv(job, X, y, X_test)
        pred, wall, models, extra, versions = out
        result.update(status="ok", test_error=test_error(job["task"], y_test, pred), wall_seconds=wall,
                      models_evaluated=int(models), extra=extra, versions=versions)
    except BaseException as exc:  # noqa: BLE001 (a MemoryError or SystemExit from a host is a failed fit too)
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    Path(result_path).write_text(json.dumps(result))
    return 0 if result["status"] == "ok" else 1


# --------------------------------------------------------------------------- #
# Parent: plan, run the workers, record.
# --------------------------------------------------------------------------- #

def load_records(path: Path) -> list:
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                print(f"warning: {path}:{number} is not JSON; ignored", file=sys.stderr)
    return records


def plan(records, datasets, seeds, systems, retry_failed: bool = False, n_train=None) -> tuple:
    """(triples to run, triples skipped): a triple recorded ok is skipped; a failed one only without retry. With
    ``n_train`` (rows per dataset), a system is planned as the one it is there (:func:`effective_system`), once."""
    ok = {(r["dataset"], r["seed"], r["system"]) for r in records if r.get("status") == "ok"}
    failed = {(r["dataset"], r["seed"], r["system"]) for r in records if r.get("status") != "ok"}
    todo, skipped = [], []
    for dataset in datasets:
        for seed in seeds:
            for system in systems:
                if n_train is not None:
                    system = effective_system(system, n_train[dataset])
                triple = (dataset, seed, system)
                if triple in todo or triple in skipped:
                    continue
                if triple in ok or (triple in failed and not retry_failed):
                    skipped.append(triple)
                else:
                    todo.append(triple)
    return todo, skipped


def _slug(dataset: str, seed: int, system: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", system)[:40]
    return f"{dataset}-seed{seed}-{safe}-{hashlib.sha1(system.encode()).hexdigest()[:8]}"


def _repo_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return (head + "-dirty" if dirty else head) or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _calibration_seconds(repeats: int = 3) -> float:
    """One core's seconds for a fixed pure-Python workload, the best of ``repeats``: a time-budgeted search makes as
    many evaluations as the machine's speed allows, so two races' lines pair fairly only at equal speed."""
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        values = [((i * 7919) % 10007) / 10007.0 for i in range(400_000)]
        values.sort()
        sum(v * v for v in values)
        best = min(best, time.perf_counter() - began)
    return best


def machine_fingerprint() -> dict:
    """The machine a race ran on (processor, cores, calibration seconds), stored in each of its lines."""
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "calibration_seconds": round(_calibration_seconds(), 4)}


def same_machine(a, b) -> bool:
    """Whether two fingerprints are of the same processor and core count at speeds within :data:`SPEED_TOLERANCE`."""
    if not a or not b or (a.get("cpu"), a.get("cores")) != (b.get("cpu"), b.get("cores")):
        return False
    fast, slow = sorted((a["calibration_seconds"], b["calibration_seconds"]))
    return slow <= fast * (1 + SPEED_TOLERANCE)


def machine_warnings(records, reference: str, candidates, datasets) -> list:
    """One line per candidate whose pairs with ``reference`` on ``datasets`` join lines raced on different (or
    unrecorded) machines: their differences mix the lever with the machine, so race both arms side by side."""
    chosen = chosen_records([r for r in records if r["dataset"] in set(datasets)])
    out = []
    for candidate in candidates:
        pairs = [(chosen[d, s, reference], r) for (d, s, system), r in chosen.items()
                 if system == candidate and (d, s, reference) in chosen]
        unrecorded = sum(1 for a, b in pairs if not a.get("machine") or not b.get("machine"))
        other = sum(1 for a, b in pairs if a.get("machine") and b.get("machine")
                    and not same_machine(a["machine"], b["machine"]))
        if other:
            speeds = sorted({r["machine"]["calibration_seconds"] for pair in pairs for r in pair if r.get("machine")})
            out.append(f"**{candidate}: {other} of {len(pairs)} pairs join lines raced on different machines** "
                       f"(calibration {speeds[0]:g}-{speeds[-1]:g} s): race `{reference}` beside it "
                       f"(`--systems '{reference},{candidate}'`) before reading the pairs.")
        elif unrecorded:
            out.append(f"{candidate}: {unrecorded} of {len(pairs)} pairs join a line with no machine recorded "
                       "(raced before lines recorded it): the pairs may mix the lever with the machine.")
    return out


def _kill_group(pid: int) -> None:
    """SIGKILL the process group the worker leads (its own session), leftovers of the fit included."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_exited(proc, timeout: float) -> bool:
    """Wait until the worker exits, without reaping it (so its group id cannot be reused); False on timeout."""
    if not hasattr(os, "waitid"):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


class Race:
    def __init__(self, out: Path, seconds: float, interpreters: dict, memory_limit: int, commit: str,
                 machine: dict = None):
        self.out, self.seconds, self.interpreters = out, seconds, interpreters
        self.memory_limit, self.commit, self.machine = memory_limit, commit, machine
        self.lock = threading.Lock()
        self.running: set = set()
        self.stopping = False
        self.results = out / "results.jsonl"

    def say(self, text: str) -> None:
        with self.lock:
            print(text, flush=True)

    def fit(self, dataset: str, csv: Path, seed: int, system: str, split_path: Path, label: str) -> dict:
        base, options = parse_system(system)
        split = read_split(split_path)
        slug = _slug(dataset, seed, system)
        work = self.out / "work" / slug
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / f"{slug}.log"
        job = {"dataset": dataset, "seed": seed, "system": system, "base": base, "options": options,
               "task": split["task"], "n_classes": split["n_classes"], "csv": str(csv.resolve()),
               "split": str(split_path.resolve()), "seconds": self.seconds, "memory_limit": self.memory_limit,
               "work_dir": str(work.resolve()), "repo": str(REPO)}
        job_path, result_path = work / "job.json", work / "result.json"
        job_path.write_text(json.dumps(job))
        env = dict(os.environ)
        env.update({name: "1" for name in THREAD_VARS})
        limit = kill_after(self.seconds)
        self.say(f"{label} start {dataset} seed {seed} {system}")
        began = time.perf_counter()
        killed = False
        with open(log, "w") as fh:
            proc = subprocess.Popen([self.interpreters[base], str(SCRIPT), "worker", str(job_path), str(result_path)],
                                    stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(work),
                                    start_new_session=True)
            with self.lock:
                self.running.add(proc.pid)
                stopping = self.stopping
            if stopping:  # interrupted while this fit was starting
                _kill_group(proc.pid)
            try:
                killed = not _wait_exited(proc, limit)
            finally:
                with self.lock:
                    self.running.discard(proc.pid)
                _kill_group(proc.pid)  # the worker if killed, else whatever it left running; not yet reaped
                proc.wait()
        parent_wall = time.perf_counter() - began
        if self.stopping:  # interrupted: record nothing, so that the next run does this fit again
            shutil.rmtree(work, ignore_errors=True)
            return {}
        result = None
        if result_path.exists() and not killed:
            try:
                result = json.loads(result_path.read_text())
            except ValueError:
                pass
        record = {"dataset": dataset, "task": split["task"], "seed": seed, "system": system,
                  "seconds": self.seconds, "status": "failed", "test_error": None,
                  "metric": "error %" if split["task"] == "classification" else "mse",
                  "wall_seconds": None, "parent_wall_seconds": round(parent_wall, 3), "models_evaluated": None,
                  "n_train": len(split["train"]), "n_test": len(split["test"]), "versions": {}, "extra": {},
                  "repo_commit": self.commit, "machine": self.machine, "killed": killed, "error": None,
                  "log": str(log.relative_to(self.out)),
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
        if killed:
            record["error"] = f"killed after {limit:g} s (2 T + 120 s)"
        elif result is None:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            record["error"] = f"worker exited with {proc.returncode} and no result; log tail:\n{tail}"
        else:
            for key in ("status", "test_error", "models_evaluated", "versions", "extra", "error"):
                record[key] = result[key]
            if result["wall_seconds"] is not None:
                record["wall_seconds"] = round(result["wall_seconds"], 3)
            if result.get("traceback"):
                record["traceback"] = result["traceback"]
        shutil.rmtree(work, ignore_errors=True)
        with self.lock:
            with open(self.results, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        if record["status"] == "ok":
            unit = " %" if record["metric"] == "error %" else " (MSE)"
            self.say(f"{label} done  {dataset} seed {seed} {system}: test error {record['test_error']:.4g}{unit}, "
                     f"fit {record['wall_seconds']:.1f} s (process {parent_wall:.1f} s), "
                     f"{record['models_evaluated']} models")
        else:
            first = (record["error"] or "").splitlines()[0] if record["error"] else ""
            self.say(f"{label} FAILED {dataset} seed {seed} {system} after {parent_wall:.1f} s: {first}")
        return record

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            pids = list(self.running)
        for pid in pids:
            _kill_group(pid)


def resolve_interpreters(args, systems) -> dict:
    given = {"autosklearn": args.python_autosklearn, "autogluon": args.python_autogluon,
             "optdiv": args.python_optdiv}
    needed = {ENVIRONMENT[parse_system(s)[0]] for s in systems}
    out = {}
    for base in sorted(needed):
        path = given[base] or (sys.executable if base == "optdiv" else str(REPO / NOX_PYTHON[base]))
        how = (f"build it with `nox -s {base}` from the repository root or pass --python-{base} PATH"
               if base in NOX_PYTHON else "pass --python-optdiv PATH")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SystemExit(f"no Python for {base} at {path}: {how}")
        check = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({HOST_MODULE[base]!r}) is None)"
        if subprocess.run([path, "-c", check], capture_output=True, timeout=120).returncode != 0:
            raise SystemExit(f"{path} cannot import {HOST_MODULE[base]}: {how}")
        out[base] = path
    return {system: out[env] for system, env in ENVIRONMENT.items() if env in out}


def cmd_run(args) -> int:
    try:
        systems = parse_systems(args.systems)
        check_optdiv_options(systems)
    except ValueError as exc:
        raise SystemExit(f"--systems: {exc}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    data_dir = Path(args.data_dir)
    datasets = dataset_names(data_dir, args.datasets)
    interpreters = resolve_interpreters(args, systems)
    out = Path(args.out).resolve()  # the workers run in their own folders
    out.mkdir(parents=True, exist_ok=True)
    records = load_records(out / "results.jsonl")
    other = sorted({r.get("seconds") for r in records} - {args.seconds}, key=str)
    if other:
        raise SystemExit(f"{out} holds results for T = {', '.join(map(str, other))} s; use another --out for "
                         f"T = {args.seconds:g} s")
    splits, tasks = {}, {}
    for dataset in datasets:
        for seed in seeds:
            csv = data_dir / f"{dataset}.csv"
            if dataset not in tasks:
                tasks[dataset] = dataset_task(csv)
            splits[dataset, seed] = ensure_split(out, dataset, csv, seed, tasks[dataset])
    n_train = {dataset: len(read_split(splits[dataset, seeds[0]])["train"]) for dataset in datasets} if seeds else {}
    todo, skipped = plan(records, datasets, seeds, systems, args.retry_failed, n_train)
    print(f"race: T = {args.seconds:g} s, {len(datasets)} datasets x {len(seeds)} seeds x {len(systems)} systems; "
          f"{len(todo)} fits to run, {len(skipped)} already recorded"
          f"{'' if args.retry_failed else ' (failed ones rerun with --retry-failed)'}; {args.jobs} at a time",
          flush=True)
    race = Race(out, args.seconds, interpreters, args.memory_limit, _repo_commit(), machine_fingerprint())
    if todo:
        from concurrent.futures import ThreadPoolExecutor, wait

        def interrupted(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        main_thread = threading.current_thread() is threading.main_thread()  # signal handlers can be set there only
        if main_thread:
            previous = signal.signal(signal.SIGTERM, interrupted)  # a kill of the run ends its fits too, as Ctrl-C
            if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started in the background by a shell
                signal.signal(signal.SIGINT, signal.default_int_handler)
        pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
        futures = [pool.submit(race.fit, d, data_dir / f"{d}.csv", s, system, splits[d, s],
                               f"[{i}/{len(todo)}]") for i, (d, s, system) in enumerate(todo, 1)]
        try:
            wait(futures)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            race.stop()
            pool.shutdown(wait=True)
            print("race: interrupted; the fits under way were stopped and not recorded", flush=True)
            return 130
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)
            try:
                (out / "work").rmdir()  # empty once every fit has cleaned up
            except OSError:
                pass
        pool.shutdown()
        for future in futures:
            future.result()  # a bug in the parent shows here rather than vanishing
    text = write_report(out)
    print(text)
    return 0


# --------------------------------------------------------------------------- #
# Report.
# --------------------------------------------------------------------------- #

#: Means closer than this (relative) are the same: equal error counts summed in another order differ in the
#: last bit, and must not count as "worse".
SAME_MEAN = 1e-9


def _mean(values):
    return math.fsum(values) / len(values) if values else None


def _std(values):
    """Sample standard deviation over seeds (0 for one seed)."""
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


#: A fit ending more than this many seconds before T left time unused (as one ending this far past it overran).
EARLY = 10.0


def top_algorithm_share(record) -> float:
    """Share of an optdiv fit's evaluations spent on its most-evaluated algorithm (None for other systems)."""
    counts = (record.get("extra") or {}).get("algorithms")
    if not counts:
        return None
    return max(counts.values()) / sum(counts.values())


def validation_test_gap(record) -> float:
    """Test error minus the final ensemble's validation error of an optdiv fit, in the table's units (points of
    error for classification, MSE for regression); how much the validation rows flattered the ensemble."""
    val = (record.get("extra") or {}).get("ensemble_val")
    if val is None or record.get("test_error") is None:
        return None
    return record["test_error"] - (100.0 * val if record["task"] == "classification" else val)


def relative_difference(variant: float, peer: float) -> float:
    """(variant - peer) / peer; 0 when both are 0, 1 when only the peer is 0."""
    if peer == 0:
        return 0.0 if variant == 0 else 1.0
    return (variant - peer) / peer


def wilcoxon_p(diffs):
    """Two-sided Wilcoxon signed-rank p over the non-zero differences; 1.0 when all are zero, None without pairs."""
    if not diffs:
        return None
    nonzero = [d for d in diffs if d != 0]
    if not nonzero:
        return 1.0
    from scipy.stats import wilcoxon

    return float(wilcoxon(nonzero).pvalue)


def chosen_records(records) -> dict:
    """One record per (dataset, seed, system): the last ok one, else the last one."""
    chosen: dict = {}
    for r in records:
        key = (r["dataset"], r["seed"], r["system"])
        if key not in chosen or r.get("status") == "ok" or chosen[key].get("status") != "ok":
            chosen[key] = r
    return chosen


def _paired(errors, datasets, variant, peer_of) -> dict:
    """better/same/worse and the relative differences over the (dataset, seed) pairs both systems have ok."""
    counts = {"pairs": 0, "better": 0, "same": 0, "worse": 0}
    diffs = []
    for dataset in datasets:
        peer = peer_of(dataset)
        if peer is None:
            continue
        mine, theirs = errors.get((dataset, variant), {}), errors.get((dataset, peer), {})
        for seed in sorted(set(mine) & set(theirs)):
            a, b = mine[seed], theirs[seed]
            d = relative_difference(a, b)
            counts["pairs"] += 1
            counts["better" if d < 0 else "worse" if d > 0 else "same"] += 1
            diffs.append(d)
    counts["median_relative_difference"] = statistics.median(diffs) if diffs else None
    counts["wilcoxon_p"] = wilcoxon_p(diffs)
    return counts


def summarize(records, reference: str = "optdiv") -> dict:
    """Everything the table shows, as plain data; every other optdiv variant is also paired with ``reference``
    (default: the estimator's defaults, the comparison that decides whether a lever becomes one)."""
    chosen = chosen_records(records)
    datasets = sorted({k[0] for k in chosen})
    systems = []
    for k in chosen:
        if k[2] not in systems:
            systems.append(k[2])
    order = {name: i for i, name in enumerate(BASE_SYSTEMS)}
    systems.sort(key=lambda s: (order[parse_system(s)[0]], s != parse_system(s)[0], s))
    seeds = sorted({k[1] for k in chosen})
    tasks = {r["dataset"]: r["task"] for r in chosen.values()}
    errors: dict = {}  # (dataset, system) -> {seed: error}
    cells: dict = {}
    for dataset in datasets:
        for system in systems:
            rs = [r for (d, _, s), r in sorted(chosen.items(), key=lambda kv: kv[0][1]) if d == dataset and s == system]
            if not rs:
                continue
            ok = [r for r in rs if r.get("status") == "ok"]
            errors[dataset, system] = {r["seed"]: r["test_error"] for r in ok}
            values = [r["test_error"] for r in ok]
            cells[dataset, system] = {
                "n": len(rs), "n_ok": len(ok), "mean": _mean(values), "std": _std(values) if values else None,
                "wall": _mean([r["wall_seconds"] for r in ok]),
                "models": _mean([r["models_evaluated"] for r in ok]),
                "top_share": _mean([v for v in map(top_algorithm_share, ok) if v is not None]),
                "gap": _mean([v for v in map(validation_test_gap, ok) if v is not None]),
                "early": sum(r["seconds"] - r["wall_seconds"] > EARLY for r in ok)}
    better_peer = {}
    for dataset in datasets:
        means = [(cells[dataset, p]["mean"], p) for p in PEERS
                 if (dataset, p) in cells and cells[dataset, p]["mean"] is not None]
        better_peer[dataset] = min(means)[1] if means else None
    variants = {}
    for variant in (s for s in systems if parse_system(s)[0] == "optdiv"):
        compared = at_or_below = at_or_below_regression = worse_beyond_std = 0
        for dataset in datasets:
            peer = better_peer[dataset]
            mine = cells.get((dataset, variant))
            if peer is None or mine is None or mine["mean"] is None:
                continue
            theirs = cells[dataset, peer]
            compared += 1
            if mine["mean"] <= theirs["mean"] * (1 + SAME_MEAN) + SAME_MEAN:
                at_or_below += 1
                at_or_below_regression += tasks[dataset] == "regression"
            elif mine["mean"] - theirs["mean"] > theirs["std"]:
                worse_beyond_std += 1
        paired = {peer: _paired(errors, datasets, variant, lambda d, p=peer: p) for peer in PEERS
                  if any((d, peer) in cells for d in datasets)}
        if paired:
            paired["better peer"] = _paired(errors, datasets, variant, lambda d: better_peer[d])
        if variant != reference and reference in systems:  # a lever against what it would replace
            paired[reference] = _paired(errors, datasets, variant, lambda d: reference)
        variants[variant] = {"datasets": compared, "at_or_below": at_or_below,
                             "at_or_below_regression": at_or_below_regression,
                             "worse_beyond_std": worse_beyond_std, "paired": paired}
    overrun = {}
    for system in systems:
        rs = [r for (_, _, s), r in chosen.items() if s == system]
        walls = [(r["wall_seconds"] - r["seconds"], r["seconds"]) for r in rs if r.get("wall_seconds") is not None]
        parents = [r["parent_wall_seconds"] - r["seconds"] for r in rs if r.get("parent_wall_seconds") is not None]
        killed = sum(bool(r.get("killed")) for r in rs)
        overrun[system] = {"fits": len(rs), "max_over": max(w for w, _ in walls) if walls else None,
                           "min_over": min(w for w, _ in walls) if walls else None,
                           "max_parent_over": max(parents) if parents else None, "killed": killed,
                           "beyond_tolerance": sum(w > tolerance(t) for w, t in walls) + killed,
                           "early": sum(w < -EARLY for w, _ in walls)}
    failures = [r for _, r in sorted(chosen.items(), key=lambda kv: kv[0]) if r.get("status") != "ok"]
    versions = {}
    for r in chosen.values():
        if r.get("status") == "ok" and r["system"] not in versions:
            versions[r["system"]] = r.get("versions", {})
    return {"datasets": datasets, "systems": systems, "seeds": seeds, "tasks": tasks, "cells": cells,
            "better_peer": better_peer, "variants": variants, "overrun": overrun, "failures": failures,
            "seconds": sorted({r["seconds"] for r in chosen.values()}), "versions": versions,
            "commits": sorted({r.get("repo_commit", "?") for r in chosen.values()}), "reference": reference}


def _num(value, task) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if task == "classification" else f"{value:.4g}"


def _p(value) -> str:
    return "–" if value is None else f"{value:.3g}"


def render(summary) -> str:
    s = summary
    if not s["datasets"]:
        return "No results yet."
    systems, T = s["systems"], s["seconds"]
    tol = ", ".join(f"{tolerance(t):g} s for T = {t:g} s" for t in T)
    lines = [f"# Race: test error after the same wall time (T = {', '.join(f'{t:g}' for t in T)} s, one core each)",
             "",
             f"Seeds {', '.join(map(str, s['seeds']))}; one 80/20 split per (dataset, seed), the same for every "
             f"system. Classification: test error in %; regression: test MSE. Lower is better. "
             f"Commit {', '.join(s['commits'])}.",
             "",
             "## Test error, mean ± std over seeds",
             "",
             "| dataset | task | " + " | ".join(systems) + " | better peer |",
             "|---|---|" + "---|" * len(systems) + "---|"]
    for dataset in s["datasets"]:
        task = s["tasks"][dataset]
        means = [s["cells"][dataset, x]["mean"] for x in systems
                 if (dataset, x) in s["cells"] and s["cells"][dataset, x]["mean"] is not None]
        row = []
        for system in systems:
            c = s["cells"].get((dataset, system))
            if c is None:
                row.append("")
                continue
            text = "failed" if c["mean"] is None else f"{_num(c['mean'], task)} ± {_num(c['std'], task)}"
            if c["mean"] is not None and c["mean"] == min(means):
                text = f"**{text}**"
            if c["n_ok"] < c["n"]:
                text += f" ({c['n_ok']}/{c['n']} ok)"
            row.append(text)
        lines.append(f"| {dataset} | {'cls' if task == 'classification' else 'reg'} | " + " | ".join(row)
                     + f" | {s['better_peer'][dataset] or '–'} |")
    lines += ["", "## Mean fit wall time (s) / models evaluated", "",
              "| dataset | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for dataset in s["datasets"]:
        row = []
        for system in systems:
            c = s["cells"].get((dataset, system))
            row.append("" if c is None or c["wall"] is None else f"{c['wall']:.0f} / {c['models']:.0f}")
        lines.append(f"| {dataset} | " + " | ".join(row) + " |")
    lines += ["", "Models evaluated: auto-sklearn runs in `cv_results_`, AutoGluon rows of its leaderboard "
              "(ensembles included), optdiv evaluations in `result_.history`."]
    searched = [x for x in systems if any(s["cells"].get((d, x), {}).get("top_share") is not None
                                          for d in s["datasets"])]
    if searched:
        lines += ["", "## optdiv searches: share of the most-evaluated algorithm / validation-test gap", "",
                  "Gap: test error minus the final ensemble's validation error (points of error; MSE for "
                  "regression), mean over seeds.", "",
                  "| dataset | " + " | ".join(searched) + " |", "|---|" + "---|" * len(searched)]
        for dataset in s["datasets"]:
            row = []
            for system in searched:
                c = s["cells"].get((dataset, system))
                if c is None or c["top_share"] is None:
                    row.append("")
                    continue
                row.append(f"{c['top_share']:.2f} / {_num(c['gap'], s['tasks'][dataset])}")
            lines.append(f"| {dataset} | " + " | ".join(row) + " |")
        shares = {x: [s["cells"][d, x]["top_share"] for d in s["datasets"]
                      if s["cells"].get((d, x), {}).get("top_share") is not None] for x in searched}
        lines.append("| mean share | " + " | ".join(f"{_mean(shares[x]):.2f}" for x in searched) + " |")
    if s["variants"] and not any(s["better_peer"].values()):
        lines += ["", "No auto-sklearn or AutoGluon results to compare the optdiv variants with."]
    elif s["variants"]:
        lines += ["", "## optdiv variants against the better peer (lowest mean of the peers)", "",
                  "| variant | datasets | mean at or below the better peer (regression) "
                  "| worse by more than the peer's seed std |", "|---|---|---|---|"]
        for variant, v in s["variants"].items():
            lines.append(f"| {variant} | {v['datasets']} | {v['at_or_below']} ({v['at_or_below_regression']}) "
                         f"| {v['worse_beyond_std']} |")
        lines += ["", "Paired over (dataset, seed): relative difference (variant − peer) / peer; better = lower "
                  "test error. Wilcoxon signed-rank (two-sided) over the non-zero differences; p = 1 when all are "
                  f"zero. Against `{s.get('reference', 'optdiv')}`: a variant against that one, on the pairs both have.", "",
                  "| variant | against | pairs | better | same | worse | median rel. diff | Wilcoxon p |",
                  "|---|---|---|---|---|---|---|---|"]
        for variant, v in s["variants"].items():
            for peer, c in v["paired"].items():
                med = c["median_relative_difference"]
                lines.append(f"| {variant} | {peer} | {c['pairs']} | {c['better']} | {c['same']} | {c['worse']} | "
                             f"{'–' if med is None else f'{100 * med:+.1f} %'} | {_p(c['wilcoxon_p'])} |")
    lines += ["", f"## Time: largest fit wall time over T (allowed: max(5 %, 10 s), {tol})", "",
              "| system | fits | max fit wall − T (s) | min fit wall − T (s) | max process wall − T (s) "
              f"| fits over the allowance (killed at 2 T + 120 s) | fits ending over {EARLY:g} s early |",
              "|---|---|---|---|---|---|---|"]
    for system in systems:
        o = s["overrun"][system]
        fmt = (lambda x: "–" if x is None else f"{x:+.1f}")
        lines.append(f"| {system} | {o['fits']} | {fmt(o['max_over'])} | {fmt(o['min_over'])} | "
                     f"{fmt(o['max_parent_over'])} | {o['beyond_tolerance']} ({o['killed']}) | {o['early']} |")
    lines += ["", "Fit wall time: the whole fit call, timed in the worker; process wall time: the worker process, "
              "timed by the parent (interpreter start, imports, data loading and prediction included)."]
    if s["failures"]:
        lines += ["", "## Failed fits", "", "| dataset | seed | system | error |", "|---|---|---|---|"]
        for r in s["failures"]:
            error = (r.get("error") or "").splitlines()[0][:160].replace("|", "\\|")
            lines.append(f"| {r['dataset']} | {r['seed']} | {r['system']} | {error} |")
    if s["versions"]:
        lines += ["", "## Versions", ""]
        for system, v in s["versions"].items():
            lines.append(f"- {system}: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    return "\n".join(lines) + "\n"


def write_report(out: Path, systems=None, reference: str = "optdiv") -> str:
    """Render OUT/results.jsonl (only ``systems``, exact names, when given) and write OUT/table.md."""
    records = with_same_fits(load_records(out / "results.jsonl"))
    if systems:
        missing = sorted(set(systems) - {r["system"] for r in records})
        if missing:
            raise SystemExit(f"no records of {', '.join(missing)} in {out / 'results.jsonl'}")
        records = [r for r in records if r["system"] in systems]
    text = render(summarize(records, reference))
    (out / "table.md").write_text(text)
    return text


# --------------------------------------------------------------------------- #
# Choosing a default on some datasets and reporting it on the others.
# --------------------------------------------------------------------------- #

#: The 14 datasets in two halves: a default is chosen on one half and reported on the other, and the other way
#: round, so no reported number comes from a dataset its default was chosen on. cpu_act and cpu_small share their
#: target (one half holds both); each half has classification and regression sets and one or two near-chance or
#: small ones.
HALVES = (("amazon_employee", "bodyfat", "cpu_act", "cpu_small", "quake", "satimage", "wine_quality"),
          ("bank32nh", "eeg", "elevators", "house_8L", "pol", "space_ga", "wind"))
#: The name the chosen-elsewhere default is reported under.
CHOSEN = "optdiv:chosen=elsewhere"


def choose(records, reference: str, candidates, datasets) -> tuple:
    """(system, per-candidate statistics): the candidate (or ``reference``) taken as the default on ``datasets``.

    A candidate qualifies when it is lower than ``reference`` in more (dataset, seed) pairs than it is higher and
    its median relative difference is below zero; of those, the lowest median wins; with none, ``reference``
    stays. Only these datasets' records are read."""
    chosen = chosen_records([r for r in records if r["dataset"] in set(datasets)])
    errors: dict = {}
    for (dataset, seed, system), r in chosen.items():
        if r.get("status") == "ok":
            errors.setdefault((dataset, system), {})[seed] = r["test_error"]
    stats, best, best_median = {}, reference, 0.0
    for candidate in candidates:
        c = _paired(errors, sorted(datasets), candidate, lambda d: reference)
        stats[candidate] = c
        median = c["median_relative_difference"]
        if c["pairs"] and c["better"] > c["worse"] and median is not None and median < best_median:
            best, best_median = candidate, median
    return best, stats


def chosen_elsewhere(records, reference: str, candidates, halves=HALVES) -> tuple:
    """(records, decisions): the records of :data:`CHOSEN`, on each half those of the system :func:`choose` took
    on the other half, and what was decided where."""
    out, decisions = [], []
    for choose_on, report_on in ((halves[0], halves[1]), (halves[1], halves[0])):
        system, stats = choose(records, reference, candidates, choose_on)
        decisions.append({"chosen_on": list(choose_on), "reported_on": list(report_on), "system": system,
                          "stats": stats, "machines": machine_warnings(records, reference, candidates, choose_on)})
        out += [{**r, "system": CHOSEN, "chosen_system": system} for r in records
                if r["system"] == system and r["dataset"] in set(report_on)]
    return out, decisions


def render_decisions(decisions, reference: str) -> str:
    lines = ["# Defaults chosen on one half of the datasets, reported on the other", "",
             f"Reference (what a lever would replace): `{reference}`. A candidate is taken on a half when it is lower "
             "than the reference in more (dataset, seed) pairs of that half than higher and its median relative "
             "difference is negative (the lowest median of those qualifying wins); the table below reports, on each "
             f"half, what was taken on the other, as `{CHOSEN}`.", ""]
    for d in decisions:
        lines += [f"## Chosen on {', '.join(d['chosen_on'])}: `{d['system']}`", "",
                  "| candidate | pairs | lower | same | higher | median rel. diff | Wilcoxon p |", "|---|---|---|---|---|---|---|"]
        for candidate, c in d["stats"].items():
            med = c["median_relative_difference"]
            lines.append(f"| {candidate} | {c['pairs']} | {c['better']} | {c['same']} | {c['worse']} | "
                         f"{'–' if med is None else f'{100 * med:+.1f} %'} | {_p(c['wilcoxon_p'])} |")
        lines.append("")
        lines += [*d.get("machines", []), ""] if d.get("machines") else []
    return "\n".join(lines)


def cmd_choose(args) -> int:
    out = Path(args.out)
    records = with_same_fits(load_records(out / "results.jsonl"))
    if not records:
        raise SystemExit(f"no records in {out / 'results.jsonl'}")
    candidates = [name.strip() for name in _split_top(args.candidates, ",") if name.strip()]
    known = {r["system"] for r in records}
    missing = sorted(set(candidates + [args.reference]) - known)
    if missing:
        raise SystemExit(f"no records of {', '.join(missing)} in {out / 'results.jsonl'}")
    halves = HALVES if not args.half else (tuple(args.half.split(",")),
                                           tuple(sorted({r["dataset"] for r in records} - set(args.half.split(",")))))
    composed, decisions = chosen_elsewhere(records, args.reference, candidates, halves)
    peers = [r for r in records if parse_system(r["system"])[0] != "optdiv" or r["system"] == args.reference]
    text = render_decisions(decisions, args.reference) + "\n" + render(summarize(peers + composed, CHOSEN))
    (out / "chosen.md").write_text(text)
    print(text)
    return 0


def cmd_report(args) -> int:
    out = Path(args.out)
    if not (out / "results.jsonl").exists():
        raise SystemExit(f"no {out / 'results.jsonl'}")
    systems = [name.strip() for name in _split_top(args.systems, ",")] if args.systems else None
    print(write_report(out, systems, args.reference))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the missing fits, then print and write the table")
    run.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"),
                     help="folder of DATASET.csv files whose last column is the target")
    run.add_argument("--datasets", default="all", help="'all' (every CSV in --data-dir) or a,b,c")
    run.add_argument("--seeds", default="0,1,2")
    run.add_argument("--seconds", type=float, default=180.0, help="wall time T of every fit (default 180)")
    run.add_argument("--systems", default="autosklearn,autogluon,optdiv",
                     help="comma-separated: autosklearn, autogluon, optdiv, optdiv:KEY=VALUE;KEY=VALUE")
    run.add_argument("--jobs", type=int, default=2, help="fits side by side at most (default 2)")
    run.add_argument("--out", default="runs/race")
    run.add_argument("--memory-limit", type=int, default=4096, help="auto-sklearn's memory_limit, MB (default 4096)")
    run.add_argument("--retry-failed", action="store_true", help="rerun the triples recorded as failed")
    run.add_argument("--python-autosklearn", help=f"default: {NOX_PYTHON['autosklearn']} in the repository root")
    run.add_argument("--python-autogluon", help=f"default: {NOX_PYTHON['autogluon']} in the repository root")
    run.add_argument("--python-optdiv", help="default: this interpreter")
    report = sub.add_parser("report", help="print the table of OUT/results.jsonl and write OUT/table.md")
    report.add_argument("--out", default="runs/race")
    report.add_argument("--systems", help="only these systems (exact names as recorded, comma-separated; "
                                          "default: every system in the records)")
    report.add_argument("--reference", default="optdiv",
                        help="the optdiv variant every other one is also paired with (default: optdiv, the "
                             "estimator's defaults)")
    chooser = sub.add_parser("choose", help="take a default on one half of the datasets, report it on the other "
                                             "(and the other way round); writes OUT/chosen.md")
    chooser.add_argument("--out", default="runs/race")
    chooser.add_argument("--reference", default="optdiv", help="the default a candidate would replace")
    chooser.add_argument("--candidates", required=True, help="optdiv variants to choose from (comma-separated)")
    chooser.add_argument("--half", help="the datasets of one half (comma-separated; default: the fixed halves "
                                        + " / ".join(",".join(h) for h in HALVES) + ")")
    worker = sub.add_parser("worker", help="(internal) one fit: race.py worker JOB.json RESULT.json")
    worker.add_argument("job")
    worker.add_argument("result")
    args = parser.parse_args(argv)
    if args.command == "worker":
        return run_worker(args.job, args.result)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "choose":
        return cmd_choose(args)
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
