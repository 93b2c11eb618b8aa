"""The issued log: every evaluation, recorded before it starts, so a resumed run re-runs what was in flight.

An index issued without a result is one that was running when the run stopped: a resume evaluates it again with the
same configuration instead of suggesting another there (optdiv.engine.loop). In a run directory the log is
``issued.jsonl``, appended and fsynced line by line; without one it lives in memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional, Union

from optdiv.storage.atomic import cut_torn_line, fsync_dir, to_jsonable
from optdiv.storage.layout import ISSUED_NAME


class IssuedLog:
    """``issued.jsonl``: every evaluation, written and fsynced before it starts (``directory`` None: in memory
    only, for a run without a run directory)."""

    def __init__(self, directory: Optional[Union[str, os.PathLike]] = None):
        self.path = None if directory is None else Path(directory) / ISSUED_NAME
        self.records: dict = {}
        self._repaired = False  # a torn line can only precede this process's first append

    def load(self) -> dict:
        """Index -> record (``index``, ``config``, ``pending``) of every complete line; a torn last line from a
        crash is ignored, and the first line of an index wins."""
        self.records = {}
        if self.path is None or not self.path.exists():
            return self.records
        data = self.path.read_bytes()
        for raw in data.split(b"\n")[:-1]:
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                index = int(record["index"])
                record["config"] = dict(record["config"])
            except (ValueError, KeyError, TypeError):
                continue
            self.records.setdefault(index, record)
        return self.records

    def append(self, index: int, config: dict, pending: Iterable[int]) -> None:
        """Record that evaluation ``index`` of ``config`` starts while the evaluations ``pending`` run."""
        record = {"index": int(index), "config": config, "pending": sorted(int(i) for i in pending)}
        self.records[int(index)] = record
        if self.path is None:
            return
        line = json.dumps(to_jsonable(record), sort_keys=True, allow_nan=False) + "\n"
        new = not self.path.exists()
        if not self._repaired:
            cut_torn_line(self.path)
            self._repaired = True
        with open(self.path, "ab") as fh:
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        if new:
            fsync_dir(self.path.parent)
