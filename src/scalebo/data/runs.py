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
from enum import StrEnum
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from scalebo.errors import ExcludedRunsWarning, RunTableError

__all__ = [
    "CANONICAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "ExclusionReason",
    "RunTable",
    "compute_flops",
    "load_runs",
    "parse_mapping",
    "read_table",
]

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
_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json")
_ROWS_SHOWN = 5


class ExclusionReason(StrEnum):
    """Why a run is in ``RunTable.excluded`` rather than in ``RunTable.frame``."""

    NON_FINITE = "non_finite"
    """The loss is NaN or ±inf (a crashed run, or a missing value in the file)."""
    DIVERGED = "diverged"
    """The loss is above the ``diverged_above`` threshold given to :func:`load_runs`."""
    DROPPED = "dropped"
    """Removed at an explicit request of the caller (e.g. a loader's ``drop_highest_loss``)."""


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
    def hyperparameter_array(self) -> np.ndarray:
        """Hyperparameter values, shape ``(n_runs, n_hyperparameters)``, float64."""
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


def parse_mapping(text: str) -> dict[str, str]:
    """Parse a CLI column mapping ``"N=params,D=tokens"`` into ``{"N": "params", ...}``.

    Keys are canonical names (``run_id``, ``N``, ``D``, ``C``, ``loss``); values are column
    names of the user's table (spaces inside are kept, surrounding spaces are stripped).

    Raises:
        RunTableError: on an item without ``=``, an empty name, an unknown canonical name, or
            a canonical name given twice.
    """
    mapping: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise RunTableError(
                f"column mapping {text!r}: item {item.strip()!r} is not of the form "
                f"CANONICAL=column, e.g. 'N=params,D=tokens'."
            )
        if key not in CANONICAL_COLUMNS:
            raise RunTableError(
                f"column mapping {text!r}: {key!r} is not a canonical column; "
                f"expected one of {list(CANONICAL_COLUMNS)}."
            )
        if key in mapping:
            raise RunTableError(
                f"column mapping {text!r}: {key!r} is mapped twice "
                f"({mapping[key]!r} and {value!r}); keep one."
            )
        mapping[key] = value
    return mapping


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a run table from disk, choosing the format by suffix.

    Supported: ``.csv``, ``.tsv``, ``.parquet`` / ``.pq``, ``.jsonl`` / ``.ndjson`` (JSON
    lines) and ``.json`` (a list of records, or JSON lines).

    Raises:
        RunTableError: missing file, unknown suffix, or a file the parser rejects.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise RunTableError(
            f"{path}: unsupported file type {suffix or '(no suffix)'!r}; expected one of "
            f"{list(_SUFFIXES)}. Convert the file or load it with pandas and pass the DataFrame."
        )
    if not path.is_file():
        raise RunTableError(f"{path}: no such file.")
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix == ".tsv":
            return pd.read_csv(path, sep="\t")
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True, dtype=False)
        try:
            return pd.read_json(path, orient="records", dtype=False)
        except ValueError:
            return pd.read_json(path, lines=True, dtype=False)
    except (ValueError, OSError, ImportError) as exc:
        raise RunTableError(f"{path}: could not be read as {suffix[1:]}: {exc}") from exc


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
            (copied, never modified).
        mapping: Canonical name → column of the source, e.g. ``{"N": "params", "D":
            "tokens"}``. A source column that already bears a mapped canonical name is kept
            as ``<name>_unmapped``.
        hyperparameters: Names of the hyperparameter columns. Default: every numeric column
            that is not bookkeeping (``run_id``, ``N``, ``D``, ``C``, ``loss``,
            ``n_repeats``, ``reason``, ``seed``, any name containing ``loss``, ``*_unmapped``,
            ``config_columns``), has no missing value, and varies inside at least one (N, D)
            cell — a column fixed per cell (width, depth, ``D/N``) is a property of the cell,
            not a search axis. This default is a guess: pass the names for real work.
        duplicates: What to do with repeated configurations (same N, D, hyperparameters and
            ``config_columns``): ``"error"`` raises naming both rows; ``"mean"`` averages
            their loss, records the count in ``n_repeats`` and warns.
        diverged_above: Runs whose loss (nats) is above this are excluded as diverged.
        run_id: Column holding run identifiers (same as ``mapping={"run_id": ...}``).
            Without one, ids are ``"row<k>"`` with ``k`` the 1-based data row.
        config_columns: Extra columns that identify a configuration (see
            :attr:`RunTable.config_columns`).
        source_name: Name used in messages and as ``RunTable.source`` (default: the path,
            or ``"<DataFrame>"``); loaders that prepare a DataFrame pass their file here.

    Returns:
        The validated :class:`RunTable`; rows with NaN/inf loss or a diverged loss are in
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

    frame = _apply_mapping(frame, _merge_run_id(mapping, run_id, name), name)
    _check_required(frame, name)
    for column in ("N", "D", "loss", "C"):
        if column in frame.columns:
            frame[column] = _to_float(frame[column], column, name)
    for column in ("N", "D", "C"):
        if column in frame.columns:
            _check_positive(frame[column], column, name)
    if "C" not in frame.columns:
        frame["C"] = compute_flops(frame["N"].to_numpy(), frame["D"].to_numpy())
    frame["run_id"] = _run_ids(frame, name)

    config_columns = tuple(config_columns)
    _check_columns_exist(frame, config_columns, "config column", name)
    for column in config_columns:
        _check_no_missing(frame[column], column, name)
    hps = _resolve_hyperparameters(frame, hyperparameters, config_columns, name)
    for column in hps:
        frame[column] = _to_float(frame[column], column, name)
        _check_no_missing(frame[column], column, name)

    frame, excluded = _exclude(frame, diverged_above, name)
    frame = _handle_duplicates(frame, ["N", "D", *hps, *config_columns], duplicates, name)
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


# --------------------------------------------------------------------------- helpers


def _rows(positions: Sequence[int] | np.ndarray) -> str:
    """Format 0-based positions as 1-based data rows: ``"rows 3, 7 (and 4 more)"``."""
    rows = [int(p) + 1 for p in positions]
    shown = ", ".join(str(r) for r in rows[:_ROWS_SHOWN])
    more = f" (and {len(rows) - _ROWS_SHOWN} more)" if len(rows) > _ROWS_SHOWN else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more}"


def _merge_run_id(
    mapping: Mapping[str, str] | None, run_id: str | None, name: str
) -> dict[str, str]:
    merged = dict(mapping or {})
    if run_id is not None:
        if merged.get("run_id", run_id) != run_id:
            raise RunTableError(
                f"{name}: run_id={run_id!r} conflicts with mapping run_id="
                f"{merged['run_id']!r}; give the run-id column once."
            )
        merged["run_id"] = run_id
    return merged


def _apply_mapping(frame: pd.DataFrame, mapping: Mapping[str, str], name: str) -> pd.DataFrame:
    unknown = [key for key in mapping if key not in CANONICAL_COLUMNS]
    if unknown:
        raise RunTableError(
            f"{name}: mapping keys {unknown} are not canonical columns; expected keys among "
            f"{list(CANONICAL_COLUMNS)} (canonical name -> your column, e.g. N=params)."
        )
    absent = {key: col for key, col in mapping.items() if col not in frame.columns}
    if absent:
        raise RunTableError(
            f"{name}: mapped column(s) {absent} not found; available columns: "
            f"{list(frame.columns)}."
        )
    sources = list(mapping.values())
    if len(set(sources)) != len(sources):
        raise RunTableError(
            f"{name}: one column is mapped to several canonical names in {dict(mapping)}; "
            "map each column once."
        )
    rename = {col: key for key, col in mapping.items() if col != key}
    for key in list(rename.values()):
        if key in frame.columns and key not in rename:
            rename[key] = key + UNMAPPED_SUFFIX
    renamed = frame.rename(columns=rename)
    if renamed.columns.duplicated().any():
        clash = list(renamed.columns[renamed.columns.duplicated()])
        raise RunTableError(
            f"{name}: mapping {dict(mapping)} produces repeated column names {clash}; "
            "rename those columns first."
        )
    return renamed


def _check_required(frame: pd.DataFrame, name: str) -> None:
    missing = [col for col in REQUIRED_COLUMNS if col not in frame.columns]
    if missing:
        example = ",".join(f"{col}=<column>" for col in missing)
        raise RunTableError(
            f"{name}: missing required column(s) {missing} (N: parameters, D: tokens, "
            f"loss: nats). Available columns: {list(frame.columns)}. Map yours with "
            f"--map {example} (mapping={{...}} in Python)."
        )


def _check_columns_exist(
    frame: pd.DataFrame, columns: Sequence[str], what: str, name: str
) -> None:
    missing = [col for col in columns if col not in frame.columns]
    if missing:
        raise RunTableError(
            f"{name}: {what}(s) {missing} not found; available columns: {list(frame.columns)}."
        )


def _to_float(series: pd.Series, column: str, name: str) -> pd.Series:
    """Cast to float64; a value that is present but not a number raises, naming it."""
    if pd.api.types.is_bool_dtype(series.dtype):
        raise RunTableError(
            f"{name}: column {column!r} holds booleans; expected numbers."
        )
    values = pd.to_numeric(series, errors="coerce")
    bad = np.flatnonzero(values.isna().to_numpy() & series.notna().to_numpy())
    if bad.size:
        first = bad[0]
        raise RunTableError(
            f"{name}: column {column!r}, {_rows(bad)}: expected a number, got "
            f"{_scalar(series.iloc[first])!r} (row {first + 1}). Fix the value(s) or map another "
            f"column with --map."
        )
    return values.astype(np.float64)


def _check_positive(series: pd.Series, column: str, name: str) -> None:
    values = series.to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        unit = {"N": "parameters", "D": "tokens", "C": "FLOPs"}[column]
        raise RunTableError(
            f"{name}: column {column!r} ({unit}), {_rows(bad)}: expected a finite value > 0, "
            f"got {values[bad[0]].item()!r} (row {bad[0] + 1})."
        )


def _check_no_missing(series: pd.Series, column: str, name: str) -> None:
    if pd.api.types.is_float_dtype(series.dtype):
        bad = np.flatnonzero(~np.isfinite(series.to_numpy(dtype=np.float64)))
    else:
        bad = np.flatnonzero(series.isna().to_numpy())
    if bad.size:
        raise RunTableError(
            f"{name}: column {column!r}, {_rows(bad)}: missing or non-finite value; every run "
            "needs one. Fill it in, or drop those runs before loading."
        )


def _run_ids(frame: pd.DataFrame, name: str) -> pd.Series:
    if "run_id" not in frame.columns:
        return pd.Series([f"row{k + 1}" for k in range(len(frame))], index=frame.index,
                         dtype="str")
    ids = frame["run_id"]
    _check_no_missing(ids, "run_id", name)
    ids = ids.astype("str")
    repeated = ids.duplicated(keep=False).to_numpy()
    if repeated.any():
        first = ids[repeated].iloc[0]
        rows = np.flatnonzero((ids == first).to_numpy())
        raise RunTableError(
            f"{name}: column 'run_id': id {first!r} appears on {_rows(rows)} "
            f"({int(repeated.sum())} rows share an id); run ids must be unique."
        )
    return ids


def _default_hyperparameters(frame: pd.DataFrame, excluded: set[str]) -> tuple[str, ...]:
    cells = frame.groupby(["N", "D"], sort=False)
    chosen = []
    for column in frame.columns:
        series = frame[column]
        if (
            column in excluded
            or "loss" in str(column).lower()
            or str(column).endswith(UNMAPPED_SUFFIX)
            or pd.api.types.is_bool_dtype(series.dtype)
            or not pd.api.types.is_numeric_dtype(series.dtype)
            or not np.isfinite(series.to_numpy(dtype=np.float64)).all()
        ):
            continue
        if (cells[column].nunique() > 1).any():
            chosen.append(str(column))
    return tuple(chosen)


def _resolve_hyperparameters(
    frame: pd.DataFrame,
    hyperparameters: Sequence[str] | None,
    config_columns: tuple[str, ...],
    name: str,
) -> tuple[str, ...]:
    if hyperparameters is None:
        return _default_hyperparameters(frame, {*BOOKKEEPING_COLUMNS, *config_columns})
    if isinstance(hyperparameters, str):
        raise RunTableError(
            f"{name}: hyperparameters must be a sequence of column names, got the string "
            f"{hyperparameters!r}; write [{hyperparameters!r}]."
        )
    hps = tuple(hyperparameters)
    reserved = [hp for hp in hps if hp in CANONICAL_COLUMNS or hp in config_columns]
    if reserved:
        raise RunTableError(
            f"{name}: {reserved} cannot be hyperparameters (canonical or config columns)."
        )
    if len(set(hps)) != len(hps):
        raise RunTableError(f"{name}: hyperparameters {list(hps)} name a column twice.")
    _check_columns_exist(frame, hps, "hyperparameter column", name)
    return hps


def _exclude(
    frame: pd.DataFrame, diverged_above: float | None, name: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    loss = frame["loss"].to_numpy(dtype=np.float64)
    finite = np.isfinite(loss)
    nonpositive = np.flatnonzero(finite & (loss <= 0))
    if nonpositive.size:
        raise RunTableError(
            f"{name}: column 'loss' (nats), {_rows(nonpositive)}: expected a loss > 0, got "
            f"{loss[nonpositive[0]].item()!r} (row {nonpositive[0] + 1}); laws are fitted in "
            "log space."
        )
    reason = np.full(len(frame), "", dtype=object)
    reason[~finite] = ExclusionReason.NON_FINITE
    if diverged_above is not None:
        if not np.isfinite(diverged_above):
            raise RunTableError(f"diverged_above must be a finite loss, got {diverged_above!r}.")
        reason[finite & (loss > diverged_above)] = ExclusionReason.DIVERGED
    drop = reason != ""
    if drop.all():
        raise RunTableError(
            f"{name}: all {len(frame)} runs have a non-finite or diverged loss "
            f"(diverged_above={diverged_above}); nothing is left to fit."
        )
    excluded = frame.loc[drop].assign(reason=reason[drop])
    if drop.any():
        parts = []
        for why in (ExclusionReason.NON_FINITE, ExclusionReason.DIVERGED):
            rows = np.flatnonzero(reason == why)
            if rows.size:
                label = "non-finite loss" if why is ExclusionReason.NON_FINITE else (
                    f"diverged (loss > {diverged_above})"
                )
                parts.append(f"{rows.size} {label} ({_rows(rows)})")
        warnings.warn(
            f"{name}: excluded {int(drop.sum())} of {len(frame)} runs: {'; '.join(parts)}. "
            "They are listed in RunTable.excluded.",
            ExcludedRunsWarning,
            stacklevel=3,
        )
    return frame.loc[~drop], excluded


def _handle_duplicates(
    frame: pd.DataFrame, keys: list[str], duplicates: str, name: str
) -> pd.DataFrame:
    group = frame.groupby(keys, sort=False).ngroup().to_numpy()
    n_groups = int(group.max()) + 1
    if n_groups == len(frame):
        if duplicates == "mean":
            frame = frame.assign(n_repeats=np.ones(len(frame), dtype=np.int64))
        return frame
    if duplicates == "error":
        _, first_of_group = np.unique(group, return_index=True)
        repeat = next(k for k in range(len(group)) if first_of_group[group[k]] != k)
        partner = first_of_group[group[repeat]]
        pos_a, pos_b = frame.index[partner], frame.index[repeat]
        config = ", ".join(f"{k}={_scalar(frame[k].iloc[repeat])!r}" for k in keys)
        raise RunTableError(
            f"{name}: rows {pos_a + 1} and {pos_b + 1} repeat the configuration ({config}); "
            f"{len(frame) - n_groups} row(s) repeat an earlier one. Average repeats with "
            "duplicates='mean' (CLI: --duplicates mean), or name the column that tells them "
            "apart as a hyperparameter."
        )
    counts = np.bincount(group, minlength=n_groups)
    mean_loss = np.bincount(group, weights=frame["loss"].to_numpy(), minlength=n_groups) / counts
    _, first_of_group = np.unique(group, return_index=True)
    merged = frame.iloc[first_of_group].copy()
    merged["loss"] = mean_loss
    merged["n_repeats"] = counts.astype(np.int64)
    warnings.warn(
        f"{name}: averaged the loss of repeated configurations: {len(frame)} runs merged "
        f"into {n_groups} ({int((counts > 1).sum())} configurations had repeats; other "
        "columns keep the first run's values).",
        UserWarning,
        stacklevel=3,
    )
    return merged


def _scalar(value: object) -> object:
    """A numpy scalar as the Python value (for readable messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _order_columns(frame: pd.DataFrame, hps: tuple[str, ...]) -> pd.DataFrame:
    head = ["run_id", "N", "D", "C", "loss"]
    if "n_repeats" in frame.columns:
        head.append("n_repeats")
    head += list(hps)
    rest = [col for col in frame.columns if col not in head]
    return frame.loc[:, head + rest]
