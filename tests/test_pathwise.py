"""Pathwise posterior samples (random Fourier features + Matheron's rule) against the exact GP.

Tolerances (test_pooled_moments_match_exact): pathwise samples pooled over R calls (each call
its own frequencies) of S/R samples each, S in all, are compared with the exact ``predict``
and ``posterior_cov``:

* mean: for any frequencies, the sample mean's expectation is the exact posterior mean (the
  update uses the exact kernel), so only Monte-Carlo error: ``|m̂_i − m_i| ≤ 5·√(C_ii/S)``.
* covariance: Monte-Carlo (Wishart) variance ``(C_ii C_jj + C_ij²)/S`` plus the feature
  error. Given the frequencies the sampler's covariance is ``C + B·ΔK·Bᵀ`` with ``ΔK`` the
  prior-kernel error of D frequencies (zero mean, variance ``O(1/D)`` per entry), so
  pooling R calls leaves a variance ``≈ κ(C_ii C_jj + C_ij²)/(D·R)``, with a kurtosis
  allowance ``κ = 4`` (Gaussian features would give 1–2; the importance weights are ≤ 2).
  Bound: ``|Ĉ_ij − C_ij| ≤ 6·√((C_ii C_jj + C_ij²)·(1/S + κ/(D·R)))`` over the 125k distinct
  entries (measured max ≈ 4; a noise draw 1.5× too large gives ≈ 13).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalebo.search.models import pathwise
from scalebo.search.models.composite_kernels import make_kernel
from scalebo.search.models.gp import GaussianProcess
from scalebo.search.models.kernels import RBF, Matern52
from scalebo.search.models.pathwise import fourier_prior, supports, use_pathwise

RNG = np.random.default_rng(0)
X_TRAIN = RNG.uniform(0.0, 1.0, (40, 3))
X_TEST = RNG.uniform(-0.1, 1.1, (500, 3))
Y_TRAIN = (2.0 + 0.2 * np.sin(5 * X_TRAIN[:, 0]) + 0.1 * X_TRAIN[:, 1] ** 2
           + 0.05 * X_TRAIN[:, 2] + 0.01 * RNG.standard_normal(40))


def _gp(kernel: str = "matern52", **kw) -> GaussianProcess:
    """Fixed hyperparameters (no optimizer in the loop): amplitude 1, noise 0.02
    (standardized units), length scales 0.5."""
    return GaussianProcess(kernel, optimize=False, amplitude=1.0, noise=0.02, **kw).fit(
        X_TRAIN, Y_TRAIN)


@pytest.mark.parametrize(("kernel", "include_noise"),
                         [("matern52", False), ("matern52", True), ("transfer", False)])
def test_pooled_moments_match_exact(monkeypatch, kernel: str, include_noise: bool) -> None:
    monkeypatch.setattr(pathwise, "N_FEATURES", 1024)  # D = 512 frequencies per term
    R, per, D, kappa = 40, 100, 512, 4.0
    gp = _gp(kernel)
    draws = np.vstack([gp.sample_joint(X_TEST, per, seed, include_noise=include_noise,
                                       method="pathwise") for seed in range(R)])
    S = draws.shape[0]
    mean = gp.predict(X_TEST, return_std=False)
    C = gp.posterior_cov(X_TEST, include_noise=include_noise)
    var = np.diag(C)
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 5.0 * np.sqrt(var / S))
    tol = 6.0 * np.sqrt((np.outer(var, var) + C**2) * (1.0 / S + kappa / (D * R)))
    err = np.abs(np.cov(draws.T) - C)
    assert np.all(err <= tol), f"max err/tol {np.max(err / tol):.2f}"


@pytest.mark.parametrize("kernel", [Matern52((0.3, 0.7, 1.2)), RBF((0.3, 0.7, 1.2)),
                                    make_kernel("transfer", 3).with_theta(
                                        np.log([0.3, 0.7, 1.2, 0.5, 0.8]))])
def test_prior_kernel_error_shrinks_with_features(kernel) -> None:
    """``φ(0)ᵀφ(τ)`` vs ``k(τ)`` at 200 offsets: each frequency contributes
    ``w·cos(ωᵀτ)`` with ``w ≤ 2``, so an entry's sd is ≤ ``√(2/D)`` and the max of 200 is
    ≤ 4 sd; the error must also fall ≥ 2× from F = 256 to 4096 (Monte-Carlo rate: 4×)."""
    taus = np.random.default_rng(1).uniform(-1.0, 1.0, (200, 3))
    exact = kernel(np.zeros((1, 3)), taus)[0]
    errors = {}
    for F in (256, 4096):
        errs = []
        for seed in range(4):
            phi = fourier_prior(kernel, F, np.random.default_rng(seed)).features(
                np.vstack([np.zeros((1, 3)), taus]))
            errs.append(np.abs(phi[1:] @ phi[0] - exact).max())
        errors[F] = float(np.mean(errs))
        n_terms = phi.shape[1] // F
        assert errors[F] <= 4.0 * np.sqrt(2.0 * n_terms / (F / 2)), (F, errors[F])
    assert errors[4096] <= errors[256] / 2.0, errors


def test_spectral_convention_matches_kernel_formula() -> None:
    """Many frequencies: ``E[w·cos(ωᵀτ)]`` is the kernel's own formula (a wrong Matérn scale,
    e.g. √(ν/u) for √(2ν/u), is off by > 0.1 here)."""
    taus = np.random.default_rng(2).uniform(-1.0, 1.0, (100, 3))
    for kernel in (Matern52((0.3, 0.7, 1.2)), RBF((0.3, 0.7, 1.2))):
        phi = fourier_prior(kernel, 1 << 16, np.random.default_rng(0)).features(
            np.vstack([np.zeros((1, 3)), taus]))
        exact = kernel(np.zeros((1, 3)), taus)[0]
        assert np.abs(phi[1:] @ phi[0] - exact).max() < 0.01


def test_same_seed_same_samples() -> None:
    gp = _gp()
    a = gp.sample_joint(X_TEST, 8, 7, method="pathwise", include_noise=True)
    b = gp.sample_joint(X_TEST, 8, np.random.default_rng(7), method="pathwise",
                        include_noise=True)
    c = gp.sample_joint(X_TEST, 8, 8, method="pathwise", include_noise=True)
    assert a.shape == (8, 500)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # chunking changes only the blocks, not the draws
    d = pathwise.pathwise_samples(gp, X_TEST, 8, 7, include_noise=True, chunk=37)
    np.testing.assert_allclose(a, d, rtol=0, atol=1e-12)


def test_auto_switches_at_threshold(monkeypatch) -> None:
    assert not use_pathwise(Matern52((0.5,)), pathwise.PATHWISE_MIN_POINTS, "auto")
    assert use_pathwise(Matern52((0.5,)), pathwise.PATHWISE_MIN_POINTS + 1, "auto")
    monkeypatch.setattr(pathwise, "PATHWISE_MIN_POINTS", 100)
    gp = _gp()
    at, above = X_TEST[:100], X_TEST[:101]
    np.testing.assert_array_equal(gp.sample_joint(at, 4, 3),
                                  gp.sample_joint(at, 4, 3, method="exact"))
    np.testing.assert_array_equal(gp.sample_joint(above, 4, 3),
                                  gp.sample_joint(above, 4, 3, method="pathwise"))
    assert not np.allclose(gp.sample_joint(above, 4, 3),
                           gp.sample_joint(above, 4, 3, method="exact"))
    with pytest.raises(ValueError, match="unknown sampling method"):
        gp.sample_joint(at, 4, 3, method="cholesky")


def test_unsupported_kernel_falls_back_to_exact(monkeypatch) -> None:
    monkeypatch.setattr(pathwise, "PATHWISE_MIN_POINTS", 10)
    X = X_TRAIN.copy()
    X[:, 2] = np.arange(40) % 3  # a categorical column: Matérn × Categorical
    gp = GaussianProcess("matern52", categorical=(2,), optimize=False).fit(X, Y_TRAIN)
    assert not supports(gp.kernel_)
    Xs = X_TEST[:50].copy()
    Xs[:, 2] = np.arange(50) % 3
    np.testing.assert_array_equal(gp.sample_joint(Xs, 4, 1),
                                  gp.sample_joint(Xs, 4, 1, method="exact"))
    with pytest.raises(ValueError, match="does not support"):
        gp.sample_joint(Xs, 4, 1, method="pathwise")
