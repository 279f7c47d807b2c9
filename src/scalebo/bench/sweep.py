"""The benchmark sweep: a YAML config → cells → one JSON record per cell.

A **cell** is one ``(dataset, method, seed, budget)`` combination. Its result is a pure
function of the cell (the dataset source and options, the method's parameters, the seed and
the budget fraction), so a cell is identified by a stable hash of those inputs
(:attr:`Cell.key`: it also holds the method's resolved settings and the package version, so
a code change or a changed default gives new cells) and its record is written to
``OUT/<key>.json``. Records are written atomically (temporary file in the same directory,
then :func:`os.replace`), so a sweep killed at any moment leaves only complete records; a
rerun skips the cells whose record already holds ``status: "ok"`` (failed cells are
retried), so nothing is lost or duplicated. A record file that cannot be used (unparsable,
truncated, another schema) is recomputed, with a :class:`~scalebo.bench.records.RecordWarning`
naming the file and why. Warnings raised while loading a dataset are the problem's ``notes``;
they go into each record's ``notes`` and are shown once per sweep call (a ``UserWarning``).

Execution (:func:`run_sweep`): the pending cells become **tasks**. A task is one cell, or —
for methods whose search does not depend on the total budget (see :func:`replay_is_budget_free`)
— all pending budgets of one ``(dataset, method, seed)``, run as a single replay to the largest
budget that records metrics at each smaller one (``record_budgets``). Each task runs in a
worker with one BLAS thread (threadpoolctl), returns its records to the main process, which
writes them as they arrive and advances a tqdm bar (stderr) over cells. Workers are local
(joblib, loky backend, ``n_jobs``) or a Dask cluster (``dask_scheduler``; ``dask.distributed``
is imported lazily). A task that raises produces one ``status: "error"`` record per cell with
the exception's type and message; failures are summarized at the end ("N cells failed out of
M", grouped by message) and never stop the sweep.

The config (:class:`SweepConfig`, re-exported here) and its YAML layout are in
:mod:`scalebo.bench.sweep_config`; :class:`Task` (re-exported) and the joblib and Dask
executors in :mod:`scalebo.bench.executors`.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from scalebo.bench.executors import Task, _iter_dask, _iter_joblib, dask_client
from scalebo.bench.records import (
    RECORD_SCHEMA_VERSION,
    IgnoredRecord,
    RecordWarning,
    jsonable,
    make_record,
    package_version,
    record_path,
    record_state,
    write_json,
    write_record,
)
from scalebo.bench.replay_datasets import check_replay_datasets
from scalebo.bench.sweep_config import (  # Cell, DatasetSpec, MethodSpec, SweepConfig: public
    Cell,
    DatasetSpec,
    MethodSpec,
    SweepConfig,
    _freeze,
    _thaw,
    replay_method_settings,
)
from scalebo.bench.sweep_summary import SweepSummary
from scalebo.progress import progress as progress_lines

__all__ = [
    "Cell", "DatasetSpec", "MethodSpec", "SweepConfig", "SweepSummary", "Task", "execute_task",
    "make_tasks", "replay_cell", "replay_group", "replay_is_budget_free",
    "replay_method_settings", "run_sweep",
]

CellFn = Callable[["Cell"], Mapping[str, Any]]
GroupFn = Callable[[Sequence["Cell"]], Sequence[Mapping[str, Any]]]


# --------------------------------------------------------------------------- tasks

def execute_task(task: Task, cell_fn: CellFn, group_fn: GroupFn | None = None) -> list[dict]:
    """Run one task with one BLAS thread and return one record per cell (never raises).

    Args:
        task: The cells.
        cell_fn: ``cell_fn(cell) -> dict`` result of one cell (JSON-ready).
        group_fn: ``group_fn(cells) -> [dict, ...]`` results of several budgets of one
            (dataset, method, seed) in one computation, in the order of ``cells``; required
            when the task holds more than one cell.

    Returns:
        Records (see ``docs/records.md``); on an exception every cell gets an error record
        with ``error = {"type", "message", "traceback"}``. A result's ``"notes"`` (list of
        str) and ``"timings"`` move to the record's ``notes`` and ``timing.task``. A cell made
        with another package version than this process's is an error (a stale worker).
    """
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    n = len(task.cells)
    try:
        here = package_version()
        stale = sorted({c.version for c in task.cells if c.version != here})
        if stale:
            raise RuntimeError(f"this worker runs scalebo {here}, the cells were made with "
                               f"scalebo {', '.join(stale)}: install one version everywhere")
        with threadpool_limits(limits=1):
            if n == 1:
                results = [cell_fn(task.cells[0])]
            else:
                if group_fn is None:
                    raise ValueError("a task of several cells needs a group_fn")
                results = list(group_fn(task.cells))
                if len(results) != n:
                    raise ValueError(f"group_fn returned {len(results)} results for {n} cells")
    except Exception as exc:  # recorded, summarized, never fatal
        err = {"type": type(exc).__name__, "message": str(exc) or type(exc).__name__,
               "traceback": traceback.format_exc(limit=20)}
        secs = (time.perf_counter() - t0) / n
        return [make_record(c, "error", None, err, secs, n) for c in task.cells]
    secs = (time.perf_counter() - t0) / n
    records = []
    for c, r in zip(task.cells, results, strict=True):
        r = dict(r)
        timings = r.pop("timings", None)  # varies between identical runs: not a result
        notes = [str(x) for x in r.pop("notes", None) or ()]
        rec = make_record(c, "ok", jsonable(r), None, secs, n, notes)
        if timings is not None:
            rec["timing"]["task"] = jsonable(timings)
        records.append(rec)
    return records


def make_tasks(cells: Sequence[Cell], *, budget_free: Callable[[MethodSpec], bool] | None = None,
               grouping: bool = True) -> list[Task]:
    """Group ``cells`` into tasks, largest budgets first.

    Cells of one ``(dataset, method, seed)`` share a task when ``grouping`` is on and
    ``budget_free(method)`` says the method's search does not depend on the total budget.
    """
    budget_free = budget_free or (lambda _m: False)
    groups: dict[tuple, list[Cell]] = {}
    singles: list[Task] = []
    for cell in cells:
        if grouping and budget_free(cell.method):
            groups.setdefault((cell.dataset, cell.method, cell.seed), []).append(cell)
        else:
            singles.append(Task((cell,)))
    tasks = singles + [Task(tuple(sorted(g, key=lambda c: c.budget))) for g in groups.values()]
    return sorted(tasks, key=lambda t: -t.cost_hint)  # stable: config order within a budget


# --------------------------------------------------------------------------- replay adapter

def _problem(spec: DatasetSpec, data_dir: str | None) -> Any:
    """``load_problem(source, **options)`` (cached per worker process by ``load_problem``).

    Its warnings are not shown here (in a worker): every warning of a load is in
    ``problem.notes``, which reach the records, and :func:`run_sweep` shows them once.
    """
    from scalebo.bench.problems import load_problem
    from scalebo.bench.sweep_config import _file_digest

    where = spec.location
    gone = spec.content_sha256 is not None and not Path(where).is_file()
    if gone:
        raise ValueError(f"dataset {spec.name!r}: {where} is not there (deleted, or not on "
                         "this worker: every Dask worker needs the file at this absolute "
                         "path)")
    if spec.content_sha256 is not None and _file_digest(where) != spec.content_sha256:
        raise ValueError(f"dataset {spec.name!r}: {where} changed since the sweep config was "
                         "read (its content digest differs), so this cell's record would name "
                         "content it was not computed from; run the sweep again to recompute "
                         "the cells of the file as it is now")
    kwargs = dict(_thaw(spec.options) or {})
    if data_dir is not None:
        kwargs.setdefault("data_dir", data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_problem(where, **kwargs)


def _method(spec: MethodSpec) -> Any:
    """``MethodConfig`` of the resolved settings; raises if it resolves otherwise here (the
    record would then not describe the run)."""
    from scalebo.bench.replay import MethodConfig

    method = MethodConfig(**spec.resolved_kwargs())
    if spec.settings is not None and _freeze(method.to_dict()) != spec.settings:
        raise ValueError(f"method {spec.name!r}: MethodConfig here resolves to "
                         f"{method.to_dict()}, the cell to {spec.resolved_kwargs()}")
    return method


def _cell_result(rec: Any, budget: float, notes: Sequence[str]) -> dict[str, Any]:
    """The part of a ``ReplayRecord`` that belongs to one budget (no trace: a grouped run
    only holds the trace of its largest budget), plus the replay's timings and the
    problem's notes (both moved out of the result by :func:`execute_task`)."""
    return {"dataset": rec.dataset, "method": rec.method.to_dict(),
            "method_label": rec.method.label(), "seed": rec.seed, "budget": float(budget),
            "metrics": rec.at(budget).to_dict(), "timings": dict(rec.timings),
            "notes": list(notes)}


def replay_cell(cell: Cell, *, data_dir: str | None = None) -> dict[str, Any]:
    """Default cell function: ``replay(problem, MethodConfig(**settings), budget, seed)``."""
    from scalebo.bench.replay import replay

    problem = _problem(cell.dataset, data_dir)
    rec = replay(problem, _method(cell.method), cell.budget, cell.seed)
    return _cell_result(rec, cell.budget, problem.notes)


def replay_group(cells: Sequence[Cell], *, data_dir: str | None = None) -> list[dict[str, Any]]:
    """Several budgets of one (dataset, method, seed) from one replay to the largest budget
    with ``record_budgets`` (equal to separate replays for budget-free methods)."""
    from scalebo.bench.replay import replay

    first = cells[0]
    budgets = [c.budget for c in cells]
    problem = _problem(first.dataset, data_dir)
    rec = replay(problem, _method(first.method), max(budgets), first.seed,
                 record_budgets=budgets)
    return [_cell_result(rec, b, problem.notes) for b in budgets]


def replay_is_budget_free(method: MethodSpec) -> bool:
    """``MethodConfig.budget_independent``: ``full`` and the ``spent`` / ``coverage`` window
    schedules make the same choices whatever the total budget; ``sweep`` does not."""
    from scalebo.bench.replay import MethodConfig

    return bool(MethodConfig(**method.resolved_kwargs()).budget_independent)


# --------------------------------------------------------------------------- runner

def _pending(cells: Sequence[Cell], out: Path) -> tuple[list[Cell], list[IgnoredRecord]]:
    """Cells without an ok record, and the unusable files among their records (warned)."""
    pending: list[Cell] = []
    corrupt: list[tuple[IgnoredRecord, str]] = []
    for cell in cells:
        path = record_path(out, cell)
        state, why = record_state(path)
        if state != "ok":
            pending.append(cell)
        if state == "corrupt":
            corrupt.append((IgnoredRecord(str(path), why), cell.label))
    if corrupt:
        warnings.warn(f"{out}: {len(corrupt)} record file(s) cannot be used; their cells are "
                      "computed again:" + "".join(f"\n  {c} [{label}]" for c, label in corrupt),
                      RecordWarning, stacklevel=3)
    return pending, [c for c, _ in corrupt]


def run_sweep(
    config: SweepConfig,
    out_dir: str | os.PathLike[str],
    *,
    cell_fn: CellFn | None = None,
    group_fn: GroupFn | None = None,
    budget_free: Callable[[MethodSpec], bool] | None = None,
    n_jobs: int | None = 1,
    dask_scheduler: Any = None,
    data_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    limit: int | None = None,
) -> SweepSummary:
    """Run every unfinished cell of ``config`` and write its record to ``out_dir``.

    Args:
        config: The sweep. With the default (replay) cell function its methods are
            resolved with :func:`replay_method_settings` (as ``SweepConfig.from_dict`` does
            by default), so the cell keys hold every ``MethodConfig`` field.
        out_dir: Record directory (created); also receives ``sweep_<name>.json``.
        cell_fn: ``cell_fn(cell) -> dict``; default :func:`replay_cell`. Must be picklable
            (a module-level function or ``functools.partial``) for ``n_jobs > 1`` or Dask.
        group_fn: ``group_fn(cells) -> [dict]`` for budget-free methods; default
            :func:`replay_group` when ``cell_fn`` is the default, else no grouping.
        budget_free: Predicate on a method; default :func:`replay_is_budget_free` with the
            default functions, else grouping only when ``group_fn`` is given and this is.
        n_jobs: Local workers (joblib/loky); None or 1 runs in this process, -1 all cores.
        dask_scheduler: Dask scheduler address (``"tcp://host:8786"``) or a ``Client``;
            overrides ``n_jobs``.
        data_dir: Dataset directory for ``load_problem`` (default ``$SCALEBO_DATA_DIR``);
            not part of the cell identity.
        progress: Show a tqdm bar on stderr (cells done / total, rate, ETA).
        limit: Run at most this many tasks (to split a sweep or simulate an interruption).

    Returns:
        A :class:`SweepSummary`. Never raises for a failing cell. Warns
        (:class:`~scalebo.bench.records.RecordWarning`) naming each unusable record file it
        recomputes, and (``UserWarning``) each distinct record note once.
    """
    t0 = time.perf_counter()
    # connect first: an unreachable scheduler or a missing extra leaves no folder behind
    client, own = dask_client(dask_scheduler) if dask_scheduler is not None else (None, False)
    try:
        return _run(config, Path(out_dir), cell_fn, group_fn, budget_free, n_jobs, client,
                    data_dir, progress, limit, t0)
    finally:
        if own:
            client.close()


def _run(config: SweepConfig, out: Path, cell_fn: CellFn | None, group_fn: GroupFn | None,
         budget_free: Callable[[MethodSpec], bool] | None, n_jobs: int | None, client: Any,
         data_dir: str | os.PathLike[str] | None, progress: bool, limit: int | None, t0: float
         ) -> SweepSummary:
    """:func:`run_sweep`'s work, on a connected Dask ``client`` or None (local workers)."""
    if cell_fn is None:
        dd = str(data_dir) if data_dir is not None else None
        check_replay_datasets(config.datasets, dd)
        config = config.resolved(replay_method_settings)
        cell_fn = partial(replay_cell, data_dir=dd)
        group_fn = group_fn or partial(replay_group, data_dir=dd)
        budget_free = budget_free or replay_is_budget_free
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a refused config leaves none
    write_json(out / f"sweep_{config.name}.json",
               {**config.to_dict(), "scalebo_version": package_version(),
                "schema_version": RECORD_SCHEMA_VERSION})
    cells = config.cells()
    if len({c.key for c in cells}) != len(cells):
        raise ValueError("the config has duplicate cells (same dataset, method params, seed, "
                         "budget and labels)")
    pending, corrupt = _pending(cells, out)
    tasks = make_tasks(pending, budget_free=budget_free if group_fn else None,
                       grouping=group_fn is not None)
    if limit is not None:
        tasks = tasks[: max(0, int(limit))]
    run = partial(execute_task, cell_fn=cell_fn, group_fn=group_fn)
    n_cells = sum(len(t.cells) for t in tasks)
    if client is not None:
        stream = _iter_dask(tasks, run, client)
    elif n_jobs in (None, 1) or len(tasks) <= 1:
        stream = (run(t) for t in tasks)
    else:
        stream = _iter_joblib(tasks, run, int(n_jobs))
    failures: Counter[str] = Counter()
    paths: list[str] = []
    notes: dict[str, None] = {}
    with progress_lines(n_cells, f"sweep {config.name}", "cells", enabled=progress,
                        dynamic_ncols=True) as advance:
        for records in stream:
            for rec in records:
                paths.append(str(write_record(out, rec)))
                if rec["status"] != "ok":
                    failures[f"{rec['error']['type']}: {rec['error']['message']}"] += 1
                for note in rec.get("notes") or ():
                    text = f"{rec['cell']['dataset']['name']}: {note}"
                    if text not in notes:
                        notes[text] = None
                        warnings.warn(text, UserWarning, stacklevel=3)  # run_sweep's caller
            advance(len(records))
    return SweepSummary(
        total=len(cells), skipped=len(cells) - len(pending), ran=n_cells,
        failed=sum(failures.values()), failures=tuple(failures.most_common()),
        seconds=time.perf_counter() - t0, n_tasks=len(tasks), out_dir=str(out),
        paths=tuple(paths), corrupt=tuple(corrupt), notes=tuple(notes))
