"""Fantasization with stub surrogates whose predictions are known."""

import numpy as np
import pytest

from scalebo.errors import SearchError
from scalebo.search.fantasize import extrapolated, fantasize, guard_note
from scalebo.search.grid import Grid
from scalebo.search.law_samples import sample_losses


class ConstStub:
    """Predicts ``mean`` (standardized units) and ``std`` everywhere; independent samples."""

    def __init__(self, mean=0.5, std=1.0):
        self.mean, self.std = mean, std

    def fit(self, X, y):
        self.y = np.array(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.mean), np.full(len(X), self.std)


class RowStub:
    """Deterministic (std 0) prediction per grid row; ``sample_joint`` repeats the mean."""

    def __init__(self, grid, means):
        self._row = {tuple(x): i for i, x in enumerate(grid.encode().tolist())}
        self.means = np.asarray(means, dtype=np.float64)

    def fit(self, X, y):
        return self

    def _m(self, X):
        return self.means[[self._row[tuple(x)] for x in X.tolist()]]

    def predict(self, X):
        return self._m(X), np.zeros(len(X))

    def sample_joint(self, X, n_samples, rng):
        return np.tile(self._m(X), (n_samples, 1))


@pytest.fixture
def grid() -> Grid:
    # Cells: (1e6,1e9) 6e15 rows 0-2, (2e6,1e9) 1.2e16 rows 3-5, (4e6,1e9) 2.4e16 rows 6-8,
    # (8e6,1e9) 4.8e16 rows 9-11 held out.
    return Grid.from_axes(
        {"N": [1e6, 2e6, 4e6, 8e6], "D": [1e9], "lr": [1e-3, 3e-3, 1e-2]}, n_held_out_cells=1
    )


def test_mean_estimator_fills_unobserved_with_predictions(grid):
    # Observed losses 1 and 3: mean 2, SD 1; the stub's standardized 0.5 maps to 2.5 nats.
    out = fantasize(grid, [0, 4], [1.0, 3.0], ConstStub(0.5), scope="grid")
    assert out.grid_index.tolist() == list(range(9))  # held-out rows 9-11 excluded
    assert list(out.columns) == ["N", "D", "C", "lr", "loss", "observed", "grid_index"]
    expected = np.full(9, 2.5)
    expected[[0, 4]] = [1.0, 3.0]
    np.testing.assert_allclose(out.loss, expected)
    assert out.observed.tolist() == [i in (0, 4) for i in range(9)]


def test_window_scope(grid):
    # Default cap: the largest cell cost with an observation (cell of row 4, 1.2e16).
    out = fantasize(grid, [0, 4], [1.0, 3.0], ConstStub())
    assert out.grid_index.tolist() == list(range(6))
    out = fantasize(grid, [0, 4], [1.0, 3.0], ConstStub(), cap=6e15)
    assert out.grid_index.tolist() == [0, 1, 2, 4]  # observed rows always kept
    out = fantasize(grid, [0], [1.0], ConstStub(), cap=1e30)
    assert out.grid_index.tolist() == list(range(9))


def test_cell_best_deterministic_equals_min_of_means(grid):
    means = np.array([-0.3, 9.0, 0.1, 0.4, 0.0, 0.9, -1.0, 0.2, 0.6, 0, 0, 0])
    # One observation (row 1, 2.5 nats): scale mean 2.5, SD 1, so m maps to 2.5 + m nats.
    out = fantasize(grid, [1], [2.5], RowStub(grid, means), scope="grid", estimator="cell_best")
    assert out.N.tolist() == [1e6, 2e6, 4e6]  # one row per acquirable cell
    # Cell 0: min(2.2, observed 2.5, 2.6) = 2.2 at row 0.  Cell 1: min(2.9, 2.5, 3.4) = 2.5
    # at row 4.  Cell 2: min(1.5, 2.7, 3.1) = 1.5 at row 6.
    np.testing.assert_allclose(out.loss, [2.2, 2.5, 1.5])
    assert out.grid_index.tolist() == [0, 4, 6]
    assert out.lr.tolist() == [1e-3, 3e-3, 1e-3]
    np.testing.assert_allclose(out.p_best, 1.0)
    assert not out.observed.any()
    # Observations 0 and 10 nats (scale mean 5, SD 5): cell 0 predicts 3.5 and 5.5, so the
    # observed 0.0 at row 1 is the cell's best.
    out = fantasize(
        grid, [1, 3], [0.0, 10.0], RowStub(grid, means), scope="grid", estimator="cell_best"
    )
    assert out.loss[0] == 0.0 and out.observed[0] and out.grid_index[0] == 1
    assert out.loss[1] == pytest.approx(5.0)  # row 4: 5 + 5·0.0 beats observed 10


def test_cell_best_expected_minimum_of_independent_normals(grid):
    # Observations row 0 = 4, row 3 = 0 nats: scale mean 2, SD 2. The stub predicts −3
    # (standardized) with SD 1 for rows 1, 2, i.e. independent N(−4, 2²) nats. Cell 0's best
    # is min(4, X1, X2) ≈ min(X1, X2) (P(X > 4) = 3e-5), whose mean is −4 − 2/√π.
    out = fantasize(
        grid, [0, 3], [4.0, 0.0], ConstStub(-3.0, 1.0), estimator="cell_best",
        n_samples=40000, rng=0,
    )
    assert len(out) == 2  # cells 0 and 1 (window cap: 1.2e16)
    assert out.loss[0] == pytest.approx(-4.0 - 2.0 / np.sqrt(np.pi), abs=0.03)
    # The minimum of posterior means would give −4: the estimator is lower, as it should be.
    kwargs = dict(estimator="cell_best", n_samples=100, rng=4)
    same = fantasize(grid, [0, 3], [4.0, 0.0], ConstStub(-3.0, 1.0), **kwargs)
    again = fantasize(grid, [0, 3], [4.0, 0.0], ConstStub(-3.0, 1.0), **kwargs)
    assert same.loss.tolist() == again.loss.tolist()  # seeded


def test_validation(grid):
    with pytest.raises(SearchError, match="at least one"):
        fantasize(grid, [], [], ConstStub())
    with pytest.raises(SearchError, match="distinct"):
        fantasize(grid, [0, 0], [1.0, 2.0], ConstStub())
    with pytest.raises(SearchError, match="finite"):
        fantasize(grid, [0], [np.nan], ConstStub())
    with pytest.raises(SearchError, match="estimator"):
        fantasize(grid, [0], [1.0], ConstStub(), estimator="median")
    with pytest.raises(SearchError, match="scope"):
        fantasize(grid, [0], [1.0], ConstStub(), scope="cell")
    with pytest.raises(SearchError, match="non-finite"):
        fantasize(grid, [0], [1.0], ConstStub(np.nan), scope="grid")


# ------------------------------------------------------------------ extrapolation guard
class StdStub(RowStub):
    """Per-row means and standard deviations (standardized units)."""

    def __init__(self, grid, means, stds):
        super().__init__(grid, means)
        self.stds = np.asarray(stds, dtype=np.float64)

    def predict(self, X):
        return self._m(X), self.stds[[self._row[tuple(x)] for x in X.tolist()]]


def test_extrapolated_by_hand():
    cells = np.array([0, 0, 0, 1, 1])
    std = np.array([1.0, 2.0, 6.0, 3.0, 3.0])
    # cell 0: 5 x its smallest (1) = 5 -> only 6; ratio 1.5 -> 2 and 6; cell 1: never
    assert extrapolated(cells, std, 5.0).tolist() == [False, False, True, False, False]
    assert extrapolated(cells, std, 1.5).tolist() == [False, True, True, False, False]
    assert not extrapolated(cells, std, None).any()
    assert not extrapolated(cells, std, np.inf).any()
    # cells need not be sorted or contiguous
    assert extrapolated(np.array([7, 3, 7]), np.array([1.0, 9.0, 6.0]), 5.0).tolist() == [
        False, False, True]
    with pytest.raises(SearchError, match=">= 1"):
        extrapolated(cells, std, 0.5)


def test_fill_in_leaves_out_a_far_extrapolated_corner(grid):
    # Rows 0-2 one cell, 3-5 the next, 6-8 the third. Row 5: a mean far under everything
    # observed, with 10x the std of its cell's most certain row -> left out of the table;
    # every cell keeps its rows otherwise.
    means = np.zeros(12)
    means[5] = -8.0
    stds = np.full(12, 0.1)
    stds[5] = 1.0
    stub = StdStub(grid, means, stds)
    out = fantasize(grid, [0, 3], [1.0, 3.0], stub, scope="grid")
    assert 5 not in out.grid_index.tolist() and out.attrs["n_extrapolated"] == 1
    assert sorted(out.grid_index.tolist()) == [0, 1, 2, 3, 4, 6, 7, 8]
    kept = fantasize(grid, [0, 3], [1.0, 3.0], stub, scope="grid", max_std_ratio=None)
    assert kept.grid_index.tolist() == list(range(9)) and kept.attrs["n_extrapolated"] == 0
    assert kept.loss.min() == pytest.approx(2.0 - 8.0)  # what the guard keeps out
    # cell_best: the cell of row 5 takes its best from rows 3-4 only
    cb = fantasize(grid, [0, 3], [1.0, 3.0], stub, scope="grid", estimator="cell_best")
    assert cb.loss.min() >= 1.0 and cb.attrs["n_extrapolated"] == 1
    # the law posterior's scope leaves out the same row
    rows, _ = sample_losses(grid, [0, 3], [1.0, 3.0], stub, scope="grid", n_samples=4, rng=0)
    assert 5 not in rows.tolist() and len(rows) == 8


def test_guard_note():
    assert guard_note(0, 5.0) == ""
    assert guard_note(2, 5.0).startswith("2 unobserved configuration(s) left out")


def test_replay_command_takes_a_guard_ratio_and_refuses_a_bad_one(capsys):
    """``scalebo replay --extrapolation-guard RATIO`` (unset: the method's default 5; 0: off,
    labelled ``no-guard``); a ratio in (0, 1) or a word is a usage error saying what is
    expected."""
    from scalebo.bench.method import MethodConfig
    from scalebo.cli.main import build_parser

    parser = build_parser()
    base = ["replay", "--dataset", "x.csv"]
    assert parser.parse_args(base).extrapolation_guard is None
    assert MethodConfig().extrapolation_guard == 5.0 and MethodConfig().max_std_ratio == 5.0
    assert parser.parse_args([*base, "--extrapolation-guard", "3"]).extrapolation_guard == 3.0
    off = MethodConfig(extrapolation_guard=0.0)
    assert off.max_std_ratio is None and off.label().endswith("no-guard")
    for bad in ("0.5", "-1", "many"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--extrapolation-guard", bad])
        assert "expected a ratio" in capsys.readouterr().err
    with pytest.raises(ValueError, match="extrapolation_guard"):
        MethodConfig(extrapolation_guard=0.5)
