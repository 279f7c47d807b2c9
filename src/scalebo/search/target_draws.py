"""Joint draws of the target ensemble from one Cholesky factor (:mod:`scalebo.search.target`).

The Stein estimator needs the posterior covariance ``Σ`` of the recorded losses of the ``u``
unobserved rows in scope and a factor ``L`` (``LLᵀ = Σ``) for its anomalies; the law fits
need ``S`` joint samples ``mean + L z``. ``GaussianProcess.sample_joint`` builds ``Σ`` and
factors it itself, so building the ensemble from it costs two ``O(u³)`` factorizations and
two ``O(u²n)`` covariances. :func:`joint_draws` computes ``Σ`` and ``L`` once, under a
single-threaded BLAS (a multi-threaded OpenBLAS Cholesky on a shared machine was measured
5–20× slower, :func:`~scalebo.search.models.linalg.blas_threads`), with the same jitter and the same
draws of ``rng`` as ``sample_joint``, so the samples are those ``sample_joint`` gives.
StepLaw, 10 % replay, seed 0: the second factorization alone was 104 s of 320 s (profiled).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalebo.search.models.linalg import _cholesky, blas_threads

__all__ = ["joint_draws", "recorded_cov", "wrapped"]


def wrapped(model: Any, attr: str) -> Any:
    """The first of ``model`` and the surrogates it wraps (``gp_``, then ``inner``) that has
    ``attr``, or None (clipping, trend and GP-surrogate wrappers leave the GP's state as
    it is)."""
    while model is not None and not hasattr(model, attr):
        model = getattr(model, "gp_", None) or getattr(model, "inner", None)
    return model


def recorded_cov(model: Any, X: np.ndarray, *, include_noise: bool = True
                 ) -> np.ndarray | None:
    """Posterior covariance of a recorded loss at ``X`` ``(u, u)`` in the model's units², from
    the first ``posterior_cov`` found through wrappers (``inner``: clipping and trend leave
    the covariance unchanged; ``gp_``), or None; ``include_noise=False``: of the latent
    loss."""
    model = wrapped(model, "posterior_cov")
    if model is None:
        return None
    with blas_threads(getattr(model, "n_threads", 1)):
        return np.asarray(model.posterior_cov(X, include_noise=include_noise),
                          dtype=np.float64)


def joint_draws(model: Any, X: np.ndarray, n: int, rng: np.random.Generator, *,
                with_factor: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``n`` joint samples of the recorded loss at ``X`` ``(n, u)`` (model units) and, when
    ``with_factor`` and the model exposes ``posterior_cov``, the lower factor ``L`` ``(u, u)``
    of their covariance (model units; else None, the samples from ``model.sample_joint``).

    The covariance gets ``sample_joint``'s jitter (1e-10 × its mean diagonal; more if needed)
    and the samples are ``mean + z Lᵀ`` with ``z`` drawn as ``sample_joint`` draws it.
    """
    cov = recorded_cov(model, X) if with_factor else None
    if cov is None:
        return np.asarray(model.sample_joint(X, n, rng, include_noise=True), np.float64), None
    cov.flat[:: cov.shape[0] + 1] += 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    with blas_threads(1):
        L, _ = _cholesky(cov, warn=False, what="the posterior covariance")
    mean = np.asarray(model.predict(X)[0], dtype=np.float64)
    z = rng.standard_normal((int(n), X.shape[0]))
    return mean + z @ L.T, L
