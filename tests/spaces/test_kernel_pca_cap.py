"""Kernel PCA on large data: fitted on at most KERNEL_PCA_MAX_ROWS rows, transforming every row in chunks."""

import numpy as np
from sklearn.decomposition import KernelPCA

from optdiv.spaces.sklearn_models import RowCappedTransformer, kernel_pca


def _rows(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 5))


def test_below_the_cap_it_is_the_transformers_own_fit():
    X = _rows(200)
    capped = kernel_pca(8, "rbf", 0.2, 3, 0.0, 0)
    direct = KernelPCA(n_components=8, kernel="rbf", gamma=0.2, remove_zero_eig=True, random_state=0,
                       eigen_solver=capped.estimator.eigen_solver)
    np.testing.assert_allclose(capped.fit_transform(X), direct.fit_transform(X), atol=1e-8)
    assert capped.rows_fitted_ == 200
    np.testing.assert_allclose(capped.transform(X[:20]), direct.transform(X[:20]), atol=1e-8)


def test_above_the_cap_it_fits_on_a_sample_and_transforms_every_row_in_chunks():
    X = _rows(1_000)
    capped = RowCappedTransformer(KernelPCA(n_components=4, kernel="rbf", gamma=0.2, random_state=0),
                                  max_rows=300, random_state=1)
    out = capped.fit_transform(X)
    assert capped.rows_fitted_ == 300 and capped.estimator_.X_fit_.shape == (300, 5)  # the kernel is 300 x 300
    assert out.shape == (1_000, 4) and np.isfinite(out).all()
    np.testing.assert_allclose(out, capped.estimator_.transform(X), atol=1e-10)  # chunks change nothing
    again = RowCappedTransformer(KernelPCA(n_components=4, kernel="rbf", gamma=0.2, random_state=0),
                                 max_rows=300, random_state=1).fit(X)
    np.testing.assert_array_equal(again.estimator_.X_fit_, capped.estimator_.X_fit_)  # the seed picks the sample
