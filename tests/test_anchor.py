"""The anchor run (scalebo.search.anchor): one run of the costliest cell the budget affords,
held back until nothing else fits, chosen by the posterior mean, placed statelessly."""

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.method import MethodConfig
from scalebo.bench.problems import problem_from_table
from scalebo.bench.replay import replay
from scalebo.errors import BudgetExhausted
from scalebo.search.anchor import anchor_dominated, anchor_reserve, anchor_rows
from scalebo.search.campaign import campaign_gp, campaign_grid, suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.loop import SearchLoop

#: Depth of the learning-rate bowl, nats per octave². At 0.03 the GP's means in the unseen
#: anchor cell were flat within 3 mnats (σ 160 mnats), so which learning rate the anchor took
#: flipped with the CPU's SIMD rounding (AVX-512 or not); at 0.1 the bottom is 240 mnats
#: clear of the other two.
BOWL = 0.1


def _loss(cfg: pd.DataFrame) -> np.ndarray:
    """Chinchilla-like loss (nats) with a learning-rate bowl at 1e-3."""
    return (1.8 + 480 / cfg["N"] ** 0.34 + 2100 / cfg["D"] ** 0.36
            + BOWL * np.log2(cfg["lr"] / 1e-3) ** 2).to_numpy()


@pytest.fixture
def grid(tmp_path):
    # runs cost 6·N·D: the (1e9, 1e11) cell holds 81 % of C_total, 27 % per run
    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e7, 1e8, 1e9]\n  D: [1e9, 1e10, 1e11]\n"
                    "  lr: [3e-4, 1e-3, 3e-3]\n")
    return campaign_grid(path)


def test_the_anchor_cell_is_the_costliest_that_fits_the_share(grid):
    cost = grid.budget_cost
    budget = 0.5 * grid.budget_total
    rows = anchor_rows(grid, budget, 0.7)
    cfg = grid.configs.iloc[rows]
    assert len(rows) == 3 and cfg["lr"].nunique() == 3  # one cell, every lr
    assert (cost[rows] <= 0.7 * budget).all()
    assert cost[rows].max() == cost[cost <= 0.7 * budget].max()  # nothing dearer fits
    assert anchor_rows(grid, budget, 0.0).size == 0
    assert anchor_rows(grid, 1e-30, 0.7).size == 0  # nothing fits
    none = np.zeros(len(cost), bool)
    assert anchor_reserve(rows, none, none, cost) == cost[rows].max()
    tried = none.copy()
    tried[rows[1]] = True  # one run of the cell is trained or running: the anchor is placed
    assert anchor_reserve(rows, tried, tried, cost) == 0.0


def test_of_equally_costly_cells_the_anchor_is_nearest_20_tokens_per_parameter():
    """(1e8, 8e9), (2e8, 4e9) and (4e8, 2e9) cost the same; a trial's reversed file anchored
    another cell. The one nearest 20 tokens per parameter wins (then the larger N), in either
    row order."""
    from scalebo.search.grid import Grid

    for cells, want in (([(1e8, 1e9), (1e8, 8e9), (2e8, 4e9), (4e8, 2e9)], (2e8, 4e9)),
                        ([(1e8, 1e9), (1e8, 4e9), (2e8, 2e9)], (2e8, 2e9)),  # 40, 10: larger N
                        ([(1e8, 1e9), (1e8, 3e9), (2e8, 1.5e9)], (1e8, 3e9))):  # 30 vs 7.5
        frame = pd.DataFrame([(n, d, lr) for n, d in cells for lr in (1e-3, 2e-3)],
                             columns=["N", "D", "lr"])
        for order in (frame, frame.iloc[::-1]):
            g = Grid.from_frame(order.reset_index(drop=True), axes=["lr"], n_held_out_cells=0)
            rows = anchor_rows(g, g.budget_total, 0.7)
            assert {(r.N, r.D) for r in g.configs.iloc[rows].itertuples()} == {want}, cells
            assert len(rows) == 2


def test_a_search_trains_the_anchor_last_at_its_lowest_predicted_loss(grid):
    """The (1e9, 1e11) cell costs 27 % of C_total per run: at a 40 % budget the spent
    window never admits it (it would need 27 % spent first), an anchor share of 0.7 does."""
    loss = _loss(grid.configs)
    big = np.flatnonzero(grid.budget_cost == grid.budget_cost.max())
    runs = {}
    for share in (0.0, 0.7):
        loop = SearchLoop(grid, 0.4, campaign_gp(grid, 0), schedule="spent", anchor=share,
                          rng=0)
        while picks := loop.ask():
            loop.tell(picks, loss[picks])
        assert loop.committed_budget <= 0.4 * grid.budget_total * (1 + 1e-9)
        runs[share] = loop
    assert not np.isin(runs[0.0].observed_indices, big).any()
    trace = runs[0.7].trace
    at = [k for k, e in enumerate(trace) if e.index in big]
    assert len(at) == 1  # one anchor run
    entry = trace[at[0]]
    assert runs[0.7]._reasons[at[0]][0] == "anchor" and entry.cap == np.inf
    assert grid.configs["lr"].iloc[entry.index] == 1e-3  # the bowl's bottom, as predicted
    # before it, nothing else fitted the budget less the held-back run
    before = np.array([e.index for e in trace[:at[0]]])
    free = np.ones(len(loss), bool)
    free[before] = False
    free[big] = False
    left = 0.4 * grid.budget_total - grid.budget_cost[before].sum() - grid.budget_cost[big[0]]
    assert (grid.budget_cost[free] > left * (1 + 1e-9)).all()


def _before_the_anchor(grid, loss: np.ndarray) -> tuple[np.ndarray, int]:
    """The runs a 40 % search trains before its anchor run, and the anchor run's row."""
    loop = SearchLoop(grid, 0.4, campaign_gp(grid, 0), schedule="spent", anchor=0.7, rng=0)
    while picks := loop.ask():
        if loop._reasons[-1][0] == "anchor":
            return loop.observed_indices, picks[0]
        loop.tell(picks, loss[picks])
    raise AssertionError("the search ended without an anchor run")


def test_a_campaign_re_planning_at_every_call_suggests_the_same_anchor(grid):
    """Stateless: a campaign that has trained the runs a loop trained before its anchor
    gets the anchor suggested; once a run of the cell is running, nothing is held back."""
    loss = _loss(grid.configs)
    done, anchor = _before_the_anchor(grid, loss)
    frame = grid.configs.iloc[done][["N", "D", "lr"]].assign(loss=loss[done])
    runs = read_campaign_runs(frame, grid)
    res = suggest_runs(grid, runs, 0.4 * grid.budget_total, seed=0)
    assert [s.index for s in res.suggestions] == [anchor]
    assert res.anchor_cell == (1e9, 1e11) and res.held_back == pytest.approx(6 * 1e9 * 1e11)
    off = suggest_runs(grid, runs, 0.4 * grid.budget_total, seed=0, anchor=0.0)
    assert off.suggestions[0].index != anchor
    running = read_campaign_runs(pd.concat([frame, grid.configs.iloc[[anchor]][["N", "D", "lr"]]
                                            .assign(status="running")]), grid)
    with pytest.raises(BudgetExhausted) as info:  # what is left is the budget's, not held
        suggest_runs(grid, running, 0.4 * grid.budget_total, seed=0)
    spent = grid.budget_cost[np.append(done, anchor)].sum()
    assert info.value.account["remaining"] == pytest.approx(0.4 * grid.budget_total - spent)


def test_with_an_anchor_recorded_budgets_equal_separate_runs():
    """The held-back cost depends on the budget: the 10 % budget's anchor is another cell
    than the 40 % one's, so its run forks from the long one where their choices differ
    (q = 1) or is replayed alone (q = 2); either way it equals a separate 10 % replay."""
    rng = np.random.default_rng(0)
    rows = [{"N": N, "D": D, "lr": lr, "loss": 1.8 + 480 / N**0.34 + 2100 / D**0.36
             + 0.03 * np.log2(lr / 1e-3) ** 2 + rng.normal(0, 0.003)}
            for N in (1e8, 3e8, 1e9, 3e9) for D in (1e9, 1e10, 1e11)
            for lr in (3e-4, 1e-3, 3e-3)]
    problem = problem_from_table(pd.DataFrame(rows), name="heavy", n_held_out_cells=1)
    total = problem.grid.budget_total
    small, large = (anchor_rows(problem.grid, b * total, 0.7) for b in (0.1, 0.4))
    assert small.size and large.size and set(small).isdisjoint(large)
    method = MethodConfig(fantasize=False, posterior_samples=0, refit_every=5)
    for q in (1, 2):
        m = method.with_(q=q)
        assert m.budget_independent == (q == 1)
        both = replay(problem, m, 0.4, seed=1, record_budgets=(0.1,))
        alone = replay(problem, m, 0.1, seed=1)
        assert both.separate_runs == (q == 2)
        assert both.at(0.1).to_dict() == alone.at(0.1).to_dict()
        assert both.at(0.4).n_runs > both.at(0.1).n_runs


def test_an_anchor_that_no_longer_fits_holds_nothing_back(grid):
    """A campaign whose own runs left less than the anchor costs (here 23.8 % of C_total
    left of a 40 % budget, the anchor run 27 %) is searched with all of what is left,
    instead of holding back a run it can never start."""
    loss = _loss(grid.configs)
    cfg = grid.configs
    done = np.flatnonzero(((cfg["N"] == 1e9) & (cfg["D"] == 1e10))
                          | ((cfg["N"] == 1e8) & (cfg["D"] == 1e11)))
    runs = read_campaign_runs(cfg.iloc[done][["N", "D", "lr"]].assign(loss=loss[done]), grid)
    budget = 0.4 * grid.budget_total
    left = budget - grid.budget_cost[done].sum()
    rows = anchor_rows(grid, budget, 0.7)
    assert grid.budget_cost[rows].min() > left > grid.budget_cost.min()
    res = suggest_runs(grid, runs, budget, batch=3, seed=0)
    picked = [s.index for s in res.suggestions]
    assert len(picked) == 3 and not np.isin(picked, rows).any()
    assert grid.budget_cost[picked].sum() <= left
    none = np.zeros(len(cfg), bool)
    assert anchor_reserve(rows, none, none, grid.budget_cost, left) == 0.0
    assert res.held_back == 0.0 and res.anchor_cell is None


def test_suggest_says_what_it_holds_back(tmp_path):
    """The account line and the JSON name the held-back compute and the anchor cell:
    6·N·D = 6e20 FLOPs for (1e9, 1e11), the costliest cell under 70 % of a 40 % budget."""
    import json
    import subprocess
    import sys

    (tmp_path / "grid.yaml").write_text("axes:\n  N: [1e7, 1e8, 1e9]\n  D: [1e9, 1e10, 1e11]\n"
                                        "  lr: [3e-4, 1e-3, 3e-3]\n")
    cmd = [sys.executable, "-m", "scalebo.cli", "suggest", "--grid", "grid.yaml", "--budget",
           "0.4", "--format", "json"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["held_back"] == pytest.approx(6e20)
    assert printed["anchor_cell"] == {"N": 1e9, "D": 1e11}
    assert all(isinstance(v, int) for v in printed["anchor_cell"].values())  # as the grid's
    assert "held back 6e+20 FLOPs for the anchor run (N 1e+09, D 1e+11)" in out.stderr
    off = subprocess.run([*cmd, "--anchor", "0"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert json.loads(off.stdout)["held_back"] == 0.0 and "held back" not in off.stderr


def test_the_anchor_is_dominated_only_by_a_no_dearer_run_below_its_posterior():
    """Hand-made: the anchor cell (rows 3, 4) costs 10; its lowest posterior mean minus one
    SD (the default) is min(3.0 − 0.1, 2.95 − 0.05) = 2.9 nats; its lowest mean 2.95."""
    cost = np.array([1.0, 5.0, 20.0, 10.0, 10.0])
    rows = np.array([3, 4])
    mean, std = np.array([3.0, 2.95]), np.array([0.1, 0.05])
    assert anchor_dominated(cost, rows, np.array([0, 1]), np.array([3.5, 2.89]), mean, std)
    assert not anchor_dominated(cost, rows, np.array([0, 1]), np.array([3.5, 2.91]), mean, std)
    assert anchor_dominated(cost, rows, np.array([1]), np.array([2.94]), mean, std, n_sd=0)
    assert not anchor_dominated(cost, rows, np.array([1]), np.array([2.79]), mean, std, n_sd=2.5)
    # a run as dear as the cell counts (one of its own, if any, would have placed it) ...
    assert anchor_dominated(cost, rows, np.array([4]), np.array([2.8]), mean, std)
    # ... a dearer one does not: it is no evidence about what the anchor's compute buys
    assert not anchor_dominated(cost, rows, np.array([2]), np.array([1.0]), mean, std)
    assert not anchor_dominated(cost, rows, np.array([0]), np.array([1.0]),
                                np.array([np.nan, 2.95]), std)  # no finite posterior: keep it
    assert not anchor_dominated(cost, rows[:0], np.array([0]), np.array([1.0]), mean[:0],
                                std[:0])


class _Believes:
    """A stand-in surrogate: a constant standardized mean ``level`` with a tiny SD at every
    configuration, whatever it is fitted on."""

    def __init__(self, level: float):
        self.level = level

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.full(len(X), self.level), np.full(len(X), 1e-3)


def test_a_search_drops_an_anchor_its_runs_dominate(grid):
    """The (1e9, 1e11) anchor cell (27 % of C_total per run, at a 40 % budget) is held back
    in both searches; at its turn, one whose surrogate expects it to beat the runs trains
    it, one whose surrogate expects every configuration to be worse than every observed run
    (so than one no dearer than the anchor) drops it: nothing held back, never trained."""
    loss = _loss(grid.configs)
    big = np.flatnonzero(grid.budget_cost == grid.budget_cost.max())
    cheap = np.flatnonzero(grid.budget_cost < 1e-3 * grid.budget_cost.max())[:3]
    for level in (-10.0, 10.0):  # standardized: far below / far above every observed run
        loop = SearchLoop(grid, 0.4, _Believes(level), schedule="spent", anchor=0.7, rng=0)
        loop.tell(cheap, loss[cheap])
        assert loop.held_back() == (pytest.approx(grid.budget_cost[big[0]]), (1e9, 1e11))
        while picks := loop.ask():
            loop.tell(picks, loss[picks])
        assert np.isin(loop.observed_indices, big).any() == (level < 0)
        assert any(rule == "anchor" for rule, _ in loop._reasons) == (level < 0)
        assert loop.held_back() == (0.0, None)


def test_suggest_says_when_it_drops_the_anchor(grid, tmp_path, monkeypatch, capsys):
    """At the anchor's turn (the runs a loop trained before its anchor), ``suggest`` names
    the dropped anchor cell in its JSON and on stderr and proposes another run; the verdict
    itself is stubbed here (tested by hand above)."""
    import json

    import scalebo.search.admission as admission
    from scalebo.cli.main import main

    loss = _loss(grid.configs)
    done, _ = _before_the_anchor(grid, loss)
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text("axes:\n  N: [1e7, 1e8, 1e9]\n  D: [1e9, 1e10, 1e11]\n"
                         "  lr: [3e-4, 1e-3, 3e-3]\n")
    grid.configs.iloc[done][["N", "D", "lr"]].assign(loss=loss[done]).to_csv(
        tmp_path / "runs.csv", index=False)
    argv = ["suggest", "--grid", str(grid_file), "--runs", str(tmp_path / "runs.csv"),
            "--budget", "0.4", "--format", "json"]
    for verdict in (False, True):
        monkeypatch.setattr(admission, "anchor_dominated", lambda *a, v=verdict, **k: v)
        capsys.readouterr()
        assert main(argv) == 0
        out = capsys.readouterr()
        printed = json.loads(out.out)
        assert printed["anchor_dropped"] == ({"N": 1e9, "D": 1e11} if verdict else None)
        assert ("the anchor run (N 1e+09, D 1e+11) is dropped" in out.err) == verdict
        anchor_proposed = "anchor" in printed["suggestions"][0]["reason"]
        assert anchor_proposed != verdict


def test_a_batch_that_reaches_the_anchors_turn_says_it_dropped_it(grid, monkeypatch):
    """A batch started before the anchor's turn: at the turn, within the batch, the anchor is
    dropped and the batch spends what it held back. The result says so (``anchor_dropped``,
    nothing held back) instead of the reservation the batch began with (a new-user trial saw
    "held back … for the anchor run" beside a batch that spent it)."""
    import scalebo.search.admission as admission

    loss = _loss(grid.configs)
    done, _ = _before_the_anchor(grid, loss)
    frame = grid.configs.iloc[done[:-2]][["N", "D", "lr"]].assign(loss=loss[done[:-2]])
    runs = read_campaign_runs(frame, grid)
    for verdict in (False, True):
        monkeypatch.setattr(admission, "anchor_dominated", lambda *a, v=verdict, **k: v)
        first = suggest_runs(grid, runs, 0.4 * grid.budget_total, seed=0, batch=1)
        assert first.anchor_dropped is None and first.anchor_cell == (1e9, 1e11)  # not its turn
        res = suggest_runs(grid, runs, 0.4 * grid.budget_total, seed=0, batch=8)
        reasons = [s.reason for s in res.suggestions]
        if verdict:
            assert res.anchor_dropped == (1e9, 1e11)
            assert res.held_back == 0.0 and res.anchor_cell is None
            assert not any(r.startswith("anchor") for r in reasons)
            assert "anchor" not in {x.rule for x in res.suggestions}
            assert sum(res.prices) > res.remaining - 6 * 1e9 * 1e11  # it spent the reserve
        else:
            assert res.anchor_dropped is None and res.anchor_cell == (1e9, 1e11)
            assert reasons[-1].startswith("anchor")  # placed last, once nothing else fit
            rules = [x.rule for x in res.suggestions]  # what code tests, not the reason text
            assert rules[-1] == "anchor" and "anchor" not in rules[:-1]
            assert set(rules[:-1]) <= {"initial", "acquisition", "polish"}
            before = len(reasons) - 1  # the runs that fit beside the reservation
    # a batch that ends just before the anchor's turn held the reserve back: not dropped
    monkeypatch.setattr(admission, "anchor_dominated", lambda *a, **k: True)
    upto = suggest_runs(grid, runs, 0.4 * grid.budget_total, seed=0, batch=before)
    assert upto.anchor_dropped is None and upto.anchor_cell == (1e9, 1e11)
    assert upto.held_back == pytest.approx(6 * 1e9 * 1e11)
