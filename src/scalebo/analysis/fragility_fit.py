"""Fitting one variant of a fragility analysis (:mod:`scalebo.analysis.fragility`): its
start policy, its result row, and the refit on the full start grid when the reduced starts'
best is not agreed by another start.

Starts. Each variant starts from (a) the base fit's distinct converged optima (up to
``n_optima``) and (b) the ``n_grid`` starts of the law's full grid with the lowest *initial*
objective on the variant's data (one vectorized evaluation of the grid), screened with at most
``max_iter`` iterations, the best ``n_polish`` polished. When no other start agrees with the
best one (``n_agree`` < 2: a lone optimum, which on Gemstones' cool_end 'every 5th checkpoint'
was a worse one, objective 3.52496e-4 and β 0.304 where the full grid finds 3.52238e-4 and
β 0.046) or no start converged, the variant is refitted on the full grid and the lower
objective is kept; the row's ``starts`` records it (``reduced``, ``full``, ``reduced, refit
on the full grid``).

Units: N parameters, D tokens, C FLOPs (C = 6ND), losses in nats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalebo.analysis.variants import Variant
from scalebo.errors import FitError
from scalebo.fitting.allocation import compute_optimal
from scalebo.fitting.identifiability import identification_problem
from scalebo.fitting.robust import (
    FitResult,
    FitStatus,
    fit_law,
    objective,
    run_starts,
    summarize_starts,
)
from scalebo.laws import Law, PowerLawSum, get_law

__all__ = ["CHINCHILLA_ALIASES", "UNUSABLE_STATUSES", "StartPolicy", "VariantResult",
           "check_law", "chinchilla_param", "fit_variant"]

#: Chinchilla's parameter names and their names in ``powerlaw:N,D`` (the same law).
CHINCHILLA_ALIASES = {"alpha": "alpha_N", "beta": "alpha_D", "A": "A_N", "B": "A_D"}


def chinchilla_param(params: Mapping[str, Any], name: str) -> Any:
    """``params[name]``, or its ``powerlaw:N,D`` alias (``alpha`` is ``alpha_N``, ``beta``
    ``alpha_D``; both laws are ``E + A/N^α + B/D^β``); NaN when the law has neither (its
    exponents were shown as missing)."""
    if name in params:
        return params[name]
    return params.get(CHINCHILLA_ALIASES.get(name, name), math.nan)


#: Row statuses without a usable estimate: left out of the spread and the figure. A fit at a
#: parameter bound (Gadre's 'drop 3 largest': E = 4.5e-5 at E's bound made the N* spread
#: 3560 % alone) or that no start finished is no estimate to compare either.
UNUSABLE_STATUSES = ("failed", str(FitStatus.UNIDENTIFIED), str(FitStatus.BOUND_HIT),
                     str(FitStatus.MAX_ITER))


@dataclass(frozen=True)
class StartPolicy:
    """Starts of a variant's fit (module docstring). ``full=True`` uses the whole grid."""

    n_optima: int = 8
    n_grid: int = 16
    max_iter: int = 100
    n_polish: int = 8
    full: bool = False


@dataclass(frozen=True)
class VariantResult:
    """Outcome of one variant's fit.

    Attributes:
        name, kind, huber_delta: From the :class:`Variant`.
        n_points: Points fitted; n_models: distinct N among them.
        params: Natural parameters (``E``, ``A``, ``alpha``, ``B``, ``beta``).
        objective: Summed Huber loss at the optimum.
        N_opt, D_opt: Compute-optimal parameters and tokens at ``target`` FLOPs (C = 6ND).
        tokens_per_param: ``D_opt / N_opt``.
        loss_at_target: Predicted loss (nats) at (N_opt, D_opt).
        status: :class:`~scalebo.fitting.robust.FitStatus` value (``unidentified`` when the
            points cannot determine the law), or ``failed``; message: details.
    """

    name: str
    kind: str
    huber_delta: float
    n_points: int
    n_models: int
    params: dict[str, float]
    objective: float
    N_opt: float
    D_opt: float
    tokens_per_param: float
    loss_at_target: float
    status: str
    message: str
    starts: str = "reduced"

    def row(self) -> dict:
        """Flat record: the table's columns; ``in_spread``: whether the status is usable
        (not in :data:`UNUSABLE_STATUSES`), i.e. the row counts in the spread."""
        return {
            "variant": self.name, "kind": self.kind, "n_points": self.n_points,
            "n_models": self.n_models, "huber_delta": self.huber_delta,
            **{k: chinchilla_param(self.params, k) for k in ("alpha", "beta", "E", "A", "B")},
            "N_opt": self.N_opt, "D_opt": self.D_opt,
            "tokens_per_param": self.tokens_per_param, "loss_at_target": self.loss_at_target,
            "objective": self.objective, "status": self.status, "message": self.message,
            "in_spread": self.status not in UNUSABLE_STATUSES, "starts": self.starts,
        }


def check_law(law: Law | str) -> PowerLawSum:
    """``law`` (a name or a law) as a power-law sum in (N, D), the only kind whose N*, D* at
    a target compute fragility reports. Raises ValueError naming what is expected."""
    name = law if isinstance(law, str) else law.name
    law = get_law(law) if isinstance(law, str) else law
    if not isinstance(law, PowerLawSum) or law.variables != ("N", "D"):
        of = " and ".join(law.variables)
        raise ValueError(
            f"fragility needs a law of parameters N and tokens D, to find N* and D* at the "
            f"target compute: 'chinchilla' (E + A/N^alpha + B/D^beta) or 'powerlaw:N,D' (the "
            f"same law); got {name!r}, a law of {of}."
        )
    return law


def _distinct(xs: np.ndarray, k: int) -> np.ndarray:
    chosen: list[np.ndarray] = []
    for x in xs:
        if len(chosen) >= k:
            break
        if all(np.any(np.abs(x - c) > 1e-3 * (1 + np.abs(c))) for c in chosen):
            chosen.append(x)
    return np.array(chosen).reshape(len(chosen), -1)


def _reduced_fit(law: PowerLawSum, X: np.ndarray, y: np.ndarray, delta: float,
                 base_optima: np.ndarray, policy: StartPolicy) -> FitResult:
    """The fit from the reduced starts of the module docstring."""
    if y.size < law.n_params:
        raise FitError(f"{y.size} points for {law.n_params} parameters")
    starts = base_optima[: policy.n_optima]
    if policy.n_grid > 0:
        grid = law.start_grid(law.prepare(X))
        j = objective(law, grid, X, y, huber_delta=delta)
        order = np.argsort(np.where(np.isfinite(j), j, np.inf), kind="stable")
        starts = np.vstack([starts, grid[order[: policy.n_grid]]])
    res = run_starts(law, X, y, starts, huber_delta=delta, max_iter=policy.max_iter,
                     n_polish=policy.n_polish)
    return summarize_starts(law, res, huber_delta=delta, n_obs=y.size,
                            unidentified=identification_problem(law, X))


def needs_full_grid(fit: FitResult) -> bool:
    """Whether a reduced-start fit is doubtful enough to refit on the full grid: no start
    converged, or no other start agrees with the best (``n_agree`` < 2), unless the points
    cannot identify the law (then no start grid makes the optimum unique)."""
    if fit.status is FitStatus.UNIDENTIFIED:
        return False
    return fit.status is FitStatus.MAX_ITER or fit.n_agree < 2


def fit_variant(
    law: PowerLawSum,
    variant: Variant,
    target: float,
    *,
    base_optima: np.ndarray | None = None,
    policy: StartPolicy = StartPolicy(),
    starts: np.ndarray | None = None,
) -> tuple[VariantResult, FitResult | None]:
    """Fit one variant (pure: safe to run in a worker). A :class:`FitError` becomes a
    ``failed`` row, never an exception.

    With ``policy.full`` (or no ``base_optima``) the fit starts from ``starts`` (default: the
    law's full grid); otherwise from the reduced policy of the module docstring, refitted from
    ``starts`` (:func:`needs_full_grid`) when its best start is alone, keeping the lower
    objective."""
    frame = variant.frame
    X = frame[["N", "D"]].to_numpy(dtype=np.float64)
    y = frame["loss"].to_numpy(dtype=np.float64)
    n_models = int(np.unique(X[:, 0]).size) if len(frame) else 0
    delta = variant.huber_delta
    try:
        refit = ""
        if policy.full or base_optima is None:
            fit, used = fit_law(law, X, y, huber_delta=delta, starts=starts), "full"
        else:
            fit, used = _reduced_fit(law, X, y, delta, base_optima, policy), "reduced"
            if needs_full_grid(fit):
                full = fit_law(law, X, y, huber_delta=delta, starts=starts)
                better = full.fun < fit.fun
                used = "reduced, refit on the full grid"
                refit = (f"; the reduced starts' best (objective {fit.fun:.6e}, status "
                         f"{fit.status}, {fit.n_agree} of {fit.n_compared or fit.n_converged} "
                         f"compared starts agreeing) was refitted on the full grid (objective "
                         f"{full.fun:.6e}): the {'full' if better else 'reduced'} grid's "
                         "optimum is kept")
                fit = full if better else fit
        opt = compute_optimal(fit, target, warn=False)
        result = VariantResult(
            name=variant.name, kind=variant.kind, huber_delta=delta,
            n_points=int(y.size), n_models=n_models, params=fit.params, objective=fit.fun,
            N_opt=opt.N_opt, D_opt=opt.D_opt, tokens_per_param=opt.tokens_per_param,
            loss_at_target=opt.loss, status=str(fit.status), message=fit.message + refit,
            starts=used,
        )
        return result, fit
    except (FitError, ValueError) as exc:
        nan = math.nan
        return VariantResult(
            name=variant.name, kind=variant.kind, huber_delta=delta,
            n_points=int(y.size), n_models=n_models, params={}, objective=nan, N_opt=nan,
            D_opt=nan, tokens_per_param=nan, loss_at_target=nan, status="failed",
            message=str(exc),
        ), None
