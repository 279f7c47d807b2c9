"""Cell bests at the edge of the settings tried are named (a trial's grid: every N = 1e9
cell had its best learning rate at the grid's largest, and the Chinchilla fit's N* missed
the truth by 24 % with nothing said)."""

import warnings

import numpy as np
import pandas as pd

from scalebo.data.runs import load_runs
from scalebo.fitting.edges import edge_optimum_note
from scalebo.fitting.summary import fit_summary


def _grid(lr_opt_at_1e9: float, lrs=(1e-3, 2e-3, 4e-3), slope: float = -0.3) -> pd.DataFrame:
    N, D, lr = (x.ravel() for x in np.meshgrid([1e9, 3e9, 7e9], [2e10, 6e10, 2e11], lrs))
    lr_opt = lr_opt_at_1e9 * (N / 1e9) ** slope
    loss = 1.8 + 480 / N**0.34 + 2100 / D**0.36 + 0.03 * np.log2(lr / lr_opt) ** 2
    return pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": loss})


def _note(frame: pd.DataFrame) -> str:
    table = load_runs(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        points = fit_summary(table, "chinchilla").points
    return edge_optimum_note(table.frame, points, table.hyperparameters)


def test_best_runs_at_the_largest_learning_rate_are_named():
    # lr* = 6e-3 at N = 1e9, 4.3e-3 at 3e9 (beyond the largest tried, 4e-3), 3.4e-3 at 7e9
    # (closest to 4e-3 in log2): every cell's best at the edge
    note = _note(_grid(6e-3))
    assert note.startswith("in 9 of the 9 fitted cells that tried 3 or more values of lr, the "
                           "best run is at the edge of those values (N=1e+09, D=2e+10: "
                           "lr=0.004, the largest of 3;")
    assert "and 6 more" in note and "try settings past that edge" in note


def test_bracketed_optima_and_too_few_settings_say_nothing():
    assert _note(_grid(2e-3, slope=0.0)) == ""  # lr* = 2e-3 everywhere: the middle wins
    assert _note(_grid(2e-3, slope=-0.3)).startswith("in 3 of the 9")  # 1.1e-3 at 7e9
    assert _note(_grid(6e-3, lrs=(2e-3, 4e-3))) == ""  # two settings: no edge to speak of


def test_fit_warns_on_a_frontier_of_cell_bests_but_not_on_every_run():
    table = load_runs(_grid(6e-3))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit_summary(table, "chinchilla")
        fit_summary(table, "chinchilla", frontier="all")
    said = [str(w.message) for w in seen if "at the edge of those values" in str(w.message)]
    assert len(said) == 1  # the cell-best fit only: a fit of every run averages over lr


def test_a_setting_past_the_edge_that_was_tried_and_failed_counts_as_tried():
    """A review: with the largest learning rate diverged (NaN) in every cell, the note said
    "the largest of 3" of 4 tried and advised trying past it."""
    frame = _grid(6e-3, lrs=(1e-3, 2e-3, 4e-3, 8e-3))
    frame.loc[frame["lr"] == 8e-3, "loss"] = np.nan
    table = load_runs(frame)
    assert len(table.excluded) == 9
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit_summary(table, "chinchilla")
    assert not [w for w in seen if "at the edge of those values" in str(w.message)]
