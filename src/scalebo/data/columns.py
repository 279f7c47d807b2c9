"""Column conventions of run tables: canonical names, bookkeeping, why a run is excluded, and
the default rule for hyperparameter columns. See :mod:`scalebo.data.runs` for the schema."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import numpy as np
import pandas as pd

__all__ = ["BOOKKEEPING_COLUMNS", "CANONICAL_COLUMNS", "REQUIRED_COLUMNS", "UNMAPPED_SUFFIX",
           "ExclusionReason", "default_hyperparameters", "numeric_typos"]

#: Names that ``mapping`` may assign, in the order they appear in ``RunTable.frame``.
CANONICAL_COLUMNS: tuple[str, ...] = ("run_id", "N", "D", "C", "loss")
#: Columns every source must provide (after mapping).
REQUIRED_COLUMNS: tuple[str, ...] = ("N", "D", "loss")
#: Column names never chosen as default hyperparameters.
BOOKKEEPING_COLUMNS: frozenset[str] = frozenset(
    {*CANONICAL_COLUMNS, "n_repeats", "reason", "seed"}
)
#: Suffix given to a source column whose name is taken by a mapped column.
UNMAPPED_SUFFIX = "_unmapped"


class ExclusionReason(StrEnum):
    """Why a run is in ``RunTable.excluded`` rather than in ``RunTable.frame``."""

    NON_FINITE = "non_finite"
    """The loss is NaN or ±inf (a crashed run, or a missing value in the file)."""
    DIVERGED = "diverged"
    """The loss is above the ``diverged_above`` threshold given to :func:`load_runs`."""
    DROPPED = "dropped"
    """Removed at an explicit request of the caller (e.g. a loader's ``drop_highest_loss``)."""



def numeric_typos(series: pd.Series) -> np.ndarray:
    """0-based positions of the values that look like typos in a column of numbers.

    A text column is read as numbers with typos when at least half of its present values
    parse as finite numbers (``"3e-4"``, ``"1000"``) and some do not (``"3e-4x"``,
    ``"le-3"``): a hyperparameter such as a learning rate, written by hand. A column with no
    number, or numbers in a minority (``"adam"``, ``"sgd"``, ``"v2"``) is categorical and
    has no typos; numeric, boolean and empty columns have none either. (Grid tables use the
    same rule, :mod:`scalebo.search.grid_table`.)
    """
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return np.empty(0, dtype=np.int64)
    present = series.notna().to_numpy()
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    ok = present & np.isfinite(values)
    if not ok.any() or 2 * int(ok.sum()) < int(present.sum()):
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(present & ~ok)


def default_hyperparameters(frame: pd.DataFrame, excluded: Iterable[str] = (), *,
                            numeric_only: bool = True) -> tuple[str, ...]:
    """The default hyperparameter columns of a run table (the one rule of the package).

    A column is chosen unless it is bookkeeping (:data:`BOOKKEEPING_COLUMNS`, any name
    containing ``loss``, ``*_unmapped``, a name in ``excluded``), boolean, has a missing
    value, or is fixed inside every (N, D) cell — a column fixed per cell (width, depth,
    ``D/N``) is a property of the cell, not a search axis. With ``numeric_only`` (run
    tables) it must also be numeric and finite; without it (grids, which take categorical
    axes) a text column qualifies too. ``frame`` needs ``N`` and ``D``; columns are
    returned in frame order.
    """
    excluded = {*BOOKKEEPING_COLUMNS, *excluded}
    cells = frame.groupby(["N", "D"], sort=False)
    chosen = []
    for column in frame.columns:
        series = frame[column]
        numeric = pd.api.types.is_numeric_dtype(series.dtype)
        if (
            column in excluded
            or "loss" in str(column).lower()
            or str(column).endswith(UNMAPPED_SUFFIX)
            or pd.api.types.is_bool_dtype(series.dtype)
            or series.isna().any()
            or (numeric_only and not numeric)
            or (numeric and not np.isfinite(series.to_numpy(dtype=np.float64)).all())
        ):
            continue
        if (cells[column].nunique() > 1).any():
            chosen.append(str(column))
    return tuple(chosen)
