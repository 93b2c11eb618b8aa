"""Where a bench directory keeps each run, shared by the harness that writes it and the report that reads it (the
file names are :mod:`optdiv.storage.layout`'s)."""

from __future__ import annotations

from pathlib import Path


def run_dir(out: Path, dataset: str, metric: str, method: str, seed: int) -> Path:
    """``out/runs/<dataset>/<metric>/<method>/seed-<seed>``: one run's result.json and trace.csv."""
    return Path(out) / "runs" / str(dataset) / metric / method / f"seed-{seed}"
