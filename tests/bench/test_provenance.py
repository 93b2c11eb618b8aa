"""Provenance: package versions and library digests recorded per run, and the report's call-outs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optdiv.bench import provenance
from optdiv.bench.provenance import dataset_digest, environment, library_digest, provenance_lines
from optdiv.data import load_dataset


def test_environment_names_python_and_the_installed_versions(monkeypatch):
    env = environment()
    assert env["numpy"] == np.__version__
    assert env["python"].count(".") == 2
    monkeypatch.setattr(provenance, "PACKAGES", ("numpy", "no-such-package-optdiv"))
    assert environment()["no-such-package-optdiv"] == "absent"


def test_library_digest_is_stable_and_sees_a_one_ulp_change(library_factory):
    synthetic_library = library_factory
    first, again = synthetic_library(seed=3), synthetic_library(seed=3)
    digest = library_digest(first)
    assert len(digest) == 16 and digest == library_digest(again)

    member = int(np.flatnonzero(again.ok)[0])
    again.val_preds[member, 0, 0] = np.nextafter(again.val_preds[member, 0, 0], np.float32(2))
    assert library_digest(again) != digest

    reordered = synthetic_library(seed=3)
    reordered.configs = reordered.configs[1:] + reordered.configs[:1]
    assert library_digest(reordered) != digest

    flipped = synthetic_library(seed=3)
    flipped.ok[member] = False
    assert library_digest(flipped) != digest


def test_dataset_digest_is_stable_and_sees_a_changed_cell_column_or_label(tmp_path):
    rows = 24  # the loader's minimum is 20
    frame = pd.DataFrame({"a": np.arange(rows) + 0.5, "b": list("xyxz") * 6, "target": ["no", "yes"] * 12})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    digest = dataset_digest(load_dataset(str(path)))
    assert len(digest) == 16 and digest == dataset_digest(load_dataset(str(path)))
    path.write_text(path.read_text().replace("\n", "\r\n"))  # same content, other line endings
    assert dataset_digest(load_dataset(str(path))) == digest

    def digest_of(changed):
        changed.to_csv(path, index=False)
        return dataset_digest(load_dataset(str(path)))

    cell = frame.copy()
    cell.loc[2, "a"] = np.nextafter(2.5, 3.0)
    assert digest_of(cell) != digest
    assert digest_of(frame.rename(columns={"b": "c"})) != digest
    assert digest_of(frame.assign(b=list("xyxz") * 5 + list("xyxw"))) != digest
    assert digest_of(frame.assign(target=["no", "yes"] * 11 + ["yes", "yes"])) != digest
    assert digest_of(frame.assign(target=["n", "yes"] * 12)) != digest  # same indices, other labels
    assert digest_of(frame) == digest
    assert dataset_digest(load_dataset("sklearn:diabetes")) == dataset_digest(load_dataset("sklearn:diabetes"))


def test_provenance_lines_call_out_mixed_libraries_and_environments():
    env_a = {"python": "3.11.7", "numpy": "2.4.6"}
    env_b = {"python": "3.11.7", "numpy": "1.26.4"}
    same = [{"environment": env_a, "library_digest": "aaaa"}] * 3
    lines = provenance_lines(same, ["quake"] * 3)
    assert lines == ["Environment of every recorded run: python 3.11.7, numpy 2.4.6.",
                     "Library digest per dataset (one library each): quake aaaa."]

    mixed = same + [{"environment": env_b, "library_digest": "bbbb"}, None]
    lines = provenance_lines(mixed, ["quake"] * 4 + ["bodyfat"])
    text = "\n".join(lines)
    assert "**Runs from 2 environments**" in text and "numpy 1.26.4 (1 runs)" in text
    assert "**quake mixes 2 libraries** (aaaa: 3 runs, bbbb: 1 runs)" in text
    assert "one library each" not in text
    assert "1 runs predate provenance recording" in text

    unhashed = [{"environment": env_a}] * 2  # live runs recorded before dataset digests
    assert provenance_lines(unhashed, ["quake", "wind"]) == [
        "Environment of every recorded run: python 3.11.7, numpy 2.4.6."]
    live = [{"environment": env_a, "data_digest": d} for d in ("cccc", "cccc", "dddd", "eeee")]
    lines = provenance_lines(live, ["quake", "quake", "wind", "wind"])
    assert lines[1] == "Dataset digest per live dataset (one file content each): quake cccc."
    assert lines[2].startswith("**wind mixes 2 dataset contents** (") and "fitted on different data" in lines[2]
    assert not any("Library" in line for line in lines)
    assert provenance_lines([], []) == []
