"""Covariance kernels for the in-house Gaussian process, with analytic gradients.

Every kernel is an immutable object whose hyperparameters live in log space (``theta``,
``bounds``), as in scikit-learn. A kernel is unit-amplitude: the signal variance (amplitude)
and the noise variance are hyperparameters of :class:`scalebo.search.models.gp.GaussianProcess`.

Notations
---------
- ``X``: encoded inputs, shape ``(n, n_dims)``; numeric columns in [0, 1] (log of positive
  axes, scaled), categorical columns hold integer codes (stored as float64).
- ``X2``: second set of inputs, shape ``(m, n_dims)``.
- ``K``: kernel matrix ``k(X, X2)``, shape ``(n, m)``.
- ``theta``: log hyperparameters, shape ``(n_params,)``; ``bounds``: ``(n_params, 2)``.
- ``dK``: ``∂K(X, X)/∂theta``, shape ``(n, n, n_params)``.
- ``W``: a weight matrix, shape ``(n, n)``, overwritten (scratch) by
  ``contract(W)[p] = Σ_ij W_ij dK_ijp``,
  the only form in which the GP needs gradients (``0.5·tr((ααᵀ − K⁻¹)·∂K/∂θ_p)``, Rasmussen &
  Williams 2006, eq. 5.9). It costs ``O(n²·n_dims)`` and never forms ``dK``.
- Stationary ARD kernels: ``r² = Σ_j (x_j − x'_j)² / ℓ_j²`` and ``k = φ(r²)``, so that
  ``∂k/∂log ℓ_j = −2·φ'(r²)·(x_j − x'_j)²/ℓ_j²``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.spatial.distance import cdist, pdist, squareform

Contractor = Callable[[np.ndarray], np.ndarray]

DEFAULT_LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
DEFAULT_WEIGHT_BOUNDS = (1e-3, 1e3)


def _columns(X: np.ndarray, active_dims: tuple[int, ...] | None) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n, n_dims); got an array of shape {X.shape}")
    return X if active_dims is None else X[:, list(active_dims)]


class Kernel:
    """Base class: subclasses define ``theta``, ``bounds``, ``with_theta``, ``_eval``,
    ``gradient`` and ``value_and_contractor``."""

    @property
    def theta(self) -> np.ndarray:  # (n_params,)
        raise NotImplementedError

    @property
    def bounds(self) -> np.ndarray:  # (n_params, 2)
        raise NotImplementedError

    @property
    def n_params(self) -> int:
        return int(self.theta.shape[0])

    def with_theta(self, theta: np.ndarray) -> Kernel:
        """A copy with log hyperparameters ``theta`` of shape ``(n_params,)``."""
        raise NotImplementedError

    def __call__(self, X: np.ndarray, X2: np.ndarray | None = None) -> np.ndarray:
        """Kernel matrix ``k(X, X2)`` of shape ``(n, m)`` (``X2 = X`` when omitted)."""
        return self._eval(X, X if X2 is None else X2)

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row, shape ``(n,)``; 1 for every kernel here but Additive."""
        return np.ones(np.asarray(X).shape[0])

    def gram(self, X: np.ndarray) -> np.ndarray:
        """``K(X, X)``, shape ``(n, n)``, exploiting symmetry where it pays."""
        return self._eval(X, X)

    def gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(K, dK)``: ``K(X, X)`` of shape ``(n, n)`` and its gradient with respect to
        ``theta``, shape ``(n, n, n_params)``. Memory ``O(n²·n_params)``: for tests and small
        problems; the GP uses :meth:`value_and_contractor`."""
        raise NotImplementedError

    def value_and_contractor(self, X: np.ndarray) -> tuple[np.ndarray, Contractor]:
        """``(K, contract)`` where ``contract(W) = Σ_ij W_ij ∂K_ij/∂theta``, shape
        ``(n_params,)``, for any ``W`` of shape ``(n, n)`` (not necessarily symmetric), which
        it overwrites: a fresh n × n array per call would cost page faults."""
        raise NotImplementedError

    def _eval(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class _Stationary(Kernel):
    """``k = φ(r²)`` with ``r² = Σ_j d_j(x, x') / ℓ_j^power`` on the active columns.

    For numeric kernels ``d_j = (x_j − x'_j)²`` and ``power = 2``; for the categorical kernel
    ``d_j = [x_j ≠ x'_j]`` and ``power = 1``.
    """

    length_scale: tuple[float, ...]
    active_dims: tuple[int, ...] | None = None
    length_scale_bounds: tuple[float, float] = DEFAULT_LENGTH_SCALE_BOUNDS

    _power = 2.0

    def __post_init__(self) -> None:
        ls = np.atleast_1d(np.asarray(self.length_scale, dtype=np.float64))
        if ls.ndim != 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"length_scale must be positive and finite; got {self.length_scale}")
        object.__setattr__(self, "length_scale", tuple(float(v) for v in ls))
        if self.active_dims is not None:
            object.__setattr__(self, "active_dims", tuple(int(c) for c in self.active_dims))
            if len(self.active_dims) != len(ls):
                raise ValueError(
                    f"{len(ls)} length scales for {len(self.active_dims)} active columns"
                )

    @property
    def theta(self) -> np.ndarray:
        return np.log(np.asarray(self.length_scale))

    @property
    def bounds(self) -> np.ndarray:
        return np.tile(np.log(np.asarray(self.length_scale_bounds, dtype=np.float64)),
                       (len(self.length_scale), 1))

    def with_theta(self, theta: np.ndarray) -> Kernel:
        theta = np.asarray(theta, dtype=np.float64)
        p = len(self.length_scale)
        if theta.shape != (p,):
            raise ValueError(f"theta must have shape ({p},); got {theta.shape}")
        return replace(self, length_scale=tuple(np.exp(theta)))

    # φ(u) and G are what subclasses define; both may overwrite u (always a fresh array).
    def _phi(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _phi_and_g(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(φ(u), G)`` with ``G = −power·φ'(u)`` so that ``∂k/∂log ℓ_j = G·d_j/ℓ_j^power``."""
        raise NotImplementedError

    def _scaled(self, X: np.ndarray) -> np.ndarray:
        A = _columns(X, self.active_dims)
        self._check_dims(A, A)
        return A / np.asarray(self.length_scale)

    def _u(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return cdist(self._scaled(X), self._scaled(X2), "sqeuclidean")

    def _check_dims(self, A: np.ndarray, B: np.ndarray) -> None:
        n_ls = len(self.length_scale)
        if A.shape[1] != n_ls or B.shape[1] != n_ls:
            raise ValueError(
                f"{type(self).__name__} has {n_ls} length scales but X has "
                f"{A.shape[1]} active columns; pass active_dims or one length scale per column"
            )

    def _eval(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return self._phi(self._u(X, X2))

    def _d_stack(self, X: np.ndarray) -> np.ndarray:  # (n_active, n, n)
        Xa = _columns(X, self.active_dims)
        return (Xa.T[:, :, None] - Xa.T[:, None, :]) ** 2

    def gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        K, G = self._phi_and_g(self._u(X, X))
        scale = np.asarray(self.length_scale) ** self._power
        dK = G[:, :, None] * np.moveaxis(self._d_stack(X), 0, -1) / scale
        return K, dK

    def _u_condensed(self, X: np.ndarray) -> np.ndarray:  # (n(n-1)/2,), pdist order
        return pdist(self._scaled(X), "sqeuclidean")

    def gram(self, X: np.ndarray) -> np.ndarray:
        K = squareform(self._phi(self._u_condensed(X)), checks=False)
        np.fill_diagonal(K, self._phi(np.zeros(1))[0])
        return K

    def _symmetric_phi_and_g(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``φ`` and ``G`` on ``(X, X)``, evaluated on the upper triangle only (half the
        ``exp`` calls), shape ``(n, n)`` each."""
        k, g = self._phi_and_g(self._u_condensed(X))
        k0, g0 = self._phi_and_g(np.zeros(1))
        K, G = squareform(k, checks=False), squareform(g, checks=False)
        np.fill_diagonal(K, k0[0])
        np.fill_diagonal(G, g0[0])
        return K, G

    def value_and_contractor(self, X: np.ndarray) -> tuple[np.ndarray, Contractor]:
        K, G = self._symmetric_phi_and_g(X)
        Xa = _columns(X, self.active_dims)
        scale = np.asarray(self.length_scale) ** self._power

        def contract(W: np.ndarray) -> np.ndarray:
            # Σ_ij M_ij (x_i − x_j)² = Σ_i x_i²(r_i + c_i) − 2·xᵀMx, with M = W∘G: O(n²·d),
            # one matrix product, no (n, n, d) array.
            M = np.multiply(W, G, out=W)
            MX = M @ Xa
            rc = M.sum(axis=1) + M.sum(axis=0)
            return (Xa**2 * rc[:, None]).sum(axis=0) - 2.0 * (Xa * MX).sum(axis=0)

        return K, lambda W: contract(W) / scale


@dataclass(frozen=True, eq=False)
class Matern52(_Stationary):
    """Matérn-5/2 with ARD: ``k = (1 + √5 r + 5r²/3)·exp(−√5 r)`` (R&W 2006, eq. 4.17)."""

    def _phi(self, u: np.ndarray) -> np.ndarray:
        return self._phi_and_g(u)[0]

    def _phi_and_g(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # In place (u is consumed): fresh large temporaries cost page faults, which were
        # measured to dominate this function.
        s = np.multiply(u, 5.0, out=u)
        np.sqrt(s, out=s)  # s = √5·r
        e = np.negative(s)
        np.exp(e, out=e)
        k = s * (1.0 / 3.0)
        k += 1.0
        k *= s
        k += 1.0
        k *= e  # (1 + s + s²/3)·e^{−s}
        # ∂k/∂(r²) = −(5/6)(1 + s)e^{−s}, so G = −2·∂k/∂(r²) = (5/3)(1 + s)e^{−s}
        s += 1.0
        s *= e
        s *= 5.0 / 3.0
        return k, s


@dataclass(frozen=True, eq=False)
class RBF(_Stationary):
    """Squared exponential with ARD: ``k = exp(−r²/2)`` (R&W 2006, eq. 4.9)."""

    def _phi(self, u: np.ndarray) -> np.ndarray:
        u *= -0.5
        return np.exp(u, out=u)

    def _phi_and_g(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self._phi(u)
        return k, k


@dataclass(frozen=True, eq=False)
class Categorical(_Stationary):
    """Exchangeable (overlap) kernel on integer codes: ``k = exp(−Σ_j [x_j ≠ x'_j] / ℓ_j)``.

    Every pair of distinct levels of a column is equally correlated, ``exp(−1/ℓ_j)``; a large
    ``ℓ_j`` makes the column irrelevant.
    """

    _power = 1.0

    def _u(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        A, B = _columns(X, self.active_dims), _columns(X2, self.active_dims)
        self._check_dims(A, B)
        w = 1.0 / np.asarray(self.length_scale)
        u = np.zeros((A.shape[0], B.shape[0]))
        for j in range(A.shape[1]):
            u += w[j] * (A[:, j, None] != B[None, :, j])
        return u

    def _phi(self, u: np.ndarray) -> np.ndarray:
        np.negative(u, out=u)
        return np.exp(u, out=u)

    def _phi_and_g(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self._phi(u)
        return k, k

    def _d_stack(self, X: np.ndarray) -> np.ndarray:
        Xa = _columns(X, self.active_dims)
        return (Xa.T[:, :, None] != Xa.T[:, None, :]).astype(np.float64)

    def _u_condensed(self, X: np.ndarray) -> np.ndarray:
        A = _columns(X, self.active_dims)
        self._check_dims(A, A)
        w = 1.0 / np.asarray(self.length_scale)
        return sum(w[j] * pdist(A[:, j:j + 1], "hamming") for j in range(A.shape[1]))

    def value_and_contractor(self, X: np.ndarray) -> tuple[np.ndarray, Contractor]:
        K, _ = self._symmetric_phi_and_g(X)
        Xa = _columns(X, self.active_dims)
        scale = np.asarray(self.length_scale)

        def contract(W: np.ndarray) -> np.ndarray:
            M = np.multiply(W, K, out=W)
            out = np.empty(Xa.shape[1])
            for j in range(Xa.shape[1]):
                # Σ_ij M_ij [x_i ≠ x_j] = ΣM − Σ_c 1_cᵀ M 1_c over the levels c of column j
                _, codes = np.unique(Xa[:, j], return_inverse=True)
                E = np.zeros((Xa.shape[0], codes.max() + 1))
                E[np.arange(Xa.shape[0]), codes] = 1.0
                out[j] = M.sum() - np.einsum("ic,ic->", E, M @ E)
            return out / scale

        return K, contract

