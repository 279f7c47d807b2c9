"""Batched, box-constrained L-BFGS: many independent starts advanced in lock-step.

A multi-start fit evaluates its objective for every start at once (one vectorized numpy call
over an ``(S, p)`` array) instead of running ``S`` scipy minimizations in a Python loop. The
algorithm per start is projected L-BFGS:

1. the search direction is the two-loop L-BFGS direction (memory ``m``) computed on the free
   variables (those not at a bound with the gradient pushing outwards);
2. a backtracking Armijo line search along the projected path ``clip(x + t·d, lower, upper)``,
   starting at ``t = 1`` (``t = 1/‖g‖`` on the first iteration or after a memory reset);
3. curvature pairs are kept only when ``sᵀy > 1e-10·yᵀy``.

Only the active starts are carried from one iteration to the next (the state is compacted
when starts finish), and the curvature pairs of all starts share one ring buffer, so an
iteration costs no history shifting or gathering.

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
        polished: which starts were continued to tight tolerances (:func:`with_polish`),
            shape ``(S,)``; None when none were singled out.
    """

    x: np.ndarray
    fun: np.ndarray
    status: np.ndarray
    nit: np.ndarray
    nfev: int
    pgnorm: np.ndarray
    polished: np.ndarray | None = None


def free_variables(x: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """Mask of the components not blocked by a bound (at a bound with ``−g`` pointing out)."""
    return ~(((x <= lower) & (g > 0)) | ((x >= upper) & (g < 0)))


def projected_gradient(x: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """Gradient with components zeroed where a bound blocks descent, shape like ``g``."""
    return g * free_variables(x, g, lower, upper)


def _two_loop(q, s_hist, y_hist, rho, gamma, head):
    """L-BFGS two-loop recursion, vectorized over starts; returns ``H·q`` (S, p).

    Histories have shape ``(m, S, p)`` and form a ring whose newest slot is ``head − 1``;
    a slot with ``rho == 0`` is empty (it holds finite values and contributes nothing).
    ``gamma`` (S,) scales the initial inverse Hessian ``H₀ = γ·I``.
    """
    m = rho.shape[0]
    newest_first = [(head - 1 - j) % m for j in range(m)]
    q = q.copy()
    alpha = np.empty_like(rho)
    for slot in newest_first:
        a = rho[slot] * np.einsum("sp,sp->s", s_hist[slot], q)
        alpha[slot] = a
        q -= a[:, None] * y_hist[slot]
    r = q * gamma[:, None]
    for slot in reversed(newest_first):
        b = rho[slot] * np.einsum("sp,sp->s", y_hist[slot], r)
        r += (alpha[slot] - b)[:, None] * s_hist[slot]
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
    x_out = np.clip(np.asarray(x0, dtype=np.float64), lower, upper)
    n_starts, p = x_out.shape
    m = memory
    f_out, g_out = fun_grad(x_out, np.arange(n_starts))
    f_out, g_out = np.array(f_out, dtype=np.float64), np.array(g_out, dtype=np.float64)
    nfev = n_starts
    status = np.full(n_starts, StartStatus.MAX_ITER, dtype=int)
    nit = np.zeros(n_starts, dtype=int)

    bad = ~np.isfinite(f_out) | ~np.all(np.isfinite(g_out), axis=1)
    status[bad] = StartStatus.NON_FINITE
    done = ~bad & (np.abs(projected_gradient(x_out, g_out, lower, upper)).max(axis=1) <= gtol)
    status[done] = StartStatus.CONVERGED

    # State of the active starts only, compacted whenever some finish: ``idx`` maps each
    # active row to its start. Curvature pairs live in a ring shared by all starts (slot
    # ``head`` is written next); a start that keeps no pair on an iteration writes an empty one.
    idx = np.flatnonzero(~bad & ~done)
    x, f, g = x_out[idx], f_out[idx], g_out[idx]
    s_hist = np.zeros((m, idx.size, p))
    y_hist = np.zeros((m, idx.size, p))
    rho = np.zeros((m, idx.size))
    gamma = np.ones(idx.size)
    head = 0

    for _ in range(max_iter):
        if idx.size == 0:
            break
        free = free_variables(x, g, lower, upper)
        g_free = g * free
        count = np.count_nonzero(rho > 0, axis=0)
        d = -_two_loop(g_free, s_hist, y_hist, rho, gamma, head)
        d *= free
        slope = np.einsum("sp,sp->s", d, g)
        restart = ~(slope < 0)
        if np.any(restart):  # not a descent direction: reset memory, use steepest descent
            d[restart] = -g_free[restart]
            slope[restart] = np.einsum("sp,sp->s", d[restart], g[restart])
            rho[:, restart] = 0.0
            gamma[restart] = 1.0
            count[restart] = 0
        gnorm = np.sqrt(np.einsum("sp,sp->s", d, d))
        step = np.where(count == 0, 1.0 / np.maximum(gnorm, 1e-300), 1.0)

        accepted = np.zeros(idx.size, dtype=bool)
        first_try = np.zeros(idx.size, dtype=bool)
        x_new, f_new, g_new = x.copy(), f.copy(), g.copy()
        todo = np.arange(idx.size)
        for bt in range(max_backtracks):
            trial = np.clip(x[todo] + step[todo, None] * d[todo], lower, upper)
            ft, gt = fun_grad(trial, idx[todo])
            nfev += todo.size
            decrease = np.einsum("sp,sp->s", g[todo], trial - x[todo])
            ok = _armijo(ft, gt, f[todo], decrease)
            took = todo[ok]
            accepted[took] = True
            first_try[took] = bt == 0
            x_new[took], f_new[took], g_new[took] = trial[ok], ft[ok], gt[ok]
            todo, ft, t = todo[~ok], ft[~ok], step[todo[~ok]]
            if todo.size == 0:
                break
            # Minimizer of the quadratic through f(0), f'(0) and f(t), kept in [0.1t, 0.5t].
            excess = ft - f[todo] - slope[todo] * t
            quad = np.where(np.isfinite(ft) & (excess > 0),
                            -slope[todo] * t * t / (2 * np.where(excess > 0, excess, 1.0)),
                            0.5 * t)
            step[todo] = np.clip(quad, 0.1 * t, 0.5 * t)

        # A full first step that leaves the slope steep (curvature condition of Wolfe,
        # c2 = 0.9, violated) was too short: double it while f keeps falling (≤ 8 times).
        grow = first_try & (np.einsum("sp,sp->s", g_new, d) < 0.9 * slope)
        for _ex in range(max_extrapolations):
            ext = np.flatnonzero(grow)
            if ext.size == 0:
                break
            t = 2.0 * step[ext]
            trial = np.clip(x[ext] + t[:, None] * d[ext], lower, upper)
            ft, gt = fun_grad(trial, idx[ext])
            nfev += ext.size
            decrease = np.einsum("sp,sp->s", g[ext], trial - x[ext])
            ok = _armijo(ft, gt, f[ext], decrease) & (ft < f_new[ext])
            better = ext[ok]
            step[better] = t[ok]
            x_new[better], f_new[better], g_new[better] = trial[ok], ft[ok], gt[ok]
            grow[:] = False
            grow[better] = np.einsum("sp,sp->s", gt[ok], d[better]) < 0.9 * slope[better]

        nit[idx] += 1
        # New curvature pair (empty unless accepted and sᵀy > 1e-10·yᵀy).
        s_new = x_new - x
        y_new = g_new - g
        sy = np.einsum("sp,sp->s", s_new, y_new)
        yy = np.einsum("sp,sp->s", y_new, y_new)
        keep = accepted & (sy > 1e-10 * yy)
        s_hist[head] = np.where(keep[:, None], s_new, 0.0)
        y_hist[head] = np.where(keep[:, None], y_new, 0.0)
        rho[head] = np.where(keep, 1.0 / np.where(keep, sy, 1.0), 0.0)
        gamma[keep] = sy[keep] / yy[keep]
        head = (head + 1) % m
        # A failed line search after a memory reset means no descent at machine precision;
        # otherwise reset the memory and retry along steepest descent.
        failed = ~accepted
        stalled = failed & (count == 0)
        retry = failed & ~stalled
        rho[:, retry] = 0.0
        gamma[retry] = 1.0

        f_old = f
        x, f, g = x_new, f_new, g_new
        pgn = np.abs(projected_gradient(x, g, lower, upper)).max(axis=1)
        small_change = (f_old - f) <= ftol * np.maximum(np.abs(f_old), ftol_floor)
        finished = stalled | (accepted & ((pgn <= gtol) | small_change))
        if np.any(finished):
            out = idx[finished]
            status[out] = StartStatus.CONVERGED
            x_out[out], f_out[out], g_out[out] = x[finished], f[finished], g[finished]
            keep_rows = ~finished
            idx, x, f, g = idx[keep_rows], x[keep_rows], f[keep_rows], g[keep_rows]
            s_hist, y_hist = s_hist[:, keep_rows], y_hist[:, keep_rows]
            rho, gamma = rho[:, keep_rows], gamma[keep_rows]

    x_out[idx], f_out[idx], g_out[idx] = x, f, g  # starts that hit max_iter
    pgnorm = np.abs(projected_gradient(x_out, g_out, lower, upper)).max(axis=1)
    return BatchedResult(x=x_out, fun=f_out, status=status, nit=nit, nfev=nfev, pgnorm=pgnorm)


def with_polish(res: BatchedResult, chosen: np.ndarray, pol: BatchedResult, *,
                keep: np.ndarray | None = None) -> BatchedResult:
    """``res`` with the rows ``chosen`` replaced by their polished result ``pol`` (a second
    run from ``res.x[chosen]``): x, fun, status and the projected gradient norm from ``pol``;
    iterations and evaluations summed over every chosen row. ``keep`` (bool, like
    ``chosen``) replaces only those rows (the others keep their point and status)."""
    x, fun, status, nit = res.x.copy(), res.fun.copy(), res.status.copy(), res.nit.copy()
    pgnorm = res.pgnorm.copy()
    keep = np.ones(len(chosen), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    rows = np.asarray(chosen)[keep]
    x[rows], fun[rows], pgnorm[rows] = pol.x[keep], pol.fun[keep], pol.pgnorm[keep]
    status[rows] = pol.status[keep]
    nit[chosen] += pol.nit
    polished = (np.zeros(len(fun), dtype=bool) if res.polished is None
                else np.asarray(res.polished, dtype=bool).copy())
    polished[rows] = True
    return BatchedResult(x=x, fun=fun, status=status, nit=nit, nfev=res.nfev + pol.nfev,
                         pgnorm=pgnorm, polished=polished)


def slow_starts(res: BatchedResult, groups: np.ndarray, n_per_group: int) -> np.ndarray:
    """The starts that did not converge yet sit below every converged start of their data set
    (or in a data set with none), at most the ``n_per_group`` lowest of each data set: sorted
    indices. ``groups`` (S,) gives each start's data set (a fit, a bootstrap replicate).

    Such a start was still descending when its iteration limit stopped it — crawling along a
    slow, curved valley such as ``E → 0`` with a vanishing exponent while ``A`` absorbs the
    constant — whose floor is the data set's best fit; stopping it there would report a worse
    optimum, or none.
    """
    groups = np.asarray(groups)
    fun = np.where(np.isfinite(res.fun), res.fun, np.inf)
    conv = res.status == StartStatus.CONVERGED
    bar = np.full(int(groups.max(initial=-1)) + 1, np.inf)
    np.minimum.at(bar, groups[conv], fun[conv])
    slow = np.flatnonzero(~conv & (fun < bar[groups]))
    slow = slow[np.lexsort((fun[slow], groups[slow]))]  # by data set, lowest first
    first = np.r_[True, groups[slow][1:] != groups[slow][:-1]]
    start_of = np.maximum.accumulate(np.where(first, np.arange(slow.size), 0))
    return np.sort(slow[np.arange(slow.size) - start_of < n_per_group])


def continue_slow(fun_grad: FunGrad, res: BatchedResult, groups: np.ndarray,
                  lower: np.ndarray, upper: np.ndarray, *, max_iter: int,
                  n_per_group: int = 2, **tol) -> BatchedResult:
    """Continue the :func:`slow_starts` of each data set (``groups``) for up to ``max_iter``
    more iterations (``tol`` as for :func:`minimize_batched`); returns ``res`` with them
    replaced (:func:`with_polish`). Only the ``n_per_group`` lowest of each data set continue,
    so the cost is that of the few slow starts, not of the batch.
    """
    chosen = slow_starts(res, groups, n_per_group)
    if chosen.size == 0 or max_iter < 1:
        return res
    more = minimize_batched(lambda t, rows: fun_grad(t, chosen[rows]), res.x[chosen],
                            lower, upper, max_iter=max_iter, **tol)
    return with_polish(res, chosen, more)
