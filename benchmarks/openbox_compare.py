"""Plain OpenBox against OpenBox + optdiv (OptDivBO, DivBO): same data, space, budget and seed.

Per dataset and seed the data are split 60/20/20 with ``optdiv.data.split``. Every method runs
OpenBox 0.9's ``Advisor`` ask/tell loop over the same ConfigSpace space (default: optdiv's auto-sklearn
space, 102 hyperparameters, so ``surrogate_type="prf"`` is passed to keep OpenBox from switching to
random search) with the same OpenBox settings (``initial_trials``, ``rand_prob``, ``random_state=seed``):

* ``openbox``: :class:`~optdiv.integrations.openbox.OptDivAdvisor` with ``method=None``, which suggests
  exactly what ``openbox.Advisor`` suggests and only keeps the predictions for the post-hoc ensemble;
* ``optdivbo`` / ``divbo``: the same advisor with the diversity option on.

Two final models end every run, so each search is compared on both: the host's own (``test_error``: Caruana,
size 25, on the run's metric, the members as fitted on the training rows) and optdiv's (``optdiv_test_error``:
``final_ensemble``'s engine selection, log loss for error and 20 bootstrap bags for regression, and
``EnsembleMembers.refit`` on the training and validation rows). The host-alone arm is ``openbox`` with the host's final
model; ``openbox`` + optdiv is a diversity arm with optdiv's final model, and ``openbox`` with optdiv's final model
isolates what the final model alone gives.

Each configuration is fitted by ``optdiv.evaluation.evaluator.Evaluator`` (a worker process, ``--time-limit``
seconds; failures and timeouts become OpenBox FAILED / TIMEOUT trials). After every iteration the
post-hoc ensemble (Caruana, size 25, or Agnostic Bayes) is rebuilt over the validation predictions and
scored on the test rows, so the per-iteration file holds anytime curves.

Output under ``--out``: ``iterations.csv`` (one row per iteration: suggestion seconds, trial state,
single-model and ensemble validation/test error, diversity weight), ``results.jsonl`` (one record per
finished run; a rerun skips the (dataset, seed, method) triples already there, so an interrupted
benchmark resumes) and ``summary.md``. Classification errors are in %, regression errors are MSE.

    python benchmarks/openbox_compare.py --data ../shared/datasets/quake.csv --seeds 0 \\
        --iterations 20 --out .cache/openbox_compare

Needs the OpenBox environment (``nox -s openbox``: OpenBox 0.9.0, ConfigSpace 0.6.1).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.data import load_dataset, split

METHODS = ("openbox", "optdivbo", "divbo")
ITERATION_COLUMNS = [
    "dataset", "seed", "method", "iteration", "suggest_seconds", "rerank_seconds", "state", "val_error", "test_error",
    "ensemble_val_error", "ensemble_test_error", "ensemble_members", "weight", "changed",
]


def _scale(task: str) -> float:
    return 100.0 if task == "classification" else 1.0


def run_one(dataset, name: str, seed: int, method: str, iterations: int, space_name: str = "autosklearn",
            time_limit: float = 60.0, initial_trials: int = 5, ensemble: str = "caruana",
            ensemble_size: int = 25, on_iteration=None) -> Dict:
    """One search of ``iterations`` evaluations; returns the run's record (per-iteration rows in ``trace``)."""
    from openbox import Observation
    from openbox.utils.constants import FAILED, SUCCESS, TIMEOUT

    from optdiv.core.ensemble import ensemble_predict
    from optdiv.core.metrics import mean_loss
    from optdiv.evaluation.evaluator import Evaluator
    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble
    from optdiv.spaces import get_space

    task = dataset.task
    metric = "error" if task == "classification" else "mse"
    scale = _scale(task)
    splits = split(dataset, seed=seed)
    space = get_space(space_name, task)
    advisor = OptDivAdvisor(
        space.configspace, y_val=splits.y_val, metric=metric, method=None if method == "openbox" else method,
        initial_trials=initial_trials, surrogate_type="prf", random_state=seed, output_dir=None,
        task_id=f"{name}-{method}-{seed}", logger_kwargs={"level": "WARNING"},
    )
    evaluator = Evaluator(space.build, splits, task, metric, n_classes=dataset.n_classes, time_limit=time_limit,
                          seed=seed)
    test_preds: Dict[int, np.ndarray] = {}
    trace: List[Dict] = []
    start = time.perf_counter()
    try:
        for it in range(iterations):
            before = len(advisor.selections)
            t0 = time.perf_counter()
            config = advisor.get_suggestion()
            suggest = time.perf_counter() - t0
            obs = evaluator.evaluate(config.get_dictionary(), index=it)
            if obs.ok:
                test_preds[it] = obs.test_pred
                advisor.update_observation(Observation(config, [obs.val_loss], elapsed_time=obs.fit_seconds,
                                                       extra_info={"val_pred": obs.val_pred}))
            else:
                state = TIMEOUT if obs.status == "timeout" else FAILED
                advisor.update_observation(Observation(config, [float("inf")], trial_state=state,
                                                       elapsed_time=obs.fit_seconds))
            ok = advisor.history.observations[-1].trial_state == SUCCESS
            selection = advisor.selections[-1] if len(advisor.selections) > before else None
            row = {
                "dataset": name, "seed": seed, "method": method, "iteration": it + 1,
                "suggest_seconds": round(suggest, 4),
                "rerank_seconds": "" if selection is None else round(selection["seconds"], 4),
                "state": "ok" if ok else obs.status if not obs.ok else "failed",
                "val_error": scale * obs.val_loss if ok else "",
                "test_error": scale * obs.test_loss if ok and obs.test_loss is not None else "",
                "ensemble_val_error": "", "ensemble_test_error": "", "ensemble_members": 0,
                "weight": "" if selection is None else round(selection["weight"], 4),
                "changed": "" if selection is None else int(selection["changed"]),
            }
            if test_preds and advisor.stored_predictions()[0]:
                members = final_ensemble(advisor, builder=ensemble, size=ensemble_size, seed=seed,
                                         ensemble_loss=None, ensemble_bags=0)  # the host's own post-hoc selection
                test_pred = ensemble_predict(np.stack([test_preds[i] for i in members.indices]), members.weights)
                row.update(ensemble_val_error=scale * members.val_loss,
                           ensemble_test_error=scale * float(mean_loss(test_pred, splits.y_test, metric)),
                           ensemble_members=len(members.indices))
            trace.append(row)
            if on_iteration is not None:
                on_iteration(row)
    finally:
        evaluator.close()
    final = trace[-1]
    optdiv_final = _optdiv_final(advisor, splits, space, task, metric, seed, ensemble, ensemble_size, test_preds)
    suggest_times = [r["suggest_seconds"] for r in trace]
    return {
        "dataset": name, "task": task, "seed": seed, "method": method, "iterations": iterations,
        "space": space_name, "ensemble": ensemble,
        "test_error": final["ensemble_test_error"], "val_error": final["ensemble_val_error"],
        "ensemble_members": final["ensemble_members"],
        **optdiv_final,
        "failed": sum(r["state"] != "ok" for r in trace),
        "diversity_steps": len(advisor.selections),
        "changed_by_diversity": sum(s["changed"] for s in advisor.selections),
        "mean_suggest_seconds": float(np.mean(suggest_times)),
        "mean_suggest_seconds_last10": float(np.mean(suggest_times[-10:])),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "trace": trace,
    }


#: The final selections each run also records (``optdiv_variants``) besides the default (the log-loss selection
#: without a guard, ``optdiv_test_error``): the guard against a selection clearly worse on 0/1 error at three
#: thresholds (``final_ensemble``'s ``selection_guard``; off by default), and the selection on the metric itself; all
#: refitted like the default. Classification only: a regression selection already minimises its metric.
GUARD_VARIANTS = {"guard z1.0": {"selection_guard": 1.0}, "guard z1.64": {"selection_guard": 1.645},
                  "guard z2.58": {"selection_guard": 2.576}, "own metric": {"ensemble_loss": None}}
#: The threshold chosen on the choice sets, whose switches the variants table counts.
GUARD_SHOWN = "guard z1.64"


def _optdiv_final(advisor, splits, space, task: str, metric: str, seed: int, ensemble: str, ensemble_size: int,
                  test_preds: Dict[int, np.ndarray]) -> Dict:
    """optdiv's final model over the same history: the engine's selection, then the members refitted on the
    training and validation rows; its test error, and the same selection's before the refit; for classification the
    :data:`GUARD_VARIANTS` too (each member refitted once however many variants keep it)."""
    import pandas as pd

    from optdiv.core.ensemble import ensemble_predict
    from optdiv.core.metrics import mean_loss
    from optdiv.evaluation.fitting import build_pipeline
    from optdiv.integrations.openbox import final_ensemble

    if not test_preds or not advisor.stored_predictions()[0]:
        return {"optdiv_test_error": "", "optdiv_val_error": "", "optdiv_unrefitted_test_error": "",
                "refit_seconds": 0.0}
    scale = _scale(task)
    X_all = pd.concat([splits.X_train, splits.X_val], axis=0)
    y_all = np.concatenate([splits.y_train, splits.y_val])
    fitted: Dict[tuple, object] = {}

    def fit(config):
        key = tuple(sorted(config.get_dictionary().items()))
        if key not in fitted:
            fitted[key] = build_pipeline(space.build, config.get_dictionary(), X_all, seed, task).fit(X_all, y_all)
        return fitted[key]

    def test_error(model) -> float:
        pred = model.predict_proba(splits.X_test) if task == "classification" else model.predict(splits.X_test)
        return scale * float(mean_loss(pred, splits.y_test, metric))

    members = final_ensemble(advisor, builder=ensemble, size=ensemble_size, seed=seed)
    kept = ensemble_predict(np.stack([test_preds[i] for i in members.indices]), members.weights)
    t0 = time.perf_counter()
    model = members.refit(fit)
    refit_seconds = time.perf_counter() - t0
    record = {"optdiv_test_error": test_error(model), "optdiv_val_error": scale * members.val_loss,
              "optdiv_unrefitted_test_error": scale * float(mean_loss(kept, splits.y_test, metric)),
              "optdiv_members": len(members.indices), "refit_seconds": round(refit_seconds, 1)}
    if task == "classification":
        variants, verdicts = {}, {}
        for name, settings in GUARD_VARIANTS.items():
            chosen = final_ensemble(advisor, builder=ensemble, size=ensemble_size, seed=seed, **settings)
            variants[name] = test_error(chosen.refit(fit))
            verdicts[name] = (chosen.info or {}).get("guard")
        record.update(optdiv_variants=variants, optdiv_guard=verdicts)
    return record


def _done(path: Path) -> set:
    if not path.exists():
        return set()
    return {(r["dataset"], r["seed"], r["method"], r["iterations"])
            for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}


def summarise(records: Sequence[Dict]) -> str:
    """Mean +- std over seeds of the final ensemble's test error and of the suggestion time, per method."""
    if not records:
        return "(no results)"
    groups: Dict[tuple, List[Dict]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["method"]), []).append(r)
    lines = ["| dataset | method | seeds | iterations | test error (mean +- std) | suggestion s/iter "
             "(mean; last 10) | failed | changed by diversity |",
             "|---|---|---|---|---|---|---|---|"]
    order = {m: i for i, m in enumerate(METHODS)}
    for (dataset, method), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        err = np.array([float(r["test_error"]) if r["test_error"] != "" else np.nan for r in rs])
        std = float(np.std(err, ddof=1)) if len(err) > 1 else 0.0
        lines.append(
            f"| {dataset} | {method} | {len(rs)} | {rs[0]['iterations']} | {err.mean():.2f} +- {std:.2f} | "
            f"{np.mean([r['mean_suggest_seconds'] for r in rs]):.2f}; "
            f"{np.mean([r['mean_suggest_seconds_last10'] for r in rs]):.2f} | "
            f"{np.mean([r['failed'] for r in rs]):.1f} | {np.mean([r['changed_by_diversity'] for r in rs]):.1f} |")
    return "\n".join(lines)


#: (column label, method, record field) of the host table: OpenBox alone, its search with optdiv's final model,
#: and each diversity arm with optdiv's final model (OpenBox + optdiv as a user switches it on).
#: The option's default (OpenBox's own search, optdiv's final model), which the diversity re-ranking is paired with.
FINAL_COLUMN = "OpenBox + optdiv's final model"
HOST_COLUMNS = [("OpenBox alone", "openbox", "test_error"),
                ("OpenBox + optdiv's selection, not refitted", "openbox", "optdiv_unrefitted_test_error"),
                (FINAL_COLUMN, "openbox", "optdiv_test_error")] + [
    (f"OpenBox + {m} + optdiv's final model", m, "optdiv_test_error") for m in METHODS[1:]]


def host_table(records: Sequence[Dict]) -> str:
    """Per dataset the mean +- std of each HOST_COLUMNS column over the seeds every column has; then, per optdiv
    column, the pooled pairs lower / level / higher than OpenBox alone and the Wilcoxon p of the relative
    differences (level pairs dropped), and each diversity column against :data:`FINAL_COLUMN`.

    A (dataset, seed, method) recorded again in a later sitting is another run, not a replacement: the searches of
    one seed differ between sittings (time limits, failures), so both count, each paired within its own sitting."""
    from optdiv.bench.stats import relative_pairs_line

    sitting: Dict[tuple, int] = {}
    value = {}
    for r in records:
        key = (r["dataset"], r["seed"], r["method"])
        sitting[key] = sitting.get(key, -1) + 1
        for field in {c[2] for c in HOST_COLUMNS}:
            value[r["dataset"], (r["seed"], sitting[key]), r["method"], field] = r.get(field, "")
    columns = [c for c in HOST_COLUMNS if any(key[2:] == c[1:] and v != "" for key, v in value.items())]
    if len(columns) < 2:
        return "(no paired host runs)"
    datasets = sorted({r["dataset"] for r in records})
    seeds = sorted({key[1] for key in value})
    lines = ["| dataset | runs | " + " | ".join(c[0] for c in columns) + " |", "|---|---|" + "---|" * len(columns)]
    pairs: Dict[str, List[tuple]] = {c[0]: [] for c in columns[1:]}
    for dataset in datasets:
        common = [s for s in seeds if all(value.get((dataset, s) + c[1:], "") != "" for c in columns)]
        if not common:
            continue
        cells = []
        for label, method, field in columns:
            errors = np.array([float(value[dataset, s, method, field]) for s in common])
            std = float(np.std(errors, ddof=1)) if len(errors) > 1 else 0.0
            cells.append(f"{errors.mean():.4g} +- {std:.2g}")  # 4 digits: regression MSEs can be small
            if label in pairs:
                pairs[label] += [(float(value[dataset, s, method, field]),
                                  float(value[dataset, s, "openbox", "test_error"])) for s in common]
        lines.append(f"| {dataset} | {len(common)} | " + " | ".join(cells) + " |")
    for label, pair in pairs.items():
        if pair:
            lines.append("\n" + relative_pairs_line(f"{label} vs OpenBox alone", [a for a, _ in pair],
                                                     [b for _, b in pair]))
    final = pairs.get(FINAL_COLUMN, [])
    for label, method, _ in columns:  # the diversity re-ranking's own share: both sides end with the final model
        if method != "openbox" and pairs[label] and len(pairs[label]) == len(final):
            lines.append("\n" + relative_pairs_line(f"{label} vs {FINAL_COLUMN}", [a for a, _ in pairs[label]],
                                                     [a for a, _ in final]))
    return "\n".join(lines)


def with_unguarded(record: Dict) -> Dict:
    """``record`` with the selection without the guard among its variants, under ``"no guard"``: it is the default,
    recorded once as ``optdiv_test_error``."""
    variants = record.get("optdiv_variants")
    if not variants:
        return record
    return dict(record, optdiv_variants=dict(variants, **{"no guard": record["optdiv_test_error"]}))


def variants_table(records: Sequence[Dict]) -> str:
    """Per dataset the mean test error of OpenBox alone and of each recorded final-selection variant (``openbox``
    runs that have them) and how often the guard at :data:`GUARD_SHOWN` kept the selection on the metric; then each variant's
    pooled pairs against OpenBox alone and against the selection without the guard."""
    from optdiv.bench.stats import relative_pairs_line

    runs = [with_unguarded(r) for r in records if r["method"] == "openbox" and r.get("optdiv_variants")]
    if not runs:
        return "(no runs with final-selection variants)"
    names = ["no guard", *GUARD_VARIANTS]
    lines = ["| dataset | seeds | OpenBox alone | " + " | ".join(names) + f" | {GUARD_SHOWN} kept own |",
             "|---|---|---|" + "---|" * (len(names) + 1)]
    for dataset in sorted({r["dataset"] for r in runs}):
        rs = [r for r in runs if r["dataset"] == dataset]
        cells = [np.mean([r["test_error"] for r in rs])] + [np.mean([r["optdiv_variants"][n] for r in rs])
                                                            for n in names]
        switched = sum((r["optdiv_guard"].get(GUARD_SHOWN) or {}).get("kept") == "own" for r in rs)
        lines.append(f"| {dataset} | {len(rs)} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {switched} |")
    unguarded = [r["optdiv_variants"]["no guard"] for r in runs]
    for name in names:
        mine = [r["optdiv_variants"][name] for r in runs]
        lines.append("\n" + relative_pairs_line(f"{name} vs OpenBox alone", mine, [r["test_error"] for r in runs]))
        if name != "no guard":
            lines.append(relative_pairs_line(f"{name} vs no guard", mine, unguarded))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/openbox_compare.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="CSV paths (target column 'target' or the last one)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=100, help="evaluations per run")
    parser.add_argument("--space", default="autosklearn", choices=("autosklearn", "autogluon"))
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per evaluation")
    parser.add_argument("--initial-trials", type=int, default=5, help="OpenBox's initial design size")
    parser.add_argument("--ensemble", default="caruana", choices=("caruana", "agnostic_bayes"))
    parser.add_argument("--ensemble-size", type=int, default=25)
    parser.add_argument("--out", default=".cache/openbox_compare")
    args = parser.parse_args(argv)

    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    if args.initial_trials < 1:
        parser.error("--initial-trials must be at least 1")
    if any(s < 0 for s in args.seeds):
        parser.error("--seeds must be non-negative")
    if args.ensemble_size < 1:
        parser.error("--ensemble-size must be at least 1")
    if not args.time_limit > 0:
        parser.error("--time-limit must be positive")
    missing = [p for p in args.data if not Path(p).is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, iterations_csv = out / "results.jsonl", out / "iterations.csv"
    done = _done(results)
    new_file = not iterations_csv.exists() or iterations_csv.stat().st_size == 0
    if not new_file:
        with iterations_csv.open(newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != ITERATION_COLUMNS:
            parser.error(f"{iterations_csv} has other columns than this version writes; use a new --out")
    with iterations_csv.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=ITERATION_COLUMNS)
        if new_file:
            writer.writeheader()
        for path in args.data:
            dataset = load_dataset(path)
            name = Path(path).stem
            for seed in args.seeds:
                for method in args.methods:
                    if (name, seed, method, args.iterations) in done:
                        print(f"{name} seed {seed} {method}: already in {results}, skipped", flush=True)
                        continue
                    rows: List[Dict] = []
                    record = run_one(dataset, name, seed, method, args.iterations, args.space, args.time_limit,
                                     args.initial_trials, args.ensemble, args.ensemble_size,
                                     on_iteration=rows.append)
                    writer.writerows(rows)  # a run's rows are written once it has finished
                    fh.flush()
                    record.pop("trace")
                    with results.open("a") as rf:
                        rf.write(json.dumps(record) + "\n")
                    print(f"{name} seed {seed} {method}: test error {record['test_error']:.2f}, with optdiv's final "
                          f"model {record['optdiv_test_error']:.2f} "
                          f"({record['ensemble_members']} members, {record['failed']} failed, "
                          f"{record['changed_by_diversity']}/{record['diversity_steps']} suggestions changed by "
                          f"diversity, {record['mean_suggest_seconds']:.2f} s per suggestion, "
                          f"{record['wall_seconds']:.0f} s)", flush=True)
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    wanted = {Path(p).stem for p in args.data}
    table = summarise([r for r in records if r["dataset"] in wanted and r["method"] in args.methods
                       and r["seed"] in args.seeds and r["iterations"] == args.iterations])
    table += "\n\n" + host_table([r for r in records if r["dataset"] in wanted and r["seed"] in args.seeds
                                   and r["method"] in args.methods and r["iterations"] == args.iterations])
    table += "\n\n" + variants_table([r for r in records if r["dataset"] in wanted and r["seed"] in args.seeds
                                        and r["iterations"] == args.iterations])
    (out / "summary.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
