"""Which pool rows the runs done of a campaign are, and the pool's columns besides the law's.

A pool may hold columns the formula does not read that tell rows of equal inputs apart (a
learning rate, a dataset name without ``--group``): the law is then fitted through all of
them (:func:`settings_note` says so, as a formula fit does), a proposal names the row by
every one of its columns (:func:`row_values`), and a run done counts for the pool rows it
matches on its inputs and on every other column the runs file shares with the pool
(:func:`column_matches`), not for every row of equal inputs (a trial: running one learning
rate of a cell marked the cell's other learning rates done).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from scalebo.data.columns import is_blank, to_numbers
from scalebo.design.pool import Pool
from scalebo.errors import data_rows
from scalebo.fitting.formula_checks import pooled_settings_note

__all__ = ["column_matches", "done_rows", "input_matches", "row_values", "settings_note",
           "warn_unmatched"]


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


def column_matches(pool: Pool, pool_frame: pd.DataFrame, X_done: np.ndarray,
                   runs_frame: pd.DataFrame, skip: Sequence[str] = ()
                   ) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(matches, shared)``: ``matches`` ``(n_done, n)`` is whether run ``i`` (row ``i`` of
    ``runs_frame``, inputs ``X_done[i]``) is pool row ``j`` (row ``j`` of ``pool_frame``):
    equal inputs (:func:`input_matches`) and equal values in every column ``shared`` by the
    two tables but those in ``skip`` (the law's input columns, compared as inputs, and the
    response); ``shared`` names those columns, in the pool's order."""
    shared = tuple(str(c) for c in pool_frame.columns
                   if c in runs_frame.columns and str(c) not in set(skip))
    out = input_matches(pool, X_done)
    for c in shared:
        out &= _same(runs_frame[c], pool_frame[c])
    return out, shared


def done_rows(pool: Pool, X_done: np.ndarray, pool_groups: Any = None,
              done_groups: Any = None, matches: np.ndarray | None = None) -> np.ndarray:
    """Mask ``(n,)`` of the pool rows a run done is: ``matches`` ``(n_done, n)`` when given
    (:func:`column_matches`), else equal inputs (rtol 1e-9); with group labels
    (``pool_groups`` ``(n,)``, ``done_groups`` one per run), a run of its own group only."""
    m = input_matches(pool, X_done) if matches is None else np.asarray(matches, bool)
    m = m.reshape(-1, pool.n)
    if pool_groups is None:
        return m.any(axis=0)
    pool_g = np.asarray(pool_groups, dtype=object).astype(str)
    done_g = np.asarray(done_groups, dtype=object).astype(str)
    return (m & (done_g[:, None] == pool_g[None, :])).any(axis=0)


def warn_unmatched(pool: Pool, X_done: np.ndarray, where: str = "",
                   matches: np.ndarray | None = None,
                   rows: Sequence[int] | None = None) -> None:
    """Warn when runs done match no pool row (:func:`done_rows`'s rule): they are fitted all
    the same, but a typo in an input would go unseen otherwise. Names their 1-based data
    rows (``rows``: each run's 0-based row in its file, when the runs are a part of it, e.g.
    one group's) and the first one's inputs; ``where``: what the runs done are
    (" of group 'a'", " in runs.csv")."""
    X_done = np.atleast_2d(X_done)
    m = input_matches(pool, X_done) if matches is None else np.asarray(matches, bool)
    lone = np.flatnonzero(~m.reshape(len(X_done), pool.n).any(axis=1))
    if lone.size:
        first = dict(zip(pool.variables, map(float, X_done[lone[0]]), strict=True))
        cols = ("its inputs " + ", ".join(pool.variables) if matches is None else
                "its inputs and the other columns the runs share with the pool")
        at = lone if rows is None else np.asarray(rows)[lone]
        warnings.warn(f"{len(lone)} of the {len(X_done)} runs done{where} match no pool row "
                      f"in {cols} ({data_rows(at)}; the first: {first}); they are fitted all "
                      "the same", stacklevel=3)


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
               "counts only for the pool rows it matches in every column it shares with the "
               "pool")


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
