"""Datasets for the engine: loading, input validation, 60/20/20 splits and preprocessing.

Three kinds of dataset spec are understood by :func:`load_dataset`:

* a CSV path (``data/train.csv``);
* ``sklearn:NAME`` for the small datasets scikit-learn ships (``breast_cancer``, ``iris``, ``wine``,
  ``digits``, ``diabetes``) and ``california_housing`` when it is already cached locally (it is a
  download, so offline it fails with a clear message);
* ``openml:ID`` through :func:`sklearn.datasets.fetch_openml`, cached under :func:`data_home`. It needs
  the network; when that is unreachable the error says to pass a CSV path instead.

Every problem with the input is reported as one :class:`DataError` (a ``ValueError``) naming it.
Class labels are mapped to indices ``0..k-1``; :attr:`Dataset.classes` keeps the original labels.

Works with Python 3.9, numpy 1.23, pandas 1.x and scikit-learn 0.24 as well as current releases.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

TASKS = ("classification", "regression")

#: Fewest rows a dataset may have (the 60/20/20 split needs a few rows in every part).
MIN_ROWS = 20

#: ``task="auto"``: an integer target with at most this many distinct values is a classification target.
MAX_INTEGER_CLASSES = 20

#: Categorical columns with more levels than this (in the training rows) are ordinal-encoded, not one-hot.
MAX_ONE_HOT_LEVELS = 50

#: Datasets scikit-learn ships inside its wheel (no download).
SKLEARN_BUNDLED = ("breast_cancer", "iris", "wine", "digits", "diabetes")
#: Datasets scikit-learn downloads; usable only when already in a local cache.
SKLEARN_DOWNLOADED = ("california_housing",)


class DataError(ValueError):
    """The input data cannot be used; the message names the problem."""


@dataclass
class Dataset:
    name: str
    X: pd.DataFrame  # feature columns, string names, index 0..n-1
    y: np.ndarray  # class indices 0..k-1 (int64) or float64 values
    task: str  # "classification" | "regression"
    classes: Optional[np.ndarray] = None  # original class labels in index order; None for regression

    @property
    def n_classes(self) -> Optional[int]:
        return None if self.classes is None else len(self.classes)


@dataclass
class Splits:
    X_train: pd.DataFrame
    y_train: np.ndarray
    X_val: pd.DataFrame
    y_val: np.ndarray
    X_test: pd.DataFrame
    y_test: np.ndarray
    #: Cross-validation mode: the fold (0..k-1) of every training row; X_val is then the same rows as X_train
    #: and validation predictions are out-of-fold (see :func:`cross_validation_view`). None: a holdout split.
    folds: Optional[np.ndarray] = None


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #


def data_home() -> Path:
    """Download cache for ``openml:`` / ``sklearn:`` datasets.

    ``$OPTDIV_DATA_HOME`` when set, else ``.cache/optdiv-data`` in the current directory (``.cache/`` is
    git-ignored in the optdiv repository).
    """
    env = os.environ.get("OPTDIV_DATA_HOME", "").strip()
    return Path(env) if env else Path.cwd() / ".cache" / "optdiv-data"


def load_dataset(spec: Union[str, os.PathLike], target: Optional[str] = None, task: str = "auto") -> Dataset:
    """Load and validate a dataset.

    ``spec`` is a CSV path, ``sklearn:NAME`` or ``openml:ID``. For a CSV the target column is ``target``
    when given, else a column named ``target``, else the last column. For ``openml:`` ``target`` picks
    the target column (default: the dataset's default target).

    ``task="auto"`` decides from the target column: **classification** for object, string, category
    or bool targets and for integer targets with at most 20 distinct values; **regression** otherwise
    (floats, and integers with more than 20 distinct values). Pass ``task="classification"`` or
    ``"regression"`` to override.

    Raises :class:`DataError` naming the problem: missing file, unknown spec prefix, missing target
    column (the columns are listed), fewer than 20 rows, NaN in the target, a feature column that is all
    NaN, inf values, a classification target with a single class, or ``task="regression"`` with a
    non-numeric target.
    """
    _check_task(task)
    if isinstance(spec, os.PathLike):
        return _load_csv(Path(spec), target, task)
    if not isinstance(spec, str) or not spec.strip():
        raise DataError(f"dataset spec must be a CSV path, 'sklearn:NAME' or 'openml:ID'; got {spec!r}")
    spec = spec.strip()
    prefix, sep, rest = spec.partition(":")
    # 'C:\\data.csv' and 'dir/a:b.csv' are paths, not prefixes
    if sep and len(prefix) > 1 and prefix.isidentifier() and not Path(spec).exists():
        kind = prefix.lower()
        if kind == "sklearn":
            return _load_sklearn(rest.strip(), target, task)
        if kind == "openml":
            return _load_openml(rest.strip(), target, task)
        if kind not in ("file",):
            raise DataError(
                f"unknown dataset spec prefix {prefix + ':'!r} in {spec!r}; "
                f"use a CSV path, 'sklearn:NAME' or 'openml:ID'"
            )
        spec = rest
    return _load_csv(Path(spec), target, task)


def from_frame(frame: pd.DataFrame, target: Optional[str] = None, task: str = "auto", name: str = "data") -> Dataset:
    """Validate a DataFrame holding features and target (the target is picked as for a CSV)."""
    _check_task(task)
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame; got {type(frame).__name__}")
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    if target is None:
        if frame.shape[1] == 0:
            raise DataError(f"dataset {name!r} has no columns")
        target = "target" if "target" in frame.columns else frame.columns[-1]
    elif str(target) not in frame.columns:
        raise DataError(
            f"target column {target!r} not found in {name!r}; columns are: {', '.join(map(repr, frame.columns))}"
        )
    target = str(target)
    return _make_dataset(name, frame.drop(columns=[target]), frame[target], task)


def from_xy(X, y, task: str = "auto", name: str = "data", classes=None, min_rows: int = MIN_ROWS) -> Dataset:
    """Validate features (DataFrame or 2-D array) and a target (Series or 1-D array).

    ``classes`` (the training labels) maps a validation target onto the training class indices; ``min_rows``: the
    fewest rows taken (the estimators take fewer than a run's 60/20/20 split needs).
    """
    _check_task(task)
    if isinstance(X, pd.DataFrame):
        X = X.copy()
    else:
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise DataError(f"features must be 2-D (rows, columns); got shape {arr.shape}")
        X = pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])
    y = y.copy() if isinstance(y, pd.Series) else pd.Series(np.asarray(y).reshape(-1))
    if len(y) != len(X):
        raise DataError(f"features have {len(X)} rows but the target has {len(y)}")
    if y.name is None or str(y.name) in map(str, X.columns):
        y.name = "target"
    if classes is None:
        return _make_dataset(name, X, y, task, min_rows)
    known = {label: i for i, label in enumerate(np.asarray(classes).tolist())}
    unknown = sorted({repr(v) for v in y.tolist() if v not in known})
    if unknown:
        raise DataError(f"{name!r} has labels not seen in training: {', '.join(unknown[:10])}")
    codes = pd.Series([known[v] for v in y.tolist()], name=y.name)
    data = _make_dataset(name, X, codes, "regression", min_rows)  # same checks; labels are already indices
    return Dataset(name, data.X, codes.to_numpy(dtype=np.int64), "classification", np.asarray(classes))


def _check_task(task: str) -> None:
    if task not in ("auto",) + TASKS:
        raise DataError(f"task must be 'auto', 'classification' or 'regression'; got {task!r}")


def _load_csv(path: Path, target: Optional[str], task: str) -> Dataset:
    if not path.exists():
        raise DataError(f"dataset file not found: {str(path)!r}")
    if path.is_dir():
        raise DataError(f"dataset path is a directory, not a CSV file: {str(path)!r}")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DataError(f"dataset file is empty: {str(path)!r}") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot parse {str(path)!r} as CSV: {exc}") from None
    return from_frame(frame, target, task, name=path.stem)


def _load_sklearn(name: str, target: Optional[str], task: str) -> Dataset:
    from sklearn import datasets

    key = name.lower()
    known = SKLEARN_BUNDLED + SKLEARN_DOWNLOADED
    if key not in known:
        raise DataError(f"unknown scikit-learn dataset {name!r}; choose one of {', '.join(known)}")
    if target is not None and target != "target":
        raise DataError(f"target= does not apply to scikit-learn datasets (got {target!r}); omit it")
    if key in SKLEARN_BUNDLED:
        bunch = getattr(datasets, f"load_{key}")(as_frame=True)
    else:
        bunch = None
        for home in (str(data_home()), None):  # our cache, then scikit-learn's default one
            try:
                bunch = getattr(datasets, f"fetch_{key}")(data_home=home, download_if_missing=False, as_frame=True)
                break
            except (OSError, IOError):
                continue
        if bunch is None:
            raise DataError(
                f"scikit-learn dataset {key!r} must be downloaded and is not cached locally "
                f"(looked in {str(data_home())!r} and scikit-learn's data home); the network is not used: "
                f"pass a CSV path instead"
            )
    return _make_dataset(key, bunch.data, pd.Series(np.asarray(bunch.target), name="target"), task)


def _fetch_openml(data_id: int, target: Optional[str], home: str):
    """One call to scikit-learn's OpenML fetcher (a separate function so tests can replace it)."""
    import inspect

    from sklearn.datasets import fetch_openml

    kwargs = dict(data_id=data_id, data_home=home, as_frame=True)
    if target is not None:
        kwargs["target_column"] = target
    if "parser" in inspect.signature(fetch_openml).parameters:
        kwargs["parser"] = "auto"  # silences the 1.2/1.3 FutureWarning; absent in 0.24
    return fetch_openml(**kwargs)


def _load_openml(ident: str, target: Optional[str], task: str) -> Dataset:
    try:
        data_id = int(ident)
    except ValueError:
        raise DataError(f"openml spec needs a numeric dataset id, like 'openml:31'; got {ident!r}") from None
    home = data_home() / "openml"
    try:
        bunch = _fetch_openml(data_id, target, str(home))
    except Exception as exc:  # network errors come as URLError, OSError, HTTPError, ... depending on versions
        raise DataError(
            f"could not fetch OpenML dataset {data_id} ({type(exc).__name__}: {exc}); the network may be "
            f"unreachable: download the data elsewhere and pass a CSV path instead"
        ) from None
    X = bunch.data if isinstance(bunch.data, pd.DataFrame) else pd.DataFrame(bunch.data)
    y = bunch.target
    if isinstance(y, pd.DataFrame):
        if y.shape[1] != 1:
            raise DataError(f"OpenML dataset {data_id} has {y.shape[1]} target columns; pick one with target=")
        y = y.iloc[:, 0]
    if y is None:
        raise DataError(f"OpenML dataset {data_id} has no default target; pick a column with target=")
    name = str(getattr(bunch, "details", {}).get("name", f"openml_{data_id}"))
    return _make_dataset(name, X, pd.Series(y), task)


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def detect_task(y: pd.Series) -> str:
    """``task="auto"``: classification for object/string/category/bool targets and for integer targets
    with at most :data:`MAX_INTEGER_CLASSES` (20) distinct values; regression otherwise."""
    if pd.api.types.is_bool_dtype(y.dtype) or not pd.api.types.is_numeric_dtype(y.dtype):
        return "classification"
    if pd.api.types.is_integer_dtype(y.dtype) and y.nunique(dropna=True) <= MAX_INTEGER_CLASSES:
        return "classification"
    return "regression"


def _make_dataset(name: str, X: pd.DataFrame, y: pd.Series, task: str, min_rows: int = MIN_ROWS) -> Dataset:
    X = X.reset_index(drop=True)
    X.columns = [str(c) for c in X.columns]
    y = y.reset_index(drop=True)
    tname = str(y.name) if y.name is not None else "target"
    if X.shape[1] == 0:
        raise DataError(f"dataset {name!r} has no feature columns besides the target {tname!r}")
    dup = sorted({c for c in X.columns if list(X.columns).count(c) > 1})
    if dup:
        raise DataError(f"dataset {name!r} has duplicate column names: {', '.join(map(repr, dup))}")
    if len(X) < min_rows:
        raise DataError(f"dataset {name!r} has {len(X)} rows; at least {min_rows} are needed")

    missing = y.isna().to_numpy()
    if missing.any():
        rows = np.flatnonzero(missing)
        shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
        raise DataError(
            f"target column {tname!r} has {len(rows)} missing (NaN) values (rows {shown}); "
            f"drop or fill those rows"
        )
    all_nan = [c for c in X.columns if X[c].isna().all()]
    if all_nan:
        raise DataError(f"column(s) with only missing (NaN) values: {', '.join(map(repr, all_nan))}; drop them")
    with_inf = [c for c in X.columns if _is_numeric(X[c]) and np.isinf(_as_float(X[c])).any()]
    if _is_numeric(y) and np.isinf(_as_float(y)).any():
        with_inf.append(tname)
    if with_inf:
        raise DataError(f"column(s) with infinite values: {', '.join(map(repr, with_inf))}")

    if task == "auto":
        task = detect_task(y)
    if task == "regression":
        if not pd.api.types.is_numeric_dtype(y.dtype):
            raise DataError(
                f"task='regression' needs a numeric target, but column {tname!r} has dtype {y.dtype}"
            )
        return Dataset(name, X, _as_float(y), "regression", None)

    classes, codes = _encode_labels(y)
    if len(classes) < 2:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]  # 0.0, not np.float64(0.0)
        raise DataError(
            f"target column {tname!r} has a single class ({only!r}); classification needs at least two"
        )
    return Dataset(name, X, codes.astype(np.int64), "classification", classes)


def _as_float(s: pd.Series) -> np.ndarray:
    return s.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)


def _encode_labels(y: pd.Series):
    values = y.to_numpy(dtype=object) if not _is_numeric(y) else y.to_numpy()
    try:
        classes, codes = np.unique(values, return_inverse=True)
    except TypeError:  # mixed types (e.g. 1 and 'a') cannot be sorted together: compare as text
        classes, codes = np.unique(np.asarray([str(v) for v in values], dtype=object), return_inverse=True)
    return classes, codes.reshape(-1)


# --------------------------------------------------------------------------- #
# Splits
# --------------------------------------------------------------------------- #


def split(dataset: Dataset, seed: int, test_size: float = 0.2, val_size: float = 0.2) -> Splits:
    """Split into train/validation/test (by default 60/20/20 of all rows), deterministic for ``seed``.

    Classification splits are stratified; when a class is too small for that, a ``UserWarning`` says
    so and the split is made without stratification. Regression splits are plain shuffled splits.
    """
    from sklearn.model_selection import train_test_split

    if not (0 <= test_size < 1 and 0 < val_size < 1 and test_size + val_size < 1):
        raise ValueError(f"need 0 < test_size, val_size and test_size + val_size < 1; got {test_size}, {val_size}")
    n = len(dataset.y)
    idx = np.arange(n)
    y = dataset.y

    def cut(ids, size, rs):
        if dataset.task == "classification":
            try:
                return train_test_split(ids, test_size=size, random_state=rs, stratify=y[ids])
            except ValueError:
                counts = np.bincount(y[ids])
                small = int(np.argmin(np.where(counts > 0, counts, np.iinfo(np.int64).max)))
                label = dataset.classes[small] if dataset.classes is not None else small
                warnings.warn(
                    f"class {label!r} has only {counts[small]} row(s), too few for a stratified split of "
                    f"{len(ids)} rows; splitting without stratification",
                    UserWarning,
                    stacklevel=3,
                )
        return train_test_split(ids, test_size=size, random_state=rs)

    if test_size == 0:  # a search inside an estimator's fit: no test rows
        train, val = cut(idx, val_size, seed + 1)
        (Xtr, ytr), (Xva, yva) = _rows(dataset, train), _rows(dataset, val)
        return Splits(Xtr, ytr, Xva, yva, None, None)
    rest, test = cut(idx, test_size, seed)
    train, val = cut(rest, val_size / (1.0 - test_size), seed + 1)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = _rows(dataset, train), _rows(dataset, val), _rows(dataset, test)
    return Splits(Xtr, ytr, Xva, yva, Xte, yte)


def split_train_validation(dataset: Dataset, seed: int, val_size: float = 0.25) -> Splits:
    """Train/validation split with no test part (``X_test`` is None), stratified as :func:`split`."""
    return split(dataset, seed, test_size=0.0, val_size=val_size)


#: ``cv="auto"``: k-fold cross-validation on data of at most this many training + validation rows, else a
#: holdout split. At 4,000 rows a quarter held out is 1,000 validation rows; below that, choosing an ensemble on
#: one holdout split over-fits it (bodyfat, quake and space_ga in the wall-time race), while on larger data k
#: fits per evaluation cost more models than the extra validation rows are worth.
AUTO_CV_MAX_ROWS = 4000

#: Folds of ``cv="auto"`` when it chooses cross-validation.
AUTO_CV_FOLDS = 5


def resolve_cv(cv, n_rows: int) -> Optional[int]:
    """The folds to evaluate with (None: the holdout split): ``"auto"`` is :data:`AUTO_CV_FOLDS` on at most
    :data:`AUTO_CV_MAX_ROWS` training + validation rows, else None; anything else is returned as given."""
    if isinstance(cv, str):
        if cv != "auto":
            raise ValueError(f"cv must be a number of folds, None (holdout) or 'auto'; got {cv!r}")
        return AUTO_CV_FOLDS if n_rows <= AUTO_CV_MAX_ROWS else None
    return cv


#: ``search_rows="auto"``: under a time budget the search fits its evaluations on at most this many training rows
#: per second of budget (200 s: 50,000 rows), never fewer than :data:`MIN_SEARCH_ROWS`; the final members are then
#: refitted on every row. On 1M rows one forest or KNN fit on all of them outlasts a tenth of the budget, so
#: without a sample most evaluations time out and the search sees a handful of models.
SEARCH_ROWS_PER_SECOND = 250

#: The fewest training rows ``search_rows="auto"`` samples down to.
MIN_SEARCH_ROWS = 20_000


def resolve_search_rows(search_rows, time_budget: Optional[float]) -> Optional[int]:
    """The most training rows the search's evaluations fit on (None: all of them). ``"auto"``:
    :data:`SEARCH_ROWS_PER_SECOND` per second of ``time_budget`` (at least :data:`MIN_SEARCH_ROWS`; all rows without
    a time budget); a number: that many; None: all."""
    if search_rows is None:
        return None
    if isinstance(search_rows, str):
        if search_rows != "auto":
            raise ValueError(f"search_rows must be a number of rows, None (all) or 'auto'; got {search_rows!r}")
        if time_budget is None:
            return None
        return max(MIN_SEARCH_ROWS, int(SEARCH_ROWS_PER_SECOND * float(time_budget)))
    if isinstance(search_rows, bool) or not isinstance(search_rows, (int, np.integer)) or search_rows < MIN_ROWS:
        raise ValueError(f"search_rows must be a whole number of at least {MIN_ROWS} rows, None or 'auto'; "
                         f"got {search_rows!r}")
    return int(search_rows)


def row_sample_positions(y: np.ndarray, size: int, rng, stratified: bool) -> np.ndarray:
    """Sorted positions of ``size`` rows; for classification each class keeps its share (and at least one row)."""
    n = len(y)
    if size >= n:
        return np.arange(n)
    if not stratified:
        return np.sort(rng.choice(n, size, replace=False))
    chosen = []
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        take = max(1, int(round(size * len(rows) / n)))
        chosen.append(rng.choice(rows, min(take, len(rows)), replace=False))
    return np.sort(np.concatenate(chosen))


def row_sample_view(splits: Splits, max_train_rows: int, seed: int, task: str) -> Splits:
    """A holdout split whose training part is sampled down to ``max_train_rows`` rows and whose validation part keeps
    the same train/validation proportion (classes in their shares), for a search on large data: its evaluations fit
    and are compared on these rows, and the final members are refitted on every row. Test rows are unchanged; a
    split already small enough is returned as it is."""
    if splits.folds is not None:
        raise ValueError("a row sample is taken of a holdout split, not of a cross-validation view")
    n_train, n_val = len(splits.y_train), len(splits.y_val)
    if n_train <= max_train_rows:
        return splits
    rng = np.random.default_rng(seed)
    stratified = task == "classification"
    train = row_sample_positions(np.asarray(splits.y_train), max_train_rows, rng, stratified)
    val_rows = max(MIN_ROWS, int(round(n_val * max_train_rows / n_train)))
    val = row_sample_positions(np.asarray(splits.y_val), val_rows, rng, stratified)
    return Splits(splits.X_train.iloc[train], np.asarray(splits.y_train)[train], splits.X_val.iloc[val],
                  np.asarray(splits.y_val)[val], splits.X_test, splits.y_test)


def cross_validation_view(splits: Splits, k: int, seed: int, task: Optional[str] = None) -> Splits:
    """The k-fold cross-validation view of a holdout split (the Agnostic Bayes paper's k-fold protocol).

    Train and validation rows are pooled: ``X_train`` and ``X_val`` are both those rows (same order) and
    ``folds`` gives each row its fold. So everything that scores on ``y_val`` (losses, diversity, pools,
    ensembles) works unchanged on the out-of-fold predictions the evaluator then makes, and a final refit
    on ``X_train`` uses every non-test row. Test rows are unchanged.

    Folds are shuffled by ``seed`` and, for classification (``task``; by default: integer targets), stratified:
    rows are ordered by class and dealt to folds in turn, so fold sizes and each class's count per fold differ
    by at most one and no fold is empty. Done here rather than by scikit-learn's splitters so the folds are
    the same on every scikit-learn version.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"cross-validation needs an integer number of folds; got {k!r}")
    k = int(k)
    if splits.folds is not None:
        raise ValueError("these splits are already a cross-validation view; pass the holdout splits")
    if splits.X_train is None or splits.X_val is None:
        raise ValueError("cross-validation needs the training and validation rows (X_train, X_val)")
    X = pd.concat([splits.X_train, splits.X_val], axis=0, ignore_index=True)
    y = np.concatenate([np.asarray(splits.y_train), np.asarray(splits.y_val)])
    n = len(y)
    if k < 2 or k > n:
        raise ValueError(f"cross-validation needs 2 <= k <= {n} (the training and validation rows); got k={k}")
    if task is None:
        task = "classification" if np.issubdtype(y.dtype, np.integer) else "regression"
    order = np.random.default_rng(seed).permutation(n)
    if task == "classification":
        order = order[np.argsort(y[order], kind="stable")]
    folds = np.empty(n, dtype=np.int64)
    folds[order] = np.arange(n) % k
    return Splits(X, y, X, y, splits.X_test, splits.y_test, folds)  # one object: pickled once for a worker


def _rows(dataset: Dataset, ids: np.ndarray):
    ids = np.sort(ids)
    return dataset.X.iloc[ids].reset_index(drop=True), dataset.y[ids]


# --------------------------------------------------------------------------- #
# Preprocessing
# --------------------------------------------------------------------------- #


def _one_hot_encoder():
    """OneHotEncoder with dense float64 output on every scikit-learn (``sparse_output`` is 1.2+)."""
    from sklearn.preprocessing import OneHotEncoder

    try:
        return OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=np.float64)
    except TypeError:
        return OneHotEncoder(handle_unknown="ignore", sparse=False, dtype=np.float64)


def _ordinal_encoder():
    from sklearn.preprocessing import OrdinalEncoder

    return OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, dtype=np.float64)


def _as_category_text(X) -> np.ndarray:
    """Categorical columns as an object array of strings with ``np.nan`` for every kind of missing value.

    Bool, category, pandas string and mixed object columns all end up alike, so imputers and encoders
    behave the same on every pandas / scikit-learn version.
    """
    frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(X)
    out = np.empty(frame.shape, dtype=object)
    for j in range(frame.shape[1]):
        s = frame.iloc[:, j]
        col = s.astype(object).astype(str).to_numpy(dtype=object)
        col[s.isna().to_numpy()] = np.nan
        out[:, j] = col
    return out


def _as_float64(X) -> np.ndarray:
    if hasattr(X, "toarray"):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)


def make_preprocessor(X_train: pd.DataFrame):
    """An unfitted transformer turning a DataFrame like ``X_train`` into a dense float64 matrix.

    * numeric columns: median imputation;
    * categorical columns (object, string, category, bool, and anything else non-numeric): most-frequent
      imputation, then one-hot encoding with unknown categories ignored (all zeros);
    * categorical columns with more than :data:`MAX_ONE_HOT_LEVELS` (50) distinct values in ``X_train``
      are ordinal-encoded instead (one column, unknown categories as -1) to keep the width bounded; this
      is logged at INFO level.

    Columns are selected by name, so the transformer needs DataFrames with the same column names at
    fit and transform time (see :func:`check_predict_columns`). A column that is entirely missing in the
    training rows is dropped by the imputers.
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    if not isinstance(X_train, pd.DataFrame):
        raise DataError(f"make_preprocessor needs a pandas DataFrame; got {type(X_train).__name__}")
    by_name = all(isinstance(c, str) for c in X_train.columns)

    def ref(cols):
        return list(cols) if by_name else [X_train.columns.get_loc(c) for c in cols]

    numeric, onehot, ordinal = [], [], []
    for c in X_train.columns:
        s = X_train[c]
        if _is_numeric(s):
            numeric.append(c)
        elif s.nunique(dropna=True) > MAX_ONE_HOT_LEVELS:
            ordinal.append(c)
        else:
            onehot.append(c)
    if ordinal:
        log.info(
            "ordinal-encoding %d high-cardinality column(s) (more than %d levels): %s",
            len(ordinal), MAX_ONE_HOT_LEVELS, ", ".join(map(str, ordinal)),
        )

    def text_imputer():
        return SimpleImputer(strategy="most_frequent", missing_values=np.nan)

    parts = []
    if numeric:
        parts.append(("numeric", SimpleImputer(strategy="median"), ref(numeric)))
    if onehot:
        steps = [("text", FunctionTransformer(_as_category_text)), ("impute", text_imputer()),
                 ("encode", _one_hot_encoder())]
        parts.append(("onehot", Pipeline(steps), ref(onehot)))
    if ordinal:
        steps = [("text", FunctionTransformer(_as_category_text)), ("impute", text_imputer()),
                 ("encode", _ordinal_encoder())]
        parts.append(("ordinal", Pipeline(steps), ref(ordinal)))
    if not parts:
        raise DataError("no feature columns to preprocess")
    columns = ColumnTransformer(parts, remainder="drop", sparse_threshold=0.0)
    return Pipeline([("columns", columns), ("float64", FunctionTransformer(_as_float64))])


def check_predict_columns(fit_columns: Sequence, X) -> pd.DataFrame:
    """Return ``X`` with the fit-time columns in fit-time order, or raise :class:`DataError` naming the
    missing and extra columns. A plain 2-D array is accepted when it has the right number of columns."""
    fit_columns = [str(c) for c in fit_columns]
    if not isinstance(X, pd.DataFrame):
        arr = np.asarray(X)
        if arr.ndim != 2 or arr.shape[1] != len(fit_columns):
            raise DataError(
                f"expected {len(fit_columns)} feature columns ({', '.join(map(repr, fit_columns))}); "
                f"got an array of shape {arr.shape}"
            )
        return pd.DataFrame(arr, columns=fit_columns)
    have = [str(c) for c in X.columns]
    missing = [c for c in fit_columns if c not in have]
    extra = [c for c in have if c not in fit_columns]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing: {', '.join(map(repr, missing))}")
        if extra:
            parts.append(f"unexpected: {', '.join(map(repr, extra))}")
        raise DataError(f"columns at predict time differ from those at fit time ({'; '.join(parts)})")
    X = X.copy()
    X.columns = have
    return X[fit_columns]
