"""Kernel invariants over the whole registry: finite-difference gradients, contraction vs the
full gradient tensor, diag vs the full matrix, PSD, and values against scikit-learn."""

import numpy as np
import pytest

from scalebo.search.models.composite_kernels import KERNEL_NAMES, Additive, Mixed, make_kernel
from scalebo.search.models.kernels import RBF, Categorical, Matern52


def _X(n: int = 25, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    X[:, 3] = rng.integers(0, 3, n)  # categorical codes in column 3
    X.flags.writeable = False
    return X


def _all_kernels():
    rng = np.random.default_rng(1)
    out = []
    for name in KERNEL_NAMES:
        for cat in ((3,), ()):
            k = make_kernel(name, 4, categorical=cat)
            out.append((f"{name}-cat{len(cat)}", k.with_theta(k.theta + rng.normal(0, .4,
                                                                                   k.n_params))))
    return out


KERNELS = _all_kernels()
IDS = [name for name, _ in KERNELS]


@pytest.mark.parametrize("kernel", [k for _, k in KERNELS], ids=IDS)
def test_gradient_matches_central_differences(kernel):
    X = _X()
    K, dK = kernel.gradient(X)
    assert dK.shape == (len(X), len(X), kernel.n_params)
    h = np.finfo(float).eps ** (1 / 3)
    for p in range(kernel.n_params):
        e = np.zeros(kernel.n_params)
        e[p] = h
        fd = (kernel.with_theta(kernel.theta + e)(X) - kernel.with_theta(kernel.theta - e)(X))
        np.testing.assert_allclose(dK[:, :, p], fd / (2 * h), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kernel", [k for _, k in KERNELS], ids=IDS)
def test_contractor_equals_full_gradient_contraction(kernel):
    X = _X()
    K, dK = kernel.gradient(X)
    K2, contract = kernel.value_and_contractor(X)
    W = np.random.default_rng(2).normal(size=(len(X), len(X)))  # need not be symmetric
    np.testing.assert_allclose(K2, K, rtol=1e-13, atol=1e-14)
    expected = np.einsum("ij,ijp->p", W, dK)
    np.testing.assert_allclose(contract(W.copy()), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(contract(W.copy()), expected, rtol=1e-10, atol=1e-10)  # reusable


@pytest.mark.parametrize("kernel", [k for _, k in KERNELS], ids=IDS)
def test_diag_symmetry_and_positive_semidefinite(kernel):
    X = _X(30)
    K = kernel(X)
    np.testing.assert_allclose(np.diag(K), kernel.diag(X), rtol=1e-14)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-15)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    # cross-covariance blocks are consistent with the joint matrix
    np.testing.assert_allclose(kernel(X[:10], X[10:]), K[:10, 10:], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kernel", [k for _, k in KERNELS], ids=IDS)
def test_theta_round_trip_and_bounds(kernel):
    again = kernel.with_theta(kernel.theta)
    np.testing.assert_allclose(again.theta, kernel.theta, rtol=1e-15, atol=1e-15)
    assert kernel.bounds.shape == (kernel.n_params, 2)
    assert np.all(kernel.bounds[:, 0] < kernel.bounds[:, 1])
    with pytest.raises(ValueError, match="theta must have shape"):
        kernel.with_theta(np.zeros(kernel.n_params + 1))


def test_matern_and_rbf_equal_scikit_learn():
    from sklearn.gaussian_process.kernels import RBF as SkRBF
    from sklearn.gaussian_process.kernels import Matern

    X = np.random.default_rng(3).random((20, 3))
    ls = [0.3, 1.2, 0.07]
    np.testing.assert_allclose(Matern52(tuple(ls))(X), Matern(ls, nu=2.5)(X), rtol=1e-12)
    np.testing.assert_allclose(RBF(tuple(ls))(X), SkRBF(ls)(X), rtol=1e-12)
    _, dK = Matern52(tuple(ls)).gradient(X)
    _, dK_sk = Matern(ls, nu=2.5)(X, eval_gradient=True)
    np.testing.assert_allclose(dK, dK_sk, rtol=1e-10, atol=1e-14)


def test_categorical_kernel_hand_values():
    k = Categorical((2.0, 0.5))
    X = np.array([[0.0, 1.0], [0.0, 2.0], [1.0, 2.0]])
    # pairs differ in column 1 only: exp(−1/0.5); in both: exp(−1/2 − 1/0.5); in column 0: exp(−1/2)
    expected = np.array([[1, np.exp(-2), np.exp(-2.5)],
                         [np.exp(-2), 1, np.exp(-0.5)],
                         [np.exp(-2.5), np.exp(-0.5), 1]])
    np.testing.assert_allclose(k(X), expected, rtol=1e-14)


def test_additive_and_mixed_compose_their_parts():
    X = _X()
    a, b = Matern52((0.4,), active_dims=(0,)), RBF((0.3, 0.8), active_dims=(1, 2))
    add = Additive((a, b), weights=(2.5,))
    np.testing.assert_allclose(add(X), a(X) + 2.5 * b(X), rtol=1e-14)
    np.testing.assert_allclose(add.diag(X), np.full(len(X), 3.5))
    cat = Categorical((0.7,), active_dims=(3,))
    mixed = Mixed(b, cat)
    np.testing.assert_allclose(mixed(X), b(X) * cat(X), rtol=1e-14)


def test_make_kernel_layout_and_errors():
    k = make_kernel("matern52", 4, categorical=[3])
    assert isinstance(k, Mixed) and k.numeric.active_dims == (0, 1, 2)
    assert k.categorical.active_dims == (3,)
    assert isinstance(make_kernel("matern52", 4), Matern52)
    assert make_kernel("additive", 3).n_params == 3 + 2  # 3 length scales + 2 weights
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("linear", 2)
    with pytest.raises(ValueError, match="out of range"):
        make_kernel("mixed", 2, categorical=[5])
    with pytest.raises(ValueError, match="length scales but X has"):
        Matern52((1.0, 1.0))(np.zeros((3, 3)))
