"""Composite covariance kernels and the kernel factory of the in-house Gaussian process.

:class:`Additive` (a weighted sum of kernels on column groups) and :class:`Mixed` (numeric ×
categorical product) combine the base kernels of :mod:`scalebo.search.models.kernels`, with the
same conventions: immutable, unit-amplitude, hyperparameters in log space (``theta``,
``bounds``), ``X`` of shape ``(n, n_dims)`` with numeric columns in [0, 1] and categorical
columns holding integer codes. :func:`make_kernel` builds a kernel from one of
:data:`KERNEL_NAMES` (what ``GaussianProcess(kernel="…")`` and the configs name).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scalebo.search.models.kernels import (
    DEFAULT_WEIGHT_BOUNDS,
    RBF,
    Categorical,
    Contractor,
    Kernel,
    Matern52,
)


@dataclass(frozen=True, eq=False)
class Additive(Kernel):
    """``k = k_1 + Σ_{g≥2} w_g·k_g``: a sum of kernels, each on its own group of columns.

    The first term has weight 1 so that the GP amplitude stays identifiable;
    ``theta = [θ(k_1), …, θ(k_G), log w_2, …, log w_G]``.
    """

    kernels: tuple[Kernel, ...]
    weights: tuple[float, ...] = ()
    weight_bounds: tuple[float, float] = DEFAULT_WEIGHT_BOUNDS

    def __post_init__(self) -> None:
        if len(self.kernels) == 0:
            raise ValueError("Additive needs at least one kernel")
        object.__setattr__(self, "kernels", tuple(self.kernels))
        w = self.weights or (1.0,) * (len(self.kernels) - 1)
        if len(w) != len(self.kernels) - 1 or any(not v > 0 for v in w):
            raise ValueError(f"need {len(self.kernels) - 1} positive weights; got {w}")
        object.__setattr__(self, "weights", tuple(float(v) for v in w))

    @property
    def _w(self) -> np.ndarray:
        return np.concatenate([[1.0], self.weights])

    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([k.theta for k in self.kernels] + [np.log(self.weights)])

    @property
    def bounds(self) -> np.ndarray:
        wb = np.tile(np.log(np.asarray(self.weight_bounds, dtype=np.float64)),
                     (len(self.weights), 1))
        return np.vstack([k.bounds for k in self.kernels] + [wb])

    def with_theta(self, theta: np.ndarray) -> Kernel:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},); got {theta.shape}")
        parts, start = [], 0
        for k in self.kernels:
            parts.append(k.with_theta(theta[start:start + k.n_params]))
            start += k.n_params
        return replace(self, kernels=tuple(parts), weights=tuple(np.exp(theta[start:])))

    def diag(self, X: np.ndarray) -> np.ndarray:
        return sum(w * k.diag(X) for w, k in zip(self._w, self.kernels, strict=True))

    def _eval(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return sum(w * k._eval(X, X2) for w, k in zip(self._w, self.kernels, strict=True))

    def gram(self, X: np.ndarray) -> np.ndarray:
        return sum(w * k.gram(X) for w, k in zip(self._w, self.kernels, strict=True))

    def gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Ks, grads = zip(*(k.gradient(X) for k in self.kernels), strict=True)
        w = self._w
        K = sum(wg * Kg for wg, Kg in zip(w, Ks, strict=True))
        dK = [wg * dg for wg, dg in zip(w, grads, strict=True)]
        dK += [w[g] * Ks[g][:, :, None] for g in range(1, len(w))]
        return K, np.concatenate(dK, axis=2)

    def value_and_contractor(self, X: np.ndarray) -> tuple[np.ndarray, Contractor]:
        Ks, contractors = zip(*(k.value_and_contractor(X) for k in self.kernels), strict=True)
        w = self._w
        K = sum(wg * Kg for wg, Kg in zip(w, Ks, strict=True))

        def contract(W: np.ndarray) -> np.ndarray:
            tail = np.array([w[g] * np.vdot(W, Ks[g]) for g in range(1, len(w))])
            last = len(w) - 1  # every contractor but the last gets a copy: W is scratch
            parts = [wg * c(W if g == last else W.copy())
                     for g, (wg, c) in enumerate(zip(w, contractors, strict=True))]
            return np.concatenate(parts + [tail])

        return K, contract


@dataclass(frozen=True, eq=False)
class Mixed(Kernel):
    """Product ``k = k_num(x_num, x'_num) · k_cat(x_cat, x'_cat)`` of a numeric kernel on the
    numeric columns and a :class:`Categorical` kernel on the categorical columns
    (``theta = [θ(k_num), θ(k_cat)]``)."""

    numeric: Kernel
    categorical: Kernel

    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([self.numeric.theta, self.categorical.theta])

    @property
    def bounds(self) -> np.ndarray:
        return np.vstack([self.numeric.bounds, self.categorical.bounds])

    def with_theta(self, theta: np.ndarray) -> Kernel:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},); got {theta.shape}")
        p = self.numeric.n_params
        return replace(self, numeric=self.numeric.with_theta(theta[:p]),
                       categorical=self.categorical.with_theta(theta[p:]))

    def diag(self, X: np.ndarray) -> np.ndarray:
        return self.numeric.diag(X) * self.categorical.diag(X)

    def _eval(self, X: np.ndarray, X2: np.ndarray) -> np.ndarray:
        return self.numeric._eval(X, X2) * self.categorical._eval(X, X2)

    def gram(self, X: np.ndarray) -> np.ndarray:
        return self.numeric.gram(X) * self.categorical.gram(X)

    def gradient(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        K1, d1 = self.numeric.gradient(X)
        K2, d2 = self.categorical.gradient(X)
        return K1 * K2, np.concatenate([d1 * K2[..., None], d2 * K1[..., None]], axis=2)

    def value_and_contractor(self, X: np.ndarray) -> tuple[np.ndarray, Contractor]:
        K1, c1 = self.numeric.value_and_contractor(X)
        K2, c2 = self.categorical.value_and_contractor(X)
        def contract(W: np.ndarray) -> np.ndarray:
            g2 = c2(W * K1)
            return np.concatenate([c1(np.multiply(W, K2, out=W)), g2])

        return K1 * K2, contract


KERNEL_NAMES = ("matern52", "rbf", "additive", "mixed", "transfer")

#: Encoded columns of the scale (``N``, ``D``) in a grid's surrogate input (the "transfer"
#: kernel's other numeric columns are the hyperparameters).
SCALE_COLUMNS = (0, 1)


def make_kernel(
    name: str,
    dims: int,
    *,
    categorical: Sequence[int] = (),
    length_scale: float = 0.5,
    groups: Sequence[Sequence[int]] | None = None,
) -> Kernel:
    """Build a unit-amplitude kernel for ``dims`` encoded input columns.

    Args:
        name: ``"matern52"`` (Matérn-5/2 ARD, the default of the GP), ``"rbf"`` (RBF ARD),
            ``"additive"`` (a sum of Matérn-5/2 kernels, one per group of numeric columns; each
            numeric column its own group unless ``groups`` is given) or ``"mixed"``
            (Matérn-5/2 on the numeric columns × :class:`Categorical` on ``categorical``).
        dims: number of columns of the encoded ``X``.
        categorical: indices of the columns holding integer codes. For every name, those
            columns get a :class:`Categorical` factor (a numeric kernel on codes is
            meaningless), so ``"matern52"`` with categorical columns equals ``"mixed"``.
        length_scale: initial length scale of every numeric column (encoded units, [0, 1]);
            categorical length scales start at 1.
        groups: column groups of ``"additive"``.

    ``"transfer"`` is ``k = k_all + w·k_hp``: a Matérn-5/2 ARD kernel on every numeric
    column plus one on the hyperparameter columns alone (the numeric columns other than
    :data:`SCALE_COLUMNS`, N and D), so what the runs show about a hyperparameter's effect
    carries to scales with no run (the ``k_hp`` term does not decay with the distance in N
    or D) while ``k_all`` keeps the local interactions. Without hyperparameter columns it is
    ``"matern52"``.
    """
    if name not in KERNEL_NAMES:
        raise ValueError(f"unknown kernel {name!r}; expected one of {', '.join(KERNEL_NAMES)}")
    dims = int(dims)
    cat = tuple(sorted({int(c) for c in categorical}))
    if any(c < 0 or c >= dims for c in cat):
        raise ValueError(f"categorical columns {cat} out of range for {dims} columns")
    num = tuple(c for c in range(dims) if c not in cat)
    if not num and not cat:
        raise ValueError("dims must be at least 1")

    numeric: Kernel | None = None
    if num:
        hp = tuple(c for c in num if c not in SCALE_COLUMNS)
        if name == "transfer" and hp:
            numeric = Additive((Matern52((length_scale,) * len(num), active_dims=num),
                                Matern52((length_scale,) * len(hp), active_dims=hp)))
        elif name == "additive":
            groups_ = [tuple(g) for g in groups] if groups is not None else [(c,) for c in num]
            numeric = Additive(tuple(Matern52((length_scale,) * len(g), active_dims=g)
                                     for g in groups_))
        else:
            cls = RBF if name == "rbf" else Matern52
            numeric = cls((length_scale,) * len(num), active_dims=num)
    if not cat:
        assert numeric is not None
        return numeric
    cat_kernel = Categorical((1.0,) * len(cat), active_dims=cat)
    return cat_kernel if numeric is None else Mixed(numeric, cat_kernel)
