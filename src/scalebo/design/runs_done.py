"""Which pool rows the runs done of a campaign are, and the pool's columns besides the law's.

A pool may hold columns the formula does not read that tell rows of equal inputs apart (a
learning rate, a dataset name without ``--group``): the law is then fitted through all of
them (:func:`settings_note` says so, as a formula fit does), a proposal names the row by
every one of its columns (:func:`row_values`), and a run done counts for the pool rows it
matches on its inputs and on those columns (:func:`match_columns`, :func:`column_matches`),
not for every row of equal inputs (a trial: running one learning rate of a cell marked the
cell's other learning rates done). Other columns the runs file shares with the pool are not
compared: a run's measured cost, 3 % over plan, is still its pool row.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scalebo.data.columns import is_blank, to_numbers
from scalebo.design.pool import Pool
from scalebo.errors import data_rows, shown, shown_config
from scalebo.fitting.formula_checks import pooled_settings_note

__all__ = ["RunMatches", "column_matches", "done_rows", "input_matches", "match_columns",
           "match_matrix", "part_of", "row_values", "settings_note", "warn_unmatched"]


def input_matches(pool: Pool, X_done: np.ndarray) -> np.ndarray:
    """``(n_done, n)``: whether run ``i``'s inputs equal (rtol 1e-9) those of pool row ``j``."""
    X_done = np.atleast_2d(X_done)
    return np.array([np.all(np.isclose(pool.X, x[None, :], rtol=1e-9, atol=0), axis=1)
                     for x in X_done]).reshape(X_done.shape[0], pool.n)


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    """``(len(a), len(b))``: whether the values are equal — as numbers (rtol 1e-9) when both
    columns read as numbers, else as stripped text; a blank equals a blank only."""
    na, nb = to_numbers(a).to_numpy(np.float64), to_numbers(b).to_numpy(np.float64)
    blank_a = np.array([is_blank(v) for v in a]) if len(a) else np.zeros(0, bool)
    blank_b = np.array([is_blank(v) for v in b]) if len(b) else np.zeros(0, bool)
    if np.isfinite(na[~blank_a]).all() and np.isfinite(nb[~blank_b]).all():
        eq = np.isclose(na[:, None], nb[None, :], rtol=1e-9, atol=0)
    else:
        ta = np.array([str(v).strip() for v in a], dtype=object)
        tb = np.array([str(v).strip() for v in b], dtype=object)
        eq = ta[:, None] == tb[None, :]
    return (eq & ~blank_a[:, None] & ~blank_b[None, :]) | (blank_a[:, None] & blank_b[None, :])


@dataclass(frozen=True)
class RunMatches:
    """Which pool rows the runs done are (:func:`column_matches`), column by column.

    Attributes:
        inputs: ``(n_done, n)``: whether run ``i``'s inputs equal pool row ``j``'s.
        columns: the other columns compared (the pool's settings), in the pool's order.
        by_column: one ``(n_done, n)`` per column of ``columns``: equal values.
        values: one tuple per column of ``columns``: each run's value (for warnings).
    """

    inputs: np.ndarray
    columns: tuple[str, ...] = ()
    by_column: tuple[np.ndarray, ...] = ()
    values: tuple[tuple[Any, ...], ...] = ()

    @property
    def matrix(self) -> np.ndarray:
        """``(n_done, n)``: run ``i`` is pool row ``j`` (equal inputs and columns)."""
        out = np.array(self.inputs, dtype=bool)
        for m in self.by_column:
            out &= m
        return out

    def part(self, runs: np.ndarray, rows: np.ndarray) -> RunMatches:
        """The matches of the runs ``runs`` (mask or positions) against pool rows ``rows``."""
        idx = np.arange(self.inputs.shape[0])[runs]
        return RunMatches(self.inputs[idx][:, rows], self.columns,
                          tuple(m[idx][:, rows] for m in self.by_column),
                          tuple(tuple(v[i] for i in idx) for v in self.values))

    def differing(self, i: int) -> tuple[str, ...]:
        """The columns in which run ``i``'s value is that of no pool row with its inputs
        (every compared column when each is some such row's but no row has them all);
        ``()`` when it is a pool row, or when no pool row has its inputs."""
        same = self.inputs[i]
        if not same.any() or self.matrix[i].any():
            return ()
        alone = tuple(c for c, m in zip(self.columns, self.by_column, strict=True)
                      if not (m[i] & same).any())
        return alone or self.columns


def match_columns(pool_frame: pd.DataFrame, law_columns: Sequence[str], response: str,
                  group: str | None = None) -> tuple[str, ...]:
    """The pool's columns a run done must match besides its inputs: those that tell apart
    pool rows of equal inputs (the settings :func:`settings_note` names: a learning rate, a
    batch size even when the cost expression reads it, a dataset without ``--group``; for a
    law in C also N and D). Never a measured column (over half the rows' values distinct: a
    runs file may record a run's measured cost), a column constant within each input
    combination (a planned cost such as 6·N·D), the response or the ``group`` column
    (compared as groups)."""
    from scalebo.fitting.formula_checks import pooled_settings

    skip = [response, *([group] if group else [])]
    return tuple(pooled_settings(pool_frame, list(law_columns), response, excluded=skip,
                                 numeric_only=False))


def column_matches(pool: Pool, pool_frame: pd.DataFrame, X_done: np.ndarray,
                   runs_frame: pd.DataFrame, columns: Sequence[str] = ()) -> RunMatches:
    """Whether run ``i`` (row ``i`` of ``runs_frame``, inputs ``X_done[i]``) is pool row
    ``j`` (row ``j`` of ``pool_frame``): equal inputs (:func:`input_matches`) and equal
    values in each of ``columns`` (:func:`match_columns`) that the runs file has too."""
    shared = tuple(str(c) for c in pool_frame.columns
                   if str(c) in set(map(str, columns)) and c in runs_frame.columns)
    return RunMatches(input_matches(pool, X_done), shared,
                      tuple(_same(runs_frame[c], pool_frame[c]) for c in shared),
                      tuple(tuple(runs_frame[c].tolist()) for c in shared))


def match_matrix(matches: np.ndarray | RunMatches | None, pool: Pool,
                 X_done: np.ndarray) -> np.ndarray:
    """``(n_done, n)`` boolean: ``matches`` as a matrix, equal inputs when it is None."""
    if matches is None:
        return input_matches(pool, X_done)
    m = matches.matrix if isinstance(matches, RunMatches) else np.asarray(matches, bool)
    return m.reshape(-1, pool.n)


def part_of(matches: np.ndarray | RunMatches, runs: np.ndarray,
            rows: np.ndarray) -> np.ndarray | RunMatches:
    """The matches of the runs ``runs`` (a mask) against the pool rows ``rows``."""
    if isinstance(matches, RunMatches):
        return matches.part(runs, rows)
    return np.asarray(matches, bool)[runs][:, rows]


def done_rows(pool: Pool, X_done: np.ndarray, pool_groups: Any = None,
              done_groups: Any = None, matches: np.ndarray | RunMatches | None = None
              ) -> np.ndarray:
    """Mask ``(n,)`` of the pool rows a run done is: ``matches`` ``(n_done, n)`` when given
    (:func:`column_matches`), else equal inputs (rtol 1e-9); with group labels
    (``pool_groups`` ``(n,)``, ``done_groups`` one per run), a run of its own group only."""
    m = match_matrix(matches, pool, X_done)
    if pool_groups is None:
        return m.any(axis=0)
    pool_g = np.asarray(pool_groups, dtype=object).astype(str)
    done_g = np.asarray(done_groups, dtype=object).astype(str)
    return (m & (done_g[:, None] == pool_g[None, :])).any(axis=0)


def _why_lone(matches: np.ndarray | RunMatches | None, i: int, row: int,
              inputs: dict[str, float]) -> str:
    """Why run ``i`` (0-based file row ``row``) is no pool row: the columns that differ."""
    at = f"data row {row + 1} {shown_config(inputs)}"
    if not isinstance(matches, RunMatches) or not matches.inputs[i].any():
        return f"{at}: no pool row has its inputs"
    cols = matches.differing(i)
    vals = ", ".join(f"{c} {shown(matches.values[matches.columns.index(c)][i])}"
                     for c in cols)
    return f"{at}: {vals} {'is' if len(cols) == 1 else 'are'} no pool row's of its inputs"


def warn_unmatched(pool: Pool, X_done: np.ndarray, where: str = "",
                   matches: np.ndarray | RunMatches | None = None,
                   rows: Sequence[int] | None = None) -> None:
    """Warn when runs done match no pool row (:func:`done_rows`'s rule): they are fitted all
    the same, but no pool row counts as done for them, so the rows they ran may be proposed
    again (a typo, or a run at another setting). Names their 1-based data rows (``rows``:
    each run's 0-based row in its file, when the runs are a part of it, e.g. one group's)
    and, for the first few, their inputs and the column whose value is no pool row's
    (:meth:`RunMatches.differing`); ``where``: what the runs done are (" of group 'a'")."""
    X_done = np.atleast_2d(X_done)
    m = match_matrix(matches, pool, X_done)
    lone = np.flatnonzero(~m.reshape(len(X_done), pool.n).any(axis=1))
    if not lone.size:
        return
    at = lone if rows is None else np.asarray(rows)[lone]
    columns = matches.columns if isinstance(matches, RunMatches) else ()
    cols = (f"their inputs ({', '.join(pool.variables)})"
            + (f" and {', '.join(columns)}" if columns else ""))
    why = "; ".join(_why_lone(matches, int(i), int(r),
                              dict(zip(pool.variables, map(float, X_done[i]), strict=True)))
                    for i, r in zip(lone[:3], at[:3], strict=True))
    warnings.warn(f"{len(lone)} of the {len(X_done)} runs done{where} match no pool row in "
                  f"{cols} ({data_rows(at)}): {why}{'; ...' if lone.size > 3 else ''}; they "
                  "are fitted all the same, but no pool row counts as done for them, so the "
                  "pool rows they ran may be proposed again (correct the value in the runs "
                  "file or the pool)", stacklevel=3)


def settings_note(frame: pd.DataFrame, law_columns: Sequence[str], response: str,
                  source: str, group: str | None = None) -> str:
    """A warning when columns of a pool the formula does not use (``law_columns``: the
    columns its variables read) differ among rows of equal inputs (a learning rate, a
    dataset without ``--group``; :func:`~scalebo.fitting.formula_checks.
    pooled_settings_note`, text columns included), naming them, how many input combinations
    repeat and what to do; ``""`` when there is none."""
    return pooled_settings_note(
        frame, list(law_columns), response, source, excluded=[group] if group else [],
        numeric_only=False,
        remedy="keep each cell's best row, filter the pool to one value, or fit each value "
               "on its own with --group COL; proposals show these columns, and a run done "
               "counts only for the pool rows it matches in its inputs and these columns")


def _plain(value: Any) -> Any:
    """A table cell as a JSON-ready value: numpy scalars as Python ones, blanks as None."""
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)) or is_blank(value):
        return None
    return value


def row_values(frame: pd.DataFrame, row: int, skip: Sequence[str] = ()
               ) -> dict[str, Any]:
    """``{column: value}`` of row ``row`` (0-based position) of ``frame``, every column
    under the table's own name but those in ``skip`` (the response), JSON-ready."""
    values: Mapping[Any, Any] = frame.iloc[row].to_dict()
    return {str(c): _plain(v) for c, v in values.items() if str(c) not in set(skip)}
