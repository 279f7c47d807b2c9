"""The demo: the true compute law, and ``scalebo demo --quick`` end to end in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from scalebo.bench.demo import true_compute_law
from scalebo.bench.synthetic import DEFAULT_LAW


def test_true_compute_law_is_the_minimum_over_model_size():
    E, A, alpha = true_compute_law(DEFAULT_LAW)
    for C in (1e18, 1e21, 1e25, 1e29):
        N = np.geomspace(1e4, 1e16, 400_001)
        brute = DEFAULT_LAW.law_loss(N, C / (6 * N)).min()
        assert np.isclose(E + A * C ** -alpha, brute, rtol=1e-9, atol=0)
    a, b = DEFAULT_LAW.alpha, DEFAULT_LAW.beta
    assert np.isclose(alpha, a * b / (a + b))


def test_demo_quick_subprocess(tmp_path):
    plot = tmp_path / "demo.png"
    proc = subprocess.run(
        [sys.executable, "-m", "scalebo.cli", "demo", "--quick", "--format", "json",
         "--plot", str(plot)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    laws = {r["name"]: r for r in out["laws"]}
    assert list(laws) == ["true", "exhaustive", "BO observed", "BO + fantasize"]
    assert laws["exhaustive"]["compute_fraction"] == 1.0
    bo = laws["BO + fantasize"]
    assert 0 < bo["compute_fraction"] <= out["budget"] * (1 + 1e-9) and bo["runs"] > 0
    assert np.isclose(bo["flops"], bo["compute_fraction"] * out["C_total"])
    # The exhaustive fit is close to the truth; the fantasized BO fit to both, at 20× less.
    assert abs(out["error_vs_true_pct"]["exhaustive"]["1e+25"]) < 5
    assert abs(out["error_vs_exhaustive_pct"]["BO + fantasize"]["1e+25"]) < 5
    assert plot.stat().st_size > 10_000 and out["plot"] == str(plot)
    assert "figure written" in proc.stderr and not (tmp_path / "scalebo_demo.png").exists()


def _fake_result():
    from scalebo.bench.demo import DemoResult, LawRow

    laws = (LawRow("true", 1.82, 2728.0, 0.178, 0, 0.0, 0.0, "exact"),
            LawRow("exhaustive", 1.85, 3156.0, 0.182, 504, 1.0, 6.4e21, "converged"),
            LawRow("BO + fantasize", 1.77, 1319.0, 0.160, 50, 0.05, 3.2e20, "converged"))
    err = {1e25: -1.9, 1e27: -3.0, 1e29: -3.7}
    return DemoResult(laws, 0.05, 6.4e21, 504, {"BO + fantasize": err},
                      {"exhaustive": err, "BO + fantasize": err}, 1.0)


def test_demo_table_output_and_no_plot(tmp_path, monkeypatch, capsys):
    import scalebo.bench.demo as demo_mod
    from scalebo.cli.main import main

    monkeypatch.setattr(demo_mod, "run_demo", lambda **kw: _fake_result())
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--quick", "--no-plot"]) == 0
    text = capsys.readouterr().out
    assert "L(C) = E + A / C^alpha" in text and "(3.2e+20 of 6.4e+21 FLOPs, 20x less)" in text
    assert "BO + fantasize  exhaustive fit" in text and not list(tmp_path.iterdir())
    assert main(["demo", "--budget", "2"]) == 2
