"""Gate the host tests on their host framework being importable.

Tests live in ``tests/hosts/<host>_host/``; the directory name says which host a
test needs (the ``_host`` suffix keeps a folder named like the package, e.g.
``openbox``, from shadowing the real package as a namespace package). For each such test:

* host importable                      -> the test runs;
* host missing, OPTDIV_REQUIRE_HOST unset (or names another host)
                                       -> the test is SKIPPED, with the reason;
* host missing, OPTDIV_REQUIRE_HOST=<host>
                                       -> the run FAILS (usage error before
                                          any test runs).

The nox host sessions set ``OPTDIV_REQUIRE_HOST``, so a broken host
environment can never pass as "all skipped". Import the host package inside
the test functions (not at module top level), so that collection itself never
needs the host.
"""

from __future__ import annotations

import functools
import importlib
import os
from pathlib import Path

import pytest

#: host directory name under tests/hosts/ -> module that must import
HOST_MODULES = {
    "autosklearn": "autosklearn.classification",
    "openbox": "openbox",
    "autogluon": "autogluon.tabular",
}

ENV_VAR = "OPTDIV_REQUIRE_HOST"
HOST_DIR_SUFFIX = "_host"
_HOSTS_DIR = Path(__file__).resolve().parent


def _required_host() -> str | None:
    return os.environ.get(ENV_VAR, "").strip() or None


@functools.lru_cache(maxsize=None)
def _import_problem(host: str) -> str | None:
    """None if the host imports, else a one-line description of why not."""
    try:
        importlib.import_module(HOST_MODULES[host])
    except Exception as exc:  # ImportError, but also crashes in a broken env
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


def _host_of(path: Path) -> str | None:
    try:
        rel = Path(path).resolve().relative_to(_HOSTS_DIR)
    except ValueError:
        return None
    if len(rel.parts) < 2 or not rel.parts[0].endswith(HOST_DIR_SUFFIX):
        return None
    host = rel.parts[0][: -len(HOST_DIR_SUFFIX)]
    return host if host in HOST_MODULES else None


def pytest_configure(config: pytest.Config) -> None:
    host = _required_host()
    if host is not None and host not in HOST_MODULES:
        raise pytest.UsageError(
            f"{ENV_VAR}={host!r} is not a known host; use one of {sorted(HOST_MODULES)}"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    required = _required_host()
    if required is not None:
        problem = _import_problem(required)
        if problem is not None:
            raise pytest.UsageError(
                f"{ENV_VAR}={required} but {HOST_MODULES[required]} does not import: {problem}"
            )
    for item in items:
        host = _host_of(item.path)
        if host is None:
            continue
        item.add_marker(pytest.mark.host)
        problem = _import_problem(host)
        if problem is not None:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{host} not available ({problem}); "
                    f"set {ENV_VAR}={host} to make this a failure"
                )
            )
