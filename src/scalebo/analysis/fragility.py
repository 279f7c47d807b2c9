"""Fragility of a fitted law: refit under named variants of the data and fitting choices.

The Gemstones study (McLeish et al. 2025) shows that a scaling law's exponents and its
compute-optimal prescription move with choices that papers rarely report: which models are
included, how densely checkpoints are sampled, whether losses are measured hot or after a
cooldown, the learning rate, the validation set, the Huber δ. :func:`fragility` refits a
law in ``(N, D)`` (``chinchilla`` or any ``powerlaw:N,D``) under each variant and reports the
spread of the exponents, of ``N*``/``D*`` at a target compute and of the predicted loss there.

Variants (base, leave one model out, drop the smallest / largest, every k-th checkpoint,
other Huber δ, extra tables) are built by :func:`~scalebo.analysis.variants.build_variants`
and the figure is :func:`~scalebo.analysis.fragility_plot.plot_fragility`; both (and
:class:`~scalebo.analysis.variants.Variant`, :func:`~scalebo.analysis.variants.
gemstones_extras`) are re-exported here. A variant whose points cannot identify the law
(e.g. fewer than 3 model sizes left) gets status ``unidentified`` and, like a ``failed``
one, one that ends at a parameter bound (``bound hit``) or whose starts all stopped at the
iteration limit (``max iterations``), is left out of the spread and the figure
(:data:`UNUSABLE_STATUSES`; a row's ``in_spread`` says which).

Starts. The base fit uses the law's full grid (4,500 starts for Chinchilla). Each variant
starts from (a) the base fit's distinct converged optima (up to ``n_optima``) and (b) the
``n_grid`` starts of the full grid with the lowest *initial* objective on the variant's data
(one vectorized evaluation of the grid), screened with at most ``max_iter`` iterations, the
best ``n_polish`` polished. On Gemstones this reproduced the full-grid optimum to ≤ 1e-14
relative objective on every variant measured (see docs/fragility.md) at ~1/15 of the cost.

Fits are independent and run with joblib (``n_jobs``: None = 1, −1 = all cores). The
optional bootstrap of the base fit reports percentile intervals at ``confidence_level``
(default 0.95).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scalebo.analysis.fragility_bootstrap import base_bootstrap
from scalebo.analysis.fragility_plot import plot_fragility
from scalebo.analysis.variants import Variant, build_variants, gemstones_extras
from scalebo.data.runs import RunTable
from scalebo.errors import FitError
from scalebo.fitting.allocation import compute_optimal
from scalebo.fitting.arguments import computes, resamples
from scalebo.fitting.identifiability import identification_problem
from scalebo.fitting.robust import (
    DEFAULT_HUBER_DELTA,
    FitResult,
    FitStatus,
    fit_law,
    objective,
    run_starts,
    summarize_starts,
)
from scalebo.laws import Law, PowerLawSum, get_law

__all__ = [
    "FragilityReport",
    "StartPolicy",
    "Variant",
    "VariantResult",
    "build_variants",
    "fit_variant",
    "fragility",
    "gemstones_extras",
    "plot_fragility",
]

#: Chinchilla's parameter names and their names in ``powerlaw:N,D`` (the same law).
CHINCHILLA_ALIASES = {"alpha": "alpha_N", "beta": "alpha_D", "A": "A_N", "B": "A_D"}


def chinchilla_param(params: Mapping[str, Any], name: str) -> Any:
    """``params[name]``, or its ``powerlaw:N,D`` alias (``alpha`` is ``alpha_N``, ``beta``
    ``alpha_D``; both laws are ``E + A/N^α + B/D^β``); NaN when the law has neither (its
    exponents were shown as missing)."""
    if name in params:
        return params[name]
    return params.get(CHINCHILLA_ALIASES.get(name, name), math.nan)


#: Quantities whose spread across variants is summarized.
SPREAD_COLUMNS = ("alpha", "beta", "E", "N_opt", "D_opt", "tokens_per_param", "loss_at_target")
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
            "in_spread": self.status not in UNUSABLE_STATUSES,
        }


@dataclass(frozen=True)
class FragilityReport:
    """All variants' fits at one target compute.

    Attributes:
        law: Law name; target: compute in FLOPs at which N*, D*, loss are evaluated.
        results: One :class:`VariantResult` per variant, the base first.
        seconds: Wall-clock time of the whole analysis.
        bootstrap: Optional bootstrap summary of the base fit (see :func:`fragility`):
            ``n_resamples``, ``n_failed``, ``seed``, ``confidence_level`` and, per quantity,
            the percentile interval ``{"lower", "upper"}`` at that level.
    """

    law: str
    target: float
    results: tuple[VariantResult, ...]
    seconds: float
    bootstrap: dict | None = None

    @property
    def table(self) -> pd.DataFrame:
        """One row per variant (columns of :meth:`VariantResult.row`)."""
        return pd.DataFrame([r.row() for r in self.results])

    @property
    def usable(self) -> np.ndarray:
        """Mask over :attr:`table` rows ``(n_variants,)``: variants with an estimate to compare
        (status not in :data:`UNUSABLE_STATUSES`)."""
        return self.table["in_spread"].to_numpy(dtype=bool)

    @property
    def spread(self) -> dict[str, dict[str, float]]:
        """Per quantity over usable variants (:attr:`usable`): min, max (and the variants
        that give them, ``min_variant``, ``max_variant``), median, base and
        ``rel_spread = (max − min) / |median|``."""
        table = self.table
        ok = table[self.usable]
        out = {}
        for column in SPREAD_COLUMNS:
            finite = ok[np.isfinite(ok[column].to_numpy(dtype=np.float64))]
            values = finite[column].to_numpy(dtype=np.float64)
            if values.size == 0:
                continue
            median = float(np.median(values))
            out[column] = {
                "min": float(values.min()), "max": float(values.max()), "median": median,
                "min_variant": str(finite["variant"].iloc[int(np.argmin(values))]),
                "max_variant": str(finite["variant"].iloc[int(np.argmax(values))]),
                "base": float(table[column].iloc[0]),
                "rel_spread": float((values.max() - values.min()) / abs(median))
                if median else math.nan,
            }
        return out

    def to_dict(self) -> dict:
        return {"law": self.law, "target_flops": self.target, "seconds": self.seconds,
                "variants": [r.row() for r in self.results], "spread": self.spread,
                "bootstrap": self.bootstrap}


# --------------------------------------------------------------------------- fitting


def _check_law(law: Law | str) -> PowerLawSum:
    law = get_law(law) if isinstance(law, str) else law
    if not isinstance(law, PowerLawSum) or law.variables != ("N", "D"):
        raise ValueError(
            f"fragility needs a law in (N, D) such as 'chinchilla' (for N*, D* at the "
            f"target); got {law.name!r} in {law.variables}."
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
    law's full grid); otherwise from the reduced policy of the module docstring."""
    frame = variant.frame
    X = frame[["N", "D"]].to_numpy(dtype=np.float64)
    y = frame["loss"].to_numpy(dtype=np.float64)
    n_models = int(np.unique(X[:, 0]).size) if len(frame) else 0
    try:
        if policy.full or base_optima is None:
            fit = fit_law(law, X, y, huber_delta=variant.huber_delta, starts=starts)
        else:
            if y.size < law.n_params:
                raise FitError(f"{y.size} points for {law.n_params} parameters")
            starts = base_optima[: policy.n_optima]
            if policy.n_grid > 0:
                grid = law.start_grid(law.prepare(X))
                j = objective(law, grid, X, y, huber_delta=variant.huber_delta)
                order = np.argsort(np.where(np.isfinite(j), j, np.inf), kind="stable")
                starts = np.vstack([starts, grid[order[: policy.n_grid]]])
            res = run_starts(law, X, y, starts, huber_delta=variant.huber_delta,
                             max_iter=policy.max_iter, n_polish=policy.n_polish)
            fit = summarize_starts(law, res, huber_delta=variant.huber_delta, n_obs=y.size,
                                   unidentified=identification_problem(law, X))
        opt = compute_optimal(fit, target, warn=False)
        result = VariantResult(
            name=variant.name, kind=variant.kind, huber_delta=variant.huber_delta,
            n_points=int(y.size), n_models=n_models, params=fit.params, objective=fit.fun,
            N_opt=opt.N_opt, D_opt=opt.D_opt, tokens_per_param=opt.tokens_per_param,
            loss_at_target=opt.loss, status=str(fit.status), message=fit.message,
        )
        return result, fit
    except (FitError, ValueError) as exc:
        nan = math.nan
        return VariantResult(
            name=variant.name, kind=variant.kind, huber_delta=variant.huber_delta,
            n_points=int(y.size), n_models=n_models, params={}, objective=nan, N_opt=nan,
            D_opt=nan, tokens_per_param=nan, loss_at_target=nan, status="failed",
            message=str(exc),
        ), None


#: Variant kinds that fit a subset of the base points (the others change δ or the table).
LEAVE_OUT_KINDS = ("leave_one_out", "drop_smallest", "drop_largest", "every_kth")


def fragility(
    table: RunTable | pd.DataFrame,
    *,
    law: Law | str = "chinchilla",
    target: float = 1e24,
    variants: Sequence[Variant] | None = None,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    policy: StartPolicy = StartPolicy(),
    n_jobs: int | None = None,
    base_starts: np.ndarray | None = None,
    bootstrap: int = 0,
    rng: int | None = 0,
    confidence_level: float = 0.95,
    **variant_options,
) -> FragilityReport:
    """Refit ``law`` under every variant and report the spread (module docstring).

    Args:
        table: Base points (runs or checkpoints): ``N`` parameters, ``D`` tokens, ``loss``.
        law: A law in (N, D), by name or object.
        target: Compute in FLOPs (C = 6ND) at which N*, D* and the loss are evaluated.
        variants: Explicit variants (default :func:`build_variants` with
            ``variant_options``); the first must be the base.
        huber_delta: δ of the base fit.
        policy: Starts of the variant fits (the base always uses the full grid).
        n_jobs: joblib workers for the variant fits (None = 1, −1 = all cores).
        base_starts: Starts of the base fit, ``(S, p)`` internal parameters (default: the
            law's full grid); with ``policy.full`` they are used for every variant too.
        bootstrap: If > 0, resample the base points this many times
            (:func:`scalebo.fitting.bootstrap.bootstrap_fit`) and report percentile intervals
            of alpha, beta, E, N_opt and the loss at ``target``.
        rng: Seed of the bootstrap.
        confidence_level: Level of the bootstrap's percentile intervals, in (0, 1) (default
            0.95: the 2.5th and 97.5th percentiles), as ``scalebo fit --confidence``.

    Raises:
        ValueError: a ``confidence_level`` outside (0, 1), a ``target`` that is not one
            compute > 0, a ``bootstrap`` that is not a whole number >= 0, a law not in
            (N, D), or variants whose first is not the base.
    """
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    targets, bootstrap = computes(target, "target"), resamples(bootstrap)
    if len(targets) != 1:
        raise ValueError(f"target: one compute in FLOPs, got {len(targets)}")
    target = targets[0]
    if (variants is None and isinstance(table, pd.DataFrame) and "run" not in table
            and {"N", "D"} <= set(table.columns) and table.duplicated(["N", "D"]).any()):
        warnings.warn("several rows share an (N, D) cell and each is fitted (a DataFrame is "
                      "taken as it is); scalebo.load_runs(frame) fits the best run of each "
                      "cell, as scalebo fragility does", UserWarning, stacklevel=2)
    start = time.perf_counter()
    law = _check_law(law)
    if variants is None:
        variants = build_variants(table, huber_delta=huber_delta, **variant_options)
    variants = list(variants)
    if not variants or variants[0].kind != "base":
        raise ValueError("the first variant must be the base (kind 'base').")
    base_result, base_fit = fit_variant(law, variants[0], target,
                                        policy=StartPolicy(full=True), starts=base_starts)
    if base_fit is None:
        raise FitError(f"the base fit failed: {base_result.message}")
    if base_fit.success:  # a base that contradicts its runs, said as fit says it
        from scalebo.fitting.misfit import misfit_notes

        pts = variants[0].frame
        C = (pts["C"] if "C" in pts.columns else 6.0 * pts["N"] * pts["D"]).to_numpy()
        for text in misfit_notes(law.name, base_fit.params, C, pts["loss"].to_numpy(),
                                 [{"C": float(target), "loss": base_result.loss_at_target}]):
            warnings.warn(text, UserWarning, stacklevel=2)
    optima = _distinct(np.vstack([base_fit.x[None, :], base_fit.converged_x]), policy.n_optima)
    rest = variants[1:]
    if n_jobs in (None, 1) or len(rest) < 2:
        results = [_fit_row(law, v, target, optima, policy, base_starts) for v in rest]
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=n_jobs)(
            delayed(_fit_row)(law, v, target, optima, policy, base_starts) for v in rest
        )
    structural = [r for r in results if r.kind in LEAVE_OUT_KINDS]
    if (base_result.status not in UNUSABLE_STATUSES and structural
            and all(r.status in UNUSABLE_STATUSES for r in structural)):
        warnings.warn(f"none of the {len(structural)} variants that leave out data could be "
                      "fitted (too few model sizes, runs or checkpoints): the spread is the "
                      "Huber δ variants' alone and says nothing about which runs the law "
                      "leans on", UserWarning, stacklevel=2)
    summary = None
    if bootstrap > 0:
        summary = base_bootstrap(base_fit, variants[0], target, bootstrap, rng,
                                 confidence_level, getattr(table, "hyperparameters", ()))
    return FragilityReport(law=law.name, target=float(target),
                           results=(base_result, *results),
                           seconds=time.perf_counter() - start, bootstrap=summary)


def _fit_row(law, variant, target, optima, policy, starts) -> VariantResult:
    return fit_variant(law, variant, target, base_optima=optima, policy=policy,
                       starts=starts)[0]
