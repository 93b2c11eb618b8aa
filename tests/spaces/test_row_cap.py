"""Kernel SVMs fit on at most a capped number of rows, so large data does not make them time out."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import make_classification, make_regression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR

from optdiv.evaluation.fitting import final_estimator, predict_probabilities
from optdiv.spaces import get_space
from optdiv.spaces.sklearn_models import KERNEL_SVM_MAX_ROWS, RowCapped

X, y = make_classification(n_samples=900, n_features=8, weights=[0.8, 0.2], random_state=0)


def test_above_the_cap_a_class_stratified_sample_is_fitted_and_every_row_predicted():
    capped = RowCapped(SVC(gamma=0.1), max_rows=300, random_state=0).fit(X, y)
    assert capped.rows_fitted_ == 300 and capped.estimator_ is capped.estimator
    assert capped.estimator.shape_fit_[0] == 300
    assert capped.predict(X).shape == (900,)
    assert capped.decision_function(X).shape == (900,)
    assert not hasattr(capped, "predict_proba"), "an SVC without probabilities has none, wrapped or not"
    np.testing.assert_array_equal(capped.classes_, [0, 1])
    again = RowCapped(SVC(gamma=0.1), max_rows=300, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.decision_function(X), capped.decision_function(X))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(capped)).predict(X), capped.predict(X))


class _Recorder(SVC):
    def fit(self, X, y, sample_weight=None):
        self.seen_ = np.asarray(y)
        return super().fit(X, y, sample_weight)


def test_the_sample_keeps_the_class_shares():
    capped = RowCapped(_Recorder(), max_rows=300, random_state=1).fit(X, y)
    assert len(capped.estimator.seen_) == 300
    assert capped.estimator.seen_.mean() == pytest.approx(y.mean(), abs=0.004)


def test_below_the_cap_it_is_the_model_fitted_on_every_row():
    capped = RowCapped(SVC(gamma=0.1), max_rows=5000).fit(X, y)
    np.testing.assert_allclose(capped.decision_function(X), SVC(gamma=0.1).fit(X, y).decision_function(X))
    assert capped.rows_fitted_ == 900


def test_regression_and_a_class_with_one_row_are_sampled_without_stratifying():
    Xr, yr = make_regression(n_samples=500, n_features=5, noise=1.0, random_state=0)
    svr = RowCapped(TransformedTargetRegressor(regressor=SVR(), transformer=StandardScaler()), max_rows=200,
                    random_state=0).fit(Xr, yr)
    assert svr.rows_fitted_ == 200 and svr.predict(Xr).shape == (500,)
    rare = y.copy()
    rare[0] = 2  # a class of one row cannot be stratified on
    capped = RowCapped(SVC(), max_rows=300, random_state=0).fit(X, rare)
    assert capped.rows_fitted_ == 300


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_the_built_in_space_caps_its_kernel_svms(task):
    space = get_space("autosklearn", task)
    name = "libsvm_svc" if task == "classification" else "libsvm_svr"
    config = next(c for c in space.sample(300, seed=0) if space.algorithm_of(c) == name)
    model = space.build(config, 0)
    capped = [step for step in getattr(model, "steps", [("model", model)]) if isinstance(step[1], RowCapped)]
    assert len(capped) == 1 and capped[0][1].max_rows == KERNEL_SVM_MAX_ROWS
    if task == "classification":
        model.fit(X, y)
        assert isinstance(final_estimator(model), SVC)
        proba = predict_probabilities(model, X, 2)
        assert proba.shape == (900, 2) and np.allclose(proba.sum(1), 1, atol=1e-5)
