"""The campaign library behind ``scalebo suggest``: first batch without runs, completed runs
counting toward the initial design, budget accounting in FLOPs."""

import numpy as np
import pandas as pd
import pytest

from scalebo.data.runs import load_runs
from scalebo.errors import SearchError
from scalebo.search.campaign import campaign_grid, suggest_runs


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 3e8, 1e9]\n  D: [2e9, 6e9, 2e10]\n  lr: [1e-3, 3e-3]\n")
    return campaign_grid(path)


def _runs(grid, rows):
    cfg = grid.configs.iloc[rows].reset_index(drop=True)
    loss = 2.0 + 300 * (6 * cfg["N"] * cfg["D"]) ** -0.12 + 5 * np.abs(np.log(cfg["lr"] / 2e-3))
    return load_runs(cfg.assign(loss=loss), hyperparameters=["lr"])


def test_first_batch_without_runs_is_the_initial_design(grid):
    assert grid.n_held_out_cells == 0 and len(grid) == 18  # a campaign holds nothing out
    sugg, acc = suggest_runs(grid, None, 0.3, batch=3)
    assert len({s.index for s in sugg}) == 3
    assert all("initial design" in s.reason for s in sugg)
    assert acc["spent"] == 0 and acc["budget"] == pytest.approx(0.3 * grid.C_total)
    C_total = float((6 * grid.configs["N"] * grid.configs["D"]).sum())  # by hand
    assert acc["C_total"] == pytest.approx(C_total)


def test_completed_runs_count_toward_the_initial_design(grid):
    cheap = np.argsort(grid.cost, kind="stable")[:5]
    runs = _runs(grid, cheap)
    sugg, acc = suggest_runs(grid, runs, 0.5, batch=2)
    assert not any("initial design" in s.reason for s in sugg)  # 5 runs: search at once
    assert not {s.index for s in sugg} & set(cheap.tolist())  # never a completed one again
    assert acc["spent"] == pytest.approx(float((6 * runs.frame["N"] * runs.frame["D"]).sum()))
    two = _runs(grid, cheap[:2])
    sugg2, _ = suggest_runs(grid, two, 0.5, batch=3)
    assert sum("initial design" in s.reason for s in sugg2) == 3  # 2 told + 3 designed = 5


def test_budget_spent_and_off_grid_runs_are_errors(grid):
    runs = _runs(grid, np.arange(len(grid)))
    with pytest.raises(SearchError, match="budget is already spent"):
        suggest_runs(grid, runs, 0.2)
    off = load_runs(pd.DataFrame({"N": [5e8], "D": [2e9], "lr": [1e-3], "loss": [3.0]}),
                    hyperparameters=["lr"])
    with pytest.raises(SearchError):
        suggest_runs(grid, off, 0.5)
    with pytest.raises(ValueError, match="fraction"):
        suggest_runs(grid, None, 1.5)


def test_campaign_posterior_is_the_law_posterior_of_its_runs(grid):
    from scalebo.search.campaign import campaign_posterior, grid_rows
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.models.surrogates import make_surrogate

    runs = _runs(grid, np.argsort(grid.cost, kind="stable")[:10])
    post = campaign_posterior(grid, runs, n_samples=16, seed=3)["compute"].summary()
    direct = law_posterior(grid, grid_rows(grid, runs.frame, "runs"), runs.loss,
                           make_surrogate("gp", rng=3), laws=("compute",), scope="grid",
                           n_samples=16, targets=(1e25,), rng=3)["compute"].summary()
    post.pop("seconds"), direct.pop("seconds")  # wall time
    assert post == direct
    q = post["predicted_loss"]["1e+25"]
    assert q["q02.5"] <= q["q10"] <= q["q50"] <= q["q90"] <= q["q97.5"]
