"""The package's layout: no import cycle, no private name borrowed across modules, and the old ``optdiv.cash``
paths still importable (with a DeprecationWarning naming the new home) and giving the same objects, pickles that
name them included."""

from __future__ import annotations

import ast
import importlib
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import optdiv

PACKAGE = Path(optdiv.__file__).resolve().parent


def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["optdiv", *path.relative_to(PACKAGE).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict):
    """(module imported, names taken from it) for every import statement of the module, lazy ones inside functions
    included and ``if TYPE_CHECKING:`` blocks left out (they never run)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}", ()
                elif base in modules:
                    yield base, (alias.name,)


def _graph():
    modules = _modules()
    return {name: {target for target, _ in _imports(name, path, modules) if target != name}
            for name, path in modules.items()}


def test_no_module_imports_one_that_imports_it_back():
    graph, cycles, index, low, stack, on = _graph(), [], {}, {}, [], set()

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_private_name_is_imported_from_another_module():
    modules = _modules()
    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")  # dunders (__version__) are public

    borrowed = [f"{name} takes {names[0] if names else target} from {target}"
                for name, path in modules.items() for target, names in _imports(name, path, modules)
                if target != name and (private(target.rpartition(".")[2]) or any(map(private, names)))]
    assert borrowed == []


OLD_AND_NEW = [
    ("optdiv.cash.engine", "search", "optdiv.engine.search"),
    ("optdiv.cash.engine", "run", "optdiv.engine.run"),
    ("optdiv.cash.engine", "fit_model", "optdiv.final.fit"),
    ("optdiv.cash.engine", "SearchResult", "optdiv.engine.result"),
    ("optdiv.cash.estimators", "OptDivClassifier", "optdiv.sklearn"),
    ("optdiv.cash.run_config", "RunConfig", "optdiv.config"),
    ("optdiv.cash.spaces", "get_space", "optdiv.spaces"),
    ("optdiv.cash.spaces.base", "SearchSpace", "optdiv.spaces.base"),
    ("optdiv.cash.baselines.dacopt", "DACOpt", "optdiv.strategies.dacopt"),
    ("optdiv.cash.optimizers", "Optimizer", "optdiv.strategies.model_based"),
    ("optdiv.cash.methods", "METHODS", "optdiv.strategies.methods"),
    ("optdiv.cash.final_ensemble", "EnsembleModel", "optdiv.final.model"),
    ("optdiv.cash.final_ensemble", "choose_members", "optdiv.final.choice"),
    ("optdiv.cash.store", "RunStore", "optdiv.storage.files"),
    ("optdiv.cash.runners", "SequentialRunner", "optdiv.execution.sequential"),
    ("optdiv.cash.parallel", "DaskRunner", "optdiv.execution.dask_runner"),
    ("optdiv.cash.encoding", "ConfigEncoder", "optdiv.spaces.encoding"),
]


@pytest.mark.parametrize("old,name,new", OLD_AND_NEW)
def test_an_old_module_path_warns_and_gives_the_new_object(old, name, new):
    for module in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[module]  # imported by an earlier test: import it afresh, so it warns again
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .* import "):
        moved = importlib.import_module(old)
    assert getattr(moved, name) is getattr(importlib.import_module(new), name)


def test_every_old_module_path_still_imports():
    from optdiv.cash import MOVED

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old in MOVED:
            assert importlib.import_module(f"optdiv.cash.{old}").__name__ == f"optdiv.cash.{old}"


def _old_path_pickle(obj, new_module: str, old_module: str) -> bytes:
    """``obj`` pickled as a release with the old layout wrote it: its class under ``old_module``."""
    data = pickle.dumps(obj, protocol=0)  # protocol 0 names classes as text lines "c<module>\\n<name>"
    old = data.replace(f"c{new_module}\n".encode(), f"c{old_module}\n".encode())
    assert old != data
    return old


def test_models_pickled_with_old_class_paths_still_load():
    from sklearn.tree import DecisionTreeRegressor

    from optdiv.evaluation.fitting import FoldBag
    from optdiv.evaluation.target_range import RangeClippedRegressor
    from optdiv.final.model import EnsembleModel

    X, y = pd.DataFrame(np.arange(20, dtype=float).reshape(10, 2), columns=["a", "b"]), np.arange(10, dtype=float)
    member = RangeClippedRegressor(DecisionTreeRegressor(random_state=0)).fit(X, y)
    model = EnsembleModel([member], np.ones(1), "regression", None, ["a", "b"], [{"index": 0}])
    data = _old_path_pickle(model, "optdiv.final.model", "optdiv.cash.final_ensemble")
    data = data.replace(b"coptdiv.evaluation.target_range\n", b"coptdiv.cash.target_range\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = pickle.loads(data)
        bag = pickle.loads(_old_path_pickle(FoldBag([member, member], "regression"), "optdiv.evaluation.fitting",
                                            "optdiv.cash.fitting"))
    assert type(loaded) is EnsembleModel and type(loaded.members[0]) is RangeClippedRegressor
    np.testing.assert_allclose(loaded.predict(X), model.predict(X))
    assert type(bag) is FoldBag
