"""A surrogate in hyperparameter coordinates relative to an optimum that moves with scale.

Hyperparameter optima move with model size and token count (StepLaw reports an optimal
learning rate ∝ N^−0.71·D^0.31; on OELLM-English the best learning rate halves from the
0.6B to the 1.7B models). A stationary GP in absolute coordinates learns the optimum on the
cheap cells and carries it unchanged to the expensive ones, where it is then both wrong and
confident, so the search never tries the shifted setting and the law posterior is
overconfident there.

:class:`OptimumShiftSurrogate` fits, at every ``fit``, a linear model of the best observed
configuration's hyperparameter coordinates against the scale coordinates,
``h*(s) ≈ a + B·s``, by weighted ridge least squares over the (N, D) cells with at least
``min_obs`` observations (weight: the cell's observation count; ``s`` = encoded ``log N``,
``log D``, ``h`` = encoded numeric hyperparameters such as ``log lr``, ``log batch``, all in
[0, 1] grid units, so the fit is a power law in natural units). The inner surrogate then sees
``h − B·s`` instead of ``h``: a configuration's distance from the moving optimum. With fewer
than ``min_cells`` such cells the shift is zero (the inner surrogate sees the inputs as
they are). Notation: ``X`` is ``(n, d)`` encoded inputs, ``y`` ``(n,)`` losses (any affine
units).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from scalebo.search.target_draws import wrapped

__all__ = ["OptimumShiftSurrogate"]


class OptimumShiftSurrogate:
    """An inner surrogate on hyperparameter coordinates relative to a fitted moving optimum.

    Args:
        inner: surrogate with ``fit(X, y[, warm_start])`` and ``predict``; ``sample_joint``
            and ``condition_on`` are passed through.
        scale_columns: encoded columns of the scale (default ``(0, 1)``: N and D).
        shift_columns: columns to shift (default: every other column not in
            ``categorical``).
        categorical: categorical columns (never shifted).
        min_obs: observations a cell needs for its best configuration to count.
        min_cells: cells needed to fit the shift (else no shift).
        ridge: Tikhonov weight on the slopes ``B`` (per unit of encoded input²).
    """

    def __init__(self, inner: object, scale_columns: Sequence[int] = (0, 1),
                 shift_columns: Sequence[int] | None = None, *,
                 categorical: Sequence[int] = (), min_obs: int = 2, min_cells: int = 3,
                 ridge: float = 1e-3) -> None:
        self.inner = inner
        self.scale_columns = tuple(scale_columns)
        self.shift_columns = None if shift_columns is None else tuple(shift_columns)
        self.categorical = tuple(categorical)
        self.min_obs, self.min_cells, self.ridge = int(min_obs), int(min_cells), float(ridge)
        self.slopes_ = np.zeros((len(self.scale_columns), 0))

    def _columns(self, d: int) -> tuple[int, ...]:
        if self.shift_columns is not None:
            return self.shift_columns
        fixed = set(self.scale_columns) | set(self.categorical)
        return tuple(j for j in range(d) if j not in fixed)

    def fit_shift(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Fit and return the slopes ``B``, shape ``(n_scale, n_shift)`` (zeros if too few
        cells qualify)."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        self.cols_ = self._columns(X.shape[1])
        S = X[:, self.scale_columns]
        _, cell = np.unique(S, axis=0, return_inverse=True)
        cell = cell.ravel()
        rows, weights = [], []
        for c in np.unique(cell):
            members = np.flatnonzero(cell == c)
            if members.size >= self.min_obs:
                rows.append(members[np.argmin(y[members])])
                weights.append(members.size)
        B = np.zeros((len(self.scale_columns), len(self.cols_)))
        if len(rows) >= self.min_cells and self.cols_:
            best = np.asarray(rows)
            w = np.sqrt(np.asarray(weights, dtype=np.float64))[:, None]
            F = np.column_stack([np.ones(best.size), S[best]]) * w
            H = X[best][:, self.cols_] * w
            reg = self.ridge * np.eye(F.shape[1])
            reg[0, 0] = 0.0
            B = np.linalg.solve(F.T @ F + reg, F.T @ H)[1:]
        self.slopes_ = B
        return B

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Inputs with the shifted columns replaced by ``h − B·s``, shape ``(n, d)``."""
        X = np.array(X, dtype=np.float64)
        if self.slopes_.size:
            X[:, self.cols_] -= X[:, self.scale_columns] @ self.slopes_
        return X

    def fit(self, X: np.ndarray, y: np.ndarray, *,
            warm_start: bool = False) -> OptimumShiftSurrogate:
        self.fit_shift(X, y)
        self.inner.fit(self.transform(X), y, warm_start=warm_start)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.predict(self.transform(X))

    def sample_joint(self, X: np.ndarray, n_samples: int, rng: object = None, *,
                     include_noise: bool = False) -> np.ndarray:
        kw = {"include_noise": True} if include_noise else {}
        return self.inner.sample_joint(self.transform(X), n_samples, rng, **kw)

    def posterior_cov(self, X: np.ndarray, *, include_noise: bool = True) -> np.ndarray:
        """The inner GP's posterior covariance at the shifted inputs ``(n, n)`` (what the
        target acquisition and the noise floor factor; without this method they would find
        the inner GP's and call it on unshifted inputs)."""
        inner = wrapped(self.inner, "posterior_cov")
        if inner is None:
            raise AttributeError("the inner surrogate has no posterior_cov")
        return inner.posterior_cov(self.transform(X), include_noise=include_noise)

    def condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> OptimumShiftSurrogate:
        """A copy whose inner surrogate also sees ``(X_new, y_new)``; the shift is kept."""
        new = copy.copy(self)
        new.inner = self.inner.condition_on(self.transform(X_new), y_new)
        return new
