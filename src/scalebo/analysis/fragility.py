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
(:data:`UNUSABLE_STATUSES`; a row's ``in_spread`` says which). A base fit at a bound gets a
warning naming the parameter and its bound, as ``fit`` warns of its own.

Starts. The base fit uses the law's full grid (4,500 starts for Chinchilla). Each variant
starts from (a) the base fit's distinct converged optima (up to ``n_optima``) and (b) the
``n_grid`` starts of the full grid with the lowest *initial* objective on the variant's data
(one vectorized evaluation of the grid), screened with at most ``max_iter`` iterations, the
best ``n_polish`` polished; a variant whose best start no other start agrees with is refitted
on the full grid and keeps the lower objective (:mod:`~scalebo.analysis.fragility_fit`; the
row's ``starts`` says so). On Gemstones the reduced starts reproduced the full-grid optimum to
≤ 1e-14 relative objective on most variants measured (see docs/fragility.md) at ~1/15 of the
cost; ``cool_end``'s 'every 5th checkpoint' settled in a worse optimum, which the refit fixes.

Fits are independent and run with joblib (``n_jobs``: None = 1, −1 = all cores). The
optional bootstrap of the base fit reports percentile intervals at ``confidence_level``
(default 0.95).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scalebo.analysis.fragility_bootstrap import base_bootstrap
from scalebo.analysis.fragility_fit import (
    CHINCHILLA_ALIASES,
    UNUSABLE_STATUSES,
    StartPolicy,
    VariantResult,
    _distinct,
    check_law,
    chinchilla_param,
    fit_variant,
)
from scalebo.analysis.fragility_plot import plot_fragility
from scalebo.analysis.variants import Variant, build_variants, gemstones_extras
from scalebo.data.runs import RunTable
from scalebo.errors import FitError
from scalebo.fitting.arguments import computes, resamples
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA, FitStatus
from scalebo.laws import Law

__all__ = [
    "CHINCHILLA_ALIASES",
    "UNUSABLE_STATUSES",
    "FragilityReport",
    "StartPolicy",
    "Variant",
    "VariantResult",
    "build_variants",
    "chinchilla_param",
    "fit_variant",
    "fragility",
    "gemstones_extras",
    "plot_fragility",
]

#: Quantities whose spread across variants is summarized.
SPREAD_COLUMNS = ("alpha", "beta", "E", "N_opt", "D_opt", "tokens_per_param", "loss_at_target")


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
        (status not in :data:`UNUSABLE_STATUSES`): the rows' ``in_spread``, or, for rows
        without it (results a caller made), derived from their ``status``."""
        table = self.table
        if "in_spread" in table.columns:
            return table["in_spread"].to_numpy(dtype=bool)
        return ~table["status"].astype(str).isin(UNUSABLE_STATUSES).to_numpy(dtype=bool)

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

#: Variant kinds that fit a subset of the base points (the others change δ or the table).
LEAVE_OUT_KINDS = ("leave_one_out", "drop_smallest", "drop_largest", "every_kth")


def fragility(
    table: RunTable | pd.DataFrame,
    *,
    law: Law | str = "chinchilla",
    target: float = 1e24,
    variants: Sequence[Variant] | None = None,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    policy: StartPolicy | None = None,
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
        policy: Starts of the variant fits (default ``StartPolicy()``, the reduced starts of
            :mod:`~scalebo.analysis.fragility_fit`; the base always uses the full grid).
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
        ValueError: ``n_jobs`` 0, a ``confidence_level`` outside (0, 1), a ``target`` that
            is not one compute > 0, a ``bootstrap`` that is not a whole number >= 0, a law not in
            (N, D), or variants whose first is not the base.
    """
    if n_jobs == 0:  # joblib's own error ("has no meaning") came after the base fit
        raise ValueError("n_jobs: a number of joblib workers >= 1, -1 for all cores or None "
                         "(1), got 0")
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
    policy = StartPolicy() if policy is None else policy
    law = check_law(law)
    if variants is None:
        variants = build_variants(table, huber_delta=huber_delta, **variant_options)
    variants = list(variants)
    if not variants or variants[0].kind != "base":
        raise ValueError("the first variant must be the base (kind 'base').")
    base_result, base_fit = fit_variant(law, variants[0], target,
                                        policy=StartPolicy(full=True), starts=base_starts)
    if base_fit is None:
        raise FitError(f"the base fit failed: {base_result.message}")
    if base_result.status == str(FitStatus.BOUND_HIT):  # as fit warns of its own fit
        warnings.warn(f"the base fit's status is 'bound hit': {base_result.message}; that "
                      "value is the bound's, not the data's, and every variant is compared "
                      "with this base (itself left out of the spread): distrust its "
                      "estimates and the spread's 'base' column", UserWarning, stacklevel=2)
    elif base_result.status == str(FitStatus.MAX_ITER):  # the CLI exits 1, as fit does
        warnings.warn(f"the base fit did not converge ({base_result.message}): every variant "
                      "is compared with a base that is no estimate", UserWarning, stacklevel=2)
    if base_fit.success:  # a base that contradicts its runs, or a target far from them,
        # said as fit --predict says it
        from scalebo.fitting.allocation_notes import predicted_ratio_note
        from scalebo.fitting.input_notes import tiny_compute_notes
        from scalebo.fitting.misfit import misfit_notes

        pts = variants[0].frame
        C = (pts["C"] if "C" in pts.columns else 6.0 * pts["N"] * pts["D"]).to_numpy()
        at = {"C": float(target), "loss": base_result.loss_at_target,
              "tokens_per_param": base_result.tokens_per_param}
        for text in (*tiny_compute_notes([float(target)], float(C.min())),
                     predicted_ratio_note(pts, [at]),
                     *misfit_notes(law.name, base_fit.params, C, pts["loss"].to_numpy(), [at])):
            if text:
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
