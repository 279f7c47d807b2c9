"""What ``scalebo fit --formula`` computes: a formula law fitted to a table, as one call.

Names of the formula that are columns of the table (directly, or through ``variable_map``
``{name: column}``) are variables; every other name is a parameter and needs bounds.
Residuals are natural-log (Huber, δ = 1e-3; positive responses) or natural units (least
squares; any sign, e.g. vocab's normalized loss). Optional: a bootstrap over the rows
(:func:`scalebo.fitting.formula_bootstrap.bootstrap_formula`) and predictions of the response
at points ``{variable: value}`` (names as in the formula, natural units), with percentile
intervals when bootstrapped. See :mod:`scalebo.laws.formula` and
:mod:`scalebo.fitting.formula_fit`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from scalebo import __version__
from scalebo.data.columns import is_blank
from scalebo.errors import RunTableError, shown, with_hints
from scalebo.fitting.arguments import resamples, whole_number
from scalebo.fitting.formula_bootstrap import FormulaBootstrapResult, bootstrap_formula
from scalebo.fitting.formula_checks import (
    bare_variable_note,
    check_bound_names,
    pooled_settings_note,
    repeated_rows_note,
    undefined_points,
    undefined_rows,
)
from scalebo.fitting.formula_fit import fit_formula, table_inputs
from scalebo.fitting.robust import FitResult, FitStatus
from scalebo.laws.formula import FormulaLaw, formula_law, formula_names

__all__ = ["FormulaFitSummary", "formula_fit_summary", "formula_inputs", "parse_point",
           "summarize_formula_fit"]


def formula_inputs(formula: str, bounds: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of ``formula`` without bounds: its variables when every parameter has bounds."""
    return tuple(n for n in formula_names(formula) if n not in bounds)


def parse_point(text: str | Mapping[str, float], variables: Sequence[str], *,
                columns: Mapping[str, str] | None = None,
                what: str = "--predict-at") -> dict[str, float]:
    """``"N=1e10,D=2e11"`` (or a mapping) as ``{variable: value}`` in ``variables`` order.

    Every variable needs one finite value; ``columns`` ``{variable: table column}`` only
    improves the message when a column name is used instead of the formula's name.

    Raises:
        ValueError: a malformed item, a name given twice, a name that is not a variable, a
            missing variable or a value that is not a finite number (naming it).
    """
    variables = tuple(variables)
    form = f"NAME=VALUE for each of {', '.join(variables)}, e.g. " + ",".join(
        f"{v}=1e10" for v in variables)
    if isinstance(text, Mapping):
        items = [(str(k), v) for k, v in text.items()]
        shown = ",".join(f"{k}={v}" for k, v in items)
    else:
        shown = str(text)
        items = []
        for item in (i.strip() for i in shown.split(",")):
            key, sep, value = (part.strip() for part in item.partition("="))
            if not (sep and key and value):
                raise ValueError(f"{what} {shown!r}: item {item!r} is not of the form {form}")
            items.append((key, value))
    out: dict[str, float] = {}
    back = {c: v for v, c in (columns or {}).items()}
    for key, value in items:
        if key not in variables:
            hint = f" (column {key!r} is variable {back[key]!r})" if key in back else ""
            raise ValueError(f"{what} {shown!r}: {key!r} is not a variable of the formula"
                             f"{hint}; its variables are {', '.join(variables)}")
        if key in out:
            raise ValueError(f"{what} {shown!r}: {key!r} is given twice; keep one")
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(f"{what} {shown!r}: value {value!r} of {key!r} is not a finite "
                             "number")
        out[key] = number
    missing = [v for v in variables if v not in out]
    if missing:
        raise ValueError(f"{what} {shown!r}: no value for variable(s) {', '.join(missing)}; "
                         f"give {form}")
    return {v: out[v] for v in variables}


@dataclass(frozen=True)
class FormulaFitSummary:
    """A formula fit to a table with its data, bootstrap and predictions.

    Attributes:
        law: the formula law; fit: its full-data fit.
        X: inputs ``(n, k)``, columns ``law.variables`` (natural units); y: response ``(n,)``.
        response: name of the response column; residuals: ``"log"`` or ``"natural"``.
        source: where the table came from (for messages and the JSON).
        variable_map: ``{variable: table column}`` of every variable.
        bounds: ``{parameter: (lo, hi)}`` as given.
        bootstrap: the bootstrap over rows, or None.
        points: prediction points ``{variable: value}``.
        notes: remarks on the data (e.g. rows repeated exactly), also warned at the fit.
    """

    law: FormulaLaw
    fit: FitResult
    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    response: str
    residuals: str
    source: str
    variable_map: dict[str, str]
    bounds: dict[str, tuple[float, float]]
    bootstrap: FormulaBootstrapResult | None = None
    points: tuple[dict[str, float], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def fitted(self) -> np.ndarray:
        """Prediction of the fit at every row, ``(n,)``, natural units."""
        return self.law.predict(self.fit.x, self.X)

    @property
    def r2(self) -> float | None:
        """In-sample R² of the response in natural units (None for a constant response)."""
        ss = float(np.sum((self.y - np.mean(self.y)) ** 2))
        return 1 - float(np.sum((self.y - self.fitted) ** 2)) / ss if ss > 0 else None

    @property
    def predictions(self) -> list[dict[str, Any]]:
        """Per point: ``at`` (the point), ``prediction`` (natural units) and ``interval``
        (bootstrap percentile interval, or None)."""
        if not self.points:
            return []
        Xp = np.array([[p[v] for v in self.law.variables] for p in self.points])
        pred = self.law.predict(self.fit.x, Xp)
        bands = None
        if self.bootstrap is not None and len(self.bootstrap.samples):
            bands = np.column_stack(self.bootstrap.predict_interval(Xp))
        return [{"at": dict(p), "prediction": float(pred[i]),
                 "interval": None if bands is None or not np.isfinite(bands[i]).all()
                 else [float(bands[i, 0]), float(bands[i, 1])]}
                for i, p in enumerate(self.points)]

    def rows(self) -> list[dict[str, Any]]:
        """Long-format rows (kind, name, at, estimate, lower, upper) for ``--format csv``."""
        iv = self.bootstrap.intervals if self.bootstrap is not None else {}
        out = [{"kind": "parameter", "name": k, "estimate": v,
                "lower": iv.get(k, (None, None))[0], "upper": iv.get(k, (None, None))[1]}
               for k, v in self.fit.params.items()]
        for p in self.predictions:
            lo, hi = p["interval"] or (None, None)
            out.append({"kind": "prediction", "name": self.response,
                        "at": ",".join(f"{k}={v:g}" for k, v in p["at"].items()),
                        "estimate": p["prediction"], "lower": lo, "upper": hi})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready summary (``scalebo fit --formula --format json``)."""
        out = self.fit.to_dict()
        if not math.isfinite(self.fit.huber_delta):
            out["huber_delta"] = None  # least squares in natural units
        return {
            "scalebo_version": __version__,
            "source": self.source,
            "law": {"formula": self.law.formula, "variables": dict(self.variable_map),
                    "parameters": list(self.law.natural_names),
                    "bounds": {k: list(v) for k, v in self.bounds.items()},
                    "response": self.response},
            "residuals": self.residuals,
            "n_rows": int(self.y.size),
            "fit": out,
            "r2_in_sample": self.r2,
            "bootstrap": None if self.bootstrap is None else self.bootstrap.to_dict(),
            "predictions": self.predictions,
            "warnings": [*self.notes, *(w for w in (bound_warning(self.fit),) if w)],
        }


def bound_warning(fit: FitResult) -> str | None:
    """The warning of a fit that ended with a parameter at its bound (None otherwise): its
    value is the bound's, and a bootstrap interval there says nothing about the data."""
    if fit.status is not FitStatus.BOUND_HIT:
        return None
    return (f"fit status 'bound hit': {fit.message}; that value is the bound's, not the data's "
            "(and so is a bootstrap interval that collapses onto it): widen --bounds (bounds= in "
            "Python) if the "
            "value is plausible, else distrust the fit")


def _finite_column(frame: pd.DataFrame, column: str, source: str, what: str, *,
                   positive: bool = False) -> np.ndarray:
    """``frame[column]`` as float64; RunTableError at its first value that is not a finite
    (``positive``: and positive) number, naming the file, the 1-based data row, the column
    and ``what`` it is."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
    with np.errstate(invalid="ignore"):
        bad_rows = np.flatnonzero(~np.isfinite(values) | (positive & ~(values > 0)))
    if bad_rows.size:
        bad = int(bad_rows[0])
        cell = frame[column].iloc[bad]
        said = ("is blank (a formula fits every row: leave rows without a value out of the "
                "file)" if is_blank(cell) else
                f"{shown(cell)} is not a {'positive, ' if positive else ''}finite number")
        raise RunTableError(f"{source}: data row {bad + 1}, column {column!r} ({what}): {said}")
    return values


def summarize_formula_fit(frame: pd.DataFrame, formula: str, *,
                          bounds: Mapping[str, tuple[float, float]] | None = None,
                          variable_map: Mapping[str, str] | None = None,
                          response: str = "loss", residuals: str = "log", n_starts: int = 64,
                          seed: int = 0, source: str = "<DataFrame>",
                          predict_at: Sequence[str | Mapping[str, float]] = (),
                          bootstrap: int = 0, confidence_level: float = 0.95,
                          huber_delta: float | None = None,
                          progress: Callable[[str], Any] | None = None) -> FormulaFitSummary:
    """Fit ``formula`` to ``frame``; optionally bootstrap it (``bootstrap`` resamples of the
    rows, seeded by ``seed``) and predict at ``predict_at`` points (:func:`parse_point`).
    Every input is checked before the fitting starts; ``progress`` then receives one line
    saying what is being fitted. ``huber_delta``: δ of the Huber loss (None: 1e-3 on log
    residuals, least squares on natural ones; :func:`fit_formula`). Rows repeated exactly
    (every column equal) are fitted as they are, with a warning naming them.

    Raises:
        RunTableError: the response column is missing or not numeric (names the column).
        ValueError: a bad formula, bounds, variable map or point (names what is wrong).
    """
    vmap = dict(variable_map or {})
    bounds = dict(bounds or {})
    bootstrap = resamples(bootstrap)
    whole_number(n_starts, "n_starts", 1)
    n_col, d_col = vmap.get("N", "N"), vmap.get("D", "D")
    names = formula_names(formula)
    if "C" in names and "C" not in bounds:
        if "C" not in frame.columns and "C" not in vmap:
            if n_col not in frame.columns or d_col not in frame.columns:
                raise ValueError(f"{source}: the formula uses C, the compute in FLOPs: give "
                                 "a C column (--map C=COL) or N and D columns, C = 6·N·D "
                                 f"(--map N=COL,D=COL); the table has {list(frame.columns)}")
            n, d = (_finite_column(frame, c, source, f"{k}, for C = 6·N·D", positive=True)
                    for c, k in ((n_col, "N"), (d_col, "D")))
            frame = frame.assign(C=6.0 * n * d)  # FLOPs, as load_runs
        for k in ("N", "D"):  # mapped for C (or out of habit): not a variable of its own
            if k not in names:
                vmap.pop(k, None)
    if response not in frame.columns:
        raise RunTableError(f"{source}: no response column {response!r}; columns are "
                            f"{list(frame.columns)} (choose one with --response; response= "
                            "in Python)")
    y = _finite_column(frame, response, source, "the response")
    if residuals == "log" and not (y > 0).all():
        bad = int(np.flatnonzero(~(y > 0))[0])
        raise RunTableError(f"{source}: data row {bad + 1}, column {response!r}: "
                            f"{shown(frame[response].iloc[bad])} is not positive, which log "
                            "residuals need (--residuals natural fits any sign)")
    variables = [n for n in names if n not in bounds and (n in vmap or n in frame.columns)]
    check_bound_names(names, bounds, vmap, frame.columns, source)
    unknown = [n for n in names if n not in bounds and n not in variables]
    if unknown:
        columns = [str(c) for c in frame.columns]
        raise ValueError(f"{with_hints(unknown, [*columns, *vmap])} in formula {formula!r} "
                         "is neither a column of the table nor a parameter with --bounds "
                         f"(bounds= in Python); columns: {columns}"
                         + (f", mapped: {vmap}" if vmap else "")
                         + " (map a column to a name with --map NAME=COLUMN; variable_map= in "
                         "Python)")
    law = formula_law(formula, variables, bounds)
    columns = {v: vmap.get(v, v) for v in law.variables}
    if isinstance(predict_at, str | Mapping):  # one point, or several
        predict_at = [predict_at]
    points = tuple(parse_point(p, law.variables, columns=columns) for p in predict_at)
    for v in law.variables:  # named by file, row and column (pandas named none)
        if vmap.get(v, v) in frame.columns:
            _finite_column(frame, vmap.get(v, v), source, f"variable {v}")
    X = table_inputs(law, frame, vmap)
    if progress is not None:
        progress(f"fitting {formula!r} to {len(y)} rows from {n_starts} starts ({residuals} "
                 "residuals)" + (f", then {bootstrap} bootstrap resamples in one batch"
                                 if bootstrap else "") + " ...")
    if said := undefined_rows(law, law.random_starts(16, seed), X, columns, source,
                              "at 16 parameter vectors drawn inside the bounds"):
        raise RunTableError(said)
    notes = [said for said in (repeated_rows_note(
        frame, source, "is fitted as an observation of its own"),
        bare_variable_note(law, columns),
        pooled_settings_note(frame, list(columns.values()), response, source)) if said]
    for text in notes:
        warnings.warn(text, UserWarning, stacklevel=2)
    fit = fit_formula(law, X, y, residuals=residuals, n_starts=n_starts, seed=seed,
                      huber_delta=huber_delta)
    if said := undefined_rows(law, fit.x[None, :], X, columns, source, "at the fitted "
                              "parameters", positive=residuals == "log"):
        raise RunTableError(said)
    if said := undefined_points(law, fit.x, points):
        raise ValueError(said)
    if (said := bound_warning(fit)) is not None:
        warnings.warn(said, RuntimeWarning, stacklevel=2)
    boot = None
    if bootstrap:
        boot = bootstrap_formula(fit, X, y, residuals=residuals, n_resamples=bootstrap,
                                 confidence_level=confidence_level, rng=seed)
    summary = FormulaFitSummary(law=law, fit=fit, X=X, y=y, response=response,
                                residuals=residuals, source=source, variable_map=columns,
                                bounds=bounds, bootstrap=boot, points=points, notes=tuple(notes))
    if fit.success and (said := _missed_trend(summary)):  # "converged", yet no fit
        warnings.warn(said, UserWarning, stacklevel=2)
        summary = replace(summary, notes=(*notes, said))
    return summary


#: A fit explaining less than this share of the response's variance, while the response
#: follows one variable's rank order at least :data:`TREND_RHO` closely, gets a warning.
MISSED_R2, TREND_RHO = 0.1, 0.8


def _missed_trend(summary: FormulaFitSummary) -> str | None:
    """A warning's text when the fit explains almost none of a response that clearly moves
    with one of its variables (a trial: a rising sigmoid fitted to an accuracy that falls with
    the loss, R² −0.008, "converged"); None otherwise (flat data fitted flat is no error)."""
    from scipy.stats import spearmanr

    r2 = summary.r2
    if r2 is None or r2 >= MISSED_R2 or len(summary.y) < 5:
        return None
    rho = {v: float(spearmanr(summary.y, summary.X[:, j]).statistic)
           for j, v in enumerate(summary.law.variables) if np.ptp(summary.X[:, j]) > 0}
    rho = {v: r for v, r in rho.items() if np.isfinite(r)}
    if not rho or abs(r := rho[(v := max(rho, key=lambda k: abs(rho[k])))]) < TREND_RHO:
        return None
    return (f"{summary.response!r} follows {v} closely (Spearman ρ = {r:.2g}) but the fit "
            f"explains {max(r2, 0):.0%} of its variance (in-sample R² {r2:.3g}): check the "
            "formula's form, its bounds (a parameter held where it cannot bend the curve) and "
            "the response (percent where the formula gives fractions? rising where it falls?)")


def formula_fit_summary(frame: pd.DataFrame, formula: str, **kwargs: Any) -> dict[str, Any]:
    """:func:`summarize_formula_fit` (same arguments) as its JSON-ready dict."""
    return summarize_formula_fit(frame, formula, **kwargs).to_dict()
