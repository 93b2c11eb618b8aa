"""Kernel PCA on large data: fitted on at most KERNEL_PCA_MAX_ROWS rows, transforming every row in chunks; and on
kernels that are not positive semi-definite, which scikit-learn's fast solver refuses."""

import numpy as np
from sklearn.decomposition import KernelPCA

import pytest

from optdiv.spaces.sklearn_models import SK_VERSION, RowCappedTransformer, SignedKernelPCA, kernel_pca


def _rows(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 5))


def test_below_the_cap_it_is_the_transformers_own_fit():
    X = _rows(200)
    capped = kernel_pca(8, "rbf", 0.2, 3, 0.0, 0)
    direct = KernelPCA(n_components=8, kernel="rbf", gamma=0.2, remove_zero_eig=True, random_state=0,
                       eigen_solver=capped.estimator.estimator.eigen_solver)
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


@pytest.mark.parametrize("kernel,coef0,gamma", [("sigmoid", 0.0, 0.5), ("sigmoid", 1.0, 3.0), ("poly", -1.0, 0.5)])
def test_a_kernel_that_is_not_psd_fits_by_the_exact_decomposition(kernel, coef0, gamma):
    X = _rows(600)
    try:  # scikit-learn's own fit, as the space built it before
        kernel_pca(100, kernel, gamma, 3, coef0, 0).estimator.estimator.fit(X)
        refused = False
    except ValueError as exc:
        assert "negative eigenvalues" in str(exc)
        refused = True
    if SK_VERSION >= (1, 0):
        assert refused  # the randomized solver meets the negative eigenvalues: every such evaluation failed
    model = kernel_pca(100, kernel, gamma, 3, coef0, 0)
    out = model.fit_transform(X)
    assert model.estimator_.exact_ == refused
    assert out.shape[0] == 600 and 0 < out.shape[1] <= 100 and np.isfinite(out).all()
    np.testing.assert_allclose(model.transform(X[:50]), out[:50], atol=1e-8)  # the training rows map as new ones


def test_the_exact_decomposition_is_kernel_pca_on_at_most_exact_rows():
    X = _rows(400, seed=3)
    exact = SignedKernelPCA(KernelPCA(n_components=5, kernel="rbf", gamma=0.2), exact_rows=1_000)
    exact._fit_exact(X)
    dense = KernelPCA(n_components=5, kernel="rbf", gamma=0.2, eigen_solver="dense").fit_transform(X)
    np.testing.assert_allclose(np.abs(exact.transform(X)), np.abs(dense), atol=1e-8)  # equal up to each sign
    sampled = SignedKernelPCA(KernelPCA(n_components=5, kernel="rbf", gamma=0.2), exact_rows=100, random_state=0)
    sampled._fit_exact(X)
    assert sampled.fit_rows_.shape == (100, 5) and sampled.transform(X).shape == (400, 5)


def test_other_errors_are_not_taken_for_a_kernel_that_is_not_psd():
    with pytest.raises(ValueError):
        SignedKernelPCA(KernelPCA(n_components=5, kernel="no-such-kernel")).fit(_rows(50))
