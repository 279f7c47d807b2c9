"""Compute-optimal allocation from a run table by Chinchilla approaches 1, 2 and 3, side by side.

What ``scalebo allocate`` prints. Conventions: ``C`` in FLOPs (``6·N·D`` unless the table has a
``C`` column), ``N`` parameters, ``D`` tokens, losses in nats. Each approach gives power laws
``N*(C) = G_N·C^a`` and ``D*(C) = G_D·C^b`` (:class:`~scalebo.fitting.allocation.AllocationLaw`);
Hoffmann et al. (2022) found the three to disagree by a few hundredths in ``a`` on their runs,
which is why a user wants to see them together.

* **1** — the best run of each (N, D) cell, then the Pareto envelope of (C, loss) over them;
  ``log N`` and ``log D`` regressed on ``log C`` (:func:`~scalebo.fitting.allocation.approach1`).
  Runs whose C agree within :data:`ISOFLOP_RTOL` count as one compute (a table of isoFLOP
  profiles with sizes rounded to whole numbers would otherwise put off-optimal runs a little
  cheaper than their budget's best on the envelope).
* **2** — isoFLOP profiles: the cell bests grouped by compute (a column naming each run's
  budget, or runs whose C agree within :data:`ISOFLOP_RTOL`); in each group with ≥ 3 sizes a
  parabola of loss in ``log N`` gives ``N*``; ``D* = C/(6 N*)``
  (:func:`~scalebo.fitting.allocation.approach2`).
* **3** — ``L(N, D) = E + A/N^α + B/D^β`` fitted to the cell bests and minimized under
  ``C = 6ND`` (:func:`~scalebo.fitting.allocation.approach3`).

An approach the table cannot support is reported with the reason (never silently left out).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from scalebo import __version__
from scalebo.errors import FitError
from scalebo.fitting.allocation import (
    AllocationLaw,
    PowerFit,
    approach1,
    approach2,
    approach3,
    edge_note,
)
from scalebo.fitting.frontier import best_per_cell, pareto_envelope
from scalebo.fitting.robust import FitStatus

APPROACHES: tuple[int, ...] = (1, 2, 3)

#: Runs whose compute agrees within this relative tolerance form one isoFLOP budget when no
#: budget column is named: sizes and token counts rounded to whole numbers move ``6·N·D`` by
#: well under 1 %, while isoFLOP budgets are spaced by factors of 2 or more.
ISOFLOP_RTOL = 0.01

#: Level of the exponents' t-intervals (approaches 1 and 2: least squares in log–log space).
EXPONENT_LEVEL = 0.95


def isoflop_budgets(C: np.ndarray, rtol: float = ISOFLOP_RTOL) -> np.ndarray:
    """The isoFLOP budget (FLOPs) of each run: runs are sorted by C and a new budget starts
    where C grows by more than ``rtol`` over the previous run; a budget is the geometric mean
    of its runs' C.

    Raises:
        FitError: a chain of close computes spans more than ``2·rtol`` (the runs are not on
            isoFLOP budgets; name each run's budget with a column instead).
    """
    C = np.asarray(C, dtype=np.float64)
    order = np.argsort(C, kind="stable")
    logc = np.log(C[order])
    label = np.concatenate([[0], np.cumsum(np.diff(logc) > math.log1p(rtol))])
    out = np.empty_like(C)
    for k in np.unique(label):
        members = logc[label == k]
        span = math.expm1(members[-1] - members[0])
        if span > 2 * rtol:
            raise FitError(
                f"{members.size} runs with C from {math.exp(members[0]):.4g} to "
                f"{math.exp(members[-1]):.4g} FLOPs chain within {100 * rtol:g} % of each other "
                f"(span {100 * span:.2g} %): they are not on isoFLOP budgets; name each run's "
                "budget with a column (--isoflop-column)")
        out[order[label == k]] = math.exp(members.mean())
    return out


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
    """

    approach: int
    law: AllocationLaw | None
    reason: str = ""
    points: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    fit_status: str | None = None
    law_params: dict[str, float] = field(default_factory=dict)

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
            "points": _records(self.points),
        }


@dataclass(frozen=True)
class AllocationSummary:
    """The approaches' allocation laws for one table, with predictions at given computes."""

    source: str
    n_runs: int
    n_cells: int
    estimates: tuple[AllocationEstimate, ...]
    predict: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether at least one approach gave a law."""
        return any(e.law is not None for e in self.estimates)

    def predictions(self) -> list[dict[str, Any]]:
        """One row per (C, approach with a law): ``C``, ``approach``, ``N_opt``, ``D_opt``,
        ``tokens_per_param``."""
        return [{"C": float(c), "approach": e.approach, **e.at(c)}
                for c in self.predict for e in self.estimates if e.law is not None]

    def to_dict(self) -> dict[str, Any]:
        return {"scalebo_version": __version__, "source": self.source, "n_runs": self.n_runs,
                "n_cells": self.n_cells,
                "units": {"C": "FLOPs", "N_opt": "parameters", "D_opt": "tokens"},
                "exponent_level": EXPONENT_LEVEL,
                "estimates": [e.to_dict() for e in self.estimates],
                "predictions": self.predictions(), "warnings": list(self.warnings)}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _power_intervals(law: AllocationLaw, C: np.ndarray, N: np.ndarray,
                     D: np.ndarray) -> dict[str, tuple[float, float]]:
    out = {}
    for key, fit, y in (("N_opt", law.n_opt, N), ("D_opt", law.d_opt, D)):
        if (iv := exponent_interval(fit, C, y)) is not None:
            out[key] = iv
    return out


def _approach1(cells: pd.DataFrame) -> AllocationEstimate:
    C = cells["C"].to_numpy(float)
    try:  # runs on isoFLOP budgets (C within ISOFLOP_RTOL) are at one compute
        C = isoflop_budgets(C)
    except FitError:
        pass
    env = cells.loc[pareto_envelope(C, cells["loss"].to_numpy(float))]
    env = env.sort_values("C")
    points = env[[c for c in ("run_id", "N", "D", "C", "loss") if c in env]].reset_index(
        drop=True)
    try:
        law = approach1(points)
    except FitError as exc:
        return AllocationEstimate(1, None, f"the envelope: {exc}", points)
    if points["N"].nunique() < 2:
        return AllocationEstimate(1, None, "every envelope run has the same N: the table "
                                  "does not say how N* grows with C", points)
    if text := edge_note(points, float(cells["N"].min()), float(cells["N"].max())):
        warnings.warn(text, UserWarning, stacklevel=2)
    return AllocationEstimate(1, law, "", points,
                              _power_intervals(law, points["C"], points["N"], points["D"]))


def _approach2(cells: pd.DataFrame, isoflop_column: str | None,
               min_points: int) -> AllocationEstimate:
    try:
        budget = (cells[isoflop_column].to_numpy(float) if isoflop_column
                  else isoflop_budgets(cells["C"].to_numpy(float)))
    except FitError as exc:
        return AllocationEstimate(2, None, str(exc))
    runs = cells.assign(_budget=budget)
    try:
        law = approach2(runs, budget="_budget", min_points=min_points)
    except FitError as exc:
        n_iso = int((runs.groupby("_budget")["N"].nunique() >= min_points).sum())
        return AllocationEstimate(
            2, None, f"{exc} ({n_iso} budget{'s' if n_iso != 1 else ''} with ≥ {min_points} "
            f"sizes among {runs['_budget'].nunique()} distinct computes; isoFLOP profiles "
            "need several model sizes trained at one compute)")
    pts = law.points
    used = pts[pts["used"]]
    return AllocationEstimate(2, law, "", pts,
                              _power_intervals(law, used["C"], used["N_opt"], used["D_opt"]))


def _approach3(cells: pd.DataFrame, bootstrap: int = 0, seed: int = 0) -> AllocationEstimate:
    from scalebo.fitting.bootstrap import bootstrap_fit
    from scalebo.fitting.robust import fit_law
    from scalebo.fitting.run_clusters import run_clusters
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
    try:
        alloc = approach3(fit)
    except (FitError, ValueError) as exc:
        return AllocationEstimate(3, None, str(exc), points, fit_status=status,
                                  law_params=params)
    intervals = {}
    if bootstrap:
        boot = bootstrap_fit(fit, X, points["loss"].to_numpy(float), n_resamples=bootstrap,
                             rng=seed, confidence_level=EXPONENT_LEVEL,
                             clusters=run_clusters(cells))
        if text := boot.failure_note():
            warnings.warn(text, UserWarning, stacklevel=2)
        nat = boot.natural_samples
        a = nat["beta"] / (nat["alpha"] + nat["beta"])  # N* ∝ C^a, D* ∝ C^(1 - a)
        if (iv := boot.percentile(a)) is not None:
            intervals = {"N_opt": iv, "D_opt": (1 - iv[1], 1 - iv[0])}
    return AllocationEstimate(3, alloc, "", points, intervals, fit_status=status,
                              law_params=params)


def allocation_summary(table: Any, approaches: Sequence[int] = APPROACHES, *,
                       isoflop_column: str | None = None, min_points: int = 3,
                       predict: Sequence[float] = (), bootstrap: int = 0,
                       seed: int = 0) -> AllocationSummary:
    """Compute-optimal allocation of ``table`` by each of ``approaches`` (see the module doc).

    Args:
        table: a :class:`~scalebo.data.runs.RunTable` (completed runs; failed ones excluded).
        approaches: any of 1, 2, 3.
        isoflop_column: a column holding each run's isoFLOP budget in FLOPs (approach 2);
            None groups runs whose C agree within :data:`ISOFLOP_RTOL`.
        min_points: model sizes an isoFLOP budget needs for its parabola (≥ 3).
        predict: computes (FLOPs) at which to give N*, D* and D*/N*.
        bootstrap: resamples of the cells for approach 3's exponent interval (0: none;
            whole runs when a ``run`` column groups checkpoints), seeded by ``seed``.

    Raises:
        ValueError: an unknown approach, ``min_points`` < 3, a missing or non-positive
            isoFLOP column.
    """
    unknown = [a for a in approaches if a not in APPROACHES]
    if unknown or not approaches:
        raise ValueError(f"approaches must be among {list(APPROACHES)}, got {list(approaches)}")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    if min_points < 3:
        raise ValueError(f"an isoFLOP parabola needs ≥ 3 sizes, got min_points={min_points}")
    frame = table.frame
    if isoflop_column is not None:
        if isoflop_column not in frame.columns:
            raise ValueError(f"--isoflop-column {isoflop_column!r} is not a column of "
                             f"{table.source}; columns: {list(frame.columns)}")
        values = pd.to_numeric(frame[isoflop_column], errors="coerce").to_numpy(float)
        if bad := np.flatnonzero(~(values > 0)).tolist():
            raise ValueError(f"{table.source}: column {isoflop_column!r} must hold each run's "
                             f"budget in FLOPs (> 0); data row {frame.index[bad[0]] + 1} has "
                             f"{frame[isoflop_column].iloc[bad[0]]!r}")
    keys = ["N", "D", *([isoflop_column] if isoflop_column else [])]
    cells = best_per_cell(frame, keys)
    notes = []
    if isoflop_column and cells.groupby(["N", "D"]).ngroups < len(cells):
        notes.append(f"some (N, D) cells appear under several {isoflop_column!r} budgets; "
                     "each (N, D, budget) is one point")
    out = []
    for a in sorted(set(approaches)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = (_approach1(cells) if a == 1 else _approach2(cells, isoflop_column, min_points)
                   if a == 2 else _approach3(cells, bootstrap, seed))
        notes += [f"approach {a}: {w.message}" for w in caught]
        out.append(est)
    summary = AllocationSummary(source=table.source, n_runs=len(frame), n_cells=len(cells),
                                estimates=tuple(out), predict=tuple(float(c) for c in predict))
    return replace(summary, warnings=(*notes, *disagreement_notes(summary)))


#: Approaches whose N* at a predicted compute differ by more than this factor are named.
DISAGREEMENT_FACTOR = 2.0


def disagreement_notes(summary: AllocationSummary) -> list[str]:
    """A note per ``--predict`` compute where the approaches' N* differ by more than
    :data:`DISAGREEMENT_FACTOR`: the table then does not pin the allocation down there."""
    notes = []
    for C in summary.predict:
        rows = [r for r in summary.predictions() if r["C"] == C]
        if len(rows) < 2:
            continue
        lo = min(rows, key=lambda r: r["N_opt"])
        hi = max(rows, key=lambda r: r["N_opt"])
        if hi["N_opt"] > DISAGREEMENT_FACTOR * lo["N_opt"]:
            notes.append(f"at C = {C:.3g} FLOPs approach {hi['approach']} puts N* "
                         f"{hi['N_opt'] / lo['N_opt']:.3g}x above approach {lo['approach']} "
                         f"({hi['N_opt']:.3g} vs {lo['N_opt']:.3g} parameters): the runs do not "
                         "pin the allocation down this far out; trust neither alone")
    return notes
