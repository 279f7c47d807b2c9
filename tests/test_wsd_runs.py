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

from scalebo.search.campaign import campaign_grid, suggest_runs
from scalebo.search.campaign_runs import read_campaign_runs
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
    earlier = _rows(grid, [(1e8, 6e9, 1e-3), (1e8, 6e9, 1e-3), (3e8, 2e10, 1e-3)])
    runs, numbers = wsd_runs(grid, picked, np.array(earlier))
    assert numbers == (1, 2, 1, 3)  # in the order each family is first picked
    one, two, three = runs
    assert (one.N, dict(one.hyperparameters)) == (1e8, {"lr": 1e-3})
    assert one.cooldowns == (2e9, 2e10) and one.earlier == (6e9,) and one.train_to == 2e10
    assert two.earlier == () and two.train_to == 2e9  # N = 3e8 at lr 1e-3 is another family
    assert three.cooldowns == (6e9,) and three.earlier == () and three.train_to == 6e9
    said = one.describe()
    assert said.startswith("wsd run 1 (N 1e+08, lr 0.001): continues the run with "
                           "checkpoints at D 6e+09")
    assert said.endswith("resume its stable phase at D 6e+09, train it to D 2e+10, cool "
                         "down at D 2e+09, 2e+10")
    assert "a new run; train the stable phase to D 2e+09" in two.describe()
    # a cooldown below the run's longest checkpoint adds no stable tokens
    back, _ = wsd_runs(grid, picked[:1], np.array(earlier))
    assert "passed these token counts already: cool down at D 2e+09" in back[0].describe()
    # the user's column names
    assert back[0].describe({"N": "params", "D": "tokens"}).startswith(
        "wsd run 1 (params 1e+08, lr 0.001): the run with checkpoints at tokens 6e+09")
    assert three.to_dict({"N": "params"}) == {"run": 3, "params": 1e8, "lr": 3e-3,
                                              "train_to": 6e9, "cooldowns": [6e9],
                                              "earlier": []}


def test_the_budget_charges_each_run_what_it_costs_by_hand(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    grid = campaign_grid(tmp_path / "grid.yaml")
    runs = read_campaign_runs(RUNS, grid)
    f = 0.1
    res = suggest_runs(grid, runs, 0.3 * grid.budget_total, batch=6,
                       cost_model=CostModel("wsd", f))
    assert res.wsd_runs and len(res.run_numbers) == len(res.suggestions) == 6
    for run in res.wsd_runs:
        charged = sum(p for p, k in zip(res.prices, res.run_numbers, strict=True)
                      if k == run.number)
        last = max(run.earlier, default=0.0)  # the stable phase resumes there
        by_hand = 6 * run.N * ((1 - f) * max(run.train_to - last, 0.0) + f * sum(run.cooldowns))
        assert charged == pytest.approx(by_hand, rel=1e-12)
        assert not set(run.cooldowns) & set(run.earlier)  # nothing is trained twice
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
        assert {(s["N"], s["lr"]) for s in mine} == {(run["N"], run["lr"])}
    table = _suggest("--cost-model", "wsd", cwd=tmp_path)
    assert table.returncode == 0 and "wsd run 1 (N " in table.stdout
    csv = _suggest("--cost-model", "wsd", "--format", "csv", cwd=tmp_path)
    assert csv.stdout.splitlines()[0].startswith("N,D,C,lr,wsd_run,predicted_loss")
    plain = _suggest("--format", "json", cwd=tmp_path)
    assert "wsd_runs" not in json.loads(plain.stdout)
