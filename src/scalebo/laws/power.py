"""Sums of power laws in log-sum-exp form (Hoffmann et al. 2022, App. D.2).

Conventions: :mod:`scalebo.laws.base`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scalebo.laws.base import VJP, BoundLaw, Law, as_inputs


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

    def as_formula(self) -> tuple[str, str]:
        """``(formula, bounds)``: this law as ``scalebo fit --formula`` text with its own
        bounds in natural units (``--bounds``), e.g. ``("E + A*width**(-alpha) + ...",
        "E=4.54e-05:148,A=9.36e-14:5.54e+34,alpha=0:5,...")``: the same model, for what only
        a formula fit offers (``--predict-at`` a point of the law's own variables)."""
        formula = " + ".join(["E", *(f"{t.coef}*{t.variable}**(-{t.exponent})"
                                     for t in self.terms)])
        e, c, x = np.exp(self.log_E_bounds), np.exp(self.log_coef_bounds), self.exponent_bounds
        bounds = [f"E={e[0]:.3g}:{e[1]:.3g}"]
        for t in self.terms:
            bounds += [f"{t.coef}={c[0]:.3g}:{c[1]:.3g}", f"{t.exponent}={x[0]:g}:{x[1]:g}"]
        return formula, ",".join(bounds)

    def prepare(self, X: np.ndarray) -> np.ndarray:
        """Natural log of the inputs, shape ``(n, k)``; inputs must be positive."""
        X = as_inputs(X, self.variables)
        if np.any(~(X > 0) | ~np.isfinite(X)):
            i, j = np.argwhere(~(X > 0) | ~np.isfinite(X))[0]
            raise ValueError(f"law {self.name!r} needs positive, finite inputs "
                             f"{self.variables}; {self.variables[j]} at 0-based position {i} "
                             f"is {float(X[i, j])!r}")
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


