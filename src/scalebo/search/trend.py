"""A surrogate with a linear trend in chosen inputs (universal kriging, in its simplest form).

A stationary GP reverts to its constant mean away from the data. On a scaling grid that is
exactly where fantasization needs it most: after a small budget the runs sit at small model
sizes and token counts, and the GP predicts the grid's expensive cells at roughly the average
observed loss — far too high — so they never reach the best-loss frontier and the law is
extrapolated from a narrow compute range.

:class:`TrendSurrogate` fits ``y ≈ β₀ + Σ_j β_j x_j`` by least squares over the trend columns
(default: the first two encoded inputs, ``log N`` and ``log D`` scaled to [0, 1]), then fits
the inner surrogate to the residuals. Predictions are ``trend(x) + inner mean``; the standard
deviation is the inner one (the trend's own estimation error is ignored, as in plug-in
universal kriging). Notation: ``X`` is ``(n, d)`` encoded inputs, ``y`` is ``(n,)``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np


class TrendSurrogate:
    """Linear trend in ``columns`` of the inputs plus an inner surrogate on the residuals.

    Args:
        inner: any surrogate with ``fit(X, y)`` and ``predict(X) -> (mean, std)``;
            ``fit(..., warm_start=)``, ``sample_joint`` and ``condition_on`` are passed
            through when it has them.
        columns: input columns of the trend (default ``(0, 1)``: encoded N and D).
        ridge: Tikhonov weight on the slopes (not the intercept), in units of ``y²`` per
            unit input²; keeps the trend finite when a column has one observed value.
    """

    def __init__(self, inner: object, columns: Sequence[int] = (0, 1), ridge: float = 1e-6):
        self.inner = inner
        self.columns = tuple(columns)
        self.ridge = float(ridge)

    def _design(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return np.column_stack([np.ones(len(X)), X[:, list(self.columns)]])

    def trend(self, X: np.ndarray) -> np.ndarray:
        """The fitted trend at ``X`` (m, d), shape ``(m,)``."""
        return self._design(X) @ self.coef_

    def fit(self, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> TrendSurrogate:
        F = self._design(X)
        y = np.asarray(y, dtype=np.float64)
        penalty = self.ridge * np.eye(F.shape[1])
        penalty[0, 0] = 0.0
        self.coef_ = np.linalg.solve(F.T @ F + penalty, F.T @ y)
        resid = y - F @ self.coef_
        try:
            self.inner.fit(X, resid, warm_start=warm_start)
        except TypeError:  # inner surrogate without warm starts
            self.inner.fit(X, resid)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std = self.inner.predict(X)
        return self.trend(X) + mean, std

    # Optional capabilities exist only when the inner surrogate has them (callers use hasattr).
    @property
    def sample_joint(self):
        if not hasattr(self.inner, "sample_joint"):
            raise AttributeError("the inner surrogate has no sample_joint")
        return self._sample_joint

    @property
    def condition_on(self):
        if not hasattr(self.inner, "condition_on"):
            raise AttributeError("the inner surrogate has no condition_on")
        return self._condition_on

    def _sample_joint(self, X: np.ndarray, n_samples: int, rng: object = None) -> np.ndarray:
        """Joint posterior samples ``(n_samples, m)``: the inner samples plus the trend."""
        return self.inner.sample_joint(X, n_samples, rng) + self.trend(X)[None, :]

    def _condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> TrendSurrogate:
        """A copy whose inner surrogate also sees ``(X_new, y_new)``; the trend is kept."""
        new = copy.copy(self)
        resid = np.asarray(y_new, dtype=np.float64) - self.trend(X_new)
        new.inner = self.inner.condition_on(X_new, resid)
        return new
