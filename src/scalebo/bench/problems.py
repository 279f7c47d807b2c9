"""Replay problems: a recorded grid turned into an oracle, a budget scale and a reference.

A :class:`ReplayProblem` holds everything a replay needs that does not depend on the search
strategy (DESIGN.md, "Definitions"):

* the grid of unique configurations (:class:`~scalebo.search.grid.Grid`); repeated runs of
  one configuration are averaged (counted in ``n_repeats`` and said in ``notes``);
* the oracle: the recorded loss (nats) of every grid row;
* held-out cells: the ``k`` largest-compute (N, D) cells (default 2), never acquired;
* ``C_total``: Σ cost over the acquirable grid (held-out cells excluded), FLOPs;
* the reference fits on the grid minus held-out cells, with the same fitter as the replays:
  the compute law ``L(C) = E + A·C^−α`` on the Pareto envelope and Chinchilla's
  ``L(N, D) = E + A/N^α + B/D^β`` on the per-cell best losses;
* the reference envelope configurations and each cell's best configuration, and the
  compute floor: their summed cost as a fraction of ``C_total``.

:func:`load_problem` builds one from a registered dataset name or any run-table file and
caches it per process (an edited file is loaded again; the Chinchilla reference is costly).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.bench.diverged import (
    crashed_rows,
    diverged_note,
    diverged_rows,
    empty_held_out,
    keep_usable_runs,
    with_failed_configurations,
)
from scalebo.bench.grid_shape import grid_shape_notes
from scalebo.bench.held_out import held_out_tie
from scalebo.bench.replay_datasets import check_dataset_name  # re-exported: it lived here
from scalebo.bench.targets import DEFAULT_TARGETS, with_targets
from scalebo.data.columns import default_hyperparameters
from scalebo.data.runs import RunTable, load_runs
from scalebo.errors import EXCLUDED_IN_PYTHON, FitError
from scalebo.fitting.frontier import pareto_envelope
from scalebo.fitting.robust import FitResult, fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW
from scalebo.search.grid import Grid
from scalebo.search.runs_columns import too_low_note

__all__ = ["REGISTERED", "ReplayProblem", "check_dataset_name", "load_problem",
           "problem_from_table"]

#: Names accepted by :func:`load_problem` besides file paths.
REGISTERED = ("steplaw", "steplaw_moe", "oellm_english", "synthetic")


@dataclass(frozen=True, eq=False)
class ReplayProblem:
    """A grid with oracle losses, held-out cells and reference fits.

    Attributes:
        name: Dataset name or file path.
        grid: Unique configurations; ``grid.held_out`` marks the held-out cells.
        loss: Oracle loss of each grid row in nats, shape ``(n_cfg,)``; a repeated
            configuration carries the mean of its runs.
        n_repeats: Runs averaged into each grid row, shape ``(n_cfg,)``.
        reference_compute: Compute law fitted on the envelope of the acquirable grid.
        reference_chinchilla: Chinchilla L(N, D) fitted on the per-cell bests of the
            acquirable grid; None if it has fewer cells than parameters (5).
        envelope_idx: Grid rows on the reference Pareto envelope, sorted by cost, ``(n_env,)``.
        cell_best_idx: Best grid row of every acquirable cell, ordered by cell id, ``(n_cell,)``.
        held_out_cells: One row per held-out cell: ``N``, ``D``, ``C`` (cell cost, FLOPs),
            ``best_loss`` (nats), ``grid_index`` of the best configuration.
        notes: Human-readable remarks (averaged repeats, ...); :func:`load_problem` adds
            every warning raised while loading the table (e.g. runs excluded for a NaN loss).
        fit_starts: Start grid of each law's reference fit, by law name (``"compute"``,
            ``"chinchilla"``); None (or absent) means the law's default grid. Replays fit with
            the same starts.
        diverged: Grid rows whose recorded run diverged (loss at or above the ``diverged_above``
            the problem was built with), ``(n_cfg,)`` bool, or None (none marked): a replay
            that buys one spends its compute and learns no loss (a failed run, as in a
            campaign), and the reference fits leave them out.
        targets: Compute values (FLOPs, ascending) at which replays score the recovered law
            (:mod:`scalebo.bench.targets`; default 1e25, 1e27, 1e29).
    """

    name: str
    grid: Grid
    loss: np.ndarray
    n_repeats: np.ndarray
    reference_compute: FitResult
    reference_chinchilla: FitResult | None
    envelope_idx: np.ndarray
    cell_best_idx: np.ndarray
    held_out_cells: pd.DataFrame
    notes: tuple[str, ...] = ()
    fit_starts: Mapping[str, np.ndarray | None] = field(default_factory=dict)
    diverged: np.ndarray | None = None
    targets: tuple[float, ...] = DEFAULT_TARGETS

    def split_outcomes(self, picks: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``picks`` split into rows with a usable recorded loss and diverged rows."""
        picks = np.asarray(picks, dtype=np.int64)
        if self.diverged is None:
            return picks, picks[:0]
        bad = self.diverged[picks]
        return picks[~bad], picks[bad]

    @property
    def C_total(self) -> float:
        """Σ cost over the acquirable grid (held-out cells excluded), FLOPs."""
        return self.grid.C_total

    @property
    def floor_cells(self) -> float:
        """Compute floor: cost of every cell's best configuration / ``C_total``."""
        return float(self.grid.cost[self.cell_best_idx].sum() / self.C_total)

    @property
    def floor_envelope(self) -> float:
        """Cost of the reference envelope's configurations / ``C_total``."""
        return float(self.grid.cost[self.envelope_idx].sum() / self.C_total)

    def summary(self) -> dict:
        """JSON-ready description (sizes, floors, reference parameters and statuses)."""
        ref_ch = self.reference_chinchilla
        return {
            "name": self.name,
            "n_configs": self.grid.n_configs,
            "n_cells": int(self.grid.cell_cost.size),
            "axes": list(self.grid.axes),
            "n_held_out_configs": int(self.grid.held_out.sum()),
            "held_out_cells": [{"N": float(r.N), "D": float(r.D), "C_cell": float(r.C)}
                               for r in self.held_out_cells.itertuples()],
            "held_out_tie": held_out_tie(self.grid),
            "targets_flops": list(self.targets),
            "C_total_flops": self.C_total,
            "floor_cells_fraction": self.floor_cells,
            "floor_envelope_fraction": self.floor_envelope,
            "n_diverged_configs": 0 if self.diverged is None else int(
                (self.diverged & ~self.grid.held_out).sum()),
            "n_envelope": int(self.envelope_idx.size),
            "reference_compute": {"params": self.reference_compute.params,
                                  "status": str(self.reference_compute.status)},
            "reference_chinchilla": None if ref_ch is None else {
                "params": ref_ch.params, "status": str(ref_ch.status)},
            "notes": list(self.notes),
        }


def cell_best_rows(grid: Grid, loss: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Lowest-loss row of each cell among ``rows`` (ties: first), ordered by cell id."""
    rows = np.asarray(rows, dtype=np.int64)
    order = rows[np.lexsort((loss[rows], grid.cell_ids[rows]))]
    _, first = np.unique(grid.cell_ids[order], return_index=True)
    return order[first]


def envelope_rows(grid: Grid, loss: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows of ``rows`` on the Pareto envelope of (cost, loss), sorted by cost."""
    rows = np.asarray(rows, dtype=np.int64)
    keep = rows[pareto_envelope(grid.cost[rows], loss[rows])]
    return keep[np.argsort(grid.cost[keep], kind="stable")]


def problem_from_table(
    table: RunTable | pd.DataFrame,
    *,
    name: str,
    axes: Sequence[str] | None = None,
    n_held_out_cells: int = 2,
    chinchilla_starts: np.ndarray | None = None,
    diverged_above: float | None = None,
) -> ReplayProblem:
    """Build a :class:`ReplayProblem` from runs (repeated configurations are averaged).

    Args:
        table: Run table (or frame with N, D, loss and the axes); a run table's
            configurations whose every run crashed or diverged (its ``excluded`` rows) are
            kept as failed runs (:func:`~scalebo.bench.diverged.with_failed_configurations`).
        name: Name recorded in results.
        axes: Hyperparameter axes (default: the table's hyperparameters).
        n_held_out_cells: Largest-compute cells held out (default 2).
        chinchilla_starts: Start grid ``(S, 5)`` of the reference Chinchilla fit (default:
            Hoffmann's 4,500 starts; a coarse grid makes small test problems fast).
        diverged_above: Configurations whose (mean) recorded loss is at or above this (nats) are
            diverged runs (:attr:`ReplayProblem.diverged`); None: every finite loss is an
            outcome, and a configuration without one (``inf``: every run crashed) a failed
            run all the same.
    """
    # a RunTable's configurations whose every run crashed (or diverged) stay, failed
    frame = with_failed_configurations(table) if isinstance(table, RunTable) else table
    if axes is None:
        axes = (table.hyperparameters if isinstance(table, RunTable)
                else default_hyperparameters(frame))
    axes = tuple(axes)
    key = ["N", "D", *axes]
    notes: list[str] = []
    if diverged_above is not None:  # a configuration's diverged runs leave its mean
        frame = keep_usable_runs(frame, key, diverged_above)
    for text in grid_shape_notes(frame, axes, name):  # a typo'd axis value, missing runs
        notes.append(text)
        warnings.warn(text, stacklevel=2)
    counts = frame.groupby(key, sort=False)["loss"].transform("size").to_numpy()
    if "n_repeats" in frame.columns:
        repeats = frame["n_repeats"].to_numpy(dtype=np.int64)
    else:
        repeats = np.ones(len(frame), dtype=np.int64)
    if (counts > 1).any():
        agg = {"loss": "mean"}
        if "C" in frame.columns:
            agg["C"] = "mean"
        g = frame.groupby(key, sort=False)
        merged = g.agg(agg).reset_index()
        merged["n_repeats"] = (g["loss"].size() if "n_repeats" not in frame.columns
                               else g["n_repeats"].sum()).to_numpy()
        frame, repeats = merged, merged["n_repeats"].to_numpy(dtype=np.int64)
    if (counts > 1).any() and (repeats > 1).any():  # averaged here (load_runs says its own)
        k = int((repeats > 1).sum())
        msg = (f"{name}: {k} configuration{'s were' if k > 1 else ' was'} run more than once; "
               f"their {int(repeats[repeats > 1].sum())} runs are averaged into one oracle "
               "loss each")
        notes.append(msg)
        warnings.warn(msg, stacklevel=2)
    cols = [c for c in ("N", "D", "C", *axes) if c in frame.columns]
    grid = Grid.from_frame(frame[cols].reset_index(drop=True), axes=axes,
                           n_held_out_cells=n_held_out_cells)
    loss = frame["loss"].to_numpy(dtype=np.float64)
    loss.flags.writeable = False
    diverged = None
    if diverged_above is not None:
        diverged, text = diverged_rows(loss, diverged_above, name)
        low = too_low_note(np.asarray(loss), np.asarray(grid.cell_ids), diverged_above,
                           "configurations as diverged")  # a threshold among good losses
        for said in (text, *([f"{name}: {low}"] if low else [])):
            notes.append(said)
            warnings.warn(said, stacklevel=2)
    elif not np.isfinite(loss).all():  # every run of these crashed: failed runs, kept
        diverged, text = crashed_rows(loss, name)
        notes.append(text)
        warnings.warn(text, stacklevel=2)
    return _with_references(name, grid, loss, repeats, tuple(notes), chinchilla_starts,
                            diverged)


def _with_references(name: str, grid: Grid, loss: np.ndarray, repeats: np.ndarray,
                     notes: tuple[str, ...], chinchilla_starts: np.ndarray | None,
                     diverged: np.ndarray | None = None) -> ReplayProblem:
    usable = np.ones(grid.n_configs, bool) if diverged is None else ~diverged
    acq = np.flatnonzero(~grid.held_out & usable)
    env = envelope_rows(grid, loss, acq)
    cells = cell_best_rows(grid, loss, acq)
    try:
        ref_c = fit_law(COMPUTE_LAW, grid.cost[env], loss[env])
    except FitError as exc:
        n_cells = int(grid.cell_cost.size)
        n_held = int(np.unique(grid.cell_ids[grid.held_out]).size)
        raise FitError(
            f"{name}: no reference compute law to score a replay against: its Pareto "
            f"envelope over the acquirable grid ({n_cells - n_held} of {n_cells} (N, D) "
            f"cells, {n_held} held out) has {env.size} point(s) ({exc}); hold out fewer "
            "cells (--held-out-cells, n_held_out_cells) or give a grid with more compute "
            "levels") from None
    ref_ch = None
    if cells.size >= CHINCHILLA.n_params:
        X = np.column_stack([grid.configs["N"].to_numpy()[cells],
                             grid.configs["D"].to_numpy()[cells]])
        ref_ch = fit_law(CHINCHILLA, X, loss[cells], starts=chinchilla_starts)
    extra = [f"{name}: the reference {law} law is not identified by the whole grid "
             f"({fit.status}: {fit.message}); errors and coverage scored against it measure "
             "distance to a fit the data do not pin down"
             for law, fit in (("compute", ref_c), ("chinchilla", ref_ch))
             if fit is not None and str(fit.status) != "converged"]
    extra += empty_held_out(grid, usable, name)
    for msg in extra:
        warnings.warn(msg, stacklevel=3)
    notes = (*notes, *extra)
    held = cell_best_rows(grid, loss, np.flatnonzero(grid.held_out & usable))
    held_cells = pd.DataFrame({"N": grid.configs["N"].to_numpy()[held],
                               "D": grid.configs["D"].to_numpy()[held],
                               "C": grid.config_cell_cost[held], "best_loss": loss[held],
                               "grid_index": held})
    return ReplayProblem(name=name, grid=grid, loss=loss, n_repeats=repeats,
                         reference_compute=ref_c, reference_chinchilla=ref_ch,
                         envelope_idx=env, cell_best_idx=cells, held_out_cells=held_cells,
                         notes=notes, fit_starts={"chinchilla": chinchilla_starts},
                         diverged=diverged)


def load_problem(
    name_or_path: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    axes: Sequence[str] | None = None,
    n_held_out_cells: int = 2,
    data_dir: str | Path | None = None,
    seed: int = 0,
    duplicates: str = "error",
    diverged_above: float | None = None,
    targets: Sequence[float] | None = None,
) -> ReplayProblem:
    """Replay problem for a registered dataset or a run-table file (cached per process).

    Args:
        name_or_path: ``"steplaw"``, ``"oellm_english"``, ``"synthetic"`` (the built-in grid
            of :mod:`scalebo.bench.synthetic`, noise seeded by ``seed``) or a path to a run
            table (CSV, TSV, Parquet, JSON lines).
        mapping: Column mapping for a file (as ``scalebo fit --map``).
        axes: Hyperparameter axes for a file (default: the numeric columns that vary inside
            an (N, D) cell and are not derived or measured, see
            :func:`~scalebo.data.runs.load_runs`); datasets use their own.
        n_held_out_cells: Largest-compute cells held out (default 2).
        data_dir: Folder of the public datasets (default ``$SCALEBO_DATA_DIR``).
        seed: Noise seed of the synthetic grid (ignored otherwise).
        duplicates: Repeated configurations of a file (same N, D and axes): ``"error"``
            (default, as :func:`~scalebo.data.runs.load_runs`) or ``"mean"`` (one oracle
            loss each, the mean of its runs). Registered datasets average their repeats.
        diverged_above: Configurations with a recorded loss at or above this (nats) are diverged
            runs: buying one spends its compute and teaches no loss
            (:attr:`ReplayProblem.diverged`). None (default): every loss is an outcome.
        targets: Compute values (FLOPs) at which replays score the law
            (:func:`~scalebo.bench.targets.check_targets`; None: 1e25, 1e27, 1e29).

    Warnings raised while loading (excluded runs, averaged repeats, ...) are kept in
    ``notes`` and re-emitted once, at the first (uncached) load.
    """
    st = Path(name_or_path).stat() if Path(name_or_path).is_file() else None
    key = (str(name_or_path), tuple(sorted((mapping or {}).items())),
           None if axes is None else tuple(axes), int(n_held_out_cells),
           None if data_dir is None else str(data_dir), int(seed), str(duplicates),
           None if diverged_above is None else float(diverged_above),
           None if st is None else (st.st_mtime_ns, st.st_size))
    return with_targets(_load_cached(*key), targets)


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, mapping: tuple, axes: tuple | None, n_held: int,
                 data_dir: str | None, seed: int, duplicates: str,
                 diverged_above: float | None = None, stamp: tuple | None = None
                 ) -> ReplayProblem:
    """:func:`_build`; its warnings are kept in ``notes`` and re-emitted once, at this load
    (cached calls do not repeat them). ``stamp``: a file's (mtime, size): an edit reloads."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            problem, error = _build(name, mapping, axes, n_held, data_dir, seed, duplicates,
                                    diverged_above), None
        except Exception as exc:  # what loading said (runs excluded) may be why: said first
            error = exc
    unique: dict[str, warnings.WarningMessage] = {}
    for w in caught:
        unique.setdefault(str(w.message), w)
    for w in unique.values():
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    if error is not None:
        raise error
    # a record holds no RunTable: the loader's pointer to RunTable.excluded means nothing there
    said = [m.replace(EXCLUDED_IN_PYTHON, "") for m in unique]
    notes = tuple(dict.fromkeys([*said, *problem.notes]))
    return problem if notes == problem.notes else replace(problem, notes=notes)


def _build(name: str, mapping: tuple, axes: tuple | None, n_held: int, data_dir: str | None,
           seed: int, duplicates: str = "error", diverged_above: float | None = None
           ) -> ReplayProblem:
    if name == "synthetic":
        from scalebo.bench.synthetic import synthetic_runs

        return problem_from_table(synthetic_runs(seed=seed), name=name, axes=axes,
                                  n_held_out_cells=n_held, diverged_above=diverged_above)
    if name in REGISTERED:
        from scalebo.data.datasets import load_dataset

        table = load_dataset(name, data_dir=data_dir)
        return problem_from_table(table, name=name, axes=axes, n_held_out_cells=n_held,
                                  diverged_above=diverged_above)
    if name.startswith("dataset:"):
        name = name[len("dataset:"):]
        if name in REGISTERED:
            return _build(name, mapping, axes, n_held, data_dir, seed, duplicates,
                          diverged_above)
    path = Path(name)
    check_dataset_name(name)
    table = load_runs(path, mapping=dict(mapping) or None, hyperparameters=axes,
                      duplicates=duplicates,  # type: ignore[arg-type]
                      diverged_above=diverged_above)
    problem = problem_from_table(table, name=name, axes=table.hyperparameters,
                                 n_held_out_cells=n_held, diverged_above=diverged_above)
    if diverged_above is None and (text := diverged_note(problem)):
        warnings.warn(text, stacklevel=2)
        problem = replace(problem, notes=(*problem.notes, text))
    return problem

