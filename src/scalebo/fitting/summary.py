"""The fit summary: one call from a run table to a fitted law, intervals and predictions.

What ``scalebo fit`` computes, as a library function (:func:`fit_summary`); the command only
loads the table, calls it, draws and prints :meth:`FitSummary.to_dict`.

Pipeline: choose the points to fit (a frontier, or all runs) → multi-start Huber fit on
natural-log residuals (:func:`~scalebo.fitting.robust.fit_law`) → optional bootstrap over the
fitted points (:func:`~scalebo.fitting.bootstrap.bootstrap_fit`, one batched call) →
predictions at compute budgets (FLOPs).

Default points (``frontier=None``):

* ``compute`` law ``L(C)``: the Pareto **envelope** of (C, loss) — the best loss reached at each
  compute, which is what ``L(C)`` describes;
* laws in ``N`` and ``D`` (``chinchilla``, ``powerlaw:N,D``): the best run of each (N, D)
  **cell**. ``L(N, D)`` describes the loss of a well-tuned model at every (N, D), not only at
  the compute-optimal one, so every cell is informative; keeping only the best run per cell
  drops badly tuned hyperparameters. With one run per cell (e.g. Epoch's Chinchilla points)
  this is the same as ``all`` (Hoffmann et al.'s approach 3);
* other laws: **all** runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from scalebo import __version__
from scalebo.data.runs import RunTable
from scalebo.errors import FitError, NumericalWarning
from scalebo.fitting.allocation import ComputeOptimal, compute_optimal
from scalebo.fitting.allocation_notes import predicted_ratio_note
from scalebo.fitting.arguments import computes, resamples
from scalebo.fitting.bootstrap import BootstrapResult, bootstrap_fit
from scalebo.fitting.edges import edge_optimum_note
from scalebo.fitting.frontier import frontier as select_frontier
from scalebo.fitting.identifiability import distinct_points
from scalebo.fitting.input_notes import one_size_note, tiny_compute_notes
from scalebo.fitting.law_inputs import check_law_inputs
from scalebo.fitting.misfit import (
    diverged_points_note,
    falling_error_note,
    misfit_notes,
    rising_response_note,
)
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA, FitResult, FitStatus, fit_law
from scalebo.fitting.run_clusters import run_cluster_note, run_clusters, run_label_note
from scalebo.laws import GadreDownstreamLaw, Law, PowerLawSum, SigmoidDownstreamLaw, get_law

__all__ = ["FIT_ADVICE", "FRONTIERS", "FRONTIER_NOTE_PCT", "UNITS", "FitSummary",
           "default_frontier", "fit_summary", "frontier_note", "law_formula", "one_size_note",
           "law_settings", "prediction_kind", "predictions", "run_cluster_note", "run_clusters",
           "select_points", "tiny_compute_notes"]

FRONTIERS = ("envelope", "hull", "cell", "all")
#: Units of the canonical columns, as printed and written.
UNITS = {"C": "FLOPs", "N": "parameters", "D": "tokens", "loss": "nats"}
_PATH_FIELDS = ("loss", "N_opt", "D_opt", "tokens_per_param")


def law_formula(law: Law) -> str:
    """The law as a readable formula (ASCII-friendly Unicode)."""
    if isinstance(law, PowerLawSum):
        args = ", ".join(t.variable for t in law.terms)
        terms = " + ".join(f"{t.coef}/{t.variable}^{t.exponent}" for t in law.terms)
        return f"L({args}) = E + {terms}"
    if isinstance(law, GadreDownstreamLaw):
        return "Err(L) = epsilon - k*exp(-gamma*L)"
    if isinstance(law, SigmoidDownstreamLaw):
        return "Err(L) = a/(1 + exp(-k*(L - L0))) + b"
    return law.name


def prediction_kind(law: Law) -> str | None:
    """``"compute"`` for L(C), ``"allocation"`` for L(N, D) sums of power laws, else None."""
    if tuple(law.variables) == ("C",):
        return "compute"
    if isinstance(law, PowerLawSum) and tuple(law.variables) == ("N", "D"):
        return "allocation"
    return None


def law_settings(table: RunTable, law: Law) -> list[str]:
    """The table's hyperparameters that are not the law's own inputs (a width/depth law's
    ``width`` and ``depth`` are not settings it averages over or tunes)."""
    return [h for h in table.hyperparameters if h not in law.variables]


def default_frontier(law: Law) -> str:
    """Default points for a law (see the module docstring for the reasons)."""
    return {"compute": "envelope", "allocation": "cell"}.get(prediction_kind(law), "all")


#: A compute law fitted on the envelope whose prediction moves by more than this (%) when
#: it is fitted on the lower convex hull instead gets a note (:func:`frontier_note`).
FRONTIER_NOTE_PCT = 1.0


#: What :func:`frontier_note` advises by default (``scalebo fit``'s options).
FIT_ADVICE = ("compare --frontier hull and the Chinchilla law's compute-optimal loss "
              "(--law chinchilla; in Python frontier='hull', law='chinchilla')")


def frontier_note(frame: pd.DataFrame, law: Law, target: str, fit: FitResult,
                  compute: Sequence[float], huber_delta: float,
                  advice: str = FIT_ADVICE) -> str | None:
    """A note when the compute law ``fit`` (on the Pareto envelope of ``frame``) predicts the
    loss at ``compute`` (FLOPs) more than :data:`FRONTIER_NOTE_PCT` % away from the same law
    fitted on the lower convex hull; None otherwise or when the hull fit fails.

    The envelope keeps every run that lowers the best loss so far, also those a coarse grid
    puts above the compute-optimal frontier (no (N, D) cell near the optimum at that compute);
    they flatten the fitted curve, and its extrapolation falls below the hull's. On a grid
    made from a known Chinchilla law (5 N × 4 D, lognormal noise 0.2 %) the envelope fit was
    7.6 % below the true compute-optimal loss at 1e25 FLOPs and the hull fit 0.3 %; on other
    grids the hull is no better (README, "Fitting a law"). Which one is right the runs do not
    say: the note reports the spread, a systematic uncertainty that no bootstrap shows.
    ``frame`` needs ``C`` (FLOPs) and ``target``; ``advice`` ends the note."""
    if not len(compute):
        return None
    try:
        hull = select_points(frame, "hull", law, target)
        if len(hull) == fit.n_obs:  # the hull's runs are the envelope's: the same fit
            return None
        X = hull[list(law.variables)].to_numpy(dtype=np.float64)
        other = fit_law(law, X, hull[target].to_numpy(dtype=np.float64),
                        huber_delta=huber_delta, starts=law.start_grid(law.prepare(X)))
    except (FitError, ValueError):
        return None
    if not other.success:
        return None
    C = np.asarray(compute, dtype=np.float64)[:, None]
    a, b = fit.predict(C), other.predict(C)
    gap = 100 * (b - a) / a
    if not np.isfinite(gap).any():
        return None
    j = int(np.nanargmax(np.abs(gap)))
    if abs(gap[j]) <= FRONTIER_NOTE_PCT:
        return None
    return (f"fitted on the lower convex hull of (C, {target}) ({len(hull)} runs) instead of "
            f"the envelope, the compute law predicts {b[j]:.4g} at {C[j, 0]:.3g} FLOPs, "
            f"{gap[j]:+.1f} % from this fit's {a[j]:.4g}: a coarse grid's runs above the "
            "compute-optimal frontier enter the envelope but not the hull, and which fit "
            f"extrapolates better the runs do not say; {advice}")


def select_points(frame: pd.DataFrame, method: str, law: Law, target: str) -> pd.DataFrame:
    """Rows of ``frame`` to fit: a frontier of (C, target) or of cells, or all rows.

    Raises:
        ValueError: a column the law needs is missing, or ``method`` is unknown.
    """
    if method not in FRONTIERS:
        raise ValueError(f"unknown frontier {method!r}; expected one of {list(FRONTIERS)}")
    needed = [*law.variables, target]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        canonical = [c for c in missing if c in ("N", "D", "C", "loss")]
        other = [c for c in missing if c not in canonical]
        how = []
        if canonical:
            how.append(f"map yours with --map {','.join(f'{c}=<column>' for c in canonical)}"
                       " (mapping= in Python)")
        if other:
            how.append(f"give the file columns named {other} (--map renames only run_id, N, "
                       "D, C and loss)")
        raise ValueError(
            f"law {law.name!r} needs column(s) {missing}; the runs have "
            f"{list(frame.columns)}. To fit it, {' and '.join(how)}; or choose another "
            "--law/--response"
        )
    if method == "all":
        return frame
    if method == "cell":
        cell = tuple(law.variables)
        if set(cell) & {"C", "loss", target}:
            cell = ("N", "D")
        return select_frontier(frame, "cell", loss=target, cell=cell)
    return select_frontier(frame, method, loss=target)


def _safe_optimal(fit: FitResult, C: float) -> ComputeOptimal | None:
    try:
        return compute_optimal(fit, C, warn=False)
    except (FitError, ValueError, FloatingPointError):
        return None


def predictions(fit: FitResult, boot: BootstrapResult | None,
                compute: Sequence[float]) -> list[dict[str, Any]]:
    """Predicted loss (nats) at each compute (FLOPs), with intervals if ``boot`` is given.

    For laws in N and D: the compute-optimal N* (parameters), D* (tokens), D*/N* and the
    loss along that path (Hoffmann et al. 2022, approach 3), each with its interval.

    Raises:
        ValueError: the law is neither in C nor in (N, D).
    """
    kind = prediction_kind(fit.law)
    if kind is None:
        raise ValueError(
            f"predictions need a law in C or in (N, D); {fit.law.name!r} has variables "
            f"{list(fit.law.variables)}"
        )
    out: list[dict[str, Any]] = []
    if kind == "compute":
        C = np.asarray(compute, dtype=np.float64)
        loss = fit.predict(C[:, None])
        bands = boot.predict_samples(C[:, None]) if boot is not None and len(C) else None
        for i, c in enumerate(C):
            iv = boot.percentile(bands[:, i]) if bands is not None else None
            out.append({"C": float(c), "loss": float(loss[i]),
                        "loss_interval": list(iv) if iv else None})
        return out
    for c in compute:
        best = compute_optimal(fit, c, warn=False)
        rec: dict[str, Any] = {"C": float(c)} | {f: float(getattr(best, f)) for f in _PATH_FIELDS}
        if boot is None:
            rec |= {f"{f}_interval": None for f in _PATH_FIELDS}
        else:
            reps = [_safe_optimal(replace(fit, x=s), c) for s in boot.samples]
            for f in _PATH_FIELDS:
                iv = boot.percentile(np.array([getattr(r, f) if r is not None else np.nan
                                               for r in reps]))
                rec[f"{f}_interval"] = list(iv) if iv else None
        out.append(rec)
    return out


@dataclass(frozen=True)
class FitSummary:
    """A fitted law with the points it was fitted on, its bootstrap and its predictions.

    Attributes:
        table: the run table (after loading, exclusions counted in it).
        law: the law fitted.
        frontier: how the points were chosen (``envelope``, ``hull``, ``cell``, ``all``).
        target: the fitted column (``loss`` in nats unless another is named).
        points: the fitted rows of ``table.frame``.
        fit: the multi-start fit; its ``status`` says whether the law is identified.
        bootstrap: the bootstrap over ``points``, or None.
        predictions: one dict per compute (see :func:`predictions`).
        warnings: messages of the warnings raised while fitting, plus ``notes`` given by the
            caller (e.g. warnings of loading) — they are also re-emitted, never swallowed.
    """

    table: RunTable
    law: Law
    frontier: str
    target: str
    points: pd.DataFrame = field(repr=False)
    fit: FitResult
    bootstrap: BootstrapResult | None
    predictions: list[dict[str, Any]]
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (f"FitSummary({self.fit!r}, frontier={self.frontier!r}, "
                f"points={len(self.points)} of {len(self.table)} runs, "
                f"predictions={len(self.predictions)}, warnings={len(self.warnings)}; "
                "to_dict() for everything)")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``scalebo fit --format json`` prints)."""
        table, law = self.table, self.law
        reasons = (
            table.excluded["reason"].astype(str).value_counts().to_dict()
            if table.n_excluded and "reason" in table.excluded.columns else {}
        )
        cols = [c for c in ("run_id", "N", "D", "C", *law.variables, self.target)
                if c in self.points]
        return {
            "scalebo_version": __version__,
            "source": table.source,
            "law": {"name": law.name, "formula": law_formula(law),
                    "variables": list(law.variables), "target": self.target,
                    "units": {v: UNITS.get(v, "") for v in (*law.variables, self.target)}},
            "frontier": self.frontier,
            "runs": {"read": len(table) + table.n_excluded, "loaded": len(table),
                     "used": len(self.points), "excluded": table.n_excluded,
                     "excluded_by_reason": reasons},  # read = loaded (valid) + excluded
            "fit": self.fit.to_dict(),
            "bootstrap": self.bootstrap.to_dict() if self.bootstrap is not None else None,
            "predictions": self.predictions,
            "points": self.points[list(dict.fromkeys(cols))].to_dict(orient="records"),
            "warnings": list(self.warnings),
        }


def fit_summary(table: RunTable, law: Law | str = "compute", *, frontier: str | None = None,
                target: str = "loss", huber_delta: float = DEFAULT_HUBER_DELTA,
                bootstrap: int = 0, confidence_level: float = 0.95,
                seed: int | np.random.Generator | None = 0, predict: Sequence[float] = (),
                notes: Sequence[str] = ()) -> FitSummary:
    """Fit ``law`` to ``table`` as ``scalebo fit`` does (see the module docstring).

    Args:
        table: validated runs (:func:`~scalebo.data.runs.load_runs`).
        law: a :class:`~scalebo.laws.Law` or a registry name (``compute``, ``chinchilla``, …).
        frontier: points to fit; None picks the law's default (:func:`default_frontier`).
        target: column to fit (natural units; log residuals are used).
        huber_delta: δ of the Huber loss on natural-log residuals.
        bootstrap: resamples over the fitted points (0: none).
        confidence_level: level of every percentile interval.
        seed: seed (or Generator) of the bootstrap.
        predict: compute budgets in FLOPs at which to predict (laws in C or in (N, D)); one
            number or several.
        notes: messages to carry into :attr:`FitSummary.warnings` (e.g. of loading).

    Raises:
        ValueError: bad options (a law that cannot predict asked for predictions, a target
            that is an input of the law, a negative bootstrap count).
        FitError: fewer fitted points than the law has parameters.
    """
    if not isinstance(table, RunTable):
        raise TypeError(f"fit_summary takes a RunTable (scalebo.load_runs(path or DataFrame, "
                        f"mapping=...) checks the runs first), got {type(table).__name__}")
    law = get_law(law) if isinstance(law, str) else law
    bootstrap, predict = resamples(bootstrap), computes(predict)  # one compute, or several
    if len(predict) and prediction_kind(law) is None:
        raise ValueError(f"predictions need a law in C or in (N, D), not {law.name!r}")
    if target in law.variables:
        raise ValueError(f"law {law.name!r} takes {target!r} as input: name the column it "
                         "predicts with --response COL (target= in fit_summary), e.g. a benchmark "
                         "error")
    method = frontier or default_frontier(law)
    tuned = law_settings(table, law)
    check_law_inputs(table.frame, law, target, table.source)
    points = select_points(table.frame, method, law, target)
    X = points[list(law.variables)].to_numpy(dtype=np.float64)
    y = points[target].to_numpy(dtype=np.float64)
    if len(y) < law.n_params:
        every = distinct_points(table.frame[list(law.variables)].to_numpy(dtype=np.float64))
        what = f"({', '.join(law.variables)})" if len(law.variables) > 1 else law.variables[0]
        hint = (f"use more runs or all runs (frontier 'all', {len(table.frame)} runs at "
                f"{every} distinct {what} points)" if method != "all" and every >= law.n_params
                else f"train runs at more distinct {what} values first (the table has "
                f"{every})")
        raise FitError(
            f"{table.source}: law {law.name!r} has {law.n_params} parameters but the {method} "
            f"points are only {len(y)} run{'' if len(y) == 1 else 's'}; {hint}"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_law(law, X, y, huber_delta=huber_delta,
                      starts=law.start_grid(law.prepare(X)))
        if fit.status is not FitStatus.CONVERGED:
            warnings.warn(f"fit status '{fit.status}': {fit.message}", RuntimeWarning,
                          stacklevel=2)
        boot = (bootstrap_fit(fit, X, y, n_resamples=bootstrap,
                              confidence_level=confidence_level, rng=seed,
                              clusters=run_clusters(points))
                if bootstrap else None)
        if boot is not None and (text := run_cluster_note(points)
                                 or run_label_note(points, tuned)):
            warnings.warn(text, UserWarning, stacklevel=2)
        if boot is not None and (text := boot.failure_note()):
            warnings.warn(text, NumericalWarning, stacklevel=2)
        preds = predictions(fit, boot, predict) if len(predict) else []
        for text in (*tiny_compute_notes(predict, float(table.frame["C"].min())),
                     predicted_ratio_note(points, preds)):
            if text:
                warnings.warn(text, UserWarning, stacklevel=2)
        note = (frontier_note(table.frame, law, target, fit, predict, huber_delta)
                if method == "envelope" and prediction_kind(law) == "compute" and fit.success
                else None)
        misfit = (misfit_notes(law.name, fit.params, table.frame["C"].to_numpy(),
                               table.frame[target].to_numpy(), preds, response=target)
                  if method != "all" and fit.success and prediction_kind(law) is not None
                  else [])
        if isinstance(law, PowerLawSum) and (text := rising_response_note(
                table.frame["C"].to_numpy(), table.frame[target].to_numpy(), target)):
            misfit.append(text)
        falling = (falling_error_note(X[:, 0], y, target) if law.variables == ("loss",)
                   else "")
        for text in (note, one_size_note(table.frame) if prediction_kind(law) == "compute"
                     else None, *misfit, falling, diverged_points_note(points, target),
                     "" if method == "all" else edge_optimum_note(
                         pd.concat([table.frame, table.excluded]) if len(table.excluded)
                         else table.frame, points, tuned, target)):
            if text:
                warnings.warn(text, UserWarning, stacklevel=2)
    for w in caught:  # re-emitted for the caller's own filters: recorded, not swallowed
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return FitSummary(table=table, law=law, frontier=method, target=target, points=points,
                      fit=fit, bootstrap=boot, predictions=preds,
                      warnings=(*notes, *(str(w.message) for w in caught)))
