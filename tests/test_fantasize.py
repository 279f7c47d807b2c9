"""Fantasization with stub surrogates whose predictions are known."""

import numpy as np
import pytest

from scalebo.errors import SearchError
from scalebo.search.fantasize import fantasize
from scalebo.search.grid import Grid


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
