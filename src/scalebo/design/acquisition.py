"""Which experiment to run next: expected reduction of the target region's predictive
variance per unit cost, and the seeded baselines.

For a posterior of modes ``m`` (weights ``w_m``, Gaussians ``N(θ_m, Σ_m)``, noise ``σ²``;
:mod:`scalebo.design.posterior`), observing candidate ``c`` with Jacobian row ``j`` reduces the
linearized within-mode variance summed over target rows (Jacobian ``G``) by

    ``R_m(c) = ‖G Σ_m jᵀ‖² / (σ² + j Σ_m jᵀ)``

(the rank-one Gaussian update). The between-mode disagreement is treated the same way with
the between-mode covariance ``K(t, c) = Σ_m w_m (μ_mt − μ̄_t)(μ_mc − μ̄_c)``:
``R_b(c) = Σ_t K(t, c)² / (σ² + Var(c))``, ``Var(c)`` the mixture variance at ``c``. Score:

    ``score(c) = [Σ_m w_m R_m(c) + R_b(c)] / (cost_c / C)^γ``,   ``γ = 0.4`` by default,

``C`` the pool's total cost. Variances are in response units squared; scores only rank.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalebo.design.posterior import Posterior, jacobian

__all__ = ["BASELINES", "DEFAULT_GAMMA", "JacobianCache", "baseline_pick",
           "cached_variance_scores", "condition_on_mean", "variance_reduction",
           "variance_scores"]

#: Cost exponent of the score (ScaleBench's MSPE uses 0.4).
DEFAULT_GAMMA = 0.4
#: Baseline methods of :func:`baseline_pick`.
BASELINES = ("random", "cheapest", "cost_weighted")


def variance_reduction(post: Posterior, Zc: np.ndarray, Zt: np.ndarray,
                       between: bool = True) -> np.ndarray:
    """Expected reduction ``(n,)`` of Σ_target predictive variance from observing each
    candidate row of prepared inputs ``Zc`` (n, k); ``Zt`` (T, k) are the target inputs."""
    mu_c, var_c, jac_c = post.mode_moments(Zc)
    mu_t, _, jac_t = post.mode_moments(Zt)
    return _reduction(post, mu_c, var_c, jac_c, mu_t, jac_t, between)


def _reduction(post: Posterior, mu_c: np.ndarray, var_c: np.ndarray, jac_c: list[np.ndarray],
               mu_t: np.ndarray, jac_t: list[np.ndarray], between: bool) -> np.ndarray:
    """:func:`variance_reduction` from per-mode candidate means ``(M, n)``, variances
    ``(M, n)`` and Jacobians, and target means ``(M, T)`` and Jacobians."""
    w = post.weights
    total = np.zeros(mu_c.shape[1])
    for m, mode in enumerate(post.modes):
        B = (jac_t[m] @ mode.cov) @ jac_c[m].T  # (T, n): Cov_m(target t, candidate c)
        total += w[m] * (B**2).sum(0) / (post.sigma2 + var_c[m])
    if between and len(post.modes) > 1:
        Dt = mu_t - (w[:, None] * mu_t).sum(0)
        Dc = mu_c - (w[:, None] * mu_c).sum(0)
        K = (w[:, None] * Dt).T @ Dc  # (T, n)
        var_mix = (w[:, None] * (var_c + Dc**2)).sum(0)
        total += (K**2).sum(0) / (post.sigma2 + var_mix)
    return np.where(np.isfinite(total), total, 0.0)


def variance_scores(post: Posterior, X_cand: np.ndarray, cost: np.ndarray,
                    X_target: np.ndarray, total_cost: float,
                    gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """Score ``(n,)`` of each candidate (module docstring): variance reduction per
    ``(cost/C)^γ``. ``cost`` in the pool's units, ``total_cost`` = C."""
    law = post.law
    red = variance_reduction(post, law.prepare(X_cand), law.prepare(X_target))
    return red / (np.asarray(cost, dtype=np.float64) / total_cost) ** gamma


class JacobianCache:
    """A law's natural predictions and Jacobians at fixed inputs, by mode centre ``θ``.

    Between refits of a replay the modes keep their centres (only covariances and weights
    change, :func:`condition_on_mean`), so the predictions and Jacobians at every pool and
    target row are computed once per centre instead of at every step. Holds the last
    ``max_entries`` centres; a plain cache (mutable), not a result.
    """

    def __init__(self, law, X: np.ndarray, max_entries: int = 16) -> None:
        self.law, self.Z, self.max_entries = law, law.prepare(X), max_entries
        self._store: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Prediction ``(n,)`` and Jacobian ``(n, p)`` at every row, for internal ``θ``."""
        key = np.asarray(theta, dtype=np.float64).tobytes()
        if key not in self._store:
            if len(self._store) >= self.max_entries:
                self._store.pop(next(iter(self._store)))
            self._store[key] = jacobian(self.law, theta, self.Z)
        return self._store[key]


def cached_variance_scores(post: Posterior, pool: JacobianCache, rows: np.ndarray,
                           cost: np.ndarray, target: JacobianCache, total_cost: float,
                           gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """:func:`variance_scores` of the rows ``rows`` of ``pool`` (costs ``cost`` of those
    rows), with predictions and Jacobians from the caches; the same numbers."""
    mu_c, var_c, jac_c, mu_t, jac_t = [], [], [], [], []
    for mode in post.modes:
        mu, J = pool.get(mode.theta)
        Jr = J[rows]
        mu_c.append(mu[rows])
        jac_c.append(Jr)
        var_c.append(np.einsum("np,pq,nq->n", Jr, mode.cov, Jr))
        mt, Jt = target.get(mode.theta)
        mu_t.append(mt)
        jac_t.append(Jt)
    red = _reduction(post, np.array(mu_c), np.maximum(np.array(var_c), 0.0), jac_c,
                     np.array(mu_t), jac_t, True)
    return red / (np.asarray(cost, dtype=np.float64) / total_cost) ** gamma


def condition_on_mean(post: Posterior, x: np.ndarray, y: float | None = None) -> Posterior:
    """The posterior after observing one row ``x`` (k,) with response ``y`` (default: its
    predicted mixture mean): each mode's covariance gets the rank-one update (the mode's
    centre is kept), mode weights are multiplied by the likelihood of ``y`` under the mode
    (``N(y; μ_m, σ² + s_m²)``). Used to pick batches, and between refits of a replay."""
    Z = post.law.prepare(np.atleast_2d(x))
    mus, vs, modes = [], [], []
    for mode in post.modes:
        mu, J = jacobian(post.law, mode.theta, Z)
        j = J[0]
        sj = mode.cov @ j
        # a variance: rank-one downdates accumulated between refits can round it below 0,
        # which made log(σ² + s2) NaN; floored as in variance_scores
        s2 = max(float(j @ sj), 0.0)
        modes.append(replace(mode, cov=mode.cov - np.outer(sj, sj) / (post.sigma2 + s2)))
        mus.append(float(mu[0]))
        vs.append(post.sigma2 + s2)
    w = post.weights
    mus_a, vs_a = np.array(mus), np.array(vs)
    mean = float(w @ mus_a) if y is None else float(y)
    logl = -0.5 * (mean - mus_a) ** 2 / vs_a - 0.5 * np.log(vs_a)
    w2 = w * np.exp(logl - logl.max())
    w2 /= w2.sum()
    modes = [replace(m, weight=float(ww)) for m, ww in zip(modes, w2, strict=True)]
    return replace(post, modes=tuple(modes), n_obs=post.n_obs + 1)


def baseline_pick(method: str, cost: np.ndarray, candidates: np.ndarray,
                  rng: np.random.Generator) -> int:
    """One row index among ``candidates`` (indices into ``cost``) for a baseline:
    ``random`` (uniform), ``cheapest`` (lowest cost, first on ties), ``cost_weighted``
    (probability ∝ 1/cost)."""
    if candidates.size == 0:
        raise ValueError("no candidate row is left")
    if method == "random":
        return int(rng.choice(candidates))
    if method == "cheapest":
        return int(candidates[np.argmin(cost[candidates])])
    if method == "cost_weighted":
        p = 1.0 / cost[candidates]
        return int(rng.choice(candidates, p=p / p.sum()))
    raise ValueError(f"unknown baseline {method!r}; choose one of {BASELINES}")
