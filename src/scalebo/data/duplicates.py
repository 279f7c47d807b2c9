"""Repeated configurations in a run table: refused with their cause, or averaged.

Two rows repeat a configuration when they agree on N, D, every hyperparameter and every
configuration column. Often the cause is another column: a text column such as an optimizer
name that tells the runs apart (then averaging would mix two settings), or a numeric
hyperparameter column left out because a value is blank. The error names that cause first.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from scalebo.data.cleaning import _scalar
from scalebo.data.columns import CANONICAL_COLUMNS, blank_axes, is_candidate_column
from scalebo.data.plausibility import is_run_label
from scalebo.errors import RunTableError, shown_config
from scalebo.errors import data_rows as _rows

__all__ = ["handle_duplicates"]


def handle_duplicates(
    frame: pd.DataFrame, keys: list[str], duplicates: str, name: str
) -> pd.DataFrame:
    """Rows that repeat a configuration (the same ``keys``): an error naming the first two
    rows and, first, the cause when one is visible (a text column that tells them apart, or a
    hyperparameter column left out for a blank value) under ``duplicates="error"``; under
    ``"mean"`` one row per configuration with the mean loss (nats) and ``n_repeats``."""
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
        config = shown_config({k: _scalar(frame[k].iloc[repeat]) for k in keys})
        texts = [c for c in frame.columns if c not in keys and c not in CANONICAL_COLUMNS
                 and (_labels(frame[c]) and is_candidate_column(frame, c, allow_bool=True))
                 and frame[c].iloc[partner] != frame[c].iloc[repeat]]
        label = bool(texts) and is_run_label(texts[0])
        text = "" if not texts else (
            f" They differ in the text column {texts[0]!r} "
            f"({_scalar(frame[texts[0]].iloc[partner])!r} "
            f"vs {_scalar(frame[texts[0]].iloc[repeat])!r}), so do not average them: "
            + (f"if they are checkpoints of two training runs (seeds), say so with --run "
               f"{texts[0]} (fit, fragility; in Python: load_runs(..., config_columns="
               f"[{texts[0]!r}]), then scalebo.data.checkpoints.with_runs(table, "
               f"{texts[0]!r})); if it is a setting, " if label else "")
            + "name it with the other hyperparameters to make it a categorical one (fit "
            "--hyperparameters, replay --axes, hyperparameters= in Python), or fit each "
            "value's runs separately.")
        repeats = (f"data rows {pos_a + 1} and {pos_b + 1} repeat the configuration {config}; "
                   f"{len(frame) - n_groups} row(s) repeat an earlier one")
        blanks = {} if texts else blank_axes(frame.reset_index(drop=True), keys=keys)
        if blanks:  # the cause first: a blank value made a hyperparameter column unusable
            column, rows = next(iter(blanks.items()))
            raise RunTableError(
                f"{name}: column {column!r} varies inside (N, D) cells like a hyperparameter "
                f"but is blank on {_rows(frame.index[rows])}, so it is not one, and without it "
                f"{repeats}. Fill the value(s) in, or name the hyperparameter columns (fit "
                "--hyperparameters, replay --axes, hyperparameters= in Python).")
        raise RunTableError(f"{name}: {repeats}." + (text or (
            " Average repeats with --duplicates mean (a sweep config: duplicates: mean in the "
            "dataset's options; Python: duplicates='mean'), or name the column that tells "
            "them apart as a hyperparameter.")))
    counts = np.bincount(group, minlength=n_groups)
    mean_loss = np.bincount(group, weights=frame["loss"].to_numpy(), minlength=n_groups) / counts
    _, first_of_group = np.unique(group, return_index=True)
    merged = frame.iloc[first_of_group].copy()
    merged["loss"] = mean_loss
    merged["n_repeats"] = counts.astype(np.int64)
    warnings.warn(
        f"{name}: averaged the loss of repeated configurations: {len(frame)} runs merged "
        f"into {n_groups} ({int((counts > 1).sum())} configuration(s) had repeats; other "
        "columns keep the first run's values).",
        UserWarning,
        stacklevel=3,
    )
    return merged


def _labels(series: pd.Series) -> bool:
    """A column of names or booleans (not a numeric dtype other than bool)."""
    return (pd.api.types.is_bool_dtype(series.dtype)
            or not pd.api.types.is_numeric_dtype(series.dtype))
