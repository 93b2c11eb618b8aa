"""Deprecated: the modules of ``optdiv.cash`` moved to packages named after what they hold.

``optdiv.cash`` was one flat package for the whole engine. Its modules now live in ``optdiv.spaces``,
``optdiv.strategies``, ``optdiv.evaluation``, ``optdiv.execution``, ``optdiv.engine``, ``optdiv.storage``,
``optdiv.final``, ``optdiv.show``, ``optdiv.config``, ``optdiv.data`` and ``optdiv.sklearn`` (:data:`MOVED` says
where each went). For one release every old module path still imports, with a DeprecationWarning naming its new home,
and gives the very objects of the new modules, so code written against ``optdiv.cash.*`` keeps working and models
pickled with old class paths (``optdiv.cash.final_ensemble.EnsembleModel``, ``optdiv.cash.fitting.FoldBag``, ...)
still load. One meta-path finder serves them all; no module is imported before it is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Dict, Tuple

#: Each old module (its name under optdiv.cash) and the modules its names live in now, its main home first.
MOVED: Dict[str, Tuple[str, ...]] = {
    "baselines": ("optdiv.strategies",),
    "baselines._common": ("optdiv.strategies.base",),
    **{f"baselines.{name}": (f"optdiv.strategies.{name}",)
       for name in ("admm", "admm_steps", "contest", "dacopt", "ensemble_optimization", "evolution", "per_algorithm",
                    "rising_bandit")},
    "budget": ("optdiv.budget",),
    "candidates": ("optdiv.spaces.candidates",),
    "constraints": ("optdiv.evaluation.constraints",),
    "cs_compat": ("optdiv.spaces.cs_compat",),
    "data": ("optdiv.data",),
    "encoding": ("optdiv.spaces.encoding",),
    "engine": ("optdiv.engine.search", "optdiv.engine.run", "optdiv.engine.result", "optdiv.final.fit",
               "optdiv.final.reserve"),
    "estimators": ("optdiv.sklearn",),
    "evaluator": ("optdiv.evaluation.evaluator",),
    "faults": ("optdiv.evaluation.faults", "optdiv.evaluation.fault_plan"),
    "final_ensemble": ("optdiv.final.choice", "optdiv.final.model"),
    "fitting": ("optdiv.evaluation.fitting",),
    "loop": ("optdiv.engine.loop",),
    "methods": ("optdiv.strategies.methods", "optdiv.strategies.registry"),
    "observation": ("optdiv.evaluation.observation",),
    "optimizers": ("optdiv.strategies.model_based", "optdiv.strategies.base"),
    "parallel": ("optdiv.execution.dask_runner",),
    "pipelines": ("optdiv.evaluation.pipelines",),
    "plotting": ("optdiv.show.plotting",),
    "portfolio": ("optdiv.spaces.portfolio",),
    "run_config": ("optdiv.config",),
    "runners": ("optdiv.execution.runner", "optdiv.execution.sequential", "optdiv.execution.factory"),
    "show": ("optdiv.show.view",),
    "sklearn_inputs": ("optdiv.sklearn_inputs",),
    "spaces": ("optdiv.spaces",),
    "spaces._assembly": ("optdiv.spaces.assembly",),
    "spaces._sklearn": ("optdiv.spaces.sklearn_models",),
    "spaces.autogluon_space": ("optdiv.spaces.autogluon_space",),
    "spaces.autosklearn_space": ("optdiv.spaces.autosklearn_space",),
    "spaces.base": ("optdiv.spaces.base",),
    "store": ("optdiv.storage.files", "optdiv.storage.base", "optdiv.storage.issued", "optdiv.storage.atomic",
              "optdiv.storage.layout"),
    "target_range": ("optdiv.evaluation.target_range",),
    "worker": ("optdiv.evaluation.worker",),
}

#: The old modules that were packages (their submodules are old paths too).
PACKAGES = ("baselines", "spaces")


class MovedModule(types.ModuleType):
    """An old module path: its names are looked up in its new modules, in order, so they are the same objects."""

    def __init__(self, name: str, homes: Tuple[types.ModuleType, ...]):
        super().__init__(name)
        self.__dict__["homes"] = homes

    def __getattr__(self, name: str):
        homes = self.__dict__.get("homes", ())
        for home in homes:
            if hasattr(home, name):
                return getattr(home, name)
        raise AttributeError(f"module {self.__name__!r} (moved to {', '.join(h.__name__ for h in homes)}) has no "
                             f"attribute {name!r}")

    def __dir__(self):
        return sorted({name for home in self.__dict__.get("homes", ()) for name in dir(home)} | set(self.__dict__))


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds every old module path under optdiv.cash and loads it as a :class:`MovedModule` of its new homes."""

    prefix = __name__ + "."

    def find_spec(self, fullname, path=None, target=None):
        old = fullname[len(self.prefix):] if fullname.startswith(self.prefix) else None
        if old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=old in PACKAGES)

    def create_module(self, spec):
        return None  # the default module; exec_module puts the moved one in its place

    def exec_module(self, module):
        homes = MOVED[module.__name__[len(self.prefix):]]
        also = f" (its other names are in {', '.join(homes[1:])})" if len(homes) > 1 else ""
        warnings.warn(f"{module.__name__} is deprecated and will be removed in the next release: import "
                      f"{homes[0]} instead{also}", DeprecationWarning, stacklevel=2)
        moved = MovedModule(module.__name__, tuple(importlib.import_module(home) for home in homes))
        moved.__spec__, moved.__loader__, moved.__package__ = module.__spec__, self, module.__package__
        if module.__spec__.submodule_search_locations is not None:
            moved.__path__ = []
        sys.modules[module.__name__] = moved  # the import system hands out what sys.modules holds after exec


def __getattr__(name: str):
    """``optdiv.cash.engine`` and the like without an import statement, as the old package's modules were."""
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModuleFinder())
