"""How well the diversity surrogate ranks unseen pairs: Kendall tau as in DivBO section 4.2.

Takes ``n_configs`` random configurations of a space on a dataset, fits the `DiversitySurrogate` on the first
``n_train`` successful ones' pairwise diversity, and reports Kendall tau between predicted and true diversity on
pairs of held-out configurations (and on held-out x training pairs). The configurations come either from a live
run (resumable: the run store under ``--out`` keeps them) or, with ``--library N``, from a replay library already
built by ``optdiv bench`` (no fitting; ``--repeats R`` then also draws R - 1 random train / held-out partitions,
so one lucky order does not decide the figure). ``--kind`` takes several diversity kinds at once: ``divbo`` is
DivBO's, ``auto`` OptDivBO's for the metric; ``--target raw,rank`` compares the surrogate's two training targets.

    python benchmarks/surrogate_tau.py --data PATH/quake.csv --out .cache/tau/quake
    python benchmarks/surrogate_tau.py --data PATH/quake.csv --library 300 --kind divbo,auto --target raw,rank \
        --repeats 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from scipy.stats import kendalltau

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's optdiv, before any installed one
    sys.path.insert(0, str(REPO))

from optdiv.core.diversity import kind_for_metric, pairwise_diversity
from optdiv.core.surrogates import DiversitySurrogate


def tau_of_predictions(encoded: np.ndarray, val_preds: np.ndarray, y_val: np.ndarray, kind: str, n_train: int,
                       n_test_pairs: int = 50, seed: int = 0, target: str = "raw") -> Dict[str, float]:
    """Kendall tau of the surrogate fit on the first ``n_train`` rows' pairwise diversity, on the rest.

    ``encoded`` (m, d) and ``val_preds`` (m, n_val[, k]) hold successful configurations only, in the order that
    decides which are trained on.
    """
    m = len(encoded)
    if m < n_train + 2:
        raise ValueError(f"only {m} successful configurations; need more than {n_train + 1}")
    D = pairwise_diversity(val_preds, y_val, kind)
    train, test = np.arange(n_train), np.arange(n_train, m)
    surrogate = DiversitySurrogate(seed=seed, target=target).fit(encoded[train], D[np.ix_(train, train)])
    rng = np.random.default_rng(seed)
    ii, jj = np.triu_indices(len(test), 1)
    pick = rng.choice(len(ii), size=min(n_test_pairs, len(ii)), replace=False)
    a, b = test[ii[pick]], test[jj[pick]]
    mean, _ = surrogate.predict(encoded[a], encoded[b])
    test_mean, _ = surrogate.predict(encoded[test], encoded[test])
    cross_mean, _ = surrogate.predict(encoded[test], encoded[train])
    return {
        "n_test_pairs": int(len(pick)),
        "kendall_tau_heldout_pairs": float(kendalltau(np.diag(mean), D[a, b])[0]),
        "kendall_tau_all_heldout_pairs": float(kendalltau(test_mean[ii, jj], D[np.ix_(test, test)][ii, jj])[0]),
        "kendall_tau_heldout_x_train": float(kendalltau(cross_mean.ravel(), D[np.ix_(test, train)].ravel())[0]),
    }


def _summarise(kind: str, target: str, runs: List[Dict[str, float]]) -> Dict:
    summary: Dict = {"kind": kind, "target": target, "repeats": len(runs)}
    for key in ("kendall_tau_heldout_pairs", "kendall_tau_all_heldout_pairs", "kendall_tau_heldout_x_train"):
        values = np.array([run[key] for run in runs])
        summary[key] = float(values.mean())
        if len(runs) > 1:
            summary[key + "_std"] = float(values.std(ddof=1))
            summary[key + "_per_repeat"] = [float(v) for v in values]
    summary["n_test_pairs"] = runs[0]["n_test_pairs"]
    return summary


def library_tau(library, kinds: List[str], metric: Optional[str] = None, n_train: int = 250, n_test_pairs: int = 50,
                repeats: int = 1, seed: int = 0, targets: Sequence[str] = ("raw",)) -> Dict:
    """Tau per diversity kind and surrogate target over a replay library's successful members.

    Repeat 0 trains on the first ``n_train`` successful members in library order (the live protocol); repeat r > 0
    on a random partition drawn from ``seed + r``.
    """
    from optdiv.engine.search import resolve_metric

    metric = resolve_metric(metric, library.task)
    ok = np.flatnonzero(library.ok)
    encoded, preds = library.encoded[ok], library.val_preds[ok]
    results = []
    for kind in kinds:
        resolved = kind_for_metric(metric) if kind == "auto" else kind
        for target in targets:
            runs = []
            for r in range(repeats):
                order = np.arange(len(ok)) if r == 0 else np.random.default_rng(seed + r).permutation(len(ok))
                runs.append(tau_of_predictions(encoded[order], preds[order], library.y_val, resolved, n_train,
                                               n_test_pairs, seed=seed + r, target=target))
            results.append(_summarise(resolved, target, runs))
    return {"dataset": library.name, "metric": metric, "library_size": len(library), "n_successful": int(len(ok)),
            "n_train": n_train, "kinds": results}


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
    """The live protocol: evaluate ``n_configs`` random configurations (resumable), then measure tau."""
    from optdiv.data import load_dataset, split
    from optdiv.engine.search import resolve_metric, search
    from optdiv.spaces import get_space
    from optdiv.storage.files import RunStore

    dataset = load_dataset(data)
    splits = split(dataset, seed=seed)
    metric = resolve_metric(None, dataset.task)
    n_classes = None if dataset.classes is None else len(dataset.classes)
    start = time.perf_counter()
    result = search(splits, dataset.task, n_classes=n_classes, method="rs-", space=space, budget=n_configs,
                    time_limit=time_limit, seed=seed, store=RunStore(out))
    space_obj = get_space(space, dataset.task)
    ok = [obs for obs in result.history if obs.status == "ok"]
    if len(ok) < n_train + 2:
        raise RuntimeError(f"only {len(ok)} successful runs; need more than {n_train + 1}")
    kind = kind if kind != "auto" else kind_for_metric(metric)
    taus = tau_of_predictions(space_obj.encode([obs.config for obs in ok]), np.stack([obs.val_pred for obs in ok]),
                              splits.y_val, kind, n_train, n_test_pairs, seed=seed)
    return {"dataset": dataset.name, "kind": kind, "n_successful": len(ok), "n_train": n_train, **taus,
            "seconds": time.perf_counter() - start}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", help="live mode: run directory (resumable cache of the evaluations)")
    parser.add_argument("--library", type=int, help="use the first N members of a replay library instead of fitting")
    parser.add_argument("--cache", default=".cache", help="where replay libraries are kept (with --library)")
    parser.add_argument("--metric", help="with --library: the metric whose OptDiv kind 'auto' means (default: "
                                         "error / mse)")
    parser.add_argument("--repeats", type=int, default=1, help="with --library: train / held-out partitions")
    parser.add_argument("--kind", default="divbo", help="diversity kind(s), comma-separated; 'auto' is the "
                                                        "metric's OptDiv kind (live mode: one kind)")
    parser.add_argument("--target", default="raw", help="with --library: the surrogate's training target(s), "
                                                        "comma-separated: raw, rank")
    parser.add_argument("--space", default="autosklearn")
    parser.add_argument("--n-configs", type=int, default=300)
    parser.add_argument("--n-train", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=120.0, help="wall-time limit of one evaluation")
    args = parser.parse_args(argv)
    if args.library is not None:
        from optdiv.bench.library import load_library

        library = load_library(args.data, args.cache, args.library, 0, args.space)
        report = library_tau(library, args.kind.split(","), args.metric, args.n_train, repeats=args.repeats,
                             seed=args.seed, targets=args.target.split(","))
    else:
        if not args.out:
            parser.error("--out is required without --library")
        report = surrogate_tau(args.data, args.out, args.kind, args.space, args.n_configs, args.n_train,
                               seed=args.seed, time_limit=args.time_limit)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
