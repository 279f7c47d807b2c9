"""Settings that every run trying them failed: what a campaign's suggestions should say.

A failed run (crashed, diverged, no loss) is spent compute and never proposed again, but it
teaches the search's surrogate nothing: the GP sees losses only. So a learning rate that
crashed in every cell where it was tried stays as attractive in the untried cells as it was
before (a campaign trial: lr 0.016 failed in 4 of 4 cells and was proposed again in 4 of the
next 8 picks). :func:`failing_values_notes` names such a setting when a suggestion uses it,
so the user can drop it from the grid (or tell the runs as losses).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scalebo.search.grid import Grid

__all__ = ["MIN_FAILED", "failing_values_notes"]

#: Failed runs (and no completed one) a setting needs before a suggestion using it is named.
MIN_FAILED = 2


def failing_values_notes(grid: Grid, failed: Sequence[int], completed: Sequence[int],
                         picked: Sequence[int]) -> tuple[str, ...]:
    """One note per hyperparameter setting that a ``picked`` grid row uses while at least
    :data:`MIN_FAILED` ``failed`` rows and no ``completed`` row have it (grid row indices);
    ``()`` when there is none. The setting named is every axis value those failed runs
    share (``lr=0.016`` when they span several batch sizes, ``lr=0.016, bs=512`` when they
    all had both: which of the two fails the runs do not say)."""
    failed, completed = np.asarray(failed, dtype=np.int64), np.asarray(completed, np.int64)
    if failed.size < MIN_FAILED or not len(picked) or not grid.axes:
        return ()
    values = {a: grid.configs[a].to_numpy() for a in grid.axes}
    said: dict[tuple, str] = {}
    for row in np.asarray(picked, dtype=np.int64):
        for axis in grid.axes:
            v = values[axis][row]
            runs = failed[values[axis][failed] == v]
            if runs.size < MIN_FAILED or np.any(values[axis][completed] == v):
                continue
            shared = tuple((a, values[a][runs[0]]) for a in grid.axes
                           if np.all(values[a][runs] == values[a][runs[0]]))
            if shared in said:
                continue
            setting = ", ".join(f"{a}={_shown(x)}" for a, x in shared)
            said[shared] = (f"{setting} is suggested although all {runs.size} runs that tried "
                            "it failed and none completed: failed runs teach the search "
                            f"nothing about a setting; if {setting} always fails, drop it from "
                            "the grid")
    return tuple(said.values())


def _shown(value: object) -> str:
    """An axis value as the grid file can hold it: ``%g`` when that reads back exactly
    (0.016), else in full (2097152), text quoted."""
    if isinstance(value, str):
        return repr(value)
    short = f"{value:g}"
    return short if float(short) == float(value) else repr(float(value)).removesuffix(".0")
