"""Batched, box-constrained L-BFGS: many independent starts advanced in lock-step.

A multi-start fit evaluates its objective for every start at once (one vectorized numpy call
over an ``(S, p)`` array) instead of running ``S`` scipy minimizations in a Python loop. The
algorithm per start is projected L-BFGS:

1. the search direction is the two-loop L-BFGS direction (memory ``m``) computed on the free
   variables (those not at a bound with the gradient pushing outwards);
2. a backtracking Armijo line search along the projected path ``clip(x + t·d, lower, upper)``,
   starting at ``t = 1`` (``t = 1/‖g‖`` on the first iteration or after a memory reset);
3. curvature pairs are kept only when ``sᵀy > 1e-10·yᵀy``.

A start stops when its projected gradient's infinity norm is ≤ ``gtol``, when its objective
decreases by less than ``ftol·max(|f|, tiny)`` on an iteration, or when no descent step can be
found even along the steepest-descent direction (machine precision). Notation: ``S`` starts,
``p`` parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

FunGrad = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``fun_grad(x (s, p), rows (s,)) -> (f (s,), g (s, p))`` for the starts ``rows``."""


class StartStatus(IntEnum):
    """Why a start stopped (SciPy's L-BFGS-B codes: 0 converged, 1 limit, 2 otherwise)."""

    CONVERGED = 0
    MAX_ITER = 1
    NON_FINITE = 2


@dataclass(frozen=True)
class BatchedResult:
    """Per-start outcome of :func:`minimize_batched`.

    Attributes:
        x: final points, shape ``(S, p)``.
        fun: final objective values, shape ``(S,)``.
        status: :class:`StartStatus` codes, shape ``(S,)``.
        nit: iterations per start, shape ``(S,)``.
        nfev: objective evaluations summed over all starts.
        pgnorm: infinity norm of the projected gradient at ``x``, shape ``(S,)``.
    """

    x: np.ndarray
    fun: np.ndarray
    status: np.ndarray
    nit: np.ndarray
    nfev: int
    pgnorm: np.ndarray


def free_variables(x: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """Mask of the components not blocked by a bound (at a bound with ``−g`` pointing out)."""
    return ~(((x <= lower) & (g > 0)) | ((x >= upper) & (g < 0)))


def projected_gradient(x: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """Gradient with components zeroed where a bound blocks descent, shape like ``g``."""
    return g * free_variables(x, g, lower, upper)


def _two_loop(g, s_hist, y_hist, rho, count):
    """L-BFGS two-loop recursion, vectorized over starts; returns ``H·g`` (S, p).

    Histories have shape ``(S, m, p)`` ordered oldest → newest, the newest in slot ``m − 1``;
    only the last ``count[s]`` slots of start ``s`` are valid.
    """
    m = s_hist.shape[1]
    q = g.copy()
    alpha = np.zeros(rho.shape)
    for j in range(m):  # newest first
        slot = m - 1 - j
        a = np.where(j < count, rho[:, slot] * np.einsum("sp,sp->s", s_hist[:, slot], q), 0.0)
        alpha[:, slot] = a
        q -= a[:, None] * y_hist[:, slot]
    sy = np.where(count > 0, 1.0 / np.where(rho[:, -1] > 0, rho[:, -1], 1.0), 1.0)
    yy = np.einsum("sp,sp->s", y_hist[:, -1], y_hist[:, -1])
    gamma = np.where((count > 0) & (yy > 0), sy / np.where(yy > 0, yy, 1.0), 1.0)
    r = q * gamma[:, None]
    for slot in range(m):  # oldest first
        valid = (m - 1 - slot) < count
        b = rho[:, slot] * np.einsum("sp,sp->s", y_hist[:, slot], r)
        r += np.where(valid, alpha[:, slot] - b, 0.0)[:, None] * s_hist[:, slot]
    return r


def _armijo(ft: np.ndarray, gt: np.ndarray, f0: np.ndarray, decrease: np.ndarray) -> np.ndarray:
    """Sufficient decrease (c1 = 1e-4) with a finite value and gradient, and no increase."""
    finite = np.isfinite(ft) & np.all(np.isfinite(gt), axis=1)
    with np.errstate(invalid="ignore"):
        return finite & (ft <= f0 + 1e-4 * decrease) & (ft <= f0)


def minimize_batched(
    fun_grad: FunGrad,
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    memory: int = 10,
    max_iter: int = 1000,
    gtol: float = 1e-10,
    ftol: float = 1e-13,
    ftol_floor: float = 1e-300,
    max_backtracks: int = 40,
    max_extrapolations: int = 8,
) -> BatchedResult:
    """Minimize ``S`` independent problems from the rows of ``x0`` (S, p) within bounds.

    Args:
        fun_grad: objective and gradient for a subset of starts (see :data:`FunGrad`).
        x0: start points, shape ``(S, p)``; clipped into the bounds.
        lower, upper: bounds, shape ``(p,)`` (``±inf`` allowed).
        memory: L-BFGS memory ``m``.
        max_iter: iteration limit per start.
        gtol: stop when ``‖projected gradient‖_∞ ≤ gtol``.
        ftol: stop when an iteration decreases ``f`` by less than ``ftol·max(|f|, ftol_floor)``
            (SciPy's L-BFGS-B uses ``ftol = factr·eps = 1e7·eps`` and ``ftol_floor = 1``).
        max_backtracks: step reductions before the line search is declared failed.
        max_extrapolations: doublings of a first step that satisfied Armijo but not the
            curvature condition.
    """
    x = np.clip(np.asarray(x0, dtype=np.float64), lower, upper)
    n_starts, p = x.shape
    m = memory
    all_rows = np.arange(n_starts)
    f, g = fun_grad(x, all_rows)
    nfev = n_starts
    status = np.full(n_starts, StartStatus.MAX_ITER, dtype=int)
    nit = np.zeros(n_starts, dtype=int)
    s_hist = np.zeros((n_starts, m, p))
    y_hist = np.zeros((n_starts, m, p))
    rho = np.zeros((n_starts, m))
    count = np.zeros(n_starts, dtype=int)

    bad = ~np.isfinite(f) | ~np.all(np.isfinite(g), axis=1)
    status[bad] = StartStatus.NON_FINITE
    active = ~bad
    pg = projected_gradient(x, g, lower, upper)
    done = active & (np.abs(pg).max(axis=1) <= gtol)
    status[done] = StartStatus.CONVERGED
    active &= ~done

    for _ in range(max_iter):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        xa, fa, ga = x[rows], f[rows], g[rows]
        free = free_variables(xa, ga, lower, upper)
        # Histories are kept ordered oldest → newest, the newest in the last slot.
        ca = count[rows]
        d = -_two_loop(ga * free, s_hist[rows], y_hist[rows], rho[rows], ca)
        d *= free
        slope = np.einsum("sp,sp->s", d, ga)
        restart = ~(slope < 0)
        if np.any(restart):  # not a descent direction: reset memory, use steepest descent
            d[restart] = -(ga * free)[restart]
            count[rows[restart]] = 0
            ca = count[rows]
        gnorm = np.sqrt(np.einsum("sp,sp->s", d, d))
        step = np.where(ca == 0, 1.0 / np.maximum(gnorm, 1e-300), 1.0)

        accepted = np.zeros(rows.size, dtype=bool)
        first_try = np.zeros(rows.size, dtype=bool)
        x_new = xa.copy()
        f_new = fa.copy()
        g_new = ga.copy()
        todo = np.arange(rows.size)
        for bt in range(max_backtracks):
            trial = np.clip(xa[todo] + step[todo, None] * d[todo], lower, upper)
            ft, gt = fun_grad(trial, rows[todo])
            nfev += todo.size
            decrease = np.einsum("sp,sp->s", ga[todo], trial - xa[todo])
            ok = _armijo(ft, gt, fa[todo], decrease)
            took = todo[ok]
            accepted[took] = True
            first_try[took] = bt == 0
            x_new[took], f_new[took], g_new[took] = trial[ok], ft[ok], gt[ok]
            todo, ft, t = todo[~ok], ft[~ok], step[todo[~ok]]
            if todo.size == 0:
                break
            # Minimizer of the quadratic through f(0), f'(0) and f(t), kept in [0.1t, 0.5t].
            excess = ft - fa[todo] - slope[todo] * t
            quad = np.where(np.isfinite(ft) & (excess > 0),
                            -slope[todo] * t * t / (2 * np.where(excess > 0, excess, 1.0)),
                            0.5 * t)
            step[todo] = np.clip(quad, 0.1 * t, 0.5 * t)

        # A full first step that leaves the slope steep (curvature condition of Wolfe,
        # c2 = 0.9, violated) was too short: double it while f keeps falling (≤ 8 times).
        grow = first_try & (np.einsum("sp,sp->s", g_new, d) < 0.9 * slope)
        for _ex in range(max_extrapolations):
            idx = np.flatnonzero(grow)
            if idx.size == 0:
                break
            t = 2.0 * step[idx]
            trial = np.clip(xa[idx] + t[:, None] * d[idx], lower, upper)
            ft, gt = fun_grad(trial, rows[idx])
            nfev += idx.size
            decrease = np.einsum("sp,sp->s", ga[idx], trial - xa[idx])
            ok = _armijo(ft, gt, fa[idx], decrease) & (ft < f_new[idx])
            better = idx[ok]
            step[better] = t[ok]
            x_new[better], f_new[better], g_new[better] = trial[ok], ft[ok], gt[ok]
            grow[:] = False
            grow[better] = np.einsum("sp,sp->s", gt[ok], d[better]) < 0.9 * slope[better]

        nit[rows] += 1
        failed = ~accepted
        # A failed line search after a memory reset means no descent at machine precision.
        stalled = failed & (ca == 0)
        retry = failed & ~stalled
        count[rows[retry]] = 0
        status[rows[stalled]] = StartStatus.CONVERGED
        active[rows[stalled]] = False

        ok_rows = rows[accepted]
        if ok_rows.size:
            s = x_new[accepted] - xa[accepted]
            yv = g_new[accepted] - ga[accepted]
            sy = np.einsum("sp,sp->s", s, yv)
            yy = np.einsum("sp,sp->s", yv, yv)
            keep = sy > 1e-10 * yy
            kr = ok_rows[keep]
            s_hist[kr, :-1] = s_hist[kr, 1:]
            y_hist[kr, :-1] = y_hist[kr, 1:]
            rho[kr, :-1] = rho[kr, 1:]
            s_hist[kr, -1] = s[keep]
            y_hist[kr, -1] = yv[keep]
            rho[kr, -1] = 1.0 / sy[keep]
            count[kr] = np.minimum(count[kr] + 1, m)

            f_old = fa[accepted]
            x[ok_rows], f[ok_rows], g[ok_rows] = x_new[accepted], f_new[accepted], g_new[accepted]
            pgn = np.abs(projected_gradient(x[ok_rows], g[ok_rows], lower, upper)).max(axis=1)
            small_change = (f_old - f[ok_rows]) <= ftol * np.maximum(np.abs(f_old), ftol_floor)
            conv = (pgn <= gtol) | small_change
            status[ok_rows[conv]] = StartStatus.CONVERGED
            active[ok_rows[conv]] = False

    pgnorm = np.abs(projected_gradient(x, g, lower, upper)).max(axis=1)
    return BatchedResult(x=x, fun=f, status=status, nit=nit, nfev=nfev, pgnorm=pgnorm)
