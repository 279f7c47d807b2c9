"""``scalebo replay`` end to end in a subprocess, on a small run-table file."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from scalebo.bench.synthetic import make_synthetic


def _scalebo(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalebo.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_replay_file_json_plot_and_errors(tmp_path):
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(3), D=1e9 * 2.0 ** np.arange(4),
                           lr=[5e-4, 1e-3, 2e-3], bs=[128, 256], seed=1)
    frame = frame.rename(columns={"N": "params"})[["params", "D", "lr", "bs", "loss"]]
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    out = _scalebo("replay", "--dataset", str(path), "--map", "N=params", "--axes", "lr,bs",
                   "--budget", "0.2", "--record-budgets", "0.1", "--no-fantasize",
                   "--json", "rec.json", "--plot", "trace.png", "--format", "json",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [m["budget"] for m in data["metrics"]] == [0.1, 0.2]
    assert data["method"]["fantasize"] is False
    assert all(m["spent_fraction"] <= m["budget"] + 1e-12 for m in data["metrics"])
    assert data["problem"]["n_configs"] == 72
    assert json.loads((tmp_path / "rec.json").read_text())["seed"] == 0
    assert (tmp_path / "trace.png").stat().st_size > 1000

    bad = _scalebo("replay", "--dataset", str(path), "--budget", "2", cwd=tmp_path)
    assert bad.returncode == 2 and "--budget" in bad.stderr
