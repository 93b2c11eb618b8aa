"""benchmarks/count_features.py: which integer columns count as identifiers, and their value counts as features."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
