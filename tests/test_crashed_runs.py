"""A campaign's crashed runs: named, with how to run them again (a trial's crash at its cell's
best learning rate was never pointed out)."""

from __future__ import annotations

import numpy as np
from test_campaign import _frame, grid  # noqa: F401 - grid is a fixture

from scalebo.search.campaign import suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs


def test_a_crashed_run_is_named_with_how_to_retry_it(grid):  # noqa: F811
    """A trial: a crash at its cell's best learning rate was never pointed out; the next
    round trained a worse setting there, and only '1 failed' said anything."""
    from scalebo.search.status import campaign_status

    frame = _frame(grid, list(range(8)))
    frame.loc[5, "loss"] = np.nan  # data row 6 crashed
    frame.loc[6, "loss"] = 1e9  # data row 7 diverged (infinite-like): failed, not crashed
    frame.loc[6, "status"] = "failed"
    runs = read_campaign_runs(frame, grid, name="runs.csv")
    assert runs.crashed.size == 1 and runs.failed.size == 2
    said = ("1 crashed run (no loss: runs.csv: data row 6) is not proposed again: a crash "
            "says nothing of the configuration, so scalebo suggest --retry-failed crashed "
            "(retry_failed='crashed' in Python) proposes it again where it scores")
    res = suggest_runs(grid, runs, 0.5 * grid.budget_total, batch=2)
    assert any(n.startswith(said) for n in res.notes)
    again = suggest_runs(grid, runs, 0.5 * grid.budget_total, batch=2, retry_failed="crashed")
    assert not any("crashed run" in n for n in again.notes)
    status = campaign_status(grid, runs, 0.5 * grid.budget_total, targets=1e21, n_samples=8)
    assert any(n.startswith(said) for n in status.notes)
