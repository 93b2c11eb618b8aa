"""benchmarks/lightgbm_configs.py: LightGBM at fixed settings on the race's splits, and the pairing against default."""

from __future__ import annotations

import numpy as np
import pandas as pd


def test_the_summary_pairs_each_setting_with_the_defaults(script):
    lc = script("lightgbm_configs")
    lines = [{"dataset": "a", "seed": s, "setting": name, "test_error": error}
             for s, errors in ((0, (5.0, 4.0)), (1, (5.0, 6.0)), (2, (5.0, 3.0)))
             for name, error in zip(("default", "large"), errors)]
    rows = {row["setting"]: row for row in lc.summary(lines)}
    assert (rows["large"]["lower"], rows["large"]["higher"]) == (2, 1)
    assert rows["large"]["means"]["a"] == np.mean([4.0, 6.0, 3.0])
    assert (rows["default"]["lower"], rows["default"]["higher"]) == (0, 0)


def test_each_setting_is_scored_on_the_race_split(script, tmp_path):
    lc, race = script("lightgbm_configs"), script("race")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(target=(X[:, 0] > 0).astype(int))
    frame.to_csv(tmp_path / "toy.csv", index=False)
    lines = lc.measure(tmp_path / "toy.csv", 1, ["default", "large"])
    assert [line["setting"] for line in lines] == ["default", "large"]
    _, test = race.make_split(frame["target"].to_numpy(), "classification", 1)
    for line in lines:  # a share of the 60 test rows in %, far below a coin's 50 % on this easy target
        wrong = line["test_error"] * len(test) / 100.0
        assert len(test) == 60 and abs(wrong - round(wrong)) < 1e-9 and line["test_error"] < 30.0
