"""Test environments for optdiv: one nox session per stack.

    nox -s tests          core tests, Python 3.11, newest numpy/scikit-learn/lightgbm, dask.distributed
    nox -s autosklearn    Python 3.9,  auto-sklearn 0.15.0 (scikit-learn 0.24, ConfigSpace 0.4.21)
    nox -s openbox        Python 3.11, OpenBox 0.9.0 (ConfigSpace 0.6.1, numpy<2)
    nox -s autogluon      Python 3.11, AutoGluon-Tabular 1.6.3 with LightGBM, CatBoost, XGBoost (no torch)

Every session is built from nothing unless ``-r`` (reuse) is given. Each host
session installs its pins and ``-e .[dev]`` in ONE resolver call, so the
resolver picks versions that satisfy the host and optdiv together, then runs
``tests/core`` plus that host's directory ``tests/hosts/<host>_host/`` with
``OPTDIV_REQUIRE_HOST=<host>`` (see tests/hosts/conftest.py: with it set, a host that
fails to import is a test failure, not a skip).

Tests that assert on the wall clock carry the ``timing`` marker and run alone,
once, in the ``tests`` session. Every other library test runs on all cores
(pytest-xdist); the hosts' own tests run one at a time, as the hosts fit with
their own time limits.

Extra arguments after ``--`` go to pytest, e.g. ``nox -s openbox -- -x -k smoke``; test paths given
there replace the session's own (``nox -r -s openbox -- tests/hosts/openbox_host``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import Sequence

import nox

# --------------------------------------------------------------------------- #
# What each session installs and runs.
# --------------------------------------------------------------------------- #

CORE_TESTS = "tests/core"

#: The standalone engine's tests, by concept: data, spaces, evaluation, engine (search, loop, runners, time budget,
#: options), storage, show and the scikit-learn estimators. tests/bench, tests/benchmarks and the command line's
#: tests run in the `tests` session only.
ENGINE_TESTS = ["tests/data", "tests/spaces", "tests/evaluation", "tests/engine", "tests/storage", "tests/show",
                "tests/estimators"]

#: Pins per host, installed together with ``-e .[dev]`` in a single call.
#: Keep them in step with the matching extras in pyproject.toml.
HOST_PINS: dict[str, list[str]] = {
    "autosklearn": [
        "auto-sklearn==0.15.0",
        "numpy<1.24",  # scikit-learn 0.24 / auto-sklearn use removed numpy aliases
        "scipy<1.11",
        "distributed<2025.4",  # auto-sklearn's n_jobs>1 breaks on newer dask.distributed
        "setuptools<81",  # auto-sklearn and smac import pkg_resources (gone in setuptools 81+)
    ],
    "openbox": [
        "openbox==0.9.0",
        "numpy<2",  # ConfigSpace 0.6 wheels are built against numpy 1
        "scipy<1.13",
        "scikit-learn<1.4",
        "ConfigSpace==0.6.1",  # ConfigSpace 1.x breaks openbox 0.9
    ],
    # The tree-model extras only (catboost, xgboost-cpu): never [all] or any extra that pulls torch.
    "autogluon": ["autogluon.tabular[lightgbm,catboost,xgboost]==1.6.3"],
}

#: Python version per host session.
HOST_PYTHON: dict[str, str] = {
    "autosklearn": "3.9",
    "openbox": "3.11",
    "autogluon": "3.11",
}

#: Library tests per host session: the core suite on every stack, and the engine on the older stacks too
#: (ConfigSpace 0.4.21 + scikit-learn 0.24 for auto-sklearn, ConfigSpace 0.6.1 + scikit-learn 1.3 for OpenBox),
#: since the host adapters build on it there. Each session also runs its host's own `tests/hosts/<host>_host`.
HOST_LIBRARY_TESTS: dict[str, list[str]] = {
    "autosklearn": [CORE_TESTS, *ENGINE_TESTS],
    "openbox": [CORE_TESTS, *ENGINE_TESTS],
    "autogluon": [CORE_TESTS],
}

#: Marker expressions of the two phases of a session (see the `timing` marker in pyproject.toml): tests that
#: assert on the wall clock run alone and only in the `tests` session (they do not depend on the library stack);
#: the rest share every core.
TIMING = "timing and not slow"
NOT_TIMING = "not timing and not slow"

#: Import name of each host, used for the post-install sanity check.
HOST_MODULE: dict[str, str] = {
    "autosklearn": "autosklearn",
    "openbox": "openbox",
    "autogluon": "autogluon.tabular",
}

TESTS_PYTHON = "3.11"

# --------------------------------------------------------------------------- #
# Interpreter discovery.
#
# A pyenv shim for python3.X may be on PATH and still fail ("command not
# found ... exists in 3.X.Y") when 3.X is not pyenv's active version. For every
# version we need, check that `python3.X` really runs; if not, look for an
# installed pyenv version 3.X.* and put its bin directory first on PATH, where
# nox's interpreter discovery (and uv, which nox hands the resolved path) will
# find it. Never download an interpreter: only PyPI is reachable.
# --------------------------------------------------------------------------- #

os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
nox.options.download_python = "never"


def _runs(exe: str) -> bool:
    try:
        return (
            subprocess.run(
                [exe, "--version"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def _version_key(path: str) -> tuple[int, ...]:
    tail = os.path.basename(os.path.dirname(os.path.dirname(path)))
    try:
        return tuple(int(p) for p in tail.split("."))
    except ValueError:
        return (-1,)


def _pyenv_python(version: str) -> str | None:
    """Absolute path of the newest pyenv-installed ``python<version>``, if any."""
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            out = subprocess.run(
                [pyenv, "root"], capture_output=True, text=True, timeout=30, check=False
            )
            if out.returncode == 0 and out.stdout.strip():
                roots.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    roots.append(os.path.expanduser("~/.pyenv"))  # pyenv's default root
    for root in dict.fromkeys(roots):
        candidates = sorted(
            glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
            key=_version_key,
            reverse=True,
        )
        for exe in candidates:
            if _runs(exe):
                return exe
    return None


def _ensure_python_on_path(version: str) -> None:
    if _runs(f"python{version}"):
        return
    exe = _pyenv_python(version)
    if exe is None:
        return  # nox then reports the interpreter as missing for that session
    bindir = os.path.dirname(exe)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


for _v in sorted({TESTS_PYTHON, *HOST_PYTHON.values()}):
    _ensure_python_on_path(_v)

# --------------------------------------------------------------------------- #
# Sessions.
# --------------------------------------------------------------------------- #

nox.options.sessions = ["tests", *HOST_PINS]
nox.options.reuse_existing_virtualenvs = False  # build from nothing; `-r` reuses
nox.options.error_on_missing_interpreters = True  # a missing Python fails, not skips

VENV_BACKEND = "uv|virtualenv"


def _report_versions(session: nox.Session, *extra: str) -> None:
    mods = ["numpy", "scipy", "sklearn", "lightgbm", "ConfigSpace", *extra]
    code = (
        "import importlib, sys\n"
        "print('python', sys.version.split()[0])\n"
        f"for m in {mods!r}:\n"
        "    mod = importlib.import_module(m)\n"
        "    print(m, getattr(mod, '__version__', '?'))\n"
    )
    session.run("python", "-c", code, silent=False)


def _run_pytest(session: nox.Session, env: dict[str, str], *, alone: Sequence[str] = (), shared: Sequence[str] = (),
                one_at_a_time: Sequence[str] = ()) -> None:
    """pytest in up to three phases: ``alone`` (the `timing` tests, nothing beside them), ``shared`` (the rest,
    spread over every core), ``one_at_a_time`` (host fits, serially, all their markers but `slow`).

    No success_codes: any non-zero pytest exit (failures, errors, or 5 = "no tests collected") fails the
    session. Test paths or a marker expression given after `--` replace the session's own and run in one serial
    call (`nox -r -s openbox -- tests/hosts/openbox_host -x`, `nox -r -s tests -- -m slow`).
    """
    chosen = [a for a in session.posargs if not a.startswith("-") and os.path.exists(a.split("::")[0])]
    options = ["-ra", *[a for a in session.posargs if a not in chosen]]
    if chosen or "-m" in options:
        paths = chosen or list(dict.fromkeys([*alone, *shared, *one_at_a_time]))
        session.run("pytest", *paths, *options, env=env)
        return
    if alone:
        session.run("pytest", *alone, "-m", TIMING, *options, env=env)
    if shared:
        session.run("pytest", *shared, "-m", NOT_TIMING, "-n", "auto", *options, env=env)
    if one_at_a_time:
        session.run("pytest", *one_at_a_time, *options, env=env)


@nox.session(python=TESTS_PYTHON, venv_backend=VENV_BACKEND)
def tests(session: nox.Session) -> None:
    """Core tests against the newest numpy / scikit-learn / lightgbm, with Dask for the parallel engine."""
    session.install("-e", ".[dev,dask,catboost]")
    _report_versions(session)
    paths = ["--ignore=tests/hosts"]
    _run_pytest(session, {"OPTDIV_REQUIRE_HOST": ""}, alone=paths, shared=paths)


def _host_session(host: str):
    def run(session: nox.Session) -> None:
        session.install("-e", ".[dev]", *HOST_PINS[host])
        _report_versions(session, HOST_MODULE[host])
        if host == "autogluon":
            # Guard: the environment must stay torch-free.
            session.run(
                "python",
                "-c",
                "import importlib.util, sys; "
                "sys.exit('torch is installed in the autogluon env' "
                "if importlib.util.find_spec('torch') else 0)",
            )
        _run_pytest(session, {"OPTDIV_REQUIRE_HOST": host}, shared=HOST_LIBRARY_TESTS[host],
                    one_at_a_time=[f"tests/hosts/{host}_host"])

    run.__name__ = host
    run.__doc__ = f"{' + '.join(HOST_LIBRARY_TESTS[host])} + tests/hosts/{host}_host with {' '.join(HOST_PINS[host])}"
    return nox.session(name=host, python=HOST_PYTHON[host], venv_backend=VENV_BACKEND)(run)


autosklearn = _host_session("autosklearn")
openbox = _host_session("openbox")
autogluon = _host_session("autogluon")
