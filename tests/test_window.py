"""Window caps of each schedule on a hand-made grid, and the admissible mask."""

import math

import numpy as np
import pytest

from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.window import (
    CoverageSchedule,
    FullSchedule,
    SpentSchedule,
    SweepSchedule,
    WindowSchedule,
    admissible_mask,
    make_schedule,
)


@pytest.fixture
def grid() -> Grid:
    # Cells N = 1e6, 2e6, 4e6, 8e6 at D = 1e9: costs 6e15, 1.2e16, 2.4e16, 4.8e16 FLOPs, two
    # configs (lr) each, rows 2k and 2k+1 in cell k; the 4.8e16 cell is held out.
    return Grid.from_axes(
        {"N": [1e6, 2e6, 4e6, 8e6], "D": [1e9], "lr": [1e-3, 1e-2]}, n_held_out_cells=1
    )


def _mask(n, rows):
    m = np.zeros(n, dtype=bool)
    m[list(rows)] = True
    return m


def test_full_schedule_has_no_cap(grid):
    assert FullSchedule().cap(0.0, 1e17, grid, _mask(8, [])) == math.inf


def test_sweep_schedule_log_linear(grid):
    s = SweepSchedule()
    none = _mask(8, [])
    assert s.cap(0.0, 1e17, grid, none) == pytest.approx(6e15)
    # u = 0.5: geometric mean of c_min = 6e15 and c_max = 2.4e16 (held-out cell excluded).
    assert s.cap(5e16, 1e17, grid, none) == pytest.approx(1.2e16)
    assert s.cap(1e17, 1e17, grid, none) == pytest.approx(2.4e16)
    assert s.cap(3e17, 1e17, grid, none) == pytest.approx(2.4e16)  # u clipped at 1


def test_spent_schedule(grid):
    none = _mask(8, [])
    assert SpentSchedule().cap(0.0, 1e17, grid, none) == 6e15
    assert SpentSchedule().cap(2e16, 1e17, grid, none) == 2e16
    assert SpentSchedule(gamma=2.0).cap(2e16, 1e17, grid, none) == 4e16
    with pytest.raises(SearchError, match="gamma"):
        SpentSchedule(gamma=0.0)


def test_coverage_schedule(grid):
    s1, s2 = CoverageSchedule(m=1), CoverageSchedule(m=2)
    assert s1.cap(0.0, 1e17, grid, _mask(8, [])) == 6e15
    assert s1.cap(0.0, 1e17, grid, _mask(8, [0])) == 1.2e16  # cell 0 covered
    assert s2.cap(0.0, 1e17, grid, _mask(8, [0])) == 6e15  # needs both configs of cell 0
    assert s2.cap(0.0, 1e17, grid, _mask(8, [0, 1])) == 1.2e16
    # Cell 2 observed but cell 1 not: the window stays at cell 1's level.
    assert s1.cap(0.0, 1e17, grid, _mask(8, [0, 4])) == 1.2e16
    # All acquirable cells covered: the top acquirable level (held-out cell never admitted).
    assert s1.cap(0.0, 1e17, grid, _mask(8, [0, 2, 4])) == 2.4e16
    # m larger than a cell: covered when all of its configs are observed.
    assert CoverageSchedule(m=5).cap(0.0, 1e17, grid, _mask(8, [0, 1])) == 1.2e16


def test_admissible_mask_hard_constraints(grid):
    obs, pend = _mask(8, [0]), _mask(8, [2])
    adm = admissible_mask(grid, obs, pend, spent=1.8e16, budget=4.2e16, cap=math.inf)
    # Remaining 2.4e16: rows 1, 3 (cheap), 4, 5 (2.4e16, exactly fits); 6, 7 held out.
    np.testing.assert_array_equal(np.flatnonzero(adm.mask), [1, 3, 4, 5])
    assert adm.cap == math.inf
    adm = admissible_mask(grid, obs, pend, spent=1.8e16, budget=4.1e16, cap=1.2e16)
    np.testing.assert_array_equal(np.flatnonzero(adm.mask), [1, 3])
    assert adm.cap == 1.2e16


def test_cap_rises_to_next_level_when_nothing_fits(grid):
    obs = _mask(8, [0, 1])  # the cheapest cell is exhausted
    adm = admissible_mask(grid, obs, None, spent=1.2e16, budget=1e17, cap=6e15)
    assert adm.cap == 1.2e16
    np.testing.assert_array_equal(np.flatnonzero(adm.mask), [2, 3])
    # Cells 0 and 1 exhausted, cap between levels: rises straight to 2.4e16.
    adm = admissible_mask(grid, _mask(8, range(4)), None, spent=3.6e16, budget=1e17, cap=7e15)
    assert adm.cap == 2.4e16
    np.testing.assert_array_equal(np.flatnonzero(adm.mask), [4, 5])


def test_nothing_affordable_gives_empty_mask(grid):
    obs = _mask(8, [0, 1])
    adm = admissible_mask(grid, obs, None, spent=1.2e16, budget=2.0e16, cap=6e15)
    assert not adm.mask.any()  # cheapest left costs 1.2e16 > 8e15 remaining
    assert adm.cap == 6e15


def test_admissible_mask_validates(grid):
    with pytest.raises(SearchError, match="shape"):
        admissible_mask(grid, np.zeros(3, dtype=bool), None, 0.0, 1e17, math.inf)
    with pytest.raises(SearchError, match="budget"):
        admissible_mask(grid, None, None, 0.0, 0.0, math.inf)


def test_make_schedule():
    assert isinstance(make_schedule("sweep"), SweepSchedule)
    assert make_schedule("spent", gamma=3.0) == SpentSchedule(3.0)
    assert make_schedule("coverage", m=2) == CoverageSchedule(2)
    assert isinstance(make_schedule("FULL"), FullSchedule)
    custom = SpentSchedule(2.0)
    assert make_schedule(custom) is custom
    assert isinstance(custom, WindowSchedule)
    with pytest.raises(SearchError, match="expected one of"):
        make_schedule("linear")
