"""The robust multi-start estimator: Huber loss on log residuals, summed, L-BFGS from a grid.

For a law with log prediction ``log L̂(θ; X)`` and observations ``L`` the objective is::

    J(θ) = Σ_n w_n · huber_δ(log L̂(θ; X_n) − log L_n)

with ``huber_δ(r) = r²/2`` for ``|r| ≤ δ`` and ``δ·(|r| − δ/2)`` otherwise (Hoffmann et al.
2022, App. D.2; δ = 1e-3 by default). The sum (not the mean) matters: a mean makes the
gradient tiny and stops L-BFGS early (Besiroglu et al. 2024); :mod:`scalebo.fitting.huber`
computes it. Every start of the grid is optimized in one vectorized batch
(:mod:`scalebo.fitting.optim`); the estimate is the best converged start, once the starts still
descending below it at the iteration limit (a slow valley) have been continued. Inputs with
fewer distinct points than the law needs are still fitted, but the result's status is
:attr:`FitStatus.UNIDENTIFIED` (:mod:`scalebo.fitting.identifiability`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from scalebo.errors import FitError
from scalebo.fitting.defaults import DEFAULT_HUBER_DELTA
from scalebo.fitting.huber import (
    BLOCK_ELEMENTS,
    huber,
    huber_grad,
    log_targets,
    make_objective,
    objective,
)
from scalebo.fitting.identifiability import identification_problem, with_exact_fit_note
from scalebo.fitting.optim import (
    BatchedResult,
    StartStatus,
    continue_slow,
    minimize_batched,
    with_polish,
)
from scalebo.laws import Law, as_inputs

__all__ = [  # the objective's names are re-exported from scalebo.fitting.huber
    "BLOCK_ELEMENTS", "CONTINUE_FACTOR", "DEFAULT_HUBER_DELTA", "N_POLISH", "POLISH_TOL",
    "SCREEN_TOL", "FitResult", "FitStatus", "fit_frame", "fit_law", "huber", "huber_grad",
    "make_objective", "objective", "run_starts", "summarize_starts",
]


class FitStatus(StrEnum):
    """How a fit went."""

    CONVERGED = "converged"
    """The best start converged strictly inside the bounds."""
    BOUND_HIT = "bound hit"
    """The best start converged with a parameter at a bound: widen the bounds or distrust it."""
    MAX_ITER = "max iterations"
    """No start converged within the iteration limit; the best unconverged start is returned."""
    UNIDENTIFIED = "unidentified"
    """The inputs cannot identify the law (e.g. fewer distinct points than parameters): the
    best start is returned, but other parameters fit as well; the message says why."""
    FAILED = "failed"
    """Reserved for results built after an exception (never returned by :func:`fit_law`)."""


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit_law` (field names follow SciPy's ``OptimizeResult``).

    Attributes:
        law: the fitted law.
        x: best internal parameter vector, shape ``(p,)`` (see ``law.param_names``).
        fun: objective at ``x`` (summed Huber loss of log residuals).
        status: :class:`FitStatus`.
        message: human-readable account of the status.
        nit: iterations of the best start.
        n_starts: starts tried.
        n_converged: starts that converged.
        n_agree: of the ``n_compared`` starts, those whose objective is within
            ``1e-6·|fun| + 1e-14`` of ``fun`` and parameters within 1e-3 (abs. + rel.) of ``x``.
        huber_delta: δ used.
        n_obs: number of observations fitted.
        converged_x: parameters of every converged start, sorted by objective, ``(k, p)``.
        converged_fun: their objectives, ``(k,)``.
        n_compared: the converged starts agreement is judged among: only the polished ones
            (the best ``n_polish``, at the precision it is judged at) when not all were;
            None (a result built by hand) means all converged starts.
    """

    law: Law
    x: np.ndarray
    fun: float
    status: FitStatus
    message: str
    nit: int
    n_starts: int
    n_converged: int
    n_agree: int
    huber_delta: float
    n_obs: int
    converged_x: np.ndarray = field(repr=False)
    converged_fun: np.ndarray = field(repr=False)
    n_compared: int | None = None

    @property
    def params(self) -> dict[str, float]:
        """Natural parameters (e.g. ``E``, ``A``, ``alpha``)."""
        return self.law.natural(self.x)

    @property
    def success(self) -> bool:
        """True for a usable estimate: status converged or bound hit (not max iterations,
        not unidentified)."""
        return self.status in (FitStatus.CONVERGED, FitStatus.BOUND_HIT)

    @property
    def at_bound(self) -> tuple[str, ...]:
        """Natural names (``E``, ``alpha``, …) of the parameters at a bound of the law, in
        the law's order; empty when none is (the test behind :attr:`FitStatus.BOUND_HIT`)."""
        names = list(self.law.natural(self.x))
        return tuple(names[i] for i in np.flatnonzero(bound_mask(self.law, self.x)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        return (f"FitResult(law={self.law.name!r}, status='{self.status}', {shown}, "
                f"objective={self.fun:.4g}, n_obs={self.n_obs}, "
                f"agree={self.n_agree}/{self.n_starts} starts)")

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Prediction in natural units at inputs ``X`` of shape ``(n, k)`` (k = variables; a
        DataFrame's columns are taken by these names)."""
        return self.law.predict(self.x, X)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "law": self.law.name,
            "variables": list(self.law.variables),
            "params": self.params,
            "internal_params": dict(zip(self.law.param_names, map(float, self.x), strict=True)),
            "objective": self.fun,
            "status": str(self.status),
            "message": self.message,
            "nit": self.nit,
            "n_starts": self.n_starts,
            "n_converged": self.n_converged,
            "n_agree": self.n_agree,
            "n_compared": self.n_converged if self.n_compared is None else self.n_compared,
            "huber_delta": self.huber_delta,
            "n_obs": self.n_obs,
        }


#: Screening tolerances for every start, then polishing tolerances for the best ones.
SCREEN_TOL = {"gtol": 1e-5, "ftol": 1e7 * np.finfo(float).eps, "ftol_floor": 1.0}
POLISH_TOL = {"gtol": 1e-10, "ftol": 1e-12, "ftol_floor": 1e-300}
N_POLISH = 64
#: A polished start still descending below its data set's best converged start (a slow
#: valley) gets this many times ``max_iter`` more iterations. Measured on six 15-cell
#: Chinchilla bootstraps (200 replicates each): 0 / 1 / 2 / 4 leave 99 / 3 / 1 / 1 replicates
#: without a converged start in 6.0 / 7.1 / 7.2 / 7.5 s.
CONTINUE_FACTOR = 2


def run_starts(
    law: Law,
    X: np.ndarray,
    y: np.ndarray,
    starts: np.ndarray,
    *,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    sample_weight: np.ndarray | None = None,
    max_iter: int = 1000,
    n_polish: int | None = N_POLISH,
    groups: np.ndarray | None = None,
) -> BatchedResult:
    """Optimize from every row of ``starts`` (S, p); returns the per-start outcome.

    Two phases: every start runs to SciPy's default L-BFGS-B tolerances (``pgtol = 1e-5``,
    decrease ≤ ``1e7·eps·max(|f|, 1)`` per iteration); then the ``n_polish`` best finite
    starts (all if ``None``; per replicate when ``sample_weight`` is per-start) continue to
    tight tolerances (1e-12), so the reported optimum is precise while the
    thousands of starts that end in the same or worse basins stop early. The polished
    starts' status is their final one, after the slow ones below their data set's best
    converged start got up to :data:`CONTINUE_FACTOR` × ``max_iter`` more iterations
    (:func:`~scalebo.fitting.optim.continue_slow`). ``groups`` (S,): each start's data set
    (a bootstrap replicate); default one for all, or one per start with per-start weights.
    """
    Z = law.prepare(as_inputs(X, law.variables))
    log_y = log_targets(y)
    fg = make_objective(law, Z, log_y, huber_delta, sample_weight)
    res = minimize_batched(fg, starts, law.lower, law.upper, max_iter=max_iter, **SCREEN_TOL)
    finite = np.flatnonzero(np.isfinite(res.fun))
    if n_polish is not None and finite.size > n_polish:
        chosen = finite[np.argsort(res.fun[finite], kind="stable")[:n_polish]]
    else:
        chosen = finite
    if chosen.size == 0:
        return res
    weights = sample_weight
    if sample_weight is not None and np.ndim(sample_weight) == 2:
        weights = np.asarray(sample_weight)[chosen]
    fg_polish = make_objective(law, Z, log_y, huber_delta, weights)
    pol = minimize_batched(
        fg_polish, res.x[chosen], law.lower, law.upper, max_iter=max_iter, **POLISH_TOL
    )
    if groups is None:
        groups = np.arange(len(starts)) if np.ndim(weights) == 2 else np.zeros(len(starts), int)
    return continue_slow(fg, with_polish(res, chosen, pol), groups, law.lower, law.upper,
                         max_iter=CONTINUE_FACTOR * max_iter, **POLISH_TOL)


def bound_mask(law: Law, x: np.ndarray) -> np.ndarray:
    """Which internal parameters of ``x`` lie at a finite bound of ``law`` (within 1e-8 of
    the bound's span, at least 1e-8), ``(p,)`` bool."""
    span = law.upper - law.lower
    tol = 1e-8 * np.maximum(span, 1)
    at = (np.abs(x - law.lower) <= tol) | (np.abs(x - law.upper) <= tol)
    return at & np.isfinite(span)


def bound_message(law: Law, x: np.ndarray, at_bound: np.ndarray) -> str:
    """``converged with a, E at a bound (a = 0.4 at its lower bound, E = 5 at its upper
    bound)``: the parameters in the user's (natural) names with their values, not the
    optimizer's (``log_a``). ``x``: internal parameters; ``at_bound``: mask of those at a
    bound (:func:`bound_mask`)."""
    natural = law.natural(x)
    names = list(natural)
    hit = [i for i in range(len(x)) if at_bound[i]]
    said = ", ".join(
        f"{names[i]} = {natural[names[i]]:.4g} at its "
        f"{'lower' if abs(x[i] - law.lower[i]) <= abs(x[i] - law.upper[i]) else 'upper'} bound"
        for i in hit)
    return f"converged with {', '.join(names[i] for i in hit)} at a bound ({said})"


def summarize_starts(
    law: Law, res: BatchedResult, *, huber_delta: float, n_obs: int, unidentified: str = ""
) -> FitResult:
    """Pick the best converged start and build a :class:`FitResult` (raises FitError).

    ``unidentified``: why the inputs cannot identify the law
    (:func:`~scalebo.fitting.identifiability.identification_problem`); when not empty the
    status is :attr:`FitStatus.UNIDENTIFIED` whatever the optimizer did, and the message
    gives the reason first.
    """
    finite = np.isfinite(res.fun) & (res.status != StartStatus.NON_FINITE)
    if not np.any(finite):
        raise FitError(
            f"law {law.name!r}: all {len(res.fun)} starts produced non-finite objectives; "
            "check that the data are positive and the start grid fits their scale"
        )
    conv = finite & (res.status == StartStatus.CONVERGED)
    pool = conv if np.any(conv) else finite
    order = np.flatnonzero(pool)[np.argsort(res.fun[pool], kind="stable")]
    best = order[0]
    x = res.x[best].copy()
    fun = float(res.fun[best])
    conv_order = np.flatnonzero(conv)[np.argsort(res.fun[conv], kind="stable")]
    judged = conv  # only polished starts reach the precision agreement is judged at
    if res.polished is not None and 0 < np.sum(conv & res.polished) < conv.sum():
        judged = conv & res.polished
    close_f = res.fun[judged] <= fun + 1e-6 * abs(fun) + 1e-14
    close_x = np.all(np.abs(res.x[judged] - x) <= 1e-3 * (1 + np.abs(x)), axis=1)
    n_agree, n_compared = int(np.sum(close_f & close_x)), int(judged.sum())
    at_bound = bound_mask(law, x)
    if not np.any(conv):
        status = FitStatus.MAX_ITER
        message = (
            f"no start converged within the iteration limit; best of {len(res.fun)} returned "
            f"(projected gradient {res.pgnorm[best]:.2e})"
        )
    elif np.any(at_bound):
        status = FitStatus.BOUND_HIT
        message = bound_message(law, x, at_bound)
    else:
        status = FitStatus.CONVERGED
        message = f"converged; {n_agree} of {n_compared} converged starts agree"
        if n_compared < conv.sum():
            message = (f"converged; {n_agree} of the {n_compared} best converged starts, "
                       f"polished, agree ({int(conv.sum())} converged)")
    if unidentified:
        status = FitStatus.UNIDENTIFIED
        message = f"cannot be identified: {unidentified} (optimizer: {message})"
    return FitResult(
        law=law,
        x=x,
        fun=fun,
        status=status,
        message=message,
        nit=int(res.nit[best]),
        n_starts=len(res.fun),
        n_converged=int(conv.sum()),
        n_agree=n_agree,
        huber_delta=huber_delta,
        n_obs=n_obs,
        converged_x=res.x[conv_order],
        converged_fun=res.fun[conv_order],
        n_compared=n_compared,
    )


def fit_law(
    law: Law,
    X: np.ndarray,
    y: np.ndarray,
    *,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    starts: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
    max_iter: int = 1000,
) -> FitResult:
    """Fit ``law`` to inputs ``X`` (n, k) and positive targets ``y`` (n,) robustly.

    Args:
        law: the law (see :mod:`scalebo.laws`); ``X`` columns follow ``law.variables``.
        X: inputs in natural units (parameters, tokens, FLOPs, or loss in nats).
        y: targets in natural units (loss in nats, or error in (0, 1]).
        huber_delta: δ of the Huber loss on natural-log residuals.
        starts: start grid, shape ``(S, p)`` in internal parameters; default
            ``law.start_grid(prepared data)`` (4,500 starts for Chinchilla).
        sample_weight: optional non-negative weight per observation, shape ``(n,)``.
        max_iter: L-BFGS iteration limit per start and phase (a start still descending
            below the best converged one continues for up to
            :data:`CONTINUE_FACTOR` × ``max_iter`` more).

    Returns:
        :class:`FitResult` with the best converged start; its status is
        :attr:`FitStatus.UNIDENTIFIED` (not converged) when the inputs have too few distinct
        points for the law (rows of zero ``sample_weight`` do not count).

    Raises:
        FitError: fewer observations than parameters, or no start gives a finite objective.
        ValueError: an input or target the law cannot take (``y`` ≤ 0 or not finite, an
            input ≤ 0 of a power law; the message names the 0-based position), a DataFrame
            ``X`` without the law's variables as columns, ``huber_delta`` not > 0.
    """
    X = as_inputs(X, law.variables)
    y = np.asarray(y, dtype=np.float64).ravel()
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    n_min = law.n_params
    if y.shape[0] < n_min:
        raise FitError(
            f"law {law.name!r} has {n_min} parameters but only {y.shape[0]} observations"
        )
    if starts is None:
        starts = law.start_grid(law.prepare(X))
    res = run_starts(law, X, y, np.atleast_2d(starts), huber_delta=huber_delta,
                     sample_weight=sample_weight, max_iter=max_iter)
    why = identification_problem(law, X, sample_weight)
    return with_exact_fit_note(summarize_starts(law, res, huber_delta=huber_delta,
                                                n_obs=y.shape[0], unidentified=why),
                               X, sample_weight)


def fit_frame(
    law: Law,
    frame: pd.DataFrame,
    *,
    target: str = "loss",
    columns: Mapping[str, str] | None = None,
    **kwargs,
) -> FitResult:
    """:func:`fit_law` on a DataFrame: inputs are the columns named ``law.variables``
    (renamed through ``columns`` if given), the target is ``target``."""
    columns = dict(columns or {})
    names = [columns.get(v, v) for v in law.variables]
    missing = [c for c in [*names, target] if c not in frame.columns]
    if missing:
        raise ValueError(f"law {law.name!r} needs columns {missing}; the table has "
                         f"{list(frame.columns)}")
    X = frame[names].to_numpy(dtype=np.float64)
    return fit_law(law, X, frame[target].to_numpy(dtype=np.float64), **kwargs)
