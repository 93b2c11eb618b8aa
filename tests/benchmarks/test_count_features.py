"""benchmarks/count_features.py: which integer columns count as identifiers, and their value counts as features."""

from __future__ import annotations

import numpy as np
import pandas as pd


def test_only_repeated_whole_number_columns_with_many_values_qualify(script):
    cf = script("count_features")
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=1000).astype(float)      # 100 values, 10 rows each: an identifier
    unique = np.arange(1000, dtype=float)                    # one row per value: its count says nothing
    few = rng.integers(0, 5, size=1000).astype(float)        # whole numbers, too few values
    real = rng.normal(size=1000)                             # not whole numbers
    X = np.column_stack([real, ids, unique, few])
    assert cf.id_like_columns(X) == [1]
    assert cf.id_like_columns(X, min_distinct=3) == [1, 3]


def test_counts_come_from_the_training_rows_and_unseen_values_count_zero(script):
    cf = script("count_features")
    train = np.array([[7.0, 0.5], [7.0, 0.1], [9.0, 0.2]])
    other = np.array([[9.0, 0.0], [8.0, 0.0], [7.0, 1.0]])
    counted_train, counted_other = cf.with_counts(train, other, [0])
    assert counted_train[:, 2].tolist() == [2.0, 2.0, 1.0]
    assert counted_other[:, 2].tolist() == [1.0, 0.0, 2.0]
    assert np.array_equal(counted_other[:, :2], other)


def test_counts_help_where_the_target_follows_how_common_an_identifier_is(script, tmp_path):
    cf = script("count_features")
    rng = np.random.default_rng(1)
    common = rng.permutation(400)[:40]                       # 40 frequent ids scattered among 400
    ids = np.where(rng.random(2000) < 0.5, rng.choice(common, 2000), rng.integers(0, 400, 2000))
    frequency = pd.Series(ids).map(pd.Series(ids).value_counts()).to_numpy()
    frame = pd.DataFrame({"id": ids, "noise": rng.normal(size=2000),
                          "target": (frequency > np.median(frequency)).astype(int)})
    frame.to_csv(tmp_path / "ids.csv", index=False)
    lines = cf.measure(tmp_path / "ids.csv", 0)
    assert [line["model"] for line in lines] == list(cf.MODELS)
    for line in lines:
        assert line["columns"] == 1 and line["counted"] < line["plain"]
