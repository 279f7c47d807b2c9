"""Runs → grid configurations: which grid row each run of a table is, or an error that says
which data row and which column is off the grid, and the grid's nearest value.

Numeric columns (N, D, numeric axes) match a grid value within a relative tolerance of
:data:`~scalebo.search.grid.INDEX_RTOL`; categorical axes match exactly as strings without
surrounding blanks (``" adam"`` is ``"adam"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from scalebo.data.columns import CANONICAL_COLUMNS
from scalebo.errors import SearchError, missing_columns, shown, shown_config, shown_rows

if TYPE_CHECKING:
    from scalebo.search.grid import Grid

__all__ = ["match_rows"]


def match_rows(grid: Grid, frame: pd.DataFrame, source: str | None = None,
               names: Mapping[str, str] | None = None) -> np.ndarray:
    """:meth:`Grid.index_of <scalebo.search.grid.Grid.index_of>`: the grid row of each row
    of ``frame`` (a DataFrame or a RunTable), shape ``(len(frame),)``. ``names``: the user's
    name of each canonical column (a ``--map``), which errors use.

    Raises:
        SearchError: a column is missing or some rows are not on the grid (names the source,
            the 1-based data rows, and for the first one the column whose value no grid
            configuration has, with the nearest grid value).
    """
    from scalebo.search.grid import INDEX_RTOL

    frame = frame.frame if hasattr(frame, "frame") else frame
    columns = list(grid.input_columns)
    missing = [c for c in columns if c not in frame.columns]
    where = f"{source}: " if source else ""
    names = dict(names or {})
    shown_columns = [names.get(c, c) for c in columns]  # the user's names, in errors
    if missing:
        said = missing_columns([names.get(c, c) for c in missing], frame.columns,
                               CANONICAL_COLUMNS)
        raise SearchError(f"{where}{said} (the grid's columns: {shown_columns})")
    n = len(frame)
    codes = np.zeros((n, len(columns)), dtype=np.int64)
    grid_codes = np.zeros((grid.n_configs, len(columns)), dtype=np.int64)
    levels: list[np.ndarray] = []
    for j, col in enumerate(columns):
        if col in grid.categorical_axes:
            gvals = grid.configs[col].astype(str).str.strip().to_numpy()
            uniq, grid_codes[:, j] = np.unique(gvals, return_inverse=True)
            lookup = {u: i for i, u in enumerate(uniq)}
            fv = frame[col].astype(str).str.strip().to_numpy()
            codes[:, j] = [lookup.get(x, -1) for x in fv]
        else:
            uniq, grid_codes[:, j] = np.unique(grid.configs[col].to_numpy(np.float64),
                                               return_inverse=True)
            fv = frame[col].to_numpy(dtype=np.float64)
            close = np.abs(fv[:, None] - uniq[None, :]) <= INDEX_RTOL * np.maximum(
                np.abs(fv[:, None]), np.abs(uniq[None, :]))
            codes[:, j] = np.where(close.any(axis=1), close.argmax(axis=1), -1)
        levels.append(uniq)
    off = (codes < 0).any(axis=1)
    table = {tuple(r): i for i, r in enumerate(grid_codes.tolist())}
    out = np.full(n, -1, dtype=np.int64)
    for i in np.flatnonzero(~off):
        out[i] = table.get(tuple(codes[i].tolist()), -1)
    bad = np.flatnonzero(out < 0)
    if bad.size:
        integer = pd.api.types.is_integer_dtype(frame.index.dtype)
        rows = [int(frame.index[b]) + 1 if integer else int(b) + 1 for b in bad[:5]]
        first = dict(zip(shown_columns, frame.iloc[bad[0]][columns], strict=True))
        raise SearchError(
            f"{where}{bad.size} of {n} rows are not on the grid ({shown_rows(rows)}"
            f"{' …' if bad.size > 5 else ''}; first: {shown_config(first)}: "
            f"{_why_off(shown_columns, first, codes[bad[0]], levels)}). Add their values to "
            "the grid axes or drop those runs.")
    return out


def _why_off(columns: list[str], row: dict, codes: np.ndarray, levels: list[np.ndarray]) -> str:
    """Which of ``row``'s values no grid configuration has, each with the grid's nearest
    value (in log distance for positive numbers), or that the combination is not one."""
    from scalebo.search.grid import INDEX_RTOL

    said = []
    for j in np.flatnonzero(codes < 0):
        col, value, uniq = columns[j], row[columns[j]], levels[j]
        if uniq.dtype.kind in "fi" and np.isfinite(float(value)):
            v = float(value)
            gap = (np.abs(np.log(uniq / v)) if v > 0 and (uniq > 0).all()
                   else np.abs(uniq - v))
            g = float(uniq[int(np.argmin(gap))])
            away = f", {abs(v / g - 1) * 100:.2g} % away" if g != 0 else ""
            near = (f"nearest {g:.12g}{away}; values match within {INDEX_RTOL:g} relative")
            value = format(v, ".12g")
        else:
            value = shown(value)
            near = f"the grid has {', '.join(shown(u) for u in uniq[:6])}" + (
                " …" if uniq.size > 6 else "")
        said.append(f"{col} {value} is not a grid value ({near})")
    return "; ".join(said) or "each value is on the grid, but not this combination"
