"""What produced a bench run: the package versions and a digest of what it searched (replay: the library; live:
the dataset).

A replay run is a pure function of its library, method, seed and code, but a library is real model fitting:
a library rebuilt under another scikit-learn or LightGBM, or after a fit crossed its time limit once and not
the next time, can move every number of a table while every search stays deterministic. Each run records
both, so a report can say whether the runs it puts side by side saw the same candidates. A live run refits on
its dataset, so there the dataset file is what can change under a table unnoticed.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections import Counter, defaultdict
from importlib import metadata
from typing import Dict, Iterable, List, Optional

import numpy as np

PACKAGES = ("optdiv", "numpy", "scipy", "scikit-learn", "lightgbm", "ConfigSpace", "pandas")


def environment() -> Dict[str, str]:
    """Python and the versions of the packages a run's numbers depend on ("absent" where not installed)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def library_digest(library) -> str:
    """16 hex digits of SHA-256 over a library's configurations, success mask, predictions and targets.

    Equal digests mean the same candidates with the same stored outcomes, bit for bit.
    """
    h = hashlib.sha256()
    h.update(json.dumps(library.configs, sort_keys=True, default=str).encode())
    for array in (library.ok, library.val_preds, library.test_preds, library.y_val, library.y_test):
        array = np.ascontiguousarray(array)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def dataset_digest(dataset) -> str:
    """16 hex digits of SHA-256 over a loaded dataset's task, column names, values, target and classes.

    It digests the parsed data, not the file bytes, so it also covers bundled datasets (``sklearn:...``) and is
    not moved by a CSV's line endings, but any changed cell, column or label moves it. Dtype names are left out
    (pandas renames them between versions); a column's values hash differently as integers and as floats anyway.
    """
    import pandas as pd

    h = hashlib.sha256()
    X = dataset.X
    h.update(json.dumps({"task": dataset.task, "columns": [str(c) for c in X.columns]}).encode())
    h.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    for array in (np.asarray(dataset.y),) + (() if dataset.classes is None else (np.asarray(dataset.classes),)):
        if array.dtype.kind == "O":
            h.update(json.dumps(array.tolist(), default=str).encode())
        else:
            array = np.ascontiguousarray(array)
            h.update(f"{array.dtype.str}{array.shape}".encode())
            h.update(array.tobytes())
    return h.hexdigest()[:16]


def _environment_label(env: Dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in env.items())


def provenance_lines(records: Iterable[Optional[dict]], datasets: Iterable[str]) -> List[str]:
    """Report lines from each run's recorded provenance (``None`` for a run that predates recording).

    ``records`` and ``datasets`` are parallel: one entry per run. A dataset whose runs saw more than one
    library, or a report whose runs came from more than one environment, is called out, because its
    table then compares runs that did not search the same thing.
    """
    environments: Counter = Counter()
    digests: Dict[str, Counter] = defaultdict(Counter)
    data_digests: Dict[str, Counter] = defaultdict(Counter)
    unrecorded = 0
    for record, dataset in zip(records, datasets):
        if not record:
            unrecorded += 1
            continue
        environments[_environment_label(record.get("environment") or {})] += 1
        if record.get("library_digest"):
            digests[dataset][record["library_digest"]] += 1
        if record.get("data_digest"):
            data_digests[dataset][record["data_digest"]] += 1
    lines = []
    if environments:
        if len(environments) == 1:
            lines.append(f"Environment of every recorded run: {next(iter(environments))}.")
        else:
            lines.append(f"**Runs from {len(environments)} environments** (their numbers may differ for that reason "
                         "alone): " + "; ".join(f"{label} ({n} runs)" for label, n in environments.most_common()) + ".")
    lines += _digest_lines(digests, "Library digest per dataset (one library each)", "libraries",
                           "its cells compare searches over different candidate sets")
    lines += _digest_lines(data_digests, "Dataset digest per live dataset (one file content each)", "dataset contents",
                           "its live cells were fitted on different data")
    if unrecorded:
        lines.append(f"{unrecorded} runs predate provenance recording (no environment or digest).")
    return lines


def _digest_lines(digests: Dict[str, Counter], single_label: str, plural: str, consequence: str) -> List[str]:
    lines = []
    single = [f"{dataset} {next(iter(counts))}" for dataset, counts in sorted(digests.items()) if len(counts) == 1]
    if single:
        lines.append(f"{single_label}: " + ", ".join(single) + ".")
    for dataset, counts in sorted(digests.items()):
        if len(counts) > 1:
            lines.append(f"**{dataset} mixes {len(counts)} {plural}** (" + ", ".join(
                f"{digest}: {n} runs" for digest, n in counts.most_common()) + f"): {consequence}.")
    return lines
