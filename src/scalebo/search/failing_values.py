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
    """One note per hyperparameter value that a ``picked`` grid row uses while at least
    :data:`MIN_FAILED` ``failed`` rows and no ``completed`` row have it (grid row indices);
    ``()`` when there is none."""
    failed, completed = np.asarray(failed, dtype=np.int64), np.asarray(completed, np.int64)
    if failed.size < MIN_FAILED or not len(picked):
        return ()
    notes = []
    for axis in grid.axes:
        values = grid.configs[axis].to_numpy()
        for v in dict.fromkeys(values[np.asarray(picked, dtype=np.int64)].tolist()):
            n_failed = int(np.sum(values[failed] == v))
            if n_failed >= MIN_FAILED and not np.any(values[completed] == v):
                shown = f"{v:g}" if isinstance(v, int | float) else repr(v)
                notes.append(f"{axis}={shown} is suggested although all {n_failed} runs that "
                             "tried it failed and none completed: failed runs teach the "
                             "search nothing about a setting (it only never repeats a failed "
                             f"configuration); if {axis}={shown} always fails, drop it from "
                             "the grid")
    return tuple(notes)
