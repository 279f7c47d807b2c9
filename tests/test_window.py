"""Window caps of each schedule on a hand-made grid, and the admissible mask."""

import math

import numpy as np
import pandas as pd
import pytest

from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop
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


U = 6e15  # FLOPs of the cheapest cell of `ladder`


@pytest.fixture
def ladder() -> Grid:
    # Cells N = 1, 2, 4, 8, 16 (×1e6) at D = 1e9: 1, 2, 4, 8, 16 U FLOPs, three configs (lr)
    # each, rows 3k..3k+2 in cell k; the 16 U cell is held out. Coverage floors (m = 1) of the
    # nested windows: 1, 3, 7, 15 U.
    return Grid.from_axes(
        {"N": [1e6, 2e6, 4e6, 8e6, 16e6], "D": [1e9], "lr": [1e-3, 3e-3, 1e-2]},
        n_held_out_cells=1,
    )


def _cheapest_first_caps(grid, schedule):
    """Caps met by a buyer that always trains the cheapest admissible configuration (lowest
    row on ties), as EI does when it prefers the covered cells below the window's top."""
    obs, caps, spent = np.zeros(grid.n_configs, dtype=bool), [], 0.0
    while True:
        cap = schedule.cap(spent, grid.C_total, grid, obs)
        adm = admissible_mask(grid, obs, None, spent, grid.C_total, cap)
        if not adm.mask.any():
            return caps
        caps.append(adm.cap)
        rows = np.flatnonzero(adm.mask)
        pick = rows[np.argmin(grid.cost[rows])]
        obs[pick], spent = True, spent + grid.cost[pick]


def test_coverage_cap_rises_with_the_floor_when_cheap_cells_are_refilled(ladder):
    caps = np.array(_cheapest_first_caps(ladder, CoverageSchedule(m=1))) / U
    # Asks 0-2 fill cell 0 (1 U each): the 2 U level opens after the first (floor 1 U), the
    # 4 U level once 3 U are spent inside the 2 U window although cell 1 has no run (the
    # "every cell has a run" rule alone kept 2 U until the buyer reached cell 1: 1, 2, 2, 2,
    # 4, 4, 4, 8, ...); the 8 U level once 7 U are spent inside the 4 U window.
    np.testing.assert_allclose(caps, [1, 2, 2, 4, 4, 8, 8, 8, 8, 8, 8, 8])
    caps2 = np.array(_cheapest_first_caps(ladder, CoverageSchedule(m=2))) / U
    # m = 2: floors 2, 6, 14, 30 U; spent after each ask 1, 2, 3, 5, 7, 9, 13, 17, ...
    np.testing.assert_allclose(caps2, [1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8, 8])


def test_coverage_covered_cells_open_the_next_level(ladder):
    s = CoverageSchedule(m=1)
    # One run in every cell of the window (the acquisition covers them): DESIGN.md's rule.
    assert s.cap(0.0, 1.0, ladder, _mask(15, [])) == U
    assert s.cap(0.0, 1.0, ladder, _mask(15, [1])) == 2 * U
    assert s.cap(0.0, 1.0, ladder, _mask(15, [1, 5])) == 4 * U
    assert s.cap(0.0, 1.0, ladder, _mask(15, [1, 5, 6])) == 8 * U
    # A costlier run outside the window does not count for it: 2 U window, 1 U inside.
    assert s.cap(0.0, 1.0, ladder, _mask(15, [1, 9])) == 2 * U


def test_coverage_cap_never_falls_and_ignores_the_budget(ladder):
    rng = np.random.default_rng(0)
    acquirable = np.flatnonzero(~ladder.held_out)
    for m in (1, 2, 3):
        s = CoverageSchedule(m=m)
        obs, last = np.zeros(15, dtype=bool), 0.0
        for row in rng.permutation(acquirable):
            obs[row] = True
            cap = s.cap(0.0, 1.0, ladder, obs)
            assert cap >= last
            assert s.cap(ladder.cost[obs].sum(), 1e30, ladder, obs) == cap
            last = cap
        assert last == 8 * U  # everything observed: the top acquirable level


def test_coverage_floor_uses_the_cheapest_configs_of_a_cell():
    # A compute column: cell (1, 1) holds configs of 1 and 3 FLOPs (cell cost 3), cell (2, 1)
    # two of 4 FLOPs; cell (4, 1) is held out.
    frame = pd.DataFrame(
        {"N": [1.0, 1, 2, 2, 4], "D": [1.0, 1, 1, 1, 1], "lr": [1, 2, 1, 2, 1],
         "C": [1.0, 3, 4, 4, 10]}
    )
    grid = Grid.from_frame(frame, axes=["lr"], n_held_out_cells=1)
    np.testing.assert_allclose(CoverageSchedule(m=1).cell_floor(grid), [1, 4, 0])
    np.testing.assert_allclose(CoverageSchedule(m=2).cell_floor(grid), [4, 8, 0])
    np.testing.assert_allclose(CoverageSchedule(m=5).cell_floor(grid), [4, 8, 0])
    # Covering cell 0 with either config opens the 4-FLOP level.
    assert CoverageSchedule(m=1).cap(0.0, 1.0, grid, _mask(5, [0])) == 4.0
    assert CoverageSchedule(m=1).cap(0.0, 1.0, grid, _mask(5, [1])) == 4.0
    assert CoverageSchedule(m=2).cap(0.0, 1.0, grid, _mask(5, [0])) == 3.0


class _RowOrder:
    """Surrogate predicting loss = grid row (std 1): LCB then picks the lowest admissible
    row, i.e. the cheapest, filling covered cells before the uncovered one."""

    def __init__(self, grid):
        self._row = {tuple(x): i for i, x in enumerate(grid.encode().tolist())}

    def fit(self, X, y):
        return self

    def predict(self, X):
        rows = np.array([self._row[tuple(x)] for x in X.tolist()], dtype=np.float64)
        return rows, np.ones_like(rows)


def test_coverage_loop_reaches_expensive_cells(ladder):
    loop = SearchLoop(ladder, 1.0, _RowOrder(ladder), acquisition="lcb", schedule="coverage",
                      n_initial=1, rng=0)
    while not loop.done:
        loop.tell(loop.ask(), [1.0])
    caps = [t.cap / U for t in loop.trace]
    assert caps[0] == math.inf  # the initial design ignores the cap
    # The initial run fills cell 0 like the buyer's first ask; the loop then follows it.
    np.testing.assert_allclose(caps[1:], [2, 2, 4, 4, 8, 8, 8, 8, 8, 8, 8])
    assert sorted(loop.observed_indices.tolist()) == list(range(12))


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
