"""Provenance: package versions and library digests recorded per run, and the report's call-outs."""

from __future__ import annotations

import numpy as np

from optdiv.bench import provenance
from optdiv.bench.provenance import environment, library_digest, provenance_lines


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

    live = [{"environment": env_a}] * 2  # live runs have no library
    assert provenance_lines(live, ["quake", "wind"]) == ["Environment of every recorded run: python 3.11.7, numpy 2.4.6."]
    assert provenance_lines([], []) == []
