"""Notes on a replayed grid's shape: a typo'd axis value, holes in a near-product grid."""

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.grid_shape import grid_shape_notes


def _grid(lrs=(1e-4, 2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3)) -> pd.DataFrame:
    """5 N × 4 D × 6 learning rates, one run each (120 rows, file order)."""
    N, D, lr = np.meshgrid([1e7, 3e7, 1e8, 3e8, 1e9], [1e9, 3e9, 1e10, 3e10], lrs,
                           indexing="ij")
    return pd.DataFrame({"N": N.ravel(), "D": D.ravel(), "lr": lr.ravel(), "loss": 3.0})


def test_a_full_product_has_nothing_to_say():
    assert grid_shape_notes(_grid(), ["lr"], "g") == []


def test_an_axis_value_next_to_another_in_one_cell_is_named_with_its_row():
    """A trial: 1e-4 typed as 0.0011 beside 0.001 (the axis spaced ~2x) made a 7th
    learning rate of its own, silently."""
    frame = _grid()
    frame.loc[30, "lr"] = 0.0011  # data row 31
    (note,) = grid_shape_notes(frame, ["lr"], "g.csv")
    assert note.startswith("g.csv: lr = 0.0011 (data row 31) is 10 % from 0.001, where the "
                           "axis's values are otherwise a factor 2 apart, and it appears in "
                           "1 of 20 (N, D) cells")
    frame.loc[30, "lr"] = 0.0010000001  # a float written with noise: shown to its digit
    assert "lr = 0.0010000001 (data row 31) is 1e-05 % from 0.001" in grid_shape_notes(
        frame, ["lr"], "g.csv")[0]


def test_close_values_on_every_cell_are_a_design_not_a_typo():
    # an axis whose two values are close everywhere (a fine scan) is not named
    assert grid_shape_notes(_grid((1e-4, 1.05e-4, 5e-4, 1e-3, 2e-3, 4e-3)), ["lr"], "g") == []


@pytest.mark.parametrize("dropped", [[17], [3, 50, 99]])
def test_holes_in_a_near_product_are_counted_and_shown(dropped):
    frame = _grid().drop(index=dropped)
    (note,) = grid_shape_notes(frame, ["lr"], "g")
    assert note.startswith(f"g: {len(dropped)} of the 120 configurations of its (N, D) cells "
                           "× lr have no run (")
    gone = _grid().loc[dropped[0]]
    assert f"N={gone['N']:.4g}, D={gone['D']:.4g}, lr={gone['lr']:.4g}" in note


def test_a_grid_far_from_a_product_is_not_called_holey():
    # StepLaw-like: batch sizes differ by cell (half the product) — a design, not holes
    frame = _grid()
    frame = frame[(frame["N"] < 1e8) | (frame["lr"] > 4e-4)]
    assert grid_shape_notes(frame, ["lr"], "g") == []
