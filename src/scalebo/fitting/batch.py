"""One law fitted on many data sets that share their inputs, in one batched L-BFGS call.

A law posterior (:mod:`scalebo.search.law_posterior`) fits the same law on S fantasized
tables: the inputs ``X`` (n, k) are the same rows for every table (grid cells, or the union
of every table's envelope rows), only the targets ``y`` (S, n) and the 0/1 weights ``w``
(S, n) that say which rows a table uses differ. :func:`fit_batch` gives every data set its
own block of starts and optimizes all blocks at once with
:func:`scalebo.fitting.optim.minimize_batched` — the same phases as
:func:`scalebo.fitting.robust.run_starts` (screening at SciPy's default tolerances, polishing
each data set's ``n_polish`` best starts, then continuing those still descending below the
data set's best converged start) — and picks each data set's estimate with
:func:`scalebo.fitting.robust.summarize_starts`, so
every data set's outcome is the one :func:`scalebo.fitting.robust.fit_law` gives on it with the same
starts (up to floating-point rounding of the batched sums). A row of weight 0 contributes
exactly nothing, so it is the same as dropping the row (also for identifiability: a data set
whose rows of positive weight have too few distinct inputs gets status ``unidentified``, as
:func:`~scalebo.fitting.robust.fit_law` gives on those rows).

Notation: ``S`` data sets (``n_sets``), ``n`` shared rows, ``k`` input variables, ``p``
parameters, ``n_starts`` starts per data set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalebo.errors import FitError
from scalebo.fitting.identifiability import identification_problem
from scalebo.fitting.optim import BatchedResult, continue_slow, minimize_batched, with_polish
from scalebo.fitting.robust import (
    CONTINUE_FACTOR,
    DEFAULT_HUBER_DELTA,
    N_POLISH,
    POLISH_TOL,
    SCREEN_TOL,
    FitResult,
    make_objective,
    summarize_starts,
)
from scalebo.laws import Law, as_inputs

__all__ = ["BatchFit", "fit_batch"]


@dataclass(frozen=True)
class BatchFit:
    """Outcome of :func:`fit_batch`, one entry per data set.

    Attributes:
        results: The :class:`~scalebo.fitting.robust.FitResult` of each data set (best
            converged start, status converged / bound hit / max iterations / unidentified),
            or None where there is no estimate (too few rows of positive weight, or no start
            with a finite objective).
        errors: Why a data set has no estimate ('' where it has one).
        nfev: Objective evaluations summed over every start of every data set.
    """

    results: tuple[FitResult | None, ...]
    errors: tuple[str, ...]
    nfev: int = 0

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> FitResult | None:
        return self.results[i]

    @property
    def success(self) -> np.ndarray:
        """Mask ``(n_sets,)``: an estimate exists and its status is converged or bound hit."""
        return np.array([r is not None and r.success for r in self.results], dtype=bool)

    @property
    def n_failed(self) -> int:
        """Data sets without a successful estimate (no estimate, max iterations or
        unidentified)."""
        return int(np.count_nonzero(~self.success))


def _check_targets(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Log targets ``(S, n)``; rows of weight 0 are ignored (their log target is set to 0)."""
    used = w > 0
    bad = used & ~(np.isfinite(y) & (y > 0))
    if np.any(bad):
        s, j = np.argwhere(bad)[0]
        raise ValueError(
            f"targets must be positive and finite where the weight is > 0 (log-space fit); "
            f"data set {s}, row {j} has {y[s, j]!r}"
        )
    return np.log(np.where(used, y, 1.0))


def _slice(res: BatchedResult, part: slice) -> BatchedResult:
    return BatchedResult(x=res.x[part], fun=res.fun[part], status=res.status[part],
                         nit=res.nit[part], nfev=res.nfev, pgnorm=res.pgnorm[part],
                         polished=None if res.polished is None else res.polished[part])


def fit_batch(
    law: Law,
    X: np.ndarray,
    y: np.ndarray,
    starts: np.ndarray | None = None,
    *,
    sample_weight: np.ndarray | None = None,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    max_iter: int = 1000,
    n_polish: int | None = N_POLISH,
) -> BatchFit:
    """Fit ``law`` on every data set ``(X, y[s], sample_weight[s])`` in one batched call.

    Args:
        law: The law; ``X`` columns follow ``law.variables``.
        X: Shared inputs in natural units (parameters, tokens, FLOPs), shape ``(n, k)``.
        y: Targets in natural units (loss in nats), shape ``(n_sets, n)``; positive and
            finite wherever the weight is > 0 (ignored, any value, where it is 0).
        starts: Internal parameters ``(n_starts, p)`` shared by every data set, or
            ``(n_sets, n_starts, p)``, one block each; default ``law.start_grid`` of ``X``
            (all rows, so with zero weights it can differ from ``fit_law``'s default).
        sample_weight: Non-negative weight per data set and row, ``(n_sets, n)`` (0/1
            selects rows); None weighs every row 1.
        huber_delta: δ of the Huber loss on natural-log residuals.
        max_iter: L-BFGS iterations per start and phase.
        n_polish: Starts polished per data set (the best finite ones; all if None).

    Returns:
        :class:`BatchFit`. A data set with fewer rows of positive weight than the law has
        parameters, or whose starts all give non-finite objectives, gets None and a reason
        (where :func:`~scalebo.fitting.robust.fit_law` would raise
        :class:`~scalebo.errors.FitError`); one whose rows of positive weight have too few
        distinct inputs gets a result of status ``unidentified`` (as ``fit_law`` does).
    """
    X = as_inputs(X, law.variables)
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    n_sets, n = y.shape
    if X.shape[0] != n:
        raise ValueError(f"X has {X.shape[0]} rows but y has {n} columns")
    if sample_weight is None:
        w = np.ones((n_sets, n))
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != y.shape:
            raise ValueError(f"sample_weight must have shape {y.shape}, got {w.shape}")
        if not np.all(np.isfinite(w) & (w >= 0)):
            raise ValueError("sample_weight must be finite and non-negative")
    log_y = _check_targets(y, w)
    Z = law.prepare(X)
    if starts is None:
        starts = law.start_grid(Z)
    starts = np.asarray(starts, dtype=np.float64)
    if starts.ndim == 2:
        starts = np.broadcast_to(starts, (n_sets, *starts.shape))
    if starts.ndim != 3 or starts.shape[0] != n_sets or starts.shape[2] != law.n_params:
        raise ValueError(f"starts must have shape (n_starts, {law.n_params}) or "
                         f"({n_sets}, n_starts, {law.n_params}); got {starts.shape}")
    n_starts = starts.shape[1]

    n_obs = np.count_nonzero(w > 0, axis=1)
    errors = ["" if k >= law.n_params else
              f"law {law.name!r} has {law.n_params} parameters but only {k} observations"
              for k in n_obs]
    active = np.flatnonzero(n_obs >= law.n_params)
    results: list[FitResult | None] = [None] * n_sets
    if active.size == 0 or n_starts == 0:
        if n_starts == 0:
            errors = [e or "no start given" for e in errors]
        return BatchFit(tuple(results), tuple(errors), 0)

    owner = np.repeat(np.arange(active.size), n_starts)  # data set (of active) of each start
    fg = make_objective(law, Z, log_y[active], huber_delta, w[active])
    res = minimize_batched(lambda t, rows: fg(t, owner[rows]),
                           starts[active].reshape(-1, law.n_params), law.lower, law.upper,
                           max_iter=max_iter, **SCREEN_TOL)
    res = _polish(law, fg, res, owner, n_starts, n_polish, max_iter)
    for a, s in enumerate(active):
        part = _slice(res, slice(a * n_starts, (a + 1) * n_starts))
        try:
            results[s] = summarize_starts(law, part, huber_delta=huber_delta,
                                          n_obs=int(n_obs[s]),
                                          unidentified=identification_problem(law, X, w[s]))
        except FitError as exc:
            errors[s] = str(exc)
    return BatchFit(tuple(results), tuple(errors), int(res.nfev))


def _polish(law: Law, fg, res: BatchedResult, owner: np.ndarray, n_starts: int,
            n_polish: int | None, max_iter: int) -> BatchedResult:
    """Continue each data set's ``n_polish`` best finite starts to tight tolerances, and its
    slow ones further (:func:`~scalebo.fitting.optim.continue_slow`)."""
    fun = np.where(np.isfinite(res.fun), res.fun, np.inf).reshape(-1, n_starts)
    order = np.argsort(fun, axis=1, kind="stable")
    if n_polish is not None:
        order = order[:, :n_polish]
    flat = order + n_starts * np.arange(fun.shape[0])[:, None]
    chosen = np.sort(flat[np.isfinite(np.take_along_axis(fun, order, axis=1))])
    if chosen.size == 0:
        return res
    pol = minimize_batched(lambda t, rows: fg(t, owner[chosen[rows]]), res.x[chosen],
                           law.lower, law.upper, max_iter=max_iter, **POLISH_TOL)
    return continue_slow(lambda t, rows: fg(t, owner[rows]), with_polish(res, chosen, pol),
                         owner, law.lower, law.upper, max_iter=CONTINUE_FACTOR * max_iter,
                         **POLISH_TOL)
