"""How well the diversity surrogate ranks unseen pairs: Kendall tau as in DivBO section 4.2.

Evaluates ``n_configs`` random configurations of a space on a dataset (resumable: the run store under
``--out`` keeps them), fits the `DiversitySurrogate` on the first ``n_train`` configurations' pairwise
diversity, and reports Kendall tau between predicted and true diversity on pairs of held-out
configurations (and on held-out x training pairs). Only configurations whose run succeeded count.

    python -m optdiv.bench.surrogate_tau --data PATH/quake.csv --out .cache/tau/quake
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Dict

import numpy as np
from scipy.stats import kendalltau

from optdiv.cash.data import load_dataset, split
from optdiv.cash.engine import resolve_metric, search
from optdiv.cash.spaces import get_space
from optdiv.cash.store import RunStore
from optdiv.core.diversity import kind_for_metric, pairwise_diversity
from optdiv.core.surrogates import DiversitySurrogate


def surrogate_tau(
    data: str,
    out: str,
    kind: str = "divbo",
    space: str = "autosklearn",
    n_configs: int = 300,
    n_train: int = 250,
    n_test_pairs: int = 50,
    seed: int = 0,
    time_limit: float = 120.0,
) -> Dict:
    dataset = load_dataset(data)
    splits = split(dataset, seed=seed)
    metric = resolve_metric(None, dataset.task)
    store = RunStore(out)
    n_classes = None if dataset.classes is None else len(dataset.classes)
    start = time.perf_counter()
    result = search(splits, dataset.task, n_classes=n_classes, method="rs-", space=space, budget=n_configs,
                    time_limit=time_limit, seed=seed, store=store)
    space_obj = get_space(space, dataset.task)
    ok = [obs for obs in result.history if obs.status == "ok"]
    if len(ok) < n_train + 2:
        raise RuntimeError(f"only {len(ok)} successful runs; need more than {n_train + 1}")
    X = space_obj.encode([obs.config for obs in ok])
    preds = np.stack([obs.val_pred for obs in ok])
    kind = kind if kind != "auto" else kind_for_metric(metric)
    D = pairwise_diversity(preds, splits.y_val, kind)
    train, test = np.arange(n_train), np.arange(n_train, len(ok))
    surrogate = DiversitySurrogate(seed=seed).fit(X[train], D[np.ix_(train, train)])
    rng = np.random.default_rng(seed)
    ii, jj = np.triu_indices(len(test), 1)
    pick = rng.choice(len(ii), size=min(n_test_pairs, len(ii)), replace=False)
    a, b = test[ii[pick]], test[jj[pick]]
    mean, _ = surrogate.predict(X[a], X[b])
    predicted = np.diag(mean)
    tau_heldout = kendalltau(predicted, D[a, b])[0]
    test_mean, _ = surrogate.predict(X[test], X[test])
    tau_all_heldout = kendalltau(test_mean[ii, jj], D[np.ix_(test, test)][ii, jj])[0]
    cross_mean, _ = surrogate.predict(X[test], X[train])
    tau_cross = kendalltau(cross_mean.ravel(), D[np.ix_(test, train)].ravel())[0]
    return {
        "dataset": dataset.name,
        "kind": kind,
        "n_successful": len(ok),
        "n_train": n_train,
        "n_test_pairs": int(len(pick)),
        "kendall_tau_heldout_pairs": float(tau_heldout),
        "kendall_tau_all_heldout_pairs": float(tau_all_heldout),
        "kendall_tau_heldout_x_train": float(tau_cross),
        "seconds": time.perf_counter() - start,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True, help="run directory (resumable cache of the evaluations)")
    parser.add_argument("--kind", default="divbo", help="diversity kind, or 'auto' for the metric's OptDiv kind")
    parser.add_argument("--space", default="autosklearn")
    parser.add_argument("--n-configs", type=int, default=300)
    parser.add_argument("--n-train", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=120.0, help="wall-time limit of one evaluation")
    args = parser.parse_args(argv)
    report = surrogate_tau(args.data, args.out, args.kind, args.space, args.n_configs, args.n_train, seed=args.seed,
                           time_limit=args.time_limit)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
