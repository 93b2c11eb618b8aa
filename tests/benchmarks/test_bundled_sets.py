"""benchmarks/bundled_sets.py: scikit-learn's bundled sets as CSV files the race reads, with the task it expects."""

from __future__ import annotations

import pandas as pd
import pytest


def test_each_set_is_written_with_its_target_last_and_read_as_its_task(script, tmp_path):
    bundled = script("bundled_sets")
    race = script("race")
    paths = bundled.write_sets(tmp_path, ("diabetes", "wine"))
    assert [p.name for p in paths] == ["diabetes.csv", "wine.csv"]
    diabetes, wine = (pd.read_csv(p) for p in paths)
    assert diabetes.shape == (442, 11) and wine.shape == (178, 14)
    assert diabetes.columns[-1] == wine.columns[-1] == "target"
    assert race.dataset_task(paths[0]) == "regression" and race.dataset_task(paths[1]) == "classification"
    with pytest.raises(ValueError, match="unknown bundled set"):
        bundled.write_sets(tmp_path, ("iris_typo",))
