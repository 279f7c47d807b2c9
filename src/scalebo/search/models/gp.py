"""Exact Gaussian-process regression in numpy/scipy, with log-space hyperparameters.

Model: ``y_std = (y − ȳ)/s_y`` (standardized, as scikit-learn's ``normalize_y=True``), and
``y_std ~ GP(0, σ²·k(x, x')) + N(0, σ_n²)``. The hyperparameters are fitted by maximizing the
log marginal likelihood (plus an optional log prior) with L-BFGS-B and analytic gradients.

Notations
---------
- ``n``: number of training observations; ``m``: number of test points.
- ``X``: training inputs, shape ``(n, n_dims)``; ``y``: losses in nats, shape ``(n,)``.
- ``theta``: GP log hyperparameters ``[log σ², θ_kernel…, log σ_n²]``, shape ``(n_params,)``,
  the same order as scikit-learn's ``ConstantKernel * kernel + WhiteKernel``.
- ``R = k(X, X)`` (unit amplitude), ``K = σ²R + σ_n² I``, shape ``(n, n)``; ``L``: its lower
  Cholesky factor; ``α = K⁻¹ y_std``, shape ``(n,)``.
- ``lml = −½ y_stdᵀα − Σ log L_ii − (n/2) log 2π`` (R&W 2006, Alg. 2.1), and
  ``∂lml/∂θ_p = ½ tr((ααᵀ − K⁻¹) ∂K/∂θ_p)`` (eq. 5.9): one Cholesky (n³/3 flops), one
  inverse from it (``dpotri``, 2n³/3) and ``O(n²·n_dims)`` for all gradients, with no
  ``(n, n, n_params)`` array. The amplitude and noise terms need only ``yᵀα``, ``|α|²`` and
  ``tr K⁻¹``.
- ``K_* = σ²k(X, X_*)``, shape ``(n, m)``; ``V = L⁻¹K_*``; posterior mean ``K_*ᵀα``, latent
  covariance ``σ²k(X_*, X_*) − VᵀV``; both rescaled to nats by ``ȳ`` and ``s_y``.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, lapack, solve_triangular

from scalebo.errors import NumericalWarning
from scalebo.search.models.composite_kernels import make_kernel

# GPPrior, HyperparameterFit and blas_threads are also public names of this module (kept
# importable from here).
from scalebo.search.models.gp_hyperparameters import (
    GPPrior,
    HyperparameterFit,
    best_restarts,
    optimize_hyperparameters,
    restart_candidates,
)
from scalebo.search.models.kernels import Kernel
from scalebo.search.models.linalg import (
    _cholesky,
    _half_inverse_from_cholesky,
    _lml_value,
    blas_threads,
)
from scalebo.search.models.pathwise import pathwise_samples, use_pathwise
from scalebo.search.models.scaling import standardization


def _with_blas_limit(method: Callable) -> Callable:
    """Run a GaussianProcess method under ``blas_threads(self.n_threads)``."""

    @functools.wraps(method)
    def wrapper(self: GaussianProcess, *args: Any, **kwargs: Any) -> Any:
        with blas_threads(self.n_threads):
            return method(self, *args, **kwargs)

    return wrapper


class GaussianProcess:
    """Exact GP regressor (scikit-learn conventions: ``fit`` returns self, learned state ends
    with ``_``).

    Args:
        kernel: a :class:`~scalebo.search.models.kernels.Kernel` (unit amplitude; its current
            ``theta`` is the first start) or a name for :func:`make_kernel` built at ``fit``.
        categorical: categorical columns, used when ``kernel`` is a name.
        amplitude, noise: initial signal variance ``σ²`` and noise variance ``σ_n²``, in
            standardized y units when ``normalize_y`` (else nats²).
        amplitude_bounds, noise_bounds: bounds in the same units; equal bounds fix the value.
        normalize_y: standardize y by its mean and (population) standard deviation.
        n_restarts: random restarts after the first start (previous fit, else the initial
            values); each is the best of ``n_screen`` uniform draws from the central 60 % of
            each log-space bound, ranked by LML (``n_screen=1``: plain uniform draws, as
            scikit-learn's ``n_restarts_optimizer``).
        n_screen: candidate draws screened per restart.
        optimize: if False, keep the initial hyperparameters.
        prior: a :class:`GPPrior` for MAP estimation, or None for maximum likelihood.
        max_iter: L-BFGS-B iterations per start.
        n_threads: BLAS threads inside ``fit``, ``predict`` and sampling (see
            :func:`blas_threads`); None leaves the BLAS setting alone.
        rng: seed of the random restarts (an int makes every fit reproducible).
    """

    def __init__(
        self,
        kernel: Kernel | str = "matern52",
        *,
        categorical: Sequence[int] = (),
        amplitude: float = 1.0,
        noise: float = 1e-2,
        amplitude_bounds: tuple[float, float] = (1e-2, 1e2),
        noise_bounds: tuple[float, float] = (1e-6, 1e1),
        normalize_y: bool = True,
        n_restarts: int = 2,
        n_screen: int = 10,
        optimize: bool = True,
        prior: GPPrior | None = None,
        max_iter: int = 200,
        n_threads: int | None = 1,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        self.kernel = kernel
        self.categorical = categorical
        self.amplitude = amplitude
        self.noise = noise
        self.amplitude_bounds = amplitude_bounds
        self.noise_bounds = noise_bounds
        self.normalize_y = normalize_y
        self.n_restarts = n_restarts
        self.n_screen = n_screen
        self.optimize = optimize
        self.prior = prior
        self.max_iter = max_iter
        self.n_threads = n_threads
        self.rng = rng

    # ------------------------------------------------------------------ fitting
    @_with_blas_limit
    def fit(self, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> GaussianProcess:
        """Fit hyperparameters and factorize ``K``.

        Args:
            X: inputs, shape ``(n, n_dims)``. y: losses in nats, shape ``(n,)``.
            warm_start: start only from the previous fit's ``theta_`` (no restarts): the fast
                refit path of a BO loop. Ignored before the first fit.
        """
        X, y = self._check_Xy(X, y)
        if isinstance(self.kernel, str):
            base = make_kernel(self.kernel, X.shape[1], categorical=self.categorical)
        else:
            base = self.kernel
        self._base_kernel = base
        self.X_train_ = X
        if self.normalize_y:
            self.y_mean_, self.y_std_ = standardization(y)
        else:
            self.y_mean_, self.y_std_ = 0.0, 1.0
        self.y_train_ = (y - self.y_mean_) / self.y_std_
        self.n_lml_evals_ = 0

        theta0 = np.concatenate([[np.log(self.amplitude)], base.theta, [np.log(self.noise)]])
        bounds = self._bounds(base)
        theta0 = np.clip(theta0, bounds[:, 0], bounds[:, 1])
        previous = getattr(self, "theta_", None)
        if previous is not None and previous.shape != theta0.shape:
            previous = None
        warm = warm_start and previous is not None
        if not self.optimize:
            theta = theta0
            self.fit_result_ = HyperparameterFit(theta, np.nan, 0, 0, 0, True, 0,
                                                 "hyperparameters not optimized", False)
        else:
            starts = [previous if previous is not None else theta0]
            if not warm and self.n_restarts > 0:
                starts += self._screened_restarts(bounds)
            theta, self.fit_result_ = self._optimize(starts, bounds, warm)
        self._ws = None  # release the optimizer's buffers
        self._set_state(theta, warn=True)
        if np.isnan(self.fit_result_.log_marginal_likelihood):
            self.fit_result_ = replace(self.fit_result_, theta=theta,
                                       log_marginal_likelihood=self.log_marginal_likelihood_value_)
        return self

    def _screened_restarts(self, bounds: np.ndarray) -> list[np.ndarray]:
        """The ``n_restarts`` best by LML (value only, on a random subset of at most 256
        rows) of ``n_screen × n_restarts`` draws (:func:`restart_candidates`)."""
        gen = np.random.default_rng(self.rng)
        cands = restart_candidates(bounds, self.n_restarts * max(self.n_screen, 1), gen)
        if self.n_screen <= 1:
            return list(cands)
        n = self.X_train_.shape[0]
        rows = np.sort(gen.choice(n, 256, replace=False)) if n > 256 else slice(None)
        data = (self.X_train_[rows], self.y_train_[rows])

        def score(theta: np.ndarray) -> float:
            val = self._lml(theta, eval_gradient=False, warn=False, data=data)
            return val + (self.prior.log_pdf_and_grad(theta)[0] if self.prior else 0.0)

        return best_restarts(score, cands, self.n_restarts)

    def _bounds(self, base: Kernel) -> np.ndarray:
        b = [np.log(np.asarray(self.amplitude_bounds, dtype=np.float64))[None], base.bounds,
             np.log(np.asarray(self.noise_bounds, dtype=np.float64))[None]]
        return np.vstack(b)

    def _optimize(self, starts: list[np.ndarray], bounds: np.ndarray,
                  warm: bool) -> tuple[np.ndarray, HyperparameterFit]:
        def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
            lml, grad = self._lml(theta, eval_gradient=True, warn=False)
            if self.prior is not None:
                lp, gp = self.prior.log_pdf_and_grad(theta)
                lml, grad = lml + lp, grad + gp
            return -lml, -grad

        return optimize_hyperparameters(
            objective, lambda th: self._lml(th, eval_gradient=False, warn=False), starts,
            bounds, max_iter=self.max_iter, warm=warm)

    def _split(self, theta: np.ndarray) -> tuple[float, Kernel, float]:
        return float(np.exp(theta[0])), self._base_kernel.with_theta(theta[1:-1]), \
            float(np.exp(theta[-1]))

    def _lml(self, theta: np.ndarray, *, eval_gradient: bool, warn: bool,
             data: tuple[np.ndarray, np.ndarray] | None = None
             ) -> float | tuple[float, np.ndarray]:
        """Log marginal likelihood of the standardized training data (or of ``data``) at
        ``theta``."""
        self.n_lml_evals_ += 1
        X, y = (self.X_train_, self.y_train_) if data is None else data
        n = X.shape[0]
        amp, kern, noise = self._split(np.asarray(theta, dtype=np.float64))
        if eval_gradient:
            R, contract = kern.value_and_contractor(X)
            # NOTE: reused n × n buffers: fresh ones were measured to cost more in page faults
            # than the Cholesky itself (n = 500). Kb is symmetric, so Kb.T is K in Fortran
            # order and dpotrf factorizes it in place.
            Kb, Wb = self._workspace(n)
            np.multiply(R, amp, out=Kb)
            Kb.flat[:: n + 1] += noise
            L, info = lapack.dpotrf(Kb.T, lower=1, clean=1, overwrite_a=1)
            jitter = 0.0
        else:
            R = kern.gram(X)
        if not eval_gradient or info != 0:
            K = amp * R
            K.flat[:: n + 1] += noise
            L, jitter = _cholesky(K, warn=warn)
        alpha = cho_solve((L, True), y, check_finite=False)
        lml = _lml_value(L, alpha, y)
        if not eval_gradient:
            return lml
        P = _half_inverse_from_cholesky(L)
        tr_kinv, a2, ya = float(np.trace(P)), float(alpha @ alpha), float(y @ alpha)
        W = np.multiply.outer(alpha, alpha, out=Wb)
        W -= P  # contracts with symmetric matrices as ααᵀ − K⁻¹ does
        # amplitude, with K = σ²R + s²I (s² = noise + jitter): σ²·Σ W∘R = σ²αᵀRα − σ²tr(K⁻¹R)
        # = (yᵀα − s²|α|²) − (n − s²·tr K⁻¹), no n² pass; noise: ½σ_n²·tr(W).
        s2 = noise + jitter
        g_amp = 0.5 * (ya - s2 * a2 - n + s2 * tr_kinv)
        grad = np.concatenate([[g_amp], 0.5 * amp * contract(W),
                               [0.5 * noise * (a2 - tr_kinv)]])
        return lml, grad

    def _workspace(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        ws = getattr(self, "_ws", None)
        if ws is None or ws[0].shape[0] != n:
            ws = self._ws = (np.empty((n, n)), np.empty((n, n)))
        return ws

    def _set_state(self, theta: np.ndarray, *, warn: bool) -> None:
        self.theta_ = np.array(theta, dtype=np.float64)
        self.amplitude_, self.kernel_, self.noise_ = self._split(self.theta_)
        X, n = self.X_train_, self.X_train_.shape[0]
        K = self.amplitude_ * self.kernel_(X)
        K.flat[:: n + 1] += self.noise_
        self.L_, self.jitter_ = _cholesky(K, warn=warn)
        self.alpha_ = cho_solve((self.L_, True), self.y_train_, check_finite=False)
        self.log_marginal_likelihood_value_ = _lml_value(self.L_, self.alpha_, self.y_train_)

    @_with_blas_limit
    def log_marginal_likelihood(self, theta: np.ndarray | None = None,
                                eval_gradient: bool = False) -> float | tuple[float, np.ndarray]:
        """LML of the standardized training data (no prior term) at ``theta`` (n_params,),
        default the fitted ``theta_``; with ``eval_gradient`` also ``∂lml/∂theta``."""
        self._check_fitted()
        if theta is None and not eval_gradient:
            return self.log_marginal_likelihood_value_
        theta = self.theta_ if theta is None else np.asarray(theta, dtype=np.float64)
        try:
            return self._lml(theta, eval_gradient=eval_gradient, warn=True)
        finally:
            self._ws = None

    # -------------------------------------------------------------- prediction
    @_with_blas_limit
    def predict(self, X: np.ndarray, return_std: bool = True, *,
                include_noise: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Posterior mean (nats), shape ``(m,)``, and standard deviation of the latent loss
        (``include_noise`` adds the noise variance, as scikit-learn with a WhiteKernel)."""
        self._check_fitted()
        Xs = self._check_X(X)
        Ks = self.amplitude_ * self.kernel_(self.X_train_, Xs)  # (n, m)
        mean = Ks.T @ self.alpha_ * self.y_std_ + self.y_mean_
        if not return_std:
            return mean
        V = solve_triangular(self.L_, Ks, lower=True, check_finite=False)
        var = self.amplitude_ * self.kernel_.diag(Xs) - np.einsum("ij,ij->j", V, V)
        var = self._clip_var(var)
        if include_noise:
            var = var + self.noise_
        return mean, np.sqrt(var) * self.y_std_

    def _clip_var(self, var: np.ndarray) -> np.ndarray:
        if np.any(var < -1e-6 * self.amplitude_):
            warnings.warn(f"negative posterior variance down to {var.min():.3g} set to 0 "
                          "(ill-conditioned K)", NumericalWarning, stacklevel=3)
        return np.maximum(var, 0.0)

    @_with_blas_limit
    def posterior_cov(self, X: np.ndarray, *, include_noise: bool = False) -> np.ndarray:
        """Posterior covariance of the latent loss at ``X``, nats², shape ``(m, m)``."""
        self._check_fitted()
        Xs = self._check_X(X)
        Ks = self.amplitude_ * self.kernel_(self.X_train_, Xs)
        V = solve_triangular(self.L_, Ks, lower=True, check_finite=False)
        cov = self.amplitude_ * self.kernel_(Xs) - V.T @ V
        if include_noise:
            cov.flat[:: cov.shape[0] + 1] += self.noise_
        return cov * self.y_std_**2

    @_with_blas_limit
    def sample_joint(self, X: np.ndarray, n_samples: int,
                     rng: np.random.Generator | int | None = None, *,
                     include_noise: bool = False, method: str = "auto") -> np.ndarray:
        """Joint posterior samples of the latent loss at ``X`` (``include_noise``: of a
        recorded loss, latent + observation noise), nats, shape ``(n_samples, m)``.
        ``method="exact"``: the covariance gets a fixed jitter of 1e-10 × its mean diagonal
        (it is rank-deficient near training points; more, with a warning, if needed) and a
        Cholesky, O(m³); ``"pathwise"``: :mod:`~scalebo.search.models.pathwise`, O(m) memory;
        ``"auto"``: pathwise above ``PATHWISE_MIN_POINTS`` points if the kernel allows."""
        self._check_fitted()
        Xs = self._check_X(X)
        if use_pathwise(self.kernel_, Xs.shape[0], method):
            return pathwise_samples(self, Xs, n_samples, rng, include_noise=include_noise)
        mean = self.predict(Xs, return_std=False)
        cov = self.posterior_cov(Xs, include_noise=include_noise)
        cov.flat[:: cov.shape[0] + 1] += 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
        C, _ = _cholesky(cov, warn=True, what="the posterior covariance")
        z = np.random.default_rng(rng).standard_normal((int(n_samples), Xs.shape[0]))
        return mean + z @ C.T

    @_with_blas_limit
    def condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> GaussianProcess:
        """A new GP with the same hyperparameters and y standardization, conditioned also on
        ``(X_new, y_new)`` (shapes ``(k, n_dims)``, ``(k,)``) by extending the Cholesky factor
        in ``O(n²k)`` (kriging believer: pass the posterior means as ``y_new``)."""
        self._check_fitted()
        Xn, yn = self._check_Xy(X_new, y_new)
        if Xn.shape[1] != self.X_train_.shape[1]:
            raise ValueError(f"X_new has {Xn.shape[1]} columns; the GP was fitted on "
                             f"{self.X_train_.shape[1]}")
        n, k = self.X_train_.shape[0], Xn.shape[0]
        K12 = self.amplitude_ * self.kernel_(self.X_train_, Xn)
        K22 = self.amplitude_ * self.kernel_(Xn)
        K22.flat[:: k + 1] += self.noise_ + self.jitter_
        B = solve_triangular(self.L_, K12, lower=True, check_finite=False)  # (n, k)
        C, _ = _cholesky(K22 - B.T @ B, warn=True, what="the Schur complement")
        L = np.zeros((n + k, n + k))
        L[:n, :n], L[n:, :n], L[n:, n:] = self.L_, B.T, C
        new = copy.copy(self)
        new.X_train_ = np.vstack([self.X_train_, Xn])
        new.y_train_ = np.concatenate([self.y_train_, (yn - self.y_mean_) / self.y_std_])
        new.L_ = L
        new.alpha_ = cho_solve((L, True), new.y_train_, check_finite=False)
        new.log_marginal_likelihood_value_ = _lml_value(L, new.alpha_, new.y_train_)
        return new

    # -------------------------------------------------------------- validation
    def _check_fitted(self) -> None:
        if not hasattr(self, "L_"):
            raise RuntimeError("this GaussianProcess is not fitted: call fit(X, y) first")

    def _check_X(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.X_train_.shape[1]:
            raise ValueError(f"X must have shape (m, {self.X_train_.shape[1]}); got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        return X

    @staticmethod
    def _check_Xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must have shape (n, n_dims); got {X.shape} (reshape a single "
                             "feature with X.reshape(-1, 1))")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},); got {y.shape}")
        if X.shape[0] == 0:
            raise ValueError("X and y are empty")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X or y contains NaN or infinite values")
        return X, y
