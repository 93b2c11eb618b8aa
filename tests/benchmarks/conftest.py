"""Tests of the research code outside the package: the scripts in benchmarks/ (loaded by path, as they are no
package) and the core's speed measurements. The product's ``optdiv bench`` / ``optdiv report`` are in tests/bench."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def load_script(name: str):
    """benchmarks/NAME.py as a module, imported once per session."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # registered first, as an import would, for code that looks itself up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def script():
    """``script("paper")``: a benchmarks/ script's module."""
    return load_script


@pytest.fixture(scope="session")
def library_factory():
    """tests/bench's synthetic replay library builder, shared rather than copied."""
    spec = importlib.util.spec_from_file_location("bench_fixtures", REPO / "tests" / "bench" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_library
