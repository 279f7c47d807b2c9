"""Settings that every run trying them failed: what a campaign's suggestions should say.

A failed run (crashed, diverged, no loss) is spent compute and never proposed again, but it
teaches the search's surrogate nothing: the GP sees losses only. So a learning rate that
crashed in every cell where it was tried stays as attractive in the untried cells as it was
before (a campaign trial: lr 0.016 failed in 4 of 4 cells and was proposed again in 4 of the
next 8 picks). :func:`failing_values_notes` names such a setting when a suggestion uses it,
so the user can drop it from the grid (or tell the runs as losses).
:func:`crashed_note` says which crashed runs (no loss) are left untried again, and how to
retry them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from scalebo.errors import data_rows, exact_number
from scalebo.search.grid import Grid

__all__ = ["MIN_FAILED", "crashed_note", "failing_values_notes"]

#: Failed runs (and no completed one) a setting needs before a suggestion using it is named.
MIN_FAILED = 2


def failing_values_notes(grid: Grid, failed: Sequence[int], completed: Sequence[int],
                         picked: Sequence[int]) -> tuple[str, ...]:
    """One note per hyperparameter setting that a ``picked`` grid row uses while at least
    :data:`MIN_FAILED` ``failed`` rows and no ``completed`` row have it (grid row indices);
    ``()`` when there is none. The setting named is every axis value those failed runs
    share with the picked row (``lr=0.016`` when they span several batch sizes, ``lr=0.016,
    bs=512`` when they and the pick all have both: which of the two fails the runs do not
    say). An axis with one value in the grid is never named: there is nothing to drop."""
    failed, completed = np.asarray(failed, dtype=np.int64), np.asarray(completed, np.int64)
    if failed.size < MIN_FAILED or not len(picked):
        return ()
    values = {a: grid.configs[a].to_numpy() for a in grid.axes
              if pd.unique(grid.configs[a]).size > 1}
    said: dict[tuple, str] = {}
    for row in np.asarray(picked, dtype=np.int64):
        for vals in values.values():
            runs = failed[vals[failed] == vals[row]]
            if runs.size < MIN_FAILED or np.any(vals[completed] == vals[row]):
                continue
            shared = tuple((a, v[row]) for a, v in values.items() if np.all(v[runs] == v[row]))
            if shared in said:
                continue
            setting = ", ".join(f"{a}={exact_number(x)}" for a, x in shared)
            said[shared] = (f"{setting} is suggested although all {runs.size} runs that tried "
                            "it failed and none completed: failed runs teach the search "
                            f"nothing about a setting; if {setting} always fails, drop it from "
                            "the grid")
    return tuple(said.values())


def crashed_note(crashed: Sequence[int], rows: dict[int, tuple[str, int]]) -> str:
    """A note naming the crashed runs (grid rows without a loss; ``rows``: where each is
    written, ``(source, 1-based data row)``) that a campaign does not propose again unless
    asked, or "" when there are none: a crash says nothing of the configuration, which may be
    the best of its cell (a trial's crashed run was its cell's best learning rate, and the
    next round trained one 0.03 nats worse there)."""
    if not len(crashed):
        return ""
    by_source: dict[str, list[int]] = {}
    for src, row in sorted(rows[int(g)] for g in crashed if int(g) in rows):
        by_source.setdefault(src, []).append(row - 1)
    said = "; ".join(f"{src}: {data_rows(r)}" for src, r in by_source.items())
    n, them = len(crashed), "them" if len(crashed) > 1 else "it"
    return (f"{n} crashed run{'s' if n > 1 else ''} (no loss{': ' + said if said else ''}) "
            f"{'are' if n > 1 else 'is'} not proposed again: a crash says nothing of the "
            f"configuration, so scalebo suggest --retry-failed crashed "
            f"(retry_failed='crashed' in Python) proposes {them} again where "
            f"{'they score' if n > 1 else 'it scores'}")
