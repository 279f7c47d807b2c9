"""Typos in a run table's numeric text columns (``"3e-4x"`` among learning rates): an error
where the column is a setting (as text it would merge the runs it tells apart), a warning
where no fit uses it (a metric beside the loss, one run per cell). Rule of a numeric text
column: :func:`~scalebo.data.columns.text_column`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from scalebo.data.columns import (
    default_hyperparameters,
    parse_number,
    text_column,
    to_numbers,
)
from scalebo.errors import RunTableError
from scalebo.errors import data_rows as _rows

__all__ = ["check_typos", "judge_typos"]


def check_typos(frame: pd.DataFrame, columns: Sequence[str], name: str
                 ) -> tuple[list[str], dict[str, str]]:
    """``(numeric_text, typos)``: the text columns that read as numbers (``"10_000"``,
    ``" 3e-4"``), and, per text column of numbers with a value that is not one (a ``"3e-4x"``
    among learning rates; rule: :func:`~scalebo.data.columns.text_column`), the error that
    names it (:func:`judge_typos` raises it when the column is a setting)."""
    numeric_text, typos = [], {}
    for column in columns:
        series = frame[column]
        if pd.api.types.is_numeric_dtype(series.dtype):
            continue
        numeric, bad, n_numbers, n_present = text_column(series)
        if numeric:
            numeric_text.append(column)
        if bad.size:
            value = series.iloc[bad[0]]
            value = value.item() if isinstance(value, np.generic) else value  # readable
            what = "a number" if parse_number(value) is None else "a finite number"
            are = "is a number" if n_numbers == 1 else "are numbers"
            typos[column] = (
                f"{name}: {_rows(bad)}, column {column!r}: expected {what}, got "
                f"{value!r} (the column is numeric: {n_numbers} of its {n_present} "
                f"values {are}; a categorical column is mostly text)")
    return numeric_text, typos


def judge_typos(valid: pd.DataFrame, typos: dict[str, str], config_columns: tuple[str, ...]
                ) -> None:
    """Raise for a column of :func:`check_typos` that the default rule
    (:func:`~scalebo.data.columns.default_hyperparameters`, on ``valid``: the runs with a
    loss) takes as a hyperparameter once each bad value counts as a value of its own (as
    the typo reads): as text it would silently stop being one and merge the runs it tells
    apart. Any other such column (a metric beside the loss, one run per cell, or a measured
    column beside a learning-rate sweep) keeps its values as written, with a warning."""
    if not typos:
        return
    probe = valid.copy()
    for column in typos:  # each bad text (and a blank) becomes a number no other cell holds
        values = to_numbers(probe[column]).to_numpy(copy=True)
        bad = ~np.isfinite(values)  # text, inf or blank: a blank would drop the column
        span = min(float(np.abs(values[~bad]).max(initial=0.0)), 1e300)
        codes = pd.factorize(probe[column].astype(str).to_numpy()[bad])[0]  # as each reads
        values[bad] = -(span + 1.0) * (1.0 + codes)
        probe[column] = values
    setting = set(default_hyperparameters(probe, config_columns))
    for column, text in typos.items():
        if column in setting:
            raise RunTableError(f"{text}. Fix the value(s), or name the hyperparameter columns "
                                "to leave this one out (fit --hyperparameters, replay --axes, "
                                "hyperparameters= in Python).")
        warnings.warn(f"{text}; it is not taken as a hyperparameter, so its values are kept as "
                      "written (a fit of this column, --response, stops at that row).",
                      UserWarning, stacklevel=4)
