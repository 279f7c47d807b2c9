"""Acquisition functions for minimizing loss, as pure functions of a Gaussian posterior.

Notations: ``mean``, ``std`` — posterior mean and standard deviation of the loss at each
candidate, shape ``(n_cand,)`` (any broadcastable shapes work); ``best`` — the incumbent
loss to improve on, a scalar or shape ``(n_cand,)``. All in the surrogate's units
(standardized loss inside :class:`~scalebo.search.loop.SearchLoop`).

Minimization conventions: the improvement is ``I = max(best − f, 0)`` and
``z = (best − mean) / std``, so that

* ``EI = std · h(z)`` with ``h(z) = φ(z) + z·Φ(z)``;
* ``PI = Φ(z)``;
* ``LCB = mean − κ·std`` (a lower bound to minimize; its score is ``−LCB``).

Every score returned by :func:`score` is to be **maximized**. EI and PI are computed in log
space (logEI, logPI): plain EI underflows to exact ties (0.0) once ``z`` falls below about
−38, which leaves an argmax with nothing to choose between. logEI stays finite and ordered
far into the tail (Ament et al., "Unexpected improvements to expected improvement", NeurIPS
2023, eq. 9; BoTorch and Optuna use the same construction).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

from scalebo.errors import SearchError
from scalebo.search.grid import Grid

#: Standard deviations are floored at this value so that ``z`` stays finite.
STD_FLOOR = 1e-12
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_SQRT_HALF_PI = np.sqrt(0.5 * np.pi)
# Below this z the cancellation in log(1 − |z|·Φ(z)/φ(z)) loses all digits; use the
# asymptote h(z) ≈ φ(z)/z² instead (relative error O(1/z²) < 1e-12 there).
_Z_ASYMPTOTIC = -1.0 / np.sqrt(np.finfo(np.float64).eps)


class Acquisition(StrEnum):
    """Which acquisition :func:`score` computes."""

    EI = "ei"
    """Expected improvement, returned as logEI (same ranking, no underflow)."""
    PI = "pi"
    """Probability of improvement, returned as logPI."""
    LCB = "lcb"
    """Lower confidence bound ``mean − κ·std``, returned negated (``κ·std − mean``)."""
    RANDOM = "random"
    """No score: a uniformly random order of the admissible configurations (the search
    loop ranks the grid by a seeded permutation; :func:`score` rejects it)."""
    TARGET = "target"
    """Expected reduction of the law's variance at a target compute per unit cost, from an
    ensemble of law fits (:mod:`scalebo.search.target`; :func:`score` rejects it)."""


def parse_acquisition(kind: Acquisition | str) -> Acquisition:
    """The :class:`Acquisition` named ``kind`` (case-insensitive); SearchError if unknown."""
    try:
        return Acquisition(str(kind).lower())
    except ValueError as err:
        raise SearchError(
            f"Unknown acquisition {kind!r}; expected one of {[a.value for a in Acquisition]}."
        ) from err


def _check(mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    if not np.all(np.isfinite(mean)):
        raise SearchError(
            "Posterior means must be finite; got NaN or inf. Check the surrogate's fit "
            "(standardized y, no NaN losses)."
        )
    if not np.all(np.isfinite(std)) or np.any(std < 0):
        raise SearchError("Posterior standard deviations must be finite and >= 0.")
    return mean, np.maximum(std, STD_FLOOR)


def _z(mean: np.ndarray, std: np.ndarray, best: float | np.ndarray) -> np.ndarray:
    best = np.asarray(best, dtype=np.float64)
    if not np.all(np.isfinite(best)):
        raise SearchError("The incumbent must be finite; got NaN or inf.")
    return (best - mean) / std


def _log1mexp(w: np.ndarray) -> np.ndarray:
    """``log(1 − exp(w))`` for ``w < 0``, accurate near 0 and far below (Mächler 2012)."""
    return np.where(w > -np.log(2.0), np.log(-np.expm1(w)), np.log1p(-np.exp(w)))


def log_h(z: np.ndarray) -> np.ndarray:
    """``log h(z)`` with ``h(z) = φ(z) + z·Φ(z)``, finite for every finite ``z``.

    For ``z > −1``: direct evaluation. For ``z ≤ −1``: ``h(z) = φ(z)·(1 − |z|·Φ(z)/φ(z))``
    with ``Φ(z)/φ(z) = √(π/2)·erfcx(−z/√2)``, so ``log h = log φ(z) + log1mexp(w)`` where
    ``w = log(|z|·√(π/2)·erfcx(|z|/√2)) < 0``. Below ``−1/√eps`` the asymptote
    ``h(z) ≈ φ(z)/z²`` is used.
    """
    z = np.asarray(z, dtype=np.float64)
    upper = np.maximum(z, -1.0)
    out_upper = np.log(np.exp(-0.5 * upper**2) / np.sqrt(2 * np.pi) + upper * ndtr(upper))
    lower = np.minimum(z, -1.0)
    log_phi = -0.5 * lower**2 - _LOG_SQRT_2PI
    mid = np.maximum(lower, _Z_ASYMPTOTIC)
    w = np.log(-mid * _SQRT_HALF_PI * erfcx(-mid / np.sqrt(2.0)))
    out_lower = log_phi + np.where(
        lower > _Z_ASYMPTOTIC, _log1mexp(np.minimum(w, -1e-300)), -2.0 * np.log(-lower)
    )
    return np.where(z > -1.0, out_upper, out_lower)


def log_expected_improvement(
    mean: np.ndarray, std: np.ndarray, best: float | np.ndarray
) -> np.ndarray:
    """``log EI = log std + log h(z)``, ``z = (best − mean)/std`` (minimization), ``(n_cand,)``."""
    mean, std = _check(mean, std)
    return np.log(std) + log_h(_z(mean, std, best))


def expected_improvement(
    mean: np.ndarray, std: np.ndarray, best: float | np.ndarray
) -> np.ndarray:
    """``EI = E[max(best − f, 0)]`` for ``f ~ N(mean, std²)``, shape ``(n_cand,)``.

    Computed as ``exp(logEI)``; underflows to 0 far in the tail, prefer
    :func:`log_expected_improvement` for ranking.
    """
    return np.exp(log_expected_improvement(mean, std, best))


def log_probability_of_improvement(
    mean: np.ndarray, std: np.ndarray, best: float | np.ndarray
) -> np.ndarray:
    """``log PI = log Φ((best − mean)/std)`` (minimization), shape ``(n_cand,)``."""
    mean, std = _check(mean, std)
    return log_ndtr(_z(mean, std, best))


def lower_confidence_bound(mean: np.ndarray, std: np.ndarray, kappa: float = 2.0) -> np.ndarray:
    """Score ``−(mean − κ·std)`` to maximize (the LCB itself is minimized), ``(n_cand,)``."""
    if not np.isfinite(kappa) or kappa < 0:
        raise SearchError(f"kappa must be finite and >= 0, got {kappa}.")
    mean, std = _check(mean, std)
    return -(mean - kappa * std)


def score(
    kind: Acquisition | str,
    mean: np.ndarray,
    std: np.ndarray,
    incumbent: float | np.ndarray,
    *,
    kappa: float = 2.0,
) -> np.ndarray:
    """Acquisition score to **maximize**, shape ``(n_cand,)``: logEI, logPI or −LCB.

    Args:
        kind: ``"ei"``, ``"pi"`` or ``"lcb"`` (see :class:`Acquisition`).
        incumbent: Loss to improve on, scalar or ``(n_cand,)``; ignored by LCB.
        kappa: Exploration weight of LCB.
    """
    kind = parse_acquisition(kind)
    if kind is Acquisition.EI:
        return log_expected_improvement(mean, std, incumbent)
    if kind is Acquisition.PI:
        return log_probability_of_improvement(mean, std, incumbent)
    if kind is Acquisition.RANDOM:
        raise SearchError("'random' is an order, not a score: the search loop draws it.")
    if kind is Acquisition.TARGET:
        raise SearchError("'target' is scored from a law ensemble: see scalebo.search.target.")
    return lower_confidence_bound(mean, std, kappa)


def incumbent_score(
    kind: Acquisition | str,
    grid: Grid,
    observed_idx: np.ndarray,
    y_obs: np.ndarray,
    candidate_idx: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    *,
    incumbent: str = "envelope",
    kappa: float = 2.0,
    cost: tuple[np.ndarray, float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`score` of the candidates against their incumbents, and the incumbents.

    Args:
        kind: ``"ei"``, ``"pi"`` or ``"lcb"``. grid: The grid.
        observed_idx, y_obs: Observed (or believed) rows ``(n_obs,)`` and their losses in
            the posterior's units. candidate_idx: Candidate rows ``(n_cand,)``.
        mean, std: Posterior at the candidates, ``(n_cand,)``, same units.
        incumbent: ``"envelope"`` (:func:`frontier_incumbent` with ``envelope=True``),
            ``"frontier"`` (:func:`frontier_incumbent`) or ``"global"`` (best overall).
        kappa: LCB exploration weight.
        cost: ``(cost, total, γ)``: EI and PI scores per cost^γ (:func:`cost_weighted`;
            the candidates' costs ``(n_cand,)`` and the budget's scale); LCB is never
            cost-weighted. None: no weighting.

    Returns:
        Scores to maximize and incumbents, each ``(n_cand,)``.
    """
    if incumbent == "global":
        inc = np.full(np.shape(candidate_idx), global_incumbent(y_obs))
    else:
        inc = frontier_incumbent(grid, observed_idx, y_obs, candidate_idx,
                                 envelope=incumbent == "envelope")
    s = score(kind, mean, std, inc, kappa=kappa)
    if cost is not None and parse_acquisition(kind) is not Acquisition.LCB:
        s = cost_weighted(s, *cost)
    return s, inc


def cost_weighted(scores: np.ndarray, cost: np.ndarray, total: float, power: float
                  ) -> np.ndarray:
    """Log scores per unit cost: ``scores − power·log(cost/total)``, shape ``(n_cand,)``.

    For logEI this is ``log(EI / (cost/total)^power)``: ``power = 1`` is the expected
    improvement per unit of budget (Snoek et al. 2012, "EI per second"), ``0`` ignores cost.

    Args:
        scores: Log scores (logEI, logPI), ``(n_cand,)``.
        cost: Each candidate's cost in the budget's unit (FLOPs or its price), ``(n_cand,)``;
            floored at ``1e-12·total`` so that a free candidate stays finite.
        total: The budget's scale (e.g. ``C_total``); only shifts every score alike.
        power: ``γ ≥ 0``.
    """
    if not (np.isfinite(power) and power >= 0):
        raise SearchError(f"The cost power must be finite and >= 0, got {power}.")
    if power == 0:
        return np.asarray(scores, dtype=np.float64)
    rel = np.maximum(np.asarray(cost, dtype=np.float64) / float(total), 1e-12)
    return np.asarray(scores, dtype=np.float64) - power * np.log(rel)


def score_words(kind: Acquisition, cost_power: float) -> str:
    """How a pick's score reads in its reason: ``max log EI per unit cost`` (γ = 1),
    ``max log EI`` (γ = 0), ``max log PI per cost^0.5``, ``max LCB score``."""
    if kind is Acquisition.LCB:
        return "max LCB score"
    per = {0.0: "", 1.0: " per unit cost"}.get(float(cost_power), f" per cost^{cost_power:g}")
    return f"max log {kind.value.upper()}{per}"


#: Incumbents of :func:`incumbent_score`.
INCUMBENTS = ("envelope", "frontier", "global")


def global_incumbent(y_obs: np.ndarray) -> float:
    """Best (lowest) observed loss, the standard BO incumbent.

    Raises:
        SearchError: no observation, or a non-finite loss.
    """
    y = np.asarray(y_obs, dtype=np.float64)
    if y.size == 0:
        raise SearchError("No observation yet: an incumbent needs at least one observed loss.")
    if not np.all(np.isfinite(y)):
        raise SearchError("Observed losses must be finite; got NaN or inf.")
    return float(y.min())


def frontier_incumbent(
    grid: Grid, observed_idx: np.ndarray, y_obs: np.ndarray, candidate_idx: np.ndarray,
    *, envelope: bool = False,
) -> np.ndarray:
    """Per-candidate incumbent for the best-loss frontier, shape ``(n_cand,)``.

    The frontier needs the best loss at every compute scale, so each candidate competes with
    the runs at its own scale. For a candidate ``x``, in order of preference:

    1. the best observed loss in its own ``(N, D)`` cell;
    2. otherwise the envelope at its compute: the best observed loss over configurations
       with ``cost ≤ cost(x)`` (the loss already reachable with that much compute);
    3. otherwise (every observation costs more than ``x``) the global best.

    With ``envelope=True`` the incumbent is the lower of 1. and 2.: a run improves on it only
    if it would move the Pareto envelope that the compute law is fitted on, so a cell
    dominated by cheaper runs (a small model trained on many tokens, say) is not explored
    for its own sake. Measured (10 seeds, window ``spent``, EI, compute law at 1e25 FLOPs,
    1 / 5 / 10 % of C_total): StepLaw 17.4 / 6.67 / 1.03 → 12.4 / 4.88 / 0.39 %,
    OELLM-English 5.94 / 1.70 / 0.36 → 5.58 / 0.99 / 0.19 % (docs/reproduction.md).

    Args:
        grid: The grid (cells and costs).
        observed_idx: Grid rows of the observations, shape ``(n_obs,)``.
        y_obs: Their losses, shape ``(n_obs,)``.
        candidate_idx: Grid rows of the candidates, shape ``(n_cand,)``.
        envelope: Take the lower of the cell's best and the reachable envelope.
    """
    observed_idx = np.asarray(observed_idx, dtype=np.int64)
    candidate_idx = np.asarray(candidate_idx, dtype=np.int64)
    y = np.asarray(y_obs, dtype=np.float64)
    if observed_idx.shape != y.shape:
        raise SearchError(
            f"observed_idx and y_obs must have the same shape, got {observed_idx.shape} and "
            f"{y.shape}."
        )
    best = global_incumbent(y)
    n_cell = grid.cell_cost.size
    cell_best = np.full(n_cell, np.inf)
    np.minimum.at(cell_best, grid.cell_ids[observed_idx], y)

    # Envelope: running minimum of the losses sorted by cost (ties resolved by searchsorted
    # with side="right", so that cost ≤ cost(x) includes equal-cost observations).
    obs_cost = grid.cost[observed_idx]
    order = np.argsort(obs_cost, kind="stable")
    env = np.minimum.accumulate(y[order])
    pos = np.searchsorted(obs_cost[order], grid.cost[candidate_idx], side="right")
    reachable = np.where(pos > 0, env[np.maximum(pos - 1, 0)], best)

    own = cell_best[grid.cell_ids[candidate_idx]]
    if envelope:
        return np.minimum(own, reachable)
    return np.where(np.isfinite(own), own, reachable)
