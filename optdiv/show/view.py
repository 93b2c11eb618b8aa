"""See one search: a leaderboard of every evaluation, and figures of its progress, of its final ensemble's
pairwise diversity and of how it spread over algorithms (``optdiv show RUN``, the estimators' ``leaderboard()``,
``show()`` and ``plot_*()``).

A run directory is read as the search writes it (the append-only log, each evaluation's predictions, the validation
targets), so a run that is still going or was killed shows too; ``result.json``, written at the end, adds the final
ensemble (the weights and the heatmap). A fitted estimator is shown from the history it keeps in memory. Whatever
cannot be drawn (no final ensemble yet, a run directory from before the validation targets were kept) is left out
and said once, in :attr:`RunView.notes` or in the notes :func:`write_figures` returns.

Matplotlib (the ``plot`` extra) is imported only to draw (optdiv.show.plotting); the leaderboard needs pandas only.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from optdiv.evaluation.observation import Observation
from optdiv.storage.files import RunStore
from optdiv.storage.layout import BENCH_NAME, LOG_NAME, META_NAME, RESULT_NAME, RESULTS_NAME

#: The figures :func:`write_figures` writes, by what they show.
FIGURES = {"progress": "progress.png", "diversity": "ensemble_diversity.png", "algorithms": "algorithms.png"}
#: Checkpoints of the ensemble curve: one Caruana selection each, not one per evaluation, so a long run draws fast.
PROGRESS_POINTS = 20
STATUS_ORDER = ("ok", "infeasible", "timeout", "failed")
STATUS_COLOURS = {"ok": "#4c9a2a", "infeasible": "#9e9e9e", "timeout": "#ff7f0e", "failed": "#d62728"}


@dataclass
class RunView:
    """What is shown of one search: its evaluations in index order and, once it has one, its final ensemble.

    ``result`` is ``result.json``'s content (None while the run goes on or after it was killed); its ensemble's
    ``index`` entries are positions in ``history``. ``y_val`` holds the targets the validation predictions are
    scored on (None for a run directory from before they were kept). ``notes`` says what is left out and why.
    """

    name: str
    history: List[Observation]
    task: str
    metric: str
    method: str
    y_val: Optional[np.ndarray] = None
    result: Optional[Dict] = None
    ensemble_size: int = 25
    notes: List[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.result is not None

    def members(self) -> List[Tuple[Observation, float]]:
        """The final ensemble's members and weights; [] before there is one."""
        if self.result is None:
            return []
        out = []
        for member in self.result.get("ensemble") or []:
            position = int(member["index"])
            if 0 <= position < len(self.history):
                out.append((self.history[position], float(member["weight"])))
        return out

    @property
    def evaluation(self) -> str:
        return str((self.result or {}).get("evaluation") or "holdout")


# -- reading -------------------------------------------------------------------------------------------------------

def read_run(directory: Union[str, os.PathLike]) -> RunView:
    """The view of a run directory; FileNotFoundError with one line naming what is missing when it is not one."""
    directory = Path(directory)
    if not directory.exists():
        raise FileNotFoundError(f"{directory}: no such run directory")
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is a file, not a run directory")
    if not (directory / LOG_NAME).exists():
        if (directory / RESULTS_NAME).exists() or (directory / BENCH_NAME).exists():
            why = "it is a bench directory, which `optdiv report` reads"
        elif (directory / META_NAME).exists():
            why = "the run has recorded no evaluation yet"
        else:
            why = "`optdiv run --out DIR` writes one"
        raise FileNotFoundError(f"{directory} is not an optdiv run directory: {LOG_NAME} is missing ({why})")
    store = RunStore(directory)
    history = store.load()
    meta = store.read_meta() or {}
    notes: List[str] = []
    result = store.read_json(RESULT_NAME) if (directory / RESULT_NAME).exists() else None
    if result is not None and int(result.get("n_evaluations", -1)) != len(history):
        notes.append(f"{RESULT_NAME} describes {result.get('n_evaluations')} evaluations and the log holds "
                     f"{len(history)} (the run was resumed after it): its final ensemble is left out")
        result = None
    task = (result or {}).get("task") or meta.get("task") or _task_of(history)
    metric = (result or {}).get("metric") or _default_metric(meta.get("metric"), task)
    method = (result or {}).get("method") or meta.get("method") or "unknown method"
    name = (result or {}).get("dataset") or meta.get("data") or directory.name
    y_val = _checked_targets(store.load_targets(), history, notes)
    return RunView(name=str(name), history=history, task=task, metric=metric, method=str(method), y_val=y_val,
                   result=result, ensemble_size=int(meta.get("ensemble_size") or 25), notes=notes)


def view_of_search(result, y_val: np.ndarray, task: str, name: str, ensemble_size: int = 25) -> RunView:
    """The view of a search held in memory (a fitted estimator's ``result_``) and its validation targets."""
    from optdiv.engine.result import result_summary

    summary = result_summary(result, name, task)
    notes: List[str] = []
    return RunView(name=name, history=list(result.history), task=task, metric=summary["metric"],
                   method=summary["method"], y_val=_checked_targets(y_val, result.history, notes), result=summary,
                   ensemble_size=int(ensemble_size), notes=notes)


def _task_of(history: List[Observation]) -> str:
    """Classification when the stored predictions are probabilities (rows x classes); for logs without a task."""
    for obs in history:
        if obs.val_pred is not None:
            return "classification" if np.ndim(obs.val_pred) == 2 else "regression"
    return "classification"


def _default_metric(metric: Optional[str], task: str) -> str:
    from optdiv.core.metric_vocabulary import resolve

    try:
        return resolve(metric, task).name
    except ValueError:
        return str(metric)


def _checked_targets(y_val, history: List[Observation], notes: List[str]) -> Optional[np.ndarray]:
    """``y_val`` when it matches the stored predictions' rows; otherwise None and a note of what is left out."""
    needs = "the ensemble curve and the diversity heatmap need the validation targets"
    if y_val is None:
        if any(obs.val_pred is not None for obs in history):
            notes.append(f"{needs}, which this run directory does not hold (an older optdiv wrote it): left out")
        return None
    rows = next((len(obs.val_pred) for obs in history if obs.val_pred is not None), len(y_val))
    if rows != len(y_val):
        notes.append(f"{needs}: the stored ones have {len(y_val)} rows and the predictions {rows}: left out")
        return None
    return np.asarray(y_val)


# -- leaderboard ---------------------------------------------------------------------------------------------------

def leaderboard(view: RunView):
    """One row per evaluation, best validation loss first: index, algorithm, status, val_loss, fit_seconds, peak_mb
    (the evaluation's own peak resident set; NaN where it was not measured: in process, or a run of an older
    version), weight.

    ``val_loss`` is NaN for a failed or timed-out evaluation (the loss it is recorded with is a stand-in, not a
    measurement); ``weight`` is the final ensemble's weight (0 for the others), NaN for every row while the run has
    no final ensemble."""
    import pandas as pd

    weights: Dict[int, float] = defaultdict(float)
    for obs, weight in view.members():
        weights[id(obs)] += weight
    rows = [{"index": obs.index, "algorithm": obs.algorithm, "status": obs.status,
             "val_loss": obs.val_loss if obs.status in ("ok", "infeasible") else float("nan"),
             "fit_seconds": obs.fit_seconds, "peak_mb": (obs.measures or {}).get("peak_mb", float("nan")),
             "weight": weights.get(id(obs), 0.0) if view.finished else float("nan")}
            for obs in view.history]
    frame = pd.DataFrame(rows, columns=["index", "algorithm", "status", "val_loss", "fit_seconds", "peak_mb",
                                       "weight"])
    return frame.sort_values(["val_loss", "index"], na_position="last", kind="mergesort").reset_index(drop=True)


def summary_line(view: RunView) -> str:
    """One line: what was searched, how the evaluations ended, the best single model and the final ensemble."""
    history = view.history
    counts = Counter(obs.status for obs in history)
    statuses = [s for s in STATUS_ORDER if counts[s]] + sorted(s for s in counts if s not in STATUS_ORDER)
    ended = ", ".join(f"{counts[s]} {s}" for s in statuses)
    evaluation = "" if view.evaluation == "holdout" else f", {view.evaluation}"
    line = (f"{view.method} on {view.name} ({view.task}, {view.metric}{evaluation}): {len(history)} evaluations"
            + (f" ({ended})" if ended else ""))
    ok = [obs for obs in history if obs.status == "ok"]
    if ok:
        best = min(ok, key=lambda obs: (obs.val_loss, obs.index))
        line += f"; best single {best.val_loss:.4g} (#{best.index} {best.algorithm})"
    if view.finished:
        test = view.result.get("test_error")
        line += (f"; final ensemble of {len(view.members())}: val {float(view.result['val_error']):.4g}"
                 + ("" if test is None else f", test {float(test):.4g}"))
    else:
        line += (f"; no final ensemble yet (no {RESULT_NAME}: the run is still going or was stopped; "
                 "`optdiv run --resume` continues a stopped one)")
    return line


def format_leaderboard(view: RunView, frame=None, top: Optional[int] = None) -> str:
    """The summary line and the leaderboard as text; ``top`` keeps the best rows only."""
    frame = leaderboard(view) if frame is None else frame
    shown = frame if not top or top >= len(frame) else frame.head(top)
    if not len(shown):
        return summary_line(view) + "\n(no evaluation recorded yet)"

    def number(fmt, missing):
        return lambda v: missing if v is None or not np.isfinite(v) or (missing == "" and v == 0) else fmt.format(v)

    text = shown.assign(val_loss=shown["val_loss"].map(number("{:.5g}", "-")),
                        fit_seconds=shown["fit_seconds"].map(number("{:.2f}", "-")),
                        peak_mb=shown["peak_mb"].map(number("{:.0f}", "-")),
                        weight=shown["weight"].map(number("{:.3f}", ""))).to_string(index=False)
    more = f"\n... {len(frame) - len(shown)} more (all: without --top)" if len(shown) < len(frame) else ""
    return f"{summary_line(view)}\n{text}{more}"


# -- progress ------------------------------------------------------------------------------------------------------

@dataclass
class Progress:
    """The search's validation losses over evaluations and over time, in index order (see :func:`progress`)."""

    evaluations: np.ndarray  # 1..n
    times: np.ndarray  # where each evaluation ended on the time axis
    time_label: str
    losses: np.ndarray  # each evaluation's validation loss (NaN unless ok)
    best: np.ndarray  # best single ok loss among the first k evaluations (NaN before the first)
    best_by_time: Tuple[np.ndarray, np.ndarray]  # (times sorted, best ok loss recorded by then)
    checkpoints: np.ndarray  # k of each ensemble point
    ensemble: np.ndarray  # the ensemble's validation loss over the first k evaluations
    ensemble_label: str


def checkpoints(n: int, points: int = PROGRESS_POINTS) -> List[int]:
    """About ``points`` evenly spaced prefix lengths ending at ``n``."""
    if n < 1:
        return []
    every = max(1, math.ceil(n / points))
    found = list(range(every, n + 1, every))
    return found if found and found[-1] == n else found + [n]


def progress(view: RunView, points: int = PROGRESS_POINTS) -> Progress:
    """Best single model so far and, given the validation targets, the ensemble Caruana selection (the run's
    ensemble size, on the final selection's loss) builds from the evaluations so far, at about ``points``
    checkpoints."""
    history = view.history
    n = len(history)
    ok = np.array([obs.status == "ok" for obs in history], dtype=bool)
    losses = np.array([obs.val_loss if obs.status == "ok" else np.nan for obs in history], dtype=float)
    best = np.fmin.accumulate(losses) if n else losses
    stamps = [obs.recorded_at for obs in history]
    if n and all(stamp is not None for stamp in stamps):
        origin = min(stamp - obs.fit_seconds for stamp, obs in zip(stamps, history))
        times = np.array(stamps, dtype=float) - origin
        label = "wall seconds since the first evaluation started"
    else:
        times = np.cumsum([obs.fit_seconds for obs in history]).astype(float)
        label = "cumulative fit seconds (this log has no wall-clock timestamps)"
    order = np.argsort(times, kind="mergesort")
    best_by_time = (times[order], np.fmin.accumulate(losses[order]) if n else losses)
    points_at = np.array(checkpoints(n, points), dtype=int)
    ensemble = np.full(len(points_at), np.nan)
    label_ensemble = ""
    usable = [i for i in range(n) if ok[i] and history[i].val_pred is not None]
    if view.y_val is not None and usable:
        loss, label_ensemble = _selection_loss(view)
        from optdiv.core.ensemble import ensemble_selection
        from optdiv.core.metrics import mean_loss

        stack = np.stack([np.asarray(history[i].val_pred, dtype=np.float64) for i in usable])
        positions = np.array(usable)
        try:
            for j, k in enumerate(points_at):
                m = int(np.searchsorted(positions, k))  # the usable evaluations among the first k
                if m == 0:
                    continue
                weights = ensemble_selection(stack[:m], view.y_val, loss, size=view.ensemble_size, seed=0).weights
                ensemble[j] = float(mean_loss(np.tensordot(weights, stack[:m], axes=1), view.y_val, view.metric))
        except ValueError as exc:  # a loss the predictions do not support: the curve is left out
            view.notes.append(f"the ensemble curve is left out ({exc})")
            ensemble[:] = np.nan
    return Progress(np.arange(1, n + 1), times, label, losses, best, best_by_time, points_at, ensemble,
                    label_ensemble)


def _selection_loss(view: RunView) -> Tuple[str, str]:
    """What the prefix ensembles minimise: the final selection's loss (result.json), else what ``optdiv run``
    chooses by default for the metric; and the curve's legend text."""
    from optdiv.final.choice import resolve_selection

    chosen = ((view.result or {}).get("ensemble_selection") or {}).get("loss")
    if not chosen:
        chosen = resolve_selection(view.task, view.metric)[0] or view.metric
    return chosen, f"ensemble of the evaluations so far (Caruana, {view.ensemble_size} picks on {chosen})"


# -- figures -------------------------------------------------------------------------------------------------------

def progress_figure(view: RunView, data: Optional[Progress] = None):
    """Validation loss against evaluations (left) and time (right): each successful evaluation, the best single
    model so far, the ensemble of the evaluations so far and the final ensemble; None without a successful run."""
    from optdiv.show.plotting import integer_ticks, new_figure

    data = progress(view) if data is None else data
    if not np.isfinite(data.losses).any():
        return None
    fig = new_figure(11, 4.4)
    axes = fig.subplots(1, 2, sharey=True)
    final = float(view.result["val_error"]) if view.finished and view.result.get("val_error") is not None else None
    ok = np.isfinite(data.losses)
    at_checkpoint = data.times[data.checkpoints - 1] if len(data.checkpoints) else data.checkpoints
    time_end = float(np.max(data.times)) if len(data.times) else 0.0
    panels = ((axes[0], data.evaluations, (data.evaluations, data.best), data.checkpoints, len(data.evaluations),
               "evaluations (in the order they were issued)"),
              (axes[1], data.times, data.best_by_time, at_checkpoint, time_end, data.time_label))
    for ax, x, (best_x, best_y), ensemble_x, end, xlabel in panels:
        ax.scatter(x[ok], data.losses[ok], s=12, color="0.72", label="one successful evaluation", zorder=1)
        ax.plot(best_x, best_y, drawstyle="steps-post", color="C0", lw=2, label="best single model so far", zorder=2)
        if np.isfinite(data.ensemble).any():
            ax.plot(ensemble_x, data.ensemble, "o-", color="C1", ms=3.5, lw=1.6, label=data.ensemble_label,
                    zorder=3)
        if final is not None:
            ax.plot([end], [final], "*", color="C3", ms=13, label="final ensemble", zorder=4)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    integer_ticks(axes[0].xaxis)
    axes[0].set_ylabel(f"validation {view.metric}" + ("" if view.evaluation == "holdout" else
                                                      f" ({view.evaluation}, out-of-fold)"))
    axes[0].set_ylim(*_loss_limits(data, final))
    axes[0].set_title("against evaluations", fontsize=9)
    axes[1].set_title("against time", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False)
    fig.suptitle(f"{view.method} on {view.name}: validation loss during the search (lower is better)", fontsize=10)
    fig.tight_layout(rect=(0, 0.09, 1, 0.95))
    return fig


def _loss_limits(data: Progress, final: Optional[float]) -> Tuple[float, float]:
    """Y limits that show the curves whole and most single evaluations: one wild regression loss must not flatten
    them (points above the frame are cut)."""
    curves = np.concatenate([data.best[np.isfinite(data.best)], data.ensemble[np.isfinite(data.ensemble)],
                             [final] if final is not None else []])
    ok = data.losses[np.isfinite(data.losses)]
    low = float(min(curves.min(), ok.min()))
    high = float(max(curves.max(), np.quantile(ok, 0.8)))
    pad = 0.06 * (high - low) if high > low else 0.05 * abs(high) + 1e-3
    return low - pad, high + pad


def diversity_kind(view: RunView) -> str:
    """The pairwise diversity the heatmap shows: OptDivBO's bound term for the metric when an OptDivBO search
    chose the members, otherwise DivBO's disagreement (the measure the bench report draws)."""
    from optdiv.core.diversity import kind_for_metric
    from optdiv.strategies.methods import get_method

    try:
        spec = get_method(view.method)
    except (KeyError, ValueError):
        return "divbo"
    if "optdivbo" in (spec.strategy, spec.options.get("inner")):
        try:
            return kind_for_metric(view.metric, bool(spec.options.get("paper_clip")))
        except ValueError:
            return "divbo"
    return "divbo"


def diversity_label(kind: str, metric: str) -> str:
    """The colour bar's text: which diversity, and which way is more diverse."""
    from optdiv.core.diversity import higher_is_more_diverse

    if higher_is_more_diverse(kind):
        return f"{kind} diversity: how differently two members predict\n(higher = more different, 0 = identical)"
    return f"{kind} diversity: the pair's term in the bound on the ensemble's\n{metric} (lower = more complementary)"


def diversity_figure(view: RunView):
    """(figure or None, why it was left out or None): the final members' pairwise diversity as a heatmap, each
    member named ``#index algorithm (weight)``."""
    from optdiv.core.diversity import pairwise_diversity
    from optdiv.show.plotting import new_figure

    members = view.members()
    if not view.finished:
        return None, f"{FIGURES['diversity']} left out: the run has no final ensemble yet (no {RESULT_NAME})"
    if len(members) < 2:
        return None, f"{FIGURES['diversity']} left out: the final model has {len(members)} member(s)"
    if view.y_val is None:
        return None, None  # the view's notes already say the targets are missing
    if any(obs.val_pred is None for obs, _ in members):
        return None, f"{FIGURES['diversity']} left out: the predictions of a member are missing"
    kind = diversity_kind(view)
    preds = np.stack([np.asarray(obs.val_pred) for obs, _ in members])
    matrix = pairwise_diversity(preds, view.y_val, kind, view.ensemble_size).astype(float)
    np.fill_diagonal(matrix, np.nan)
    m = len(members)
    side = max(4.8, 0.5 * m + 3.2)
    fig = new_figure(side + 1.6, side)
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="viridis")  # masked diagonal: left blank
    labels = [f"#{obs.index} {obs.algorithm} ({weight:.2f})" for obs, weight in members]
    ax.set_xticks(range(m))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(m))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("member: #evaluation algorithm (weight)")
    ax.set_ylabel("member: #evaluation algorithm (weight)")
    if m <= 10:
        middle = np.nanmean(matrix)
        for i in range(m):
            for j in range(m):
                if i != j:
                    ax.text(j, i, _short(matrix[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if matrix[i, j] < middle else "black")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(diversity_label(kind, view.metric), fontsize=8)
    ax.set_title(f"{view.method} on {view.name}: pairwise diversity of the final ensemble's {m} members\n"
                 "(diagonal, a member with itself, left blank)", fontsize=9)
    fig.tight_layout()
    return fig, None


def _short(value: float) -> str:
    """A heatmap cell's number in at most about five characters, without an exponent for large losses."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def algorithms_figure(view: RunView):
    """Evaluations per algorithm, stacked by status, the final ensemble's members counted beside each bar; None
    without evaluations."""
    from optdiv.show.plotting import integer_ticks, new_figure

    history = view.history
    if not history:
        return None
    counts: Dict[str, Counter] = defaultdict(Counter)
    for obs in history:
        counts[obs.algorithm or "?"][obs.status] += 1
    order = sorted(counts, key=lambda a: (-sum(counts[a].values()), a))
    present = {s for c in counts.values() for s in c}
    statuses = [s for s in STATUS_ORDER if s in present] + sorted(present - set(STATUS_ORDER))
    in_ensemble: Dict[str, List[float]] = defaultdict(list)
    for obs, weight in view.members():
        in_ensemble[obs.algorithm or "?"].append(weight)
    fig = new_figure(8.5, max(2.6, 0.42 * len(order) + 1.6))
    ax = fig.subplots()
    y = np.arange(len(order))
    left = np.zeros(len(order))
    for status in statuses:
        width = np.array([counts[a][status] for a in order], dtype=float)
        ax.barh(y, width, left=left, color=STATUS_COLOURS.get(status, "#8c564b"), label=status, height=0.7)
        left += width
    marked = False
    for i, algorithm in enumerate(order):
        weights = in_ensemble.get(algorithm)
        if weights:
            ax.plot([left[i]], [i], marker="*", color="C3", ms=11, ls="none",
                    label=None if marked else "in the final ensemble")
            ax.annotate(f"{len(weights)} member{'s' if len(weights) > 1 else ''}, weight {sum(weights):.2f}",
                        (left[i], i), xytext=(9, 0), textcoords="offset points", va="center", fontsize=8)
            marked = True
    ax.set_yticks(y)
    ax.set_yticklabels(order, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left.max(), 1) * (1.6 if marked else 1.05))  # room for the members' text
    integer_ticks(ax.xaxis)
    ax.set_xlabel("evaluations")
    ax.set_ylabel("algorithm")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the bars, never on them
    ax.set_title(f"{view.method} on {view.name}: {len(history)} evaluations over {len(order)} algorithms", fontsize=9)
    fig.tight_layout()
    return fig


def write_figures(view: RunView, folder: Union[str, os.PathLike], dpi: int = 100) -> Tuple[List[Path], List[str]]:
    """Write the figures of :data:`FIGURES` into ``folder``: (paths written, notes on those left out).
    Raises :class:`~optdiv.show.plotting.PlottingUnavailable` without matplotlib."""
    from optdiv.show.plotting import save_png

    folder = Path(folder)
    written, notes = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. tight_layout's on a very long algorithm name
        figure = progress_figure(view)
        if figure is None:
            notes.append(f"{FIGURES['progress']} left out: no successful evaluation yet")
        else:
            written.append(save_png(figure, folder / FIGURES["progress"], dpi))
        figure, why = diversity_figure(view)
        if figure is None:
            notes += [why] if why else []
        else:
            written.append(save_png(figure, folder / FIGURES["diversity"], dpi))
        figure = algorithms_figure(view)
        if figure is None:
            notes.append(f"{FIGURES['algorithms']} left out: no evaluation yet")
        else:
            written.append(save_png(figure, folder / FIGURES["algorithms"], dpi))
    return written, notes
