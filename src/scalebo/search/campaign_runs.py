"""A campaign's runs table: completed, failed and running runs placed on the grid.

Columns: the grid's columns (``N`` parameters, ``D`` tokens, each axis; renamed through
``mapping``), ``loss`` (nats; may be empty for running or failed runs), and optionally

* ``status``: ``completed``, ``failed`` or ``running`` (case-insensitive; default: completed
  when the loss is a finite number, failed otherwise);
* ``cost``: what the run actually cost, in the grid's budget unit
  (:attr:`~scalebo.search.grid.Grid.budget_cost`: FLOPs, default ``6·N·D``, or e.g.
  GPU-hours when the grid has a ``cost`` column; default: the grid's cost).

A NaN, infinite or missing loss, or a loss at or above ``diverged_above``, makes a run failed even
when its status says completed (the note says so). A failed run's compute counts as spent
and the search never proposes it again unless asked to retry it; running runs are pending
(their compute is committed). Every row is accounted for: nothing is dropped silently.
A header-only file is a campaign with no runs yet.

A configuration has at most one run that did not fail (completed or running). A failed run
that was retried (``scalebo suggest --retry-failed``) keeps its row beside the retry's: the
failed attempt's compute counts as spent (:attr:`CampaignRuns.superseded_cost`) and the note
names both rows; a configuration whose every attempt failed stays failed.

Runs in flight may also be listed in a table of their own (``--pending PATH`` of ``scalebo
suggest`` and ``scalebo status``): :func:`read_pending_runs` reads it (every row running),
:meth:`CampaignRuns.with_running` adds it to the runs table's, with the same checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.data.columns import is_blank, is_candidate_column
from scalebo.data.files import read_table
from scalebo.errors import RunTableError, SearchError, shown_config, shown_rows
from scalebo.search.cost_model import CostModel
from scalebo.search.grid import Grid
from scalebo.search.runs_columns import (
    RunStatus,
    check_run_columns,
    cost_notes,
    diverged_rule,
    grid_numbers,
    map_columns,
    positive_numbers,
    run_statuses,
    suspect_diverged,
    suspect_low,
    too_low_note,
    unused_settings,
)

__all__ = ["CampaignRuns", "RunStatus", "read_campaign_runs", "read_pending_runs"]


_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class CampaignRuns:
    """The runs of a campaign on its grid.

    Attributes:
        completed: grid indices of completed runs, ``(n_c,)``; ``losses`` their losses (nats).
        failed: grid indices of failed runs (crashed, NaN or diverged loss).
        crashed: those of ``failed`` without a loss (missing or NaN, status failed or not):
            a crash to retry, unlike a diverged run (a loss that is infinite, at or above
            ``diverged_above``, or given beside status failed).
        running: grid indices of runs in flight (pending).
        cost: cost of each grid index that has a run, in the grid's budget unit: the
            ``cost`` column where given, else the grid's.
        notes: remarks on rows (1-based data rows), e.g. why a run counts as failed.
        source: where the runs came from.
        superseded_cost: compute of failed attempts of configurations run again (retried),
            in the grid's budget unit; counted as spent. n_superseded: how many such rows.
        rows: where each grid index's run is written: ``(source, 1-based data row)`` of the
            row that stands for it (what errors about it name).
        set_aside: runs in the grid's held-out cells, which the search and the law do not use:
            grid index → status value (``completed``, ``failed``, ``running``); their cost
            counts as spent, or pending while running.
        wsd_numbered: the rows carry ``wsd_run`` numbers (``suggest --cost-model wsd`` writes
            them): the campaign was planned as WSD checkpoints.
    """

    completed: np.ndarray = field(default_factory=lambda: _EMPTY)
    losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    failed: np.ndarray = field(default_factory=lambda: _EMPTY)
    crashed: np.ndarray = field(default_factory=lambda: _EMPTY)
    running: np.ndarray = field(default_factory=lambda: _EMPTY)
    cost: dict[int, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    source: str = "<none>"
    superseded_cost: float = 0.0
    n_superseded: int = 0
    rows: dict[int, tuple[str, int]] = field(default_factory=dict)
    set_aside: dict[int, str] = field(default_factory=dict)
    wsd_numbered: bool = False

    def spent(self, grid: Grid | None = None, cost_model: CostModel | None = None) -> float:
        """Cost of completed and failed runs in the grid's budget unit: their ``cost`` (a
        cost column, else the grid's); under a ``wsd`` cost model the completed ones as
        families (its total; the cost column of a completed run is then not used) and failed
        ones at their own cost; failed attempts that were retried, and finished runs set
        aside in held-out cells, at their own cost too."""
        return self._compute((self.completed, self.failed), grid, cost_model) + \
            self.superseded_cost + self._set_aside_cost(running=False)

    def pending(self, grid: Grid | None = None, cost_model: CostModel | None = None) -> float:
        """Cost committed to running runs (under ``wsd``: what they add to the rest)."""
        aside = self._set_aside_cost(running=True)
        if cost_model is None or cost_model.kind == "independent":
            return float(sum(self.cost[int(i)] for i in self.running)) + aside
        everything = self._compute((self.completed, self.failed, self.running), grid,
                                   cost_model)
        return everything - self._compute((self.completed, self.failed), grid, cost_model) \
            + aside

    def _set_aside_cost(self, running: bool) -> float:
        """Own cost of the runs set aside in held-out cells that are (not) running."""
        return float(sum(self.cost[g] for g, st in self.set_aside.items()
                         if (st == RunStatus.RUNNING.value) == running))

    def _compute(self, groups: tuple[np.ndarray, ...], grid: Grid | None,
                 cost_model: CostModel | None) -> float:
        rows = [int(i) for g in groups for i in g]
        if cost_model is None or cost_model.kind == "independent":
            return float(sum(self.cost[i] for i in rows))
        if grid is None:
            raise ValueError("a wsd cost model needs the grid")
        failed = set(self.failed.tolist())
        mask = np.zeros(len(grid), dtype=bool)
        mask[[i for i in rows if i not in failed]] = True
        # Failed runs at their own cost (the cost column, else the grid's): a crashed run
        # shares no stable phase. Completed and running ones as families (the model's total).
        own = float(sum(self.cost[i] for i in rows if i in failed))
        return cost_model.total(grid, mask, priced=True) + own

    def with_running(self, more: CampaignRuns, name: str | None = None, *,
                     grid: Grid | None = None) -> CampaignRuns:
        """These runs plus ``more.running`` (runs in flight listed elsewhere, e.g. by
        :func:`read_pending_runs`; ``name`` renames their source in errors). A failed
        configuration run again is retried as in a runs file: its failed attempt stays
        spent.

        Raises:
            SearchError: a configuration of ``more`` already completed or running here
                (names both files' 1-based data rows, and the configuration with ``grid``).
        """
        if name is not None:
            was = f"{more.source}: "
            more = replace(more, source=name,
                           rows={g: (name, row) for g, (_, row) in more.rows.items()},
                           notes=tuple(f"{name}: {n.removeprefix(was)}" for n in more.notes))
        state = {int(i): RunStatus.COMPLETED for i in self.completed}
        state |= {int(i): RunStatus.RUNNING for i in self.running}
        state |= {g: RunStatus(st) for g, st in self.set_aside.items()
                  if st != RunStatus.FAILED.value}
        clash = [int(g) for g in [*more.running, *more.set_aside] if int(g) in state]
        if clash:
            g = clash[0]
            config = "" if grid is None else f", configuration {shown_config(grid.config(g))},"
            more_rows = f"; {len(clash) - 1} more such rows" if len(clash) > 1 else ""
            source, row = self.rows.get(g, (self.source, None))
            at = "" if row is None else f" (data row {row})"
            raise SearchError(f"{_where(more, g)}{config} is already {state[g].value} in "
                              f"{source}{at}{more_rows}; list each run once (a finished run "
                              "belongs in the runs table only).")
        retried = np.isin(self.failed, more.running)
        again = [g for g in more.set_aside if g in self.set_aside]  # failed there, retried
        return replace(self, running=np.concatenate([self.running, more.running]),
                       failed=self.failed[~retried],
                       crashed=self.crashed[~np.isin(self.crashed, more.running)],
                       superseded_cost=self.superseded_cost
                       + sum(self.cost[int(g)] for g in [*self.failed[retried], *again]),
                       n_superseded=self.n_superseded + int(retried.sum()) + len(again),
                       set_aside={**self.set_aside, **more.set_aside},
                       cost={**self.cost, **more.cost}, rows={**self.rows, **more.rows},
                       notes=(*self.notes, *more.notes),
                       wsd_numbered=self.wsd_numbered or more.wsd_numbered)

    @property
    def n_runs(self) -> int:
        return int(self.completed.size + self.failed.size + self.running.size
                   + self.n_superseded)

    def counts(self) -> str:
        """``"5 completed, 0 failed, 2 running; 1 failed attempt retried"``: every row."""
        retried = "" if not self.n_superseded else (
            f"; {self.n_superseded} failed attempt{'s' if self.n_superseded > 1 else ''} "
            "retried")
        return (f"{self.completed.size} completed, {self.failed.size} failed, "
                f"{self.running.size} running{retried}")


def _where(runs: CampaignRuns, g: int) -> str:
    """``"runs.csv: data row 5"``: where the run of grid index ``g`` is written."""
    source, row = runs.rows.get(g, (runs.source, None))
    return source if row is None else f"{source}: data row {row}"


def read_pending_runs(source: str | Path | pd.DataFrame, grid: Grid, *,
                      mapping: Mapping[str, str] | None = None) -> CampaignRuns:
    """Runs in flight listed apart from the runs table (``--pending PATH``): the grid's
    columns, one configuration per row, every row running (a ``status`` column is not
    read, but one that says anything but running is an error). Add them with
    :meth:`CampaignRuns.with_running`, which keeps their notes (each prefixed with the
    file, or with ``with_running``'s ``name``).

    Raises:
        RunTableError, SearchError: as :func:`read_campaign_runs` (errors name the file and
            its 1-based data rows).
    """
    name, frame = _named_frame(source)
    if "status" in frame.columns:  # every row is in flight; a finished one is misplaced
        said = frame["status"].map(lambda v: "" if is_blank(v) else str(v).strip().lower())
        wrong = np.flatnonzero(~said.isin(["", RunStatus.RUNNING.value]).to_numpy())
        if wrong.size:
            got = frame["status"].iloc[wrong[0]]
            raise RunTableError(
                f"{name}: data row {wrong[0] + 1}, column 'status': {got!r}; a pending file "
                "lists runs in flight (status running or empty), a finished or failed run "
                "belongs in the runs table.")
    return read_campaign_runs(frame.assign(status=RunStatus.RUNNING.value), grid,
                              mapping=mapping, name=name)


def _named_frame(source: str | Path | pd.DataFrame) -> tuple[str, pd.DataFrame]:
    if isinstance(source, pd.DataFrame):
        return "<DataFrame>", source.copy()
    return str(source), read_table(source)


def _diverged_notes(grid: Grid, idx: np.ndarray, kinds: list[RunStatus], status: list,
                    loss: np.ndarray, diverged_above: float | None) -> list[str]:
    """A note when completed runs' losses look diverged
    (:func:`~scalebo.search.runs_columns.suspect_diverged`; with ``diverged_above``, those
    it lets through); with ``diverged_above``, also a note when it fails runs whose loss is
    ordinary — within :data:`DIVERGED_RATIO` × their cell's best among the runs it keeps
    (or, in a cell it empties, of the kept cells' median best) — at least 3 of them and a
    quarter of the runs that reported a loss (too low?)."""
    told = np.array([st is not RunStatus.FAILED and st is not RunStatus.RUNNING
                     for st in status]) & np.isfinite(loss)
    cells = np.asarray(grid.cell_ids)[idx]
    notes = []
    done = np.array([k is RunStatus.COMPLETED for k in kinds]) & told
    low = suspect_low(np.where(done, loss, np.nan), cells, grid.cost[idx])
    if low.any():  # a typo is no yardstick of the diverged check below
        notes.append(f"{shown_rows((np.flatnonzero(low) + 1).tolist())}: completed with a loss "
                     f"under half the best loss of the other cells costing as much or more (at "
                     f"least two; down to {loss[low].min():.4g} nats): a typo (a lost digit)? The "
                     "law and the search use it as written: fix the file if so")
        done = done & ~low
    high, median = suspect_diverged(np.where(done, loss, np.nan), cells, grid.cost[idx])
    if high.any():
        fix = ("--diverged-above LOSS counts them" if diverged_above is None else
               f"they are below --diverged-above {diverged_above:g}: a lower one counts them")
        notes.append(f"{shown_rows((np.flatnonzero(high) + 1).tolist())}: completed "
                     f"with a loss {diverged_rule()} (up to "
                     f"{loss[high].max():.4g} nats; the median cell best is {median:.4g}): "
                     f"diverged runs? {fix} as failed runs (compute spent, no loss) instead "
                     "of telling the search and the law these losses")
    low = "" if diverged_above is None else too_low_note(np.where(told, loss, np.nan), cells,
                                                          diverged_above)
    return [*notes, low] if low else notes


def read_campaign_runs(source: str | Path | pd.DataFrame | None, grid: Grid, *,
                       mapping: Mapping[str, str] | None = None,
                       diverged_above: float | None = None,
                       name: str | None = None) -> CampaignRuns:
    """Read a campaign's runs (see the module docstring); ``None`` means no runs yet.
    ``name``: what errors call the source (default: its path, ``<DataFrame>`` for a frame).

    Raises:
        RunTableError: unreadable file, a bad ``status``, ``loss`` or ``cost`` value (names
            the 1-based data row and column), a non-positive cost.
        SearchError: a run that is not on the grid, or two runs of one configuration that
            did not fail (completed or running).
    """
    if source is None:
        return CampaignRuns()
    default, frame = _named_frame(source)
    name = name or default
    original = [str(c) for c in frame.columns]
    frame = map_columns(frame, mapping, name).reset_index(drop=True)
    if len(frame) == 0:
        return CampaignRuns(source=name)
    for column in grid.input_columns:  # a typo in a numeric column, named (not a ValueError)
        if column in frame.columns and column not in grid.categorical_axes:
            grid_numbers(frame[column], column, name)
    idx = grid.index_of(frame, source=name, names=mapping)
    status = run_statuses(frame, name)
    check_run_columns(frame, status, name, mapping, original)
    loss = positive_numbers(frame, "loss", name, "a loss > 0 (nats; laws are fitted in log "
                            "space)")
    cost = positive_numbers(frame, "cost", name, f"a cost > 0 ({grid.price_unit})")
    kinds: list[RunStatus] = []
    notes: list[str] = []
    for pos, (st, y) in enumerate(zip(status, loss, strict=True)):
        finite = math.isfinite(y)
        diverged = finite and diverged_above is not None and y >= diverged_above
        if finite and st in (RunStatus.FAILED, RunStatus.RUNNING):  # a loss not to use
            notes.append(f"data row {pos + 1}: status {st.value}, so its loss {y:g} is not "
                         "used" + (" until the status says completed"
                                   if st is RunStatus.RUNNING else ""))
        if st is RunStatus.RUNNING or not (st is RunStatus.FAILED or not finite or diverged):
            kinds.append(RunStatus.RUNNING if st is RunStatus.RUNNING else RunStatus.COMPLETED)
            continue
        if st is not RunStatus.FAILED:
            why = (f"loss {y:g} is at or above diverged_above={diverged_above:g}" if diverged
                   else "its loss is missing or not finite")
            notes.append(f"data row {pos + 1}: counted as failed because {why}")
        kinds.append(RunStatus.FAILED)
    notes += _diverged_notes(grid, idx, kinds, status, loss, diverged_above)
    notes += cost_notes(frame, cost, planned := np.asarray(grid.budget_cost)[idx], grid.price_unit)
    row_cost = np.where(np.isfinite(cost), cost, planned)
    keep, superseded = _one_row_per_configuration(grid, idx, kinds, name, notes, frame)
    done = keep & np.array([k is RunStatus.COMPLETED for k in kinds], dtype=bool)
    notes += unused_settings(frame[done], grid.input_columns, (*_WRITTEN, "status"))
    held = keep & np.asarray(grid.held_out)[idx]  # SearchLoop refuses them: set aside
    if held.any():
        notes.append(f"{shown_rows((np.flatnonzero(held) + 1).tolist())}: in the grid's "
                     f"held-out cells ({grid.n_held_out_cells} costliest, held out for "
                     "benchmarks: 'held_out_cells' of a YAML grid, Grid's n_held_out_cells "
                     "in Python): the compute counts as spent (pending while running), but "
                     "neither the law nor the search uses the run")
    groups: dict[RunStatus, list[int]] = {s: [] for s in RunStatus}
    losses: list[float] = []
    crashed = []
    for pos in np.flatnonzero(keep & ~held):
        groups[kinds[pos]].append(int(idx[pos]))
        if kinds[pos] is RunStatus.FAILED and np.isnan(loss[pos]):
            crashed.append(int(idx[pos]))
        if kinds[pos] is RunStatus.COMPLETED:
            losses.append(float(loss[pos]))
    costs = {int(idx[pos]): float(row_cost[pos]) for pos in np.flatnonzero(keep)}
    rows = {int(idx[pos]): (name, int(pos) + 1) for pos in np.flatnonzero(keep)}
    as_idx = {s: np.asarray(v, dtype=np.int64) for s, v in groups.items()}
    return CampaignRuns(completed=as_idx[RunStatus.COMPLETED], losses=np.asarray(losses),
                        failed=as_idx[RunStatus.FAILED], running=as_idx[RunStatus.RUNNING],
                        crashed=np.asarray(crashed, dtype=np.int64), cost=costs, source=name,
                        notes=tuple(f"{name}: {n}" for n in notes),
                        superseded_cost=float(row_cost[superseded].sum()),
                        n_superseded=int(superseded.size), rows=rows,
                        set_aside={int(idx[p]): kinds[p].value for p in np.flatnonzero(held)},
                        wsd_numbered="wsd_run" in frame.columns
                        and not all(is_blank(v) for v in frame["wsd_run"]))


#: Columns a campaign writes beside a configuration (``suggest``'s CSV): never settings.
_WRITTEN = ("predicted_std", "cost", "cap", "acquisition", "wsd_run")


def _one_row_per_configuration(grid: Grid, idx: np.ndarray, kinds: list[RunStatus],
                               name: str, notes: list[str], frame: pd.DataFrame
                               ) -> tuple[np.ndarray, np.ndarray]:
    """``(keep, superseded)``: the row that stands for each configuration (its run that did
    not fail, else its last failed attempt) and the failed attempts it supersedes (a note
    each). SearchError for two runs of one configuration that did not fail."""
    keep = np.ones(idx.size, dtype=bool)
    values, counts = np.unique(idx, return_counts=True)
    for g in values[counts > 1].tolist():
        rows = np.flatnonzero(idx == g)
        live = [int(p) for p in rows if kinds[p] is not RunStatus.FAILED]
        running = [p for p in live if kinds[p] is RunStatus.RUNNING]
        if len(live) == 2 and len(running) == 1 and running[0] < max(live):  # appended
            done = next(p for p in live if p != running[0])
            raise SearchError(f"{name}: data row {done + 1} reports "
                              f"{shown_config(grid.config(g))} finished, and data row "
                              f"{running[0] + 1} still lists it as running: update that row "
                              "(its status and loss) instead of adding one.")
        if len(live) > 1:
            other = [str(c) for c in frame.columns if c not in grid.input_columns
                     and is_candidate_column(frame, c, _WRITTEN)
                     and frame[c].iloc[live].nunique() > 1]
            raise SearchError(f"{name}: {shown_rows([p + 1 for p in live])} are the same "
                              f"configuration {shown_config(grid.config(g))}, run more than "
                              "once without failing; keep one run per configuration "
                              "(average repeats into one row, or drop the older one); failed "
                              "attempts may stay beside their retry." + (
                                  f" They differ in {other}, which the grid has no axis "
                                  "for: a setting among them belongs in the grid's axes."
                                  if other else ""))
        stay = live[0] if live else int(rows[-1])
        for p in rows:
            if p != stay:
                keep[p] = False
                notes.append(f"data row {p + 1}: a failed attempt of "
                             f"{shown_config(grid.config(g))}, run again in data row "
                             f"{stay + 1}; its compute counts as spent")
    return keep, np.flatnonzero(~keep)
