"""Under ``--cost-model wsd`` a batch of suggestions is grouped into training runs: one per
family (same N and hyperparameters), with the stable phase's length and the cooldowns, and
what the budget charged for a run is what that run costs by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scalebo.errors import BudgetExhausted
from scalebo.search.campaign import campaign_grid, suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs, read_pending_runs
from scalebo.search.cost_model import CostModel
from scalebo.search.grid import Grid
from scalebo.search.wsd_runs import wsd_runs

GRID_YAML = """\
axes:
  N: [1.0e8, 3.0e8, 1.0e9]
  D: [2.0e9, 6.0e9, 2.0e10]
  lr: [1.0e-4, 3.0e-4, 1.0e-3, 3.0e-3]
"""
RUNS = pd.DataFrame({"N": [1e8, 1e8, 1e8, 1e8, 3e8, 1e8],
                     "D": [2e9, 2e9, 2e9, 6e9, 2e9, 6e9],
                     "lr": [1e-4, 3e-4, 1e-3, 1e-3, 1e-3, 3e-3],
                     "loss": [3.912, 3.655, 3.598, 3.301, 3.402, np.nan],
                     "status": ["completed"] * 5 + ["running"]})


def _rows(grid: Grid, configs) -> list[int]:
    return [int(i) for i in grid.index_of(pd.DataFrame(configs, columns=["N", "D", "lr"]))]


def test_a_batch_is_grouped_into_runs_by_hand():
    grid = Grid.from_axes({"N": [1e8, 3e8], "D": [2e9, 6e9, 2e10], "lr": [1e-3, 3e-3]})
    picked = _rows(grid, [(1e8, 2e9, 1e-3), (3e8, 2e9, 3e-3), (1e8, 2e10, 1e-3),
                          (1e8, 6e9, 3e-3)])
    completed = _rows(grid, [(1e8, 6e9, 1e-3), (3e8, 2e10, 1e-3)])
    running = _rows(grid, [(1e8, 2e10, 3e-3)])
    runs, numbers = wsd_runs(grid, picked, np.array(completed), np.array(running), 0.1)
    assert numbers == (1, 2, 1, 3)  # in the order each family is first picked
    one, two, three = runs
    assert (one.N, dict(one.hyperparameters)) == (1e8, {"lr": 1e-3})
    assert one.cooldowns == (2e9, 2e10) and one.completed == (6e9,) and one.running == ()
    # the stable phase ends f·D before each checkpoint: it reached 0.9 · 6e9, goes to 0.9 · 2e10
    assert one.stable_from == pytest.approx(5.4e9) and one.stable_to == pytest.approx(1.8e10)
    assert one.describe() == (
        "wsd run 1 (N 1e+08, lr 0.001): the run with checkpoints at D 6e+09 (completed): "
        "branch off its stable phase and cool down from 1.8e+09 to 2e+09 tokens; continue "
        "its stable phase from 5.4e+09 to 1.8e+10 tokens and cool down from 1.8e+10 to "
        "2e+10 tokens")
    assert two.earlier == () and two.stable_from == 0  # N = 3e8 at lr 1e-3 is another family
    assert two.describe() == ("wsd run 2 (N 3e+08, lr 0.003): a new run; train the stable "
                              "phase to 1.8e+09 tokens and cool down from 1.8e+09 to 2e+09 "
                              "tokens")
    # a checkpoint in flight beyond the branch point: wait for it to pass there
    assert three.running == (2e10,) and three.stable_to == pytest.approx(1.8e10)
    assert three.describe().endswith(
        "checkpoints at D 2e+10 (running): branch off its stable phase and cool down from "
        "5.4e+09 to 6e+09 tokens (once the run in flight has passed the branch point)")
    # the user's column names; the configuration nested, so no axis clashes with a key
    assert one.describe({"N": "params", "D": "tokens"}).startswith(
        "wsd run 1 (params 1e+08, lr 0.001): the run with checkpoints at tokens 6e+09")
    assert three.to_dict({"N": "params"}) == {
        "run": 3, "config": {"params": 1e8, "lr": 3e-3}, "stable_from": pytest.approx(1.8e10),
        "stable_to": pytest.approx(1.8e10), "cooldowns": [6e9], "completed": [],
        "running": [2e10], "cooldown_fraction": 0.1}


def test_the_budget_charges_each_run_what_it_costs_by_hand(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    grid = campaign_grid(tmp_path / "grid.yaml")
    # a failed checkpoint shares nothing with its family (the cost model's rule)
    failed = pd.DataFrame({"N": [3e8], "D": [6e9], "lr": [1e-4], "loss": [np.nan],
                           "status": ["failed"]})
    runs = read_campaign_runs(pd.concat([RUNS, failed], ignore_index=True), grid)
    f = 0.2
    res = suggest_runs(grid, runs, grid.budget_total, batch=40,
                       cost_model=CostModel("wsd", f))  # every untried configuration
    assert len(res.run_numbers) == len(res.suggestions) == 36 - 7  # failed: not again
    assert max(len(r.cooldowns) for r in res.wsd_runs) >= 2  # some run has several rows
    assert any(r.completed for r in res.wsd_runs) and any(not r.earlier for r in res.wsd_runs)
    for run in res.wsd_runs:
        charged = sum(p for p, k in zip(res.prices, res.run_numbers, strict=True)
                      if k == run.number)
        # stable tokens beyond the existing stable phase, plus every cooldown of f·D
        by_hand = 6 * run.N * ((run.stable_to - run.stable_from) + f * sum(run.cooldowns))
        assert charged == pytest.approx(by_hand, rel=1e-12)
    lost = [r for r in res.wsd_runs if r.N == 3e8 and dict(r.hyperparameters) == {"lr": 1e-4}]
    assert len(lost) == 1 and lost[0].earlier == ()  # the failed 6e9 is not a checkpoint
    assert 6e9 not in lost[0].cooldowns  # nor proposed again (no --retry-failed)
    # independent runs: no grouping
    plain = suggest_runs(grid, runs, 0.3 * grid.budget_total, batch=2)
    assert plain.wsd_runs == () and plain.run_numbers == ()


def _suggest(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalebo.cli", "suggest", "--grid",
                           "grid.yaml", "--runs", "runs.csv", "--budget", "0.3", "--batch",
                           "4", "--quiet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_suggest_names_the_run_of_every_row(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    RUNS.to_csv(tmp_path / "runs.csv", index=False)
    out = _suggest("--cost-model", "wsd", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    numbers = [s["wsd_run"] for s in res["suggestions"]]
    assert sorted(set(numbers)) == [r["run"] for r in res["wsd_runs"]]
    for run in res["wsd_runs"]:
        mine = [s for s in res["suggestions"] if s["wsd_run"] == run["run"]]
        assert sorted(s["D"] for s in mine) == run["cooldowns"]
        assert {(s["N"], s["lr"]) for s in mine} == {tuple(run["config"].values())}
    table = _suggest("--cost-model", "wsd", cwd=tmp_path)
    assert table.returncode == 0 and "wsd run 1 (N " in table.stdout
    csv = _suggest("--cost-model", "wsd", "--format", "csv", cwd=tmp_path)
    assert csv.stdout.splitlines()[0].startswith("N,D,C,lr,wsd_run,predicted_loss")
    plain = _suggest("--format", "json", cwd=tmp_path)
    assert "wsd_runs" not in json.loads(plain.stdout)
    # nothing left to propose (exit 3): the same CSV columns and JSON keys under wsd
    spent = _suggest("--cost-model", "wsd", "--format", "csv", "--budget", "1e18FLOPs",
                    cwd=tmp_path)
    assert spent.returncode == 3 and spent.stdout.splitlines()[0] == csv.stdout.splitlines()[0]
    done = _suggest("--cost-model", "wsd", "--format", "json", "--budget", "1e18FLOPs",
                    cwd=tmp_path)
    assert done.returncode == 3 and json.loads(done.stdout)["wsd_runs"] == []


def test_a_failed_cooldown_beside_a_completed_longer_run_and_an_unused_cost_are_named():
    """A new-user trial: a failed checkpoint whose family's longer run completed was charged
    a whole run (4.8e18 FLOPs) where its cooldown cost 4.8e17, without a word, and a
    completed run's cost column was silently not used. Which it was (a cooldown branch, or
    a run of its own that crashed before the longer one started) only the user knows."""
    from scalebo.search.wsd_runs import wsd_cost_notes

    grid = Grid.from_axes({"N": [4e8], "D": [2e9, 4e9], "lr": [5e-4, 1e-3]}, n_held_out_cells=0)
    frame = pd.DataFrame({"N": [4e8, 4e8, 4e8], "D": [2e9, 4e9, 2e9],
                          "lr": [5e-4, 5e-4, 1e-3], "loss": [np.nan, 3.03, np.nan]})
    runs = read_campaign_runs(frame, grid)
    whole = 6 * 4e8 * 2e9  # 4.8e18 FLOPs; its cooldown: 0.1 of it
    (note,) = wsd_cost_notes(runs, grid, 0.1)  # row 3 (lr 1e-3) has no completed sibling
    assert note == ("<DataFrame>: data row 1 (D=2e+09) failed and is charged a whole run, "
                    "4.8e+18 FLOPs: if it was a cooldown branched off the run of data row 2 "
                    "(D=4e+09, completed), it cost 4.8e+17: write that in its cost column")
    model = CostModel("wsd", cooldown=0.1)
    assert runs.spent(grid, model) == pytest.approx(6 * 4e8 * 4e9 + 2 * whole)
    told = read_campaign_runs(frame.assign(cost=[0.1 * whole, 7e19, np.nan]), grid)
    (unused,) = wsd_cost_notes(told, grid, 0.1)
    assert unused.startswith("<DataFrame>: the cost column of 1 completed run(s) (first: data "
                             "row 2) is not used under --cost-model wsd")
    # a trial's budget was 134 GPU-hours over by its runs' own costs: the gap is given
    assert unused.endswith(f"they record 7e+19 FLOPs against the grid's {2 * whole:.4g} for "
                           f"them ({7e19 - 2 * whole:+.4g}, not in the spending: lower the "
                           "budget by as much to hold it)")
    assert told.spent(grid, model) == pytest.approx(6 * 4e8 * 4e9 + 1.1 * whole)


def test_a_budget_above_the_whole_grid_under_wsd_is_said(tmp_path, capsys):
    """Fractions are of the independent runs' total; under wsd the whole grid costs less
    (here 0.55 of it), so --budget 0.7 bought every configuration without a word."""
    from scalebo.cli.main import main

    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    RUNS.iloc[:5].to_csv(tmp_path / "runs.csv", index=False)
    grid = campaign_grid(tmp_path / "grid.yaml")
    whole = CostModel("wsd", cooldown=0.1).total(grid, ~grid.held_out)  # what it can buy
    args = ["suggest", "--grid", str(tmp_path / "grid.yaml"), "--runs",
            str(tmp_path / "runs.csv"), "--cost-model", "wsd", "-q"]
    assert main([*args, "--budget", f"{1.1 * whole / grid.budget_total:.6f}"]) == 0
    assert "is more than training the whole grid costs under --cost-model wsd (" \
        f"{whole:.4g}" in capsys.readouterr().err
    assert main([*args, "--budget", f"{0.9 * whole / grid.budget_total:.6f}"]) == 0
    assert "whole grid" not in capsys.readouterr().err


def test_status_names_the_runs_of_its_next_rows_as_suggest_does(tmp_path):
    """A trial: under --cost-model wsd, status's JSON 'next' had no wsd_run and no wsd_runs,
    where suggest's JSON has both for the same proposals."""
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    RUNS.to_csv(tmp_path / "runs.csv", index=False)
    sug = json.loads(_suggest("--cost-model", "wsd", "--format", "json", cwd=tmp_path).stdout)
    out = subprocess.run([sys.executable, "-m", "scalebo.cli", "status", "--grid", "grid.yaml",
                          "--runs", "runs.csv", "--budget", "0.3", "--next", "4", "--quiet",
                          "--cost-model", "wsd", "--format", "json", "--samples", "8"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert not res["stop"] and len(res["next"]) == 4
    assert [s["wsd_run"] for s in res["next"]] == [s["wsd_run"] for s in sug["suggestions"]]
    assert res["wsd_runs"] == sug["wsd_runs"]
    # no next rows (--next 0): the key is still there, empty, as suggest's is when it stops
    none = subprocess.run([sys.executable, "-m", "scalebo.cli", "status", "--grid", "grid.yaml",
                           "--runs", "runs.csv", "--budget", "0.3", "--next", "0", "--quiet",
                           "--cost-model", "wsd", "--format", "json", "--samples", "8"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert none.returncode == 0, none.stderr
    assert json.loads(none.stdout)["wsd_runs"] == []


def test_a_priced_grid_whose_cost_per_token_varies_in_a_family_is_said(tmp_path):
    """A trial's grid with +20 GPU-hours per run (start-up, evals): wsd charges a family its
    mean cost per token times D, so a 2e9-token run was charged 11.7 where the grid said
    23.6, with no word. A cost proportional to D within each family gets no note."""
    from scalebo.search.wsd_runs import wsd_cost_notes

    N, D, lr = (x.ravel() for x in np.meshgrid([1e8, 3e8], [2e9, 5e9, 1.25e10, 3e10],
                                                [1e-3, 3e-3]))
    flat = 6 * N * D / (312e12 * 0.35 * 3600)  # GPU-hours, proportional to D
    for extra, said in ((0.0, False), (20.0, True)):
        path = tmp_path / f"grid{extra:g}.csv"
        pd.DataFrame({"N": N, "D": D, "lr": lr, "cost": flat + extra}).to_csv(path, index=False)
        grid = campaign_grid(path)
        notes = wsd_cost_notes(read_campaign_runs(None, grid), grid, 0.1)
        spread = [n for n in notes if "not proportional to D within a family" in n]
        assert bool(spread) == said
    family = (N == 1e8) & (lr == 1e-3)  # its cost per token: the 2e9 run's is the highest
    rate = (flat[family] + 20) / D[family]
    assert f"varies up to {rate.max() / rate.min():.3g}x" in spread[0]


def test_a_wsd_campaign_charged_as_independent_runs_is_said(tmp_path):
    """A trial: a campaign planned with suggest --cost-model wsd (its rows keep suggest's
    wsd_run numbers) and then checked without the flag was charged as independent runs with
    no word: spent differs (the lr 1e-3 family's 2e9 and 6e9 tokens share a stable phase)."""
    from scalebo.search.status import campaign_status

    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    grid = campaign_grid(tmp_path / "grid.yaml")
    numbered = RUNS.assign(wsd_run=[1, 2, 3, 3, 4, 5])
    runs = read_campaign_runs(numbered, grid, name="runs.csv")
    wsd = CostModel("wsd", 0.1)
    assert runs.spent(grid, wsd) < runs.spent(grid)  # the plan's and the other accounting
    plain = suggest_runs(grid, runs, 0.3 * grid.budget_total, batch=2)
    said = [n for n in plain.notes if "runs.csv: its rows carry wsd_run numbers" in n]
    assert len(said) == 1 and "pass --cost-model wsd" in said[0]
    assert not any("wsd_run" in n for n in suggest_runs(
        grid, runs, 0.3 * grid.budget_total, batch=2, cost_model=wsd).notes)
    status = campaign_status(grid, runs, 0.3 * grid.budget_total, n_samples=8)
    assert said[0] in status.notes
    unnumbered = read_campaign_runs(RUNS, grid, name="runs.csv")
    assert not unnumbered.wsd_numbered and not any(
        "wsd_run" in n for n in suggest_runs(grid, unnumbered, 0.3 * grid.budget_total,
                                             batch=2).notes)
    assert not read_campaign_runs(RUNS.assign(wsd_run=["", " "] * 3), grid).wsd_numbered
    # the numbers of suggest's own CSV given as the runs in flight (--pending) count too
    pending = read_pending_runs(pd.DataFrame({"N": [3e8], "D": [2e10], "lr": [1e-4],
                                              "wsd_run": [1]}), grid)
    assert unnumbered.with_running(pending).wsd_numbered
    # independent charges can spend the budget the plan had left: the refusal says why
    between = 0.5 * (runs.spent(grid, wsd) + runs.spent(grid))
    with pytest.raises(BudgetExhausted, match=r"the budget is already spent: .* Note: "
                       r"runs.csv: its rows carry wsd_run numbers"):
        suggest_runs(grid, runs, between, batch=2)
