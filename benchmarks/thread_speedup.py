"""How much faster each threaded algorithm fits on more threads: what a final refit on every core saves.

Under a time budget the product evaluates one configuration per core, each on one thread, and refits the final
members afterwards on every core, while the time the search keeps back for those refits is predicted from the
evaluations' one-thread fit times. Dividing that prediction by these speedups was tried and not kept (the searches
used the time, and more final refits were skipped or cut: docs/results.md). This fits each algorithm's library
default of the built-in auto-sklearn space on a synthetic table (the same generator as benchmarks/refit_scaling.py,
so no benchmark dataset sets the figure) on one thread and on ``--threads``, and prints the speedup and the exponent
``b`` of ``speedup = (threads ratio) ** b``::

    python benchmarks/thread_speedup.py --rows 20000 --threads 2

Each fit is repeated ``--repeats`` times and the fastest kept.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

from refit_scaling import data


def fit_seconds(space, config, X, y, task: str, threads: int) -> float:
    from threadpoolctl import threadpool_limits

    from optdiv.evaluation.fitting import build_pipeline
    from optdiv.evaluation.threads import with_threads

    pipe = build_pipeline(with_threads(space.build, threads), config, X, 0, task)
    with threadpool_limits(limits=threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        began = time.perf_counter()
        pipe.fit(X, y)
        return time.perf_counter() - began


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--task", default="classification", choices=["classification", "regression"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--algorithms", default="lightgbm,gradient_boosting,extra_trees,random_forest,"
                                                "k_nearest_neighbors")
    args = parser.parse_args(argv)
    from optdiv.spaces import get_space
    from optdiv.spaces.portfolio import library_defaults

    X, y = data(args.rows, args.task)
    space = get_space("autosklearn", args.task)
    wanted = {a for a in args.algorithms.split(",") if a}
    for config in library_defaults("autosklearn", args.task):
        algorithm = space.algorithm_of(config)
        if algorithm not in wanted:
            continue
        seconds = {t: min(fit_seconds(space, config, X, y, args.task, t) for _ in range(args.repeats))
                   for t in (1, args.threads)}
        speedup = seconds[1] / max(seconds[args.threads], 1e-9)
        print(json.dumps({"algorithm": algorithm, "rows": args.rows, "threads": args.threads,
                          "one_thread_s": round(seconds[1], 3), "threaded_s": round(seconds[args.threads], 3),
                          "speedup": round(speedup, 2),
                          "exponent": round(math.log(max(speedup, 1e-9)) / math.log(args.threads), 2)}), flush=True)


if __name__ == "__main__":
    main()
