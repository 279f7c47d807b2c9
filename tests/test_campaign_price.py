"""Campaigns budgeted in GPU-hours: a grid table with a ``cost`` column prices every
configuration; budgets, spending, admissibility and the stop rule use that price while the
laws keep FLOPs. The GPU-hours below follow a throughput that grows with model size (larger
models use the hardware better), so they are deliberately not proportional to 6·N·D."""

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.synthetic import make_synthetic
from scalebo.errors import BudgetExhausted, RunTableError
from scalebo.search.campaign import campaign_grid, parse_budget, suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.cost_model import CostModel
from scalebo.search.status import campaign_status

COLS = ["N", "D", "lr", "bs"]


def _gpu_hours(N, D):
    """6·N·D FLOPs at 1e15 FLOP/s peak and an MFU rising from 0.2 (50M) to 0.5 (400M)."""
    N, D = np.asarray(N, float), np.asarray(D, float)
    mfu = 0.2 + 0.1 * np.log2(N / 5e7)
    return 6 * N * D / (1e15 * mfu * 3600)


@pytest.fixture()
def priced(tmp_path):
    truth = make_synthetic(N=[5e7, 1e8, 2e8, 4e8], D=[1e9, 2e9, 4e9], lr=[5e-4, 1e-3, 2e-3],
                           bs=[128, 256], seed=0)
    table = truth[COLS].assign(cost=_gpu_hours(truth["N"], truth["D"]))
    path = tmp_path / "grid.csv"
    table.to_csv(path, index=False)
    return path, truth.set_index(COLS)["loss"], table.set_index(COLS)["cost"]


def test_budget_in_gpu_hours_parses_and_needs_a_priced_grid(priced, tmp_path):
    path, _, price = priced
    for text in ("500GPUh", "500 GPU-hours", "500gpu_hours", "5e2 GPUhours"):
        assert parse_budget(text).gpu_hours == 500.0
    grid = campaign_grid(path)
    assert grid.price_unit == "GPU-hours" and "cost" not in grid.axes
    assert grid.budget_total == pytest.approx(price.sum())
    assert grid.C_total == pytest.approx(float((6 * grid.configs["N"] * grid.configs["D"]).sum()))
    assert parse_budget("500GPUh").resolve(grid) == 500.0
    assert parse_budget("0.1").resolve(grid) == pytest.approx(0.1 * price.sum())
    with pytest.raises(ValueError, match="prices its configurations in GPU-hours"):
        parse_budget("2e21FLOPs").resolve(grid)
    plain = pd.read_csv(path).drop(columns="cost")
    plain.to_csv(tmp_path / "plain.csv", index=False)
    with pytest.raises(ValueError, match="needs a grid table with a 'cost' column"):
        parse_budget("500GPUh").resolve(campaign_grid(tmp_path / "plain.csv"))


def test_bad_price_names_file_row_and_column(priced, tmp_path):
    path, _, _ = priced
    table = pd.read_csv(path)
    table.loc[6, "cost"] = -1.0
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(RunTableError, match=r"bad.csv: data row 7, column 'cost' \(GPU-hours "
                                            r"of the configuration\): expected a positive "
                                            r"number, got -1.0\.$"):
        campaign_grid(bad)


def test_simulated_gpu_hour_campaign_never_overspends(priced):
    path, truth, price = priced
    grid = campaign_grid(path)
    budget = 0.25 * price.sum()
    runs = pd.DataFrame(columns=[*COLS, "loss", "status", "cost"])
    seen, step = set(), 0
    while True:
        step += 1
        state = read_campaign_runs(runs, grid)
        try:
            res = suggest_runs(grid, state, budget, batch=3, seed=0)
        except BudgetExhausted:
            break
        done = runs[runs["status"] != "running"]
        actual = runs["cost"].astype(float)
        assert res.unit == "GPU-hours"
        assert res.spent == pytest.approx(actual[done.index].sum(), rel=1e-12)
        assert res.pending == pytest.approx(actual[runs["status"] == "running"].sum(),
                                            rel=1e-12)
        new = [tuple(float(s.config[c]) for c in COLS) for s in res.suggestions]
        assert not set(new) & seen
        seen |= set(new)
        assert list(res.prices) == pytest.approx([price.loc[c] for c in new], rel=1e-12)
        assert actual.sum() + sum(res.prices) <= budget * (1 + 1e-9)  # never overspent
        runs.loc[runs["status"] == "running", "status"] = "completed"
        for k, cfg in enumerate(new):
            crashed = (step + k) % 4 == 0
            # a crashed run used half its price; finished ones report 3 % over the estimate
            used = price.loc[cfg] * (0.5 if crashed else 1.03)
            runs.loc[len(runs)] = [*cfg, np.nan if crashed else float(truth.loc[cfg]),
                                   "failed" if crashed else "completed", used]
        assert step < 40
    state = read_campaign_runs(runs, grid)
    status = campaign_status(grid, state, budget, targets=(1e21,), n_samples=16)
    assert status.unit == "GPU-hours" and status.stop
    # runs that report 3 % over their estimate can take the spend past the budget: said so
    over = status.spent - budget
    assert (f"over it by {over:.4g} GPU-hours" if over > 0 else "GPU-hours left") in status.reason
    assert status.spent == pytest.approx(runs["cost"].astype(float).sum(), rel=1e-12)
    untried = price.drop(index=[tuple(r) for r in runs[COLS].astype(float).to_numpy()])
    assert budget - status.spent < untried.min()  # nothing untried fits any more
    assert status.C_total == pytest.approx(price.sum())


def test_wsd_prices_a_family_as_one_run_with_cooldowns(priced):
    path, _, price = priced
    grid = campaign_grid(path)
    model = CostModel("wsd", 0.2)
    family = [(1e8, d, 1e-3, 256.0) for d in (1e9, 4e9)]
    rows = grid.index_of(pd.DataFrame(family, columns=COLS))
    mask = np.zeros(len(grid), dtype=bool)
    mask[rows] = True
    per_token = price.loc[family[0]] / 1e9  # GPU-hours per token of N = 1e8
    by_hand = per_token * (0.8 * 4e9 + 0.2 * (1e9 + 4e9))
    assert model.total(grid, mask, priced=True) == pytest.approx(by_hand, rel=1e-12)
    flops = 6e8 * (0.8 * 4e9 + 0.2 * 5e9)
    assert model.total(grid, mask) == pytest.approx(flops, rel=1e-12)  # FLOPs untouched
    mid = grid.index_of(pd.DataFrame([(1e8, 2e9, 1e-3, 256.0)], columns=COLS))[0]
    assert model.marginal(grid, mask, priced=True)[mid] == pytest.approx(0.2 * 2e9 * per_token)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "scalebo.cli", *args, "--quiet"], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_cli_suggests_and_reports_in_gpu_hours(priced):
    path, truth, price = priced
    cwd = path.parent
    out = _cli("suggest", "--grid", path.name, "--budget", "30GPUh", "--batch", "3",
               "--format", "json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["unit"] == "GPU-hours" and res["budget"] == 30.0
    for s in res["suggestions"]:
        assert s["cost"] == pytest.approx(price.loc[tuple(float(s[c]) for c in COLS)])
    runs = pd.DataFrame([{**{c: s[c] for c in COLS}, "loss": truth.loc[tuple(s[c] for c in COLS)]}
                         for s in res["suggestions"]])
    runs.to_csv(cwd / "runs.csv", index=False)
    out = _cli("status", "--grid", path.name, "--runs", "runs.csv", "--budget", "30GPUh",
               "--target", "1e21", "--samples", "16", "--kernel", "transfer", "--trend",
               cwd=cwd)
    assert out.returncode == 0, out.stderr
    assert "GPU-hours" in out.stdout and "of budget 30" in out.stdout
    out = _cli("suggest", "--grid", path.name, "--budget", "2e21FLOPs", cwd=cwd)
    assert out.returncode == 2 and "GPU-hours" in out.stderr and "Traceback" not in out.stderr


def test_a_budget_left_within_rounding_of_zero_is_zero():
    """A trial's status said 'the budget is spent: 3.277e+04 FLOPs left' of a 2.9e20 budget:
    the sums' rounding. A real remainder, even a small one, stays."""
    from scalebo.search.budget import remaining_budget

    assert remaining_budget(2.93e20, 2.93e20 - 1e20, 1e20 - 3.277e4) == 0.0
    assert remaining_budget(2.93e20, 1e20, 1e20) == pytest.approx(0.93e20)
    assert remaining_budget(2.93e20, 2.93e20 - 1e16, 0.0) == pytest.approx(1e16)
    assert remaining_budget(100.0, 101.0, 0.0) == -1.0  # overspent stays negative


def test_a_budget_of_one_is_the_whole_grid_and_said():
    """A trial wrote budgets: [1] meaning 1 %: it replayed the whole grid without a word
    (5 is refused with a hint; 1 is a valid fraction)."""
    from scalebo.search.budget import parse_fraction

    with pytest.warns(UserWarning, match=r"a budget of 1 is the whole of C_total \(100 %\); "
                                         r"for 1 % write 0.01 or 1%"):
        assert parse_fraction(1) == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_fraction("100%") == 1.0 and parse_fraction("1%") == 0.01
