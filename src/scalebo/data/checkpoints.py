"""Checkpoint tables: many rows per training run, one per evaluated checkpoint.

A *checkpoint* is an intermediate state of a training run: the model (``N`` parameters) after
``D`` tokens, with its loss (nats) at that point. Every checkpoint is a point of its own for
frontiers and law fits, with its own compute ``C`` = FLOPs spent up to that checkpoint
(``6·N·D`` by default). This is how the Gemstones study (McLeish et al. 2025) fits laws: 22
models × checkpoints every ~10B tokens.

A checkpoint table is an ordinary :class:`~scalebo.data.runs.RunTable` whose frame has two more
columns:

========== ====== ===========================================================================
column     dtype  meaning
========== ====== ===========================================================================
run        str    the training run the checkpoint belongs to (many rows share it)
phase      str    a :class:`Phase` value: ``stable``, ``cooldown-start`` or ``cooldown-end``
========== ====== ===========================================================================

``run_id`` stays unique per row (``"<run>@<D>"`` unless the source gives one). Both extra
columns are config columns, so two checkpoints of one model at the same D but different
phases do not count as repeats.

Selections (:func:`every_kth`, :func:`min_tokens`, :func:`phase`, :func:`final_checkpoints`)
accept a RunTable or a DataFrame holding those columns and return the same type, rows in the
input's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TypeVar

import numpy as np
import pandas as pd

from scalebo.data.columns import to_numbers
from scalebo.data.runs import RunTable, load_runs
from scalebo.errors import RunTableError, data_rows, file_rows

__all__ = [
    "Phase",
    "checkpoint_table",
    "every_kth",
    "final_checkpoints",
    "min_tokens",
    "phase",
    "run_names",
    "run_label_problem",
    "with_runs",
]

Table = TypeVar("Table", RunTable, pd.DataFrame)


class Phase(StrEnum):
    """Where in the learning-rate schedule a checkpoint's loss was measured."""

    STABLE = "stable"
    """At a constant (or still-decaying main) learning rate: a "hot" checkpoint, no cooldown."""
    COOLDOWN_START = "cooldown-start"
    """Just before a linear cooldown branch starts (Gemstones ``cool_begin``)."""
    COOLDOWN_END = "cooldown-end"
    """At the end of a cooldown branch, the learning rate annealed to ~0 (``cool_end``)."""


def checkpoint_table(
    source: str | pd.DataFrame,
    *,
    run: str = "run",
    mapping: Mapping[str, str] | None = None,
    phase: Phase | str | None = Phase.STABLE,
    source_name: str | None = None,
) -> RunTable:
    """Load a table of checkpoints (many rows per run) as a validated RunTable.

    Args:
        source: File path or DataFrame with one row per checkpoint.
        run: Column naming each checkpoint's training run (renamed to ``run``).
        mapping: Canonical name → source column (as in :func:`scalebo.data.runs.load_runs`),
            e.g. ``{"N": "params_active_precise", "D": "tokens", "loss": "final_loss"}``.
        phase: Phase of every row, or ``None`` if the source has a ``phase`` column already.
        source_name: Name used in messages.

    Returns:
        A RunTable with ``run`` and ``phase`` as config columns and no hyperparameters.

    Raises:
        RunTableError: missing run column, unknown phase, or the validation errors of
            :func:`~scalebo.data.runs.load_runs` (e.g. one run listing the same D twice).
    """
    frame = source.copy() if isinstance(source, pd.DataFrame) else _read(source)
    name = source_name or (str(source) if not isinstance(source, pd.DataFrame) else "<DataFrame>")
    if run not in frame.columns:
        raise RunTableError(
            f"{name}: run column {run!r} not found; pass run=<column naming the training run> "
            f"(available: {list(frame.columns)})."
        )
    if run != "run":
        if "run" in frame.columns:
            frame = frame.rename(columns={"run": "run_unmapped"})
        frame = frame.rename(columns={run: "run"})
    frame["run"] = frame["run"].astype("str")
    if phase is not None:
        frame["phase"] = Phase(phase).value
    elif "phase" not in frame.columns:
        raise RunTableError(f"{name}: phase=None but the table has no 'phase' column.")
    bad = sorted(set(frame["phase"].astype(str)) - {p.value for p in Phase})
    if bad:
        raise RunTableError(
            f"{name}: unknown phase value(s) {bad}; expected {[p.value for p in Phase]}."
        )
    mapping = dict(mapping or {})
    if "run_id" not in mapping and "run_id" not in frame.columns:
        d_col = mapping.get("D", "D")
        tokens = to_numbers(frame[d_col]) if d_col in frame else None
        frame["run_id"] = [
            f"{r}@{p}@{t:.6g}" for r, p, t in zip(frame["run"], frame["phase"], tokens,
                                                    strict=True)
        ] if tokens is not None else frame["run"]
    return load_runs(frame, mapping=mapping, hyperparameters=(),
                     config_columns=("run", "phase"), source_name=name)


def with_runs(table: RunTable, column: str) -> RunTable:
    """``table`` with a ``run`` column copied (as text) from ``column``: rows sharing a value
    are checkpoints of one training run (every-K-th-checkpoint variants, bootstraps that
    resample whole runs).

    Raises:
        RunTableError: ``column`` is not in the table (the message names the closest one),
            is blank on a row, or labels one run over two model sizes (naming the rows).
    """
    import dataclasses

    from scalebo.errors import closest

    frame = table.frame
    if column not in frame.columns:
        near = closest(column, [str(c) for c in frame.columns])
        raise RunTableError(f"{table.source}: run column {column!r} not found"
                            + (f" (did you mean {near!r}?)" if near else "")
                            + f"; columns: {list(map(str, frame.columns))}.")
    if (blank := np.flatnonzero(frame[column].isna().to_numpy())).size:
        raise RunTableError(f"{table.source}: run column {column!r} is blank on "
                            f"{blank.size} row(s) (first: data row "
                            f"{int(frame.index[blank[0]]) + 1}); every checkpoint needs its "
                            "run's name")
    labelled = frame.assign(run=frame[column].astype("str"))
    if (problem := run_label_problem(labelled, tokens=False)) is not None:  # D: phases
        raise RunTableError(f"{table.source}: run column {column!r}: {problem}")
    if column == "run":
        return table
    return dataclasses.replace(table, frame=labelled)


def _data_rows(points: pd.DataFrame, mask: np.ndarray) -> str:
    """``data rows 3, 7, ...`` of the rows under ``mask`` (:func:`~scalebo.errors.file_rows`)."""
    return data_rows(file_rows(points.index, mask))


def run_label_problem(points: pd.DataFrame, tokens: bool = True) -> str | None:
    """What is wrong with ``points``' ``run`` column as a label of checkpoints (blank on some
    rows, a run holding two model sizes ``N``, or, with ``tokens``, a token count ``D``
    twice), naming the data rows; None when nothing is (or there is no such column)."""
    if "run" not in points.columns:
        return None
    if (blank := points["run"].isna().to_numpy()).any():
        return f"the run column is blank on {_data_rows(points, blank)}"
    label = points["run"].astype(str)
    runs = points.groupby(label, sort=False)
    sizes = runs["N"].nunique()
    if (sizes > 1).any():
        name = str(sizes.index[np.argmax(sizes.to_numpy() > 1)])
        mine = (label == name).to_numpy()
        N = points["N"].to_numpy()
        most = pd.Series(N[mine]).mode().iloc[0]  # the run's own size; the others stray
        return (f"run {name!r} holds {int(sizes[name])} model sizes N: {most:.4g} on "
                f"{int((N[mine] == most).sum())} rows, others on "
                f"{_data_rows(points, mine & (N != most))} (a run's checkpoints share one N: "
                "check the run column)")
    if not tokens:
        return None
    distinct = runs["D"].nunique()
    if (distinct < runs.size()).any():
        name = str(distinct.index[np.argmax((distinct < runs.size()).to_numpy())])
        return (f"run {name!r} ({_data_rows(points, (label == name).to_numpy())}) repeats "
                "a token count D (a run's checkpoints are at distinct D: check the run "
                "column)")
    return None


def _read(path: str) -> pd.DataFrame:
    from scalebo.data.runs import read_table

    return read_table(path)


def _frame(table: RunTable | pd.DataFrame) -> pd.DataFrame:
    frame = table.frame if isinstance(table, RunTable) else table
    missing = [c for c in ("run", "D") if c not in frame.columns]
    if missing:
        raise RunTableError(
            f"a checkpoint selection needs columns {missing} (one row per checkpoint, 'run' "
            f"naming its training run); available: {list(frame.columns)}."
        )
    return frame


def _subset(table: Table, keep: np.ndarray) -> Table:
    if isinstance(table, RunTable):
        return table.with_frame(table.frame.loc[keep])
    return table.loc[keep]


def every_kth(table: Table, k: int) -> Table:
    """Per run, keep every ``k``-th checkpoint in token order, and always the last one.

    Checkpoints of each run are ranked by ``D`` (1 = fewest tokens); kept ranks are
    ``k, 2k, 3k, …`` plus the run's last checkpoint. So checkpoints every 2B tokens
    (``2, 4, …, 100B``) with ``k = 5`` become ``10, 20, …, 100B``: the spacing ×k, anchored
    on the same tokens as a table saved every ``k`` steps from the start. ``k = 1`` keeps all.

    Args:
        table: Checkpoint table (RunTable or DataFrame with ``run`` and ``D``).
        k: Spacing, ≥ 1.

    Returns:
        The same type, the kept rows in the input's order.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"every_kth: k must be an integer ≥ 1, got {k!r}.")
    frame = _frame(table)
    rank = frame.groupby("run", sort=False)["D"].rank(method="first").to_numpy()
    size = frame.groupby("run", sort=False)["D"].transform("size").to_numpy()
    keep = (rank % int(k) == 0) | (rank == size)
    return _subset(table, keep)


def min_tokens(table: Table, D_min: float) -> Table:
    """Keep checkpoints with at least ``D_min`` tokens (``D ≥ D_min``)."""
    frame = _frame(table)
    return _subset(table, frame["D"].to_numpy(dtype=np.float64) >= float(D_min))


def phase(table: Table, *phases: Phase | str) -> Table:
    """Keep checkpoints whose ``phase`` is one of ``phases`` (values of :class:`Phase`)."""
    frame = _frame(table)
    if "phase" not in frame.columns:
        raise RunTableError("phase(): the table has no 'phase' column (see checkpoint_table).")
    wanted = {Phase(p).value for p in phases}
    return _subset(table, frame["phase"].astype(str).isin(wanted).to_numpy())


def final_checkpoints(table: Table) -> Table:
    """Keep the last checkpoint (largest ``D``) of every run: one row per run."""
    frame = _frame(table)
    last = frame.groupby("run", sort=False)["D"].transform("max").to_numpy()
    keep = frame["D"].to_numpy(dtype=np.float64) == last
    # ties at the same D (two phases) keep the first in input order
    keep &= ~frame.loc[:, ["run", "D"]].duplicated().to_numpy()
    return _subset(table, keep)


def run_names(table: RunTable | pd.DataFrame) -> Sequence[str]:
    """Distinct run names in input order."""
    return list(pd.unique(_frame(table)["run"]))
