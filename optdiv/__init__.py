"""optdiv: search for the ensemble, not for one best model (DivBO and OptDivBO).

The short public API, loaded on first use so that ``import optdiv`` (and ``optdiv --version``) stays instant:

- ``OptDivClassifier``, ``OptDivRegressor``: scikit-learn estimators that search inside ``fit``;
- ``run`` (load data, search, save a run directory) and ``search`` (on splits you made), both configured by a
  ``RunConfig``; ``search`` returns a ``SearchResult``;
- ``SearchSpace``: a ConfigSpace space and a builder of estimators, for searching your own space; ``Splits``: the
  train / validation / test rows a search runs on;
- ``methods()``: the method names and what each one is;
- ``DiversityAwareSelector``: the host-neutral suggestion logic on numpy arrays, for embedding in another optimiser.

Host adapters stay in ``optdiv.integrations.<host>`` so that importing optdiv never imports a host.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "OptDivClassifier": "optdiv.sklearn",
    "OptDivRegressor": "optdiv.sklearn",
    "RunConfig": "optdiv.config",
    "run": "optdiv.engine.run",
    "search": "optdiv.engine.search",
    "SearchResult": "optdiv.engine.result",
    "SearchSpace": "optdiv.spaces.base",
    "Splits": "optdiv.data",
    "DiversityAwareSelector": "optdiv.core.selector",
}

__all__ = ["__version__", "methods", *_EXPORTS]


def methods() -> dict:
    """Every method name and its one-line description (what ``optdiv methods`` prints)."""
    from optdiv.strategies.methods import METHODS

    return {name: spec.description for name, spec in METHODS.items()}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'optdiv' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
