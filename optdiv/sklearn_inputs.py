"""What the estimators accept as ``X`` and ``y``, checked the way scikit-learn's own estimators check them.

Users pass what they pass to any scikit-learn estimator: DataFrames, arrays, lists, sparse matrices, a column
vector as ``y``. Each is either taken (sparse matrices densified within :data:`DENSE_LIMIT_BYTES`, object columns
of numbers read as numbers) or refused with scikit-learn's own message, so a mistake reads as it would with any
other estimator (``Reshape your data``, ``Unknown label type``, ``y should be a 1d array``), and
``sklearn.utils.estimator_checks.check_estimator`` passes.
"""

from __future__ import annotations

import numbers
import numpy as np
import pandas as pd

#: Largest dense copy a sparse ``X`` is turned into (the search's models and preprocessing take dense rows).
DENSE_LIMIT_BYTES = 2 * 1024**3

#: Fewest rows a fit takes: a 5-fold cross-validation needs one row per fold.
MIN_FIT_ROWS = 5


def features(X, name: str, min_rows: int = 1):
    """``X`` as a DataFrame (a DataFrame keeps its columns), or scikit-learn's error for what cannot be one."""
    if X is None:
        raise ValueError(f"Expected 2D array, got None instead; {name} needs the features X.")
    X = _dense(X, name)
    if isinstance(X, pd.DataFrame):
        frame = X.copy()
    else:
        arr = np.asarray(X)
        if arr.dtype.kind == "c":
            raise ValueError("Complex data not supported")
        if arr.ndim < 2:
            raise ValueError(f"Expected 2D array, got {'scalar array' if arr.ndim == 0 else '1D array'} instead:\n"
                             f"array={arr!r}.\nReshape your data either using array.reshape(-1, 1) if your data has "
                             f"a single feature or array.reshape(1, -1) if it contains a single sample.")
        if arr.ndim > 2:
            raise ValueError(f"Found array with dim {arr.ndim}. {name} expected <= 2.")
        frame = pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])
    if any(frame[c].dtype.kind == "c" for c in frame.columns):
        raise ValueError("Complex data not supported")
    n_rows, n_columns = frame.shape
    if n_rows < min_rows:
        raise ValueError(f"Found array with {n_rows} sample(s) (shape={frame.shape}) while a minimum of {min_rows} "
                         f"is required by {name}.")
    if n_columns == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={frame.shape}) while a minimum of 1 is required by "
                         f"{name}.")
    return _typed_objects(frame)


def target(y, n_rows: int, name: str, classification: bool):
    """``y`` as a 1-D array or Series: a column vector with scikit-learn's DataConversionWarning, anything else
    that is not one target per row with its error; a classifier refuses a continuous target."""
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import column_or_1d

    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    if isinstance(y, pd.DataFrame):
        if y.shape[1] != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
        y = y.iloc[:, 0]
    if not isinstance(y, pd.Series):
        y = column_or_1d(np.asarray(y), warn=True)
    if len(y) != n_rows:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n_rows}, {len(y)}]")
    if classification:
        check_classification_targets(y)
    elif np.asarray(y).dtype.kind not in "biuf":  # numbers stored as objects are numbers; anything else is not
        try:
            y = pd.to_numeric(pd.Series(np.asarray(y, dtype=object)), errors="raise").to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"Unknown label type: {name} needs numeric targets, got values such as "
                             f"{np.asarray(y, dtype=object)[:3].tolist()!r}") from None
    return y


def _dense(X, name: str):
    """A sparse matrix or array as a dense array, within :data:`DENSE_LIMIT_BYTES`."""
    if not (hasattr(X, "toarray") and hasattr(X, "nnz")):
        return X
    n_rows, n_columns = X.shape
    needed = int(n_rows) * int(n_columns) * 8
    if needed > DENSE_LIMIT_BYTES:
        raise TypeError(f"{name} takes sparse input by densifying it, but this {n_rows} x {n_columns} matrix would "
                        f"take {needed / 1024**3:.1f} GiB dense (at most {DENSE_LIMIT_BYTES / 1024**3:.0f} GiB): reduce "
                        f"its columns (e.g. feature selection or TruncatedSVD) or pass a dense array.")
    return X.toarray()


def _typed_objects(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding only numbers become numeric (an object array of floats is numbers, not categories);
    columns of text stay categorical; any other value (a dict, a list) is a TypeError, as in scikit-learn."""
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object:
            continue
        present = [v for v in values.tolist() if v is not None and not (isinstance(v, float) and np.isnan(v))]
        if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in present):
            frame[column] = pd.to_numeric(values, errors="coerce").astype(np.float64)
            continue
        odd = next((v for v in present if not isinstance(v, (str, numbers.Number))), None)
        if odd is not None:
            raise TypeError(f"column {column!r}: argument must be a string or a number, not "
                            f"{type(odd).__name__!r}")
    return frame


def predict_features(X, columns, name: str):
    """Predict-time ``X``: a DataFrame as given (its columns are matched by name later), anything else checked as
    at fit and given the fit-time column names; scikit-learn's message for another number of columns."""
    X = _dense(X, name)
    if isinstance(X, pd.DataFrame):
        return X
    arr = np.asarray(X)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    if arr.ndim != 2:
        features(arr, name)  # raises scikit-learn's message for a 0-, 1- or 3-D array
    if arr.shape[1] != len(columns):
        raise ValueError(f"X has {arr.shape[1]} features, but {name} is expecting {len(columns)} features as input.")
    return _typed_objects(pd.DataFrame(arr, columns=list(columns)))
