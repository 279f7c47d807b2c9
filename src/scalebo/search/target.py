"""Target-aware acquisition: expected shrinkage of the law's uncertainty at a target compute.

Users bet on the law's prediction at a target compute ``C*`` (e.g. 1e25 FLOPs). A candidate
run ``x`` is scored by how much observing it is expected to reduce the variance of
``g = log L̂(C*)`` (log of the law's predicted loss at ``C*``; log nats) under the law
posterior (:mod:`scalebo.search.law_posterior`), per unit cost. For jointly Gaussian
``(g, f_x)`` observing ``y_x = f_x + ε`` (``Var ε = r``) reduces ``Var(g)`` by

    ``VR(x) = Cov(g, f_x)² / (Var(f_x) + r)``                (log nats²),

and the score to maximize is ``log VR(x) − γ·log(cost(x)/C_total)`` (γ = 1: reduction per
FLOP; γ = 0: cost-blind). S joint samples of the *recorded* losses (latent + observation
noise: the value a run adds to the table) of the unobserved rows in scope, observed and
believed-pending rows fixed, give S tables; the law is fitted on each (one batched fit).
As the samples are of the recorded loss, ``r = 0``. Two estimators of ``Cov(g, f_x)``:

* ``"ensemble"`` (EnKF-style): sample covariances of ``g_s`` and ``f_{x,s}``. Measured: with
  S = 32 the argmax over ~10³ candidates is dominated by spurious sample correlations and
  the heavy tails of ``g_s`` (StepLaw, seed 0: 70 / 11 / 35 % error at 1 / 5 / 10 % budget
  with γ = 1, vs EI 8 / 1.4 / 0 %).
* ``"stein"`` (default): Stein's lemma, ``Cov(g, f_x) = Σ_j E[∂g/∂f_j]·Cov(f_j, f_x)`` for
  jointly Gaussian ``f``: the expected sensitivities ``w = E_s[∂g_s/∂f]`` come from the S fits
  (implicit function theorem, :func:`stein_weights`; non-zero only on envelope rows) and
  the covariances are the GP's exact posterior ones, so candidates unrelated to the
  frontier get no spurious credit. Compute law only, and a surrogate exposing
  ``posterior_cov`` (directly or inside its wrappers); otherwise the ensemble estimate.

Both are stored as anomalies ``A`` (rows: ensemble members) whose covariance ``AᵀA/(S−1)``
is that of ``(g, f)`` (Stein: ``A = √(u−1)·[Lᵀw, Lᵀ]`` with ``LLᵀ`` the covariance of the
``u`` unobserved rows, i.e. of ``(wᵀf, f)``). After a pick (or any new observation) they
get a deterministic square-root (serial EnSRF, Whitaker & Hamill 2002) update, which makes
their covariance exactly the Gaussian conditional one; it does not depend on the observed
value, and the score needs only covariances, so the next pick of a batch accounts for the
first and an ensemble may be reused over ``every`` asks. Failed fits are dropped (never
NaN); with too few successes :func:`build_ensemble` returns the reason instead and the
loop uses EI for that ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scalebo.errors import SearchError
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA
from scalebo.search.acquisition import cost_weighted
from scalebo.search.fantasize import _scope_mask
from scalebo.search.grid import Grid
from scalebo.search.law_frontiers import envelope_masks
from scalebo.search.law_posterior import LAW_NAMES, _one_law
from scalebo.search.target_draws import joint_draws

__all__ = ["ESTIMATORS", "MIN_OK", "TargetEnsemble", "TargetSettings", "build_ensemble",
           "candidate_scores", "refresh_ensemble", "sqrt_update", "stein_weights",
           "target_score", "variance_reduction"]

#: Fewest successful sample fits for an ensemble: ``max(MIN_OK[0], ceil(MIN_OK[1]·S))``.
MIN_OK: tuple[int, float] = (8, 0.25)
#: Variance reductions are floored at this (log nats²) so that scores stay finite.
VR_FLOOR = 1e-300
#: Estimators of ``Cov(g, f_x)``.
ESTIMATORS = ("stein", "ensemble")


@dataclass(frozen=True)
class TargetSettings:
    """Settings of the target-aware acquisition.

    Attributes:
        compute: Target compute ``C*``, FLOPs. law: ``"compute"`` (L(C) on the envelope) or
            ``"chinchilla"`` (L(N, D) on the cell bests, along its compute-optimal path).
        cost_power: γ ≥ 0 of ``log VR − γ·log(cost/C_total)``.
        samples: Ensemble size S (≥ :data:`MIN_OK` [0]). every: Rebuild every this many asks.
        estimator: ``"stein"`` (exact GP covariances with the expected sensitivities, see
            the module docstring; compute law and a surrogate exposing ``posterior_cov``
            only, else ``"ensemble"``) or ``"ensemble"`` (sample covariances).
        starts: Starts per sample fit (the point fit's best distinct optima).
    """

    compute: float = 1e25
    law: str = "compute"
    cost_power: float = 0.5
    samples: int = 32
    every: int = 1
    estimator: str = "stein"
    starts: int = 4

    def __post_init__(self) -> None:
        if self.law not in LAW_NAMES or self.estimator not in ESTIMATORS:
            raise SearchError(f"target law must be one of {list(LAW_NAMES)} and estimator one "
                              f"of {ESTIMATORS}; got {self.law!r}, {self.estimator!r}.")
        if not (np.isfinite(self.compute) and self.compute > 0):
            raise SearchError(f"target compute must be finite FLOPs > 0, got {self.compute}.")
        if not (np.isfinite(self.cost_power) and self.cost_power >= 0):
            raise SearchError(f"cost_power must be finite and >= 0, got {self.cost_power}.")
        if self.samples < MIN_OK[0] or self.every < 1 or self.starts < 1:
            raise SearchError(f"target needs samples >= {MIN_OK[0]}, every >= 1 ask and "
                              f"starts >= 1; got {self.samples}, {self.every}, {self.starts}.")


def _anomalies(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a - a.mean(axis=0, keepdims=True)


def variance_reduction(target: np.ndarray, losses: np.ndarray,
                       noise_var: float | np.ndarray = 0.0) -> np.ndarray:
    """Expected reduction of ``Var(g)`` if each column of ``losses`` were observed, ``(n,)``.

    ``Cov(g, f_x)² / (Var(f_x) + noise_var)`` with ensemble (``S − 1``) covariances.

    Args:
        target: Samples (or anomalies) of the target ``g``, ``(S,)`` (e.g. log nats).
        losses: Samples (or anomalies) of the candidates' losses, ``(S, n)`` (nats).
        noise_var: Observation noise variance ``r`` (nats²) added to ``Var(f_x)``; 0 when
            ``losses`` are samples of the recorded loss itself.

    Returns:
        Units of ``g²``; 0 where ``Var(f_x) + r`` is 0 (the observation carries nothing).
    """
    g = _anomalies(target).ravel()
    F = _anomalies(np.atleast_2d(losses))
    S = g.size
    if F.shape[0] != S or S < 2:
        raise SearchError(f"variance_reduction needs S >= 2 samples of g and of the losses; "
                          f"got {S} and {F.shape}.")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(F))):
        raise SearchError("Ensemble samples must be finite (drop failed fits first).")
    noise = np.asarray(noise_var, dtype=np.float64)
    if np.any(noise < 0) or not np.all(np.isfinite(noise)):
        raise SearchError(f"noise_var must be finite and >= 0, got {noise_var}.")
    cov = g @ F / (S - 1)
    den = np.einsum("ij,ij->j", F, F) / (S - 1) + noise
    out = np.zeros(F.shape[1])
    ok = den > 0
    out[ok] = cov[ok] ** 2 / den[ok]
    return out


def target_score(vr: np.ndarray, cost: np.ndarray, C_total: float,
                 gamma: float) -> np.ndarray:
    """``log max(VR, VR_FLOOR) − γ·log(cost/C_total)`` to maximize, ``(n,)``.

    Args:
        vr: Variance reductions (:func:`variance_reduction`), ``(n,)``.
        cost: Candidates' costs, FLOPs, ``(n,)``, > 0. C_total: The grid's total, FLOPs.
        gamma: Cost exponent ≥ 0 (1: reduction per FLOP).
    """
    vr, cost = np.asarray(vr, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    if not (np.isfinite(gamma) and gamma >= 0):
        raise SearchError(f"The cost exponent gamma must be finite and >= 0, got {gamma}.")
    if np.any(~np.isfinite(vr) | (vr < 0)) or np.any(~np.isfinite(cost) | (cost <= 0)):
        raise SearchError("Variance reductions must be finite and >= 0, costs finite and > 0.")
    return cost_weighted(np.log(np.maximum(vr, VR_FLOOR)), cost, C_total, gamma)


def sqrt_update(anomalies: np.ndarray, j: int, noise_var: float = 0.0) -> np.ndarray:
    """Square-root (EnSRF) update of ensemble anomalies ``(S, p)`` for observing column ``j``.

    With ``a = A[:, j]``, ``P_jj = aᵀa/(S−1)``, gain ``K = Aᵀa/(S−1)/(P_jj + r)`` and
    ``α = 1/(1 + √(r/(P_jj + r)))``, returns ``A − α·a·Kᵀ``, whose covariance is exactly
    ``P − K·P_j·`` (the Gaussian conditional covariance of the prior ensemble covariance);
    with ``r = 0`` column ``j`` becomes 0. Deterministic; the observed value is not needed.
    """
    A = np.asarray(anomalies, dtype=np.float64)
    S = A.shape[0]
    a = A[:, j]
    pjj = float(a @ a) / (S - 1)
    if pjj + noise_var <= 0:
        return A.copy()
    gain = (A.T @ a) / (S - 1) / (pjj + noise_var)
    alpha = 1.0 / (1.0 + np.sqrt(noise_var / (pjj + noise_var)))
    return A - alpha * np.outer(a, gain)


@dataclass(frozen=True, eq=False)
class TargetEnsemble:
    """Anomalies of the target and of the scope's losses, updated as runs are observed.

    Attributes:
        rows: Grid rows in scope, increasing, ``(m,)``.
        anomalies: ``(S_ok, 1 + m)``: column 0 the target ``g`` (log nats), then the recorded
            losses at ``rows`` (nats); successful samples only.
        cap: Scope cap, FLOPs (``inf``: the whole grid).
        target_var: ``Var(g)`` when built (log nats²). n_samples: S drawn. n_failed: failed fits.
        known: Rows whose observation the anomalies already account for.
        age: Asks since the ensemble was built.
    """

    rows: np.ndarray
    anomalies: np.ndarray
    cap: float
    target_var: float
    n_samples: int
    n_failed: int
    known: frozenset[int] = frozenset()
    age: int = 0

    def aged(self) -> TargetEnsemble:
        """A copy one ask older."""
        return replace(self, age=self.age + 1)

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """Anomaly columns of grid rows ``idx`` (which must be in scope), ``(k,)``."""
        idx = np.asarray(idx, dtype=np.int64)
        pos = np.searchsorted(self.rows, idx)
        if np.any(pos >= self.rows.size) or np.any(self.rows[np.minimum(pos, self.rows.size - 1)]
                                                   != idx):
            raise SearchError("Rows outside the ensemble's scope; rebuild the ensemble.")
        return pos + 1

    def variance_reduction(self, idx: np.ndarray, noise_var: float = 0.0) -> np.ndarray:
        """:func:`variance_reduction` of ``g`` for grid rows ``idx``, ``(k,)``, log nats²."""
        A = self.anomalies
        return variance_reduction(A[:, 0], A[:, self.columns(idx)], noise_var)

    @property
    def current_var(self) -> float:
        """``Var(g)`` after the updates so far, log nats²."""
        g = self.anomalies[:, 0]
        return float(g @ g) / (g.size - 1)

    def observe(self, idx: Iterable[int], noise_var: float = 0.0) -> TargetEnsemble:
        """Account for observations at grid rows ``idx`` (rows out of scope or already known
        are skipped): one :func:`sqrt_update` each."""
        A, known = self.anomalies, set(self.known)
        in_scope = set(self.rows.tolist())
        for i in idx:
            i = int(i)
            if i in known or i not in in_scope:
                continue
            A = sqrt_update(A, int(self.columns(np.array([i]))[0]), noise_var)
            known.add(i)
        return replace(self, anomalies=A, known=frozenset(known))


def build_ensemble(grid: Grid, model: Any, rows: np.ndarray, fixed: dict[int, float],
                   mu: float, sd: float, settings: TargetSettings, cap: float,
                   rng: np.random.Generator) -> TargetEnsemble | str:
    """Sample the scope, fit the law on each sample and return the ensemble (or why not).

    Args:
        grid: The grid. model: Surrogate fitted on standardized losses (``(y − mu)/sd``) with
            ``predict`` and ``sample_joint(X, n, rng, include_noise=True)``; not modified.
        rows: Scope rows, increasing, not held out, ``(m,)``.
        fixed: Grid row → known loss (nats): observed rows and believed pending ones.
        mu, sd: The model's standardization (nats). settings: Target, law, S, estimator.
        cap: Scope cap (FLOPs), recorded. rng: Generator of the samples.

    Returns:
        The ensemble, or a reason string when fewer than :data:`MIN_OK` fits succeeded or
        the target does not vary.
    """
    rows, S = np.asarray(rows, dtype=np.int64), settings.samples
    is_fixed = np.array([int(r) in fixed for r in rows], dtype=bool)
    mean = np.array([fixed.get(int(r), 0.0) for r in rows], dtype=np.float64)
    draws = np.tile(mean, (S, 1))
    todo = np.flatnonzero(~is_fixed)
    X = grid.encode()[rows[todo]]
    if todo.size and not hasattr(model, "sample_joint"):
        return "the surrogate has no sample_joint (joint posterior samples)"
    stein = settings.estimator == "stein" and settings.law == "compute" and todo.size > 1
    L = None
    if todo.size:
        m, _ = model.predict(X)
        mean[todo] = np.asarray(m, dtype=np.float64) * sd + mu
        z, L = joint_draws(model, X, S, rng, with_factor=stein)  # one factor for both uses
        draws[:, todo] = z * sd + mu
    if not np.all(np.isfinite(mean) & (mean > 0)):
        return "non-finite or non-positive posterior means"
    # A sample with a non-finite or non-positive loss cannot be fitted in log space: it fails.
    usable = np.flatnonzero(np.all(np.isfinite(draws) & (draws > 0), axis=1))
    need = max(MIN_OK[0], int(np.ceil(MIN_OK[1] * S)))
    if usable.size < need:
        return f"only {usable.size} of {S} samples have positive losses (need {need})"
    post = _one_law(settings.law, grid, rows, mean, draws[usable],
                    np.array([settings.compute]), settings.starts, 0.0)
    good = post.predicted_loss[:, 0] > 0  # log of a prediction ≤ 0 is undefined: failed
    if good.sum() < need:
        return (f"only {int(good.sum())} of {S} law fits succeeded (need {need})"
                + (f": {post.message}" if post.message else ""))
    F = draws[usable[post.sample_index[good]]]
    if L is not None:  # the samples' own factor, in the model's units: × sd for nats
        w = stein_weights(grid.cost[rows], F, post.thetas()[good], settings.compute)
        B = np.zeros((todo.size, rows.size))
        B[:, todo] = np.sqrt(todo.size - 1) * sd * L.T  # Bᵀ B / (u − 1) = the covariance
        A = np.column_stack([B @ w, B])
    else:
        A = _anomalies(np.column_stack([np.log(post.predicted_loss[good, 0]), F]))
    var = float(A[:, 0] @ A[:, 0]) / (A.shape[0] - 1)
    if not var > 0:
        return f"the target does not vary over the {int(good.sum())} successful law fits"
    return TargetEnsemble(rows=rows, anomalies=A, cap=float(cap), target_var=var,
                          n_samples=S, n_failed=int(S - good.sum()),
                          known=frozenset(int(r) for r in rows[is_fixed]))


def stein_weights(cost: np.ndarray, draws: np.ndarray, thetas: np.ndarray, target: float,
                  delta: float = DEFAULT_HUBER_DELTA) -> np.ndarray:
    """Expected sensitivity ``w_j = E_s[∂g_s/∂f_j]`` of the compute law's log prediction at
    ``target`` FLOPs to each row's loss, ``(m,)`` (1/nats), averaged over the samples.

    In sample ``s`` only the envelope rows whose log residual is within the Huber ``delta``
    move the fit (beyond it a residual weighs only through its sign): by the implicit function
    theorem with the Gauss-Newton Hessian ``H = J_inᵀJ_in`` over the free (not at a bound)
    parameters, ``∂g/∂log y_i = J_iᵀ H⁺ J_*``, and ``∂g/∂f_i`` divides by ``y_i``.

    Args:
        cost: Rows' costs, FLOPs, ``(m,)``. draws: Sample losses, nats, ``(S, m)``.
        thetas: Each sample's fitted internal parameters, ``(S, p)``.
        target: Target compute, FLOPs. delta: Huber δ of the fits (log residual).
    """
    law = LAW_NAMES["compute"]
    masks = envelope_masks(cost, draws)
    w = np.zeros(cost.size)
    z_star = law.prepare(np.array([[float(target)]]))
    for s, theta in enumerate(np.asarray(thetas, dtype=np.float64)):
        env = np.flatnonzero(masks[s])
        y = draws[s, env]
        logp, vjp = law.log_predict_vjp(np.tile(theta, (env.size, 1)),
                                        law.prepare(cost[env][:, None]))
        inside = np.abs(logp[0] - np.log(y)) <= delta
        free = (theta > law.lower + 1e-9) & (theta < law.upper - 1e-9)
        if not inside.any() or not free.any():
            continue
        J = vjp(np.eye(env.size))[inside][:, free]  # (n_in, p_free): ∂ log L̂(C_i)/∂θ
        j_star = law.log_predict_vjp(theta[None, :], z_star)[1](np.ones((1, 1)))[0][free]
        beta = J @ (np.linalg.pinv(J.T @ J) @ j_star)
        w[env[inside]] += beta / y[inside]
    return w / max(len(thetas), 1)


def refresh_ensemble(ens: TargetEnsemble | None, settings: TargetSettings, grid: Grid,
                     cap: float, known: np.ndarray, model: Any, observed: dict[int, float],
                     believed: dict[int, float], mu: float, sd: float,
                     rng: np.random.Generator, failed: np.ndarray | None = None
                     ) -> tuple[TargetEnsemble | None, str]:
    """Keep or rebuild the ensemble for the scope under ``cap``: ``(ensemble, '')`` or
    ``(None, why)``.

    The scope is every acquirable row costing ≤ ``cap`` FLOPs plus the ``known`` (observed or
    pending, ``(n_cfg,)`` bool) ones; ``inf``: the whole grid. ``ens`` is kept, square-root
    updated for the known rows it has not seen, while it is younger than ``settings.every``
    asks and covers the scope; otherwise a new one is built (:func:`build_ensemble`, from
    ``model``, ``mu``, ``sd``, ``rng``) with the ``observed`` losses (row → nats) and the
    ``believed`` pending ones (row → standardized units) fixed. Depends on the total budget
    only through ``cap``. ``failed`` (``(n_cfg,)`` bool): rows of failed runs, never in scope
    (the surrogate never saw them; drawn, they would enter the law fits as trained).
    """
    scope = np.flatnonzero(_scope_mask(grid, known, "window", cap,
                                       None if failed is None else np.flatnonzero(failed)))
    if ens is not None and ens.age < settings.every and np.isin(scope, ens.rows).all():
        return ens.observe(np.flatnonzero(known)), ""
    fixed = dict(observed)
    fixed.update((int(i), float(v) * sd + mu) for i, v in believed.items())
    try:
        built = build_ensemble(grid, model, scope, fixed, mu, sd, settings, cap, rng)
    except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
        built = f"ensemble failed: {exc}"
    return (built, "") if isinstance(built, TargetEnsemble) else (None, built)


def candidate_scores(ens: TargetEnsemble | None, why: str, settings: TargetSettings,
                     grid: Grid, cand: np.ndarray) -> tuple[np.ndarray | None, str]:
    """Scores ``(n_cand,)`` of grid rows ``cand`` and a reason's prefix, or ``(None, prefix)``
    when EI must stand in (no ensemble — ``why`` says why — or no candidate covaries with the
    target)."""
    if ens is None:
        return None, f"target fallback to EI ({why}): "
    vr = ens.variance_reduction(cand)
    if not np.any(vr > 0):
        return None, "target fallback to EI (no candidate covaries with the target): "
    s = target_score(vr, grid.cost[cand], grid.C_total, settings.cost_power)
    return s, (f"{settings.estimator} estimate from {ens.n_samples - ens.n_failed}/"
               f"{ens.n_samples} law fits, sd of log L({settings.compute:.3g}) "
               f"{np.sqrt(ens.current_var):.3g}; max target score")
