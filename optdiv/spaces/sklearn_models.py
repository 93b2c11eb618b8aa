"""scikit-learn version shims and the few small components the built-in spaces need.

Everything here runs on scikit-learn 0.24 (Python 3.9, auto-sklearn's environment) up to 1.9.
Version differences are handled by small factory functions, never by pinning:

* AdaBoost: ``base_estimator`` before 1.2, ``estimator`` after; ``algorithm`` removed in 1.8
  (optdiv always uses SAMME, the only algorithm left in new versions);
* LogisticRegression: ``penalty`` deprecated in 1.8 in favour of ``l1_ratio``; liblinear no longer
  fits multiclass problems in 1.8 (wrapped in one-vs-rest, which is what it did before);
* HistGradientBoosting: behind ``sklearn.experimental`` before 1.0; ``class_weight`` from 1.2;
* FastICA: ``whiten=True`` became ``"unit-variance"`` (1.1);
* FeatureAgglomeration: ``affinity`` became ``metric`` (1.2; ``affinity`` removed in 1.4);
* KernelPCA: ``eigen_solver="randomized"`` from 1.0 (keeps a 10k-row fit bounded);
* LinearSVC/LinearSVR: ``dual`` default became ``"auto"`` (1.5); always passed explicitly.

All classes are defined at module level so fitted pipelines pickle.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, TransformerMixin, is_classifier
from sklearn.feature_selection import (
    GenericUnivariateSelect,
    SelectPercentile,
    chi2,
    f_classif,
    f_regression,
    mutual_info_classif,
    mutual_info_regression,
)

try:  # scikit-learn >= 1.0
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
except ImportError:  # pragma: no cover - scikit-learn 0.24
    from sklearn.experimental import enable_hist_gradient_boosting  # noqa: F401
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor


def _parse_version(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:2]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


SK_VERSION = _parse_version(sklearn.__version__)


def _accepts(cls, param: str) -> bool:
    try:
        return param in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


# --------------------------------------------------------------------------- small shims
def bool_of(value) -> bool:
    """Categorical booleans are stored as the strings "True"/"False" (portable across ConfigSpace)."""
    if isinstance(value, str):
        return value == "True"
    return bool(value)


def adaboost_classifier(base, n_estimators, learning_rate, random_state):
    from sklearn.ensemble import AdaBoostClassifier

    kwargs = dict(n_estimators=int(n_estimators), learning_rate=float(learning_rate), random_state=random_state)
    if _accepts(AdaBoostClassifier, "estimator"):
        kwargs["estimator"] = base
    else:  # scikit-learn < 1.2
        kwargs["base_estimator"] = base
    if _accepts(AdaBoostClassifier, "algorithm") and SK_VERSION < (1, 6):
        kwargs["algorithm"] = "SAMME"  # deprecated in 1.6 and gone in 1.8, where SAMME is the only one
    return AdaBoostClassifier(**kwargs)


def logistic_regression(penalty, C, tol, solver, class_weight, random_state, max_iter=1000):
    """L1/L2 logistic regression on every scikit-learn version."""
    from sklearn.linear_model import LogisticRegression

    kwargs = dict(C=float(C), tol=float(tol), solver=solver, class_weight=class_weight,
                  random_state=random_state, max_iter=int(max_iter))
    init = inspect.signature(LogisticRegression.__init__).parameters
    if "penalty" in init and init["penalty"].default == "deprecated":  # scikit-learn >= 1.8
        kwargs["l1_ratio"] = 1.0 if penalty == "l1" else 0.0
    else:
        kwargs["penalty"] = penalty
    model = LogisticRegression(**kwargs)
    if solver == "liblinear" and SK_VERSION >= (1, 8):
        # liblinear refuses multiclass targets from 1.8 on; before, it fitted one-vs-rest itself.
        from sklearn.multiclass import OneVsRestClassifier

        return OneVsRestClassifier(model)
    return model


def hist_gradient_boosting(task, learning_rate, min_samples_leaf, max_leaf_nodes, l2_regularization,
                           early_stop, n_iter_no_change, validation_fraction, max_iter, class_weight,
                           random_state):
    """auto-sklearn's HistGradientBoosting with its ``early_stop`` in {off, valid, train}."""
    cls = HistGradientBoostingClassifier if task == "classification" else HistGradientBoostingRegressor
    kwargs = dict(
        learning_rate=float(learning_rate),
        min_samples_leaf=int(min_samples_leaf),
        max_leaf_nodes=int(max_leaf_nodes),
        l2_regularization=float(l2_regularization),
        max_iter=int(max_iter),
        max_bins=255,
        tol=1e-7,
        random_state=random_state,
    )
    if early_stop == "off":
        kwargs["early_stopping"] = False
    else:
        kwargs["early_stopping"] = True
        kwargs["n_iter_no_change"] = int(n_iter_no_change)
        kwargs["validation_fraction"] = float(validation_fraction) if early_stop == "valid" else None
        kwargs["scoring"] = "loss"
    if class_weight is not None and _accepts(cls, "class_weight"):  # scikit-learn >= 1.2
        kwargs["class_weight"] = class_weight
    return cls(**kwargs)


def fast_ica(n_components, algorithm, whiten, fun, random_state):
    from sklearn.decomposition import FastICA

    if whiten:
        whiten_arg = "unit-variance" if SK_VERSION >= (1, 1) else True
        n = int(n_components)
    else:
        whiten_arg, n = False, None
    return FastICA(n_components=n, algorithm=algorithm, whiten=whiten_arg, fun=fun,
                   max_iter=200, random_state=random_state)


def kernel_pca(n_components, kernel, gamma, degree, coef0, random_state):
    from sklearn.decomposition import KernelPCA

    kwargs = dict(n_components=int(n_components), kernel=kernel, gamma=gamma, degree=int(degree),
                  coef0=float(coef0), remove_zero_eig=True, random_state=random_state)
    if SK_VERSION >= (1, 0):
        kwargs["eigen_solver"] = "randomized"
    return RowCappedTransformer(SignedKernelPCA(KernelPCA(**kwargs), random_state=random_state),
                                max_rows=KERNEL_PCA_MAX_ROWS, random_state=random_state)


def feature_agglomeration(n_clusters, metric, linkage, pooling):
    pooling_func = {"mean": np.mean, "median": np.median, "max": np.max}[pooling]
    kwargs = dict(n_clusters=int(n_clusters), linkage=linkage, pooling_func=pooling_func)
    if _accepts(ClampedFeatureAgglomeration, "metric"):
        kwargs["metric"] = metric
    else:  # scikit-learn < 1.2
        kwargs["affinity"] = metric
    return ClampedFeatureAgglomeration(**kwargs)


# --------------------------------------------------------------------------- score functions
def chi2_nonnegative(X, y):
    """chi2 on X clipped at 0 (chi2 needs non-negative features; auto-sklearn clips the same way)."""
    return chi2(np.maximum(X, 0), y)


def score_function(name: str, task: str, random_state=None):
    if name == "chi2":
        return chi2_nonnegative
    if name == "f_classif":
        return f_classif
    if name == "f_regression":
        return f_regression
    if name == "mutual_info":
        func = mutual_info_classif if task == "classification" else mutual_info_regression
        return functools.partial(func, random_state=random_state)
    raise ValueError("unknown score function %r" % name)


# --------------------------------------------------------------------------- components
class _AtLeastOneFeature:
    """Univariate selectors that would keep no column keep the best-scoring one instead."""

    def _get_support_mask(self):
        mask = super()._get_support_mask()
        if not mask.any():
            mask = mask.copy()
            scores = np.nan_to_num(np.asarray(self.scores_, dtype=np.float64), nan=-np.inf)
            mask[int(np.argmax(scores))] = True
        return mask


class SafeSelectPercentile(_AtLeastOneFeature, SelectPercentile):
    """``SelectPercentile`` that always keeps at least one feature."""


class SafeGenericUnivariateSelect(_AtLeastOneFeature, GenericUnivariateSelect):
    """``GenericUnivariateSelect`` that always keeps at least one feature."""


class _ExponentMaxFeatures:
    """Forests whose ``max_features`` is an exponent e in [0, 1]: a split looks at
    ``max(1, int(n_features ** e))`` features (auto-sklearn's and VolcanoML's convention;
    e = 0.5 is the usual sqrt rule). The constructor value is kept, so ``clone`` works."""

    def fit(self, X, y, sample_weight=None):
        exponent = self.max_features
        n_features = X.shape[1]
        self.max_features = max(1, int(n_features ** float(exponent)))
        try:
            return super().fit(X, y, sample_weight=sample_weight)
        finally:
            self.max_features = exponent


def _forest(name):
    from sklearn import ensemble

    base = getattr(ensemble, name)
    return type(name, (_ExponentMaxFeatures, base), {"__module__": __name__, "__doc__": base.__doc__})


RandomForestClassifier = _forest("RandomForestClassifier")
RandomForestRegressor = _forest("RandomForestRegressor")
ExtraTreesClassifier = _forest("ExtraTreesClassifier")
ExtraTreesRegressor = _forest("ExtraTreesRegressor")


def _clamped(base, param, offset=0):
    """Subclass of ``base`` whose ``param`` is clamped to ``n_features - offset`` at fit time."""

    def fit(self, X, y=None, **kwargs):
        wanted = getattr(self, param)
        setattr(self, param, max(1, min(int(wanted), X.shape[1] - offset)))
        try:
            return base.fit(self, X, y, **kwargs)
        finally:
            setattr(self, param, wanted)

    def fit_transform(self, X, y=None, **kwargs):
        wanted = getattr(self, param)
        setattr(self, param, max(1, min(int(wanted), X.shape[1] - offset)))
        try:
            return base.fit_transform(self, X, y, **kwargs)
        finally:
            setattr(self, param, wanted)

    return fit, fit_transform


def _make_clamped(base_path, param, offset):
    module, _, name = base_path.rpartition(".")
    base = getattr(__import__(module, fromlist=[name]), name)
    fit, fit_transform = _clamped(base, param, offset)
    return type("Clamped" + name, (base,), {
        "__module__": __name__,
        "__doc__": "%s whose %s is clamped to the number of input features at fit time." % (name, param),
        "fit": fit,
        "fit_transform": fit_transform,
    })


# TruncatedSVD needs n_components < n_features; FeatureAgglomeration n_clusters <= n_features.
ClampedTruncatedSVD = _make_clamped("sklearn.decomposition.TruncatedSVD", "n_components", 1)
ClampedFeatureAgglomeration = _make_clamped("sklearn.cluster.FeatureAgglomeration", "n_clusters", 0)


class PolynomialInteractions(TransformerMixin, BaseEstimator):
    """Original features plus polynomial terms of the ``top_k`` most relevant ones.

    Bounded version of VolcanoML's polynomial generator: it ranks features by a univariate
    F-test (VolcanoML used LightGBM importances) and expands only the best ``top_k`` (25 for
    degree 2, 10 for degree 3), so the output stays at a few hundred extra columns whatever
    the input width.
    """

    def __init__(self, degree=2, interaction_only=False, task="classification", top_k=None):
        self.degree = degree
        self.interaction_only = interaction_only
        self.task = task
        self.top_k = top_k

    def fit(self, X, y=None):
        from sklearn.preprocessing import PolynomialFeatures

        X = np.asarray(X, dtype=np.float64)
        k = self.top_k if self.top_k is not None else (25 if int(self.degree) <= 2 else 10)
        k = max(1, min(int(k), X.shape[1]))
        if y is None or X.shape[1] <= k:
            order = np.arange(X.shape[1])
        else:
            score = f_classif if self.task == "classification" else f_regression
            with np.errstate(all="ignore"):
                scores = np.nan_to_num(score(X, y)[0], nan=-np.inf)
            order = np.argsort(-scores, kind="mergesort")
        self.columns_ = np.sort(order[:k])
        self.poly_ = PolynomialFeatures(degree=int(self.degree), interaction_only=bool(self.interaction_only),
                                        include_bias=False).fit(X[:, self.columns_])
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        X = np.asarray(X, dtype=np.float64)
        expanded = self.poly_.transform(X[:, self.columns_])[:, len(self.columns_):]
        return np.hstack([X, expanded])


#: Most megabytes of LightGBM's histogram cache (its ``histogram_pool_size``; unlimited by default). The cache holds
#: one histogram per leaf over every feature's bins, so a configuration of 558 leaves behind 470 random Fourier
#: features peaked at 1,476 MB on 24,000 rows where the data took 50 MB (696 MB capped, its fit 10 % slower); past
#: the cap LightGBM rebuilds a histogram instead of keeping it, which grows the same trees up to rounding.
LIGHTGBM_HISTOGRAM_MB = 256

#: Training rows a kernel SVM is fitted on at most. Its fit grows with about the square of the rows (on 30
#: features: about 4 s at 10,000 rows and 25-50 s at 20,000 on one core), so on large data it would only time out.
KERNEL_SVM_MAX_ROWS = 10_000


class RowCapped(BaseEstimator):
    """Fits ``estimator`` itself (not a clone, so its fitted state stays reachable) on at most ``max_rows``
    training rows (a class-stratified sample where every class has two rows), so a model whose fit grows faster
    than the rows stays usable on large data; predicts every row. Below the cap it is ``estimator`` fitted on all
    rows."""

    def __init__(self, estimator=None, max_rows: int = KERNEL_SVM_MAX_ROWS, random_state=None):
        self.estimator = estimator
        self.max_rows = max_rows
        self.random_state = random_state

    def fit(self, X, y, **fit_params):
        y = np.asarray(y)
        rows = np.arange(len(y))
        if len(y) > self.max_rows:
            rows = _row_sample(y, int(self.max_rows), self.random_state, is_classifier(self.estimator))
            X, y = _take(X, rows), y[rows]
        self.estimator_ = self.estimator.fit(X, y, **fit_params)
        if hasattr(self.estimator_, "classes_"):
            self.classes_ = self.estimator_.classes_
        self.rows_fitted_ = len(rows)
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    @property
    def predict_proba(self):  # an AttributeError here, as from the estimator, means "has none"
        return self.estimator_.predict_proba

    @property
    def decision_function(self):
        return self.estimator_.decision_function

    @property
    def _estimator_type(self):
        return getattr(self.estimator, "_estimator_type", None)


#: Training rows a kernel PCA is fitted on at most: it holds the kernel matrix of its training rows (8 bytes times
#: the rows squared: 20 GB at 50,000), so on large data it could only reach the memory limit. On 50,000 rows of 30
#: features (one core) 500 components took 14 s and 0.8 GB with 5,000 rows, 47 s and 1.9 GB with 10,000.
KERNEL_PCA_MAX_ROWS = 5_000


#: Rows of the exact decomposition a kernel that is not positive semi-definite falls back to: a full eigendecomposition
#: of 1,000 x 1,000 takes well under a second.
EXACT_KERNEL_PCA_ROWS = 1_000


class SignedKernelPCA(TransformerMixin, BaseEstimator):
    """scikit-learn's kernel PCA ``estimator``, and where it refuses a kernel that is not positive semi-definite (a
    sigmoid kernel, a polynomial one with a negative ``coef0``: the randomized solver takes the largest eigenvalues by
    modulus, negative ones too, and the eigenvalue check then fails the fit), the exact decomposition of the centred
    kernel on at most ``exact_rows`` rows, keeping the largest positive eigenvalues, as kernel PCA defines them.

    Why: auto-sklearn's space draws such kernels often, and a failed evaluation is time lost to the search."""

    def __init__(self, estimator=None, exact_rows: int = EXACT_KERNEL_PCA_ROWS, random_state=None):
        self.estimator = estimator
        self.exact_rows = exact_rows
        self.random_state = random_state

    def fit(self, X, y=None):
        self._fit(X, transform=False)
        return self

    def fit_transform(self, X, y=None):
        return self._fit(X, transform=True)

    def _fit(self, X, transform: bool):
        self.exact_ = False
        try:
            out = self.estimator.fit_transform(X) if transform else self.estimator.fit(X)
        except ValueError as exc:
            if "negative eigenvalues" not in str(exc):
                raise
        else:
            self.estimator_ = self.estimator
            return out
        self._fit_exact(np.asarray(X, dtype=np.float64))
        return self.transform(X) if transform else None

    def _fit_exact(self, X: np.ndarray) -> None:
        from scipy.linalg import eigh
        from sklearn.preprocessing import KernelCenterer

        if X.shape[0] > self.exact_rows:
            rows = np.random.RandomState(self.random_state).choice(X.shape[0], int(self.exact_rows), replace=False)
            X = X[np.sort(rows)]
        kernel = self._kernel(X, X)
        self.centerer_ = KernelCenterer().fit(kernel)
        values, vectors = eigh(self.centerer_.transform(kernel))
        order = np.argsort(values)[::-1][: int(self.estimator.n_components or len(values))]
        order = order[values[order] > max(values.max(), 0.0) * 1e-10]  # positive and not numerically zero
        if order.size == 0:
            raise ValueError("kernel PCA: the centred kernel has no positive eigenvalue")
        self.fit_rows_ = X
        self.alphas_ = vectors[:, order] / np.sqrt(values[order])
        self.exact_ = True

    def _kernel(self, X, Y) -> np.ndarray:
        from sklearn.metrics.pairwise import pairwise_kernels

        e = self.estimator  # filter_params passes each kernel only the parameters it takes
        return pairwise_kernels(X, Y, metric=e.kernel, filter_params=True, gamma=e.gamma, degree=e.degree,
                                coef0=e.coef0)

    def transform(self, X):
        if not self.exact_:
            return self.estimator_.transform(X)
        kernel = self._kernel(np.asarray(X, dtype=np.float64), self.fit_rows_)
        return self.centerer_.transform(kernel) @ self.alphas_


class RowCappedTransformer(TransformerMixin, BaseEstimator):
    """Fits the transformer ``estimator`` itself on at most ``max_rows`` training rows (a uniform sample) and
    transforms any number of rows in chunks of ``max_rows``, so a transformer that holds a rows-by-fitted-rows matrix
    (a kernel PCA's kernel) stays within memory on large data. Below the cap it is ``estimator`` fitted on all rows."""

    def __init__(self, estimator=None, max_rows: int = KERNEL_PCA_MAX_ROWS, random_state=None):
        self.estimator = estimator
        self.max_rows = max_rows
        self.random_state = random_state

    def fit(self, X, y=None):
        n = X.shape[0]
        if n > self.max_rows:
            rows = np.sort(np.random.RandomState(self.random_state).choice(n, int(self.max_rows), replace=False))
            X = _take(X, rows)
        self.estimator_ = self.estimator.fit(X)
        self.rows_fitted_ = min(n, int(self.max_rows))
        return self

    def fit_transform(self, X, y=None):
        if X.shape[0] > self.max_rows:
            return self.fit(X).transform(X)
        self.estimator_ = self.estimator
        self.rows_fitted_ = X.shape[0]
        return self.estimator.fit_transform(X)  # below the cap: exactly the transformer's own

    def transform(self, X):
        step = max(int(self.max_rows), 1)
        if X.shape[0] <= step:
            return self.estimator_.transform(X)
        return np.vstack([self.estimator_.transform(_take(X, slice(start, start + step)))
                          for start in range(0, X.shape[0], step)])


def _row_sample(y, size: int, random_state, stratify: bool) -> np.ndarray:
    from sklearn.model_selection import train_test_split

    rows = np.arange(len(y))
    by_class = None
    if stratify:
        _, counts = np.unique(y, return_counts=True)
        by_class = y if counts.min() >= 2 else None
    kept, _ = train_test_split(rows, train_size=size, random_state=random_state, stratify=by_class)
    return np.sort(kept)


def _take(X, rows):
    return X.iloc[rows] if hasattr(X, "iloc") else X[rows]
