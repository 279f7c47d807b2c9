"""Cost models, by hand: WSD families share their stable phase; the loop's budget and
admissibility use the marginal cost."""

import numpy as np
import pytest

from scalebo.errors import SearchError
from scalebo.search.cost_model import CostModel, families
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop


@pytest.fixture
def grid():
    return Grid.from_axes({"N": [1e8, 2e8], "D": [1e9, 2e9, 4e9, 8e9], "lr": [1e-3, 3e-3]},
                          n_held_out_cells=0)


def _rows(grid, **where):
    ok = np.ones(len(grid), dtype=bool)
    for k, v in where.items():
        ok &= np.isclose(grid.configs[k].to_numpy(float), v)
    return ok


def test_wsd_family_cost_by_hand(grid):
    fam = families(grid)
    assert len(set(fam.tolist())) == 4  # (N, lr) pairs; D varies inside a family
    wsd = CostModel("wsd", cooldown=0.1)
    first = _rows(grid, N=1e8, lr=1e-3) & (grid.configs["D"] <= 4e9).to_numpy()
    # 6·N·((1 − f)·max D + f·Σ D) = 6e8·(0.9·4e9 + 0.1·7e9) = 2.58e18 FLOPs
    assert wsd.total(grid, first) == pytest.approx(2.58e18)
    assert CostModel().total(grid, first) == pytest.approx(6e8 * 7e9)  # independent: the sum
    extend = int(np.flatnonzero(_rows(grid, N=1e8, lr=1e-3, D=8e9))[0])
    # adding D = 8e9: 6e8·(0.9·(8e9 − 4e9) + 0.1·8e9) = 2.64e18, and the totals agree
    marginal = wsd.marginal(grid, first)
    assert marginal[extend] == pytest.approx(2.64e18)
    both = first.copy()
    both[extend] = True
    assert wsd.total(grid, both) == pytest.approx(2.58e18 + 2.64e18)
    other = int(np.flatnonzero(_rows(grid, N=2e8, lr=3e-3, D=1e9))[0])
    assert marginal[other] == pytest.approx(1.2e9 * 1e9)  # a new family: its own run
    assert np.all(marginal[first] == 0)
    shorter = int(np.flatnonzero(_rows(grid, N=1e8, lr=3e-3, D=2e9))[0])
    seen = _rows(grid, N=1e8, lr=3e-3, D=8e9)
    assert wsd.marginal(grid, seen)[shorter] == pytest.approx(0.1 * 6e8 * 2e9)  # a cooldown
    with pytest.raises(SearchError, match="cooldown"):
        CostModel("wsd", cooldown=1.5)
    with pytest.raises(SearchError, match="unknown cost model"):
        CostModel("cosine")


def test_loop_buys_more_under_wsd_and_never_overruns(grid):
    runs = {}
    for kind in ("independent", "wsd"):
        model = CostModel(kind)
        loop = SearchLoop(grid, 0.3, None, acquisition="random", n_initial=0,
                          cost_model=model, rng=0)
        while not loop.done:
            (pick,) = loop.ask(1)
            assert loop.trace[-1].cost <= float(grid.cost[pick])  # marginal ≤ its own run
            loop.tell([pick], [3.0])
        mask = np.zeros(len(grid), dtype=bool)
        mask[loop.observed_indices] = True
        assert loop.spent == pytest.approx(model.total(grid, mask))
        assert loop.spent <= loop.budget * (1 + 1e-9)
        runs[kind] = loop.observed_indices.size
    assert runs["wsd"] > runs["independent"]


def test_a_failed_run_shares_no_stable_phase(grid):
    """A crashed run leaves no checkpoint to branch from: its siblings cost a full run, and
    the failure itself is charged its own cost (found in review)."""
    long = int(np.flatnonzero(_rows(grid, N=1e8, lr=1e-3, D=4e9))[0])
    short = int(np.flatnonzero(_rows(grid, N=1e8, lr=1e-3, D=1e9))[0])
    loop = SearchLoop(grid, 0.5, None, acquisition="random", n_initial=0,
                      cost_model=CostModel("wsd"), rng=0)
    loop.mark_failed([long])
    assert loop.marginal_cost()[short] == pytest.approx(float(grid.cost[short]))
    assert loop.spent == pytest.approx(float(grid.cost[long]))
    loop.tell([short], [3.0])
    assert loop.spent == pytest.approx(float(grid.cost[long] + grid.cost[short]))
