"""The estimators by scikit-learn's own test (check_estimator), and what they take and refuse as X and y."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.exceptions import DataConversionWarning

from optdiv import sklearn_inputs
from optdiv.sklearn import OptDivClassifier, OptDivRegressor

NEW_SKLEARN = tuple(int(part) for part in sklearn.__version__.split(".")[:2]) >= (1, 6)


@pytest.mark.skipif(not NEW_SKLEARN, reason="check_estimator(on_fail=None) and the Tags API need scikit-learn >= 1.6")
@pytest.mark.parametrize("estimator", [OptDivClassifier(budget=2), OptDivRegressor(budget=2)],
                         ids=["classifier", "regressor"])
def test_check_estimator_passes(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: str(r["exception"]).splitlines()[0] for r in results if r["status"] == "failed"}
    assert len(results) > 40 and not failed


def _rows(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] > 0).astype(int)


def test_sparse_input_is_densified_within_the_limit(monkeypatch):
    X, y = _rows()
    model = OptDivClassifier(budget=2, method="rs-es", seed=0).fit(sp.csr_matrix(X), y)
    dense = OptDivClassifier(budget=2, method="rs-es", seed=0).fit(X, y)
    np.testing.assert_allclose(model.predict_proba(sp.csr_matrix(X)), dense.predict_proba(X), atol=1e-6)
    monkeypatch.setattr(sklearn_inputs, "DENSE_LIMIT_BYTES", 100)
    with pytest.raises(TypeError, match="sparse input by densifying it.*30 x 4"):
        OptDivClassifier(budget=2).fit(sp.csr_matrix(X), y)


def test_inputs_are_refused_with_scikit_learns_messages():
    X, y = _rows()
    name = "OptDivClassifier"
    with pytest.raises(ValueError, match="Reshape your data"):
        sklearn_inputs.features(X[:, 0], name)
    with pytest.raises(ValueError, match="Complex data not supported"):
        sklearn_inputs.features(X + 1j, name)
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        sklearn_inputs.features(np.empty((5, 0)), name)
    with pytest.raises(ValueError, match=r"1 sample\(s\).*minimum of 5"):
        sklearn_inputs.features(X[:1], name, min_rows=5)
    objects = X.astype(object)
    objects[0, 0] = {"a": 1}
    with pytest.raises(TypeError, match="argument must be a string or a number"):
        sklearn_inputs.features(objects, name)
    numbers = sklearn_inputs.features(X.astype(object), name)
    assert all(dtype == np.float64 for dtype in numbers.dtypes)  # numbers stored as objects stay numbers
    text = sklearn_inputs.features(pd.DataFrame({"colour": ["red", "blue"] * 3}), name)
    assert not pd.api.types.is_numeric_dtype(text["colour"])  # text stays categorical
    with pytest.raises(ValueError, match="requires y to be passed"):
        sklearn_inputs.target(None, 30, name, True)
    with pytest.raises(ValueError, match="Unknown label type"):
        sklearn_inputs.target(X[:, 1], 30, name, True)  # a continuous target for a classifier
    with pytest.raises(ValueError, match="y should be a 1d array"):
        sklearn_inputs.target(np.c_[y, y], 30, name, True)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        sklearn_inputs.target(y[:-1], 30, name, True)
    with pytest.warns(DataConversionWarning):
        assert sklearn_inputs.target(y[:, None], 30, name, True).shape == (30,)
    assert sklearn_inputs.target(y.astype(object), 30, "OptDivRegressor", False).dtype == np.float64
    with pytest.raises(ValueError, match="X has 3 features, but OptDivClassifier is expecting 4"):
        sklearn_inputs.predict_features(X[:, :3], ["a", "b", "c", "d"], name)
    with pytest.raises(ValueError, match="Reshape your data"):
        sklearn_inputs.predict_features(X[0], ["a", "b", "c", "d"], name)
