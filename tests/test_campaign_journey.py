"""A simulated campaign through the command line, from cold start to the stop: a synthetic
grid with a known law is the oracle; some runs crash (NaN loss), some stay running for a
round; the budget accounting is checked by hand at every step."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd

from scalebo.bench.synthetic import make_synthetic

GRID = """\
axes:
  N: [5.0e7, 1.0e8, 2.0e8, 4.0e8]
  D: [1.0e9, 2.0e9, 4.0e9]
  lr: [5.0e-4, 1.0e-3, 2.0e-3]
  bs: [128, 256]
"""
COLS = ["N", "D", "lr", "bs"]


def _cli(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", *args, "--quiet"], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return proc


def test_cold_start_to_stop(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID)
    truth = make_synthetic(N=[5e7, 1e8, 2e8, 4e8], D=[1e9, 2e9, 4e9], lr=[5e-4, 1e-3, 2e-3],
                           bs=[128, 256], seed=0).set_index(COLS)["loss"]
    C_total = float(sum(6 * n * d for n, d, _, _ in truth.index))
    budget = 0.3 * C_total
    runs = pd.DataFrame(columns=[*COLS, "loss", "status"])
    runs.to_csv(tmp_path / "runs.csv", index=False)  # header only: no run yet
    seen: set[tuple] = set()
    step = 0
    while True:
        step += 1
        out = _cli("suggest", "--grid", "grid.yaml", "--runs", "runs.csv", "--budget", "0.3",
                   "--batch", "4", "--format", "json", cwd=tmp_path)
        if out.returncode == 3:  # the budget is gone: the command says so, no traceback
            assert "budget" in out.stderr and "Traceback" not in out.stderr
            break
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        done = runs[runs["status"] != "running"]
        cost = (6 * runs["N"].astype(float) * runs["D"].astype(float))
        assert abs(res["spent"] - cost[done.index].sum()) <= 1e-9 * C_total  # failed too
        assert abs(res["pending"] - cost[runs["status"] == "running"].sum()) <= 1e-9 * C_total
        assert abs(res["budget"] - budget) <= 1e-9 * budget
        new = [tuple(float(s[c]) for c in COLS) for s in res["suggestions"]]
        assert not set(new) & seen  # never the same configuration twice (failed included)
        seen |= set(new)
        committed = cost.sum() + sum(6 * n * d for n, d, _, _ in new)
        assert committed <= budget * (1 + 1e-9)  # the budget is never exceeded
        runs.loc[runs["status"] == "running", "status"] = "completed"  # last round's finish
        for k, cfg in enumerate(new):
            loss = float(truth.loc[cfg])
            status = "completed"
            if (step + k) % 5 == 0:
                loss, status = np.nan, "completed"  # crashed: NaN loss counts as failed
            elif k == len(new) - 1:
                status = "running"  # still training at the next suggest
            runs.loc[len(runs)] = [*cfg, loss, status]
        runs.to_csv(tmp_path / "runs.csv", index=False)
        assert step < 30
    assert step >= 2 and (runs["loss"].isna()).any()
    runs.loc[runs["status"] == "running", "status"] = "completed"
    runs.to_csv(tmp_path / "runs.csv", index=False)
    out = _cli("status", "--grid", "grid.yaml", "--runs", "runs.csv", "--budget", "0.3",
               "--target", "1e21", "--samples", "16", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    cost = 6 * runs["N"].astype(float) * runs["D"].astype(float)
    assert abs(st["spent"] - cost.sum()) <= 1e-9 * C_total and st["pending"] == 0
    assert st["n_failed"] == int(runs["loss"].isna().sum())
    assert st["stop"] is True and "budget is spent" in st["reason"]
    assert st["targets"][0]["interval_80"] is not None


def test_proposals_give_whole_grid_values_as_integers(tmp_path):
    # A grid file's batch sizes 128 / 256 came back as 128.0 / 256.0 (and N as 50000000.0) in
    # the CSV and JSON of suggest and in its table: not what the user's runs file holds.
    (tmp_path / "grid.yaml").write_text(GRID.replace("5.0e7", "50331648"))  # 6 digits: inexact
    out = _cli("suggest", "--grid", "grid.yaml", "--budget", "0.3", "--batch", "3", "--format",
               "csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("N,D,C,lr,bs,")
    for line in lines[1:]:
        n, d, _, lr, bs = line.split(",")[:5]
        assert bs in ("128", "256") and n.isdigit() and d.isdigit(), line
        assert float(lr) in (5e-4, 1e-3, 2e-3)
    res = json.loads(_cli("suggest", "--grid", "grid.yaml", "--budget", "0.3", "--format",
                          "json", cwd=tmp_path).stdout)
    assert all(isinstance(s["bs"], int) and isinstance(s["N"], int) for s in res["suggestions"])
    table = _cli("suggest", "--grid", "grid.yaml", "--budget", "0.3", "--batch", "12",
                 cwd=tmp_path).stdout
    assert " 50331648 " in table and "50331648.0" not in table  # was repr(float): '.0'
    assert not any(".0 " in line for line in table.splitlines()[1:13])
