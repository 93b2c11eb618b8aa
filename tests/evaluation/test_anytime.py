"""Forests and boosters grown within a time budget keep the rounds they have; in time, they are the configured model."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    AdaBoostClassifier, ExtraTreesRegressor, GradientBoostingClassifier, RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from optdiv.data import load_dataset, split
from optdiv.evaluation.anytime import FIRST_STAGE, can_grow, fit_within
from optdiv.evaluation.evaluator import GROWTH_SHARE, Evaluator
from optdiv.evaluation.fitting import fit_predict
import builders

try:
    from sklearn.ensemble import HistGradientBoostingClassifier
except ImportError:  # scikit-learn 0.24
    from sklearn.experimental import enable_hist_gradient_boosting  # noqa: F401
    from sklearn.ensemble import HistGradientBoostingClassifier


X, y = make_classification(n_samples=600, n_features=12, flip_y=0.1, random_state=0)
Xr, yr = make_regression(n_samples=400, n_features=8, noise=5.0, random_state=0)


@pytest.mark.parametrize("make", [
    lambda: RandomForestClassifier(n_estimators=40, max_features=0.5, random_state=3),
    lambda: HistGradientBoostingClassifier(max_iter=40, early_stopping=False, random_state=3),
    lambda: HistGradientBoostingClassifier(max_iter=300, early_stopping=True, n_iter_no_change=3, random_state=3),
    lambda: GradientBoostingClassifier(n_estimators=30, subsample=1.0, random_state=3),
])
def test_a_fit_grown_in_stages_within_its_budget_is_the_configured_model(make):
    plain = make_pipeline(StandardScaler(), make()).fit(X, y)
    model = make()
    grown = make_pipeline(StandardScaler(), model)
    assert can_grow(model)
    assert fit_within(grown, model, X, y, seconds=1e6) == {}
    np.testing.assert_allclose(grown.predict_proba(X), plain.predict_proba(X), rtol=1e-9, atol=1e-12)
    assert model.warm_start is False, "the caller's warm_start setting comes back"


def test_staged_fits_draw_what_one_fit_draws_from_the_global_random_state_and_see_through_the_range_clip():
    from optdiv.evaluation.target_range import RangeClippedRegressor

    def fitted(seconds):
        model = ExtraTreesRegressor(n_estimators=24, random_state=None)  # draws from numpy's global state
        pipe = make_pipeline(StandardScaler(), RangeClippedRegressor(model))
        np.random.seed(7)
        if seconds is None:
            pipe.fit(Xr, yr)
        else:
            assert fit_within(pipe, model, Xr, yr, seconds=seconds) == {}
        return pipe.predict(Xr)

    np.testing.assert_array_equal(fitted(1e6), fitted(None))


def test_a_forest_out_of_time_keeps_its_first_stage():
    model = ExtraTreesRegressor(n_estimators=64, random_state=0)
    pipe = make_pipeline(StandardScaler(), model)
    cut = fit_within(pipe, model, Xr, yr, seconds=1e-9)
    first = int(np.ceil(64 * FIRST_STAGE))
    assert 1 <= first < 64 and cut == {"rounds_fitted": float(first), "rounds_configured": 64.0}
    assert len(model.estimators_) == first and pipe.predict(Xr).shape == (len(yr),)


def test_adaboost_stops_boosting_at_the_deadline_and_still_pickles():
    model = AdaBoostClassifier(n_estimators=100_000, learning_rate=0.01, random_state=0)
    pipe = make_pipeline(StandardScaler(), model)
    cut = fit_within(pipe, model, X, y, seconds=0.3)
    assert cut["rounds_configured"] == 100_000 and 1 <= cut["rounds_fitted"] < 100_000
    assert len(model.estimators_) == cut["rounds_fitted"]
    assert "_boost" not in vars(model)
    again = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(again.predict(X), pipe.predict(X))
    assert np.mean(pipe.predict(X) == y) > 0.7, "the rounds kept make a model"
    small = AdaBoostClassifier(n_estimators=5, random_state=0)
    assert fit_within(make_pipeline(small), small, X, y, seconds=60.0) == {}
    assert len(small.estimators_) == 5


def test_lightgbm_stops_boosting_at_the_deadline_and_its_refit_with_those_rounds_is_the_same_model():
    import lightgbm

    def make(rounds=200_000):
        return lightgbm.LGBMClassifier(n_estimators=rounds, learning_rate=0.001, num_leaves=63, min_child_samples=2,
                                       subsample=0.8, subsample_freq=1, random_state=0, n_jobs=1, verbose=-1)

    model = make()
    pipe = make_pipeline(StandardScaler(), model)
    cut = fit_within(pipe, model, X, y, seconds=0.5)
    assert cut["rounds_configured"] == 200_000 and 1 <= cut["rounds_fitted"] < 200_000
    assert model.booster_.current_iteration() == cut["rounds_fitted"]
    again = pickle.loads(pickle.dumps(pipe))
    refit = make(int(cut["rounds_fitted"]))
    make_pipeline(StandardScaler(), refit).fit(X, y)
    np.testing.assert_allclose(again.predict_proba(X), refit.predict_proba(StandardScaler().fit(X).transform(X)))
    quick = make(20)
    assert fit_within(make_pipeline(quick), quick, X, y, seconds=60.0) == {}
    assert quick.booster_.current_iteration() == 20


def test_models_without_rounds_fit_once_and_no_budget_means_one_plain_fit():
    model = LogisticRegression(max_iter=500)
    assert not can_grow(model)
    assert fit_within(make_pipeline(model), model, X, y, seconds=1e-9) == {}
    forest = RandomForestClassifier(n_estimators=10, random_state=0)
    assert fit_within(make_pipeline(forest), forest, X, y, seconds=None) == {}
    assert len(forest.estimators_) == 10


def test_fit_predict_records_the_rounds_a_cut_fit_kept():
    s = split(load_dataset("sklearn:breast_cancer"), seed=0)
    out = fit_predict(builders.by_name, s, "classification", 2, 0, {"algorithm": "long_boost"}, fit_seconds=0.5)
    assert out["ok"], out.get("error")
    assert out["measures"]["rounds_configured"] == 1_000_000 and out["measures"]["rounds_fitted"] >= 1
    assert out["val_pred"].shape == (len(s.y_val), 2)


def test_an_evaluation_that_would_time_out_returns_the_rounds_it_fitted():
    s = split(load_dataset("sklearn:breast_cancer"), seed=0)
    with Evaluator(builders.by_name, s, "classification", "error", time_limit=6.0) as ev:
        obs = ev.evaluate({"algorithm": "long_boost"}, index=0)
    assert obs.status == "ok", obs.error
    assert 1 <= obs.measures["rounds_fitted"] < obs.measures["rounds_configured"]
    assert obs.fit_seconds < 6.0 and obs.val_loss < 0.2
    assert 0 < GROWTH_SHARE < 1


def test_a_refit_keeps_the_rounds_its_evaluation_kept(tmp_path):
    from optdiv.evaluation.anytime import kept_rounds
    from optdiv.evaluation.pipelines import SavedPipelines

    s = split(load_dataset("sklearn:breast_cancer"), seed=0)
    measures = {"rounds_fitted": 12.0, "rounds_configured": 1_000_000.0}
    assert kept_rounds(measures) == 12 and kept_rounds({"rounds_fitted": 5.0, "rounds_configured": 5.0}) is None
    assert kept_rounds({}) is None
    with Evaluator(builders.by_name, s, "classification", "error", time_limit=60.0, pipelines_dir=str(tmp_path)) as ev:
        assert ev.fit_and_save({"algorithm": "long_boost"}, 0, 60.0, rounds=kept_rounds(measures)) is None
        digest = ev.rows_digest
    pipe = SavedPipelines(str(tmp_path)).load(digest, 0)
    assert len(pipe.steps[-1][1].estimators_) == 12
