"""AutoGluon-Tabular 1.6.3 itself works: LightGBM-only fit on breast_cancer."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(300)
def test_tabular_predictor_lightgbm_breast_cancer(tmp_path):
    from autogluon.tabular import TabularPredictor
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    df = load_breast_cancer(as_frame=True).frame  # features + "target"
    train_df, test_df = train_test_split(
        df, test_size=0.25, random_state=0, stratify=df["target"]
    )
    predictor = TabularPredictor(
        label="target", eval_metric="accuracy", path=str(tmp_path / "ag"), verbosity=0
    ).fit(train_df, hyperparameters={"GBM": {}}, time_limit=60)

    leaderboard = predictor.leaderboard(test_df)
    models = list(leaderboard["model"])
    assert any(m.startswith("LightGBM") for m in models), models
    accuracy = float((predictor.predict(test_df) == test_df["target"]).mean())
    assert accuracy > 0.9, f"test accuracy {accuracy:.3f}"
