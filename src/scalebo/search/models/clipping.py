"""Robust surrogate inputs: clip diverged losses before the GP sees them."""

from __future__ import annotations

import copy

import numpy as np


class ClippedGP:
    """A GP surrogate that sees observed losses clipped at ``median + k·IQR``.

    Diverged runs (StepLaw: 181 runs at 4–11 nats, while a cell's good runs differ by
    0.05–0.1 nats) would otherwise dominate the standardized GP, which then cannot resolve
    the region that matters. The threshold is set at each ``fit`` from the fitted ``y``
    ``(n,)`` (any affine units, e.g. the loop's standardized nats) and applied to later
    ``condition_on`` values too; it is ``inf`` when the IQR is 0.
    """

    def __init__(self, inner: object, k: float) -> None:
        self.inner, self.k, self.threshold_ = inner, float(k), np.inf

    def fit(self, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> ClippedGP:
        y = np.asarray(y, dtype=np.float64)
        q1, med, q3 = np.percentile(y, [25, 50, 75])
        self.threshold_ = med + self.k * (q3 - q1) if q3 > q1 else np.inf
        self.inner.fit(X, np.minimum(y, self.threshold_), warm_start=warm_start)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.predict(X)

    def sample_joint(self, X: np.ndarray, n_samples: int, rng: object = None, *,
                     include_noise: bool = False) -> np.ndarray:
        kw = {"include_noise": True} if include_noise else {}  # inner may lack the flag
        return self.inner.sample_joint(X, n_samples, rng, **kw)

    def condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> ClippedGP:
        new = copy.copy(self)
        new.inner = self.inner.condition_on(X_new, np.minimum(y_new, self.threshold_))
        return new
