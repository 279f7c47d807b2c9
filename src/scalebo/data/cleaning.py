"""Validation and cleaning steps of :func:`scalebo.data.runs.load_runs`: mapping, numeric and
positive checks, run ids, hyperparameter columns, exclusions (NaN, diverged) and repeated
configurations. Messages name the source, the 1-based data row(s) and the column."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from scalebo.data.columns import (
    CANONICAL_COLUMNS,
    REQUIRED_COLUMNS,
    UNMAPPED_SUFFIX,
    ExclusionReason,
    blank_axes,
    blank_cells,
    default_hyperparameters,
    is_blank,
    is_candidate_column,
    number_hint,
    status_hint,
    suggested_mapping,
    to_numbers,
)
from scalebo.data.plausibility import per_run_axes, text_settings
from scalebo.data.typos import check_typos, judge_typos
from scalebo.errors import (
    EXCLUDED_IN_PYTHON,
    ExcludedRunsWarning,
    RunTableError,
    closest,
    with_hints,
)
from scalebo.errors import data_rows as _rows


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


def apply_mapping(frame: pd.DataFrame, mapping: Mapping[str, str], name: str) -> pd.DataFrame:
    """``frame`` with its columns renamed by ``mapping`` (canonical name → the file's column);
    a column that already bears a mapped canonical name is kept as ``<name>_unmapped`` (a
    ``loss`` beside the mapped ``val_loss``).

    Raises:
        RunTableError: a key that is not canonical, a mapped column not in ``frame`` (with a
            did-you-mean), one column mapped twice, repeated names after renaming.
    """
    unknown = [key for key in mapping if key not in CANONICAL_COLUMNS]
    if unknown:
        raise RunTableError(
            f"{name}: mapping keys {unknown} are not canonical columns; expected keys among "
            f"{list(CANONICAL_COLUMNS)} (canonical name -> your column, e.g. N=params)."
        )
    absent = {key: col for key, col in mapping.items() if col not in frame.columns}
    if absent:
        have = [str(c) for c in frame.columns]
        hints = {col: closest(col, have) for col in absent.values()}
        said = "".join(f" (did you mean {h!r} for {col!r}?)" for col, h in hints.items() if h)
        raise RunTableError(
            f"{name}: mapped column(s) {absent} not found{said}; available columns: {have}."
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


def _check_required(frame: pd.DataFrame, name: str,
                    mapping: Mapping[str, str] | None = None) -> None:
    """Raise when N, D or loss is missing after ``mapping`` (canonical → the file's column)
    was applied; the message lists the file's own column names and the whole ``--map``."""
    missing = [col for col in REQUIRED_COLUMNS if col not in frame.columns]
    if missing:
        mapping = {k: v for k, v in (mapping or {}).items() if k != v}
        guess = suggested_mapping(frame.columns, missing)
        example = ",".join([f"{k}={v}" for k, v in mapping.items()]
                           + [f"{col}={guess.get(col, '<column>')}" for col in missing])
        raise RunTableError(
            f"{name}: missing required column(s) {missing} (N: parameters, D: tokens, "
            f"loss: nats). The file's columns: {[mapping.get(c, c) for c in frame.columns]}. "
            f"Map yours with --map {example} (mapping={{...}} in Python)."
            + (" A table of compute and loss alone is not a run table, and a formula is "
               "fitted to every row, not to the envelope of the best runs (keep only your "
               "frontier's runs first); fit it as a formula: "
               "scalebo fit FILE --formula 'E + A*C**(-alpha)' --bounds "
               "E=0:10,A=0:1e8,alpha=0:2."
               if "C" in frame.columns and "loss" in frame.columns
               and {"N", "D"} & set(missing) else "")
        )


def _check_columns_exist(
    frame: pd.DataFrame, columns: Sequence[str], what: str, name: str
) -> None:
    missing = [col for col in columns if col not in frame.columns]
    if missing:
        have = [str(c) for c in frame.columns]
        raise RunTableError(
            f"{name}: {what}(s) [{with_hints(missing, have)}] not found; available columns: "
            f"{have} (N, D, loss: as mapped)."
        )


def shown_column(column: str, mapping: Mapping[str, str] | None, unit: str = "") -> str:
    """``column`` for a message: quoted, with its ``unit`` and, when ``mapping`` (the user's
    ``{canonical: file column}``) renamed it, the file's own name, e.g. ``'N' (parameters;
    file column 'params')``."""
    source = (mapping or {}).get(column)
    parts = [unit] if unit else []
    if source not in (None, column):
        parts.append(f"file column {source!r}")
    return repr(column) + (f" ({'; '.join(parts)})" if parts else "")


def _to_float(series: pd.Series, column: str, name: str, shown: str | None = None
              ) -> pd.Series:
    """Cast to float64; a value that is present but not a number raises, naming it
    (``shown``: the column as messages name it, default ``repr(column)``)."""
    shown = shown or repr(column)
    if pd.api.types.is_bool_dtype(series.dtype):
        raise RunTableError(
            f"{name}: column {shown} holds booleans; expected numbers."
        )
    values = to_numbers(series)
    bad = np.flatnonzero(values.isna().to_numpy() & series.notna().to_numpy())
    if bad.size:
        first = bad[0]
        more = f" (first at data row {first + 1})" if bad.size > 1 else ""
        raise RunTableError(
            f"{name}: {_rows(bad)}, column {shown}: expected a number, got "
            f"{_scalar(series.iloc[first])!r}{more}. "
            + (number_hint(series.iloc[first]) or "Fix the value(s), or map another column "
               "(--map on the command line, mapping= in Python)."
               + (" A run without a loss (crashed, diverged) is an empty cell or NaN: it is "
                  "then left out of fits, and a campaign counts it as failed."
                  if column == "loss" else ""))
        )
    return values.astype(np.float64)


def _to_labels(series: pd.Series, column: str, name: str, checked: np.ndarray) -> pd.Series:
    """A categorical hyperparameter as stripped text; a blank cell among the ``checked``
    rows (``(n,)`` bool: those with a finite loss) raises, naming it."""
    blank = np.flatnonzero(blank_cells(series) & checked)
    if blank.size:
        raise RunTableError(
            f"{name}: column {column!r}, {_rows(blank)}: missing value; a categorical "
            "hyperparameter needs a value on every run. Fill it in, or drop those runs "
            "before loading."
        )
    return series.map(lambda v: v if is_blank(v) else str(_scalar(v)).strip()).astype(object)


#: Units of the canonical input columns, for messages.
UNITS = {"N": "parameters", "D": "tokens", "C": "FLOPs"}


def _check_positive(series: pd.Series, column: str, name: str, shown: str | None = None
                    ) -> None:
    values = series.to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        shown = shown or shown_column(column, None, UNITS[column])
        raise RunTableError(
            f"{name}: column {shown}, {_rows(bad)}: expected a finite value > 0, "
            f"got {'a blank or NaN' if np.isnan(values[bad[0]]) else repr(values[bad[0]].item())}"
            + (f" (first at data row {bad[0] + 1})." if bad.size > 1 else ".")
        )


def _check_no_missing(series: pd.Series, column: str, name: str) -> None:
    if pd.api.types.is_float_dtype(series.dtype):
        bad = np.flatnonzero(~np.isfinite(series.to_numpy(dtype=np.float64)))
    else:
        bad = np.flatnonzero(series.isna().to_numpy())
    if bad.size:  # the index holds 0-based positions in the file (a subset keeps them)
        raise RunTableError(
            f"{name}: column {column!r}, {_rows(series.index[bad])}: missing or non-finite "
            "value; every run needs one. Fill it in, or drop those runs before loading."
        )


def _run_ids(frame: pd.DataFrame, name: str, grouping: bool = False) -> pd.Series:
    """Each row's ``run_id`` (``row<k>`` without the column); unique unless ``grouping``
    (``run_id`` is then a config column naming each checkpoint's training run)."""
    if "run_id" not in frame.columns:
        return pd.Series([f"row{k + 1}" for k in range(len(frame))], index=frame.index,
                         dtype="str")
    ids = frame["run_id"]
    _check_no_missing(ids, "run_id", name)
    ids = ids.astype("str")
    repeated = ids.duplicated(keep=False).to_numpy()
    if repeated.any() and not grouping:
        first = ids[repeated].iloc[0]
        rows = np.flatnonzero((ids == first).to_numpy())
        mine = frame.loc[ids == first]
        checkpoints = ("N" in frame and "D" in frame and mine["N"].nunique() == 1
                       and mine["D"].nunique() == len(mine))
        raise RunTableError(
            f"{name}: column 'run_id': id {first!r} appears on {_rows(rows)} "
            f"({int(repeated.sum())} rows share an id); run ids must be unique."
            + (" Its rows are one model size at several token counts: if they are "
               "checkpoints of one training run, say so with --run run_id (in Python: "
               "load_runs(..., config_columns=['run_id']), then "
               "scalebo.data.checkpoints.with_runs(table, 'run_id'))." if checkpoints else "")
        )
    return ids


def _resolve_hyperparameters(
    frame: pd.DataFrame,
    hyperparameters: Sequence[str] | None,
    config_columns: tuple[str, ...],
    name: str,
    valid_rows: np.ndarray,
) -> tuple[str, ...]:
    """The hyperparameter columns: ``hyperparameters`` checked, or the default rule on the
    rows of ``valid_rows`` (``(n,)`` bool: a finite loss; the others will be excluded)."""
    if hyperparameters is None:
        candidates = [c for c in frame.columns if c not in CANONICAL_COLUMNS
                      and is_candidate_column(frame, c, config_columns)]
        numeric_text, typos = check_typos(frame, candidates, name)
        for column in numeric_text:  # "10_000" is a number; a typo's column stays as written
            if column not in typos:
                frame[column] = to_numbers(frame[column])
        # runs that will be excluded (NaN or inf loss) take no part in choosing the axes
        valid = frame.loc[valid_rows]
        judge_typos(valid, typos, config_columns)  # an error where the column is a setting
        chosen = default_hyperparameters(valid, config_columns)
        keys = ["N", "D", *chosen, *config_columns]
        for column, blanks in blank_axes(valid, config_columns, keys=keys).items():
            rows = valid.index[blanks]
            warnings.warn(
                f"{name}: column {column!r} varies inside (N, D) cells like a hyperparameter, "
                f"but {_rows(rows)} {'is' if rows.size == 1 else 'are'} blank, so it is "
                "not used as one and the runs it tells apart count as repeats. Fill the "
                "value(s) in, or name the hyperparameter columns (fit --hyperparameters, "
                "replay --axes, hyperparameters= in Python).",
                UserWarning, stacklevel=3)
        for column in per_run_axes(valid, chosen, config_columns):
            warnings.warn(
                f"{name}: column {column!r} has a different value on every run, grows with the "
                "runs' compute and tells apart runs equal in every other setting, yet is used "
                "as a hyperparameter: a measurement (a wall time) splitting repeats? Those "
                "runs are then neither "
                "averaged (--duplicates mean) nor one configuration. Name the settings "
                "(fit --hyperparameters, replay --axes, hyperparameters= in Python).",
                UserWarning, stacklevel=3)
        for column, values in text_settings(valid, candidates, chosen,
                                            config_columns).items():
            warnings.warn(
                f"{name}: text column {column!r} ({values}) varies inside (N, D) cells but "
                "is not a hyperparameter by default (the default takes numeric columns): "
                "the runs it tells apart are compared as one setting. Name it to use it "
                f"(fit --hyperparameters, replay --axes {column},..., hyperparameters= in "
                "Python).", UserWarning, stacklevel=3)
        return chosen
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
    frame: pd.DataFrame, diverged_above: float | None, name: str,
    unfinished: tuple[np.ndarray, list[str]], shown: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(kept, excluded)``: the rows without a finite, positive, not diverged loss, and those
    ``unfinished`` says failed or running (:func:`~scalebo.data.columns.unfinished_runs`'s
    ``(mask, unknown values)``), go to ``excluded`` with their reason and one warning.
    ``shown``: the loss column as an error names it (:func:`shown_column`: with the file's
    own name under a mapping; default ``'loss' (nats)``)."""
    loss = frame["loss"].to_numpy(dtype=np.float64)
    unfinished, unknown = unfinished
    if unknown:
        warnings.warn(f"{name}: column 'status' has "
                      f"{', '.join(repr(u) + status_hint(u) for u in unknown[:5])}, not "
                      "completed, failed or running: those rows are fitted as finished runs",
                      UserWarning, stacklevel=3)
    finite = np.isfinite(loss)
    nonpositive = np.flatnonzero(finite & (loss <= 0) & ~unfinished)
    if nonpositive.size:
        raise RunTableError(
            f"{name}: column {shown or shown_column('loss', None, 'nats')}, "
            f"{_rows(nonpositive)}: expected a loss > 0, got "
            f"{loss[nonpositive[0]].item()!r}"
            + (f" (first at data row {nonpositive[0] + 1})" if nonpositive.size > 1 else "")
            + "; laws are fitted in log space."
        )
    reason = np.full(len(frame), "", dtype=object)
    reason[~finite] = ExclusionReason.NON_FINITE
    if diverged_above is not None:
        if not np.isfinite(diverged_above):
            raise RunTableError(f"diverged_above must be a finite loss, got {diverged_above!r}.")
        reason[finite & (loss >= diverged_above)] = ExclusionReason.DIVERGED
    reason[unfinished] = ExclusionReason.NOT_COMPLETED
    drop = reason != ""
    if drop.all():
        raise RunTableError(
            f"{name}: all {len(frame)} runs have a non-finite loss"
            + ("" if diverged_above is None else f", a loss at or above diverged_above="
               f"{diverged_above:g}") + " or a status other than completed; nothing is "
            "left to fit."
        )
    excluded = frame.loc[drop].assign(reason=reason[drop])
    if drop.any():
        parts = []
        labels = {ExclusionReason.NON_FINITE: "non-finite loss",
                  ExclusionReason.DIVERGED: f"diverged (loss ≥ {diverged_above})",
                  ExclusionReason.NOT_COMPLETED: "status failed or running, so not a "
                                                 "finished run's loss"}
        for why, label in labels.items():
            rows = np.flatnonzero(reason == why)
            if rows.size:
                parts.append(f"{rows.size} {label} ({_rows(rows)})")
        warnings.warn(
            f"{name}: excluded {int(drop.sum())} of {len(frame)} runs: {'; '.join(parts)}."
            + EXCLUDED_IN_PYTHON,
            ExcludedRunsWarning,
            stacklevel=3,
        )
    return frame.loc[~drop], excluded


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
