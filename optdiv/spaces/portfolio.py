"""Warm-start portfolios: a short, ordered list of configurations that did well across many datasets.

A search that starts from random configurations spends its first evaluations on models nobody would try
first; under a wall-time budget those are a large part of the run. A portfolio replaces the random initial
design: its configurations are evaluated first, in order, and the strategy takes over after them (the idea
behind auto-sklearn's meta-learned start and AutoGluon's preset model list, with no meta-features: one list
per space and task).

A portfolio is chosen greedily over a loss matrix (configurations x datasets) of replay libraries that share
their configurations: each step adds the configuration that lowers the mean, over datasets, of the best
normalised loss reached so far. The loss of a configuration on a dataset is normalised as its regret against
the dataset's best, divided by the regret of the dataset's median configuration and capped at 1, so every
dataset counts the same whatever its error scale. See docs/method.md ("Warm-start portfolio").

The shipped portfolios live in ``optdiv/spaces/portfolios/SPACE-TASK.json``; ``benchmarks/portfolio.py``
builds them (and leave-one-dataset-out ones for reporting) from libraries.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

PORTFOLIO_DIR = Path(__file__).parent / "portfolios"

#: ``portfolio=`` values that mean "the shipped portfolio of this space and task" / "no portfolio" / "each strong
#: algorithm at its library's defaults" / "the library defaults where they exist, else none" (the estimators' and
#: ``optdiv run``'s default: it won the equal-wall-time race against auto-sklearn and AutoGluon, docs/results.md).
BUILTIN = ("builtin", "default")
NONE = ("none", "off", "random")
DEFAULTS = ("defaults", "library-defaults")
AUTO = ("auto",)

#: ``portfolio="defaults"``: per built-in space and task, the algorithms to try first and the hyperparameters set to
#: their library's own defaults where the space's ranges hold them (LightGBM's 31 leaves and 100 rounds,
#: scikit-learn's 5 neighbours); every other hyperparameter takes the space's default (no feature preprocessing,
#: standardised inputs). Fast, strong learners first. Written down from the libraries' documentation without
#: looking at any dataset (the idea of AutoGluon's fixed default portfolio), so it may be compared on every dataset.
LIBRARY_DEFAULTS = {
    ("autosklearn", "classification"): (
        ("lightgbm", {"num_leaves": 31, "n_estimators": 100, "learning_rate": 0.1, "min_child_samples": 20}),
        ("extra_trees", {}),
        ("random_forest", {}),
        ("gradient_boosting", {}),
        ("k_nearest_neighbors", {"n_neighbors": 5}),
        ("logistic_regression", {}),
        ("libsvm_svc", {}),
    ),
    ("autosklearn", "regression"): (
        ("lightgbm", {"num_leaves": 31, "n_estimators": 100, "learning_rate": 0.1, "min_child_samples": 20}),
        ("extra_trees", {}),
        ("random_forest", {}),
        ("gradient_boosting", {}),
        ("k_nearest_neighbors", {"n_neighbors": 5}),
        ("ridge", {}),
        ("libsvm_svr", {}),
    ),
}
#: The spaces with one more model start from the same list and that model at its library's defaults.
LIBRARY_DEFAULTS.update({(space, task): LIBRARY_DEFAULTS[("autosklearn", task)] + ((model, {}),)
                         for space, model in (("autosklearn+mlp", "mlp"), ("autosklearn+defaultmlp", "mlp"),
                                              ("autosklearn+defaultcatboost", "catboost"))
                         for task in ("classification", "regression")})


def portfolio_path(space_name: str, task: str) -> Path:
    return PORTFOLIO_DIR / f"{space_name}-{task}.json"


def resolve_portfolio(portfolio, space_name: str, task: str) -> Optional[List[Dict]]:
    """The configurations ``portfolio`` stands for: None or "none" (no portfolio), "builtin" (the shipped one
    for this space and task), "defaults" (:data:`LIBRARY_DEFAULTS`), "auto" (those where the space has them,
    else none), a path to a portfolio JSON file, or a list of configuration dicts."""
    if portfolio is None:
        return None
    if isinstance(portfolio, (str, Path)):
        text = str(portfolio)
        if text.lower() in NONE:
            return None
        if text.lower() in AUTO:
            return library_defaults(space_name, task) if (space_name, task) in LIBRARY_DEFAULTS else None
        if text.lower() in DEFAULTS:
            return library_defaults(space_name, task)
        if text.lower() in BUILTIN:
            path = portfolio_path(space_name, task)
            if not path.exists():
                raise ValueError(f"no built-in portfolio for the {space_name!r} space and {task}; "
                                 f"pass portfolio=None or a portfolio file")
        else:
            path = Path(text)
            if not path.exists():
                raise FileNotFoundError(f"portfolio file {path} not found")
        return read_portfolio(path, task)
    configs = [dict(c) for c in portfolio]
    if not configs:
        raise ValueError("an empty portfolio: pass None for a random start")
    return configs


def is_auto_portfolio(portfolio) -> bool:
    return isinstance(portfolio, str) and portfolio.lower() in AUTO


def library_defaults(space_name: str, task: str) -> List[Dict]:
    """The configurations of ``portfolio="defaults"`` for a built-in space (:data:`LIBRARY_DEFAULTS`), checked.
    Completing them against the space takes about a second, paid once per process (every estimator's fit starts
    from them): each call returns fresh copies."""
    return [dict(config) for config in _library_defaults(space_name, task)]


@functools.lru_cache(maxsize=None)
def _library_defaults(space_name: str, task: str) -> tuple:
    from optdiv.spaces import cs_compat
    from optdiv.spaces import get_space

    entries = LIBRARY_DEFAULTS.get((space_name, task))
    if entries is None:
        spaces = sorted({name for name, t in LIBRARY_DEFAULTS if t == task})
        raise ValueError(f"no library-defaults portfolio for the {space_name!r} space ({task}); it exists for "
                         f"{', '.join(spaces)}: pass a portfolio file or None")
    space = get_space(space_name, task)
    choice = space.algorithm_key
    configs = []
    for algorithm, values in entries:
        settings = {choice: algorithm, **{f"{choice.split(':')[0]}:{algorithm}:{k}": v for k, v in values.items()}}
        configs.append(cs_compat.config_to_dict(cs_compat.with_defaults(space.configspace, settings)))
    return tuple(configs)


def read_portfolio(path: Union[str, Path], task: Optional[str] = None) -> List[Dict]:
    """The configurations of a portfolio file, checked against ``task`` when the file names one."""
    payload = json.loads(Path(path).read_text())
    if not isinstance(payload, dict) or not isinstance(payload.get("configs"), list):
        raise ValueError(f"{path} is not a portfolio file (a JSON object with a 'configs' list)")
    if task is not None and payload.get("task") not in (None, task):
        raise ValueError(f"portfolio {path} is for {payload['task']}, not {task}")
    return [dict(c) for c in payload["configs"]]


def write_portfolio(path: Union[str, Path], configs: Sequence[Dict], **info) -> None:
    """Write ``configs`` (in order) with provenance ``info`` (space, task, datasets, how it was chosen)."""
    payload = dict(info)
    payload["configs"] = [dict(c) for c in configs]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")


def normalized_regret(losses: np.ndarray) -> np.ndarray:
    """(configurations, datasets) losses -> regret against each dataset's best, in units of the median
    configuration's regret, capped at 1; a missing or failed run (NaN or inf) counts as 1."""
    losses = np.asarray(losses, dtype=np.float64)
    out = np.ones_like(losses)
    for j in range(losses.shape[1]):
        column = losses[:, j]
        finite = np.isfinite(column)
        if not finite.any():
            continue
        best = column[finite].min()
        scale = np.median(column[finite]) - best
        if scale <= 0:  # at least half of the configurations tie with the best
            out[finite, j] = np.where(column[finite] <= best, 0.0, 1.0)
        else:
            out[finite, j] = np.minimum((column[finite] - best) / scale, 1.0)
    return out


def greedy_portfolio(losses: np.ndarray, size: int, allowed: Optional[np.ndarray] = None,
                     groups: Optional[Sequence] = None, per_group: Optional[int] = None) -> List[int]:
    """Row indices of a greedy portfolio of ``size`` configurations over a (configurations, datasets) loss
    matrix: each step adds the row that most lowers the mean over datasets of the best normalised regret
    reached so far (ties: the lower mean regret, then the lower index). ``allowed`` masks rows that may be
    chosen (e.g. fast enough); with ``groups`` (e.g. each row's algorithm) no group gets more than
    ``per_group`` rows, so a portfolio does not spend itself on one algorithm that suits most datasets."""
    regret = normalized_regret(losses)
    n = regret.shape[0]
    allowed = np.ones(n, dtype=bool) if allowed is None else np.array(allowed, dtype=bool)
    if allowed.shape != (n,):
        raise ValueError("allowed must have one entry per configuration")
    groups = None if groups is None else np.asarray(groups, dtype=object)
    if groups is not None and groups.shape != (n,):
        raise ValueError("groups must have one entry per configuration")
    best = np.ones(regret.shape[1])
    mean_regret = regret.mean(axis=1)
    chosen: List[int] = []
    while len(chosen) < int(size) and allowed.any():
        covered = np.minimum(regret, best).mean(axis=1)
        covered[~allowed] = np.inf
        order = np.lexsort((np.arange(n), mean_regret, covered))
        pick = int(order[0])
        chosen.append(pick)
        allowed[pick] = False
        if groups is not None and per_group is not None and np.sum(groups[chosen] == groups[pick]) >= per_group:
            allowed &= groups != groups[pick]
        best = np.minimum(best, regret[pick])
    return chosen
