"""What propose mode (``scalebo design --runs``) reports besides its proposals (a new-user
trial): the fit of the runs done — parameters, status, message — so that a law the runs
cannot identify (five runs at one model size) is visible, and, when the budget is spent
(exit 3), the fit and the target prediction still, in the JSON and on stderr."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main

FORMULA = "E + A*N**(-a) + B*D**(-b)"
BOUNDS = "E=0:5,A=1:1e5,a=0.05:1,B=1:1e5,b=0.05:1"
TRUTH = {"E": 1.7, "A": 406.4, "a": 0.34, "B": 410.7, "b": 0.28}


def _truth(N, D):
    return TRUTH["E"] + TRUTH["A"] * N ** -TRUTH["a"] + TRUTH["B"] * D ** -TRUTH["b"]


def _pool() -> pd.DataFrame:
    """5 N × 5 D (row order: N outer, D inner), noise-free."""
    N, D = (a.ravel() for a in np.meshgrid(np.geomspace(2e7, 1e9, 5),
                                           np.geomspace(4e8, 2e10, 5), indexing="ij"))
    return pd.DataFrame({"N": N, "D": D, "loss": _truth(N, D)})


def _run(tmp_path, done: pd.DataFrame, budget: str) -> tuple[int, dict]:
    pool = _pool()
    pool.drop(columns="loss").to_csv(tmp_path / "pool.csv", index=False)
    pd.DataFrame({"N": [3e9, 1e10], "D": [6e10, 2e11]}).to_csv(tmp_path / "t.csv",
                                                                index=False)
    done.to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    code = main(["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
                 str(tmp_path / "t.csv"), "--formula", FORMULA, "--bounds", BOUNDS,
                 "--cost", "6*N*D", "--runs", str(tmp_path / "done.csv"), "--budget", budget,
                 "--starts", "16", "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_the_fit_of_the_runs_done_is_reported_and_an_unidentified_one_warned(tmp_path,
                                                                            capsys):
    pool = _pool()
    code, result = _run(tmp_path, pool.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14]], "1")
    assert code == 0
    fit = result["fit"]
    assert (fit["status"], fit["identified"], fit["n_runs"]) == ("converged", True, 10)
    assert fit["params"] == pytest.approx(TRUTH, rel=1e-3)  # noise-free: the truth
    err = capsys.readouterr().err
    assert "fit of the 10 runs done: converged (" in err and "E=1.7" in err, err
    code, result = _run(tmp_path, pool.iloc[:5], "1")  # five runs, all at N = 2e7
    assert code == 0
    assert (result["fit"]["status"], result["fit"]["identified"]) == ("unidentified", False)
    assert "N takes one value" in result["fit"]["message"]
    err = capsys.readouterr().err
    assert "warning: the runs done do not identify the law: cannot be identified" in err, err


def test_a_spent_budget_exits_3_with_the_fit_and_the_target_prediction(tmp_path, capsys):
    pool = _pool()
    done = pool.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14]]
    spent = float((done.N * done.D).sum() / (pool.N * pool.D).sum())
    code, result = _run(tmp_path, done, f"{spent / 2:.6g}")
    assert code == 3
    assert result["stop"] is True and result["proposals"] == []
    assert "already spent" in result["message"]
    assert result["fit"]["status"] == "converged"
    preds = result["target_prediction"]
    truth = _truth(np.array([3e9, 1e10]), np.array([6e10, 2e11]))
    assert [p["mean"] for p in preds] == pytest.approx(truth, rel=1e-3)
    err = capsys.readouterr().err
    assert "target region (2 rows): predicted" in err and "stop: the runs done" in err, err
