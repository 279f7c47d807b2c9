"""Compute-optimal allocation: Chinchilla approaches 1, 2 and 3.

Conventions: compute ``C`` in FLOPs with ``C = 6·N·D``; ``N`` parameters; ``D`` tokens; loss in
nats. Allocation laws are power laws ``N*(C) = G_N · C^a`` and ``D*(C) = G_D · C^b`` fitted by
ordinary least squares in log–log space (natural logs).

* Approach 1 (Hoffmann et al. 2022, §3.1): for each compute level take the run on the
  best-loss frontier, then regress ``log N`` and ``log D`` on ``log C`` over those runs.
* Approach 2 (§3.2): for each isoFLOP budget fit a parabola of loss in ``log N``; its vertex
  is ``N*(C)``, ``D*(C) = C / (k N*)`` with ``k = 6`` (or the budget's median C/(N·D) when the
  runs have ``C`` and ``D``: a table whose C counts FLOPs otherwise); then regress as in
  approach 1.
* Approach 3 (§3.3): fit ``L(N, D) = E + A/N^α + B/D^β`` and minimize it under ``6ND = C``:
  ``N* = G (C/6)^{β/(α+β)}``, ``D* = G^{-1} (C/6)^{α/(α+β)}``, ``G = (αA / (βB))^{1/(α+β)}``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scalebo.errors import FitError
from scalebo.fitting.robust import FitResult
from scalebo.laws import PowerLawSum


@dataclass(frozen=True)
class PowerFit:
    """``y = coef · x^exponent`` fitted in log–log space by least squares.

    Attributes:
        coef: multiplicative coefficient (units of y per unit x^exponent).
        exponent: power.
        r2: coefficient of determination in log space.
        n: points used.
    """

    coef: float
    exponent: float
    r2: float
    n: int

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        return self.coef * np.asarray(x, dtype=np.float64) ** self.exponent


def fit_power(x: np.ndarray, y: np.ndarray) -> PowerFit:
    """Least-squares line through ``(log x, log y)``; needs ≥ 2 distinct positive x."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.unique(x).size < 2:
        raise FitError(f"a power-law fit needs ≥ 2 distinct x values, got {np.unique(x).size}")
    if np.any(~(x > 0)) or np.any(~(y > 0)):
        raise FitError("a power-law fit needs positive x and y")
    lx, ly = np.log(x), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (intercept + slope * lx)
    ss_tot = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    return PowerFit(coef=float(np.exp(intercept)), exponent=float(slope), r2=r2, n=x.size)


@dataclass(frozen=True)
class AllocationLaw:
    """Compute-optimal allocation ``N*(C)``, ``D*(C)`` (C in FLOPs).

    Attributes:
        n_opt: power fit of the optimal parameter count against C.
        d_opt: power fit of the optimal token count against C.
        method: ``"approach1"``, ``"approach2"`` or ``"approach3"``.
        points: the (C, N*, D*) points the fits were made on (empty for approach 3).
        profiles: approach 2's runs on the budgets whose parabola was fitted (``C``: the
            budget in FLOPs, ``N``, ``loss`` in nats); empty for approaches 1 and 3.
    """

    n_opt: PowerFit
    d_opt: PowerFit
    method: str
    points: pd.DataFrame
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def at(self, C: float | np.ndarray) -> dict[str, np.ndarray | float]:
        """N*, D* and tokens per parameter at compute ``C`` (FLOPs)."""
        N = self.n_opt(C)
        D = self.d_opt(C)
        return {"C": C, "N_opt": N, "D_opt": D, "tokens_per_param": D / N}


def approach1(frontier: pd.DataFrame) -> AllocationLaw:
    """Approach 1 on frontier runs (columns ``C``, ``N``, ``D``; one row per compute level)."""
    for col in ("C", "N", "D"):
        if col not in frontier.columns:
            raise ValueError(f"approach 1 needs column {col!r}; got {list(frontier.columns)}")
    pts = frontier[["C", "N", "D"]].astype(float).sort_values("C").reset_index(drop=True)
    return AllocationLaw(
        n_opt=fit_power(pts["C"], pts["N"]),
        d_opt=fit_power(pts["C"], pts["D"]),
        method="approach1",
        points=pts.rename(columns={"N": "N_opt", "D": "D_opt"}),
    )


#: Points at the smallest or largest model size that make approach 1 warn: at least this
#: many and this share of them.
EDGE_MIN_POINTS, EDGE_MIN_SHARE = 3, 0.2
#: ... and their removal moves the exponent by at least this much (when it can be refitted).
EDGE_MIN_SHIFT = 0.02


def edge_note(points: pd.DataFrame, N_min: float, N_max: float,
              what: str = "envelope", resource: str = "C") -> str | None:
    """A note when many of approach 1's ``points`` (columns ``C``, ``N``) are runs of the
    table's smallest (``N_min``) or largest (``N_max``) model: there the compute-optimal size
    lies outside the sizes trained, so those points hold N* at the edge and bend its fitted
    slope (a trial's hull: 31 of 92 points of the smallest model, exponent 0.402 against a
    true 0.469; 0.473 without them). The note gives the exponent without the edge points when
    ≥ 3 distinct sizes remain (``resource`` names the axis ``C`` stands for, e.g. ``R`` for
    GPU-hours); None when no edge holds enough points or leaving them out moves
    the exponent by less than :data:`EDGE_MIN_SHIFT`."""
    N = points["N"].to_numpy(dtype=np.float64)
    edges = {"smallest": np.isclose(N, N_min, rtol=1e-9),
             "largest": np.isclose(N, N_max, rtol=1e-9)}
    heavy = {k: int(m.sum()) for k, m in edges.items()
             if m.sum() >= EDGE_MIN_POINTS and m.mean() >= EDGE_MIN_SHARE}
    if not heavy:
        return None
    inner = ~np.logical_or.reduce([edges[k] for k in heavy])
    told = "; ".join(f"{n} of the {N.size} {what} points are runs of the {k} model "
                     f"(N = {N_min if k == 'smallest' else N_max:.3g})" for k, n in heavy.items())
    without = ""
    if np.unique(N[inner]).size >= 3:
        C = points["C"].to_numpy(dtype=np.float64)
        a_in, a_all = fit_power(C[inner], N[inner]).exponent, fit_power(C, N).exponent
        if abs(a_in - a_all) < EDGE_MIN_SHIFT:
            return None
        without = (f"; without them N* grows as {resource}^{a_in:.3f} (with them "
                   f"{resource}^{a_all:.3f})")
    return (f"{told}: there the compute-optimal size lies beyond the sizes trained, so these "
            f"points hold N* at the edge and bend its slope{without}; train sizes beyond the "
            "edge to pin it down")


def isoflop_parabola(N: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Least-squares ``(a, b, c)`` of ``loss = a (ln N)² + b ln N + c`` (loss in nats)."""
    lN = np.log(np.asarray(N, dtype=np.float64))
    return np.polyfit(lN, np.asarray(loss, dtype=np.float64), 2)


def isoflop_minimum(N: np.ndarray, loss: np.ndarray) -> tuple[float, float, bool]:
    """Vertex of the parabola ``loss = a (log N)² + b log N + c`` (:func:`isoflop_parabola`).

    Returns ``(N*, loss at N*, inside)`` where ``inside`` says whether the vertex lies within
    the sampled range of N (an extrapolated vertex is less trustworthy).
    """
    lN = np.log(np.asarray(N, dtype=np.float64))
    a, b, c = isoflop_parabola(N, loss)
    if not a > 0:
        raise FitError("isoFLOP parabola opens downwards: no minimum in log N")
    x = -b / (2 * a)
    return float(np.exp(x)), float(a * x * x + b * x + c), bool(lN.min() <= x <= lN.max())


def approach2(
    runs: pd.DataFrame, *, budget: str = "flops_budget", min_points: int = 3
) -> AllocationLaw:
    """Approach 2 from isoFLOP runs: columns ``N``, ``loss`` and a budget column (FLOPs); with
    ``C`` and ``D`` columns, ``D*`` uses their FLOPs per parameter-token (module docstring).

    Budgets with fewer than ``min_points`` models or a parabola without a minimum are skipped
    and listed in ``points`` with ``used = False`` (never silently dropped).
    """
    for col in ("N", "loss", budget):
        if col not in runs.columns:
            raise ValueError(f"approach 2 needs column {col!r}; got {list(runs.columns)}")
    rows, fitted = [], []
    for C, grp in runs.groupby(budget, sort=True):
        rec = {"C": float(C), "n_models": len(grp), "used": False, "reason": ""}
        if grp["N"].nunique() < min_points:
            rec["reason"] = f"only {grp['N'].nunique()} distinct N (< {min_points})"
        else:
            try:
                n_star, l_star, inside = isoflop_minimum(grp["N"], grp["loss"])
                # FLOPs per parameter per token: 6, unless the table's C says otherwise
                k = (float(np.median(grp["C"] / (grp["N"] * grp["D"])))
                     if {"C", "D"} <= set(grp.columns) else 6.0)
                rec.update(N_opt=n_star, D_opt=float(C) / (k * n_star), loss_opt=l_star,
                           vertex_inside=inside, used=True)
                fitted.append(pd.DataFrame({"C": float(C), "N": grp["N"].to_numpy(float),
                                            "loss": grp["loss"].to_numpy(float)}))
            except FitError as exc:
                rec["reason"] = str(exc)
        rows.append(rec)
    pts = pd.DataFrame(rows)
    used = pts[pts["used"]]
    if len(used) < 2:
        raise FitError(f"approach 2 needs ≥ 2 usable isoFLOP budgets, got {len(used)}")
    return AllocationLaw(
        n_opt=fit_power(used["C"], used["N_opt"]),
        d_opt=fit_power(used["C"], used["D_opt"]),
        method="approach2",
        points=pts,
        profiles=pd.concat(fitted, ignore_index=True),
    )


def _chinchilla_terms(fit: FitResult) -> tuple[float, float, float, float, float]:
    law = fit.law
    if not isinstance(law, PowerLawSum) or law.variables != ("N", "D"):
        raise ValueError(f"the compute-optimal allocation (Chinchilla's approach 3) needs a fit "
                         f"of L(N, D) = E + A/N^alpha + B/D^beta (get_law('chinchilla')); got "
                         f"the law {law.name!r} in {law.variables}")
    p = law.natural(fit.x)
    (tn, td) = law.terms
    return p["E"], p[tn.coef], p[tn.exponent], p[td.coef], p[td.exponent]


def optimum_logs(A: float, alpha: float, B: float, beta: float, k: float = 6.0
                 ) -> tuple[float, float, float, float]:
    """``(ln G_N, a, ln G_D, b)`` of the optimum of ``E + A/N^α + B/D^β`` under ``k·N·D = C``:
    ``N* = G_N·C^a``, ``D* = G_D·C^b`` (C in FLOPs).

    Raises:
        FitError: an exponent or coefficient that is not positive, or coefficients out of
            float range.
    """
    if not (alpha > 0 and beta > 0):
        raise FitError(f"approach 3 needs positive exponents, got alpha={alpha}, beta={beta}")
    if not (A > 0 and B > 0) or not (alpha * A > 0 and beta * B > 0):  # not underflowed
        raise FitError(f"approach 3 needs positive coefficients, got A={A}, B={B}")
    # G = (alpha A / (beta B))^(1/(alpha+beta)), in logs: with small exponents it can
    # under- or overflow a float (a 1/G then divides by zero).
    log_G = (math.log(alpha * A) - math.log(beta * B)) / (alpha + beta)
    a = beta / (alpha + beta)
    b = alpha / (alpha + beta)
    # N* = G (C/k)^a = (G k^-a) C^a ; D* = G^-1 (C/k)^b.
    log_k = math.log(k)
    log_coefs = (log_G - a * log_k, -b * log_k - log_G)
    if not all(-700.0 < c < 700.0 for c in log_coefs):
        raise FitError(f"approach 3 has no finite compute-optimal path: the optimum's "
                       f"coefficient G = exp({log_G:.4g}) is out of float range (alpha={alpha:.4g},"
                       f" beta={beta:.4g}, A={A:.4g}, B={B:.4g})")
    return log_coefs[0], a, log_coefs[1], b


def approach3(fit: FitResult, k: float = 6.0) -> AllocationLaw:
    """Approach 3: the closed-form optimum of a fitted ``L(N, D)`` under ``C = k·N·D``
    (:func:`optimum_logs`; ``k`` = 6 unless a table counts its FLOPs otherwise)."""
    _, A, alpha, B, beta = _chinchilla_terms(fit)
    log_n, a, log_d, b = optimum_logs(A, alpha, B, beta, k)
    n_opt = PowerFit(coef=math.exp(log_n), exponent=a, r2=1.0, n=0)
    d_opt = PowerFit(coef=math.exp(log_d), exponent=b, r2=1.0, n=0)
    return AllocationLaw(n_opt=n_opt, d_opt=d_opt, method="approach3", points=pd.DataFrame())


@dataclass(frozen=True)
class ComputeOptimal:
    """The compute-optimal point of a fitted ``L(N, D)`` at compute ``C`` (FLOPs)."""

    C: float
    N_opt: float
    D_opt: float
    tokens_per_param: float
    loss: float


def compute_optimal(fit: FitResult, C: float, *, warn: bool = True) -> ComputeOptimal:
    """N*, D*, D*/N* and the predicted loss at compute ``C`` (FLOPs) for a fitted L(N, D).

    A fit that is not usable (``fit.success`` False: unidentified, not converged) gives its
    numbers with a UserWarning saying so (``warn=False``: the caller reports the status).

    Raises:
        ValueError: ``C`` not a finite number > 0, or ``fit`` not of L(N, D).
    """
    if not (np.ndim(C) == 0 and np.isfinite(C) and C > 0):
        raise ValueError(f"C must be one compute in FLOPs, finite and > 0; got {C!r}")
    if warn and not fit.success:
        warnings.warn(f"the fit is {fit.status}: its compute-optimal N*, D* at C = {C:.3g} "
                      f"FLOPs are not to be trusted ({fit.message})", UserWarning, stacklevel=2)
    alloc = approach3(fit).at(C)
    N, D = float(alloc["N_opt"]), float(alloc["D_opt"])
    loss = float(fit.predict(np.array([[N, D]]))[0])
    return ComputeOptimal(C=float(C), N_opt=N, D_opt=D, tokens_per_param=D / N, loss=loss)


def compute_law_from_chinchilla(fit: FitResult, C: np.ndarray) -> np.ndarray:
    """Loss along the compute-optimal path, ``L(N*(C), D*(C))``, for an array of C (FLOPs)."""
    alloc = approach3(fit).at(np.asarray(C, dtype=np.float64))
    X = np.column_stack([np.atleast_1d(alloc["N_opt"]), np.atleast_1d(alloc["D_opt"])])
    return fit.predict(X)


def predict_compute(law: str, fit: FitResult, C: np.ndarray) -> np.ndarray:
    """A law's loss (nats) at computes ``C`` (FLOPs): ``law="compute"`` is ``L(C)`` itself;
    any other (``"chinchilla"``) is ``L(N*, D*)`` along the compute-optimal path (raises
    FitError without one, e.g. an exponent at 0)."""
    if law == "compute":
        return fit.predict(np.asarray(C, dtype=np.float64)[:, None])
    return compute_law_from_chinchilla(fit, np.asarray(C, dtype=np.float64))
