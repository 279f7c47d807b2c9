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

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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
        Z = self.prepare(as_inputs(X, len(self.variables)))
        return np.exp(self.log_predict(np.asarray(theta, float)[None, :], Z)[0])


def as_inputs(X: np.ndarray | Sequence[float], k: int) -> np.ndarray:
    """Coerce inputs to a float64 array of shape ``(n, k)``; a 1-D array is one variable."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 0:
        X = X.reshape(1, 1)
    if X.ndim == 1:
        X = X[:, None] if k == 1 else X[None, :]
    if X.ndim != 2 or X.shape[1] != k:
        raise ValueError(f"expected inputs of shape (n, {k}), got {X.shape}")
    return X


@dataclass(frozen=True)
class PowerTerm:
    """One term ``A · X^(−α)`` of a sum of power laws.

    Attributes:
        variable: input variable name (column of the run table), e.g. ``"N"``.
        coef: natural name of the coefficient, e.g. ``"A"``.
        exponent: natural name of the exponent, e.g. ``"alpha"``.
    """

    variable: str
    coef: str
    exponent: str


#: Hoffmann et al. (2022) / Besiroglu et al. (2024) start grid values (inclusive endpoints):
#: exponents 0, 0.5, …, 2; log E −1, −0.5, …, 1; log coefficients 0, 5, …, 25.
HOFFMANN_EXPONENT_STARTS = (0.0, 0.5, 1.0, 1.5, 2.0)
HOFFMANN_LOG_E_STARTS = (-1.0, -0.5, 0.0, 0.5, 1.0)
HOFFMANN_LOG_COEF_STARTS = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)


@dataclass(frozen=True)
class PowerLawSum(Law):
    """``L = E + Σ_i A_i · X_i^(−α_i)`` in any named positive variables.

    Internal parameters, in order: ``log_E``, then per term ``log_<coef>``, ``<exponent>``.
    Exponents are positive for a loss that falls as the variable grows.

    Attributes:
        name: registry name of the law.
        terms: the power terms.
        exponent_bounds: bounds on every exponent.
        log_coef_bounds: bounds on every ``log A_i``.
        log_E_bounds: bounds on ``log E`` (E in the output's unit, e.g. nats).
        start_values: explicit start values per internal parameter name; the start grid is
            their Cartesian product. Parameters not listed use the data-aware default
            (see :meth:`start_grid`).
    """

    name: str
    terms: tuple[PowerTerm, ...]
    exponent_bounds: tuple[float, float] = (0.0, 5.0)
    log_coef_bounds: tuple[float, float] = (-30.0, 80.0)
    log_E_bounds: tuple[float, float] = (-10.0, 5.0)
    start_values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    term_starts: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)

    @property
    def variables(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(t.variable for t in self.terms)

    @property
    def param_names(self) -> tuple[str, ...]:  # type: ignore[override]
        names = ["log_E"]
        for t in self.terms:
            names += [f"log_{t.coef}", t.exponent]
        return tuple(names)

    @property
    def natural_names(self) -> tuple[str, ...]:  # type: ignore[override]
        names = ["E"]
        for t in self.terms:
            names += [t.coef, t.exponent]
        return tuple(names)

    @property
    def lower(self) -> np.ndarray:  # type: ignore[override]
        lo = [self.log_E_bounds[0]]
        for _ in self.terms:
            lo += [self.log_coef_bounds[0], self.exponent_bounds[0]]
        return np.array(lo)

    @property
    def upper(self) -> np.ndarray:  # type: ignore[override]
        hi = [self.log_E_bounds[1]]
        for _ in self.terms:
            hi += [self.log_coef_bounds[1], self.exponent_bounds[1]]
        return np.array(hi)

    def prepare(self, X: np.ndarray) -> np.ndarray:
        """Natural log of the inputs, shape ``(n, k)``; inputs must be positive."""
        X = as_inputs(X, len(self.terms))
        if np.any(~(X > 0)):
            raise ValueError(f"law {self.name!r} needs positive, finite inputs {self.variables}")
        return np.log(X)

    def log_predict_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        """``log L̂`` of shape ``(S, n)`` and its vector-Jacobian product (see :meth:`bind`)."""
        return self.bind(Z)(theta)

    def bind(self, Z: np.ndarray) -> BoundLaw:
        """``theta -> (log L̂, vjp)`` for fixed prepared inputs ``Z`` (n, k).

        ``log L̂ = LSE(t_0, …, t_k)`` with ``t_0 = log E`` and ``t_i = log A_i − α_i log X_i``;
        ``∂ log L̂ / ∂ log A_i = w_i`` and ``∂ log L̂ / ∂ α_i = −w_i log X_i`` where ``w`` is the
        softmax of the ``t``'s. Work that depends only on ``Z`` (distinct input values, the
        ``[1, −log X_i]`` design of each term's gradient) is done here, once per data set.
        """
        Z = np.asarray(Z, dtype=np.float64)
        n, k = Z.shape[0], len(self.terms)
        bases = []  # per term: (values to exponentiate, inverse index or None)
        for i in range(k):
            values, inverse = np.unique(Z[:, i], return_inverse=True)
            if values.size <= 0.8 * n:  # grids repeat N and D: exponentiate distinct values
                bases.append((values, inverse))
            else:
                bases.append((np.ascontiguousarray(Z[:, i]), None))
        designs = [np.column_stack([np.ones(n), -Z[:, i]]) for i in range(k)]
        ones = np.ones(n)
        limit = 600.0  # exp overflows float64 at 709.8; terms beyond take the shifted path

        def evaluate(theta: np.ndarray) -> tuple[np.ndarray, VJP]:
            theta = np.atleast_2d(theta)
            exps: list[np.ndarray] = []
            stable = abs(theta[:, 0]).max(initial=0.0) <= limit
            for i, (base, inverse) in enumerate(bases):
                if not stable:
                    break
                ti = np.multiply(theta[:, 2 + 2 * i, None], base[None, :])
                np.subtract(theta[:, 1 + 2 * i, None], ti, out=ti)
                if ti.size and (ti.max() > limit or ti.min() < -limit):
                    stable = False
                    break
                ei = np.exp(ti, out=ti)
                exps.append(ei[:, inverse] if inverse is not None else ei)
            if stable:
                e0 = np.exp(theta[:, 0])
                e0_full = None
                total = np.add(exps[0], e0[:, None]) if k else np.repeat(e0[:, None], n, 1)
                for ei in exps[1:]:
                    total += ei
                log_pred = np.log(total)
            else:
                t = np.empty((k + 1, theta.shape[0], n))
                t[0] = theta[:, 0:1]
                for i in range(k):
                    t[i + 1] = theta[:, 1 + 2 * i, None] - theta[:, 2 + 2 * i, None] * Z[None, :, i]
                shift = t.max(axis=0)
                t = np.exp(t - shift, out=t)
                total = t.sum(axis=0)
                log_pred = np.log(total) + shift
                e0, e0_full, exps = None, t[0], list(t[1:])

            def vjp(cot: np.ndarray) -> np.ndarray:
                """``Σ_n cot · ∂ log L̂ / ∂θ``; softmax weights are ``term / total``."""
                grad = np.empty_like(theta)
                c = cot / total
                if e0 is not None:
                    grad[:, 0] = (c @ ones) * e0
                else:
                    grad[:, 0] = np.einsum("sn,sn->s", c, e0_full)
                cw = np.empty_like(c)
                for i in range(k):
                    np.multiply(c, exps[i], out=cw)
                    grad[:, 1 + 2 * i : 3 + 2 * i] = cw @ designs[i]
                return grad

            return log_pred, vjp

        return evaluate

    def start_grid(self, Z: np.ndarray | None = None) -> np.ndarray:
        """Cartesian product of start values, shape ``(S, p)``, endpoints included.

        Unlisted parameters default to: ``log_E`` ∈ {−1, −0.5, …, 1}; exponents
        ∈ {0, 0.5, …, 2}; each ``log A_i`` chosen so that the term is worth
        ``term_starts`` = {0.01, 0.1, 1, 10} (output units) at the median of the data for each
        start exponent
        — a data-aware default that works whatever the unit of ``X_i`` (FLOPs ~1e20 or
        width ~1e3). Without data, Hoffmann's {0, 5, …, 25}.
        """
        names = self.param_names
        per_param: list[tuple[float, ...]] = []
        data_aware: dict[int, int] = {}  # position of log_A -> term index
        for j, name in enumerate(names):
            if name in self.start_values:
                per_param.append(tuple(self.start_values[name]))
            elif name == "log_E":
                per_param.append(HOFFMANN_LOG_E_STARTS)
            elif j % 2 == 0:  # exponent
                per_param.append(HOFFMANN_EXPONENT_STARTS)
            elif Z is None:
                per_param.append(HOFFMANN_LOG_COEF_STARTS)
            else:
                per_param.append(tuple(np.log(self.term_starts)))
                data_aware[j] = (j - 1) // 2
        grid = np.array(list(itertools.product(*per_param)), dtype=np.float64)
        if data_aware and Z is not None:
            med = np.median(Z, axis=0)
            for j, i in data_aware.items():
                grid[:, j] += grid[:, j + 1] * med[i]  # log A = log(term) + α · log X_med
            # Starts pushed outside the bounds would all collapse onto the bound: drop them.
            inside = np.all((grid >= self.lower) & (grid <= self.upper), axis=1)
            grid = grid[inside]
        return np.clip(grid, self.lower, self.upper)

    def natural(self, theta: np.ndarray) -> dict[str, float]:
        theta = np.asarray(theta, dtype=np.float64)
        out = {"E": float(np.exp(theta[0]))}
        for i, t in enumerate(self.terms):
            out[t.coef] = float(np.exp(theta[1 + 2 * i]))
            out[t.exponent] = float(theta[2 + 2 * i])
        return out

    def from_natural(self, params: Mapping[str, float]) -> np.ndarray:
        theta = [np.log(params["E"])]
        for t in self.terms:
            theta += [np.log(params[t.coef]), params[t.exponent]]
        return np.array(theta, dtype=np.float64)


def _clamped_log(pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log max(pred, 1e-300)`` and ``1/pred`` where the prediction is positive, else 0.

    Downstream laws can predict ≤ 0; there the log is clamped (a huge residual) and the
    gradient is zero, so such starts simply lose.
    """
    ok = pred > _TINY
    safe = np.where(ok, pred, 1.0)
    return np.where(ok, np.log(safe), np.log(_TINY)), np.where(ok, 1.0 / safe, 0.0)


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
        return as_inputs(X, 1)

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
        return as_inputs(X, 1)

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


#: ``L(C) = E + A · C^(−alpha)``; C in FLOPs.
COMPUTE_LAW = PowerLawSum("compute", (PowerTerm("C", "A", "alpha"),))

#: Hoffmann et al. (2022) ``L(N, D) = E + A / N^alpha + B / D^beta`` with their 4,500-start grid.
CHINCHILLA = PowerLawSum(
    "chinchilla",
    (PowerTerm("N", "A", "alpha"), PowerTerm("D", "B", "beta")),
    start_values={
        "log_E": HOFFMANN_LOG_E_STARTS,
        "log_A": HOFFMANN_LOG_COEF_STARTS,
        "alpha": HOFFMANN_EXPONENT_STARTS,
        "log_B": HOFFMANN_LOG_COEF_STARTS,
        "beta": HOFFMANN_EXPONENT_STARTS,
    },
)

#: Gemstones-style width/depth/tokens law ``E + A·w^(−alpha) + B·d^(−beta) + G·D^(−gamma)``.
WIDTH_DEPTH = PowerLawSum(
    "width_depth",
    (PowerTerm("width", "A", "alpha"), PowerTerm("depth", "B", "beta"),
     PowerTerm("D", "G", "gamma")),
    start_values={"log_E": (-1.0, 0.0, 1.0), "alpha": (0.0, 0.5, 1.0),
                  "beta": (0.0, 0.5, 1.0), "gamma": (0.0, 0.5, 1.0)},
    term_starts=(0.1, 1.0),
)

GADRE = GadreDownstreamLaw()
SIGMOID = SigmoidDownstreamLaw()

LAWS: dict[str, Law] = {
    law.name: law for law in (COMPUTE_LAW, CHINCHILLA, WIDTH_DEPTH, GADRE, SIGMOID)
}


def power_law_sum(variables: Sequence[str], name: str | None = None) -> PowerLawSum:
    """A sum of power laws in the given variables, coefficients ``A_<var>``, exponents
    ``alpha_<var>``, with the data-aware default start grid."""
    terms = tuple(PowerTerm(v, f"A_{v}", f"alpha_{v}") for v in variables)
    return PowerLawSum(name or "+".join(variables), terms)


def get_law(name: str) -> Law:
    """Law by registry name (``compute``, ``chinchilla``, ``width_depth``, ``gadre``,
    ``sigmoid``) or a sum of power laws spelled ``powerlaw:w,d,D``."""
    if name in LAWS:
        return LAWS[name]
    if name.startswith("powerlaw:"):
        variables = [v.strip() for v in name.split(":", 1)[1].split(",") if v.strip()]
        if variables:
            return power_law_sum(variables)
    raise ValueError(
        f"unknown law {name!r}; expected one of {sorted(LAWS)} or 'powerlaw:VAR1,VAR2,...'"
    )
