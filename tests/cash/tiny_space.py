"""A two-algorithm search space whose models fit in milliseconds, for engine tests.

Top-level builders so the evaluator's spawned worker can import them; ``crash`` lets a test plant a
configuration that always raises.
"""

from __future__ import annotations

from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from optdiv.cash import cs_compat
from optdiv.cash.spaces import SearchSpace


def build(config, seed):
    algorithm = config["algorithm"]
    if algorithm == "crash":
        raise RuntimeError("this configuration always fails")
    if algorithm == "linear":
        if config["task"] == "classification":
            return make_pipeline(StandardScaler(), LogisticRegression(C=config["C"], max_iter=300))
        return make_pipeline(StandardScaler(), Ridge(alpha=1.0 / config["C"]))
    tree = DecisionTreeClassifier if config["task"] == "classification" else DecisionTreeRegressor
    return tree(max_depth=config["depth"], min_samples_leaf=config["leaf"], random_state=seed)


def tiny_space(task: str, with_crash: bool = False) -> SearchSpace:
    space = cs_compat.new_space("tiny", seed=0)
    algorithms = ["linear", "tree"] + (["crash"] if with_crash else [])
    algorithm = cs_compat.categorical("algorithm", algorithms, default="linear")
    c = cs_compat.uniform_float("C", 1e-3, 1e3, default=1.0, log=True)
    depth = cs_compat.uniform_int("depth", 1, 12, default=3)
    leaf = cs_compat.uniform_int("leaf", 1, 30, default=1)
    task_hp = cs_compat.constant("task", task)
    cs_compat.add_hyperparameters(space, [algorithm, c, depth, leaf, task_hp])
    cs_compat.add_conditions(
        space,
        [
            cs_compat.equals(c, algorithm, "linear"),
            cs_compat.equals(depth, algorithm, "tree"),
            cs_compat.equals(leaf, algorithm, "tree"),
        ],
    )
    return SearchSpace.from_configspace(space, build, task, name="tiny", algorithm_key="algorithm")
