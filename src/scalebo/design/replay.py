"""Replay a design on a pool whose responses are known (ScaleBench's protocol).

Protocol (Li et al. 2026, "Spend Less, Fit Better"; ``$SCALEBO_DATA_DIR/scalebench/SOURCE.md``):

* budgets are fractions ``b`` of ``C = Σ cost`` over the pool; the checkpoints lie on one
  sequential run up to the largest budget (the 5 % design extends the 1 % one);
* design methods (``variance``) start with a deterministic pilot of the cheapest rows: up to
  ``⌊2.5·p⌋`` rows while their total cost stays ≤ 2 % of C; baselines start with none;
* then one row at a time, the best-scoring (or baseline-drawn) row among those that still
  fit the final budget, until none fits;
* at checkpoint ``b`` the reported fit is on the rows observed before the spend first
  went past ``b·C`` (so the spent fraction is ≤ b; a row that brings it to exactly ``b·C``,
  to rounding, is inside, as the design buys a row that fits the budget exactly, and at
  ``b = 1`` the whole pool is): natural-space least squares inside the bounds, 64 seeded
  random starts, the best of them;
* score: R² on the target region, clipped to [−1, 1]; −1 for a failed or non-finite fit.

Refits during the design (the expensive part): the law is refitted whenever the observed
set has grown by ``refit_growth`` (10 %, at least one row) since the last refit, from the
previous fit's modes and best optima (warm starts, up to ``n_warm``) plus ``step_starts``
fresh random starts; a full refit (the warm starts plus ``design_starts`` fresh ones, 16) is
done whenever it has grown by ``full_growth``× (1.5) since the last full one. Between refits
each new observation updates the posterior by the rank-one Gaussian update with its observed
response (:func:`~scalebo.design.acquisition.condition_on_mean`); the modes keep their
centres, so the predictions and Jacobians at every pool and target row are computed once per
centre (:class:`~scalebo.design.acquisition.JacobianCache`). Checkpoint fits are full
``n_starts`` fits (the protocol's 64 seeded starts); the ``variance`` design adds, as warm
starts, the modes and best optima of its own running fit on the checkpoint's rows (or, for
a budget the spend never reached, of its last fit) and the best ``CHAIN_STARTS`` optima of
the previous checkpoint's fit, on a subset of the rows (vocab sl_6 seed 6 at 5 %: SSE 3.93
→ 3.18, target R² 0.32 → 0.98). The 64 seeded starts still run, so the
objective can only rise if a seeded start is crowded out of the polish of the best 64
screened points (``warm_checkpoints=False`` turns the warm starts off). Each checkpoint also
reports the target-region intervals of its fit (:func:`target_interval`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from scalebo.design.acquisition import (
    BASELINES,
    DEFAULT_GAMMA,
    JacobianCache,
    baseline_pick,
    cached_variance_scores,
    condition_on_mean,
)
from scalebo.design.pool import Pool, TargetRegion
from scalebo.design.posterior import Posterior, build_posterior
from scalebo.errors import FitError
from scalebo.fitting.formula_fit import fit_formula
from scalebo.fitting.robust import FitResult
from scalebo.laws.formula import FormulaLaw
from scalebo.search.budget import as_fractions

__all__ = ["BUDGET_RTOL", "DESIGN_STARTS", "FULL_GROWTH", "METHODS", "REFIT_GROWTH",
           "Checkpoint", "DesignReplay", "RefitState", "checkpoint_rows", "clipped_r2",
           "design_replay", "fit_rows", "fit_summary", "observation_bands", "pilot_rows",
           "refit_step", "target_interval", "target_r2"]

METHODS = ("variance", *BASELINES)
#: Defaults of the design's refits (module docstring): fresh random starts of a full refit,
#: growth of the observed set that triggers a warm refit, and one that triggers a full one.
DESIGN_STARTS = 16
REFIT_GROWTH = 0.1
FULL_GROWTH = 1.5
#: Relative slack of a budget comparison: a spend within ``1 + BUDGET_RTOL`` of ``b·C`` fits
#: ``b`` (a cumulative sum of costs rounds differently from ``C``, so ``b = 1`` would
#: otherwise leave out the last row of the whole pool).
BUDGET_RTOL = 1e-12
#: Iteration limit of the design's full refits (300: no LM continuation of slow starts, which
#: only the scored checkpoint fits need; :mod:`scalebo.fitting.formula_fit`).
FULL_MAX_ITER = 300
#: Optima of the previous checkpoint's fit (on a subset of the rows) that start the next
#: one's, for the ``variance`` design (module docstring).
CHAIN_STARTS = 10


@dataclass(frozen=True)
class Checkpoint:
    """The fit reported at one budget.

    Attributes:
        budget: the budget fraction ``b`` of the pool's total cost.
        spent_fraction: cost of the observed rows / C (≤ ``b``).
        n_observed: rows observed.
        r2: target-region R², clipped to [−1, 1] (−1: failed fit); ``None`` without responses.
        params: natural parameters of the fit (empty when it failed).
        status: fit status (``converged``, ``bound hit``, …) or ``failed: <reason>``.
        interval: the target-region intervals of the fit's multi-mode posterior
            (:func:`target_interval`), ``{}`` when the fit failed.
    """

    budget: float
    spent_fraction: float
    n_observed: int
    r2: float | None
    params: dict[str, float]
    status: str
    interval: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"budget": self.budget, "spent_fraction": self.spent_fraction,
                "n_observed": self.n_observed, "r2": self.r2, "params": self.params,
                "status": self.status, "interval": self.interval}


@dataclass(frozen=True)
class DesignReplay:
    """One sequential design run and its checkpoints.

    Attributes:
        method: ``variance`` or a baseline.
        seed: seed of the fits' starts and of the baselines' draws.
        order: pool row indices (0-based positions) in acquisition order.
        cum_cost_fraction: spent fraction after each acquisition.
        checkpoints: one per budget, in increasing budget order.
        n_pilot: rows of the pilot.
        seconds: wall time of the replay.
    """

    method: str
    seed: int
    order: tuple[int, ...]
    cum_cost_fraction: tuple[float, ...]
    checkpoints: tuple[Checkpoint, ...]
    n_pilot: int
    seconds: float = field(compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``{"checkpoints": [...], ...}``)."""
        return {"method": self.method, "seed": self.seed, "n_pilot": self.n_pilot,
                "order": list(self.order), "cum_cost_fraction": list(self.cum_cost_fraction),
                "checkpoints": [c.to_dict() for c in self.checkpoints], "seconds": self.seconds}


def pilot_rows(cost: np.ndarray, n_params: int, total: float, fraction: float = 0.02,
               factor: float = 2.5) -> list[int]:
    """Cheapest rows (stable order), at most ``⌊factor·p⌋``, while their cost is ≤
    ``fraction·total``."""
    out, spent = [], 0.0
    for i in np.argsort(cost, kind="stable")[: int(np.floor(factor * n_params))]:
        if spent + cost[i] > fraction * total:
            break
        out.append(int(i))
        spent += float(cost[i])
    return out


def fit_rows(law: FormulaLaw, X: np.ndarray, y: np.ndarray, *, n_starts: int, seed: int,
             warm: np.ndarray | None = None, max_iter: int = 2000) -> FitResult | None:
    """Natural least-squares fit from ``n_starts`` seeded random starts plus ``warm`` ones;
    ``None`` when it cannot be done (fewer rows than parameters, no finite start)."""
    if y.shape[0] < law.n_params:
        return None
    starts = law.random_starts(n_starts, seed) if n_starts > 0 else np.empty((0, law.n_params))
    if warm is not None and len(warm):
        starts = np.vstack([np.clip(warm, law.lower, law.upper), starts])
    try:
        return fit_formula(law, X, y, residuals="natural", starts=starts, max_iter=max_iter)
    except FitError:
        return None


def target_r2(fit: FitResult | None, X: np.ndarray, y: np.ndarray) -> float:
    """R² of ``fit`` at ``X`` against ``y``, clipped to [−1, 1]; −1 if failed/non-finite."""
    if fit is None:
        return -1.0
    return clipped_r2(y, fit.law.predict(fit.x, X))


def clipped_r2(y: np.ndarray, pred: np.ndarray) -> float:
    """R² of predictions ``pred`` against ``y`` (both ``(m,)``), clipped to [−1, 1]; −1 when
    a prediction is non-finite or ``y`` is constant."""
    ss = float(np.sum((y - y.mean()) ** 2))
    if not np.all(np.isfinite(pred)) or ss <= 0:
        return -1.0
    r2 = 1.0 - float(np.sum((y - pred) ** 2)) / ss
    return float(np.clip(r2, -1.0, 1.0)) if np.isfinite(r2) else -1.0


def fit_summary(law: FormulaLaw, fit: FitResult | None,
                n_rows: int) -> tuple[dict[str, float], str]:
    """``(params, status)`` of a checkpoint fit on ``n_rows`` rows: natural parameters and
    the fit status, or ``({}, "failed: <reason>")`` when ``fit`` is ``None``."""
    if fit is None:
        return {}, (f"failed: {n_rows} rows for {law.n_params} parameters"
                    if n_rows < law.n_params else "failed: no finite start")
    return fit.params, str(fit.status)


def checkpoint_rows(cum: np.ndarray, budget: float) -> int:
    """How many rows of an acquisition order (cumulative spent fractions ``cum``) come before
    the spend first goes past ``budget``: the rows a checkpoint at ``budget`` is fitted on.
    A spend equal to ``budget`` to a relative ``1e-12`` (the rounding of a cumulative sum)
    is within it, as the design's purchases are, so ``budget = 1`` holds the whole pool."""
    return int(np.searchsorted(cum, budget * (1 + BUDGET_RTOL), side="right"))


def observation_bands(law: FormulaLaw, fit: FitResult | None, X: np.ndarray, y: np.ndarray,
                      X_target: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """``{"80": (lo, hi), "95": (lo, hi)}``: the normal 80 % and 95 % intervals for a new
    observation at ``X_target`` from ``fit``'s multi-mode Laplace posterior with the residual
    noise ``SSE/(n − p)`` (response units); ``None`` when ``fit`` is ``None``, ``X_target`` is
    empty or the fit has no more rows than parameters (no residual to estimate the noise)."""
    if fit is None or X_target.shape[0] == 0 or fit.n_obs <= law.n_params:
        return None
    post = build_posterior(law, fit, X, y, X_target=X_target, noise="residual")
    return {tag: post.interval(X_target, level, observation=True)
            for level, tag in ((0.8, "80"), (0.95, "95"))}


def target_interval(law: FormulaLaw, fit: FitResult | None, X: np.ndarray, y: np.ndarray,
                    target: TargetRegion) -> dict[str, float]:
    """Target-region intervals of ``fit`` (on ``X``, ``y``): the normal-approximation 80 %
    and 95 % intervals for a new observation at every target row, from the multi-mode
    Laplace posterior with the residual noise estimate ``SSE/(n − p)``
    (:func:`~scalebo.design.posterior.build_posterior`, ``noise="residual"``).

    Returns ``{"n_target", "width80", "width95"}`` (target rows; median widths, response
    units) plus, when the target responses are known, ``{"coverage80", "coverage95"}``
    (fractions of target rows whose response lies inside); ``{}`` when ``fit`` is ``None``,
    has no more rows than parameters, the region is empty or a bound is non-finite.
    """
    bands = observation_bands(law, fit, X, y, target.X)
    if bands is None:
        return {}
    out: dict[str, float] = {"n_target": int(target.X.shape[0])}
    for tag, (lo, hi) in bands.items():
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            return {}
        out["width" + tag] = float(np.median(hi - lo))
        if target.y is not None:
            out["coverage" + tag] = float(np.mean((target.y >= lo) & (target.y <= hi)))
    return out


def _checkpoint(law: FormulaLaw, pool: Pool, target: TargetRegion, rows: list[int],
                budget: float, n_starts: int, seed: int,
                warm: np.ndarray | None = None) -> tuple[Checkpoint, FitResult | None]:
    spent = float(pool.cost[rows].sum()) / pool.total_cost
    X, y = pool.X[rows], pool.y[rows]
    fit = fit_rows(law, X, y, n_starts=n_starts, seed=seed, warm=warm)
    r2 = target_r2(fit, target.X, target.y) if target.y is not None else None
    params, status = fit_summary(law, fit, len(rows))
    return Checkpoint(budget, spent, len(rows), r2, params, status,
                      target_interval(law, fit, X, y, target)), fit


@dataclass(frozen=True)
class RefitState:
    """The running fit of one replay (or of one group of it) between checkpoints.

    Attributes:
        fit: the last successful fit, or ``None``.
        post: its posterior, updated by rank-one steps between refits, or ``None``.
        n_fit: observed rows at the last refit attempt.
        n_full: observed rows at the last full refit.
    """

    fit: FitResult | None = None
    post: Posterior | None = None
    n_fit: int = 0
    n_full: int = 0


def _warm_starts(state: RefitState, law: FormulaLaw, n_warm: int) -> np.ndarray | None:
    """The modes and best ``n_warm`` optima of ``state``'s fit, ``(k, p)``, or ``None``."""
    if state.fit is None or state.post is None:
        return None
    return np.vstack([*(m.theta[None, :] for m in state.post.modes),
                      state.fit.converged_x[:n_warm].reshape(-1, law.n_params)])


def refit_step(state: RefitState, law: FormulaLaw, X: np.ndarray, y: np.ndarray,
               X_target: np.ndarray, newest: int, *, seed: int, n_starts: int,
               step_starts: int, n_warm: int, full_growth: float, refit_growth: float,
               step_max_iter: int) -> RefitState:
    """Bring ``state`` up to date with the observed rows ``X``, ``y`` (``X[newest]`` observed
    last): a rank-one update with the newest row while the observed set has grown by less
    than ``refit_growth`` since the last refit, else a warm-started refit (full when it has
    grown by ``full_growth``× since the last full one; module docstring)."""
    n = y.shape[0]
    if state.post is not None and n < max(state.n_fit + 1, (1 + refit_growth) * state.n_fit):
        post = condition_on_mean(state.post, X[newest], float(y[newest]))
        return replace(state, post=post)
    full = state.fit is None or n >= full_growth * state.n_full
    warm = _warm_starts(state, law, n_warm)
    new = fit_rows(law, X, y, warm=warm, n_starts=n_starts if full else step_starts,
                   seed=seed, max_iter=FULL_MAX_ITER if full else step_max_iter)
    if new is None:
        return replace(state, n_fit=n)
    return RefitState(fit=new, post=build_posterior(law, new, X, y, X_target=X_target),
                      n_fit=n, n_full=n if full else state.n_full)


def design_replay(pool: Pool, target: TargetRegion, law: FormulaLaw,
                  budgets: tuple[float, ...] = (0.01, 0.05, 0.1), method: str = "variance",
                  seed: int = 0, *, n_starts: int = 64, design_starts: int = DESIGN_STARTS,
                  step_starts: int = 4, n_warm: int = 4,
                  full_growth: float = FULL_GROWTH, refit_growth: float = REFIT_GROWTH,
                  gamma: float = DEFAULT_GAMMA,
                  step_max_iter: int = 200, warm_checkpoints: bool = True) -> DesignReplay:
    """Replay ``method`` on ``pool`` (responses known) and score it on ``target``.

    Args:
        pool: candidate rows with responses (:func:`~scalebo.design.pool.make_pool`).
        target: target region; its inputs guide ``variance``, its responses (if any) score.
        law: the formula law fitted at every step.
        budgets: fractions of the pool's total cost, each in (0, 1] (one or several; 0.05 or
            "5%").
        method: ``variance`` (pilot + :func:`~scalebo.design.acquisition.variance_scores`)
            or a baseline ``random`` / ``cheapest`` / ``cost_weighted`` (no pilot).
        seed: seeds the fits' random starts and the baselines' draws.
        n_starts: starts of the checkpoint fits (the protocol's 64).
        design_starts: fresh random starts of the design's periodic full refits (plus the
            previous fit's modes and best optima as warm starts); these fits only guide the
            choice of rows and are never scored.
        step_starts, n_warm, full_growth, refit_growth, step_max_iter: refits between
            checkpoints (module docstring).
        gamma: cost exponent of the score.
        warm_checkpoints: ``variance`` only: also start the checkpoint fits from the
            design's own fit (module docstring).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if pool.y is None:
        raise ValueError("design_replay needs a pool with responses (see --response)")
    budgets = as_fractions(budgets, "the pool's total cost")  # 0.05, "5%" or several
    t0 = time.perf_counter()
    C, cap = pool.total_cost, budgets[-1] * pool.total_cost
    rng = np.random.default_rng(seed)
    order = pilot_rows(pool.cost, law.n_params, C) if method == "variance" else []
    n_pilot = len(order)
    observed = np.zeros(pool.n, dtype=bool)
    observed[order] = True
    spent = float(pool.cost[order].sum())
    state = RefitState()
    step, warm = 0, {}
    if method == "variance":
        jac_pool, jac_target = JacobianCache(law, pool.X), JacobianCache(law, target.X)
    while True:
        cand = np.flatnonzero(~observed & (spent + pool.cost <= cap * (1 + BUDGET_RTOL)))
        if cand.size == 0:
            break
        if method != "variance":
            pick = baseline_pick(method, pool.cost, cand, rng)
        else:
            rows = np.flatnonzero(observed)
            newest = int(np.searchsorted(rows, order[-1])) if order else 0
            state = refit_step(state, law, pool.X[rows], pool.y[rows], target.X, newest,
                               seed=seed * 100_003 + step, n_starts=design_starts,
                               step_starts=step_starts, n_warm=n_warm,
                               full_growth=full_growth, refit_growth=refit_growth,
                               step_max_iter=step_max_iter)
            post = state.post
            if post is None:  # no usable fit yet: cheapest affordable row
                pick = int(cand[np.argmin(pool.cost[cand])])
            else:
                s = cached_variance_scores(post, jac_pool, cand, pool.cost[cand], jac_target,
                                           C, gamma)
                pick = int(cand[np.argmax(s)])
        for b in budgets:  # the design's running fit when the checkpoint's rows are all
            # observed (refitted on them or on fewer, then updated): warm starts for it
            if spent <= b * C * (1 + BUDGET_RTOL) < spent + float(pool.cost[pick]):
                warm[b] = _warm_starts(state, law, n_warm)
        order.append(pick)
        observed[pick] = True
        spent += float(pool.cost[pick])
        step += 1
    cum = np.cumsum(pool.cost[order]) / C if order else np.zeros(0)
    checkpoints, prev = [], None
    for b in budgets:
        k = checkpoint_rows(cum, b)
        if b not in warm and k == len(order):  # never reached: every row; the last fit's
            warm[b] = _warm_starts(state, law, n_warm)  # (a pilot past b gets none)
        starts = None
        if method == "variance" and warm_checkpoints:
            parts = [w for w in (warm.get(b), None if prev is None else
                                 prev.converged_x[:CHAIN_STARTS]) if w is not None and len(w)]
            starts = np.vstack(parts) if parts else None
        cp, fit = _checkpoint(law, pool, target, order[:k], b, n_starts, seed, starts)
        checkpoints.append(cp)
        prev = fit if fit is not None else prev
    return DesignReplay(method=method, seed=seed, order=tuple(order),
                        cum_cost_fraction=tuple(map(float, cum)),
                        checkpoints=tuple(checkpoints), n_pilot=n_pilot,
                        seconds=time.perf_counter() - t0)
