"""Column conventions of run tables: canonical names, bookkeeping, why a run is excluded, and
the default rule for hyperparameter columns. See :mod:`scalebo.data.runs` for the schema."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["BOOKKEEPING_COLUMNS", "CANONICAL_COLUMNS", "REQUIRED_COLUMNS", "RUN_STATES",
           "STATUS_SYNONYMS", "UNFINISHED_STATUSES", "UNMAPPED_SUFFIX", "ExclusionReason",
           "blank_axes", "blank_cells", "default_hyperparameters", "is_blank",
           "is_candidate_column", "is_categorical", "number_hint", "numeric_typos", "parse_number",
           "status_hint", "suggested_mapping", "text_column", "to_numbers", "unfinished_runs"]

#: Names that ``mapping`` may assign, in the order they appear in ``RunTable.frame``.
CANONICAL_COLUMNS: tuple[str, ...] = ("run_id", "N", "D", "C", "loss")
#: Columns every source must provide (after mapping).
REQUIRED_COLUMNS: tuple[str, ...] = ("N", "D", "loss")
#: Column names never chosen as default hyperparameters.
BOOKKEEPING_COLUMNS: frozenset[str] = frozenset(
    {*CANONICAL_COLUMNS, "n_repeats", "reason", "seed", "status"}
)
#: Values of a ``status`` column (case-insensitive; a campaign's, blank: completed) whose loss
#: is not a finished run's (:mod:`scalebo.search.campaign_runs`); :func:`unfinished_runs`.
UNFINISHED_STATUSES: frozenset[str] = frozenset({"failed", "running"})
#: Suffix given to a source column whose name is taken by a mapped column.
UNMAPPED_SUFFIX = "_unmapped"


#: Common spellings of the required columns, most likely first (compared after lower-casing
#: and reducing every run of other characters to ``_``), for the hint of a missing column.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "N": ("params", "parameters", "n_params", "num_params", "nparams", "n_parameters",
          "num_parameters", "param_count", "model_params", "model_size",
          "non_embedding_params", "total_params", "n"),
    "D": ("tokens", "n_tokens", "num_tokens", "ntokens", "train_tokens", "training_tokens",
          "tokens_seen", "dataset_size", "data", "d"),
    "loss": ("val_loss", "eval_loss", "validation_loss", "valid_loss", "test_loss",
             "final_loss", "train_loss", "loss_nats"),
}


def _alias_key(name: object) -> str:
    out, sep = [], False
    for ch in str(name).strip().lower():
        if ch.isalnum():
            out.append(ch)
            sep = False
        elif not sep:
            out.append("_")
            sep = True
    return "".join(out).strip("_")


def suggested_mapping(columns: Iterable[object], missing: Iterable[str]) -> dict[str, str]:
    """``{canonical name: column}`` for the missing required names that exactly one column
    spells in a common way (:data:`COLUMN_ALIASES`, e.g. ``params`` → ``N``, or the name in
    another case, ``Loss``), else the one column within a typo of such a spelling (``los``,
    ``tokns``); names with no or several candidates are left out, and no column is suggested
    twice. A hint for an error message, never applied silently."""
    import difflib

    cols = list(columns)
    keys = [_alias_key(c) for c in cols]
    out: dict[str, str] = {}
    for name in missing:
        spellings = (name.lower(), *COLUMN_ALIASES.get(name, ()))
        for alias in spellings:
            hits = [str(c) for c, k in zip(cols, keys, strict=True)
                    if k == alias and str(c) not in out.values()]
            if len(hits) == 1:
                out[name] = hits[0]
                break
            if hits:  # several columns spell it alike: no guess
                break
        else:  # a typo of a spelling ('los', 'tokns'): the one close column, if one
            free: dict[str, str] = {}  # key → the first column spelling it, not yet taken
            for c, k in zip(cols, keys, strict=True):
                if str(c) not in out.values():
                    free.setdefault(k, str(c))
            near = {k for alias in spellings if len(alias) > 2
                    for k in difflib.get_close_matches(alias, list(free), n=2, cutoff=0.8)}
            if len(near) == 1:
                out[name] = free[near.pop()]
    return out


class ExclusionReason(StrEnum):
    """Why a run is in ``RunTable.excluded`` rather than in ``RunTable.frame``."""

    NON_FINITE = "non_finite"
    """The loss is NaN or ±inf (a crashed run, or a missing value in the file)."""
    DIVERGED = "diverged"
    """The loss is at or above the ``diverged_above`` threshold given to :func:`load_runs`."""
    DROPPED = "dropped"
    """Removed at an explicit request of the caller (e.g. a loader's ``drop_highest_loss``)."""
    NOT_COMPLETED = "not_completed"
    """A campaign's ``status`` column says ``failed`` or ``running``: its loss, if any, is not
    a finished run's."""


#: Words other tools write for a run's status, and the campaign word each one means.
STATUS_SYNONYMS = {
    **dict.fromkeys(("done", "finished", "complete", "success", "succeeded", "ok"),
                    "completed"),
    **dict.fromkeys(("crashed", "crash", "error", "errored", "diverged", "killed", "oom",
                     "cancelled", "canceled", "timeout"), "failed"),
    **dict.fromkeys(("in_progress", "in progress", "pending", "queued", "started", "training",
                     "active"), "running"),
}


#: W&B's words for a run's state besides a campaign's: they make a ``status`` column one of
#: run states (``ok`` or ``error`` alone may mean anything); a campaign's runs file reads
#: them as their campaign word.
RUN_STATES = frozenset({"finished", "crashed", "killed"})


def status_hint(value: object) -> str:
    """`` (write 'failed' for it)`` for a status word another tool writes (``crashed``), ""
    otherwise: the tail of a message naming an unknown status."""
    word = STATUS_SYNONYMS.get(str(value).strip().lower())
    return f" (write {word!r} for it)" if word else ""


def unfinished_runs(frame: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """``(mask, unknown)``: the rows whose ``status`` column says failed or running
    (case-insensitive, surrounding blanks ignored), and, when the column uses a campaign's
    words or W&B's (``finished``, ``crashed``, ``killed``) at all, its other values, which
    the caller should warn about: those rows count as finished. In such a column the words
    of :data:`STATUS_SYNONYMS` mean their campaign word (``crashed``: failed). No ``status``
    column: nothing, and no values."""
    if "status" not in frame.columns:
        return np.zeros(len(frame), dtype=bool), []
    said = ["" if is_blank(v) else str(v).strip().lower() for v in frame["status"]]
    if not set(said) & {"completed", *UNFINISHED_STATUSES, *RUN_STATES}:
        return np.zeros(len(frame), dtype=bool), []  # neither a campaign's words nor W&B's
    said = np.array([STATUS_SYNONYMS.get(s, s) for s in said], dtype=object)
    mask = np.isin(said, list(UNFINISHED_STATUSES))
    known = {"", "completed", *UNFINISHED_STATUSES}
    return mask, sorted({str(v).strip() for v, s in zip(frame["status"], said, strict=True)
                         if s not in known})


def parse_number(value: object) -> float | None:
    """A cell read as a number: an int or float (not a bool), or text such as ``" 3e-4"``;
    None for anything else. May be ``inf`` or ``nan`` (the callers say "finite")."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


#: Count suffixes of sizes written as in model names (``125M``, ``1.3B``, ``20B``): their
#: power of ten.
SUFFIXES = {"k": 3, "m": 6, "b": 9, "t": 12}


def number_hint(value: object) -> str:
    """How to write ``value``, a cell that is not a number, when it looks like one written
    for people (the number given exactly, as text): ``"1.3B"`` → ``1.3e9``;
    ``"50,000,000"`` → ``50000000``; ``"3,1"`` → a point, not a decimal comma; ``"1,024"``
    → either reading; "" otherwise."""
    text = str(value).strip()
    if m := re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*([kKmMbBtT])", text):
        return (f"Sizes with a suffix are not read: write {text!r} as "
                f"{m.group(1)}e{SUFFIXES[m.group(2).lower()]} (k = 1e3, M = 1e6, B = 1e9, "
                "T = 1e12).")
    if re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3}){2,}(?:\.\d+)?", text):
        return (f"Thousands separators are not read: write {text!r} as "
                f"{text.replace(',', '')}.")
    if re.fullmatch(r"[-+]?\d{1,3},\d{3}", text):
        return (f"Commas are not read: write {text!r} as {text.replace(',', '')} if the comma "
                f"separates thousands, or {text.replace(',', '.')} if it is a decimal comma.")
    if re.fullmatch(r"[-+]?\d+,\d+", text):
        return "Decimal commas are not read: write the number with a point (3.1, not 3,1)."
    return ""


def to_numbers(series: pd.Series) -> pd.Series:
    """``pd.to_numeric(series, errors="coerce")`` that reads cells as :func:`parse_number`
    does: surrounding blanks ignored, ``_`` between digits a separator (``"10_000"``, as
    Python's ``float``), booleans not numbers; anything that is not a number becomes NaN
    (float64)."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return pd.Series(np.nan, index=series.index)
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.astype(np.float64)
    text = series.map(lambda v: isinstance(v, str)).astype(bool)
    cleaned = series.astype(object).where(
        ~series.map(lambda v: isinstance(v, bool | np.bool_)).astype(bool), np.nan)
    if text.any():
        cleaned[text] = series[text].str.strip().str.replace(r"(?<=\d)_(?=\d)", "",
                                                             regex=True)
    return pd.to_numeric(cleaned, errors="coerce").astype(np.float64)


def blank_cells(series: pd.Series) -> np.ndarray:
    """``(n,)`` bool: the cells of ``series`` that :func:`is_blank` calls empty."""
    return series.map(is_blank).to_numpy(dtype=bool)


def is_blank(value: object) -> bool:
    """An empty cell: None, NaN or blank text (CSV reads an empty cell and ``nan`` alike)."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or bool(pd.api.types.is_scalar(value) and pd.isna(value))


def text_column(series: pd.Series) -> tuple[bool, np.ndarray, int, int]:
    """How a text (object or string) column reads: ``(numeric, bad, n_numbers, n_present)``.

    ``n_present`` counts the non-blank cells (:func:`is_blank`), ``n_numbers`` those that
    read as numbers (:func:`parse_number`, ``inf`` included). The column is **numeric when
    at least half of its present values are numbers**; ``bad`` then holds the 0-based
    positions of its present values that are not finite numbers (a typo such as ``"le-3"``
    for ``1e-3``, or ``inf``), else it is empty: a column of names (``"adam"``, ``"v2"``)
    is categorical. Run tables (:func:`numeric_typos`) and grid tables
    (:mod:`scalebo.search.grid_table`) both read text columns by this rule. Each distinct
    value is parsed once (fast on long columns of few values).
    """
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    present_u, numbers_u, is_number_u = _parse_uniques(pd.Series(np.asarray(uniques,
                                                                            dtype=object)))
    seen = codes >= 0
    present = np.zeros(codes.size, dtype=bool)
    present[seen] = present_u[codes[seen]]
    number = np.zeros(codes.size, dtype=bool)
    number[seen] = is_number_u[codes[seen]] & present_u[codes[seen]]
    finite = np.zeros(codes.size, dtype=bool)
    finite[seen] = np.isfinite(numbers_u[codes[seen]]) & is_number_u[codes[seen]]
    n_present, n_numbers = int(present.sum()), int(number.sum())
    numeric = n_numbers > 0 and 2 * n_numbers >= n_present
    bad = np.flatnonzero(present & ~finite) if numeric else np.empty(0, dtype=np.int64)
    return numeric, bad, n_numbers, n_present


def _parse_uniques(u: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(present, value, is_number)`` of distinct non-NA cells, vectorized as
    :func:`is_blank` and :func:`parse_number` (bools are not numbers; ``"nan"`` is one)."""
    text = u.map(lambda v: isinstance(v, str)).astype(bool)
    stripped = u.where(~text, u[text].str.strip() if text.any() else u)
    present = ~(text & (stripped == "")).to_numpy(dtype=bool)
    boolean = u.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(dtype=bool)
    # only text that starts like a number is parsed (a column of ids is then quick)
    first = stripped.where(text, "").str[:1].str.lower()
    maybe = (~text | first.isin(list("0123456789+-.ni"))).to_numpy(dtype=bool) & ~boolean
    values = np.full(len(u), np.nan)
    if maybe.any():
        values[maybe] = to_numbers(stripped[maybe]).to_numpy(dtype=np.float64)
    nan_text = (text & stripped.where(text, "").str.lower().isin(["nan", "+nan", "-nan"])
                ).to_numpy(dtype=bool)
    is_number = (~np.isnan(values) | nan_text) & ~boolean & present
    return present, values, is_number


def numeric_typos(series: pd.Series) -> np.ndarray:
    """0-based positions of the values that are not finite numbers in a text column that
    :func:`text_column` reads as numeric (e.g. ``"3e-4x"`` among learning rates); empty for
    numeric, boolean and categorical columns."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return np.empty(0, dtype=np.int64)
    return text_column(series)[1]


def is_categorical(series: pd.Series) -> bool:
    """A column of names (``"adam"``, ``"lion"``): not numeric or boolean by dtype, and
    mostly text by :func:`text_column`'s rule (a column of numbers with a typo is numeric)."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return False
    return not text_column(series)[0]


def is_candidate_column(frame: pd.DataFrame, column: object,
                        excluded: Iterable[str] = (), *, allow_bool: bool = False) -> bool:
    """Whether ``column`` may be a hyperparameter at all: not bookkeeping
    (:data:`BOOKKEEPING_COLUMNS`, a name in ``excluded``), no ``loss`` in its name, not
    ``*_unmapped``, not boolean (unless ``allow_bool``: a boolean column named as a
    hyperparameter is a categorical one). Shared by :func:`default_hyperparameters`, the
    run tables' typo check and the grid tables' reader."""
    name = str(column)
    return not (name in BOOKKEEPING_COLUMNS or name in set(excluded)
                or "loss" in name.lower() or name.endswith(UNMAPPED_SUFFIX)
                or (not allow_bool and pd.api.types.is_bool_dtype(frame[column].dtype)))


def default_hyperparameters(frame: pd.DataFrame, excluded: Iterable[str] = (), *,
                            numeric_only: bool = True, keep_derived: bool = False,
                            keys: Sequence[str] = ("N", "D")) -> tuple[str, ...]:
    """The default hyperparameter columns of a run table (the one rule of the package).

    A column is chosen unless it is bookkeeping (:data:`BOOKKEEPING_COLUMNS`, any name
    containing ``loss``, ``*_unmapped``, a name in ``excluded``), boolean, has a missing
    value, or is fixed inside every (N, D) cell — a column fixed per cell (width, depth,
    ``D/N``) is a property of the cell, not a search axis — or, unless ``keep_derived``,
    if it is derived or measured: taken in order of fewest distinct values (settings take
    few, measurements many), a column that splits no group of rows equal in (N, D) and the
    columns kept before it, and has more distinct values than every one of them, follows from
    them (iterations = tokens / batch) or was measured per run (a wall time), and is left
    out; a tie keeps both (two settings drawn at random, unique per run). A measured column
    still splits repeated runs of one configuration (seeds), so name the settings when a
    table has repeats. With ``numeric_only`` (run tables) a column must also be numeric and
    finite; without it (grids, which take categorical axes) a text column qualifies too.
    Grids keep derived columns (``keep_derived``): a warmup set from D and the batch is
    still a value to launch a run with. ``frame`` needs ``N`` and ``D`` (or the columns
    ``keys`` names, which make a cell instead, e.g. a formula's inputs); columns are returned
    in frame order.
    """
    excluded = set(excluded) | set(keys)
    cells = frame.groupby(list(keys), sort=False)
    varying = []
    for column in frame.columns:
        series = frame[column]
        numeric = pd.api.types.is_numeric_dtype(series.dtype)
        if (
            not is_candidate_column(frame, column, excluded)
            or series.isna().any()
            or (numeric_only and not numeric)
            or (numeric and not np.isfinite(series.to_numpy(dtype=np.float64)).all())
        ):
            continue
        if (cells[column].nunique() > 1).any():
            varying.append(column)
    if keep_derived:
        return tuple(str(c) for c in varying)
    counts = {c: int(frame[c].nunique()) for c in varying}
    kept: list[Any] = []
    groups = frame.groupby(list(keys), sort=False).ngroup().to_numpy()
    for column in sorted(varying, key=lambda c: (counts[c], varying.index(c))):
        split = pd.DataFrame({"g": groups, "v": frame[column].to_numpy()}).groupby(
            ["g", "v"], sort=False).ngroup().to_numpy()
        if split.max(initial=-1) > groups.max(initial=-1) or not kept or any(
                counts[column] <= counts[k] for k in kept):
            kept.append(column)
            groups = split
    return tuple(str(c) for c in varying if c in kept)


def blank_axes(frame: pd.DataFrame, excluded: Iterable[str] = (), *,
               keys: Iterable[str] = ("N", "D")) -> dict[str, np.ndarray]:
    """Numeric columns that :func:`default_hyperparameters` leaves out only because a cell
    is blank: a candidate column (:func:`is_candidate_column`, not in ``keys``) whose
    present values are numbers (by dtype, or by :func:`text_column`'s rule) and differ
    inside at least one group of rows equal in ``keys`` (default: an (N, D) cell; pass the
    chosen hyperparameters too, so that only a column that would still split runs counts),
    mapped to the 0-based positions (in ``frame``) of its blank cells. Such a column looks
    like a search axis (a learning rate with one value missing); leaving it out silently
    would merge the runs it tells apart, so callers say so."""
    keys = list(keys)
    out: dict[str, np.ndarray] = {}
    for column in frame.columns:
        series = frame[column]
        if (str(column) in REQUIRED_COLUMNS or column in keys
                or not is_candidate_column(frame, column, excluded)):
            continue
        blank = blank_cells(series)
        if not blank.any() or blank.all():
            continue
        if pd.api.types.is_numeric_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64)
        else:
            if not text_column(series)[0]:
                continue
            values = to_numbers(series.where(~blank)).to_numpy(dtype=np.float64)
        present = frame.loc[~blank, keys].assign(_v=values[~blank])
        if (present.groupby(keys, sort=False, dropna=False)["_v"].nunique() > 1).any():
            out[str(column)] = np.flatnonzero(blank)
    return out
