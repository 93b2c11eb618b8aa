"""benchmarks/lightgbm_randomized_pair.py: three boosters and their two equal-weight pairs on the race's split."""

from __future__ import annotations

import numpy as np
import pandas as pd


def test_the_pairs_are_scored_on_the_race_split_and_regression_is_skipped(script, tmp_path):
    pair = script("lightgbm_randomized_pair")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["target"] = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    frame.to_csv(tmp_path / "easy.csv", index=False)
    line = pair.measure(tmp_path / "easy.csv", seed=0, threads=1)
    assert set(line) == {"dataset", "seed", "plain", "randomized", "second_plain", "plain+randomized",
                         "plain+second_plain"}
    assert line["dataset"] == "easy" and line["seed"] == 0
    test_rows = 60  # the race's 20 % test split of 300 rows: every error is a whole number of rows
    for name in ("plain", "randomized", "second_plain", "plain+randomized", "plain+second_plain"):
        assert 0.0 <= line[name] < 20.0  # a separable target is learnt, not guessed
        assert abs(line[name] * test_rows / 100 - round(line[name] * test_rows / 100)) < 1e-9
    regression = frame.assign(target=X[:, 0] * 1.5 + rng.normal(size=300))
    regression.to_csv(tmp_path / "reg.csv", index=False)
    assert pair.measure(tmp_path / "reg.csv", seed=0, threads=1) is None
