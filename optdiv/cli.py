"""The ``optdiv`` command: ``run`` a search, ``show`` its leaderboard and figures, ``predict`` with its saved
model, ``bench`` the papers' experiments, ``report`` their tables, ``demo`` the core."""

from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional

from optdiv import __version__


def _auto_or(convert, expected: str, valid=None, invalid: str = ""):
    """argparse type of an option that takes ``auto`` or a value: ``auto`` is kept as text, anything else goes
    through ``convert``, and ``valid`` (with ``invalid`` as its message) checks the result."""

    def parse(text: str):
        if text == "auto":
            return text
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}") from None
        if valid is not None and not valid(value):
            raise argparse.ArgumentTypeError(invalid)
        return value

    return parse


_evaluations = _auto_or(int, "a number of evaluations or 'auto'", lambda n: n >= 1,
                        "the budget is at least 1 evaluation")
_bags = _auto_or(int, "a number of bags or 'auto'", lambda n: n >= 0, "the number of bags cannot be negative")
_seconds_or_auto = _auto_or(float, "seconds or 'auto'", lambda s: s > 0, "the time limit must be positive")
_folds = _auto_or(lambda text: None if text == "none" else int(text), "a number of folds, 'auto' or 'none'")
_megabytes = _auto_or(lambda text: None if text == "none" else int(text), "megabytes, 'auto' or 'none'",
                     lambda mb: mb is None or mb > 0, "the memory limit must be positive")
_parallel = _auto_or(int, "a number of evaluations or 'auto'", lambda n: n >= 1,
                     "at least 1 evaluation runs at a time")
_rows = _auto_or(lambda text: None if text == "all" else int(text), "a number of rows, 'auto' or 'all'",
                 lambda n: n is None or n >= 20, "a search needs at least 20 rows")


def _share(text: str) -> float:
    """argparse type of ``--algorithm-share``: a share in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, not {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"the share must be in (0, 1]; got {text}")
    return value


def _constraint(text: str):
    """argparse type of ``--constraint``: a parsed Constraint, or argparse's error with the reason."""
    from optdiv.evaluation.constraints import Constraint

    try:
        return Constraint.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


CONSTRAINT_HELP = ("black-box constraint NAME<=X (also <, >=, >), repeatable; NAME: fit_seconds, predict_seconds "
                   "(validation prediction wall time), predict_us_per_row; violating runs are marked infeasible "
                   "and never enter the ensemble")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optdiv",
        description="Diversity-aware Bayesian optimisation (DivBO, OptDivBO) for ensemble CASH.",
    )
    parser.add_argument("--version", action="version", version=f"optdiv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="search a CASH space and build the final ensemble")
    run.add_argument("--data", required=True, help="file.csv, sklearn:NAME or openml:ID")
    run.add_argument("--target", help="target column of a CSV (default: 'target', else the last column)")
    run.add_argument("--task", default="auto", choices=["auto", "classification", "regression"])
    run.add_argument("--metric", help="error (default), log_loss, brier | mse (default), mae; or another name of "
                                       "one of them (accuracy, cross_entropy, rmse, r2, ...)")
    run.add_argument("--method", help="optdivbo, divbo, bo-es, rb-es, ... (`optdiv methods` lists all)")
    run.add_argument("--space", help="autosklearn, autosklearn+mlp (with a multi-layer perceptron), "
                                     "autosklearn+defaultmlp (the perceptron at its defaults only), "
                                     "autosklearn+defaultcatboost (CatBoost at its defaults only) or autogluon")
    run.add_argument("--budget", type=_evaluations, metavar="N|auto",
                     help="the most evaluations of the search; auto (default): as many as --time-budget allows, "
                          "50 without a time budget")
    run.add_argument("--time-budget", type=float,
                     help="wall-time budget in seconds of the whole run: loading, search, final model and saving")
    run.add_argument("--time-limit", type=_seconds_or_auto, metavar="SECONDS|auto",
                     help="wall-time limit of one evaluation's fit; with --cv K, of each fold's fit (so an "
                          "evaluation may take up to K x this in all). auto (default): a tenth of --time-budget, "
                          "between 10 and 120 s; 120 s without a time budget")
    run.add_argument("--memory-limit", type=_megabytes, metavar="MB|auto|none",
                     help="resident-memory limit of one evaluation's process; an evaluation past it fails (default: "
                          "auto, 3 GB or 1 GB + 4x the data, at most half this machine's memory over the "
                          "evaluations running at once)")
    run.add_argument("--search-rows", type=_rows, metavar="N|auto|all",
                     help="the most training rows an evaluation fits on, a sample taken once (the final members are "
                          "then refitted on every row as far as the time budget allows); auto (default): 250 per "
                          "second of --time-budget, at least 20,000; all without a time budget")
    run.add_argument("--n-jobs", type=int, metavar="N",
                     help="cores of the search (-1, the default: every core), shared out among the evaluations that "
                          "run at once (--parallel, or Dask's --workers) as their models' threads")
    run.add_argument("--parallel", type=_parallel, metavar="N|auto",
                     help="evaluations run side by side on this machine, each in its own process, no Dask needed "
                          "(auto, the default: one per core of --n-jobs; ignored with --workers/--scheduler)")
    parallel = run.add_mutually_exclusive_group()
    parallel.add_argument("--workers", type=int, metavar="N",
                          help="evaluate asynchronously on a local Dask cluster of N workers (needs optdiv[dask])")
    parallel.add_argument("--scheduler", metavar="ADDRESS", help="evaluate on the Dask cluster at ADDRESS")
    run.add_argument("--inject-faults", metavar="SPEC",
                     help="tests and demos: e.g. raise=0.3,hang=0.1,nan=0.05 makes that fraction of evaluations raise, "
                          "hang past --time-limit or predict NaN (deterministic per seed and evaluation)")
    run.add_argument("--ensemble", choices=["caruana", "agnostic_bayes", "amin", "smin"],
                     help="final ensemble builder of the ensemble methods")
    run.add_argument("--sampler",
                     choices=["bootstrap", "bayesian_bootstrap", "dirichlet", "student_t"],
                     help="Agnostic Bayes posterior sampler (dirichlet needs 0/1 loss)")
    run.add_argument("--pool", choices=["caruana", "agnostic_bayes"],
                     help="how DivBO / OptDivBO build their temporary pool")
    run.add_argument("--vote", action="store_true", help="classification: weighted majority vote, not averaged probabilities")
    run.add_argument("--ensemble-size", type=int)
    run.add_argument("--ensemble-loss", metavar="METRIC",
                     help="what the final ensemble selection minimises: auto (log_loss for 0/1 error, else the "
                          "metric: measured to over-fit the validation rows least), or a metric name")
    run.add_argument("--ensemble-bags", type=_bags, metavar="N",
                     help="average N ensemble selections on bootstrap samples of the validation rows: auto (20 "
                          "for regression, 0 for classification) or a number (0: one selection)")
    run.add_argument("--refit", action=argparse.BooleanOptionalAction,
                     help="refit the members on train+validation, heaviest first as far as the time budget allows "
                          "(default; --no-refit keeps them fitted on the training rows)")
    run.add_argument("--cv", type=_folds, metavar="K|auto|none",
                     help="evaluate by K-fold cross-validation over train+validation (out-of-fold predictions; "
                          "Agnostic Bayes's rho is tuned) instead of the holdout validation split (none); "
                          "--time-limit then applies to each fold. auto (default): 5 folds on at most 4,000 "
                          "train+validation rows, else the holdout split")
    run.add_argument("--fold-models", choices=["refit", "bagged"],
                     help="under --cv: keep each member's fold models and average them (bagged, default: the "
                          "models the ensemble was chosen on, no refit), or refit each member once on all rows")
    run.add_argument("--algorithm-share", type=_share, metavar="S",
                     help="after the initial design, no algorithm may take more than this share (0-1) of the "
                          "evaluations: the search then tunes the others (BO-family methods; default: no cap)")
    run.add_argument("--portfolio", metavar="auto|defaults|builtin|none|FILE",
                     help="warm start: evaluate these configurations first instead of random ones (defaults: each "
                          "strong algorithm at its library's defaults; builtin: the portfolio shipped for the space "
                          "and task; none: a random start; BO-family methods only). auto (default): defaults for "
                          "the BO-family methods on a built-in space, else none")
    run.add_argument("--cost-aware", action="store_true",
                     help="under --time-budget, prefer at equal promise configurations predicted to fit the time "
                          "left (BO-family methods)")
    run.add_argument("--constraint", action="append", type=_constraint, metavar="NAME<=X", help=CONSTRAINT_HELP)
    run.add_argument("--seed", type=int)
    run.add_argument("--out", help="run directory for the log, predictions, result.json and model.joblib")
    run.add_argument("--resume", action="store_true", help="continue the run stored in --out")
    run.set_defaults(**_product_defaults(run))  # the one place: RunConfig.product()
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    show = sub.add_parser("show", help="leaderboard and figures of one run directory (finished, running or killed)")
    show.add_argument("run_dir", metavar="RUN_DIR", help="the --out directory of `optdiv run`")
    show.add_argument("--out", metavar="DIR", help="folder for the figures (default: RUN_DIR)")
    show.add_argument("--no-figures", action="store_true", help="print the leaderboard only")
    show.add_argument("--top", type=int, metavar="N", help="print only the N best evaluations")
    show.add_argument("--dpi", type=int, default=100, help="resolution of the PNG figures (default 100)")

    predict = sub.add_parser("predict", help="predict with a saved model.joblib")
    predict.add_argument("model")
    predict.add_argument("data", help="CSV with the training columns (a target column is ignored)")
    predict.add_argument("--output", help="write predictions to this CSV instead of printing them")
    predict.add_argument("--proba", action="store_true", help="class probabilities instead of labels")

    bench = sub.add_parser("bench", help="run methods x datasets x seeds (live or replay) into results.csv")
    bench.add_argument("--datasets", required=True, help="a folder of CSVs, or comma-separated CSV paths / names")
    bench.add_argument("--data-dir", help="folder that dataset names are looked up in (NAME.csv)")
    bench.add_argument("--methods", required=True, help="comma-separated method names")
    bench.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,5")
    bench.add_argument("--budget", type=int, default=250, help="evaluations per run")
    bench.add_argument("--library", type=int, help="replay mode: search a cached library of N random configurations")
    bench.add_argument("--cache", default=".cache", help="where replay libraries are kept (default .cache)")
    bench.add_argument("--regression-metrics", default="mse,mae", help="metrics of regression datasets")
    bench.add_argument("--time-limit", type=float, default=120.0, help="live mode: wall-time limit of one evaluation")
    bench.add_argument("--space", default="autosklearn")
    bench.add_argument("--jobs", type=int, default=1, help="searches run in parallel processes")
    bench.add_argument("--workers", type=int, metavar="N",
                       help="each live search, or each replay library being built, evaluates on a local Dask "
                            "cluster of N workers (optdiv[dask])")
    bench.add_argument("--trace-every", type=int, default=10, help="evaluations between trace checkpoints")
    bench.add_argument("--build-only", action="store_true", help="replay mode: build the libraries and stop")
    bench.add_argument("--constraint", action="append", type=_constraint, metavar="NAME<=X", help=CONSTRAINT_HELP)
    bench.add_argument("--out", required=True, help="bench directory (resumable: finished runs are kept)")

    report = sub.add_parser("report", help="write report.md (tables, Wilcoxon, figures) for a bench directory")
    report.add_argument("directory")
    report.add_argument("--reference", default="optdivbo", help="method the Wilcoxon counts compare against")
    report.add_argument("--methods", help="comma-separated row order (default: the papers' order)")
    report.add_argument("--only", help="comma-separated methods to tabulate (default: all); ranks are among them")
    report.add_argument("--output", help="file to write (default: DIRECTORY/report.md)")
    report.add_argument("--focus", default="quake", help="dataset of the ensemble-diversity heatmap")
    report.add_argument("--at", default="", help="also tabulate the test loss after these evaluations, e.g. 50,100")
    report.add_argument("--no-figures", action="store_true")
    report.add_argument("--paper-numbers", metavar="FILE.json",
                        help="published numbers to print as [paper X] beside ours: JSON metric -> method -> dataset "
                             "-> [mean, std] (a checkout's `python benchmarks/paper.py export FILE.json` writes the "
                             "papers'); without it the tables print none")

    sub.add_parser("methods", help="list the methods and what each one is")

    demo = sub.add_parser("demo", help="ensembles over a model library on breast_cancer (no download)")
    demo.add_argument("--seed", type=int, default=0)
    return parser


class ProgressBar:
    """A one-line text progress bar on stderr; no dependency, safe when stderr is not a terminal."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream = stream
        self.width = width
        self.best = float("inf")
        self.failed = 0
        self.infeasible = 0

    def __call__(self, done: int, total: Optional[int], obs) -> None:
        if obs.status == "ok":
            self.best = min(self.best, obs.val_loss)
        elif obs.status == "infeasible":
            self.infeasible += 1
        else:
            self.failed += 1
        frac = done / total if total else 0.0
        filled = int(self.width * frac)
        bar = "#" * filled + "-" * (self.width - filled)
        of = f"/{total}" if total else ""
        infeasible = f" infeasible {self.infeasible}" if self.infeasible else ""
        line = (f"\r[{bar}] {done}{of} best val {self.best:.4f} failed {self.failed}{infeasible} "
                f"last {obs.algorithm}")
        self.stream.write(line[:120].ljust(120))
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


#: ``optdiv run`` flags whose names differ from the RunConfig field they set.
_FLAG_OF = {"constraints": "constraint", "faults": "inject_faults", "memory_limit_mb": "memory_limit"}


def _product_defaults(parser) -> dict:
    """``optdiv run``'s defaults: :meth:`RunConfig.product`'s value of every option the parser has a flag for."""
    from optdiv.config import RunConfig

    flags = {action.dest for action in parser._actions}
    product = RunConfig.product()
    return {_FLAG_OF.get(name, name): getattr(product, name) for name in RunConfig.names()
            if _FLAG_OF.get(name, name) in flags and name not in _LISTS}


#: RunConfig fields whose flags collect values (repeatable) and so start from argparse's own None.
_LISTS = ("constraints",)


def run_config_from_args(args):
    """The RunConfig of ``optdiv run``'s parsed flags (every field the command offers)."""
    from optdiv.config import RunConfig

    given = {name: getattr(args, _FLAG_OF.get(name, name)) for name in RunConfig.names()
             if hasattr(args, _FLAG_OF.get(name, name))}
    return RunConfig(**given)


def _run(args, started: float) -> int:
    from optdiv.engine.run import run

    bar = None if args.quiet else ProgressBar()
    try:
        _, summary = run(args.data, target=args.target, task=args.task, out=args.out, resume=args.resume,
                         config=run_config_from_args(args), progress=bar, started=started)
    finally:
        if bar is not None:
            bar.close()
    if summary.get("final") == "stacking":
        members = "meta-model over " + ", ".join(m["algorithm"] for m in summary["ensemble"])
    else:
        members = ", ".join(f"{m['algorithm']} x{m['weight']:.2f}" for m in summary["ensemble"])
    infeasible = f", {summary['n_infeasible']} infeasible" if summary.get("constraints") else ""
    evaluation = ""
    if summary.get("cv"):  # out-of-fold validation error, and Agnostic Bayes's tuned rho when it was used
        rho = f", rho {summary['rho']:.3f}" if summary.get("rho") is not None else ""
        evaluation = f" ({summary['evaluation']}{rho})"
    print(
        f"{summary['method']} on {summary['dataset']} ({summary['task']}, {summary['metric']}): "
        f"{summary['n_evaluations']} evaluations, {summary['n_failed']} failed{infeasible}; "
        f"val{evaluation} {summary['val_error']:.4f}, test {summary['test_error']:.4f}; ensemble: {members}"
    )
    if args.out:
        print(f"wrote {args.out}/result.json and {args.out}/model.joblib")
    return 0


def _show(args) -> int:
    from optdiv.show import plotting
    from optdiv.show.view import format_leaderboard, read_run, write_figures

    view = read_run(args.run_dir)
    print(format_leaderboard(view, top=args.top))
    notes = list(view.notes)
    if not args.no_figures:
        if plotting.available():
            written, left_out = write_figures(view, args.out or args.run_dir, dpi=args.dpi)
            notes += left_out
            if written:
                print("wrote " + ", ".join(str(path) for path in written))
        else:
            print(f"optdiv: {plotting.MISSING_MATPLOTLIB}", file=sys.stderr)
    for note in dict.fromkeys(notes):  # each said once
        print(f"note: {note}")
    return 0


def _predict(args) -> int:
    import joblib
    import numpy as np
    import pandas as pd

    model = joblib.load(args.model)
    frame = pd.read_csv(args.data)
    extra = [c for c in frame.columns if c not in model.columns]
    if extra:  # e.g. the target column of a labelled file
        print(f"optdiv: ignoring columns the model was not trained on: {', '.join(map(str, extra))}", file=sys.stderr)
        frame = frame.drop(columns=extra)
    if args.proba:
        out = pd.DataFrame(model.predict_proba(frame), columns=[f"proba_{c}" for c in model.classes_])
    else:
        out = pd.DataFrame({"prediction": np.asarray(model.predict(frame))})
    if args.output:
        out.to_csv(args.output, index=False)
        print(f"wrote {len(out)} predictions to {args.output}")
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def _bench(args) -> int:
    from optdiv.bench.harness import Bench, parse_seeds, resolve_datasets

    bench = Bench(
        datasets=resolve_datasets(args.datasets, args.data_dir),
        methods=[m.strip() for m in args.methods.split(",") if m.strip()],
        seeds=parse_seeds(args.seeds),
        out=args.out,
        budget=args.budget,
        library=args.library,
        cache=args.cache,
        regression_metrics=[m.strip() for m in args.regression_metrics.split(",") if m.strip()],
        time_limit=args.time_limit,
        space=args.space,
        trace_every=args.trace_every,
        constraints=[str(c) for c in args.constraint or []],
        workers=args.workers,
    )
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    if args.build_only:
        if args.library is None:
            raise ValueError("--build-only needs --library N")
        bench.build_libraries(args.jobs, say)
        return 0
    path = bench.run(jobs=args.jobs, progress=say)
    print(f"wrote {path}")
    return 0


def _report(args) -> int:
    from optdiv.bench.report import write_report
    from optdiv.show import plotting

    figures = not args.no_figures
    if figures and not plotting.available():
        print(f"optdiv: report.md without figures: {plotting.MISSING_MATPLOTLIB}", file=sys.stderr)
        figures = False

    methods = [m.strip() for m in args.methods.split(",")] if args.methods else None
    only = [m.strip() for m in args.only.split(",") if m.strip()] if args.only else None
    at = [int(x) for x in args.at.split(",") if x.strip()]
    path = write_report(args.directory, methods=methods, reference=args.reference, focus=args.focus,
                        figures=figures, at=at, only=only, output=args.output,
                        paper_numbers=args.paper_numbers)
    print(f"wrote {path}")
    return 0


def _methods() -> int:
    from optdiv.strategies.methods import METHODS

    width = max(len(name) for name in METHODS)
    for name, spec in METHODS.items():
        print(f"{name.ljust(width)}  {spec.description}")
    return 0


def _user_errors() -> tuple:
    """Errors that are the user's to fix, printed as one line. Imported only when something went wrong, so a
    command that needs neither the engine nor Dask (``show``, ``report``, ``methods``) does not load them."""
    from optdiv.evaluation.constraints import InfeasibleSearchError
    from optdiv.execution.dask_runner import DaskUnavailable

    return (ValueError, FileNotFoundError, FileExistsError, InfeasibleSearchError, DaskUnavailable)


def main(argv: Optional[List[str]] = None) -> int:
    started = time.perf_counter()  # run's --time-budget counts the imports (seconds on a busy machine) too
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _run(args, started)
        if args.command == "show":
            return _show(args)
        if args.command == "predict":
            return _predict(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "report":
            return _report(args)
        if args.command == "methods":
            return _methods()
        if args.command == "demo":
            from optdiv.bench.demo import format_demo, run_demo

            print(format_demo(run_demo(seed=args.seed)))
            return 0
    except Exception as exc:
        if not isinstance(exc, _user_errors()):
            raise
        print(f"optdiv: error: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
