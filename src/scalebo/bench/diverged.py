"""Diverged runs in a replayed grid: which recorded losses count as failed runs, and a note
when a grid seems to hold some that nobody marked.

A recorded grid often keeps its diverged runs with a loss far above the others (StepLaw: 181
runs at 4–11 nats among good runs at 2–3; a sentinel such as 10). Told to the search as
losses, they bend its surrogate; a campaign would record them as failed runs (compute spent,
no loss: ``scalebo status --diverged-above``). With ``diverged_above`` a replay does the same
(:attr:`scalebo.bench.problems.ReplayProblem.diverged`), and the reference fits leave them out.
Measured (docs/reproduction.md, 0.4.12): on a trial's grid whose diverged runs were recorded
at 10 nats, 23.6 / 11.0 / 11.4 / 12.1 → 10.4 / 5.1 / 1.6 / 0.0 % mean error at 1 / 5 / 10 /
25 % of C_total (20 seeds; from a few seeds each); on StepLaw (diverged above 4 nats) no
significant change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from scalebo.search.runs_columns import DIVERGED_RATIO, diverged_rule, suspect_diverged

if TYPE_CHECKING:
    from scalebo.bench.problems import ReplayProblem
    from scalebo.data.runs import RunTable
    from scalebo.search.grid import Grid

__all__ = ["DIVERGED_RATIO", "crashed_rows", "diverged_note", "diverged_rows", "empty_held_out",
           "keep_usable_runs", "with_failed_configurations"]


def diverged_rows(loss: np.ndarray, diverged_above: float, name: str
                  ) -> tuple[np.ndarray, str]:
    """``(mask, note)``: which configurations' recorded ``loss`` (nats, ``(n_cfg,)``) is above
    ``diverged_above`` (read-only bool ``(n_cfg,)``), and a note saying how many.

    Raises:
        ValueError: ``diverged_above`` is not a finite number.
    """
    if not np.isfinite(diverged_above):
        raise ValueError(f"diverged_above must be a finite loss (nats), got "
                         f"{diverged_above!r}")
    loss = np.asarray(loss, dtype=np.float64)
    mask = ~(loss < diverged_above)  # a sentinel loss written at the threshold counts
    mask.flags.writeable = False
    crashed = int((~np.isfinite(loss)).sum())
    return mask, (f"{name}: {int(mask.sum())} of {mask.size} configurations have a recorded "
                  f"loss at or above diverged_above={diverged_above:g} nats"
                  + (f" or none ({crashed} crashed)" if crashed else "")
                  + ": a replay that buys one spends its compute and learns no loss (a "
                  "failed run)")


def crashed_rows(loss: np.ndarray, name: str) -> tuple[np.ndarray, str]:
    """``(mask, note)``: which configurations have no finite recorded ``loss`` (every run
    crashed or failed; read-only bool ``(n_cfg,)``), kept in the grid as failed runs when no
    ``diverged_above`` is given (a trial's replay dropped them, and with them their share of
    C_total: a search that can never buy a crashed run is an optimistic one)."""
    mask = ~np.isfinite(np.asarray(loss, dtype=np.float64))
    mask.flags.writeable = False
    return mask, (f"{name}: {int(mask.sum())} of {mask.size} configurations have no finite "
                  "loss (every run crashed or failed): left out of the law fits like any run "
                  "without a loss, they stay in the grid and its C_total, and a replay that "
                  "buys one spends its compute and learns no loss (a failed run)")


def keep_usable_runs(frame: pd.DataFrame, key: Sequence[str], diverged_above: float
                     ) -> pd.DataFrame:
    """``frame`` (one row per run, ``loss`` in nats) without the diverged runs (loss at or
    above ``diverged_above``, or not finite) of configurations (rows equal in ``key``) that also
    have a usable run: repeats are then averaged over the usable runs, and a configuration
    whose every run diverged keeps its rows (and is marked diverged)."""
    loss = frame["loss"].to_numpy(dtype=np.float64)
    bad = pd.Series(~(loss < diverged_above), index=frame.index)
    every = bad.groupby([frame[k] for k in key], sort=False).transform("all")
    return frame[~bad | every]


def with_failed_configurations(table: RunTable) -> pd.DataFrame:
    """``table``'s runs plus one row for each configuration whose every run was excluded
    for a non-finite or diverged loss (``load_runs(..., diverged_above=)``) or a ``status``
    of ``failed``: such a run was trained and failed, so a replay that buys the
    configuration spends its cost and learns no loss. A diverged run keeps its loss; a
    crashed or failed one's becomes ``inf``."""
    from scalebo.data.columns import ExclusionReason

    frame = table.frame
    gone = table.excluded
    failed = (gone["status"].astype(str).str.strip().str.lower() == "failed"
              if "status" in gone.columns else False)
    gone = gone[gone["reason"].isin([ExclusionReason.NON_FINITE, ExclusionReason.DIVERGED])
                | ((gone["reason"] == ExclusionReason.NOT_COMPLETED) & failed)]
    if gone.empty:
        return frame
    key = ["N", "D", *table.hyperparameters]
    runs = gone.groupby(key, sort=False)["loss"].transform("size").to_numpy()
    first = ~gone.duplicated(key).to_numpy()
    gone, runs = gone[first], runs[first]
    known = pd.MultiIndex.from_frame(frame[key])
    fresh = ~pd.MultiIndex.from_frame(gone[key]).isin(known)
    new = gone[fresh][[c for c in frame.columns if c in gone.columns]].copy()
    if "n_repeats" in frame.columns:
        new["n_repeats"] = runs[fresh]
    kept_loss = (gone[fresh]["reason"] == ExclusionReason.DIVERGED).to_numpy()
    new["loss"] = np.where(kept_loss, new["loss"].astype(np.float64), np.inf)
    return pd.concat([frame, new])  # each row keeps its 0-based file row as its index


def empty_held_out(grid: Grid, usable: np.ndarray, name: str) -> list[str]:
    """A note for each held-out cell of ``grid`` without a usable configuration (``usable``:
    ``(n_cfg,)`` bool; every run of the cell diverged or crashed): the held-out cells are
    the costliest whatever their runs, so the held-out MSE then scores fewer cells."""
    cells = np.unique(grid.cell_ids[grid.held_out])
    empty = [c for c in cells if not usable[grid.held_out & (grid.cell_ids == c)].any()]
    first = {c: int(np.flatnonzero(grid.cell_ids == c)[0]) for c in empty}
    return [f"{name}: held-out cell (N={grid.configs['N'].iloc[i]:.4g}, "
            f"D={grid.configs['D'].iloc[i]:.4g}) has no usable run (every run diverged or "
            f"crashed): the held-out MSE scores the {cells.size - len(empty)} other(s)"
            for i in first.values()]


def diverged_note(problem: ReplayProblem) -> str | None:
    """A note when some recorded losses of ``problem`` look like diverged runs — above
    :data:`~scalebo.search.runs_columns.DIVERGED_RATIO` × their cell's best loss
    (:func:`~scalebo.search.runs_columns.suspect_diverged`, as a campaign's runs are judged)
    — among those not marked failed (``problem.diverged``: without ``diverged_above`` only
    the configurations whose every run crashed); None otherwise."""
    high, best = suspect_diverged(problem.loss, problem.grid.cell_ids, problem.grid.cost)
    if problem.diverged is not None:  # crashed configurations are failed runs already
        high &= ~problem.diverged
    if not high.any():
        return None
    n = int(high.sum())
    return (f"{problem.name}: {n} configuration{'s' * (n != 1)} {'have' if n != 1 else 'has'} "
            f"a recorded loss {diverged_rule()} (up to "
            f"{problem.loss[high].max():.4g} nats; the median cell best is {best:.4g}): if "
            "they are diverged runs, "
            "--diverged-above LOSS (diverged_above= in a sweep or in Python) makes a replay "
            "treat them as failed "
            "runs (compute spent, no loss) instead of telling the search their losses")
