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

A linear trend keeps falling forever; a loss does not. ``form="power"`` fits a saturating mean
instead, ``y ≈ c + Σ_j a_j·exp(−k_j·x_j)`` with ``a_j ≥ 0`` — on columns that encode
``log N`` and ``log D`` linearly this is ``E + Σ A_j·N^(−α_j)``, a Chinchilla-form law. The
rates ``k_j`` are chosen on a grid (``rates``) and, for each combination, ``c`` and ``a`` by
ridge least squares (variable projection); combinations with a negative ``a_j`` are
rejected, and if all are, the linear trend is used.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence

import numpy as np

from scalebo.search.models.protocol import fit_surrogate

#: Mean forms of :class:`TrendSurrogate`.
TREND_FORMS = ("linear", "power")
#: Rates ``k`` tried by the power form, per unit of an encoded column (encoded log N spans
#: [0, 1] over the grid, so ``k = α·ln(N_max/N_min)``).
DEFAULT_RATES = tuple(np.round(np.arange(0.25, 10.01, 0.25), 2))


class TrendSurrogate:
    """A trend in ``columns`` of the inputs (linear or saturating) plus an inner surrogate on
    the residuals.

    Args:
        inner: any surrogate with ``fit(X, y)`` and ``predict(X) -> (mean, std)``;
            ``fit(..., warm_start=)`` (detected from its signature,
            :func:`~scalebo.search.models.protocol.fit_surrogate`), ``sample_joint`` and
            ``condition_on`` are passed through when it has them.
        columns: input columns of the trend (default ``(0, 1)``: encoded N and D).
        ridge: Tikhonov weight on the slopes (not the intercept), in units of ``y²`` per
            unit input²; keeps the trend finite when a column has one observed value.
        form: ``"linear"`` or ``"power"`` (saturating; see the module docstring).
        rates: grid of rates ``k`` for the power form.
    """

    def __init__(self, inner: object, columns: Sequence[int] = (0, 1), ridge: float = 1e-6,
                 *, form: str = "linear", rates: Sequence[float] = DEFAULT_RATES):
        if form not in TREND_FORMS:
            raise ValueError(f"form must be one of {list(TREND_FORMS)}, got {form!r}")
        self.inner = inner
        self.columns = tuple(columns)
        self.ridge = float(ridge)
        self.form = form
        self.rates = tuple(float(r) for r in rates)

    def _design(self, X: np.ndarray, rates: np.ndarray | None = None) -> np.ndarray:
        """``[1, x_j …]`` (linear) or ``[1, exp(−k_j·x_j) …]`` (power), shape ``(m, 1 + c)``;
        rates of shape ``(G, c)`` give one design per row of rates, ``(G, m, 1 + c)``."""
        Xc = np.asarray(X, dtype=np.float64)[:, list(self.columns)]
        if rates is None:
            return np.column_stack([np.ones(len(Xc)), Xc])
        powers = np.exp(-Xc * np.asarray(rates, dtype=np.float64)[..., None, :])
        return np.concatenate([np.ones(powers.shape[:-1] + (1,)), powers], axis=-1)

    def trend(self, X: np.ndarray) -> np.ndarray:
        """The fitted trend at ``X`` (m, d), shape ``(m,)``."""
        return self._design(X, self.rates_) @ self.coef_

    def _ridge_solve(self, F: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Ridge least squares, batched over leading axes of ``F`` (..., n, q)."""
        penalty = self.ridge * np.eye(F.shape[-1])
        penalty[0, 0] = 0.0
        Ft = np.swapaxes(F, -1, -2)
        return np.linalg.solve(Ft @ F + penalty, (Ft @ y)[..., None])[..., 0]

    def _fit_power(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Best ``(rates, coef)`` over the rate grid with every ``a_j ≥ 0``; None if none.

        Tries ``len(rates) ** len(columns)`` combinations at once (1,600 for two columns)."""
        grid = np.array(list(itertools.product(self.rates, repeat=len(self.columns))))  # (G, c)
        F = self._design(X, grid)  # (G, n, 1 + c)
        coef = self._ridge_solve(F, y)  # (G, 1 + c)
        sse = np.sum(((F @ coef[..., None])[..., 0] - y) ** 2, axis=1)
        sse[np.any(coef[:, 1:] < 0, axis=1) | ~np.isfinite(sse)] = np.inf
        best = int(np.argmin(sse))
        if not np.isfinite(sse[best]):
            return None
        return grid[best], coef[best]

    def fit(self, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> TrendSurrogate:
        """Fit the trend to ``y`` (n,) by ridge least squares, then the inner surrogate to the
        residuals; ``warm_start`` reaches the inner ``fit`` only if it takes it (an error
        inside the inner ``fit`` is raised, never retried)."""
        y = np.asarray(y, dtype=np.float64)
        self.rates_ = None
        if self.form == "power":
            best = self._fit_power(X, y)
            if best is not None:
                self.rates_, self.coef_ = best
        if self.rates_ is None:
            self.coef_ = self._ridge_solve(self._design(X), y)
        resid = y - self.trend(X)
        fit_surrogate(self.inner, X, resid, warm_start=warm_start)
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

    def _sample_joint(self, X: np.ndarray, n_samples: int, rng: object = None, *,
                      include_noise: bool = False) -> np.ndarray:
        """Joint posterior samples ``(n_samples, m)``: the inner samples (of a recorded loss
        with ``include_noise``) plus the trend."""
        kw = {"include_noise": True} if include_noise else {}
        return self.inner.sample_joint(X, n_samples, rng, **kw) + self.trend(X)[None, :]

    def _condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> TrendSurrogate:
        """A copy whose inner surrogate also sees ``(X_new, y_new)``; the trend is kept."""
        new = copy.copy(self)
        resid = np.asarray(y_new, dtype=np.float64) - self.trend(X_new)
        new.inner = self.inner.condition_on(X_new, resid)
        return new
