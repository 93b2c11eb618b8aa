"""Dataset loading, validation errors, task detection, splits and preprocessing."""

import warnings

import numpy as np
import pandas as pd
import pytest

from optdiv import data
from optdiv.data import (
    DataError,
    check_predict_columns,
    from_xy,
    load_dataset,
    make_preprocessor,
    split,
)


def _frame(n=40, seed=0, **extra):
    rng = np.random.default_rng(seed)
    cols = {"a": rng.normal(size=n), "b": rng.integers(0, 5, n), "label": rng.choice(["yes", "no"], n)}
    cols.update(extra)
    return pd.DataFrame(cols)


def _csv(tmp_path, frame, name="d.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


# --------------------------------------------------------------------------- #
# Loading and task detection
# --------------------------------------------------------------------------- #


def test_csv_target_default_is_target_column_else_last(tmp_path):
    f = _frame()
    d = load_dataset(str(_csv(tmp_path, f)))
    assert d.name == "d" and list(d.X.columns) == ["a", "b"] and d.task == "classification"
    assert list(d.classes) == ["no", "yes"]
    np.testing.assert_array_equal(d.y, (f["label"] == "yes").astype(int))

    g = f.rename(columns={"a": "target"})
    d = load_dataset(_csv(tmp_path, g, "g.csv"))  # a Path works too
    assert d.task == "regression" and list(d.X.columns) == ["b", "label"]
    np.testing.assert_allclose(d.y, f["a"])

    d = load_dataset(str(_csv(tmp_path, f, "h.csv")), target="b")
    assert d.task == "classification" and list(d.classes) == sorted(set(f["b"]))
    assert d.y.dtype == np.int64 and d.y.min() == 0


@pytest.mark.parametrize(
    "values, task",
    [
        (np.arange(40) % 3, "classification"),  # few integers
        (np.arange(40) % 21, "regression"),  # more than 20 distinct integers
        (np.linspace(0, 1, 40), "regression"),  # floats
        (np.arange(40) % 2 == 0, "classification"),  # bool
        (pd.Categorical(np.where(np.arange(40) % 2, "x", "y")), "classification"),
        (np.where(np.arange(40) % 2, "x", "y").astype(object), "classification"),
    ],
)
def test_task_detection(values, task):
    d = from_xy(np.random.default_rng(0).normal(size=(40, 2)), pd.Series(values))
    assert d.task == task
    if task == "classification":
        assert d.y.min() == 0 and d.y.max() == len(d.classes) - 1
    else:
        assert d.classes is None and d.y.dtype == np.float64


def test_task_override():
    X = np.random.default_rng(0).normal(size=(40, 2))
    assert from_xy(X, np.arange(40) % 3, task="regression").task == "regression"
    d = from_xy(X, np.arange(40) % 2 * 0.5, task="classification")
    assert d.task == "classification" and list(d.classes) == [0.0, 0.5]


def test_sklearn_datasets():
    d = load_dataset("sklearn:breast_cancer")
    assert d.task == "classification" and d.X.shape == (569, 30) and list(d.classes) == [0, 1]
    assert load_dataset("sklearn:diabetes").task == "regression"
    assert load_dataset("sklearn:iris").n_classes == 3


def _raises(match, fn, *args, **kwargs):
    with pytest.raises(DataError, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, ValueError)
    return str(info.value)


def test_error_file_missing(tmp_path):
    _raises(r"dataset file not found: .*nope\.csv", load_dataset, str(tmp_path / "nope.csv"))


def test_error_unknown_prefix():
    _raises(r"unknown dataset spec prefix 'kaggle:'", load_dataset, "kaggle:titanic")
    _raises(r"unknown scikit-learn dataset 'mnist'", load_dataset, "sklearn:mnist")


def test_error_missing_target_lists_columns(tmp_path):
    msg = _raises(r"target column 'y' not found", load_dataset, str(_csv(tmp_path, _frame())), target="y")
    assert "'a', 'b', 'label'" in msg


def test_error_single_class(tmp_path):
    f = _frame()
    f["label"] = "yes"
    _raises(r"single class \('yes'\).*at least two", load_dataset, str(_csv(tmp_path, f)))


def test_error_too_few_rows(tmp_path):
    _raises(r"has 19 rows; at least 20 are needed", load_dataset, str(_csv(tmp_path, _frame(n=19))))


def test_error_all_nan_column_named(tmp_path):
    f = _frame(empty=np.nan)
    f = f[["a", "b", "empty", "label"]]
    _raises(r"only missing \(NaN\) values: 'empty'", load_dataset, str(_csv(tmp_path, f)))


def test_error_inf_values_named():
    f = _frame()
    f.loc[3, "a"] = np.inf
    _raises(r"infinite values: 'a'", data.from_frame, f)


def test_error_nan_in_target(tmp_path):
    f = _frame()
    f.loc[[2, 7], "label"] = np.nan
    _raises(r"target column 'label' has 2 missing \(NaN\) values \(rows 2, 7\)", load_dataset, str(_csv(tmp_path, f)))


def test_error_regression_needs_numeric_target(tmp_path):
    _raises(r"task='regression' needs a numeric target.*'label'", load_dataset, str(_csv(tmp_path, _frame())),
            task="regression")


def test_error_bad_task():
    _raises(r"task must be 'auto', 'classification' or 'regression'", load_dataset, "sklearn:iris", task="ranking")


def test_openml_offline_message(monkeypatch):
    def unreachable(data_id, target, home):
        raise OSError("[Errno 101] Network is unreachable")

    monkeypatch.setattr(data, "_fetch_openml", unreachable)
    msg = _raises(r"could not fetch OpenML dataset 31", load_dataset, "openml:31")
    assert "pass a CSV path instead" in msg and "Network is unreachable" in msg
    _raises(r"numeric dataset id", load_dataset, "openml:credit-g")


def test_openml_frame_is_validated(monkeypatch):
    class Bunch:
        data = _frame()[["a", "b"]]
        target = _frame()["label"]
        details = {"name": "fake"}

    monkeypatch.setattr(data, "_fetch_openml", lambda data_id, target, home: Bunch())
    d = load_dataset("openml:99")
    assert d.name == "fake" and d.task == "classification" and d.X.shape == (40, 2)


def test_california_housing_offline_message(monkeypatch, tmp_path):
    monkeypatch.setenv("OPTDIV_DATA_HOME", str(tmp_path / "a"))
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "b"))
    _raises(r"'california_housing' must be downloaded and is not cached locally.*CSV", load_dataset,
            "sklearn:california_housing")


# --------------------------------------------------------------------------- #
# Splits
# --------------------------------------------------------------------------- #


def test_stratified_split_proportions_and_determinism():
    d = load_dataset("sklearn:breast_cancer")
    s = split(d, seed=0)
    n = len(d.y)
    sizes = [len(s.y_train), len(s.y_val), len(s.y_test)]
    assert sum(sizes) == n and [len(s.X_train), len(s.X_val), len(s.X_test)] == sizes
    np.testing.assert_allclose(np.array(sizes) / n, [0.6, 0.2, 0.2], atol=0.01)
    overall = np.bincount(d.y) / n
    for y in (s.y_train, s.y_val, s.y_test):
        np.testing.assert_allclose(np.bincount(y) / len(y), overall, atol=0.01)
    # rows partition the dataset: every row once
    rows = pd.concat([s.X_train, s.X_val, s.X_test]).round(10)
    assert not rows.duplicated().any() and len(rows) == n

    again = split(d, seed=0)
    for a, b in zip(vars(s).values(), vars(again).values()):
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b)
        else:
            np.testing.assert_array_equal(a, b)
    other = split(d, seed=1)
    assert not s.X_test.equals(other.X_test)


def test_regression_split_is_plain():
    d = load_dataset("sklearn:diabetes")
    s = split(d, seed=3)
    assert [len(s.y_train), len(s.y_val), len(s.y_test)] == [264, 89, 89]
    assert s.y_train.dtype == np.float64


def test_split_falls_back_without_stratification_for_tiny_class():
    y = np.array(["a"] * 30 + ["b"] * 9 + ["rare"])
    d = from_xy(np.arange(80.0).reshape(40, 2), y)
    with pytest.warns(UserWarning, match=r"class 'rare' has only 1 row\(s\).*without stratification"):
        s = split(d, seed=0)
    assert len(s.y_train) + len(s.y_val) + len(s.y_test) == 40


# --------------------------------------------------------------------------- #
# Preprocessing
# --------------------------------------------------------------------------- #


def _mixed(n=60, seed=0):
    rng = np.random.default_rng(seed)
    f = pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "count": rng.integers(0, 9, n).astype(float),
            "color": rng.choice(["red", "green", "blue"], n).astype(object),
            "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
            "flag": rng.choice([True, False], n),
            "ident": [f"id{i}" for i in range(n)],  # high cardinality
        }
    )
    f.loc[[1, 4], "num"] = np.nan
    f.loc[[2, 5, 8], "color"] = None
    f.loc[[3], "size"] = np.nan
    return f


def test_preprocessor_categorical_and_missing():
    X = _mixed()
    pre = make_preprocessor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no dtype / deprecation chatter
        # ...except scikit-learn 0.24's own calls of APIs newer pandas deprecates (auto-sklearn's stack)
        warnings.filterwarnings("ignore", message="is_sparse is deprecated", category=DeprecationWarning)
        Z = pre.fit_transform(X)
    # num, count (2) + color (3) + size (3) + flag (2) one-hot + ident ordinal (1)
    assert Z.dtype == np.float64 and isinstance(Z, np.ndarray) and Z.shape == (60, 11)
    assert np.isfinite(Z).all()
    assert Z[1, 0] == pytest.approx(np.nanmedian(X["num"]))  # median imputation
    onehot = Z[:, 2:10]
    assert set(np.unique(onehot)) <= {0.0, 1.0}
    np.testing.assert_array_equal(onehot[:, 0:3].sum(1), 1)  # imputed color still one category
    most = X["color"].mode()[0]
    cats = sorted(["red", "green", "blue"])
    assert Z[2, 2 + cats.index(most)] == 1.0  # most-frequent imputation

    new = X.head(3).copy()
    new["color"] = ["purple", "red", "red"]  # unseen category -> all zeros
    new["ident"] = ["never-seen", "id0", "id1"]  # unseen level of an ordinal column -> -1
    Zn = pre.transform(new)
    assert Zn[0, 2:5].sum() == 0 and Zn[1, 2:5].sum() == 1
    assert Zn[0, -1] == -1.0 and Zn[1, -1] >= 0


def test_preprocessor_numeric_only_and_pandas_nullable():
    X = pd.DataFrame({"i": pd.array([1, None, 3] * 10, dtype="Int64"), "f": np.arange(30.0)})
    Z = make_preprocessor(X).fit_transform(X)
    assert Z.shape == (30, 2) and np.isfinite(Z).all() and Z[1, 0] == 2.0


def test_preprocessor_pandas_extension_dtypes():
    X = pd.DataFrame({
        "s": pd.array(["a", None, "b"] * 10, dtype="string"),
        "b": pd.array([True, None, False] * 10, dtype="boolean"),
        "mixed": pd.Series([1, "x", None] * 10, dtype=object),
    })
    Z = make_preprocessor(X).fit_transform(X)
    assert Z.shape == (30, 6) and np.isfinite(Z).all()
    np.testing.assert_array_equal(Z.reshape(30, 3, 2).sum(2), 1)  # every column one-hot, missing imputed


def test_check_predict_columns():
    cols = ["a", "b", "c"]
    X = pd.DataFrame({"c": [1], "a": [2], "b": [3]})
    assert list(check_predict_columns(cols, X).columns) == cols
    with pytest.raises(DataError, match=r"missing: 'b'; unexpected: 'z'"):
        check_predict_columns(cols, pd.DataFrame({"a": [1], "c": [2], "z": [3]}))
    with pytest.raises(DataError, match=r"expected 3 feature columns"):
        check_predict_columns(cols, np.zeros((2, 2)))
    assert list(check_predict_columns(cols, np.zeros((2, 3))).columns) == cols
