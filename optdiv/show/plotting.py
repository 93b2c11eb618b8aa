"""Matplotlib for every figure optdiv draws (``optdiv show``, the estimators' ``show``, ``optdiv report``).

Matplotlib is the optional ``plot`` extra, so it is imported only when a figure is drawn, and a missing one is said
in one message naming the extra instead of leaving the figures silently out. Figures are built on
:class:`matplotlib.figure.Figure` rather than pyplot, so drawing never switches a notebook's backend or keeps
figures alive in pyplot's registry, and they are saved atomically, so a reader of a run directory that is
redrawn never sees half a PNG.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from optdiv.storage.atomic import atomic_write

#: How to get matplotlib, named wherever a figure had to be left out.
PLOT_EXTRA = 'pip install "optdiv[plot]"'
MISSING_MATPLOTLIB = f"figures need matplotlib, which is not installed: {PLOT_EXTRA}"


class PlottingUnavailable(ImportError):
    """Matplotlib is not installed; the message says how to install it."""


def available() -> bool:
    """Whether matplotlib can be imported (checked before a command starts drawing, so it says so once)."""
    try:
        _figure_class()
    except PlottingUnavailable:
        return False
    return True


def _figure_class():
    try:
        import matplotlib  # noqa: F401 (the package itself: a stale submodule in sys.modules must not pass)
        from matplotlib.figure import Figure
    except ImportError:
        raise PlottingUnavailable(MISSING_MATPLOTLIB) from None
    return Figure


def new_figure(width: float, height: float, constrained: bool = False):
    """A matplotlib Figure of ``width`` x ``height`` inches, with no pyplot state; PlottingUnavailable without
    matplotlib. ``constrained``: constrained layout, which makes room for a colour bar shared by several axes."""
    figure = _figure_class()
    return figure(figsize=(width, height), constrained_layout=True) if constrained else figure(figsize=(width, height))


def integer_ticks(axis) -> None:
    """Whole-number ticks on a matplotlib axis that counts (evaluations, members)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def save_png(fig, path: Union[str, os.PathLike], dpi: int = 100) -> Path:
    """Write ``fig`` to ``path`` as PNG through a temporary file in the same folder and ``os.replace``, as readable
    as any file the user writes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=dpi), mode=0o666)
    return path
