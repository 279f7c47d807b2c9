"""Linear-algebra helpers of the exact GP: a BLAS thread limit, a Cholesky factorization with
jitter, the log marginal likelihood from the factor and the inverse from it.

Conventions as in :mod:`scalebo.search.models.gp`: ``K`` (n, n) is a symmetric covariance matrix (of
the training data, or a posterior covariance or Schur complement); ``L`` its lower Cholesky
factor as LAPACK ``dpotrf`` returns it (Fortran order, upper triangle zeroed); ``α = K⁻¹y``
for ``y`` of shape ``(n,)``; a log marginal likelihood is in nats. A matrix that is not
positive definite gets growing jitter on its diagonal, with a
:class:`~scalebo.errors.NumericalWarning` when asked.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
from scipy.linalg import lapack

from scalebo.errors import NumericalWarning

_LOG_2PI = float(np.log(2.0 * np.pi))

_CONTROLLER: list = []


def blas_threads(n_threads: int | None) -> contextlib.AbstractContextManager:
    """Context capping BLAS threads at ``n_threads`` (None: unchanged) with threadpoolctl,
    imported lazily; without it, a no-op.

    NOTE: on a machine shared by several processes, a multi-threaded OpenBLAS Cholesky of a
    500 × 500 matrix was measured 5–20× slower than a single-threaded one (oversubscription).
    """
    if n_threads is None:
        return contextlib.nullcontext()
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            return contextlib.nullcontext()
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=int(n_threads), user_api="blas")


def _cholesky(A: np.ndarray, *, warn: bool, what: str = "K") -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of the symmetric ``A`` (n, n), adding growing jitter to the
    diagonal on failure (1e-10 … 1 × mean diagonal). Returns ``(L, jitter)``."""
    L, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    if info == 0:
        return L, 0.0
    scale = float(np.mean(np.abs(np.diag(A)))) or 1.0
    for rel in 10.0 ** np.arange(-10, 1):
        jitter = rel * scale
        L, info = lapack.dpotrf(A + jitter * np.eye(A.shape[0]), lower=1, clean=1)
        if info == 0:
            if warn:
                warnings.warn(f"{what} is not positive definite: added jitter {jitter:.3g} "
                              "to its diagonal", NumericalWarning, stacklevel=3)
            return L, jitter
    raise np.linalg.LinAlgError(f"{what} is not positive definite even with jitter {jitter:.3g}"
                                " (non-finite entries?)")


def _lml_value(L: np.ndarray, alpha: np.ndarray, y: np.ndarray) -> float:
    """``−½ yᵀα − Σ log L_ii − (n/2) log 2π`` (R&W 2006, Alg. 2.1, line 8)."""
    return -0.5 * float(y @ alpha) - float(np.log(np.diag(L)).sum()) - 0.5 * len(y) * _LOG_2PI


def _half_inverse_from_cholesky(L: np.ndarray) -> np.ndarray:
    """Lower-triangular ``P`` (n, n) with ``Σ_ij P_ij A_ij = tr(K⁻¹A)`` for every symmetric
    ``A``, where ``K = LLᵀ``: twice the strict lower triangle of ``K⁻¹`` plus its diagonal.

    LAPACK ``dpotri`` writes only the lower triangle (the upper one stays zero, as ``L`` was
    cleaned), so this skips the transposed copy a full symmetric ``K⁻¹`` would need. ``L``
    is overwritten when Fortran-ordered (as ``dpotrf`` returns it).
    """
    inv, info = lapack.dpotri(L, lower=1, overwrite_c=1)  # L is consumed
    if info != 0:
        raise np.linalg.LinAlgError(f"dpotri failed with info={info}")
    inv *= 2.0
    inv.flat[:: L.shape[0] + 1] *= 0.5
    return inv
