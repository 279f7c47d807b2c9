"""``scalebo suggest`` in a subprocess: suggestions with reasons, and input errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scalebo.bench.synthetic import make_synthetic

GRID_YAML = """\
axes:
  N: [5.0e7, 1.0e8, 2.0e8]
  D: [1.0e9, 2.0e9, 4.0e9]
  lr: [5.0e-4, 1.0e-3, 2.0e-3]
  bs: [128, 256]
"""


def _scalebo(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalebo.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture()
def campaign(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    frame = make_synthetic(N=[5e7, 1e8, 2e8], D=[1e9, 2e9, 4e9], lr=[5e-4, 1e-3, 2e-3],
                           bs=[128, 256], seed=0)[["N", "D", "lr", "bs", "loss"]]
    frame.iloc[[0, 1, 2, 7, 12, 20]].to_csv(tmp_path / "done.csv", index=False)
    frame.iloc[[30]].drop(columns="loss").to_csv(tmp_path / "pending.csv", index=False)
    return tmp_path, frame


def test_suggests_q_new_affordable_configs_with_reasons(campaign):
    path, frame = campaign
    out = _scalebo("suggest", "--grid", "grid.yaml", "--runs", "done.csv", "--pending",
                   "pending.csv", "--budget", "0.3", "-q", "3", "--out", "next.csv",
                   "--format", "json", cwd=path)
    assert out.returncode == 0, out.stderr
    sug = json.loads(out.stdout)["suggestions"]
    assert len(sug) == 3
    taken = {tuple(frame.iloc[i][["N", "D", "lr", "bs"]]) for i in (0, 1, 2, 7, 12, 20, 30)}
    for s in sug:
        assert (s["N"], s["D"], s["lr"], s["bs"]) not in taken
        assert s["cost"] == pytest.approx(6 * s["N"] * s["D"])
        assert s["reason"] and s["predicted_loss"] is not None
    assert len({s["grid_index"] for s in sug}) == 3
    assert (path / "next.csv").read_text().count("\n") == 4


def test_off_grid_duplicate_and_spent_budget_exit_2(campaign):
    path, frame = campaign
    off = frame.iloc[[0]].assign(lr=7e-4)
    off.to_csv(path / "off.csv", index=False)
    out = _scalebo("suggest", "--grid", "grid.yaml", "--runs", "off.csv", "--budget", "0.1",
                   cwd=path)
    assert out.returncode == 2 and "not on the grid" in out.stderr
    frame.iloc[[0, 0]].to_csv(path / "dup.csv", index=False)
    out = _scalebo("suggest", "--grid", "grid.yaml", "--runs", "dup.csv", "--budget", "0.1",
                   cwd=path)
    assert out.returncode == 2 and "repeat" in out.stderr.lower()
    out = _scalebo("suggest", "--grid", "grid.yaml", "--runs", "done.csv", "--budget",
                   "0.001", cwd=path)
    assert out.returncode == 2 and "already spent" in out.stderr


def test_q_is_the_batch_size_in_suggest_and_quiet_elsewhere():
    from scalebo.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["suggest", "--grid", "g.yaml", "--runs", "r.csv",
                              "--budget", "0.1", "-q", "3", "--quiet"])
    assert args.q == 3 and args.quiet is True
    args = parser.parse_args(["suggest", "--grid", "g.yaml", "--runs", "r.csv",
                              "--budget", "0.1"])
    assert args.q == 1 and args.quiet is False
    assert parser.parse_args(["fit", "runs.csv", "-q"]).quiet is True
    assert parser.parse_args(["-q", "fit", "runs.csv"]).quiet is True
