"""Grid construction, costs, held-out cells, encoding and run → row matching."""

import numpy as np
import pandas as pd
import pytest

from scalebo.errors import SearchError
from scalebo.search.grid import Grid


@pytest.fixture
def grid() -> Grid:
    # Cells (N, D) cost 6·N·D FLOPs: 6e15, 1.2e16 (two cells) and 2.4e16; 4 configs each.
    return Grid.from_axes(
        {"N": [1e6, 2e6], "D": [1e9, 2e9], "lr": [1e-3, 1e-2], "opt": ["sgd", "adam"]}
    )


def test_from_axes_product_and_costs(grid):
    assert len(grid) == 16
    assert grid.axes == ("lr", "opt")
    assert list(grid.configs.columns) == ["N", "D", "C", "lr", "opt"]
    np.testing.assert_array_equal(grid.cost, 6.0 * grid.configs.N * grid.configs.D)
    assert grid.cost.dtype == np.float64
    # Cell costs: (1e6,1e9) 6e15; (1e6,2e9) and (2e6,1e9) 1.2e16; (2e6,2e9) 2.4e16.
    np.testing.assert_allclose(grid.cell_cost, [6e15, 1.2e16, 1.2e16, 2.4e16])
    # Cells numbered by increasing cost, ties by N then D: (1e6,2e9) before (2e6,1e9).
    first = grid.configs.iloc[np.flatnonzero(grid.cell_ids == 1)[0]]
    assert (first.N, first.D) == (1e6, 2e9)


def test_held_out_cells_and_totals(grid):
    # The two largest-compute cells: 2.4e16 and the later 1.2e16 tie, (2e6, 1e9).
    held = grid.configs[grid.held_out]
    assert set(zip(held.N, held.D, strict=True)) == {(2e6, 2e9), (2e6, 1e9)}
    assert grid.held_out.sum() == 8
    # 4 configs per cell: C_total = 4·(6e15 + 1.2e16), C_total_all adds 4·(1.2e16 + 2.4e16).
    assert grid.C_total == pytest.approx(4 * (6e15 + 1.2e16))
    assert grid.C_total_all == pytest.approx(4 * (6e15 + 2 * 1.2e16 + 2.4e16))
    np.testing.assert_allclose(grid.compute_levels, [6e15, 1.2e16])
    np.testing.assert_allclose(grid.all_compute_levels, [6e15, 1.2e16, 2.4e16])
    with pytest.raises(ValueError):
        grid.cost[0] = 1.0  # read-only arrays


def test_too_many_held_out_cells_raises():
    with pytest.raises(SearchError, match="leaves no candidate"):
        Grid.from_axes({"N": [1e6], "D": [1e9, 2e9]}, n_held_out_cells=2)
    g = Grid.from_axes({"N": [1e6], "D": [1e9, 2e9]}, n_held_out_cells=0)
    assert not g.held_out.any()


def test_encode_log_scaling_and_categories(grid):
    X = grid.encode()
    assert X.shape == (16, 4)
    assert grid.input_columns == ("N", "D", "lr", "opt")
    assert grid.categorical_columns == (3,)
    row = grid.configs.index[(grid.configs.N == 2e6) & (grid.configs.lr == 1e-2)][0]
    # N: log 2e6 is the max → 1; lr 1e-2 the max → 1; "adam" < "sgd" → codes 0, 1.
    assert X[row, 0] == 1.0 and X[row, 2] == 1.0
    codes = dict(zip(grid.configs.opt, X[:, 3], strict=True))
    assert codes == {"adam": 0.0, "sgd": 1.0}
    g3 = Grid.from_axes({"N": [1e6, 1e7, 1e8], "D": [1e9], "lr": [0.1]}, n_held_out_cells=0)
    np.testing.assert_allclose(g3.encode()[:, 0], [0.0, 0.5, 1.0])  # log-midpoint
    np.testing.assert_array_equal(g3.encode()[:, 1:], 0.0)  # single value → 0


def test_encode_linear_for_non_positive_axis():
    g = Grid.from_axes({"N": [1e6], "D": [1e9], "wd": [0.0, 0.05, 0.1]}, n_held_out_cells=0)
    np.testing.assert_allclose(g.encode()[:, 2], [0.0, 0.5, 1.0])


def test_index_of_tolerance_and_off_grid(grid):
    runs = grid.configs.iloc[[5, 0, 9]].copy()
    runs["N"] = runs["N"] * (1 + 1e-8)
    np.testing.assert_array_equal(grid.index_of(runs), [5, 0, 9])
    off = pd.DataFrame({"N": [1e6, 1e6], "D": [1e9, 1e9], "lr": [1e-3, 5e-3], "opt": ["sgd"] * 2})
    off.index = ["a", "b"]
    # a non-integer index: rows are named by their 1-based position in the table
    with pytest.raises(SearchError, match=r"1 of 2 rows are not on the grid \(data row 2; "
                                          r"first: .*: lr 0.005 is not a grid value \(nearest "
                                          r"0.01, 50 % away; values match within 1e-06 "
                                          r"relative\)\)"):  # 0.69 from 1e-2 in log
        grid.index_of(off)
    with pytest.raises(SearchError, match=r"first: .*: opt 'sdg' is not a grid value \(the "
                                          r"grid has 'adam', 'sgd'\)"):
        grid.index_of(off.assign(lr=1e-3, opt=["sgd", "sdg"]))
    pairs = Grid.from_frame(pd.DataFrame({"N": [1e6, 2e6], "D": [1e9, 2e9], "lr": [1e-3, 1e-2]}),
                            ["lr"], n_held_out_cells=0)
    with pytest.raises(SearchError, match=r"first: \(N=1e\+06, D=1e\+09, lr=0.01\): each value "
                                          r"is on the grid, but not this combination\)"):
        pairs.index_of(pd.DataFrame({"N": [1e6], "D": [1e9], "lr": [1e-2]}))
    with pytest.raises(SearchError, match="missing"):
        grid.index_of(off.drop(columns="opt"))


def test_from_frame_uses_C_and_rejects_duplicates():
    df = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "N": np.array([10, 10, 20, 30], dtype=np.int64),
            "D": [100, 100, 100, 100],
            "C": [7e3, 7e3, 1.3e4, 2e4],
            "loss": [3.0, 2.9, 2.5, 2.0],
            "lr": [1e-3, 1e-2, 1e-3, 1e-3],
        }
    )
    g = Grid.from_frame(df, n_held_out_cells=1)
    assert g.axes == ("lr",)
    np.testing.assert_allclose(g.cost, [7e3, 7e3, 1.3e4, 2e4])
    np.testing.assert_array_equal(g.held_out, [False, False, False, True])
    dup = pd.concat([df, df.iloc[[0]]])
    with pytest.raises(SearchError, match="average repeated runs"):
        Grid.from_frame(dup)
    # A RunTable-like object: .frame and .hyperparameters
    table = type("T", (), {"frame": df.drop(columns="C"), "hyperparameters": ("lr",)})()
    g2 = Grid.from_frame(table, n_held_out_cells=0)
    np.testing.assert_allclose(g2.cost, 6.0 * 100 * np.array([10, 10, 20, 30]))


def test_from_yaml(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(
        "axes:\n  N: [1e6, 2e6]\n  D: [1.0e9]\n  lr: [0.001, 0.01]\n  opt: [adam, sgd]\n"
        "held_out_cells: 1\n"
    )
    g = Grid.from_yaml(path)
    assert len(g) == 8 and g.axes == ("lr", "opt")
    assert g.configs.N.dtype == np.float64
    assert g.held_out.sum() == 4
    assert g.categorical_axes == ("opt",)
    bad = tmp_path / "bad.yaml"
    bad.write_text("N: [1]\n")
    with pytest.raises(SearchError, match="axes"):
        Grid.from_yaml(bad)
