"""Fitting formula laws (:mod:`scalebo.laws.formula`) on log or natural residuals.

Two objectives, both summed over observations and minimized from every start at once with
the batched L-BFGS of :mod:`scalebo.fitting.optim`:

* ``residuals="log"`` — Huber (δ = 1e-3) on ``log L̂ − log L``: the starts of
  :func:`scalebo.fitting.robust.fit_law` (targets must be positive);
* ``residuals="natural"`` — on ``L̂ − L`` in the response's own units (any sign, e.g. the
  negative normalized loss of ScaleBench's vocab task): least squares ``½·Σ r²`` by default
  (``huber_delta=None``), or Huber with the given δ in response units.

Starts are drawn as in ScaleBench (Li et al. 2026): log-uniform inside the bounds for
parameters with a positive lower bound, uniform otherwise, seeded
(:meth:`~scalebo.laws.formula.FormulaLaw.random_starts`). As in :func:`fit_law`, every start
runs to screening tolerances and the best 64 are polished to tight ones; the status is
converged / bound hit / max iterations, or unidentified when the inputs have fewer distinct
points than the law has parameters (:mod:`scalebo.fitting.identifiability`).

Natural least squares (``solver="lm"``, the default) instead screens every start by only
``LM_SCREEN_ITER`` (60) L-BFGS iterations, runs batched Levenberg–Marquardt
(:mod:`scalebo.fitting.lm`) from the screened points and, as a second pass, from the raw
starts, keeps per start the lowest point, continues the (≤ 4) unconverged starts better than
every converged one to 2000 iterations in all (slow valleys: vocab's sl_2 reaches its
optimum after 422–533; vocab sl_6 has a valley along ``A → ∞, α → 0, c0 → −∞`` where
``A·P^−α`` becomes a log term, whose lowest point at ``c0``'s bound took ~1,160: stopped at
800, its best start was left unconverged, the best *converged* start was a worse optimum
that extrapolates badly, SSE 5.75 vs 4.90, target R² 0.58 vs 0.98), and refines the best
``LM_REFINE`` (2) by the Gauss–Newton step below. vocab sl_2, 64 starts, 520–807 rows:
42 s per fit → about 1.5 s (the L-BFGS polish to 1e-12 ran a third of the starts to the
2000-iteration limit). The optimum is the same to 1e-6 on most
ScaleBench fits, on some another local optimum (lower or higher SSE), as the basin a start
ends in depends on the optimizer's path. The raw-start pass costs ~45 % of a fit and rarely
wins, but without it sl_2 missed its optimum on 2 of 36 baseline checkpoints (R² −0.09,
−0.71; 0.99, 0.97 with it). ``solver="lbfgs"`` keeps the previous path.

Then, for both objectives, the best ``N_REFINE`` polished starts are refined by a bounded
Gauss–Newton trust-region solver (:func:`scipy.optimize.least_squares`, ``trf`` with
Jacobian scaling of the parameters); a refined start replaces its L-BFGS point only when
it lowers the objective. L-BFGS alone stalls ("converges" by its relative-decrease test with
a projected gradient far from zero) on badly scaled laws, e.g. a coefficient with bounds
±1e6 multiplying ``U**p`` with ``U ~ 1e9``, whose partials differ by many orders of
magnitude; Gauss–Newton is invariant to that scaling. (Log residuals, 16 runs of
``E + A/N**a + B/D**b`` with ``A, B`` bounded by 1e6: L-BFGS alone stopped at 180× the
reference SSE of 300 ``least_squares`` starts, and reported it converged.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from scalebo.errors import FitError, RunTableError
from scalebo.fitting.defaults import DEFAULT_HUBER_DELTA
from scalebo.fitting.identifiability import identification_problem, with_exact_fit_note
from scalebo.fitting.lm import minimize_lm_batched
from scalebo.fitting.optim import (
    BatchedResult,
    StartStatus,
    minimize_batched,
    projected_gradient,
    slow_starts,
    with_polish,
)
from scalebo.fitting.robust import (
    BLOCK_ELEMENTS,
    N_POLISH,
    POLISH_TOL,
    SCREEN_TOL,
    FitResult,
    make_objective,
    run_starts,
    summarize_starts,
)
from scalebo.laws.base import as_inputs
from scalebo.laws.formula import FormulaLaw

__all__ = ["DEFAULT_N_STARTS", "fit_formula", "fit_formula_frame", "natural_objective",
           "residual_jacobian", "table_inputs"]

#: Starts per fit (ScaleBench's protocol uses 64).
DEFAULT_N_STARTS = 64
#: L-BFGS iterations per start (ScaleBench: L-BFGS-B with maxiter 2000).
DEFAULT_MAX_ITER = 2000
#: Best polished starts refined by Gauss–Newton (natural residuals; module docstring).
N_REFINE = 4

#: ``solver="lm"``: L-BFGS screening iterations, LM iterations per pass, unconverged starts
#: continued and their total LM iterations, starts refined by ``least_squares`` and its
#: evaluation limit (module docstring).
LM_SCREEN_ITER = 60
LM_MAX_ITER = 300
LM_CONTINUE = 4
LM_CONTINUE_ITER = 2000
LM_REFINE = 2
LM_REFINE_NFEV = 100

Residuals = Literal["log", "natural"]
Solver = Literal["lm", "lbfgs"]


def natural_objective(
    law: FormulaLaw,
    Z: np.ndarray,
    y: np.ndarray,
    delta: float = np.inf,
    weights: np.ndarray | None = None,
):
    """``fun_grad(theta (s, p), rows (s,))`` for :func:`~scalebo.fitting.optim.minimize_batched`:
    ``Σ_n w_n · huber_δ(L̂_n − y_n)`` (``δ = inf``: ``½·Σ w r²``) and its gradient.

    ``huber_δ(r) = ψ·r − ψ²/2`` with ``ψ = clip(r, −δ, δ)``; ``ψ·w`` is the cotangent of the
    gradient. ``weights`` is ``None``, ``(n,)`` or per-start ``(S, n)`` (bootstrap counts,
    indexed by ``rows``). Starts are evaluated in blocks of about ``BLOCK_ELEMENTS``
    start-observation pairs, as :func:`scalebo.fitting.robust.make_objective`.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    per_start = weights is not None and np.ndim(weights) == 2
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    w = w if w is None or per_start else w.ravel()[None, :]
    block = max(1, BLOCK_ELEMENTS // max(Z.shape[0], 1))

    def block_fun_grad(theta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pred, vjp = law.predict_natural_vjp(theta, Z)
        r = np.subtract(pred, y[None, :], out=pred)
        psi = np.clip(r, -delta, delta)
        cot = psi if w is None else psi * (w[rows] if per_start else w)
        with np.errstate(invalid="ignore", over="ignore"):
            fun = np.einsum("sn,sn->s", cot, r) - 0.5 * np.einsum("sn,sn->s", cot, psi)
        return fun, vjp(cot)

    def fun_grad(theta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if theta.shape[0] <= block:
            return block_fun_grad(theta, rows)
        fun, grad = np.empty(theta.shape[0]), np.empty(theta.shape)
        for lo in range(0, theta.shape[0], block):
            part = slice(lo, lo + block)
            fun[part], grad[part] = block_fun_grad(theta[part], rows[part])
        return fun, grad

    return fun_grad


def residual_jacobian(law: FormulaLaw, Z: np.ndarray, y: np.ndarray,
                      weights: np.ndarray | None = None):
    """``resid_jac(theta (s, p)) -> (r (s, n), J (s, n, p))`` of the natural residuals
    ``√w·(L̂ − y)`` for :func:`~scalebo.fitting.lm.minimize_lm_batched`; ``weights`` ``(n,)``."""
    y = np.asarray(y, dtype=np.float64).ravel()
    sw = None if weights is None else np.sqrt(np.asarray(weights, dtype=np.float64).ravel())

    def resid_jac(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value, partials = law._evaluate(theta, Z)
        J = np.empty((*value.shape, len(partials)))
        for j, d in enumerate(partials):
            J[:, :, j] = d  # broadcasts a constant, (S, 1), (1, n) or (S, n) partial
        r = value - y[None, :]
        if sw is not None:
            r, J = r * sw, J * sw[None, :, None]
        return r, J

    return resid_jac


def _run_natural(law: FormulaLaw, Z: np.ndarray, y: np.ndarray, starts: np.ndarray,
                 delta: float, weights: np.ndarray | None, max_iter: int,
                 solver: Solver = "lm") -> BatchedResult:
    """``solver="lm"`` on least squares (``delta = inf``, no per-start weights): a short
    L-BFGS screen, then batched Levenberg–Marquardt from the screened points and from the
    raw starts (each kept where it lowers the objective), and the best ``LM_REFINE`` refined
    by :func:`_refine`. Otherwise (``"lbfgs"``, Huber, bootstrap weights): screen every
    start by L-BFGS (SciPy's default tolerances, ``max_iter``), polish the best ``N_POLISH``
    to tight tolerances and refine the best ``N_REFINE``."""
    fg = natural_objective(law, Z, y, delta, weights)
    lm = solver == "lm" and np.isinf(delta) and (weights is None or np.ndim(weights) == 1)
    screen_iter = min(max_iter, LM_SCREEN_ITER) if lm else max_iter
    res = minimize_batched(fg, starts, law.lower, law.upper, max_iter=screen_iter, **SCREEN_TOL)
    finite = np.flatnonzero(np.isfinite(res.fun))
    chosen = finite[np.argsort(res.fun[finite], kind="stable")[:N_POLISH]]
    if lm:
        rj = residual_jacobian(law, Z, y, weights)
        lm_iter = min(max_iter, LM_MAX_ITER)
        if chosen.size:
            pol = minimize_lm_batched(rj, res.x[chosen], law.lower, law.upper, max_iter=lm_iter)
            res = _keep_better(res, chosen, pol)
        raw = minimize_lm_batched(rj, starts, law.lower, law.upper, max_iter=lm_iter)
        res = _keep_better(res, np.arange(starts.shape[0]), raw)
        # the few unconverged starts below every converged one continue (a slow valley)
        slow = slow_starts(res, np.zeros(len(res.fun), dtype=int), LM_CONTINUE)
        if slow.size and max_iter > lm_iter:
            more = minimize_lm_batched(rj, res.x[slow], law.lower, law.upper,
                                       max_iter=min(max_iter, LM_CONTINUE_ITER) - lm_iter)
            res = _keep_better(res, slow, more)
        return _refine(law, Z, y, res, fg, delta, weights, min(max_iter, LM_REFINE_NFEV),
                       n_refine=LM_REFINE)
    if chosen.size == 0:
        return res
    pol = minimize_batched(fg, res.x[chosen], law.lower, law.upper, max_iter=max_iter,
                           **POLISH_TOL)
    return _refine(law, Z, y, with_polish(res, chosen, pol), fg, delta, weights, max_iter)


def _keep_better(res: BatchedResult, chosen: np.ndarray, pol: BatchedResult) -> BatchedResult:
    """``res`` with rows ``chosen`` replaced by ``pol``'s (point, objective, status) where
    that does not raise the objective: an LM run that cannot lower a screened point's
    objective stops there converged, which makes the point a converged start."""
    with np.errstate(invalid="ignore"):
        better = np.isfinite(pol.fun) & ~(pol.fun > res.fun[chosen])
    return with_polish(res, chosen, pol, keep=better)


def _refine(law: FormulaLaw, Z: np.ndarray, y: np.ndarray, res: BatchedResult, fg,
            delta: float, weights: np.ndarray | None, max_iter: int,
            n_refine: int = N_REFINE, *, log_space: bool = False) -> BatchedResult:
    """``res`` with its best ``n_refine`` finite starts refined by bounded Gauss–Newton
    (``least_squares``: ``trf``, ``x_scale="jac"``, Huber loss when ``delta`` is finite), on
    natural residuals ``L̂ − y`` or, with ``log_space``, on log residuals ``log L̂ − log y``
    (Jacobian ``∂L̂/∂θ / L̂``); a start is replaced only where the refined point has a lower
    objective ``fg``. Weights are a factor ``√w`` on the residuals of least squares; with
    a Huber loss only integer weights (bootstrap counts) are refined, as repeated rows."""
    finite = np.flatnonzero(np.isfinite(res.fun))
    chosen = finite[np.argsort(res.fun[finite], kind="stable")[:n_refine]]
    if chosen.size == 0:
        return res
    loss = "linear" if np.isinf(delta) else "huber"
    rows, sw = np.arange(y.shape[0]), None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if loss == "linear":
            sw = np.sqrt(w)
        elif np.all(w == np.round(w)) and np.all(w >= 0):
            rows = np.repeat(rows, w.astype(np.int64))  # Σ w·huber(r) over repeated rows
        else:
            return res
    target = np.log(y[rows]) if log_space else y[rows]
    big = 1e3 * (1.0 + float(np.max(np.abs(target))))  # stands in for a non-finite residual
    Zr = Z[rows]
    lower, upper = law.lower, law.upper

    def resid(theta: np.ndarray) -> np.ndarray:
        f = law.predict_natural(theta[None, :], Zr)[0]
        with np.errstate(all="ignore"):
            r = (np.log(f) if log_space else f) - target
        r = np.where(np.isfinite(r), r, big)
        return r if sw is None else r * sw

    def jac(theta: np.ndarray) -> np.ndarray:
        f, partials = law._evaluate(theta[None, :], Zr)
        J = np.column_stack([np.broadcast_to(d, (1, Zr.shape[0]))[0] for d in partials])
        if log_space:
            J = J / np.broadcast_to(f, (1, Zr.shape[0]))[0][:, None]
        J = np.where(np.isfinite(J), J, 0.0)
        return J if sw is None else J * sw[:, None]

    x, fun, status = res.x.copy(), res.fun.copy(), res.status.copy()
    pgnorm, nit, nfev = res.pgnorm.copy(), res.nit.copy(), res.nfev
    for i in chosen:
        x0 = np.clip(x[i], lower, upper)
        x0 = np.where(x0 <= lower, lower + 1e-10 * (upper - lower), x0)  # trf: strictly inside
        x0 = np.where(x0 >= upper, upper - 1e-10 * (upper - lower), x0)
        try:
            with np.errstate(all="ignore"):
                out = least_squares(resid, x0, jac=jac, bounds=(lower, upper), x_scale="jac",
                                    method="trf", loss=loss,
                                    f_scale=1.0 if loss == "linear" else float(delta),
                                    max_nfev=max_iter)
        except (ValueError, np.linalg.LinAlgError):
            continue
        xr = np.clip(out.x, lower, upper)
        fr, gr = fg(xr[None, :], np.array([i]))
        nfev += int(out.nfev) + 1
        if np.isfinite(fr[0]) and np.all(np.isfinite(gr)) and fr[0] < fun[i]:
            x[i], fun[i] = xr, float(fr[0])
            status[i] = StartStatus.CONVERGED if out.status > 0 else StartStatus.MAX_ITER
            pgnorm[i] = float(np.abs(projected_gradient(xr[None, :], gr, lower, upper)).max())
            nit[i] += int(out.nfev)
    return BatchedResult(x=x, fun=fun, status=status, nit=nit, nfev=nfev, pgnorm=pgnorm)


def fit_formula(
    law: FormulaLaw,
    X: np.ndarray,
    y: np.ndarray,
    *,
    residuals: Residuals = "log",
    n_starts: int = DEFAULT_N_STARTS,
    seed: int | None = 0,
    huber_delta: float | None = None,
    starts: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
    max_iter: int = DEFAULT_MAX_ITER,
    solver: Solver = "lm",
) -> FitResult:
    """Fit a formula law to inputs ``X`` (n, k), columns ``law.variables``, and targets ``y``.

    Args:
        law: the formula law.
        X: inputs in natural units.
        y: response in natural units (positive for ``residuals="log"``).
        residuals: ``"log"`` (Huber on log residuals, via :func:`fit_law`) or ``"natural"``
            (least squares, or Huber, on natural residuals).
        n_starts: random starts drawn when ``starts`` is not given.
        seed: seed of the start draw.
        huber_delta: δ; ``None`` = 1e-3 for log residuals and least squares (δ = ∞) for natural
            ones (then the result's ``huber_delta`` is ``inf`` and ``fun`` is ``½·Σ w r²``).
        starts: explicit internal start vectors ``(S, p)`` (see ``law.param_names``).
        sample_weight: optional non-negative weight per observation ``(n,)``.
        max_iter: iteration limit per start of each optimizer stage (L-BFGS screen and
            polish, Levenberg–Marquardt and ``least_squares`` evaluations; the ``lm`` stages
            are further capped by ``LM_SCREEN_ITER`` / ``LM_MAX_ITER`` / ``LM_REFINE_NFEV``).
        solver: natural least squares only: ``"lm"`` (default; fast, module docstring) or
            ``"lbfgs"`` (the slower screen + polish of every start used before).

    Returns:
        :class:`~scalebo.fitting.robust.FitResult`; status ``unidentified`` when the inputs
        have fewer distinct points than parameters. Raises :class:`FitError` when there are
        fewer observations than parameters or no start gives a finite objective.
    """
    if residuals not in ("log", "natural"):
        raise ValueError(f"residuals must be 'log' or 'natural', got {residuals!r}")
    if starts is None:
        starts = law.random_starts(n_starts, seed)
    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    X = as_inputs(X, law.variables)
    y = np.asarray(y, dtype=np.float64).ravel()
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    if not np.all(np.isfinite(y)):
        bad = np.flatnonzero(~np.isfinite(y))
        raise ValueError(f"targets must be finite; rows {bad[:10].tolist()} are not")
    if y.shape[0] < law.n_params:
        raise FitError(f"law {law.name!r} has {law.n_params} parameters but only "
                       f"{y.shape[0]} observations")
    if residuals == "log":  # fit_law's batched starts, then the Gauss–Newton refinement
        delta = DEFAULT_HUBER_DELTA if huber_delta is None else float(huber_delta)
        res = run_starts(law, X, y, starts, huber_delta=delta, sample_weight=sample_weight,
                         max_iter=max_iter)
        Z, log_y = law.prepare(X), np.log(y)
        fg = make_objective(law, Z, log_y, delta, sample_weight)
        res = _refine(law, Z, y, res, fg, delta, sample_weight, max_iter, log_space=True)
    else:
        delta = np.inf if huber_delta is None else float(huber_delta)
        if not delta > 0:  # ∞: least squares
            raise ValueError(f"huber_delta must be > 0 (δ in response units; None for least "
                             f"squares), got {huber_delta!r}")
        res = _run_natural(law, law.prepare(X), y, starts, delta, sample_weight, max_iter,
                           solver)
    why = identification_problem(law, X, sample_weight)
    return with_exact_fit_note(summarize_starts(law, res, huber_delta=delta, n_obs=y.shape[0],
                                                unidentified=why), X, sample_weight)


def table_inputs(law: FormulaLaw, frame: pd.DataFrame,
                 variable_map: Mapping[str, str] | None = None) -> np.ndarray:
    """Inputs ``(n, k)`` of ``law`` from a table: column ``variable_map.get(v, v)`` per variable.

    Raises:
        RunTableError: a variable missing from the table (naming it and the columns
            present), a mapped name the law does not use as an input, or non-numeric columns.
    """
    mapping = dict(variable_map or {})
    extra = [k for k in mapping if k not in law.variables]
    if extra:
        raise RunTableError(f"variable map names {extra}, which law {law.name!r} does not use "
                            f"as inputs; its inputs are {list(law.variables)}")
    missing = [v + (f" (mapped to {mapping[v]!r})" if v in mapping else "")
               for v in law.variables if mapping.get(v, v) not in frame.columns]
    if missing:
        raise RunTableError(f"law {law.name!r} needs variable(s) {', '.join(missing)}, not "
                            f"columns of the table; columns present: {list(frame.columns)}")
    try:
        return frame[[mapping.get(v, v) for v in law.variables]].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        from scalebo.fitting.formula_checks import first_non_number

        raise RunTableError(first_non_number(frame, law.variables, mapping) or f"law "
                            f"{law.name!r}: input columns are not numeric: {exc}") from None


def fit_formula_frame(
    law: FormulaLaw,
    frame: pd.DataFrame,
    response: str,
    *,
    variable_map: Mapping[str, str] | None = None,
    **kwargs,
) -> FitResult:
    """:func:`fit_formula` on a table: inputs from :func:`table_inputs`, target column
    ``response``; ``kwargs`` go to :func:`fit_formula`."""
    if response not in frame.columns:
        raise RunTableError(f"response column {response!r} is not in the table; columns "
                            f"present: {list(frame.columns)}")
    X = table_inputs(law, frame, variable_map)
    try:
        y = frame[response].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RunTableError(f"response column {response!r} is not numeric: {exc}") from exc
    return fit_formula(law, X, y, **kwargs)
