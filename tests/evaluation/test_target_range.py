"""Regression members predict within a margin of their training targets' range."""

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression

from optdiv.evaluation.fitting import build_pipeline, final_estimator
from optdiv.evaluation.target_range import TARGET_MARGIN, RangeClippedRegressor


def test_an_extrapolating_member_is_clipped_to_the_margin():
    X = pd.DataFrame({"x": np.linspace(0.0, 1.0, 50)})
    y = 10.0 * X["x"].to_numpy()  # targets 0..10
    model = RangeClippedRegressor(LinearRegression()).fit(X, y)
    far = pd.DataFrame({"x": [-100.0, 0.5, 100.0]})
    pred = model.predict(far)
    assert abs(pred[1] - 5.0) < 1e-9  # inside the range: untouched
    assert pred[0] == -10.0 * TARGET_MARGIN and pred[2] == 10.0 + 10.0 * TARGET_MARGIN


def test_regression_pipelines_clip_and_classification_pipelines_do_not():
    X = pd.DataFrame({"x": np.linspace(0.0, 1.0, 40)})
    build = lambda config, seed: LinearRegression()  # noqa: E731
    pipe = build_pipeline(build, {}, X, 0, "regression").fit(X, 3.0 * X["x"])
    assert pipe.predict(pd.DataFrame({"x": [50.0]}))[0] == 3.0 * (1 + TARGET_MARGIN)
    assert isinstance(final_estimator(pipe), LinearRegression)  # names and checks see the real model
    plain = build_pipeline(build, {}, X, 0, "classification")
    assert isinstance(plain.steps[-1][1], LinearRegression)
