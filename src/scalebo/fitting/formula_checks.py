"""Checks of a formula law's inputs that name what is wrong (file, 1-based data row, column).

Shared by ``scalebo fit --formula`` (:mod:`scalebo.fitting.formula_summary`) and
``scalebo design`` (:mod:`scalebo.cli.design`):

* :func:`check_bound_names` — a name of the formula is a variable (a column, directly or
  through ``--map``) or a parameter (with bounds), never both;
* :func:`undefined_rows` — rows where the formula cannot be evaluated (a log or a fractional
  power of an input ≤ 0), which a fit would otherwise hold at a constant residual, i.e.
  silently leave out;
* :func:`first_non_number` — the first cell of an input column that is not a number;
* :func:`repeated_rows_note` — rows repeated in every column (copies made by mistake?);
* :func:`pooled_settings_note` — settings (a learning rate) that vary among rows of equal
  inputs and that the formula does not use (:func:`pooled_settings`): off-optimal rows are
  fitted with the best.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from scalebo.errors import shown
from scalebo.laws.formula import FormulaLaw

__all__ = ["check_bound_names", "first_non_number", "pooled_settings", "pooled_settings_note",
           "repeated_rows_note", "undefined_rows"]


def check_bound_names(names: Iterable[str], bounds: Mapping[str, object],
                      variable_map: Mapping[str, str], columns: Iterable[object],
                      source: str) -> None:
    """ValueError when a name of the formula has bounds and is also mapped to a column
    (``--map``) or is itself a column of ``source``: it would silently become a fitted
    constant instead of the column's values."""
    names, present = list(names), {str(c) for c in columns}
    if both := [n for n in names if n in bounds and n in variable_map]:
        raise ValueError(f"{both} given bounds and mapped to a column (--map "
                         f"{','.join(f'{n}={variable_map[n]}' for n in both)}): a name of the "
                         "formula is a variable (a column) or a parameter (with bounds), not both")
    if column := [n for n in names if n in bounds and n in present]:
        raise ValueError(f"{column} given bounds but also a column of {source}: a name of the "
                         "formula is a variable (a column) or a parameter (with bounds), not "
                         "both; drop the bound to use the column, or rename the parameter")


def undefined_rows(law: FormulaLaw, thetas: np.ndarray, X: np.ndarray,
                   columns: Mapping[str, str], source: str, at: str, *,
                   positive: bool = False) -> str:
    """Rows where the formula is not finite (``positive``: or not > 0, as log residuals need)
    at every parameter vector of ``thetas`` ``(S, p)`` (internal, as ``law.param_names``;
    ``at`` says which they are), naming the first data row (1-based) and its inputs
    (``columns``: variable → column name); "" when there is none."""
    with np.errstate(all="ignore"):
        f = law.predict_natural(np.asarray(thetas, dtype=np.float64), law.prepare(X))
    ok = np.isfinite(f) & ((f > 0) if positive else True)
    rows = np.flatnonzero(~ok.any(axis=0))
    if not rows.size:
        return ""
    row = int(rows[0])
    values = ", ".join(f"{columns[v]}={X[row, j]:g}" for j, v in enumerate(law.variables))
    what = "not finite" if not np.isfinite(f[:, row]).any() else "not positive"
    neg = [columns[v] for j, v in enumerate(law.variables) if X[row, j] <= 0]
    more = (f" (and {rows.size - 1} more: data rows "
            f"{', '.join(str(r + 1) for r in rows[1:6])}{' ...' if rows.size > 6 else ''})"
            ) if rows.size > 1 else ""
    return (f"{source}: data row {row + 1} ({values}){more}: the formula {law.name!r} is "
            f"{what} there {at}"
            + (f"; {', '.join(neg)} ≤ 0, where logs and fractional powers are undefined"
               if neg else "")
            + ". Fix or drop such rows, or write the formula so that it is defined there.")


def undefined_points(law: FormulaLaw, x: np.ndarray, points: Sequence[Mapping[str, float]],
                     what: str = "--predict-at") -> str:
    """The first of ``points`` (``{variable: value}``) where the formula at the fitted
    internal parameters ``x`` is not finite (a log or a fractional power of an input ≤ 0),
    named; "" when it is finite at every point."""
    for point in points:
        X = np.array([[point[v] for v in law.variables]], dtype=np.float64)
        with np.errstate(all="ignore"):
            f = law.predict_natural(np.asarray(x, dtype=np.float64)[None, :], law.prepare(X))
        if not np.isfinite(f).all():
            shown = ",".join(f"{v}={point[v]:g}" for v in law.variables)
            neg = [v for v in law.variables if point[v] <= 0]
            return (f"{what} {shown}: the fitted formula {law.name!r} is not finite there"
                    + (f" ({', '.join(neg)} ≤ 0, where logs and fractional powers are "
                       "undefined)" if neg else "") + "; predict where it is defined")
    return ""


def bare_variable_note(law: FormulaLaw, columns: Mapping[str, str]) -> str:
    """A note for each variable that enters the formula as a bare term, added with a fixed
    coefficient and scaled by no parameter (``E`` in ``E + A/N**alpha`` on a table with an
    ``E`` column, e.g. mixture-of-experts counts): such a name was more likely meant as a
    parameter and lacks bounds; "" when there is none."""
    import sympy as sp

    from scalebo.laws.formula import formula_names

    symbols = {n: sp.Symbol(n) for n in formula_names(law.formula)}
    try:
        expr = sp.parse_expr(law.formula, local_dict=symbols)  # checked by the law's parser
    except (SyntaxError, TypeError, ValueError, sp.SympifyError):
        return ""
    bare = [v for v in law.variables
            if (d := sp.diff(expr, symbols[v])).is_number and d != 0]
    if not bare:
        return ""
    shown = ", ".join(f"{v!r} (column {columns.get(v, v)!r})" for v in bare)
    return (f"{shown} enter{'s' if len(bare) == 1 else ''} the formula as a bare term that no "
            "parameter scales, read from the table; if meant as a parameter (an irreducible "
            "loss), give it bounds (--bounds, bounds= in Python)")


def first_non_number(frame: pd.DataFrame, variables: Sequence[str],
                     variable_map: Mapping[str, str]) -> str:
    """``"data row R, column 'C' (variable V): 'x' is not a number"`` for the first cell of
    the variables' columns that does not read as a number; "" when there is none."""
    from scalebo.data.columns import to_numbers

    for v in variables:
        column = frame[variable_map.get(v, v)]
        if (bad := np.flatnonzero(to_numbers(column).isna() & column.notna())).size:
            return (f"data row {bad[0] + 1}, column {variable_map.get(v, v)!r} (variable {v}): "
                    f"{shown(column.iloc[bad[0]])} is not a number")
    return ""


def repeated_rows_note(frame: pd.DataFrame, source: str, counts_as: str) -> str:
    """``"SOURCE: data rows 4, 26 repeat another row in every column (2 rows): each
    {counts_as} (drop copies made by mistake)"``, or "" when no row repeats another."""
    twins = np.flatnonzero(frame.duplicated(keep=False).to_numpy())
    if not twins.size:
        return ""
    return (f"{source}: data rows {', '.join(str(r + 1) for r in twins[:6])}"
            f"{' ...' if twins.size > 6 else ''} repeat another row in every column "
            f"({twins.size} rows): each {counts_as} (drop copies made by mistake)")


def pooled_settings(frame: pd.DataFrame, inputs: Sequence[str], response: str, *,
                    excluded: Sequence[str] = (), numeric_only: bool = True) -> list[str]:
    """The columns of ``frame`` that differ among rows of equal ``inputs`` (the columns the
    formula reads) as settings do, in frame order but ``N``/``D`` last: chosen as a run
    table's hyperparameters are (:func:`~scalebo.data.columns.default_hyperparameters`, the
    inputs as the cell; derived and measured columns left out), with no more distinct values
    than half the rows (a measured column takes one per row), plus ``N`` and ``D`` when the
    formula reads neither (a law in C). ``excluded``, ``numeric_only``: as
    :func:`pooled_settings_note`'s, which names these columns."""
    from scalebo.data.columns import default_hyperparameters

    keys = [c for c in inputs if c in frame.columns]
    if not keys or len(frame) < 2:
        return []
    settings = [c for c in default_hyperparameters(frame, excluded=[response, *excluded],
                                                   keys=keys, numeric_only=numeric_only)
                if frame[c].nunique() <= len(frame) / 2]  # a measured column: one per row
    groups = frame.groupby(keys, sort=False)
    settings += [c for c in ("N", "D") if c in frame.columns and c not in keys  # a law in C
                 and c not in settings and (groups[c].nunique() > 1).any()]
    return settings


def pooled_settings_note(frame: pd.DataFrame, inputs: Sequence[str], response: str,
                         source: str, *, excluded: Sequence[str] = (),
                         numeric_only: bool = True, remedy: str | None = None) -> str:
    """A note naming the settings that differ among rows of equal ``inputs`` (the table's
    columns the formula reads) and that the formula does not use (chosen as a run table's
    hyperparameters are, :func:`~scalebo.data.columns.default_hyperparameters`, with the
    inputs as the cell), and how many combinations of the inputs hold several rows, or
    ``""``: a formula fits every row, so a law in N and D over a table of 4 N × 4 D × 3
    learning rates describes the average learning rate, not the best (a trial; built-in
    laws take each cell's best run, and ``powerlaw:`` says so). ``excluded``: further
    columns that are no setting (a group column fitted apart); ``numeric_only=False`` counts
    a text column (a dataset name) too; ``remedy``: what to do, in place of the default
    (keep each cell's best row, or fit a built-in law)."""
    settings = pooled_settings(frame, inputs, response, excluded=excluded,
                               numeric_only=numeric_only)
    if not settings:
        return ""
    keys = [c for c in inputs if c in frame.columns]
    sizes = frame.groupby(keys, sort=False).size()
    return (f"{source}: rows with the same {', '.join(keys)} differ in {', '.join(settings)}, "
            f"which the formula does not use ({int((sizes > 1).sum())} of {len(sizes)} "
            f"combinations of {', '.join(keys)} hold several rows): every row is fitted, "
            "off-optimal settings included, so the law describes the average setting, not "
            "the best (" + (remedy or "keep each cell's best row, or fit a built-in law: "
                            "--law, or fit_summary(table, law), for the tuned frontier") + ")")
