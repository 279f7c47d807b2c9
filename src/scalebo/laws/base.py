"""Scaling-law forms as data: value, analytic gradient, bounds and a default start grid.

Every law maps input variables ``X`` (natural units: parameters, tokens, FLOPs, or a loss in
nats for downstream laws) to a positive quantity (a loss in nats, or a benchmark error in
(0, 1]). Fitting happens on **natural-log** predictions, so each law exposes

* ``prepare(X)`` — features computed once per data set (e.g. ``log X``);
* ``log_predict(theta, Z)`` — ``log L̂`` for a batch of parameter vectors, shape ``(S, n)``;
* ``log_predict_vjp(theta, Z)`` — the same plus a function mapping a cotangent ``(S, n)`` to
  ``Σ_n cot[s, n] · ∂ log L̂[s, n] / ∂θ[s]`` of shape ``(S, p)`` (the analytic gradient);
* ``bind(Z)`` — ``theta -> log_predict_vjp(theta, Z)`` with the per-data-set work done once
  (what the fitter calls thousands of times).

Notation: ``S`` parameter vectors (starts), ``n`` observations, ``p`` parameters, ``k`` input
variables.

Sums of power laws use the log-sum-exp parametrization of Hoffmann et al. (2022, App. D.2)::

    L = E + Σ_i A_i · X_i^(−α_i)  ⇔  log L = LSE(log E, log A_i − α_i · log X_i)

with internal parameters ``(log_E, log_A_1, alpha_1, …)``. Natural parameters (``E``,
``A``, ``alpha``, …) are returned by :meth:`Law.natural`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

VJP = Callable[[np.ndarray], np.ndarray]
BoundLaw = Callable[[np.ndarray], tuple[np.ndarray, VJP]]
"""``theta (S, p) -> (log L̂ (S, n), vjp)`` for one prepared data set (see :meth:`Law.bind`)."""

#: Smallest prediction allowed inside ``log`` for laws that can predict ≤ 0 (downstream laws).
_TINY = 1e-300


class Law:
    """Interface shared by every law (see module docstring for the conventions)."""

    name: str
    variables: tuple[str, ...]
    param_names: tuple[str, ...]
    natural_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def prepare(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def log_predict(self, theta: np.ndarray, Z: np.ndarray) -> np.ndarray:
        return self.log_predict_vjp(theta, Z)[0]

    def bind(self, Z: np.ndarray) -> BoundLaw:
        """``theta -> log_predict_vjp(theta, Z)`` for fixed prepared inputs; laws override it
        to do the work that depends only on ``Z`` once per data set instead of per call."""
        return lambda theta: self.log_predict_vjp(theta, Z)

    def log_predict_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        raise NotImplementedError  # pragma: no cover - interface

    def start_grid(self, Z: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def natural(self, theta: np.ndarray) -> dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def from_natural(self, params: Mapping[str, float]) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Prediction in natural units for one parameter vector ``theta`` (p,) at ``X`` (n, k)."""
        Z = self.prepare(as_inputs(X, self.variables))
        return np.exp(self.log_predict(np.asarray(theta, float)[None, :], Z)[0])


def as_inputs(X: np.ndarray | Sequence[float], variables: Sequence[str] | int) -> np.ndarray:
    """Coerce inputs to a float64 array of shape ``(n, k)``; a 1-D array is one variable.

    ``variables``: the law's input names (or just their number ``k``). A DataFrame's columns
    are taken by these names, whatever their order (a frame with ``D`` before ``N`` would
    otherwise be read as swapped inputs, and fit or predict wrongly without an error).
    """
    k = variables if isinstance(variables, int) else len(variables)
    if hasattr(X, "columns") and not isinstance(variables, int):
        names = list(variables)
        if missing := [v for v in names if v not in X.columns]:
            raise ValueError(f"a DataFrame's columns are matched to the law's inputs {names} "
                             f"by name: {missing} missing among its columns "
                             f"{list(X.columns)} (rename them, or pass a NumPy array whose "
                             "columns follow that order)")
        X = X[names]
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 0:
        X = X.reshape(1, 1)
    if X.ndim == 1:
        X = X[:, None] if k == 1 else X[None, :]
    if X.ndim != 2 or X.shape[1] != k:
        raise ValueError(f"expected inputs of shape (n, {k}), got {X.shape}")
    return X
