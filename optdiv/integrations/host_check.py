"""What the three adapters share to check a host's internals: a failing check is a sentence, never a fallback.

Each adapter lists what it relies on of its host (methods, their parameters, attributes) and raises its own
``HostVersionError`` with every problem found; this module holds the small pieces those lists are made of.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Callable, List, Optional, Sequence, Tuple


def parameters(function) -> tuple:
    """The names of ``function``'s parameters, in order."""
    return tuple(inspect.signature(function).parameters)


def covers(actual, expected) -> Optional[str]:
    """None when every name of ``expected`` is in ``actual``, else which are missing."""
    missing = [name for name in expected if name not in tuple(actual)]
    return None if not missing else f"missing {', '.join(missing)}"


def same(actual, expected) -> Optional[str]:
    """None when ``actual`` and ``expected`` hold the same names in the same order, else both."""
    return None if tuple(actual) == tuple(expected) else f"found {tuple(actual)}, expected {tuple(expected)}"


def refers_to(function, name: str, *, in_constants: bool = False) -> bool:
    """Whether ``function``'s code (nested functions included) names the attribute ``name``, or with
    ``in_constants`` also holds it as a constant (a string key, a state name)."""
    stack = [inspect.unwrap(function).__code__]
    while stack:
        code = stack.pop()
        if name in code.co_names or (in_constants and name in code.co_consts):
            return True
        stack.extend(c for c in code.co_consts if inspect.iscode(c))
    return False


class Problems(list):
    """The problems found so far, one sentence each (empty: the host is as expected)."""

    def check(self, what: str, test: Callable[[], Optional[str]]) -> None:
        """Run ``test``; its message, or the exception it raised, becomes a problem about ``what``."""
        try:
            found = test()
        except Exception as exc:  # an import or attribute that is gone is exactly what this looks for
            found = f"{type(exc).__name__}: {exc}"
        if found:
            self.append(f"{what}: {found}")


def installed(*packages: Tuple[str, str]) -> str:
    """The installed versions of ``(import name, label)`` packages, e.g. "auto-sklearn 0.15.0 with SMAC 1.2", for
    the error message; a package that cannot be imported or has no version reads "(version unknown)"."""
    versions = []
    for module, label in packages:
        try:
            versions.append(f"{label} {importlib.import_module(module).__version__}")
        except Exception:  # not installed or no version attribute
            versions.append(f"{label} (version unknown)")
    return " with ".join(versions)


def raise_on(problems: Sequence[str], error: type, subject: str, written_for: str,
             packages: Sequence[Tuple[str, str]], remedy: str) -> None:
    """Raise ``error`` naming ``subject``, the versions it was written for and those installed (:func:`installed`
    of ``packages``), every problem and the ``remedy``, unless there are no problems: the one wording of the three
    adapters' version errors."""
    if problems:
        raise error(f"optdiv's {subject} was written for {written_for} and relies on internals that differ in this "
                    f"environment ({installed(*packages)}):\n  - " + "\n  - ".join(problems) + f"\n{remedy}")


__all__: List[str] = ["Problems", "covers", "installed", "parameters", "raise_on", "refers_to", "same"]
