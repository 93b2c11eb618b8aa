"""How each algorithm's fit time grows with the rows: the exponent behind a refit's predicted time.

A search on a row sample refits its final members on every row; the time kept for those refits is predicted from
each member's fit time on the sample. This measures, per algorithm of the built-in auto-sklearn space (its library
default configuration, one thread), the fit time at growing row counts of a synthetic table and the exponent ``a``
of ``seconds ~ rows ** a`` between consecutive sizes::

    python benchmarks/refit_scaling.py --rows 10000,40000,160000 --task classification

The data is ``make_classification(n_features=30, n_informative=12, n_redundant=6, flip_y=0.03, class_sep=0.8)``
(``make_regression(n_features=30, n_informative=12, noise=10)`` for regression), so no dataset of a benchmark is
used to set the exponents. A size is skipped for an algorithm once its previous fit took over ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings


def data(rows: int, task: str, seed: int = 0):
    import pandas as pd
    from sklearn.datasets import make_classification, make_regression

    if task == "classification":
        X, y = make_classification(n_samples=rows, n_features=30, n_informative=12, n_redundant=6, flip_y=0.03,
                                   class_sep=0.8, random_state=seed)
    else:
        X, y = make_regression(n_samples=rows, n_features=30, n_informative=12, noise=10.0, random_state=seed)
    return pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]), y


def fit_seconds(space, config, X, y, task: str) -> float:
    from optdiv.evaluation.fitting import build_pipeline

    pipe = build_pipeline(space.build, config, X, 0, task)
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X, y)
    return time.perf_counter() - began


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="10000,40000,160000")
    parser.add_argument("--task", default="classification", choices=["classification", "regression"])
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--algorithms", default="", help="comma-separated; default: every library default")
    args = parser.parse_args(argv)
    from optdiv.spaces import get_space
    from optdiv.spaces.portfolio import library_defaults

    sizes = [int(r) for r in args.rows.split(",")]
    frames = {rows: data(rows, args.task) for rows in sizes}
    wanted = {a for a in args.algorithms.split(",") if a}
    space = get_space("autosklearn", args.task)
    for config in library_defaults("autosklearn", args.task):
        algorithm = space.algorithm_of(config)
        if wanted and algorithm not in wanted:
            continue
        times = {}
        for rows in sizes:
            X, y = frames[rows]
            times[rows] = fit_seconds(space, config, X, y, args.task)
            if times[rows] > args.max_seconds:
                break
        measured = sorted(times)
        exponents = [round(math.log(times[b] / times[a]) / math.log(b / a), 2)
                     for a, b in zip(measured, measured[1:]) if times[a] > 0.05]
        print(json.dumps({"algorithm": algorithm, "seconds": {r: round(t, 3) for r, t in times.items()},
                          "exponents": exponents}), flush=True)


if __name__ == "__main__":
    main()
