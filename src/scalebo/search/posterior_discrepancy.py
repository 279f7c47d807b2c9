"""A model-discrepancy term for the law posterior: hyperparameter optima that move with scale.

The search GP is calibrated where it was tested (leave-one-out and leave-larger-cells-out
z-scores of the observed runs are ≈ 1 on OELLM-English, StepLaw and the synthetic grids), but
the runs a search never tried are exactly those the GP believed to be poor. When the best
hyperparameters move with scale (OELLM-English: lr 2.5e-4 / bs 256 at N = 1.7B, 5e-4 / 128
below) the GP carries the cheap cells' optimum to the expensive ones and is wrong there by
3–4 of its own standard deviations, so the law posterior collapses onto the observed
envelope (10 % budget: 80 % interval 0.06 % wide, covering the reference in 2 of 10 seeds).
No observed run can reveal that error (ensembles of GP hyperparameters — Laplace draws or
bootstrap refits — and the shifted-optimum surrogate were measured not to fix it), so it is
given a prior instead.

:class:`DiscrepancySurrogate` adds to every posterior sample of the inner surrogate an
independent draw of a zero-mean discrepancy ``δ`` — a GP on the encoded inputs with kernel

    k_δ(x, x') = τ² · exp(−½ Σ_j (h_j − h'_j)² / ℓ_j²) · exp(−|s − s'|² / 2ℓ_s²)

(``s``: scale columns, encoded log N and log D; ``h``: the hyperparameter columns, ``ℓ_j`` =
``length_h`` grid steps of column ``j``) — conditioned on ``δ = 0`` at the observed
configurations (their losses are known). So ``δ`` vanishes at every observed run and grows
to ``τ`` for configurations whose hyperparameters are a grid step or more from every observed
configuration of a comparable cell (``ℓ_s``); a never-tried cell is uncertain everywhere.
``τ = scale × gap``, where ``gap`` (:func:`neighbour_gap`) is the median over cells of what a
one-step move away from the cell's best observed configuration costs — the loss change a
one-step shift of the optimum makes. The posterior mean (:meth:`predict`) is the inner
surrogate's, so the point estimate on the posterior-mean table is unchanged; only the samples
widen. Notation: ``X`` ``(n, d)`` encoded inputs, ``y`` ``(n,)`` losses (any affine units,
standardized in the law posterior).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from scalebo.errors import SearchError
from scalebo.search.models.linalg import _cholesky, blas_threads

__all__ = ["DiscrepancySurrogate", "grid_steps", "neighbour_gap", "sample_joint"]


def sample_joint(model: Any, X: np.ndarray, n: int, rng: np.random.Generator,
                 include_noise: bool) -> np.ndarray:
    """Joint samples ``(n, m)`` of ``model`` at ``X`` ``(m, d)``, in its fitted units
    (``include_noise`` passed if its ``sample_joint`` accepts it); SearchError without
    ``sample_joint`` or on a wrong shape."""
    if not hasattr(model, "sample_joint"):
        raise SearchError("A law posterior needs a surrogate with sample_joint(X, n, rng) "
                          "(joint posterior samples); this one has none.")
    params = inspect.signature(model.sample_joint).parameters
    kw = {"include_noise": include_noise} if "include_noise" in params else {}
    s = np.asarray(model.sample_joint(X, n, rng, **kw), dtype=np.float64)
    if s.shape != (n, X.shape[0]):
        raise SearchError(f"sample_joint returned shape {s.shape}, expected ({n}, {X.shape[0]}).")
    return s


def neighbour_gap(X: np.ndarray, y: np.ndarray, scale_columns: Sequence[int] = (0, 1)
                  ) -> float:
    """Median over cells with ≥ 2 observations of the loss gap between the cell's best
    observed configuration and its nearest observed neighbour in the hyperparameter columns
    (what a one-step move of the optimum costs; units of ``y``); 0 if no cell has two."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    _, cell = np.unique(X[:, list(scale_columns)], axis=0, return_inverse=True)
    cell = cell.ravel()
    h = [j for j in range(X.shape[1]) if j not in scale_columns]
    gaps = []
    for c in np.unique(cell):
        members = np.flatnonzero(cell == c)
        if members.size < 2:
            continue
        best = members[np.argmin(y[members])]
        others = members[members != best]
        near = others[np.argmin(np.linalg.norm(X[others][:, h] - X[best, h], axis=1))]
        gaps.append(float(y[near] - y[best]))
    return float(np.median(gaps)) if gaps else 0.0


def grid_steps(X: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """Median spacing of the distinct values of each column of ``X`` (1 for a constant
    column), ``(len(columns),)``, encoded units."""
    out = []
    for j in columns:
        v = np.unique(X[:, j])
        out.append(float(np.median(np.diff(v))) if v.size > 1 else 1.0)
    return np.asarray(out)


class DiscrepancySurrogate:
    """An inner surrogate whose joint samples carry a scale-local hyperparameter discrepancy.

    Args:
        inner: surrogate with ``fit(X, y)``, ``predict`` and ``sample_joint`` (e.g. the
            search's clipped GP); ``condition_on`` is passed through.
        scale: ``τ`` in units of :func:`neighbour_gap` of the fitted losses (0: off).
        length_h: ``ℓ_h`` in grid steps of each hyperparameter column (:func:`grid_steps`
            of the fitted inputs).
        length_s: ``ℓ_s``, encoded scale units.
        scale_columns: encoded columns of the scale (default N, D: ``(0, 1)``); every other
            column is a hyperparameter column.
        clip: fitted losses above ``median + clip × IQR`` (diverged runs) are left out of
            the gap (None: none left out).
    """

    def __init__(self, inner: object, scale: float = 1.5, *, length_h: float = 0.75,
                 length_s: float = 0.2, scale_columns: Sequence[int] = (0, 1),
                 clip: float | None = 5.0) -> None:
        if not (scale >= 0 and length_h > 0 and length_s > 0):
            raise ValueError(f"need scale >= 0 and positive length scales; got {scale}, "
                             f"{length_h}, {length_s}")
        self.inner, self.scale = inner, float(scale)
        self.length_h, self.length_s = float(length_h), float(length_s)
        self.scale_columns, self.clip = tuple(scale_columns), clip
        self.tau_ = 0.0

    def fit(self, X: np.ndarray, y: np.ndarray, **kw: object) -> DiscrepancySurrogate:
        """Fit the inner surrogate on ``X`` ``(n, d)``, ``y`` ``(n,)``; set ``tau_`` (units
        of ``y``) and the hyperparameter length scales ``ell_h_`` (encoded units)."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        self.inner.fit(X, y, **kw)
        keep = np.ones(y.size, dtype=bool)
        if self.clip is not None and y.size >= 4:
            q1, med, q3 = np.percentile(y, [25, 50, 75])
            keep = y <= med + self.clip * (q3 - q1) if q3 > q1 else keep
        self.X_obs_ = X
        self.tau_ = self.scale * neighbour_gap(X[keep], y[keep], self.scale_columns)
        self.h_cols_ = [j for j in range(X.shape[1]) if j not in self.scale_columns]
        self.ell_h_ = self.length_h * grid_steps(X, self.h_cols_)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.predict(X)

    def _kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        cols = self.h_cols_ + list(self.scale_columns)
        ell = np.concatenate([self.ell_h_, np.full(len(self.scale_columns), self.length_s)])
        a, b = A[:, cols] / ell, B[:, cols] / ell
        d = a @ b.T  # −½ squared scaled distance, in place
        d -= 0.5 * (a * a).sum(1)[:, None]
        d -= 0.5 * (b * b).sum(1)[None, :]
        np.minimum(d, 0.0, out=d)
        np.exp(d, out=d)
        d *= self.tau_**2
        return d

    def discrepancy_cov(self, X: np.ndarray) -> np.ndarray:
        """Covariance of ``δ`` at ``X`` ``(m, d)`` given ``δ = 0`` at the fitted inputs,
        ``(m, m)``, in the fitted units squared."""
        X = np.asarray(X, dtype=np.float64)
        if self.tau_ <= 0:
            return np.zeros((X.shape[0], X.shape[0]))
        Xo = self.X_obs_
        Koo = self._kernel(Xo, Xo)
        Koo.flat[:: Koo.shape[0] + 1] += 1e-8 * self.tau_**2
        L, _ = _cholesky(Koo, warn=False, what="the discrepancy covariance")
        V = solve_triangular(L, self._kernel(Xo, X), lower=True, check_finite=False)  # (n, m)
        return self._kernel(X, X) - V.T @ V

    def sample_joint(self, X: np.ndarray, n_samples: int, rng: object = None, *,
                     include_noise: bool = False) -> np.ndarray:
        """The inner surrogate's joint samples ``(n_samples, m)`` plus independent draws of
        ``δ`` (the inner samples use the first draws of ``rng``)."""
        gen = np.random.default_rng(rng)
        out = sample_joint(self.inner, np.asarray(X, dtype=np.float64), int(n_samples), gen,
                           include_noise)
        if self.tau_ <= 0:
            return out
        with blas_threads(1):  # as the GP: oversubscribed BLAS is far slower when shared
            cov = self.discrepancy_cov(X)
            cov.flat[:: cov.shape[0] + 1] += 1e-4 * self.tau_**2  # smooth kernel
            C, _ = _cholesky(cov, warn=False, what="the discrepancy covariance")
            return out + gen.standard_normal((int(n_samples), cov.shape[0])) @ C.T

    def condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> DiscrepancySurrogate:
        """A copy whose inner surrogate also sees ``(X_new, y_new)`` (``δ`` unchanged)."""
        new = DiscrepancySurrogate.__new__(DiscrepancySurrogate)
        new.__dict__.update(self.__dict__)
        new.inner = self.inner.condition_on(X_new, y_new)
        return new
