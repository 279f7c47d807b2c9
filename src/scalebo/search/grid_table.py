"""Reading and validating a grid table (CSV, TSV, Parquet, JSON lines): one candidate
configuration of a campaign per row.

Columns (after ``mapping``):

* ``N`` (parameters) and ``D`` (tokens): required, positive numbers;
* ``C`` (FLOPs of the configuration, default ``6·N·D``) and ``cost`` (its price in the
  budget's unit, e.g. GPU-hours): optional, positive numbers;
* ``loss`` and bookkeeping columns (:data:`~scalebo.data.columns.BOOKKEEPING_COLUMNS`,
  ``status``) are ignored, as are boolean columns;
* every other column is a hyperparameter, numeric or categorical.

Numeric or categorical: a hyperparameter column is **numeric when at least half of its
values read as numbers** (a number, or text such as ``"1e-3"``); each of its other values
is then a typo (``le-3`` for ``1e-3``) and an error. A column whose values are mostly text
(optimizer names, ``cosine`` / ``wsd``) is categorical: all its values are kept as text
without surrounding blanks (as run tables keep them), a numeric-looking label among them
included. Which hyperparameter columns are the grid's axes
is :meth:`Grid.from_frame`'s rule (columns that vary inside an (N, D) cell, derived ones such
as a warmup set from the batch size included).

The checks are the YAML grid's (:mod:`scalebo.search.grid_file`) where they apply, and
every error names the file, the 1-based data row (the header is not counted) and the
column, as the runs table's do: a value of ``N``, ``D``, ``C`` or ``cost`` that is not a
positive number, a value of a numeric column that is not a number, an empty, NaN or
infinite value, and two rows of the same configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scalebo.data.cleaning import shown_column
from scalebo.data.columns import (
    blank_cells,
    is_blank,
    is_candidate_column,
    number_hint,
    parse_number,
    text_column,
    to_numbers,
)
from scalebo.data.files import read_table
from scalebo.errors import RunTableError, SearchError, shown, shown_config, shown_rows
from scalebo.search.grid import Grid
from scalebo.search.grid_file import is_learning_rate
from scalebo.search.runs_columns import map_columns

__all__ = ["POSITIVE_COLUMNS", "read_grid_table"]

#: Columns whose values must be positive numbers, with what they measure.
POSITIVE_COLUMNS: dict[str, str] = {"N": "parameters", "D": "tokens",
                                    "C": "FLOPs of the configuration",
                                    "cost": "GPU-hours of the configuration"}


def _got(value: Any) -> str:
    return "an empty value" if is_blank(value) else shown(_plain(value))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _fail(path: Path, bad: list[int], column: str, expected: str, value: Any,
          hint: str = "", named: str | None = None) -> RunTableError:
    """The error for the first of the 0-based positions ``bad`` of ``column`` (``named``:
    the column as the message names it, default quoted)."""
    more = f"; {len(bad) - 1} more such rows" if len(bad) > 1 else ""
    said = f" {number_hint(value)}" if number_hint(value) else ""
    return RunTableError(f"{path}: data row {bad[0] + 1}, column {named or repr(column)}: "
                         f"expected {expected}, got {_got(value)}{hint}{more}.{said}")


def _positive(path: Path, frame: pd.DataFrame, column: str,
              mapping: Mapping[str, str] | None) -> np.ndarray:
    """``column`` as float64; RunTableError at the first value that is not a positive,
    finite number (the column named as the run tables name it: ``'D' (tokens; file column
    'tokens')`` under ``--map D=tokens``)."""
    series = frame[column]
    numbers = to_numbers(series).to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~np.isfinite(numbers) | (numbers <= 0))
    if bad.size:
        raise _fail(path, bad.tolist(), column, "a positive number", series.iloc[bad[0]],
                    named=shown_column(column, mapping, POSITIVE_COLUMNS[column]))
    return numbers


def _hyperparameter(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    """A hyperparameter column as float64 (numeric: at least half its values are numbers)
    or as text (categorical); RunTableError for a typo, an empty or a non-finite value."""
    series = frame[column]
    numeric, bad, n_number, n_filled = text_column(series.astype(object))
    if not numeric:  # categorical: mostly text (the run tables' rule, text_column)
        empty = np.flatnonzero(blank_cells(series))
        if empty.size:
            raise _fail(path, empty.tolist(), column, "a value (a category of the column)",
                        series.iloc[empty[0]])
        return pd.Series([str(_plain(v)).strip() for v in series.tolist()], index=frame.index,
                         dtype=object)
    bad = np.union1d(bad, np.flatnonzero(blank_cells(series)))  # text_column skips empty cells
    if bad.size:
        first = series.iloc[bad[0]]
        typo = not is_blank(first) and parse_number(first) is None
        are = "is a number" if n_number == 1 else "are numbers"
        hint = (f" (the column is numeric: {n_number} of its {n_filled} values {are}; a "
                "categorical column is mostly text)") if typo else ""
        raise _fail(path, bad.tolist(), column, "a number" if typo or is_blank(first)
                    else "a finite number", first, hint)
    values = series if pd.api.types.is_numeric_dtype(series.dtype) else to_numbers(series)
    if is_learning_rate(column) and (low := np.flatnonzero(values.to_numpy(float) <= 0)).size:
        raise _fail(path, low.tolist(), column, "a positive number (a learning rate)",
                    series.iloc[low[0]])
    return values  # as read (integers such as a batch size stay integers)


def _is_hyperparameter(frame: pd.DataFrame, column: Any) -> bool:
    return is_candidate_column(frame, column, (*POSITIVE_COLUMNS, "status"))


def _check_unique(path: Path, frame: pd.DataFrame, key: list[str]) -> None:
    """SearchError naming the 1-based data rows of the first repeated configuration."""
    dup = frame.duplicated(subset=key, keep=False).to_numpy()
    if not dup.any():
        return
    repeated = frame[dup]  # its index: 0-based positions in the file (reset before)
    groups = repeated.groupby(key, sort=False, dropna=False).indices
    rows = min((sorted(int(p) for p in repeated.index[pos]) for pos in groups.values()),
               key=lambda r: r[0])
    config = {c: _plain(frame[c].iloc[rows[0]]) for c in key}
    more = (f" ({len(groups) - 1} more repeated configurations)" if len(groups) > 1 else "")
    raise SearchError(f"{path}: {shown_rows([r + 1 for r in rows])} are the same "
                      f"configuration {shown_config(config)}{more}; list each configuration "
                      "once.")


def read_grid_table(path: str | Path, mapping: Mapping[str, str] | None = None) -> Grid:
    """The grid of a table of configurations (see the module docstring), holding no cell
    out; a ``cost`` column prices each configuration (:meth:`Grid.with_price`, GPU-hours).

    Raises:
        RunTableError: an unreadable file, a missing ``N`` or ``D`` column, or a bad value
            (names the file, the 1-based data row and the column, and what was expected).
        SearchError: two rows of the same configuration (names their 1-based data rows).
    """
    path = Path(path)
    frame = map_columns(read_table(path), mapping, str(path)).reset_index(drop=True)
    missing = [c for c in ("N", "D") if c not in frame.columns]
    if missing:
        raise RunTableError(f"{path}: columns {missing} are missing (a grid table needs N, "
                            f"parameters, and D, tokens; it has {list(map(str, frame.columns))}"
                            "); rename them with --map, e.g. --map N=params,D=tokens "
                            "(mapping= in Python).")
    clean = frame.copy()
    for column in POSITIVE_COLUMNS:
        if column in frame.columns:
            clean[column] = _positive(path, frame, column, mapping)
    params = [str(c) for c in frame.columns if _is_hyperparameter(frame, c)]
    for column in params:
        clean[column] = _hyperparameter(path, frame, column)
    _check_unique(path, clean, ["N", "D", *params])
    try:
        grid = Grid.from_frame(clean[["N", "D", *(["C"] if "C" in clean else []), *params]],
                               n_held_out_cells=0)
    except SearchError as err:
        raise SearchError(f"{path}: {err}") from None
    return grid.with_price(clean["cost"], "GPU-hours") if "cost" in clean else grid
