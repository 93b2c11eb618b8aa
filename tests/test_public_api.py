"""The package's short public API: every name resolves, and importing optdiv loads no heavy library."""

import subprocess
import sys

import optdiv


def test_every_exported_name_resolves_to_the_real_object():
    from optdiv.config import RunConfig
    from optdiv.core.selector import DiversityAwareSelector
    from optdiv.data import Splits
    from optdiv.engine.result import SearchResult
    from optdiv.engine.run import run
    from optdiv.engine.search import search
    from optdiv.sklearn import OptDivClassifier, OptDivRegressor
    from optdiv.spaces.base import SearchSpace

    assert (optdiv.OptDivClassifier, optdiv.OptDivRegressor, optdiv.RunConfig, optdiv.run, optdiv.search,
            optdiv.SearchResult, optdiv.SearchSpace, optdiv.Splits, optdiv.DiversityAwareSelector) == (
        OptDivClassifier, OptDivRegressor, RunConfig, run, search, SearchResult, SearchSpace, Splits,
        DiversityAwareSelector)
    assert set(optdiv.__all__) <= set(dir(optdiv))
    assert "optdivbo" in optdiv.methods() and "bo-es" in optdiv.methods()


def test_no_module_shadows_an_exported_name():
    """Importing ``optdiv.X`` sets the attribute ``X`` of optdiv: a module named like an export would replace it."""
    import pkgutil

    modules = {info.name for info in pkgutil.iter_modules(optdiv.__path__)}
    assert modules.isdisjoint(optdiv.__all__)


def test_importing_optdiv_loads_no_heavy_library():
    code = "import sys, optdiv; print(sorted(m for m in ('sklearn', 'lightgbm', 'pandas', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error():
    try:
        optdiv.OptDivClassifer  # noqa: B018 (a typo a user makes)
    except AttributeError as exc:
        assert "OptDivClassifer" in str(exc)
    else:
        raise AssertionError("a misspelt export must raise AttributeError")
