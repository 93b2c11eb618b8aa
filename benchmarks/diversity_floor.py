"""Which form of OptDivBO's 0/1-loss diversity points the search at models that improve the ensemble.

The black-box mix is ``0.2 * ce + 0.1 * brier`` with the true class's probability clipped at a floor inside
``ce``. This script scores floors (and Brier alone, and DivBO's disagreement) by one step of OptDivBO with a
perfect diversity surrogate, on validation predictions of replay libraries only (the test rows are never read):

1. draw ``--history`` successful members of a library as what the search has seen, and ``--candidates`` others
   as what it could evaluate next; split the validation rows at random into halves A and B;
2. on A: build the pool (ensemble selection, 25 rounds), each candidate's own error (the performance rank), and
   each form's pool-weighted diversity ``mu(x) = sum_p w_p div(x, p)`` (lower = better);
3. on B: the *gain* of a candidate = error of ensemble selection (on A) over history + candidate, minus over the
   history alone. A good form ranks candidates by gain: we report Spearman(mu, gain) and, for the acquisition
   ``rank(own error) + w rank(mu)``, the mean gain of the candidate it picks (w = 1, OptDivBO's late weight).

    python benchmarks/diversity_floor.py --data-dir ../shared/datasets --datasets quake,wind,cpu_act,cpu_small \
        --draws 30
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
from scipy.stats import spearmanr, wilcoxon

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.bench.library import library_dir, load_library
from optdiv.core.acquisition import ranks
from optdiv.core.diversity import BLACK_BOX_BRIER_WEIGHT, BLACK_BOX_CE_WEIGHT, diversity_to_pool
from optdiv.core.ensemble import ensemble_predict, ensemble_selection
from optdiv.core.metrics import mean_loss
from optdiv.core.pool import build_pool
from optdiv.storage.files import RunStore

FLOORS = (1e-15, 1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.25)
ENSEMBLE_SIZE = 25


def floored_mix(floor: float) -> Callable:
    """The black-box mix with the true-class probability clipped at ``floor`` inside its cross-entropy."""

    def score(cand: np.ndarray, pool: np.ndarray, y: np.ndarray) -> np.ndarray:
        ce = diversity_to_pool(np.maximum(cand, floor), np.maximum(pool, floor), y, "ce", ENSEMBLE_SIZE)
        return BLACK_BOX_CE_WEIGHT * ce + BLACK_BOX_BRIER_WEIGHT * diversity_to_pool(cand, pool, y, "brier")

    return score


def forms() -> Dict[str, Callable]:
    out: Dict[str, Callable] = {f"floor {floor:g}": floored_mix(floor) for floor in FLOORS}
    out["brier alone"] = lambda c, p, y: diversity_to_pool(c, p, y, "brier")
    out["divbo (negated)"] = lambda c, p, y: -diversity_to_pool(c, p, y, "divbo")
    return out


def ensemble_error(preds: np.ndarray, y_fit: np.ndarray, fit_rows, eval_rows, y_eval, seed: int,
                   gain_loss: str = "error") -> float:
    """Loss on ``eval_rows`` of ensemble selection by 0/1 error on ``fit_rows``."""
    weights = ensemble_selection(preds[:, fit_rows], y_fit, "error", size=ENSEMBLE_SIZE, seed=seed).weights
    return float(mean_loss(ensemble_predict(preds[:, eval_rows], weights), y_eval, gain_loss))


def one_draw(val: np.ndarray, y: np.ndarray, ok: np.ndarray, history: int, candidates: int, seed: int,
             scorers: Dict[str, Callable], gain_loss: str = "error") -> Dict[str, Dict[str, float]]:
    rng = np.random.default_rng(seed)
    members = rng.permutation(np.flatnonzero(ok))
    seen, cands = members[:history], members[history:history + candidates]
    rows = rng.permutation(len(y))
    a, b = np.sort(rows[: len(y) // 2]), np.sort(rows[len(y) // 2:])
    ya, yb = y[a], y[b]
    pool = build_pool(val[seen][:, a], ya, "error", size=ENSEMBLE_SIZE, seed=seed)
    pool_preds = val[seen[pool.indices]][:, a]
    base = ensemble_error(val[seen], ya, a, b, yb, seed, gain_loss)
    gain = np.array([ensemble_error(val[np.append(seen, c)], ya, a, b, yb, seed, gain_loss) - base for c in cands])
    own = np.array([mean_loss(val[c][a], ya, "error") for c in cands])
    perf_rank = ranks(-own, higher_is_better=True)
    out: Dict[str, Dict[str, float]] = {}
    for name, scorer in scorers.items():
        mu = scorer(val[cands][:, a], pool_preds, ya) @ pool.weights
        pick = int(np.argmin(perf_rank + ranks(mu, higher_is_better=False)))
        out[name] = {"spearman_gain": float(spearmanr(mu, gain)[0]), "spearman_own": float(spearmanr(mu, own)[0]),
                     "picked_gain": float(gain[pick]), "picked_own": float(own[pick])}
    out["performance alone"] = {"spearman_gain": float("nan"), "spearman_own": float("nan"),
                                "picked_gain": float(gain[int(np.argmin(perf_rank))]),
                                "picked_own": float(own[int(np.argmin(perf_rank))])}
    return out


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"))
    parser.add_argument("--datasets", default="quake,wind,cpu_act,cpu_small")
    parser.add_argument("--cache", default=".cache", help="where `optdiv bench` keeps its replay libraries")
    parser.add_argument("--library", type=int, default=0, help="load the first N members (0: all there are)")
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--gain-loss", default="error", choices=["error", "brier", "log_loss"],
                        help="the loss on half B that measures a candidate's gain (the ensemble is always selected "
                             "by 0/1 error on half A)")
    parser.add_argument("--json", help="also write every draw's figures to this file")
    args = parser.parse_args(argv)
    scorers = forms()
    names = list(scorers) + ["performance alone"]
    totals: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
    print("| dataset | form | Spearman(mu, gain) | Spearman(mu, own error) | gain of the pick (pp) | own error of the pick (%) |")
    print("|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        size = args.library or len(RunStore(library_dir(args.cache, name)))
        library = load_library(Path(args.data_dir) / f"{name}.csv", args.cache, size)
        if library.task != "classification":
            raise SystemExit(f"{name} is a regression set; the 0/1-loss forms apply to classification only")
        draws = [one_draw(library.val_preds, library.y_val, library.ok, args.history, args.candidates, seed, scorers,
                          args.gain_loss) for seed in range(args.draws)]
        for form in names:
            rows = [d[form] for d in draws]
            totals[form].extend(rows)
            print(_row(name, form, rows))
        sys.stdout.flush()
    for form in names:
        print(_row("all", form, totals[form]))
    reference = totals["performance alone"]
    print("\nPaired over all draws, against picking by performance alone: mean difference in the pick's gain (pp) "
          "+- standard error, and Wilcoxon's p")
    for form in names[:-1]:
        diff = 100 * np.array([r["picked_gain"] - q["picked_gain"] for r, q in zip(totals[form], reference)])
        p = wilcoxon(diff)[1] if np.any(diff != 0) else 1.0
        print(f"- {form}: {diff.mean():+.3f} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f} (p = {p:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(totals))
    return 0


def _row(dataset: str, form: str, rows: List[Dict[str, float]]) -> str:
    def mean(key: str, scale: float = 1.0) -> str:
        values = np.array([r[key] for r in rows], dtype=np.float64) * scale
        return "-" if np.all(np.isnan(values)) else f"{np.nanmean(values):+.3f}"

    return (f"| {dataset} | {form} | {mean('spearman_gain')} | {mean('spearman_own')} | "
            f"{mean('picked_gain', 100)} | {mean('picked_own', 100)} |")


if __name__ == "__main__":
    sys.exit(main())
