"""Downstream laws: benchmark error as a function of validation loss (nats)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scalebo.laws.base import _TINY, VJP, Law, as_inputs


def _clamped_log(pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log max(pred, 1e-300)`` and ``1/pred`` where the prediction is positive, else 0.

    Downstream laws can predict ≤ 0; there the log is clamped (a huge residual) and the
    gradient is zero, so such starts simply lose.
    """
    ok = pred > _TINY
    safe = np.where(ok, pred, 1.0)
    return np.where(ok, np.log(safe), np.log(_TINY)), np.where(ok, 1.0 / safe, 0.0)


#: Each law as ``scalebo fit --formula`` takes it (formula, then its ``--bounds``), for a
#: table of loss and error alone (the built-in laws read run tables, which need N and D).
AS_FORMULA = {
    "gadre": "epsilon - k*exp(-gamma*loss)' --bounds 'epsilon=0:1,k=0:1e4,gamma=0:10",
    "sigmoid": "a/(1 + exp(-k*(loss - L0))) + b' --bounds 'a=0:1,k=0:100,L0=0:10,b=0:1",
}


@dataclass(frozen=True)
class GadreDownstreamLaw(Law):
    """Gadre et al. (2024, eq. 4): benchmark error ``Err(L) = ε − k · exp(−γ · L)``.

    Input: loss ``L`` in nats (one variable, ``"loss"``); output: average top-1 error in
    (0, 1]. Internal parameters ``(epsilon, log_k, gamma)``; where ``ε − k e^{−γL} ≤ 0`` the
    log prediction is clamped at ``log 1e-300`` (a huge residual, zero gradient).
    """

    name: str = "gadre"
    variables: tuple[str, ...] = ("loss",)
    param_names: tuple[str, ...] = ("epsilon", "log_k", "gamma")
    natural_names: tuple[str, ...] = ("epsilon", "k", "gamma")
    lower: np.ndarray = field(default_factory=lambda: np.array([0.0, -30.0, 0.0]))
    upper: np.ndarray = field(default_factory=lambda: np.array([2.0, 30.0, 50.0]))

    def prepare(self, X: np.ndarray) -> np.ndarray:
        return as_inputs(X, self.variables)

    def log_predict_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        theta = np.atleast_2d(theta)
        eps, log_k, gamma = theta[:, 0:1], theta[:, 1:2], theta[:, 2:3]
        L = Z[None, :, 0]
        decay = np.exp(log_k - gamma * L)  # k e^{-γL}
        pred = eps - decay
        log_pred, inv_pred = _clamped_log(pred)

        def vjp(cot: np.ndarray) -> np.ndarray:
            c = cot * inv_pred
            return np.stack(
                [c.sum(1), -(c * decay).sum(1), (c * decay * L).sum(1)], axis=1
            )

        return log_pred, vjp

    def start_grid(self, Z: np.ndarray | None = None) -> np.ndarray:
        eps = (0.5, 0.75, 0.9, 1.0)
        log_k = (-2.0, 0.0, 2.0, 5.0, 10.0)
        gamma = (0.5, 1.0, 2.0, 4.0, 8.0)
        return np.array(list(itertools.product(eps, log_k, gamma)), dtype=np.float64)

    def natural(self, theta: np.ndarray) -> dict[str, float]:
        return {"epsilon": float(theta[0]), "k": float(np.exp(theta[1])), "gamma": float(theta[2])}

    def from_natural(self, params: Mapping[str, float]) -> np.ndarray:
        return np.array([params["epsilon"], np.log(params["k"]), params["gamma"]])


@dataclass(frozen=True)
class SigmoidDownstreamLaw(Law):
    """Bhagia et al. (2024) step 2: ``Err(L) = a / (1 + exp(−k · (L − L0))) + b``.

    Input: loss ``L`` in nats; output: task error (or 1 − accuracy) in (0, 1]. Internal
    parameters ``(a, k, L0, b)``, all natural; predictions ≤ 0 are clamped as in
    :class:`GadreDownstreamLaw`.
    """

    name: str = "sigmoid"
    variables: tuple[str, ...] = ("loss",)
    param_names: tuple[str, ...] = ("a", "k", "L0", "b")
    natural_names: tuple[str, ...] = ("a", "k", "L0", "b")
    lower: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 0.0]))
    upper: np.ndarray = field(default_factory=lambda: np.array([2.0, 100.0, 20.0, 1.0]))

    def prepare(self, X: np.ndarray) -> np.ndarray:
        return as_inputs(X, self.variables)

    def log_predict_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        theta = np.atleast_2d(theta)
        a, k, L0, b = (theta[:, j : j + 1] for j in range(4))
        L = Z[None, :, 0]
        u = -k * (L - L0)
        sig = np.exp(-np.logaddexp(0.0, u))  # 1 / (1 + e^u), stable
        pred = a * sig + b
        log_pred, inv_pred = _clamped_log(pred)
        dsig_du = -sig * (1.0 - sig)

        def vjp(cot: np.ndarray) -> np.ndarray:
            c = cot * inv_pred
            return np.stack(
                [
                    (c * sig).sum(1),
                    (c * a * dsig_du * -(L - L0)).sum(1),
                    (c * a * dsig_du * k).sum(1),
                    c.sum(1),
                ],
                axis=1,
            )

        return log_pred, vjp

    def start_grid(self, Z: np.ndarray | None = None) -> np.ndarray:
        centre = float(np.median(Z[:, 0])) if Z is not None else 3.0
        a = (0.3, 0.6, 0.9)
        k = (0.5, 2.0, 8.0)
        L0 = (centre - 1.0, centre, centre + 1.0)
        b = (0.0, 0.1, 0.3)
        return np.clip(
            np.array(list(itertools.product(a, k, L0, b)), dtype=np.float64),
            self.lower,
            self.upper,
        )

    def natural(self, theta: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.natural_names, theta, strict=True)}

    def from_natural(self, params: Mapping[str, float]) -> np.ndarray:
        return np.array([params[n] for n in self.natural_names], dtype=np.float64)


