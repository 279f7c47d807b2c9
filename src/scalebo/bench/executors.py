"""Sweep executors: stream the records of tasks run by local joblib workers or a Dask cluster.

Each executor takes the tasks (:class:`Task`: cells computed together) and ``run`` (a picklable
``run(task) -> [record, ...]``, one JSON-ready record per cell) and yields each task's
records as it finishes, in completion order, for :func:`scalebo.bench.sweep.run_sweep` to
write. Local workers use the loky backend with one BLAS thread each; ``dask.distributed`` is
imported lazily, and a Dask task whose result cannot be fetched (worker lost, unpicklable
result) becomes one ``status: "error"`` record per cell.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scalebo.bench.records import Cell, make_record

__all__ = ["Task"]


@dataclass(frozen=True)
class Task:
    """Cells computed together: one cell, or several budgets of one (dataset, method, seed)."""

    cells: tuple[Cell, ...]

    @property
    def cost_hint(self) -> float:
        """Largest budget of the task (fraction of C_total), used to start big tasks first."""
        return max(c.budget for c in self.cells)


def _iter_joblib(tasks: Sequence[Task], run: Callable[[Task], list[dict]], n_jobs: int
                 ) -> Iterator[list[dict]]:
    from joblib import Parallel, delayed

    # loky workers also get one BLAS thread from the env (set before numpy is imported there).
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield from Parallel(n_jobs=n_jobs, backend="loky", return_as="generator_unordered")(
            delayed(run)(t) for t in tasks)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _distributed() -> Any:
    """``dask.distributed``, or a :class:`~scalebo.errors.MissingExtraError` (an
    ImportError) that says how to install it."""
    from scalebo.extras import require_extra

    return require_extra("dask", "--dask-scheduler")


def dask_client(address: Any) -> tuple[Any, bool]:
    """``(client, own)``: a client of the Dask scheduler at ``address`` (a string, connected
    here, ``own`` True: the caller closes it) or ``address`` itself when it is a ``Client``.
    Warns when the scheduler has no worker (the cells would wait without a word).

    Raises:
        ValueError: nothing answers at ``address`` (one line that says what to start).
        MissingExtraError: ``dask.distributed`` is not installed (how to install it).
    """
    distributed = _distributed()
    own = isinstance(address, str)
    try:
        client = distributed.Client(address) if own else address
    except (OSError, TimeoutError) as exc:  # nothing listening, an unknown host, ...
        raise ValueError(f"--dask-scheduler {address}: cannot connect ({exc}); start the "
                         "scheduler and its workers first (dask scheduler, dask worker "
                         "ADDRESS) and give its address, e.g. tcp://host:8786") from None
    try:
        if not client.scheduler_info().get("workers"):
            warnings.warn(f"the Dask scheduler {client.scheduler.address} has no workers: the "
                          "cells wait until one joins (dask worker ADDRESS)", UserWarning,
                          stacklevel=3)
    except BaseException:  # a warning turned error (-W error), an interrupt: not left open
        if own:
            client.close()
        raise
    return client, own


def _iter_dask(tasks: Sequence[Task], run: Callable[[Task], list[dict]], client: Any
               ) -> Iterator[list[dict]]:
    """Submit tasks to a Dask ``client`` (:func:`dask_client`) and yield their records as
    they finish; a task whose future fails gives one error record per cell."""
    distributed = _distributed()
    futures = {client.submit(run, t, pure=False): t for t in tasks}
    for fut in distributed.as_completed(futures):
        try:
            yield fut.result()
        except Exception as exc:  # worker lost, unpicklable result, …
            err = {"type": type(exc).__name__, "message": str(exc) or type(exc).__name__,
                   "traceback": ""}
            t = futures[fut]
            yield [make_record(c, "error", None, err, float("nan"), len(t.cells))
                   for c in t.cells]
