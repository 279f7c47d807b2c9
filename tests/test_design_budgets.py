"""Budget edges of ``scalebo design`` (a new-user trial: ``--budgets 1``, "the whole pool",
left out the costliest row): on hand-made pools whose costs add up exactly, a checkpoint
holds every row whose purchase keeps the spend within ``b·C``, a spend of exactly ``b·C``
included, and a proposal may spend the budget to the last unit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main
from scalebo.design import design_replay, make_pool, make_target
from scalebo.design.replay import checkpoint_rows
from scalebo.laws.formula import formula_law

FORMULA = "E + A*N**(-a)"
BOUNDS = "E=0:10,A=0.1:1e4,a=0.05:2"
#: costs (column ``c``) of 0.1 … 0.7 of a unit: C = 2.8, and 0.1 + 0.2 rounds to
#: 0.30000000000000004, so the float comparisons are exercised, not avoided
COSTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]


def _pool() -> pd.DataFrame:
    N = np.array([10.0, 20, 40, 80, 160, 320, 640])
    return pd.DataFrame({"N": N, "c": COSTS, "loss": 2.0 + 5.0 * N**-0.5})


def test_checkpoint_rows_counts_a_spend_equal_to_the_budget_as_within_it():
    cum = np.cumsum(COSTS) / sum(COSTS)
    assert checkpoint_rows(cum, 1.0) == 7
    assert checkpoint_rows(cum, 0.3 / 2.8) == 2  # 0.1 + 0.2: exactly the budget
    assert checkpoint_rows(cum, 0.29 / 2.8) == 1  # 0.3 would be past it
    assert checkpoint_rows(np.array([0.5, 1.0 + 1e-15]), 1.0) == 2  # a sum's rounding


@pytest.mark.parametrize("method", ["cheapest", "random", "cost_weighted", "variance"])
def test_a_budget_of_one_buys_and_fits_the_whole_pool(method):
    law = formula_law(FORMULA, ("N",), {"E": (0, 10), "A": (0.1, 1e4), "a": (0.05, 2)})
    frame = _pool()
    pool = make_pool(frame, law, "c", response="loss")
    target = make_target(pd.DataFrame({"N": [5000.0, 1e4], "loss": [2.07, 2.05]}), law,
                         response="loss")
    rep = design_replay(pool, target, law, (0.3 / 2.8, 1.0), method=method, seed=3,
                        n_starts=4)
    last = rep.checkpoints[-1]
    assert sorted(rep.order) == list(range(7))
    assert (last.n_observed, last.spent_fraction) == (7, pytest.approx(1.0))
    if method == "cheapest":  # 0.1 then 0.2: the spend is then exactly 0.3 of 2.8
        assert rep.checkpoints[0].n_observed == 2


def _write(tmp_path, frame: pd.DataFrame) -> list[str]:
    frame.to_csv(tmp_path / "pool.csv", index=False)
    pd.DataFrame({"N": [5000.0, 1e4], "loss": [2.07, 2.05]}).to_csv(tmp_path / "t.csv",
                                                                    index=False)
    return ["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
            str(tmp_path / "t.csv"), "--formula", FORMULA, "--bounds", BOUNDS, "--cost", "c",
            "--starts", "4"]


@pytest.mark.parametrize("budget", ["1", "100%"])
def test_cli_budgets_one_is_the_whole_pool(tmp_path, budget):
    out = tmp_path / "r.json"
    assert main([*_write(tmp_path, _pool()), "--method", "cheapest", "--budgets", budget,
                 "--json", str(out)]) == 0
    (cp,) = json.loads(out.read_text())["checkpoints"]
    assert (cp["n_observed"], cp["spent_fraction"]) == (7, pytest.approx(1.0))


def test_cli_proposal_may_spend_the_budget_to_the_last_unit(tmp_path):
    """Six rows done (0.1 … 0.6, 2.1 of C = 2.8): the costliest row, 0.7, is what is left
    of --budget 1 and is proposed."""
    frame = _pool()
    args = _write(tmp_path, frame.drop(columns="loss"))
    frame.iloc[:6].to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "1", "--json",
                 str(out)]) == 0
    (prop,) = json.loads(out.read_text())["proposals"]
    assert (prop["data_row"], prop["cost_fraction"]) == (7, pytest.approx(0.25))
