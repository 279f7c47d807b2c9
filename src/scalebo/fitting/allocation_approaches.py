"""Each Chinchilla approach on a table's cell bests, as one :class:`AllocationEstimate`.

Used by :func:`scalebo.fitting.allocation_summary.allocation_summary` (what ``scalebo allocate``
prints); the approaches themselves are in :mod:`scalebo.fitting.allocation`. Conventions: ``C``
in FLOPs, ``N`` parameters, ``D`` tokens, losses in nats. Warnings raised here are collected
by the caller and prefixed with the approach.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from scalebo.errors import FitError
from scalebo.fitting.allocation import (
    AllocationLaw,
    PowerFit,
    approach1,
    approach2,
    approach3,
    edge_note,
    fit_power,
    optimum_logs,
)
from scalebo.fitting.allocation_notes import (
    budget_edge_note,
    flops_factor,
    ratio_note,
    table_compute_note,
)
from scalebo.fitting.frontier import pareto_envelope, snap_ties
from scalebo.fitting.robust import FitStatus

__all__ = ["EXPONENT_LEVEL", "ISOFLOP_RTOL", "AllocationEstimate", "envelope_estimate",
           "exponent_interval", "isoflop_budgets", "isoflop_estimate", "law_estimate"]

#: Runs whose compute agrees within this relative tolerance form one isoFLOP budget when no
#: budget column is named: sizes and token counts rounded to whole numbers move ``6·N·D`` by
#: well under 1 %, while isoFLOP budgets are spaced by factors of 2 or more.
ISOFLOP_RTOL = 0.01

#: Without a budget column, approach 2 needs at least this share of the cells on usable
#: isoFLOP profiles: a grid or a checkpoint table has a few sizes sharing a compute by chance.
ISOFLOP_MIN_SHARE = 0.5

#: Level of the exponents' intervals.
EXPONENT_LEVEL = 0.95


def isoflop_budgets(C: np.ndarray, rtol: float = ISOFLOP_RTOL, *,
                    strict: bool = True) -> np.ndarray:
    """The isoFLOP budget (FLOPs) of each run: runs are sorted by C and a new budget starts
    where C grows by more than ``rtol`` over the previous run
    (:func:`~scalebo.fitting.frontier.snap_ties`); a budget is the geometric mean of its runs'
    C. A chain of close computes spanning more than ``2·rtol`` is no budget: NaN for its runs
    with ``strict=False``.

    Raises:
        FitError: with ``strict``, such a chain (its runs are not on one isoFLOP budget).
    """
    C = np.asarray(C, dtype=np.float64)
    group = snap_ties(C, rtol)
    out = np.empty_like(C)
    for g in np.unique(group):
        members = C[group == g]
        span = members.max() / members.min() - 1
        if span > 2 * rtol:
            if not strict:
                out[group == g] = np.nan
                continue
            raise FitError(_chain_text(members, rtol))
        out[group == g] = math.exp(float(np.mean(np.log(members))))
    return out


def _lost_chains(C: np.ndarray, budget: np.ndarray) -> list[np.ndarray]:
    """The computes of each chain :func:`isoflop_budgets` left without a budget (NaN in
    ``budget``; such chains are whole groups of close computes, so grouping them alone gives
    the same chains)."""
    lost = np.isnan(budget)
    if not lost.any():
        return []
    group = snap_ties(C[lost], ISOFLOP_RTOL)
    return [C[lost][group == g] for g in np.unique(group)]


def _chain_text(members: np.ndarray, rtol: float) -> str:
    span = members.max() / members.min() - 1
    return (f"{members.size} runs with C from {members.min():.4g} to {members.max():.4g} FLOPs "
            f"chain within {100 * rtol:g} % of each other (span {100 * span:.3g} %): not one "
            "isoFLOP budget (a budget column names each run's, --isoflop-column)")


def check_budget_column(frame: pd.DataFrame, column: str, source: str) -> None:
    """Raise ValueError unless ``column`` holds each run's isoFLOP budget in FLOPs: present,
    a number > 0 on every row, and within a factor of 2 of the runs' own C (median ratio; a
    budget in PF-days or a label 1, 2, 3 would make every D* absurd)."""
    if column not in frame.columns:
        raise ValueError(f"--isoflop-column {column!r} is not a column of {source}; columns: "
                         f"{list(frame.columns)}")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
    if bad := np.flatnonzero(~(values > 0)).tolist():
        raw = frame[column].iloc[bad[0]]
        shown = "a blank" if pd.isna(raw) else repr(raw.item() if isinstance(raw, np.generic)
                                                     else raw)
        raise ValueError(f"{source}: column {column!r} must hold each run's budget in FLOPs "
                         f"(> 0); data row {int(frame.index[bad[0]]) + 1} has {shown}")
    ratio = float(np.median(values / frame["C"].to_numpy(float)))
    if not 0.5 <= ratio <= 2.0:
        raise ValueError(f"{source}: column {column!r} is {ratio:.3g}x the runs' compute C "
                         "(median): expected each run's budget in FLOPs, as C (a label or "
                         "another unit makes every D* = C/(k N*) wrong)")


def exponent_interval(fit: PowerFit, x: np.ndarray, y: np.ndarray,
                      level: float = EXPONENT_LEVEL) -> tuple[float, float] | None:
    """Student-t interval of a log–log least-squares slope; None with fewer than 3 points."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    n = lx.size
    sxx = float(np.sum((lx - lx.mean()) ** 2))
    if n < 3 or sxx == 0:
        return None
    resid = ly - (math.log(fit.coef) + fit.exponent * lx)
    se = math.sqrt(float(np.sum(resid**2)) / (n - 2) / sxx)
    half = float(stats.t.ppf(0.5 + level / 2, n - 2)) * se
    return fit.exponent - half, fit.exponent + half


@dataclass(frozen=True)
class AllocationEstimate:
    """One approach's allocation law, or why the table could not give one.

    Attributes:
        approach: 1, 2 or 3.
        law: ``N*(C)``, ``D*(C)`` power laws (None when the approach failed: see ``reason``).
        reason: why there is no law ("" when there is one).
        points: the points the power laws were fitted on (approach 1: envelope runs; 2: one
            row per budget, unusable ones with their reason; 3: the cell bests the law was
            fitted on).
        intervals: ``{"N_opt": (lo, hi), "D_opt": (lo, hi)}`` intervals of the exponents at
            :data:`EXPONENT_LEVEL`: t-intervals for approaches 1 and 2 (≥ 3 points),
            bootstrap percentile intervals for approach 3 (with ``bootstrap``); else empty.
        fit_status: approach 3's law fit status (``converged``, ``not identified``, ...).
        law_params: approach 3's fitted E, A, alpha, B, beta (natural units).
        boot_laws: approach 3 with ``bootstrap``: each usable resample's allocation law,
            rows ``(ln G_N, a, ln G_D, b)`` (:meth:`interval_at`); else None.
    """

    approach: int
    law: AllocationLaw | None
    reason: str = ""
    points: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    fit_status: str | None = None
    law_params: dict[str, float] = field(default_factory=dict)
    boot_laws: np.ndarray | None = field(default=None, repr=False)

    def interval_at(self, C: float) -> dict[str, tuple[float, float]]:
        """Percentile intervals at :data:`EXPONENT_LEVEL` of ``N_opt``, ``D_opt`` and
        ``tokens_per_param`` at ``C`` FLOPs over :attr:`boot_laws` (empty without them)."""
        if self.boot_laws is None or not len(self.boot_laws):
            return {}
        g_n, a, g_d, b = self.boot_laws.T
        N, D = np.exp(g_n + a * math.log(C)), np.exp(g_d + b * math.log(C))
        tail = 100 * (1 - EXPONENT_LEVEL) / 2
        return {k: tuple(float(q) for q in np.percentile(v, [tail, 100 - tail]))
                for k, v in (("N_opt", N), ("D_opt", D), ("tokens_per_param", D / N))}

    def at(self, C: float) -> dict[str, float] | None:
        """``N_opt`` (parameters), ``D_opt`` (tokens), ``tokens_per_param`` at ``C`` FLOPs."""
        if self.law is None:
            return None
        return {k: float(v) for k, v in self.law.at(float(C)).items() if k != "C"}

    def to_dict(self) -> dict[str, Any]:
        law = self.law
        return {
            "approach": self.approach,
            "reason": self.reason or None,
            "fit_status": self.fit_status,
            "law_params": self.law_params or None,
            **{key: None if law is None else {
                "coef": fit.coef, "exponent": fit.exponent,
                "exponent_interval": list(self.intervals[key]) if key in self.intervals
                else None, "r2": fit.r2 if fit.n else None, "n_points": fit.n or None}
               for key, fit in (("N_opt", law and law.n_opt), ("D_opt", law and law.d_opt))},
            "points": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                        for k, v in row.items()}
                       for row in self.points.to_dict(orient="records")],
        }


def _power_intervals(law: AllocationLaw, C: np.ndarray, N: np.ndarray,
                     D: np.ndarray) -> dict[str, tuple[float, float]]:
    out = {}
    for key, fit, y in (("N_opt", law.n_opt, N), ("D_opt", law.d_opt, D)):
        if (iv := exponent_interval(fit, C, y)) is not None:
            out[key] = iv
    return out


def _two_points(law: AllocationLaw, what: str) -> None:
    if law.n_opt.n < 3:
        warnings.warn(f"only {law.n_opt.n} {what}: a line through them has no interval and "
                      "nothing checks it (r² is 1 by construction)", UserWarning, stacklevel=3)


def envelope_estimate(cells: pd.DataFrame,
                      isoflop_column: str | None = None) -> AllocationEstimate:
    """Approach 1 on the Pareto envelope of the cell bests: runs on one isoFLOP budget are
    one compute — the budget of ``isoflop_column`` when given, else :func:`isoflop_budgets`
    (computes within :data:`ISOFLOP_RTOL` of the previous, the chain spanning at most twice
    that); a longer chain keeps its runs' own C, with a warning when it looks like a budget
    (≥ 3 sizes within 10 %)."""
    raw = cells["C"].to_numpy(float)
    if isoflop_column is not None:
        C = cells[isoflop_column].to_numpy(float)
    else:
        grouped = isoflop_budgets(raw, strict=False)  # a longer chain keeps its own C
        C = np.where(np.isnan(grouped), raw, grouped)
        if text := _loose_budget_note(cells, grouped):
            warnings.warn(text, UserWarning, stacklevel=2)
    env = cells.loc[pareto_envelope(C, cells["loss"].to_numpy(float))].sort_values("C")
    points = env[[c for c in ("run_id", "N", "D", "C", "loss") if c in env]].reset_index(
        drop=True)
    try:
        law = approach1(points)
    except FitError as exc:
        return AllocationEstimate(1, None, f"the envelope: {exc}", points)
    for axis, other in (("N", "N*"), ("D", "D*")):  # C = 6·N·D: the other follows C alone
        if points[axis].nunique() < 2:
            return AllocationEstimate(1, None, f"every envelope run has the same {axis}: the "
                                      f"table does not say how {other} grows with C", points)
    _two_points(law, "envelope runs")
    if text := edge_note(points, float(cells["N"].min()), float(cells["N"].max())):
        warnings.warn(text, UserWarning, stacklevel=2)
    elif text := budget_edge_note(cells, C, env.index):
        warnings.warn(text, UserWarning, stacklevel=2)
    if "run" in env and (runs := env["run"].nunique()) < len(env):  # checkpoints (a trial)
        warnings.warn(f"its {len(env)} envelope points are checkpoints of {runs} "
                      "training runs, which share their run's noise: its t-interval counts "
                      "them as independent and is too narrow", UserWarning, stacklevel=2)
    return AllocationEstimate(1, law, "", points,
                              _power_intervals(law, points["C"], points["N"], points["D"]))


def _loose_budget_note(cells: pd.DataFrame, grouped: np.ndarray) -> str | None:
    """A note when runs left ungrouped (chains of close computes spanning over 2 %) look like
    isoFLOP budgets: a chain of ≥ 3 sizes spanning at most 10 % (a design whose budgets vary by
    a few % keeps its runs' own C, and off-optimal sizes join the envelope: a review's ±1.5 %
    design gave a = 0.530 against a true 0.452)."""
    C = cells["C"].to_numpy(float)
    N = cells["N"].to_numpy(float)
    loose = [members.min() for members in _lost_chains(C, grouped)
             if np.unique(N[np.isin(C, members)]).size >= 3
             and members.max() <= 1.1 * members.min()]
    if not loose:
        return None
    return (f"{len(loose)} group(s) of ≥ 3 sizes at computes within 10 % of one another span "
            f"more than {200 * ISOFLOP_RTOL:g} % (from C = {min(loose):.3g} FLOPs): their runs "
            "keep their own C on the envelope; if they are isoFLOP budgets, name each run's "
            "budget with --isoflop-column")


def isoflop_estimate(cells: pd.DataFrame, isoflop_column: str | None,
                     min_points: int) -> AllocationEstimate:
    """Approach 2 on the cell bests grouped into isoFLOP budgets (a column, or
    :func:`isoflop_budgets`); names budgets whose parabola's vertex lies outside their sizes."""
    C = cells["C"].to_numpy(float)
    budget = (cells[isoflop_column].to_numpy(float) if isoflop_column
              else isoflop_budgets(C, strict=False))
    chains = [{"C": float(np.exp(np.mean(np.log(members)))), "n_models": int(members.size),
               "used": False, "reason": _chain_text(members, ISOFLOP_RTOL)}
              for members in _lost_chains(C, budget)]  # no one budget each: listed
    runs = cells.assign(_budget=budget)[~np.isnan(budget)]
    try:
        law = approach2(runs, budget="_budget", min_points=min_points)
    except FitError as exc:
        n_iso = int((runs.groupby("_budget")["N"].nunique() >= min_points).sum())
        why = f"; {chains[0]['reason']}" if chains else ""
        return AllocationEstimate(
            2, None, f"{exc} ({n_iso} budget{'s' if n_iso != 1 else ''} with ≥ {min_points} "
            f"sizes among {runs['_budget'].nunique()} distinct computes; isoFLOP profiles "
            f"need several model sizes trained at one compute{why})", pd.DataFrame(chains))
    on_profiles = int(runs["_budget"].isin(law.points.loc[law.points["used"], "C"]).sum())
    if chains:
        pts = pd.concat([law.points, pd.DataFrame(chains)], ignore_index=True).sort_values("C")
        law = replace(law, points=pts.reset_index(drop=True))
    pts = law.points
    if isoflop_column is None and on_profiles < ISOFLOP_MIN_SHARE * len(cells):
        why = (f"only {on_profiles} of the {len(cells)} cells lie on isoFLOP profiles "
               f"(≥ {min_points} sizes at one compute, within {100 * ISOFLOP_RTOL:g} %): the "
               "table is not an isoFLOP design, and profiles of a few sizes that share a "
               "compute by chance say little (a budget column, --isoflop-column, names a "
               "design's)" + (f"; {sum(c['n_models'] for c in chains)} of them are in "
                              f"{len(chains)} chain(s) of close computes that are no one "
                              "budget" if chains else ""))
        kept = pts["used"].astype(bool)
        pts = pts.assign(used=False, reason=pts["reason"].where(~kept, "not an isoFLOP design"))
        return AllocationEstimate(2, None, why, pts)
    used = pts[pts["used"]]
    _two_points(law, "isoFLOP budgets")
    outside = used[~used["vertex_inside"].astype(bool)]
    if len(outside):
        inner = used[used["vertex_inside"].astype(bool)]
        without = (f"; without them N* grows as "
                   f"C^{fit_power(inner['C'], inner['N_opt']).exponent:.3f} (with them "
                   f"C^{law.n_opt.exponent:.3f})" if inner["C"].nunique() >= 2 else "")
        warnings.warn(f"{len(outside)} of {len(used)} budgets put N* outside the sizes they "
                      f"trained (C = {', '.join(f'{c:.3g}' for c in outside['C'])} FLOPs): "
                      f"the parabola extrapolates there{without}; train sizes around their "
                      "optimum", UserWarning, stacklevel=2)
    return AllocationEstimate(2, law, "", pts,
                              _power_intervals(law, used["C"], used["N_opt"], used["D_opt"]))


def law_estimate(cells: pd.DataFrame, bootstrap: int = 0, seed: int = 0) -> AllocationEstimate:
    """Approach 3: the Chinchilla law fitted to the cell bests (the law's start grid, default
    Huber δ, as ``scalebo fit --law chinchilla``), minimized under C = 6ND; with
    ``bootstrap`` resamples (whole runs when a ``run`` column groups checkpoints) a percentile
    interval of ``a = β/(α+β)``."""
    from scalebo.fitting.bootstrap import bootstrap_fit
    from scalebo.fitting.misfit import misfit_notes
    from scalebo.fitting.robust import fit_law
    from scalebo.fitting.run_clusters import run_cluster_note, run_clusters
    from scalebo.laws import get_law

    law = get_law("chinchilla")
    points = cells[[c for c in ("run_id", "N", "D", "C", "loss") if c in cells]]
    if len(points) < law.n_params:
        return AllocationEstimate(3, None, f"L(N, D) has {law.n_params} parameters but the "
                                  f"table has {len(points)} (N, D) cells", points)
    X = points[["N", "D"]].to_numpy(float)
    fit = fit_law(law, X, points["loss"].to_numpy(float), starts=law.start_grid(law.prepare(X)))
    params = {k: float(v) for k, v in law.natural(fit.x).items()}
    status = str(fit.status)
    if fit.status not in (FitStatus.CONVERGED, FitStatus.BOUND_HIT):
        return AllocationEstimate(3, None, f"the L(N, D) fit is {status}: {fit.message}",
                                  points, fit_status=status, law_params=params)
    if fit.status is FitStatus.BOUND_HIT:
        warnings.warn(f"the L(N, D) fit has a parameter at a bound ({fit.message}): distrust "
                      "its allocation", UserWarning, stacklevel=2)
    k = flops_factor(points)  # the table's own FLOPs per parameter-token (6 as a rule)
    try:
        alloc = approach3(fit, k)
    except (FitError, ValueError) as exc:
        return AllocationEstimate(3, None, str(exc), points, fit_status=status,
                                  law_params=params)
    for text in [table_compute_note(k),
                 *misfit_notes("L(N, D)", params, points["C"], points["loss"]),
                 ratio_note(alloc, points)]:  # E above the best run: as fit says (a trial)
        if text:
            warnings.warn(text, UserWarning, stacklevel=2)
    intervals, boot_laws = {}, None
    if bootstrap:
        boot = bootstrap_fit(fit, X, points["loss"].to_numpy(float), n_resamples=bootstrap,
                             rng=seed, confidence_level=EXPONENT_LEVEL,
                             clusters=run_clusters(cells))
        for text in (boot.failure_note(), run_cluster_note(cells)):
            if text:
                warnings.warn(text, UserWarning, stacklevel=2)
        nat = boot.natural_samples
        a = nat["beta"] / (nat["alpha"] + nat["beta"])  # N* ∝ C^a, D* ∝ C^(1 - a)
        if (iv := boot.percentile(a)) is not None:
            intervals = {"N_opt": iv, "D_opt": (1 - iv[1], 1 - iv[0])}
        boot_laws = _boot_laws(nat, k)
    return AllocationEstimate(3, alloc, "", points, intervals, fit_status=status,
                              law_params=params, boot_laws=boot_laws)


def _boot_laws(nat: dict[str, np.ndarray], k: float) -> np.ndarray:
    """Rows ``(ln G_N, a, ln G_D, b)`` of each resample's optimum under k·N·D = C
    (:func:`~scalebo.fitting.allocation.optimum_logs`); resamples without one dropped."""
    rows = []
    for A, alpha, B, beta in zip(nat["A"], nat["alpha"], nat["B"], nat["beta"], strict=True):
        try:
            rows.append(optimum_logs(float(A), float(alpha), float(B), float(beta), k))
        except FitError:
            continue
    return np.array(rows, dtype=np.float64).reshape(-1, 4)
