"""The columns of a campaign's runs table, read and checked: ``status``, ``loss``, ``cost``
and the grid's numeric columns (:func:`~scalebo.search.campaign_runs.read_campaign_runs`).

Every error names the source, the 1-based data row and the column, and says what was
expected; a column whose absence would silently count runs as failed is an error too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum

import numpy as np
import pandas as pd

from scalebo.data.columns import (
    RUN_STATES,
    STATUS_SYNONYMS,
    default_hyperparameters,
    is_blank,
    status_hint,
    to_numbers,
)
from scalebo.errors import RunTableError, closest, data_rows

__all__ = ["CHEAPER_RATIO", "COST_RATIO", "DIVERGED_RATIO", "RunStatus", "check_run_columns",
           "cost_notes", "diverged_rule", "grid_numbers", "map_columns", "numbers",
           "positive_numbers", "run_statuses", "suspect_diverged", "suspect_low", "too_low_note",
           "unused_settings"]

#: A loss above this multiple of its (N, D) cell's best loss looks like a diverged run told
#: as a loss (trained LLM losses sit at 2–4 nats, diverged ones near ln(vocab) or at
#: a sentinel such as 10): :func:`suspect_diverged`.
DIVERGED_RATIO = 2.0
#: ... or above this many times the lowest loss of another run that cost no more, in any
#: cell (a lone diverged run has no cell to compare with; off-optimal runs of a small model
#: can be twice a cheaper large model's loss, as :data:`DIVERGED_RATIO` would flag).
CHEAPER_RATIO = 3.0


class RunStatus(StrEnum):
    """State of a campaign run."""

    COMPLETED = "completed"
    FAILED = "failed"
    RUNNING = "running"


def map_columns(frame: pd.DataFrame, mapping: Mapping[str, str] | None,
                name: str) -> pd.DataFrame:
    """``frame`` (a campaign's grid table or runs file) renamed through ``mapping`` (name in
    the grid → the file's column). One ``--map`` serves every file of a campaign, and a file
    may already use the grid's names: a mapped column the file lacks is skipped, with a
    warning when the file has a column of a close name (``N_actve`` for ``N_active``: a
    typo would otherwise read the file's ``N``). Canonical names (``N``, ``D``, ``C``,
    ``loss``, ``run_id``) are mapped as the run tables map them: a column already bearing
    the name is kept as ``<name>_unmapped`` (``loss`` beside a mapped ``val_loss``)."""
    import warnings

    from scalebo.data.cleaning import apply_mapping
    from scalebo.data.columns import CANONICAL_COLUMNS

    have = [str(c) for c in frame.columns]
    present = {k: v for k, v in (mapping or {}).items() if v in have}
    for key, column in (mapping or {}).items():
        if column not in have and (near := closest(column, have)) is not None:
            warnings.warn(f"{name}: the mapping's column {column!r} (for {key!r}) is not in "
                          f"the file (did you mean {near!r}?); "
                          + (f"its column {key!r} is used" if key in have else
                             f"{key!r} is missing"), UserWarning, stacklevel=3)
    frame = frame.rename(columns={v: k for k, v in present.items()
                                  if k not in CANONICAL_COLUMNS})
    return apply_mapping(frame, {k: v for k, v in present.items() if k in CANONICAL_COLUMNS},
                         name)


def run_statuses(frame: pd.DataFrame, name: str) -> list[RunStatus | None]:
    """Each row's ``status`` (None where blank or without the column); RunTableError naming
    the data row of a value that is not a :class:`RunStatus` (case-insensitive); W&B's run
    states (:data:`~scalebo.data.columns.RUN_STATES`) read as theirs: ``finished`` completed,
    ``crashed`` and ``killed`` failed."""
    if "status" not in frame.columns:
        return [None] * len(frame)
    out: list[RunStatus | None] = []
    allowed = [s.value for s in RunStatus]
    for pos, value in enumerate(frame["status"].tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append(None)
            continue
        text = str(value).strip().lower()
        text = STATUS_SYNONYMS[text] if text in RUN_STATES else text  # W&B's: finished, ...
        if text not in allowed:
            raise RunTableError(f"{name}: data row {pos + 1}, column 'status': {value!r} is not "
                                f"one of {allowed}{status_hint(text)}.")
        out.append(RunStatus(text))
    return out


def check_run_columns(frame: pd.DataFrame, status: list[RunStatus | None], name: str,
                      mapping: Mapping[str, str] | None, original: list[str]) -> None:
    """RunTableError when a missing ``loss`` or ``status`` column would silently make runs
    failed: no ``loss`` column (or a ``mapping`` to a loss column the file lacks) while some
    row is neither running nor failed (every such run would count as failed, its compute
    spent), or no ``status`` column while a row has no loss and another column holds only
    statuses (``stauts``, ``Status``, ``state``: runs in flight would count as failed).
    ``original``: the file's column names before the mapping renamed them."""
    mapped = (mapping or {}).get("loss")
    unmapped = mapped is not None and mapped != "loss" and mapped not in original
    if ("loss" not in frame.columns or unmapped) and any(
            st in (None, RunStatus.COMPLETED) for st in status):
        pos = next(i for i, st in enumerate(status) if st in (None, RunStatus.COMPLETED))
        near = closest("loss", original)
        hint = (f"the mapping's loss column {mapped!r} is not in the file" if unmapped
                else f"did you mean {near!r}? Rename it, or map it with --map loss=COLUMN "
                "(mapping= in Python)"
                if near else "map yours with --map loss=COLUMN (mapping= in Python)")
        raise RunTableError(
            f"{name}: no 'loss' column: {hint}. Without it, data row {pos + 1} and every other "
            f"finished run would count as failed. The file's columns: {original}.")
    if "status" not in frame.columns and "loss" in frame.columns:
        blank = np.flatnonzero(frame["loss"].map(is_blank).to_numpy())
        said = next((c for c in frame.columns if c != "loss" and _holds_statuses(frame[c])),
                    None) if blank.size else None  # only rows without a loss are at stake
        if said is not None:
            raise RunTableError(
                f"{name}: no 'status' column, but {str(said)!r} holds only run statuses "
                f"({', '.join(s.value for s in RunStatus)}); without a 'status' column data "
                f"row {blank[0] + 1}, which has no loss, would count as failed, even if it "
                "is running. Rename the column to 'status'.")


def unused_settings(frame: pd.DataFrame, inputs: Sequence[str], written: Sequence[str]
                    ) -> list[str]:
    """A note naming the runs file's columns that vary inside an (N, D) cell like settings
    (the run tables' rule, :func:`~scalebo.data.columns.default_hyperparameters`) but are
    not among the grid's ``inputs`` (N, D, axes): the campaign cannot tell runs apart by
    them (a batch size the grid has no axis for); ``frame``: one completed run per
    configuration (a failed attempt beside its retry would make a wall time look like a
    setting); ``written``: columns a campaign writes itself. Empty when there is none."""
    if not {"N", "D"} <= set(frame.columns):
        return []
    extra = [c for c in default_hyperparameters(frame, written) if c not in inputs]
    if not extra:
        return []
    return [f"column(s) {', '.join(map(repr, extra))} vary inside (N, D) cells like settings, "
            "but the grid has no axis for them: runs that differ only there are one "
            "configuration to the campaign, and the search does not choose them (add an "
            "axis to the grid to search them)"]


def _holds_statuses(series: pd.Series) -> bool:
    """Whether ``series`` has a value and every value is a run status or blank."""
    said = series.map(lambda v: None if is_blank(v) else str(v).strip().lower()).dropna()
    return bool(said.size) and bool(said.isin([s.value for s in RunStatus]).all())


def grid_numbers(series: pd.Series, column: str, name: str) -> None:
    """RunTableError naming the first value of a numeric grid column that is not a finite
    number (``"le-3"`` for ``1e-3``, an empty cell)."""
    if pd.api.types.is_numeric_dtype(series.dtype) and not series.isna().any():
        return
    bad = np.flatnonzero(~np.isfinite(to_numbers(series).to_numpy(dtype=np.float64)))
    if bad.size:
        value = series.iloc[bad[0]]
        got = "an empty value" if is_blank(value) else repr(value)
        raise RunTableError(f"{name}: data row {bad[0] + 1}, column {column!r}: expected a "
                            f"number (the grid's {column} is numeric), got {got}.")


def numbers(frame: pd.DataFrame, column: str, name: str) -> np.ndarray:
    """``column`` as floats (NaN where blank, ``nan`` or missing as a column; ``inf`` kept);
    RunTableError naming the data row of a value that is not a number."""
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    values = to_numbers(frame[column])
    bad = values.isna() & frame[column].notna() & (frame[column].astype(str).str.strip() != "")
    text = frame[column].astype(str).str.strip().str.lower()
    bad &= ~text.isin(["nan", "inf", "-inf", "+inf"])
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise RunTableError(f"{name}: data row {pos + 1}, column {column!r}: expected a "
                            f"number, got {frame[column].iloc[pos]!r}.")  # as run tables say
    return values.to_numpy(dtype=np.float64)


def positive_numbers(frame: pd.DataFrame, column: str, name: str, expected: str) -> np.ndarray:
    """:func:`numbers`, and RunTableError naming the first data row whose finite value is
    not > 0 (``expected`` says why it must be, e.g. "a loss > 0 (nats; laws are fitted in
    log space)")."""
    values = numbers(frame, column, name)
    bad = np.flatnonzero(np.isfinite(values) & (values <= 0))
    if bad.size:
        pos = int(bad[0])
        raise RunTableError(f"{name}: data row {pos + 1}, column {column!r}: expected "
                            f"{expected}, got {values[pos]:g}.")
    return values


def too_low_note(loss: np.ndarray, cells: np.ndarray, diverged_above: float,
                 marked: str = "runs as failed") -> str:
    """A note when ``diverged_above`` marks ordinary losses: those at or above it whose loss
    is within :data:`DIVERGED_RATIO` × their cell's best among the losses it keeps (or, in a
    cell it empties, the kept cells' median best), at least 3 of them and a quarter of the
    finite losses (nats, ``(n,)``; ``cells``: the (N, D) cell id of each); "" otherwise.
    ``marked`` says what they become (``"configurations as diverged"`` in a replay)."""
    told = np.isfinite(loss)
    cut = told & (loss >= diverged_above)
    kept = told & ~cut
    if not cut.any() or not kept.any():
        return ""
    best = pd.Series(loss[kept]).groupby(np.asarray(cells)[kept]).min()
    ref = best.reindex(cells).fillna(best.median()).to_numpy()
    ordinary = cut & (loss <= DIVERGED_RATIO * ref)
    if ordinary.sum() < max(3, 0.25 * told.sum()):
        return ""
    return (f"diverged_above={diverged_above:g} (--diverged-above) counts "
            f"{int(ordinary.sum())} {marked} whose "
            f"loss is within {DIVERGED_RATIO:g}x of their cell's best (of the {int(told.sum())}"
            " that reported a loss): too low? (a diverged loss sits far above every good run)")


def diverged_rule() -> str:
    """How :func:`suspect_diverged` judges a loss, as its notes say it."""
    return (f"over {DIVERGED_RATIO:g}x its cell's best, or {CHEAPER_RATIO:g}x a run's that "
            f"cost no more, or {CHEAPER_RATIO:g}x the median cell best when every run that "
            "cost no more is")


def suspect_diverged(loss: np.ndarray, cells: np.ndarray, cost: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
    """``(mask, median)``: which finite losses (nats, ``(n,)``; ``cells``: the (N, D) cell id
    of each, ``(n,)``) look diverged — above :data:`DIVERGED_RATIO` × their cell's lowest
    loss or, with ``cost`` (each run's compute, ``(n,)``), above :data:`CHEAPER_RATIO` × the
    lowest loss of another run that cost no more (a lone run at 10 nats in a cell of its own
    moved a campaign's law by half) — and the median over cells of each cell's lowest loss
    (NaN without a finite loss).
    A small model's badly tuned runs stay within a few tens of percent of its best and are
    not flagged, wherever the larger models' losses lie; with ``cost``, a run whose every run
    that cost no more (itself included) is above :data:`CHEAPER_RATIO` × the median cell best
    is flagged too, having nothing ordinary to be compared with (a review: the cheapest
    cells at 12 nats; applied to every run, that rule flagged an honest undertrained isoFLOP
    point of Porian et al. at 10 nats beside one at 4.39)."""
    loss = np.asarray(loss, dtype=np.float64)
    ok = np.isfinite(loss)
    if not ok.any():
        return np.zeros(loss.size, bool), math.nan
    cells = np.asarray(cells)
    per_cell = pd.Series(loss[ok]).groupby(cells[ok]).min()
    median = float(per_cell.median())
    own = per_cell.reindex(cells).to_numpy()
    high = ok & (loss > DIVERGED_RATIO * own)
    if cost is not None:
        cost = np.asarray(cost, dtype=np.float64)
        cheaper = _best_cheaper(loss, cost)
        high |= ok & (loss > CHEAPER_RATIO * cheaper)
        # with no run that cost no more below 3x the median cell best to compare with (a
        # cheapest cell, or several, that diverged whole), the median is the yardstick
        high |= ok & (np.minimum(loss, cheaper) > CHEAPER_RATIO * median)
    return high, median


def suspect_low(loss: np.ndarray, cells: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Which finite losses (nats, ``(n,)``; ``cells``: each run's (N, D) cell id; ``cost``:
    its compute) lie under the best loss of the other cells that cost at least as much
    (each cell's costliest run; at least 2 such cells) over :data:`DIVERGED_RATIO`,
    ``(n,)`` bool: more compute doing twice as badly breaks every scaling law, while a
    digit lost in typing (0.4 for 4.0) does that. Within one cell nothing is judged (a
    learning-rate sweep whose other rates diverged leaves its good run far under the rest,
    as a typo would), nor against one costlier cell alone (its only run may have diverged:
    two reviews)."""
    loss = np.asarray(loss, dtype=np.float64)
    cells, cost = np.asarray(cells), np.asarray(cost, dtype=np.float64)
    ok = np.isfinite(loss)
    out = np.zeros(loss.size, dtype=bool)
    if ok.sum() < 3:
        return out
    frame = pd.DataFrame({"loss": loss[ok], "cost": cost[ok], "cell": cells[ok]})
    per_cell = frame.groupby("cell").agg(best=("loss", "min"), cost=("cost", "max"))
    ids, best = per_cell.index.to_numpy(), per_cell["best"].to_numpy()
    ccost = per_cell["cost"].to_numpy()
    beside = (ccost[None, :] >= frame["cost"].to_numpy()[:, None]) & (
        ids[None, :] != frame["cell"].to_numpy()[:, None])  # (runs, cells): costlier, other
    rows = np.flatnonzero(beside.sum(axis=1) >= 2)
    yardstick = np.full(len(frame), -np.inf)  # fewer than 2 costlier cells: not judged
    yardstick[rows] = np.where(beside[rows], best[None, :], np.inf).min(axis=1)
    out[ok] = frame["loss"].to_numpy() < yardstick / DIVERGED_RATIO
    return out


def _best_cheaper(loss: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Per run, the lowest finite loss of another run that cost no more (inf if none), in
    O(n log n): the best of the cheaper computes, and of its own compute's other runs."""
    finite = np.where(np.isfinite(loss), loss, np.inf)
    levels, group = np.unique(np.asarray(cost, dtype=np.float64), return_inverse=True)
    first, second = np.full(levels.size, np.inf), np.full(levels.size, np.inf)
    taken = np.zeros(levels.size, dtype=np.int64)
    for i in np.argsort(finite, kind="stable"):  # each level's two lowest losses, in order
        g = group[i]
        if taken[g] == 0:
            first[g] = finite[i]
        elif taken[g] == 1:
            second[g] = finite[i]
        taken[g] += 1
    below = np.concatenate([[np.inf], np.minimum.accumulate(first)[:-1]])  # cheaper levels
    same = np.where(finite == first[group], second[group], first[group])  # others of its own
    return np.minimum(below[group], same)


#: A run's written cost over this many times its configuration's planned cost gets a note
#: (a trial's 1e21 FLOPs for a 3e17 run: "the budget is spent"; far cheaper is normal for
#: a WSD checkpoint that continues a run).
COST_RATIO = 10.0


def cost_notes(frame: pd.DataFrame, cost: np.ndarray, planned: np.ndarray, unit: str
               ) -> list[str]:
    """Notes on the runs file's costs: a ``cost`` over :data:`COST_RATIO` × its
    configuration's planned cost (``planned``, the grid's, in ``unit``),
    and a ``C`` column (FLOPs) that campaigns do not read, when it is off the plan by 1 %
    or more (the grid prices runs; a ``cost`` column overrides it)."""
    notes = []
    ratio = np.asarray(cost, dtype=np.float64) / np.asarray(planned, dtype=np.float64)
    odd = np.flatnonzero(np.isfinite(ratio) & (ratio > COST_RATIO))
    if odd.size:
        k = int(odd[0])
        more = f" (and {odd.size - 1} more: {data_rows(odd[1:])})" if odd.size > 1 else ""
        notes.append(f"data row {k + 1}: its cost {cost[k]:.4g} {unit} is {ratio[k]:.3g}x its "
                     f"configuration's planned {planned[k]:.4g}{more}: a typo? It is charged "
                     "as written")
    if "C" in frame.columns and "cost" not in frame.columns and unit == "FLOPs":
        C = pd.to_numeric(frame["C"], errors="coerce").to_numpy(dtype=np.float64)
        off = np.flatnonzero(np.isfinite(C) & (np.abs(C / planned - 1) > 0.01))
        if off.size:
            k = int(off[0])
            notes.append(f"column 'C' is not read: a campaign charges each run the grid's "
                         f"cost (data row {k + 1}: C = {C[k]:.4g}, the grid's "
                         f"{planned[k]:.4g} FLOPs; {off.size} row(s) differ by over 1 %); "
                         "a 'cost' column charges another amount")
    return notes
