"""Which final-ensemble builder over-fits the validation rows least: measured on replay searches' histories.

For each library and seed, one replay search (``--method``, ``--budget``) gives a history of evaluated
members with validation and test predictions. Every builder below then chooses weights on the validation
rows of that same history, and the test loss of its ensemble is recorded, so the builders differ only in
how they use the validation rows:

- ``es``: Caruana ensemble selection of 25 rounds on the run's metric (optdiv's default);
- ``es-brier`` / ``es-logloss``: the same selection on a smooth proxy loss (classification only);
- ``es-top20``: selection among the 20 members of lowest validation loss only (auto-sklearn's ensemble_nbest);
- ``es-bagged``: the weights averaged over 20 selections, each on a bootstrap sample of the validation rows;
- ``es-brier-bagged`` / ``es-logloss-bagged``: both at once;
- ``best``: the single member of lowest validation loss.

    python benchmarks/ensemble_variants.py --data-dir ../shared/datasets --datasets quake,wind,cpu_act,cpu_small \\
        --cache .cache --method bo-es --budget 50 --seeds 0-9
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Dict

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.bench.harness import parse_seeds
from optdiv.bench.library import library_dir, load_library
from optdiv.bench.replay import replay_search
from optdiv.bench.stats import compare, paired_p
from optdiv.core.ensemble import bagged_ensemble_selection, ensemble_selection
from optdiv.core.metrics import mean_loss
from optdiv.storage.files import RunStore

SIZE = 25


def _es(loss: str, top: int = 0, bags: int = 0) -> Callable:
    def build(val: np.ndarray, y: np.ndarray, own: np.ndarray, seed: int) -> np.ndarray:
        chosen = np.arange(len(val)) if not top else np.argsort(own, kind="stable")[:top]
        weights = np.zeros(len(val))
        if bags:
            weights[chosen] = bagged_ensemble_selection(val[chosen], y, loss, size=SIZE, bags=bags, seed=seed)
        else:
            weights[chosen] = ensemble_selection(val[chosen], y, loss, size=SIZE, seed=seed).weights
        return weights
    return build


def _best(val, y, own, seed):
    weights = np.zeros(len(val))
    weights[int(np.argmin(own))] = 1.0
    return weights


def builders(task: str, metric: str) -> Dict[str, Callable]:
    out = {"es": _es(metric), "es-top20": _es(metric, top=20), "es-bagged": _es(metric, bags=20), "best": _best}
    if task == "classification":
        out["es-brier"] = _es("brier")
        out["es-logloss"] = _es("log_loss")
        out["es-brier-bagged"] = _es("brier", bags=20)
        out["es-logloss-bagged"] = _es("log_loss", bags=20)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", required=True)
    parser.add_argument("--cache", default=".cache")
    parser.add_argument("--method", default="bo-es")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--regression-metric", default="mse")
    parser.add_argument("--portfolio", help="a JSON list of configurations (or portfolio file) evaluated first")
    args = parser.parse_args(argv)
    options = None
    if args.portfolio:
        import json

        payload = json.loads(Path(args.portfolio).read_text())
        options = {"initial": payload["configs"] if isinstance(payload, dict) else payload}
    seeds = parse_seeds(args.seeds)
    for name in args.datasets.split(","):
        path = Path(args.data_dir) / f"{name}.csv"
        size = len(RunStore(library_dir(args.cache, name)))
        lib = load_library(path, args.cache, size)
        metric = "error" if lib.task == "classification" else args.regression_metric
        scale = 100.0 if metric == "error" else 1.0
        table: Dict[str, list] = {}
        val_table: Dict[str, list] = {}
        for seed in seeds:
            history = replay_search(lib, args.method, metric, seed, args.budget, optimizer_options=options).history
            ok = [obs for obs in history if obs.ok and obs.val_pred is not None]
            val = np.stack([obs.val_pred for obs in ok]).astype(np.float64)
            test = np.stack([obs.test_pred for obs in ok]).astype(np.float64)
            own = np.array([obs.val_loss for obs in ok])
            for label, build in builders(lib.task, metric).items():
                w = build(val, lib.y_val, own, seed)
                table.setdefault(label, []).append(mean_loss(np.tensordot(w, test, axes=1), lib.y_test, metric))
                val_table.setdefault(label, []).append(mean_loss(np.tensordot(w, val, axes=1), lib.y_val, metric))
        print(f"\n{name} ({args.method}, budget {args.budget}, {len(seeds)} seeds; {metric}): builder | val | test | "
              f"against es")
        for label in table:
            verdict = "" if label == "es" else f"{compare(table[label], table['es'])} (p {paired_p(table[label], table['es']):.3f})"
            print(f"  {label:11s} {scale * np.mean(val_table[label]):8.4g} {scale * np.mean(table[label]):8.4g}  {verdict}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
