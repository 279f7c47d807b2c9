"""Polish (scalebo.search.polish): the end of a budget trains untried one-step neighbours of
the best runs of the observed envelope's cells (by compute² / runs), lowest posterior mean
first."""

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.method import MethodConfig
from scalebo.bench.problems import problem_from_table
from scalebo.bench.replay import replay
from scalebo.cli.main import main
from scalebo.errors import SearchError
from scalebo.search.campaign import campaign_gp, campaign_grid, suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.loop import SearchLoop
from scalebo.search.polish import (
    POLISH,
    axis_neighbours,
    polish_order,
    polish_phase,
    polish_pick,
)


def _loss(cfg: pd.DataFrame) -> np.ndarray:
    """Chinchilla-like loss (nats) with a learning-rate bowl at 1e-3 and a batch bowl at 64."""
    return (1.8 + 480 / cfg["N"] ** 0.34 + 2100 / cfg["D"] ** 0.36
            + 0.03 * np.log2(cfg["lr"] / 1e-3) ** 2
            + 0.01 * np.log2(cfg["bs"] / 64) ** 2).to_numpy()


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e7, 1e8, 1e9]\n  D: [1e9, 1e10, 1e11]\n"
                    "  lr: [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]\n  bs: [32, 64, 128, 256]\n")
    return campaign_grid(path)


def _row(grid, **values) -> int:
    cfg = grid.configs
    mask = np.ones(len(cfg), bool)
    for k, v in values.items():
        mask &= np.isclose(cfg[k].to_numpy(), v)
    (row,) = np.flatnonzero(mask)
    return int(row)


def test_neighbours_are_one_step_along_one_axis_in_the_same_cell(grid):
    cfg = grid.configs
    centre = _row(grid, N=1e8, D=1e10, lr=1e-3, bs=128)
    got = {(cfg["lr"].iloc[r], cfg["bs"].iloc[r]) for r in axis_neighbours(grid, centre)}
    assert got == {(3e-4, 128), (3e-3, 128), (1e-3, 64), (1e-3, 256)}
    corner = _row(grid, N=1e8, D=1e10, lr=1e-4, bs=32)
    nb = axis_neighbours(grid, corner)
    assert {(cfg["lr"].iloc[r], cfg["bs"].iloc[r]) for r in nb} == {(3e-4, 32), (1e-4, 64)}
    assert (cfg["N"].iloc[nb] == 1e8).all() and (cfg["D"].iloc[nb] == 1e10).all()


def test_a_missing_level_is_skipped_and_a_grid_without_axes_has_no_neighbours(tmp_path):
    # lr 1e-3 exists only at batch 64: at batch 128 the neighbours of 3e-4 are 3e-3
    frame = pd.DataFrame([{"N": 1e8, "D": 1e10, "lr": lr, "bs": bs}
                          for lr, bs in [(3e-4, 64), (1e-3, 64), (3e-3, 64),
                                         (3e-4, 128), (3e-3, 128)]])
    path = tmp_path / "grid.csv"
    frame.to_csv(path, index=False)
    g = campaign_grid(path)
    r = _row(g, lr=3e-4, bs=128)
    assert {(g.configs["lr"].iloc[k], g.configs["bs"].iloc[k])
            for k in axis_neighbours(g, r)} == {(3e-3, 128), (3e-4, 64)}
    bare = tmp_path / "bare.yaml"
    bare.write_text("axes:\n  N: [1e7, 1e8]\n  D: [1e9, 1e10]\n")
    assert axis_neighbours(campaign_grid(bare), 0).size == 0


def test_the_costliest_envelope_cell_goes_first_whatever_the_surrogate_believes(grid):
    """Observed: the best run of a cheap and of a costly cell, both on the envelope. The
    pick is the costly cell's neighbour with the lowest mean, although every neighbour is
    predicted worse than the cell's best; without an admissible one there, the cheap cell's;
    without any, None."""
    cheap = _row(grid, N=1e7, D=1e9, lr=1e-3, bs=64)
    dear = _row(grid, N=1e9, D=1e10, lr=1e-3, bs=64)
    obs = np.array([cheap, dear])
    y = np.array([3.0, 2.5])

    def predict(rows):  # worse than every observed run, lowest at lr 3e-4
        lr = grid.configs["lr"].to_numpy()[rows]
        return 2.6 + 0.01 * np.log(lr / 3e-4), np.full(rows.size, 1e-3)

    admissible = np.ones(grid.n_configs, bool)
    admissible[obs] = False
    row, mean, std, reason = polish_pick(grid, obs, y, admissible, predict)
    assert row in axis_neighbours(grid, dear) and grid.configs["lr"].iloc[row] == 3e-4
    assert mean == pytest.approx(2.6) and std == pytest.approx(1e-3)
    assert reason.startswith("polish:") and "N=1e+09" in reason
    admissible[axis_neighbours(grid, dear)] = False
    row, *_ = polish_pick(grid, obs, y, admissible, predict)
    assert row in axis_neighbours(grid, cheap)
    admissible[axis_neighbours(grid, cheap)] = False
    assert polish_pick(grid, obs, y, admissible, predict) is None
    assert polish_pick(grid, obs[:0], y[:0], admissible, predict) is None


def test_polish_order_is_compute_squared_over_runs():
    """By C²/runs, by hand: 1e40/1, 4e40/5 = 8e39, 4e40/3 = 1.33e40, 9e38/1; equal scores go
    costlier first; a cell counted with no runs weighs as one with one."""
    cost = np.array([1e20, 2e20, 2e20, 3e19])
    assert polish_order(cost, np.array([1, 5, 3, 1])).tolist() == [2, 0, 1, 3]
    for scale in (1e19, 1e20, 3e21):  # exact ties, whatever the rounding of the logarithms
        assert polish_order(np.array([scale, 2 * scale]), np.array([1, 4])).tolist() == [1, 0]
    assert polish_order(np.array([1e20, 2e20]), np.array([0, 1])).tolist() == [1, 0]


def test_a_cheaper_envelope_cell_with_fewer_runs_goes_before_a_costlier_well_tried_one(
        tmp_path):
    """Two envelope cells 1.5× apart in compute: the costlier goes first while it holds at
    most 2.25× the runs of the cheaper one, and the cheaper one after that (a cell that held
    3 runs kept a best run 7.7 mnats above its optimum on StepLaw while the costlier ones took
    11 and 15)."""
    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 1.5e8]\n  D: [1e10]\n  lr: [1e-4, 3e-4, 1e-3, 3e-3]\n")
    g = campaign_grid(path)
    cheap = [_row(g, N=1e8, lr=1e-3)]
    dear = [_row(g, N=1.5e8, lr=lr) for lr in (1e-4, 1e-3, 3e-4)]

    def predict(rows):
        return np.full(rows.size, 3.0), np.full(rows.size, 1e-2)

    for n_dear, first in ((2, "dear"), (3, "cheap")):
        obs = np.array(cheap + dear[:n_dear])
        y = np.array([3.2] + [3.1, 3.0, 3.05][:n_dear])  # the best run of each cell: envelope
        admissible = np.ones(g.n_configs, bool)
        admissible[obs] = False
        row, *_, reason = polish_pick(g, obs, y, admissible, predict)
        cell = dear if first == "dear" else cheap
        assert g.cell_ids[row] == g.cell_ids[cell[0]], (n_dear, reason)
        assert f"({1 if first == 'cheap' else n_dear} run(s))" in reason
    obs = np.array(cheap + dear[:2])  # a third run of the costlier cell in flight counts
    admissible = np.ones(g.n_configs, bool)
    admissible[obs] = admissible[dear[2]] = False
    row, *_ = polish_pick(g, obs, np.array([3.2, 3.1, 3.0]), admissible, predict,
                          pending_idx=np.array([dear[2]]))
    assert g.cell_ids[row] == g.cell_ids[cheap[0]]


def test_a_search_polishes_only_the_end_of_its_budget(grid):
    loss = _loss(grid.configs)
    loops = {}
    for share in (0.0, 0.3):
        loop = SearchLoop(grid, 0.2, campaign_gp(grid, 0), schedule="spent", anchor=0.7,
                          polish=share, rng=0)
        while picks := loop.ask():
            loop.tell(picks, loss[picks])
        loops[share] = loop
    assert not any(rule == "polish" for rule, _ in loops[0.0]._reasons)
    trace, reasons = loops[0.3].trace, loops[0.3]._reasons
    polished = [k for k, (rule, why) in enumerate(reasons) if rule == "polish"]
    assert all(reasons[k][1].startswith("polish") for k in polished)  # and its reason says so
    assert polished
    budget = 0.2 * grid.budget_total
    first = polished[0]
    committed_before = trace[first].cumulative_cost - trace[first].cost
    assert committed_before >= 0.7 * budget * (1 - 1e-9)  # the phase, not before
    assert [e.index for e in trace[:first]] == [e.index for e in loops[0.0].trace[:first]]
    for k in polished:  # each one a neighbour of a best run observed before it
        seen = np.array([e.index for e in trace[:k]])
        cell = grid.cell_ids[seen] == grid.cell_ids[trace[k].index]
        best = seen[cell][np.argmin(loss[seen[cell]])]
        assert trace[k].index in axis_neighbours(grid, int(best))


def test_a_campaign_re_planning_at_every_call_polishes_like_the_loop(grid):
    loss = _loss(grid.configs)
    loop = SearchLoop(grid, 0.2, campaign_gp(grid, 0), schedule="spent", anchor=0.7,
                      polish=0.3, rng=0)
    while picks := loop.ask():
        if loop._reasons[-1][0] == "polish":
            break
        loop.tell(picks, loss[picks])
    done = loop.observed_indices
    frame = grid.configs.iloc[done][["N", "D", "lr", "bs"]].assign(loss=loss[done])
    runs = read_campaign_runs(frame, grid)
    res = suggest_runs(grid, runs, 0.2 * grid.budget_total, seed=0, polish=0.3)
    assert [s.index for s in res.suggestions] == picks


def test_with_polish_recorded_budgets_equal_separate_runs():
    """Polish begins at a share of the budget, so a smaller recorded budget forks from the
    long run where its choices first differ, and equals a separate replay (no anchor)."""
    rng = np.random.default_rng(0)
    rows = [{"N": N, "D": D, "lr": lr, "loss": 1.8 + 480 / N**0.34 + 2100 / D**0.36
             + 0.03 * np.log2(lr / 1e-3 * (N / 1e8) ** 0.3) ** 2 + rng.normal(0, 0.003)}
            for N in (1e8, 3e8, 1e9) for D in (1e9, 1e10, 1e11)
            for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    problem = problem_from_table(pd.DataFrame(rows), name="small", n_held_out_cells=1)
    method = MethodConfig(fantasize=False, posterior_samples=0, refit_every=5, anchor=0.0,
                          polish=0.3)
    assert method.forks and method.budget_independent
    both = replay(problem, method, 0.2, seed=1, record_budgets=(0.1,))
    alone = replay(problem, method, 0.1, seed=1)
    assert both.at(0.1).to_dict() == alone.at(0.1).to_dict()
    off = replay(problem, method.with_(polish=0.0), 0.1, seed=1)
    assert [e.index for e in off.trace] != [e.index for e in alone.trace]  # polish acted


@pytest.mark.parametrize(("name", "share"), [("anchor", 0.5), ("polish", 0.3)])
def test_a_bad_share_is_refused_and_a_set_one_labelled(grid, name, share):
    """The two shares of the budget (the anchor run's, the polish phase's) are checked and
    labelled alike."""
    with pytest.raises(SearchError, match=rf"{name} must be a share of the budget in \[0, 1\)"):
        SearchLoop(grid, 0.1, campaign_gp(grid, 0), **{name: 1.0})
    with pytest.raises(ValueError, match=f"MethodConfig.{name}"):
        MethodConfig(**{name: -0.1})
    assert MethodConfig(**{name: 0}).label().endswith(f" no-{name}")
    assert MethodConfig(**{name: share}).label().endswith(f" {name}={share:g}")
    assert name not in MethodConfig().label()


def test_the_polish_phase_and_its_default():
    assert polish_phase(0.8, 1.0, 0.2) and not polish_phase(0.79, 1.0, 0.2)
    assert not polish_phase(1.0, 1.0, 0.0)
    assert MethodConfig().polish == POLISH
    assert "polish" not in MethodConfig(surrogate="random", polish=0).label()


def test_scalebo_replay_polish_reaches_the_record(tmp_path):
    out = tmp_path / "rec.json"
    assert main(["replay", "--dataset", "synthetic", "--budget", "0.01", "--polish", "0",
                 "--posterior-samples", "0", "--json", str(out), "-q"]) == 0
    rec = json.loads(out.read_text())
    assert rec["method"]["polish"] == 0.0 and rec["method_label"].endswith(" no-polish")
