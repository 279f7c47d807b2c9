"""The ask/tell search loop, driven by stub surrogates with known predictions."""

import numpy as np
import pytest

from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop, Suggestion
from scalebo.search.window import initial_design


class TableStub:
    """Predicts a fixed mean per grid row (found from the encoded X) and a constant std."""

    def __init__(self, grid, means, std=1.0):
        self._row = {tuple(x): i for i, x in enumerate(grid.encode().tolist())}
        self.means = np.asarray(means, dtype=np.float64)
        self.std = std
        self.fits = []

    def rows(self, X):
        return np.array([self._row[tuple(x)] for x in X.tolist()])

    def fit(self, X, y):
        self.fits.append((self.rows(X), np.array(y)))
        return self

    def predict(self, X):
        r = self.rows(X)
        return self.means[r], np.full(r.size, self.std)


class ConditionStub(TableStub):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.conditioned = []

    def condition_on(self, X_new, y_new):
        self.conditioned.append((self.rows(X_new), np.array(y_new)))
        return self


class WarmStub(TableStub):
    def fit(self, X, y, warm_start=False):
        self.fits.append((self.rows(X), np.array(y), warm_start))
        return self


def loop_grid() -> Grid:
    # Cells (N, D): 6e15, 1.2e16 ×2, 2.4e16 ×2, 4.8e16 ×2, 9.6e16 FLOPs; 3 lrs per cell.
    # Held out: (8e6, 2e9) at 9.6e16 and (8e6, 1e9) at 4.8e16.
    return Grid.from_axes({"N": [1e6, 2e6, 4e6, 8e6], "D": [1e9, 2e9], "lr": [1e-3, 3e-3, 1e-2]})


grid = pytest.fixture(loop_grid, name="grid")


def _truth(grid):
    c = grid.configs
    return 2.0 - 0.1 * np.log(c.N.to_numpy() / 1e6) + (np.log10(c.lr.to_numpy()) + 2.5) ** 2


def test_initial_design_identical_across_strategies(grid):
    asks = []
    for schedule in ("full", "sweep", "spent", "coverage"):
        for acq in ("ei", "lcb"):
            loop = SearchLoop(
                grid, 0.5, TableStub(grid, np.zeros(24)), acquisition=acq, schedule=schedule,
                n_initial=4, rng=11,
            )
            asks.append(loop.ask(4))
    assert all(a == asks[0] for a in asks)
    # 4 configs: the cheapest cell has 3, so the design takes the next level too.
    assert len(set(asks[0])) == 4
    assert set(grid.cell_ids[asks[0]]) <= {0, 1, 2}
    assert initial_design(grid, 4, rng=11).tolist() == asks[0]
    small = initial_design(grid, 2, rng=3)
    assert set(grid.cell_ids[small]) == {0}  # fits in the cheapest cell


def test_acquisition_picks_lowest_lcb_under_the_cap(grid):
    means = np.linspace(1.0, -1.0, 24)  # the costliest rows predict the lowest loss
    loop = SearchLoop(grid, 0.5, TableStub(grid, means), acquisition="lcb", schedule="full",
                      n_initial=1, rng=0)
    first = loop.ask()[0]
    loop.tell(first, 2.0)
    # Constant std: LCB picks the lowest mean among admissible rows, i.e. the largest
    # acquirable row index (rows 18..23 are held out).
    assert loop.ask() == [17]
    sweep = SearchLoop(grid, 0.5, TableStub(grid, means), acquisition="lcb", schedule="sweep",
                       n_initial=1, rng=0)
    sweep.tell(sweep.ask()[0], 2.0)
    pick = sweep.ask()[0]
    assert grid.cost[pick] <= sweep.trace[-1].cap * (1 + 1e-9)
    assert sweep.trace[-1].cap < grid.compute_levels[-1]


def test_budget_stop_and_held_out_never_asked(grid):
    truth = _truth(grid)
    for schedule in ("full", "sweep", "coverage"):
        loop = SearchLoop(grid, 0.3, TableStub(grid, -truth), schedule=schedule, rng=1)
        while not loop.done:
            for i in loop.ask(2):
                loop.tell(i, truth[i])
        assert loop.ask() == []
        assert loop.spent <= loop.budget * (1 + 1e-12)
        left = ~grid.held_out & ~np.isin(np.arange(24), loop.observed_indices)
        assert np.all(grid.cost[left] > loop.remaining)
        assert not grid.held_out[loop.observed_indices].any()
    full = SearchLoop(grid, 1.0, TableStub(grid, truth), schedule="sweep", rng=2)
    while not full.done:
        for i in full.ask():
            full.tell(i, truth[i])
    # The whole acquirable grid fits a budget of C_total; held-out rows are never asked.
    assert sorted(full.observed_indices.tolist()) == np.flatnonzero(~grid.held_out).tolist()
    assert full.spent == pytest.approx(grid.C_total)


def test_kriging_believer_batch_with_condition_on(grid):
    means = np.arange(24, dtype=float)  # lower rows predict lower loss
    stub = ConditionStub(grid, means)
    loop = SearchLoop(grid, 0.5, stub, acquisition="lcb", schedule="full", n_initial=2, rng=0)
    for i in loop.ask(2):
        loop.tell(i, 3.0 + i)
    free = [i for i in range(24) if i not in loop.observed_indices]
    loop.mark_pending(free[0])
    batch = loop.ask(3)
    # Distinct, none observed or pending; the stub's means do not change when conditioned,
    # so the batch is the next three lowest-mean admissible rows.
    assert batch == free[1:4]
    # Pending row first, then each pick, believed at the predicted mean.
    assert [c[0].tolist() for c in stub.conditioned] == [[free[0]], [free[1]], [free[2]]]
    assert [c[1].tolist() for c in stub.conditioned] == [[free[0]], [free[1]], [free[2]]]
    assert set(loop.pending_indices) == {free[0], *batch}


def test_kriging_believer_refits_without_condition_on(grid):
    means = np.arange(24, dtype=float)
    stub = TableStub(grid, means)
    loop = SearchLoop(grid, 0.5, stub, acquisition="lcb", schedule="full", n_initial=2, rng=0)
    obs = loop.ask(2)
    loop.tell(obs, [3.0, 4.0])
    batch = loop.ask(2)
    assert len(set(batch)) == 2 and not set(batch) & set(obs)
    # First fit on the two observations (standardized: ∓1), then a refit with the first
    # pick believed at its predicted mean.
    rows0, y0 = stub.fits[0]
    assert sorted(rows0.tolist()) == sorted(obs) and np.allclose(sorted(y0), [-1.0, 1.0])
    rows1, y1 = stub.fits[1]
    assert rows1.tolist()[-1] == batch[0] and y1[-1] == means[batch[0]]


def test_warm_start_after_first_fit(grid):
    stub = WarmStub(grid, np.zeros(24))
    loop = SearchLoop(grid, 0.5, stub, n_initial=3, rng=0)
    idx = loop.ask(3)
    loop.tell(idx, [2.0, 2.5, 4.0])
    loop.tell(loop.ask()[0], 3.0)
    loop.ask()
    assert [f[2] for f in stub.fits] == [False, True]
    y = stub.fits[1][1]
    assert y.mean() == pytest.approx(0.0) and y.std() == pytest.approx(1.0)


def test_pending_cost_is_committed(grid):
    loop = SearchLoop(grid, 0.2, TableStub(grid, np.zeros(24)), n_initial=0, rng=0)
    before = loop.remaining
    loop.mark_pending(10)
    assert loop.spent == 0.0
    assert loop.remaining == pytest.approx(before - grid.cost[10])
    loop.cancel(10)
    assert loop.remaining == pytest.approx(before)


def test_tell_validation(grid):
    loop = SearchLoop(grid, 0.2, TableStub(grid, np.zeros(24)), n_initial=1, rng=0)
    i = loop.ask()[0]
    loop.tell(i, 2.0)
    with pytest.raises(SearchError, match="already observed"):
        loop.tell(i, 2.1)
    with pytest.raises(SearchError, match="outside the grid"):
        loop.tell(99, 2.0)
    with pytest.raises(SearchError, match="finite"):
        loop.tell(1 if i != 1 else 2, float("nan"))
    with pytest.raises(SearchError, match="held-out"):
        loop.tell(int(np.flatnonzero(grid.held_out)[0]), 2.0)
    with pytest.raises(SearchError, match="repeat"):
        loop.tell([3, 3], [2.0, 2.0])
    with pytest.raises(SearchError, match="one per index"):
        loop.tell([3, 4], [2.0])
    assert loop.observed_indices.tolist() == [i]


def test_random_picks_before_any_observation(grid):
    loop = SearchLoop(grid, 0.5, TableStub(grid, np.zeros(24)), n_initial=2, rng=0)
    picks = loop.ask(5)
    assert len(set(picks)) == 5
    assert all(e.predicted_mean is None for e in loop.trace)
    assert loop.trace[-1].cumulative_cost == pytest.approx(grid.cost[picks].sum())


def test_suggest_explains(grid):
    loop = SearchLoop(grid, 0.5, TableStub(grid, np.zeros(24), std=0.5), n_initial=2, rng=0)
    first = loop.suggest(2)
    assert all(isinstance(s, Suggestion) and "initial design" in s.reason for s in first)
    loop.tell([s.index for s in first], [2.0, 3.0])
    (s,) = loop.suggest()
    assert "max log EI per unit cost" in s.reason and "envelope incumbent" in s.reason
    assert s.config["N"] == grid.configs.N[s.index] and s.cost == grid.cost[s.index]
    # Predictions are reported in nats: the stub's 0 and 0.5 map to mean 2.5, std 0.25.
    assert s.predicted_mean == pytest.approx(2.5) and s.predicted_std == pytest.approx(0.25)


def test_constructor_validation(grid):
    with pytest.raises(SearchError, match="budget_fraction"):
        SearchLoop(grid, 0.0, TableStub(grid, np.zeros(24)))
    with pytest.raises(SearchError, match="Unknown acquisition"):
        SearchLoop(grid, 0.1, TableStub(grid, np.zeros(24)), acquisition="ucb")
    with pytest.raises(SearchError, match="incumbent"):
        SearchLoop(grid, 0.1, TableStub(grid, np.zeros(24)), incumbent="local")
    with pytest.raises(SearchError, match="fit"):
        SearchLoop(grid, 0.1, object())


def test_frontier_incumbent_favours_the_costlier_cell_where_global_does_not():
    # Two acquirable cells: A = rows 0-2 (6e15 FLOPs), B = rows 3-5 (1.2e16 FLOPs).
    g = Grid.from_axes({"N": [1e6, 2e6, 4e6, 8e6], "D": [1e9], "lr": [1e-3, 3e-3, 1e-2]})
    # Observed A: 1.0, B: 3.0 nats → standardized −1, +1. Stub predicts 0.0 in A, 0.5 in B
    # (standardized), std 0.1. Global incumbent −1: z_A = −10 > z_B = −15 → a row of A.
    # Frontier incumbents −1 (A) and +1 (B): z_A = −10 < z_B = +5 → a row of B.
    means = np.r_[np.zeros(3), np.full(3, 0.5), np.zeros(6)]
    picks = {}
    for incumbent in ("global", "frontier"):
        loop = SearchLoop(g, 1.0, TableStub(g, means, std=0.1), incumbent=incumbent,
                          schedule="full", n_initial=0, rng=0)
        loop.tell([0, 3], [1.0, 3.0])
        picks[incumbent] = loop.ask()[0]
    assert picks["global"] in (1, 2)
    assert picks["frontier"] in (4, 5)


def test_refit_every_conditions_between_refits(grid):
    stub = ConditionStub(grid, np.arange(24, dtype=float))
    loop = SearchLoop(grid, 1.0, stub, schedule="full", n_initial=2, refit_every=3, rng=0)
    loop.tell(loop.ask(2), [2.0, 4.0])  # y scale at the first fit: mean 3, SD 1
    told = []
    for k in range(4):
        i = loop.ask()[0]
        loop.tell(i, 5.0 + k)
        told.append(i)
    # Asks 1-3 use the fit from ask 1, conditioned on every observation since that fit with
    # the frozen scale ((5 − 3)/1 = 2, (6 − 3)/1 = 3); ask 4 refits on all five observations.
    assert len(stub.fits) == 2
    assert [c[0].tolist() for c in stub.conditioned] == [[told[0]], told[:2]]
    assert [c[1].tolist() for c in stub.conditioned] == [[2.0], [2.0, 3.0]]
    assert len(stub.fits[1][0]) == 5
    with pytest.raises(SearchError, match="refit_every"):
        SearchLoop(grid, 1.0, stub, refit_every=0)


def test_window_cap_is_the_final_window_of_the_schedule(grid):
    """``spent``: the cap is the compute spent (never below the costliest observed run, nor
    the cheapest level); ``full``: no window at all."""
    truth = _truth(grid)
    loop = SearchLoop(grid, 0.3, TableStub(grid, -truth), schedule="spent", n_initial=2, rng=0)
    assert loop.window_cap() == pytest.approx(grid.compute_levels[0])  # nothing spent yet
    while not loop.done:
        for i in loop.ask():
            loop.tell(i, truth[i])
    costliest = grid.cost[loop.observed_indices].max()
    assert loop.window_cap() == pytest.approx(max(loop.spent, costliest))
    assert loop.window_cap() >= costliest
    full = SearchLoop(grid, 0.3, TableStub(grid, -truth), schedule="full", n_initial=2, rng=0)
    full.tell(full.ask()[0], 1.0)
    assert np.isinf(full.window_cap())


def test_random_order_is_uniform_over_positions():
    """acquisition='random': each configuration's position in the order is uniform over
    seeds (chi-square on a position × configuration table), whatever the incumbent."""
    from scipy.stats import chisquare

    grid = Grid.from_axes({"N": [1e6, 2e6], "D": [1e9, 2e9], "lr": [1e-3, 3e-3]},
                          n_held_out_cells=0)
    n, seeds = grid.n_configs, 800
    counts = np.zeros((n, n))  # configuration × position
    for seed in range(seeds):
        loop = SearchLoop(grid, 1.0, None, acquisition="random", schedule="full",
                          n_initial=0, rng=seed)
        order = []
        while picks := loop.ask():
            loop.tell(picks, [float(len(order) + 1)])  # increasing losses: EI would never repeat
            order.extend(picks)
        assert sorted(order) == list(range(n))
        counts[order, np.arange(n)] += 1
    p = chisquare(counts.ravel(), np.full(n * n, seeds / n)).pvalue
    assert p > 1e-3, counts


def test_random_order_ignores_the_incumbent_and_the_candidate_count(grid):
    """Same seed: the same rows come first among any admissible subset, so a random order
    restricted by a smaller budget is the prefix-consistent restriction of the same order."""
    a = SearchLoop(grid, 1.0, None, acquisition="random", schedule="full", n_initial=0,
                   incumbent="frontier", rng=3)
    b = SearchLoop(grid, 1.0, None, acquisition="random", schedule="full", n_initial=0,
                   incumbent="global", rng=3)
    order_a, order_b = [], []
    for loop, order in ((a, order_a), (b, order_b)):
        while picks := loop.ask(2):
            loop.tell(picks, [1.0] * len(picks))
            order.extend(picks)
    assert order_a == order_b
    assert all(t.predicted_mean is None for t in a.trace)
    with pytest.raises(SearchError, match="surrogate"):
        SearchLoop(grid, 1.0, None, acquisition="ei")


def test_trace_entries_carry_their_configuration(grid):
    loop = SearchLoop(grid, 0.5, None, acquisition="random", n_initial=2, rng=0)
    loop.ask(3)
    for t in loop.trace:
        row = grid.configs.iloc[t.index]
        assert t.config == {"N": row.N, "D": row.D, "C": row.C, "lr": row.lr}
        assert all(type(v) is float for v in t.config.values())


def test_target_without_joint_samples_falls_back_to_ei_and_says_why(grid):
    truth = _truth(grid)

    def run(acq):
        loop = SearchLoop(grid, 0.4, TableStub(grid, truth, std=0.3), acquisition=acq,
                          schedule="full", n_initial=2, rng=4)
        out = []
        while not loop.done:
            for s in loop.suggest(2):
                loop.tell(s.index, truth[s.index])
                out.append(s)
        return out

    ei, target = run("ei"), run("target")
    assert [s.index for s in target] == [s.index for s in ei]  # EI stood in for every pick
    scored = [s for s in target if s.acquisition_value is not None]
    assert scored and all(s.reason.startswith("target fallback to EI (the surrogate has no "
                                              "sample_joint") for s in scored)
    assert all("max log EI" in s.reason for s in scored)


def test_ei_per_unit_cost_prefers_the_cheaper_of_two_equal_posteriors():
    """Two unobserved configurations with the same posterior but costs 1:4 — EI per cost
    (γ = 1, the default) picks the cheaper; γ = 0 picks the costlier, whose EI is higher."""
    g = Grid.from_axes({"N": [1e6, 4e6], "D": [1e9], "lr": [1e-3, 1e-2]}, n_held_out_cells=0)
    row = {(n, lr): i for i, (n, lr) in enumerate(zip(g.configs.N, g.configs.lr, strict=True))}
    obs = [row[1e6, 1e-3], row[4e6, 1e-3]]
    means = np.zeros(g.n_configs)
    means[row[1e6, 1e-2]], means[row[4e6, 1e-2]] = -1.0, -1.2  # standardized units
    picks = {}
    for gamma in (1.0, 0.0):
        loop = SearchLoop(g, 1.0, TableStub(g, means, std=0.5), schedule="full", n_initial=0,
                          incumbent="global", ei_cost_power=gamma, rng=0)
        loop.tell(obs, [3.0, 3.0])
        (s,) = loop.suggest()
        picks[gamma] = s.index
    assert picks[1.0] == row[1e6, 1e-2]  # EI ratio < 4 = cost ratio
    assert picks[0.0] == row[4e6, 1e-2]
    with pytest.raises(SearchError, match="ei_cost_power"):
        SearchLoop(g, 1.0, TableStub(g, means), ei_cost_power=-1.0)


def test_a_surrogate_fitted_on_the_same_runs_is_reused_not_a_believer_refit(grid):
    """Two questions at one state (the anchor's dominance, then the pick) cost one fit;
    a surrogate refitted with believed values (no condition_on) is never reused as if it
    were fitted on the observed runs only."""
    stub = TableStub(grid, np.arange(24, dtype=float))
    loop = SearchLoop(grid, 0.5, stub, acquisition="lcb", schedule="full", n_initial=2, rng=0)
    obs = loop.ask(2)
    loop.tell(obs, [3.0, 4.0])
    first = loop._posterior()
    assert loop._posterior()[0] is first[0] and len(stub.fits) == 1
    np.testing.assert_array_equal(loop._posterior()[1], [-1.0, 1.0])  # standardized y
    loop.ask(2)  # the second pick refits the surrogate on a believed value
    assert len(stub.fits) == 2
    loop._posterior()
    assert len(stub.fits) == 3 and sorted(stub.fits[2][0].tolist()) == sorted(obs)
