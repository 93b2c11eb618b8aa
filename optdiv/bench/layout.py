"""Where a bench directory keeps what it writes, shared by the harness that writes it, the report that reads it and
``optdiv show`` (which points a bench directory to ``optdiv report``). Each run's ``result.json`` is named by
:data:`optdiv.storage.layout.RESULT_NAME`, as a run directory's is."""

from __future__ import annotations

from pathlib import Path

#: One row per finished run (rebuilt from the runs on start).
RESULTS_NAME = "results.csv"
#: The bench's settings, checked on resume.
BENCH_NAME = "bench.json"
#: Per-checkpoint trace of one run (optdiv.bench.trace).
TRACE_NAME = "trace.csv"


def run_dir(out: Path, dataset: str, metric: str, method: str, seed: int) -> Path:
    """``out/runs/<dataset>/<metric>/<method>/seed-<seed>``: one run's result.json and trace.csv."""
    return Path(out) / "runs" / str(dataset) / metric / method / f"seed-{seed}"
