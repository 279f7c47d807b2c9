"""A posterior over the fits of a formula law that keeps several modes.

Multi-start fits of a scaling law often end in distinct local optima that predict the target
region differently. :func:`build_posterior` keeps every distinct optimum whose objective is
within ``rel_tol`` (default 1.5, as ScaleBench's MSPE) of the best one, and places a
Gauss–Newton (Laplace) Gaussian around each, in the law's internal parameters (logs of
positive-bounded ones):

* Jacobian ``J`` (n, p) of the natural prediction at the observed rows;
* noise ``σ² = (2·Var(y) + n·MSE_min/2) / (n/2 + 1)`` (``noise="design"``, ScaleBench's
  MSPE: a conjugate-style estimate shrunk toward the response's spread when n is small, which
  keeps an acquisition cautious; response units squared), or the residual variance
  ``σ² = SSE_min / (n − p)`` (``noise="residual"``, the textbook estimate used for reported
  intervals: the design estimate is 1.5–10× larger on ScaleBench's checkpoints and its 80 %
  intervals covered 94–99 % of the target rows; docs/scalebench.md);
* weak prior: independent ``N(θ̂, τ²)`` with ``τ`` = a quarter of each internal bound range;
* ``Σ = (JᵀJ/σ² + diag(τ⁻²))⁻¹``;
* mode weights ``∝ exp(−BIC/2)``, ``BIC = n·log(MSE) + p·log n``.

Optima are "distinct" when their predictions at the observed and target inputs differ by
more than ``1e-3·sd(y)`` somewhere. Predictions are a Gaussian mixture: mean ``Σ w μ_m``,
variance ``Σ w (s_m² + μ_m²) − mean²`` with within-mode ``s_m² = g Σ_m gᵀ`` (parameter
uncertainty of the law's mean; add ``σ²`` for a new observation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from scalebo.fitting.robust import FitResult
from scalebo.laws.formula import FormulaLaw

__all__ = ["Mode", "Posterior", "build_posterior", "jacobian"]


def jacobian(law: FormulaLaw, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Natural prediction ``(n,)`` and its Jacobian ``(n, p)`` w.r.t. internal parameters at
    one ``theta`` (p,), for prepared inputs ``Z`` (n, k); non-finite entries are set to 0."""
    theta = np.asarray(theta, dtype=np.float64)[None, :]
    n = Z.shape[0]
    if hasattr(law, "_evaluate"):  # partials broadcastable to (1, n): no n-fold repetition
        value, partials = law._evaluate(theta, Z)
        J = np.column_stack([np.broadcast_to(d, (1, n))[0] for d in partials])
    else:  # any law with a vjp: one-hot cotangents
        value, vjp = law.predict_natural_vjp(np.repeat(theta, n, 0), Z)
        J = vjp(np.eye(n))
    J = np.where(np.isfinite(J), J, 0.0)
    return value[0], J


@dataclass(frozen=True)
class Mode:
    """One local optimum and its Gaussian.

    Attributes:
        theta: internal parameters ``(p,)``.
        cov: covariance ``(p, p)`` of the internal parameters.
        sse: sum of squared natural residuals at the observed rows.
        bic: ``n·log(sse/n) + p·log n``.
        weight: normalized mode weight.
    """

    theta: np.ndarray
    cov: np.ndarray
    sse: float
    bic: float
    weight: float


@dataclass(frozen=True)
class Posterior:
    """A mixture of Gaussians over a law's internal parameters (see the module docstring).

    Attributes:
        law: the formula law.
        modes: the kept modes, best objective first.
        sigma2: observation noise variance (response units squared).
        n_obs: observations it is conditioned on.
        residual_sigma2: the fit's residual variance ``SSE_min/(n − p)`` (response units
            squared; kept through :func:`~scalebo.design.acquisition.condition_on_mean`),
            ``None`` when ``n ≤ p``; with ``noise="design"``, :attr:`noise_factor` compares
            ``sigma2`` to it.
    """

    law: FormulaLaw
    modes: tuple[Mode, ...]
    sigma2: float
    n_obs: int
    residual_sigma2: float | None = None

    @property
    def noise_factor(self) -> float | None:
        """``sqrt(sigma2 / residual_sigma2)``: how many times the posterior's noise sd is
        the fit's residual sd (1 for ``noise="residual"``; ScaleBench's ``"design"``
        estimate is shrunk toward the response's spread: no fixed range, 10–30× on a
        trial's noisy pool, huge when the fit passes through the runs),
        ``None`` without a residual (``n ≤ p``) or when it is 0."""
        if not self.residual_sigma2:
            return None
        return float(np.sqrt(self.sigma2 / self.residual_sigma2))

    @property
    def best(self) -> Mode:
        """The mode with the lowest objective."""
        return self.modes[0]

    def mode_moments(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Per mode at prepared inputs ``Z`` (n, k): means ``(M, n)``, within-mode variances
        ``(M, n)`` and Jacobians (each ``(n, p)``)."""
        means, vars_, jacs = [], [], []
        for m in self.modes:
            mu, J = jacobian(self.law, m.theta, Z)
            means.append(mu)
            vars_.append(np.einsum("np,pq,nq->n", J, m.cov, J))
            jacs.append(J)
        return np.array(means), np.maximum(np.array(vars_), 0.0), jacs

    @property
    def weights(self) -> np.ndarray:
        """Mode weights ``(M,)``, summing to 1."""
        return np.array([m.weight for m in self.modes])

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mixture mean and variance of the law's mean at inputs ``X`` (n, k), natural units."""
        mu, var, _ = self.mode_moments(self.law.prepare(X))
        w = self.weights[:, None]
        mean = (w * mu).sum(0)
        return mean, np.maximum((w * (var + mu**2)).sum(0) - mean**2, 0.0)

    def interval(self, X: np.ndarray, level: float = 0.8,
                 observation: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation central interval ``(lo, hi)`` at ``X`` for the law's mean, or
        for a new observation (``observation=True``: adds ``σ²``); ``level`` in (0, 1)."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        mean, var = self.predict(X)
        sd = np.sqrt(var + (self.sigma2 if observation else 0.0))
        z = norm.ppf(0.5 + level / 2)
        return mean - z * sd, mean + z * sd


def _distinct(preds: np.ndarray, tol: float) -> list[int]:
    """Indices of rows of ``preds`` (sorted best first) not within ``tol`` of a kept row."""
    kept: list[int] = []
    for i in range(preds.shape[0]):
        if not np.all(np.isfinite(preds[i])):
            continue
        if all(np.max(np.abs(preds[i] - preds[k])) > tol for k in kept):
            kept.append(i)
    return kept


def build_posterior(law: FormulaLaw, fit: FitResult, X: np.ndarray, y: np.ndarray, *,
                    X_target: np.ndarray | None = None, rel_tol: float = 1.5,
                    max_modes: int = 6, prior_fraction: float = 0.25,
                    noise: str = "design") -> Posterior:
    """The multi-mode posterior of a natural least-squares fit (module docstring).

    Args:
        law: the formula law that was fitted.
        fit: the :func:`~scalebo.fitting.formula_fit.fit_formula` result (``residuals=
            "natural"``); its ``converged_x`` / ``converged_fun`` are the candidate optima.
        X, y: the observed inputs ``(n, k)`` and responses ``(n,)`` it was fitted to.
        X_target: target inputs used (with ``X``) to tell optima apart.
        rel_tol: keep optima with objective ≤ ``rel_tol`` × the best.
        max_modes: at most this many modes (best objectives first).
        prior_fraction: prior sd as a fraction of each internal bound range.
        noise: ``"design"`` (ScaleBench's shrunk estimate, for acquisitions) or
            ``"residual"`` (``SSE_min/(n − p)``, for reported intervals); module docstring.
    """
    if noise not in ("design", "residual"):
        raise ValueError(f"noise must be 'design' or 'residual', got {noise!r}")
    Z = law.prepare(X)
    y = np.asarray(y, dtype=np.float64).ravel()
    n, p = y.shape[0], law.n_params
    cand_x = np.vstack([fit.x[None, :], np.atleast_2d(fit.converged_x)]) if len(
        fit.converged_x) else fit.x[None, :]
    Zall = Z if X_target is None else np.vstack([Z, law.prepare(X_target)])
    preds = law.predict_natural(cand_x, Zall)
    sse = ((preds[:, :n] - y[None, :]) ** 2).sum(1)
    order = np.argsort(np.where(np.isfinite(sse), sse, np.inf), kind="stable")
    cand_x, preds, sse = cand_x[order], preds[order], sse[order]
    best = sse[0]
    keep = np.flatnonzero(sse <= rel_tol * best + 1e-300)
    sd_y = float(np.std(y)) if n > 1 else 1.0
    chosen = keep[_distinct(preds[keep], 1e-3 * max(sd_y, 1e-12))][:max_modes]
    if chosen.size == 0:
        chosen = np.array([0])
    mse_min = max(best / n, 1e-300)
    var_y = float(np.var(y)) if n > 1 else 0.0
    sigma2 = (2 * var_y + n * mse_min / 2) / (n / 2 + 1) if noise == "design" else (
        best / max(n - p, 1))
    sigma2 = max(sigma2, 1e-12 * max(var_y, 1e-12))
    span = np.where(np.isfinite(law.upper - law.lower), law.upper - law.lower, 1e3)
    prior_prec = np.diag(1.0 / (prior_fraction * span) ** 2)
    modes, bics = [], []
    for i in chosen:
        _, J = jacobian(law, cand_x[i], Z)
        H = J.T @ J / sigma2 + prior_prec
        try:
            cov = np.linalg.inv(H)
        except np.linalg.LinAlgError:
            cov = np.linalg.pinv(H)
        cov = (cov + cov.T) / 2
        bic = n * np.log(max(sse[i] / n, 1e-300)) + p * np.log(max(n, 1))
        modes.append((cand_x[i].copy(), cov, float(sse[i])))
        bics.append(bic)
    b = np.array(bics)
    w = np.exp(-(b - b.min()) / 2)
    w /= w.sum()
    out = tuple(Mode(theta=t, cov=c, sse=s, bic=float(bb), weight=float(ww))
                for (t, c, s), bb, ww in zip(modes, b, w, strict=True))
    return Posterior(law=law, modes=out, sigma2=float(sigma2), n_obs=n,
                     residual_sigma2=float(best / (n - p)) if n > p else None)
