"""`optdiv report DIR`: the papers' tables and figures from a bench directory's results.csv and traces.

Writes ``DIR/report.md`` (and PNG figures when matplotlib is installed):
- one table per metric in the papers' layout: methods as rows, datasets as columns, mean +- std over
  seeds of the test loss (classification error in %), the best mean in bold and the average rank; given
  ``paper_numbers`` (a JSON file), the published number beside ours where it has the same dataset and method;
- Wilcoxon signed-rank better/same/worse counts of a reference method against every other one;
- figures: average rank over iterations (DivBO Fig. 3), validation curves, minimum diversity of the
  suggestions (DivBO Fig. 5) and the final ensemble's pairwise diversity (DivBO Fig. 6).
The mode (live or replay) of every number is stated in the report.

The published numbers are research data, not part of the package: a checkout's ``benchmarks/paper.py export
FILE.json`` writes the papers' in the form :func:`load_paper_numbers` reads.
"""

from __future__ import annotations

import csv
import json
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from optdiv.bench.layout import run_dir
from optdiv.bench.provenance import provenance_lines
from optdiv.bench.stats import average_ranks, better_same_worse, lower_tie_higher, paired_p, strictly_lower
from optdiv.storage.layout import BENCH_NAME, RESULT_NAME, RESULTS_NAME, TRACE_NAME

METRIC_TITLES = {"error": "Classification test error (%)", "mse": "Regression test MSE", "mae": "Regression test MAE"}
VALIDATION_TITLES = {"error": "validation error (%)", "mse": "validation MSE", "mae": "validation MAE"}
FOCUS_METHODS = ("bo-es", "rb-es", "divbo", "optdivbo")
#: Row order of the tables: the papers' order, then the variants.
PAPER_ORDER = ("rs", "bo", "tpe", "rb", "eo", "nes", "rs-es", "bo-es", "bo-es100", "rb-es", "kbo-es", "divbo-", "divbo",
               "divbo-w0.1", "divbo-b0.01", "divbo-bagging", "divbo-stacking", "bo-ab", "bo-smin", "tpe-es", "dac-hb",
               "dac-hb-es", "dac-hh", "dac-hh-es", "dac-sb", "dac-sb-es", "dac-sh", "dac-sh-es", "admm", "admm-es",
               "divbo-dac", "optdivbo-", "optdivbo", "optdivbo-ab", "optdivbo-dac")

#: Published (mean, std) per metric and (method, dataset), in the report's units (error in %).
PaperNumbers = Dict[str, Dict[Tuple[str, str], Tuple[float, float]]]


def load_paper_numbers(path) -> PaperNumbers:
    """Read a JSON file mapping metric -> method -> dataset -> [mean, std] (what ``benchmarks/paper.py export``
    writes); a malformed file is a ValueError naming it, so a typo never silently drops the brackets."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    shape = "a JSON object metric -> method -> dataset -> [mean, std]"
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {shape}")
    numbers: PaperNumbers = {}
    for metric, methods in data.items():
        if not isinstance(methods, dict):
            raise ValueError(f"{path}: {metric!r}: expected {shape}")
        cells = numbers.setdefault(metric, {})
        for method, datasets in methods.items():
            if not isinstance(datasets, dict):
                raise ValueError(f"{path}: {metric!r} / {method!r}: expected {shape}")
            for dataset, cell in datasets.items():
                if not (isinstance(cell, list) and len(cell) == 2
                        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cell)):
                    raise ValueError(f"{path}: {metric!r} / {method!r} / {dataset!r}: expected [mean, std], "
                                     f"not {cell!r}")
                cells[(method, dataset)] = (float(cell[0]), float(cell[1]))
    return numbers


def read_results(directory: Path) -> List[Dict]:
    path = Path(directory) / RESULTS_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run `optdiv bench --out {directory}` first")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key in ("best_val_error", "val_error", "test_error", "wall_seconds", "optimizer_seconds"):
            row[key] = float(row[key])
        row["seed"] = int(row["seed"])
    return rows


def scale(metric: str) -> float:
    return 100.0 if metric == "error" else 1.0


def _fmt(value: float, metric: str) -> str:
    if not np.isfinite(value):
        return "-"
    if metric == "error":
        return f"{value:.2f}"
    return f"{value:.4g}"


def format_cell(mean: float, std: float, metric: str) -> str:
    """Mean ± std with the std at the mean's decimals (4 significant digits of the mean; 2 decimals of %), so
    float noise in a constant cell reads as 0 and the two numbers line up."""
    if not np.isfinite(mean):
        return "-"
    if metric == "error":
        decimals = 2
    else:
        decimals = 3 if mean == 0 else max(0, 3 - int(np.floor(np.log10(abs(mean)))))
    return f"{mean:.{decimals}f} ± {abs(std):.{decimals}f}"


def _order(values: Sequence[str], preferred: Optional[Sequence[str]]) -> List[str]:
    seen = list(dict.fromkeys(values))
    if not preferred:
        return seen
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


def results_table(rows: List[Dict], metric: str, methods: Optional[Sequence[str]] = None,
                  value: str = "test_error") -> Dict:
    """Per (method, dataset): the seeds' values (scaled to the report's units)."""
    cells: Dict[str, Dict[str, Dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        if row["metric"] == metric:
            cells[row["method"]][row["dataset"]][row["seed"]] = row[value] * scale(metric)
    order = _order([r["method"] for r in rows if r["metric"] == metric], methods or PAPER_ORDER)
    datasets = sorted({r["dataset"] for r in rows if r["metric"] == metric}, key=str.lower)
    return {"methods": order, "datasets": datasets, "cells": cells}


def markdown_table(table: Dict, metric: str,
                   paper: Optional[Mapping[Tuple[str, str], Tuple[float, float]]] = None) -> str:
    """``paper``: published (mean, std) per (method, dataset) of this metric, printed as ``[paper X]``."""
    methods, datasets, cells = table["methods"], table["datasets"], table["cells"]
    means = {d: {m: float(np.mean(list(cells[m][d].values()))) for m in methods if cells[m].get(d)} for d in datasets}
    ranks = average_ranks(means, methods)
    best = {d: min(row.values()) for d, row in means.items() if row}
    lines = ["| method | " + " | ".join(datasets) + " | avg rank |", "|---" * (len(datasets) + 2) + "|"]
    for m in methods:
        parts = []
        for d in datasets:
            seeds = cells[m].get(d)
            if not seeds:
                parts.append("-")
                continue
            values = np.array(list(seeds.values()))
            text = format_cell(values.mean(), values.std(ddof=1) if len(values) > 1 else 0.0, metric)
            if np.isclose(values.mean(), best[d]):
                text = f"**{text}**"
            if len(values) < max(len(cells[x].get(d, {})) for x in methods):
                text += f" (n={len(values)})"
            published = paper.get((m, d)) if paper else None
            if published is not None:
                text += f" [paper {_fmt(published[0], metric)}]"
            parts.append(text)
        rank = ranks.get(m, float("nan"))
        lines.append(f"| {m} | " + " | ".join(parts) + f" | {rank:.2f} |" if np.isfinite(rank) else
                     f"| {m} | " + " | ".join(parts) + " | - |")
    return "\n".join(lines)


def wilcoxon_table(table: Dict, reference: str, alpha: float = 0.05) -> str:
    methods, datasets, cells = table["methods"], table["datasets"], table["cells"]
    if reference not in methods:
        return f"(no runs of the reference method {reference!r})"
    lines = [f"| {reference} vs | better | same | worse | datasets | seeds lower / tie / higher | p per dataset |",
             "|---|---|---|---|---|---|---|"]
    for m in methods:
        if m == reference:
            continue
        paired = {}
        for d in datasets:
            common = sorted(set(cells[reference].get(d, {})) & set(cells[m].get(d, {})))
            if common:
                paired[d] = ([cells[reference][d][s] for s in common], [cells[m][d][s] for s in common])
        b, s, w = better_same_worse(paired, alpha)
        pairs = np.sum([lower_tie_higher(*both) for both in paired.values()], axis=0).astype(int) if paired \
            else (0, 0, 0)
        p_values = ", ".join(f"{d} {paired_p(*both):.3f}" for d, both in paired.items())
        lines.append(f"| {m} | {b} | {s} | {w} | {len(paired)} | {pairs[0]} / {pairs[1]} / {pairs[2]} | {p_values} |")
    return "\n".join(lines)


def transfer_table(val_table: Dict, test_table: Dict, reference: str) -> str:
    """Whether the reference's lower validation loss carries over to test, pair by pair, against each method.

    A search that optimises the ensemble's validation loss can win there and not on test (a small validation
    split fitted by ensemble selection); this separates "the search failed" from "its gain did not transfer".
    """
    methods, datasets = test_table["methods"], test_table["datasets"]
    vals, tests = val_table["cells"], test_table["cells"]
    if reference not in methods:
        return f"(no runs of the reference method {reference!r})"
    lines = [f"| {reference} vs | validation lower / tie / higher | test lower / tie / higher | "
             "lower on validation and on test |", "|---|---|---|---|"]
    for m in methods:
        if m == reference:
            continue
        val_counts, test_counts, both = np.zeros(3, int), np.zeros(3, int), 0
        for d in datasets:
            common = sorted(set(tests[reference].get(d, {})) & set(tests[m].get(d, {})))
            if not common:
                continue
            ours_val = np.array([vals[reference][d][s] for s in common])
            theirs_val = np.array([vals[m][d][s] for s in common])
            ours_test = np.array([tests[reference][d][s] for s in common])
            theirs_test = np.array([tests[m][d][s] for s in common])
            val_counts += lower_tie_higher(ours_val, theirs_val)
            test_counts += lower_tie_higher(ours_test, theirs_test)
            both += int(np.sum(strictly_lower(ours_val, theirs_val) & strictly_lower(ours_test, theirs_test)))
        lines.append(f"| {m} | {' / '.join(map(str, val_counts))} | {' / '.join(map(str, test_counts))} | "
                     f"{both} of {val_counts[0]} |")
    return "\n".join(lines)


def validation_test_correlation(val_table: Dict, test_table: Dict) -> Dict[str, float]:
    """Per dataset, Pearson r between the methods' mean validation and mean test loss (NaN under 3 methods)."""
    found = {}
    for d in test_table["datasets"]:
        pairs = [(np.mean(list(val_table["cells"][m][d].values())), np.mean(list(test_table["cells"][m][d].values())))
                 for m in test_table["methods"] if test_table["cells"][m].get(d) and val_table["cells"][m].get(d)]
        if len(pairs) < 3:
            found[d] = float("nan")
            continue
        v, t = np.array(pairs).T
        found[d] = float(np.corrcoef(v, t)[0, 1]) if v.std() > 0 and t.std() > 0 else float("nan")
    return found


def read_traces(directory: Path) -> Dict:
    """traces[(dataset, metric, method)][seed] = rows of trace.csv."""
    traces: Dict = defaultdict(dict)
    for path in Path(directory).glob(f"runs/*/*/*/seed-*/{TRACE_NAME}"):
        seed = int(path.parent.name.split("-", 1)[1])
        method, metric, dataset = path.parent.parent.name, path.parent.parent.parent.name, \
            path.parent.parent.parent.parent.name
        with open(path, newline="") as fh:
            traces[(dataset, metric, method)][seed] = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
    return traces


def mean_curve(by_seed: Dict[int, List[Dict]], column: str):
    """(iterations, mean over seeds) on the iterations every seed has."""
    common = None
    for rows in by_seed.values():
        its = {int(r["iteration"]) for r in rows}
        common = its if common is None else common & its
    iterations = sorted(common or [])
    values = []
    for it in iterations:
        vals = [r[column] for rows in by_seed.values() for r in rows if int(r["iteration"]) == it]
        vals = [v for v in vals if np.isfinite(v)]
        values.append(np.mean(vals) if vals else np.nan)
    return np.array(iterations), np.array(values)


def rank_over_iterations(traces: Dict, metric: str, methods: Sequence[str]):
    """(iterations, {method: average rank of its final-model validation loss across datasets})."""
    datasets = sorted({d for (d, m, _) in traces if m == metric})
    curves = {}
    for d in datasets:
        per = {meth: mean_curve(traces[(d, metric, meth)], "val") for meth in methods if (d, metric, meth) in traces}
        if len(per) == len(methods):
            curves[d] = per
    if not curves:
        return np.array([]), {}
    iterations = sorted(set.intersection(*[set(c[0].tolist()) for per in curves.values() for c in per.values()]))
    from scipy.stats import rankdata

    out = {m: [] for m in methods}
    for it in iterations:
        ranks = []
        for per in curves.values():
            vals = [per[m][1][list(per[m][0]).index(it)] for m in methods]
            ranks.append(rankdata(vals, method="average"))
        mean_rank = np.nanmean(np.array(ranks), axis=0)
        for m, r in zip(methods, mean_rank):
            out[m].append(r)
    return np.array(iterations), {m: np.array(v) for m, v in out.items()}


def write_figures(directory: Path, traces: Dict, tables: Dict[str, Dict], focus: Optional[str]) -> List[str]:
    """The report's PNG figures in ``directory``; their names. Every axis is labelled, legends sit beside the
    plots, and the diversity heatmaps name their members and say what the colour measures. Raises
    :class:`~optdiv.show.plotting.PlottingUnavailable` without matplotlib."""
    from optdiv.show.plotting import integer_ticks, new_figure, save_png

    directory = Path(directory)
    figures = []
    for metric, table in tables.items():
        methods = table["methods"]
        iterations, ranks = rank_over_iterations(traces, metric, methods)
        if len(iterations):
            fig = new_figure(8.5, 4)
            ax = fig.add_subplot()
            for number, m in enumerate(methods):
                ax.plot(iterations, ranks[m], label=m, **_line_style(number))
            ax.set_xlabel("evaluations")
            ax.set_ylabel("average rank over datasets\n(validation loss of the final model; 1 = best)")
            integer_ticks(ax.xaxis)
            ax.legend(fontsize=7, ncol=1 + len(methods) // 14, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            name = f"rank_over_iterations_{metric}.png"
            fig.tight_layout()
            save_png(fig, directory / name, dpi=110)
            figures.append(name)
        datasets = table["datasets"]
        cols = min(4, len(datasets))
        rows_n = int(np.ceil(len(datasets) / cols))
        loss_label = VALIDATION_TITLES[metric]
        for column, label, stem in ((("val", f"{loss_label}\nof the final model", "validation_curves"),
                                     ("min_diversity", "min DivBO diversity of the\nsuggestions to the pool "
                                                       "(higher = more different)", "min_diversity"))):
            fig = new_figure(4 * cols + 1.6, 3 * rows_n + 0.4)
            axes = fig.subplots(rows_n, cols, squeeze=False)
            for ax, d in zip(axes.ravel(), datasets):
                for number, m in enumerate(methods):
                    if (d, metric, m) in traces:
                        x, y = mean_curve(traces[(d, metric, m)], column)
                        ax.plot(x, y * (scale(metric) if column == "val" else 1.0), label=m, **_line_style(number))
                ax.set_title(d, fontsize=9)
                ax.set_xlabel("evaluations", fontsize=8)
                integer_ticks(ax.xaxis)
            for ax in axes.ravel()[len(datasets):]:
                ax.axis("off")
            for row in axes:
                row[0].set_ylabel(label, fontsize=8)
            handles = {}
            for ax in axes.ravel():  # every method once, whichever panel drew it
                for handle, text in zip(*ax.get_legend_handles_labels()):
                    handles.setdefault(text, handle)
            if handles:
                fig.legend(list(handles.values()), list(handles), fontsize=7, loc="upper left",
                           bbox_to_anchor=(1 - 1.5 / (4 * cols + 1.6), 0.98), frameon=False)
            name = f"{stem}_{metric}.png"
            fig.tight_layout(rect=(0, 0, 1 - 1.6 / (4 * cols + 1.6), 1))
            save_png(fig, directory / name, dpi=90)
            figures.append(name)
        target = focus if focus in datasets else (datasets[0] if datasets else None)
        shown = [m for m in methods if m in FOCUS_METHODS] or methods[:4]
        runs = []
        for m in shown:
            path = run_dir(directory, target, metric, m, 0) / RESULT_NAME
            if path.exists():
                saved = json.loads(path.read_text())
                matrix = np.array(saved["member_diversity"], dtype=float)
                if matrix.size:
                    names = [f"#{i} {a}" for i, a in zip(saved.get("members") or [], saved.get("algorithms") or [])]
                    runs.append((m, matrix, names if len(names) == len(matrix) else
                                 [f"#{i}" for i in range(len(matrix))]))
        if runs:
            name = f"ensemble_diversity_{target}_{metric}.png"
            _diversity_heatmaps(runs, target, directory / name)
            figures.append(name)
    return figures


def _line_style(number: int) -> Dict:
    """The colour and dash of the ``number``-th method's line: matplotlib's ten colours, then dashed, dotted ...,
    so a report of more than ten methods never draws two alike."""
    return {"color": f"C{number % 10}", "linestyle": ("-", "--", ":", "-.")[(number // 10) % 4]}


def _diversity_heatmaps(runs: List[Tuple[str, np.ndarray, List[str]]], dataset: str, path: Path) -> None:
    """One heatmap per method of its final members' DivBO diversity (seed 0), on one colour scale so the panels
    compare; members named ``#index algorithm``, the diagonal (a member with itself) left blank."""
    from optdiv.show.plotting import new_figure, save_png

    largest = max(len(matrix) for _, matrix, _ in runs)
    side = max(3.6, 0.3 * largest + 2.4)
    fig = new_figure(side * len(runs) + 1.2, side + 0.3, constrained=True)
    axes = fig.subplots(1, len(runs), squeeze=False)[0]
    off_diagonal = [matrix[~np.eye(len(matrix), dtype=bool)] for _, matrix, _ in runs]
    top = max((float(np.max(values)) for values in off_diagonal if values.size), default=0.0) or 1.0
    image = None
    for ax, (m, matrix, names) in zip(axes, runs):
        shown = matrix.copy()
        np.fill_diagonal(shown, np.nan)
        image = ax.imshow(np.ma.masked_invalid(shown), cmap="viridis", vmin=0, vmax=top)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=6)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=6)
        ax.set_title(f"{m} ({dataset}, seed 0): {len(names)} members", fontsize=8)
        ax.set_xlabel("member: #evaluation algorithm", fontsize=7)
    axes[0].set_ylabel("member: #evaluation algorithm", fontsize=7)
    bar = fig.colorbar(image, ax=list(axes), shrink=0.8)
    bar.set_label("DivBO diversity: how differently two members predict\n(higher = more different, "
                  "0 = identical; diagonal left blank)", fontsize=7)
    save_png(fig, path, dpi=100)


def algorithm_spread(suggested: Sequence[str], ensemble: Sequence[str]) -> tuple:
    """(share of the evaluations spent on the most-evaluated algorithm, distinct algorithms in the final
    ensemble): how far a search concentrated, which the test loss alone does not show."""
    if not suggested:
        return float("nan"), len(set(ensemble))
    return Counter(suggested).most_common(1)[0][1] / len(suggested), len(set(ensemble))


def read_run_results(directory: Path, rows: List[Dict]) -> List[Optional[Dict]]:
    """Each row's result.json, parsed once per report (None where the run left none); parallel to ``rows``."""
    results = []
    for r in rows:
        path = run_dir(directory, r["dataset"], r["metric"], r["method"], r["seed"]) / RESULT_NAME
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return results


def spread_line(rows: List[Dict], results: Sequence[Optional[Dict]], methods: Sequence[str]) -> str:
    """Per method, the mean algorithm spread over its runs (``results``: their result.json, parallel to ``rows``);
    "" without results."""
    shares, distinct = defaultdict(list), defaultdict(list)
    for r, result in zip(rows, results):
        if result is None:
            continue
        share, count = algorithm_spread(result.get("suggested_algorithms") or [], result.get("algorithms") or [])
        shares[r["method"]].append(share)
        distinct[r["method"]].append(count)
    if not shares:
        return ""
    return ("Algorithm spread (mean over runs): share of the evaluations on the most-evaluated algorithm / distinct "
            "algorithms in the final ensemble: " + ", ".join(
                f"{m} {np.nanmean(shares[m]):.2f} / {np.mean(distinct[m]):.1f}" for m in methods if shares[m]))


def rows_at(traces: Dict, iteration: int) -> List[Dict]:
    """Result-like rows holding each run's final-model losses after ``iteration`` evaluations (from its trace)."""
    rows = []
    for (dataset, metric, method), by_seed in traces.items():
        for seed, trace in by_seed.items():
            hit = [r for r in trace if int(r["iteration"]) == iteration]
            if hit:
                rows.append({"dataset": dataset, "metric": metric, "method": method, "seed": seed,
                             "test_error": hit[0]["test"], "val_error": hit[0]["val"]})
    return rows


def write_report(directory, methods: Optional[Sequence[str]] = None, reference: str = "optdivbo",
                 focus: Optional[str] = "quake", figures: bool = True, at: Sequence[int] = (),
                 only: Optional[Sequence[str]] = None, output: Optional[Path] = None,
                 paper_numbers=None) -> Path:
    """``at``: also tabulate the test loss after these numbers of evaluations (read from the traces), where a
    replay library is not yet mostly explored and the methods' choices differ more. ``only``: tabulate just these
    methods (ranks are then among them), so a short table for a document can come from the same command.
    ``paper_numbers``: a JSON file (see :func:`load_paper_numbers`) whose numbers the test tables print beside
    ours; without it they print none."""
    directory = Path(directory)
    paper = load_paper_numbers(paper_numbers) if paper_numbers is not None else {}
    rows = read_results(directory)
    if only:
        unknown = sorted(set(only) - {r["method"] for r in rows})
        if unknown:
            raise ValueError(f"no runs of {', '.join(unknown)} in {directory}")
        rows = [r for r in rows if r["method"] in set(only)]
        methods = list(methods or only)
    settings_path = directory / BENCH_NAME
    settings = json.loads(settings_path.read_text()) if settings_path.exists() else {}
    modes = sorted({r["mode"] for r in rows})
    out = [f"# Benchmark report: {directory.name}", ""]
    out.append(f"Mode: **{', '.join(modes)}**" + (
        f" (replay over a library of {settings.get('library')} random configurations per dataset, split seed 0; "
        "seeds vary the search only)" if "replay" in modes else " (real evaluations; seeds vary split and search)"))
    out.append(f"Budget: {settings.get('budget', '?')} evaluations; space: {settings.get('space', '?')}; "
               f"runs: {len(rows)}; seeds: {len({r['seed'] for r in rows})}.")
    results = read_run_results(directory, rows)
    provenance = provenance_lines([(result or {}).get("provenance") for result in results], [r["dataset"] for r in rows])
    out += [""] + [text for line in provenance for text in (line, "")]
    out.append("Cells: mean ± std over seeds of the test loss of each method's final model; **bold** = best mean; "
               + ("[paper X] = the published mean for the same dataset and method (different implementation, "
                  "machine and, for replay, a restricted candidate set: compare ranks, not decimals). "
                  if paper_numbers is not None else "")
               + "(n=k) marks a cell with fewer seeds than its row's maximum.")
    tables = {}
    for metric in ("error", "mse", "mae"):
        if not any(r["metric"] == metric for r in rows):
            continue
        table = results_table(rows, metric, methods)
        tables[metric] = table
        out += ["", f"## {METRIC_TITLES[metric]}", "", markdown_table(table, metric, paper.get(metric)), ""]
        out += [f"Wilcoxon signed-rank test per dataset (paired by seed, p <= 0.05): {reference} is better / the "
                "same / worse than each method on this many datasets; then how many (dataset, seed) pairs it is "
                "lower / equal / higher in, and the two-sided p of each dataset.", "", wilcoxon_table(table, reference), ""]
        val_table = results_table(rows, metric, methods, value="val_error")
        out += ["Validation loss of the final model (same units; the search saw these):", "",
                markdown_table(val_table, metric), ""]
        correlation = validation_test_correlation(val_table, table)
        out += [f"Validation against test: (dataset, seed) pairs where {reference}'s final model has the lower / "
                "equal / higher loss, on validation and on test, and how many of its validation wins are also test "
                "wins. Across methods, Pearson r of mean validation and mean test loss per dataset: " + ", ".join(
                    f"{d} {r:+.2f}" for d, r in correlation.items()) + ".", "",
                transfer_table(val_table, table, reference), ""]
        seconds = defaultdict(list)
        for r in rows:
            if r["metric"] == metric:
                seconds[r["method"]].append(r["optimizer_seconds"] / max(1, int(r["n_evaluations"])))
        out += ["Suggestion time per evaluation (s, mean over runs): " + ", ".join(
            f"{m} {np.mean(seconds[m]):.3f}" for m in table["methods"] if seconds[m]), ""]
        picked = [i for i, r in enumerate(rows) if r["metric"] == metric]
        spread = spread_line([rows[i] for i in picked], [results[i] for i in picked], table["methods"])
        if spread:
            out += [spread, ""]
    traces = read_traces(directory) if (figures or at) else {}
    if only:
        traces = {key: by_seed for key, by_seed in traces.items() if key[2] in set(only)}
    for iteration in at:
        early = rows_at(traces, int(iteration))
        for metric in ("error", "mse", "mae"):
            if not any(r["metric"] == metric for r in early):
                continue
            table = results_table(early, metric, methods)
            out += ["", f"## {METRIC_TITLES[metric]} after {iteration} evaluations", "",
                    markdown_table(table, metric), "",
                    f"Wilcoxon ({reference} better / same / worse):", "", wilcoxon_table(table, reference), ""]
    if figures:
        from optdiv.show.plotting import MISSING_MATPLOTLIB, PlottingUnavailable

        try:
            names = write_figures(directory, traces, tables, focus)
        except PlottingUnavailable:
            warnings.warn(f"report without figures: {MISSING_MATPLOTLIB}", UserWarning, stacklevel=2)
            out += ["## Figures", "", f"(none: {MISSING_MATPLOTLIB})", ""]
            names = []
        if names:
            out += ["## Figures", ""] + [f"![{n}]({n})" for n in names] + [""]
    path = Path(output) if output else directory / "report.md"
    path.write_text("\n".join(out))
    return path
