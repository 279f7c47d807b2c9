"""Run tables: schema, loading (CSV / Parquet / JSON lines), validation and FLOPs.

A *run* is one finished training run: a model of ``N`` parameters trained on ``D`` tokens at
some hyperparameters (learning rate, batch size, ...), costing ``C`` FLOPs and reaching a final
``loss`` in nats. :func:`load_runs` reads a table of runs from a file or a DataFrame, renames
the user's columns to the canonical names, validates every row once, and returns a
:class:`RunTable`. Everything downstream (frontiers, fits, search) takes a ``RunTable``.

Canonical columns of ``RunTable.frame`` (in this order, then the hyperparameters, then every
other column of the source, unchanged):

========== ============ =====================================================================
column     dtype        meaning
========== ============ =====================================================================
run_id     str          identifier of the run (from the source, or ``"row<k>"``)
N          float64      model size in parameters
D          float64      training tokens
C          float64      training compute in FLOPs; ``6·N·D`` unless the source has a ``C``
loss       float64      final loss in nats
n_repeats  int64        only with ``duplicates="mean"``: how many runs were averaged
========== ============ =====================================================================

Row numbers in messages are 1-based *data* rows (the header does not count; for a DataFrame,
the 1-based position). ``RunTable.frame.index`` is the 0-based position of each run in the
source, so excluded or merged rows leave gaps that point back to the file.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from scalebo.data.cleaning import (
    UNITS,
    _check_columns_exist,
    _check_no_missing,
    _check_positive,
    _check_required,
    _exclude,
    _merge_run_id,
    _order_columns,
    _resolve_hyperparameters,
    _run_ids,
    _to_float,
    _to_labels,
    apply_mapping,
    shown_column,
)
from scalebo.data.columns import (
    BOOKKEEPING_COLUMNS,
    CANONICAL_COLUMNS,
    REQUIRED_COLUMNS,
    UNMAPPED_SUFFIX,
    ExclusionReason,
    default_hyperparameters,
    is_categorical,
    unfinished_runs,
)
from scalebo.data.duplicates import handle_duplicates
from scalebo.data.files import parse_mapping, read_table
from scalebo.data.plausibility import unit_notes
from scalebo.errors import RunTableError

__all__ = [
    "BOOKKEEPING_COLUMNS",
    "CANONICAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "UNMAPPED_SUFFIX",
    "ExclusionReason",
    "RunTable",
    "compute_flops",
    "default_hyperparameters",
    "load_runs",
    "parse_mapping",
    "read_table",
    "refilter_runs",
]


@dataclass(frozen=True, eq=False)
class RunTable:
    """A validated table of training runs.

    Attributes:
        frame: One row per run, ``(n_runs, n_columns)``; canonical columns described in the
            module docstring, all numeric ones float64. Index: 0-based position in the source.
        hyperparameters: Names of the hyperparameter columns (float64): the axes, besides
            ``N`` and ``D``, along which runs of one (N, D) cell differ.
        source: Where the runs came from (a path, or ``"<DataFrame>"``).
        n_excluded: Number of source rows not in ``frame`` (``len(excluded)``).
        excluded: The excluded rows, same columns as ``frame`` plus ``reason``
            (an :class:`ExclusionReason` value).
        config_columns: Further columns that identify a configuration without being search
            axes (e.g. ``config`` when several experiment setups share one table); they take
            part in the repeated-configuration check.
    """

    frame: pd.DataFrame
    hyperparameters: tuple[str, ...] = ()
    source: str = "<DataFrame>"
    n_excluded: int = 0
    excluded: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame())
    config_columns: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.frame)

    def _column(self, name: str) -> np.ndarray:
        return self.frame[name].to_numpy(dtype=np.float64)

    @property
    def N(self) -> np.ndarray:
        """Model sizes in parameters, shape ``(n_runs,)``, float64."""
        return self._column("N")

    @property
    def D(self) -> np.ndarray:
        """Training tokens, shape ``(n_runs,)``, float64."""
        return self._column("D")

    @property
    def C(self) -> np.ndarray:
        """Training compute in FLOPs, shape ``(n_runs,)``, float64."""
        return self._column("C")

    @property
    def loss(self) -> np.ndarray:
        """Final losses in nats, shape ``(n_runs,)``, float64."""
        return self._column("loss")

    @property
    def categorical(self) -> tuple[str, ...]:
        """The hyperparameters held as text (named categorical columns, e.g. an optimizer)."""
        return tuple(c for c in self.hyperparameters
                     if not pd.api.types.is_numeric_dtype(self.frame[c].dtype))

    @property
    def hyperparameter_array(self) -> np.ndarray:
        """Numeric hyperparameter values, shape ``(n_runs, n_hyperparameters)``, float64.

        Raises:
            RunTableError: a hyperparameter is categorical (see :attr:`categorical`).
        """
        if self.categorical:
            raise RunTableError(f"{self.source}: hyperparameter(s) {list(self.categorical)} "
                                "are categorical (text); select the numeric ones from "
                                "RunTable.frame instead.")
        return self.frame.loc[:, list(self.hyperparameters)].to_numpy(dtype=np.float64)

    def with_frame(self, frame: pd.DataFrame) -> RunTable:
        """Return a copy holding ``frame`` (e.g. a filtered subset), other fields unchanged.

        Raises:
            RunTableError: if ``frame`` lacks a canonical or hyperparameter column.
        """
        needed = ["run_id", "N", "D", "C", "loss", *self.hyperparameters, *self.config_columns]
        missing = [name for name in needed if name not in frame.columns]
        if missing:
            raise RunTableError(
                f"{self.source}: the new frame lacks column(s) {missing} that a RunTable "
                f"needs; keep them when filtering (available: {list(frame.columns)})."
            )
        return dataclasses.replace(self, frame=frame)


def compute_flops(N: np.ndarray | float, D: np.ndarray | float) -> np.ndarray:
    """Training compute ``C = 6·N·D`` in FLOPs (Kaplan et al. 2020, Eq. 2.1 approximation).

    Args:
        N: Model size(s) in parameters, any shape.
        D: Training tokens, broadcastable with ``N``.

    Returns:
        FLOPs as float64 (inputs are cast first: ``6·N·D`` overflows int64 for N ≈ 1e9,
        D ≈ 1e11).
    """
    return 6.0 * np.asarray(N, dtype=np.float64) * np.asarray(D, dtype=np.float64)


def load_runs(
    source: str | Path | pd.DataFrame,
    *,
    mapping: Mapping[str, str] | None = None,
    hyperparameters: Sequence[str] | None = None,
    duplicates: Literal["error", "mean"] = "error",
    diverged_above: float | None = None,
    run_id: str | None = None,
    config_columns: Sequence[str] = (),
    source_name: str | None = None,
) -> RunTable:
    """Load, validate and normalize a table of training runs.

    Args:
        source: A file path (format by suffix, see :func:`read_table`) or a DataFrame
            (copied, never modified). Messages count "data row k" from 1 over the rows in
            order (a file's line k + 1 under its header; a DataFrame's ``iloc[k - 1]``,
            whatever its index labels).
        mapping: Canonical name → column of the source, e.g. ``{"N": "params", "D":
            "tokens"}``. A source column that already bears a mapped canonical name is kept
            as ``<name>_unmapped``.
        hyperparameters: Names of the hyperparameter columns; a named column of names (an
            optimizer: ``"adam"``, ``"lion"``; mostly text, by
            :func:`~scalebo.data.columns.text_column`'s rule) or of booleans is a categorical
            hyperparameter, kept as text (:attr:`RunTable.categorical`). Default: every
            numeric column that is not bookkeeping (``run_id``, ``N``, ``D``, ``C``, ``loss``,
            ``n_repeats``, ``reason``, ``seed``, ``status``, any name containing ``loss``,
            ``*_unmapped``, ``config_columns``), has no missing value, and varies inside at
            least one (N, D) cell — a column fixed per cell (width, depth, ``D/N``) is a
            property of the cell, not a search axis — and is not derived or measured (an
            iteration count, a wall time: :func:`~scalebo.data.columns.
            default_hyperparameters`). This default is a guess: pass the names for real work.
        duplicates: What to do with repeated configurations (same N, D, hyperparameters and
            ``config_columns``): ``"error"`` raises naming both rows; ``"mean"`` averages
            their loss, records the count in ``n_repeats`` and warns.
        diverged_above: Runs whose loss (nats) is at or above this are excluded as
            diverged (a sentinel loss written at the threshold counts).
        run_id: Column holding run identifiers (same as ``mapping={"run_id": ...}``).
            Without one, ids are ``"row<k>"`` with ``k`` the 1-based data row.
        config_columns: Extra columns that identify a configuration (see
            :attr:`RunTable.config_columns`).
        source_name: Name used in messages and as ``RunTable.source`` (default: the path,
            or ``"<DataFrame>"``); loaders that prepare a DataFrame pass their file here.

    Returns:
        The validated :class:`RunTable`; rows with NaN/inf loss or a diverged loss, and rows
        whose ``status`` column says failed or running (a campaign's runs file), are in
        ``excluded``, counted in an :class:`~scalebo.errors.ExcludedRunsWarning`.

    Raises:
        RunTableError: missing required columns, non-numeric or non-positive N, D, C or
            loss, missing hyperparameter values, repeated run ids, repeated configurations
            (with ``duplicates="error"``), or no run left.
    """
    if duplicates not in ("error", "mean"):
        raise RunTableError(f"duplicates must be 'error' or 'mean', got {duplicates!r}.")
    if isinstance(source, pd.DataFrame):
        name, frame = "<DataFrame>", source.copy()
    else:
        name, frame = str(source), read_table(source)
    name = source_name if source_name is not None else name
    frame = frame.reset_index(drop=True)
    if len(frame) == 0:
        raise RunTableError(f"{name}: the table has no rows; expected one row per run.")

    merged = _merge_run_id(mapping, run_id, name)
    frame = apply_mapping(frame, merged, name)
    _check_required(frame, name, merged)
    # named columns are looked for among the file's own (before C and run_id are added)
    named = [hyperparameters] if isinstance(hyperparameters, str) else hyperparameters
    _check_columns_exist(frame, list(named or ()), "hyperparameter column", name)
    _check_columns_exist(frame, list(config_columns), "config column", name)
    for column in ("N", "D", "loss", "C"):
        if column in frame.columns:
            frame[column] = _to_float(frame[column], column, name, shown_column(column, merged))
    for column in ("N", "D", "C"):
        if column in frame.columns:
            _check_positive(frame[column], column, name,
                            shown_column(column, merged, UNITS[column]))
    has_C = "C" in frame.columns
    if not has_C:
        frame["C"] = compute_flops(frame["N"].to_numpy(), frame["D"].to_numpy())
    for note in unit_notes(frame, name, has_C=has_C):
        warnings.warn(note, UserWarning, stacklevel=2)
    config_columns = tuple(config_columns)
    frame["run_id"] = _run_ids(frame, name, grouping="run_id" in config_columns)
    unfinished = unfinished_runs(frame)
    valid = (np.isfinite(frame["loss"].to_numpy(dtype=np.float64))  # the others are excluded
             & ~unfinished[0])
    for column in config_columns:  # a run excluded anyway (no loss) may leave it blank
        _check_no_missing(frame.loc[valid, column], column, name)
    hps = _resolve_hyperparameters(frame, hyperparameters, config_columns, name, valid)
    for column in hps:
        if hyperparameters is not None and (is_categorical(frame[column]) or
                                            pd.api.types.is_bool_dtype(frame[column].dtype)):
            frame[column] = _to_labels(frame[column], column, name, valid)
            continue
        frame[column] = _to_float(frame[column], column, name)
        _check_no_missing(frame.loc[valid, column], column, name)

    frame, excluded = _exclude(frame, diverged_above, name, unfinished,
                               shown_column("loss", merged, "nats"))
    frame = handle_duplicates(frame, ["N", "D", *hps, *config_columns], duplicates, name)
    frame = _order_columns(frame, hps)
    excluded = excluded.reindex(columns=[*frame.columns.drop("n_repeats", errors="ignore"),
                                         "reason"])
    return RunTable(
        frame=frame,
        hyperparameters=hps,
        source=name,
        n_excluded=len(excluded),
        excluded=excluded,
        config_columns=config_columns,
    )


def refilter_runs(table: RunTable, *, duplicates: Literal["error", "mean"] = "error",
                  diverged_above: float | None = None) -> RunTable:
    """Apply ``diverged_above`` and ``duplicates`` to an already loaded table (e.g. a
    registered dataset), keeping its hyperparameters, config columns and source name.

    Runs excluded before stay excluded; the new exclusions are added to
    :attr:`RunTable.excluded` (with their reason), never dropped silently.
    """
    if diverged_above is None and duplicates == "error":
        return table
    reloaded = load_runs(
        table.frame.drop(columns=["n_repeats"], errors="ignore"),
        hyperparameters=table.hyperparameters,
        duplicates=duplicates,
        diverged_above=diverged_above,
        config_columns=table.config_columns,
        source_name=table.source,
    )
    if table.n_excluded == 0:
        return reloaded
    excluded = (pd.concat([table.excluded, reloaded.excluded]) if reloaded.n_excluded
                else table.excluded)
    return dataclasses.replace(reloaded, n_excluded=len(excluded), excluded=excluded)
