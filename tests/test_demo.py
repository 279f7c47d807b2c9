"""The demo: the true compute law, and ``scalebo demo --quick`` end to end in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from dataclasses import replace
from types import SimpleNamespace

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
    assert out["n_grid"] == 504 and out["n_held_out"] == 36  # as --help says
    assert isinstance(out["warnings"], list) and isinstance(out["fantasize_identical"], bool)
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


def _identical_result(warned=()):
    from scalebo.bench.demo import DemoResult, LawRow, count_warnings

    bo = dict(E=1.84, A=2853.0, alpha=0.1797, runs=83, compute_fraction=0.05, flops=2.96e21,
              status="converged")
    laws = (LawRow("true", 1.82, 2728.0, 0.178, 0, 0.0, 0.0, "exact"),
            LawRow("exhaustive", 1.85, 3135.0, 0.182, 1600, 1.0, 5.9e22, "converged"),
            LawRow("BO observed", **bo),
            LawRow("BO + fantasize", **{**bo, "A": bo["A"] * (1 + 1e-8)}))
    err = {1e25: 0.78, 1e27: 0.87, 1e29: 0.92}
    return DemoResult(laws, 0.05, 5.9e22, 1600, {"BO observed": err, "BO + fantasize": err},
                      {"exhaustive": err, "BO observed": err, "BO + fantasize": err}, 1.0,
                      n_held_out=80, warnings=count_warnings(list(warned)))


def test_identical_fits_are_shown_once(monkeypatch, capsys):
    import scalebo.bench.demo as demo_mod
    from scalebo.cli.main import main

    result = _identical_result()
    assert result.fantasize_identical and not _fake_result().fantasize_identical
    monkeypatch.setattr(demo_mod, "run_demo", lambda **kw: result)
    assert main(["demo", "--no-plot"]) == 0
    text = capsys.readouterr().out
    assert "BO observed = BO + fantasize  1.84" in text and "fitted the same law" in text
    firsts = [line.split("  ")[1] for line in text.splitlines() if line.startswith("  BO")]
    assert firsts == ["BO observed = BO + fantasize"] * 3  # one law row, two error rows
    assert "grid: 1680 runs (1600 acquirable; 80 in the 2 largest-compute cells held out)" in text
    assert text.rstrip().endswith("done in 1.0 s; no warnings")
    assert main(["demo", "--no-plot", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fantasize_identical"] is True and len(out["laws"]) == 4 and out["warnings"] == []


def test_identical_fits_are_one_curve_in_the_figure(monkeypatch):
    import matplotlib.pyplot as plt

    import scalebo.bench.demo as demo_mod

    problem = SimpleNamespace(grid=SimpleNamespace(cost=np.geomspace(1e18, 1e21, 6),
                                                   held_out=np.r_[np.zeros(5, bool), True]),
                              loss=np.linspace(3.5, 2.5, 6))
    result = replace(_identical_result(), extras={"problem": problem, "observed": [0, 2]})
    figures = []
    monkeypatch.setattr(demo_mod, "save_figure", lambda fig, path, **kw: figures.append(fig))
    demo_mod.plot_demo(result, "unused.png")
    ax = figures[0].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert sum(label.startswith("BO") for label in labels) == 1
    assert any(label.startswith("BO observed = BO + fantasize") for label in labels)
    assert "same BO fit" in ax.get_title()
    plt.close(figures[0])


def test_warnings_are_recorded_not_swallowed(monkeypatch):
    import scalebo.bench.synthetic as synthetic_mod
    from scalebo.bench.demo import run_demo

    real = synthetic_mod.synthetic_runs

    def noisy(*args, **kwargs):
        for i in range(3):
            warnings.warn(f"overflow encountered in exp ({i})", RuntimeWarning, stacklevel=1)
        warnings.warn("a user warning", UserWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(synthetic_mod, "synthetic_runs", noisy)
    result = run_demo(quick=True)
    counts = {w.category: (w.count, w.first) for w in result.warnings}
    assert counts["RuntimeWarning"] == (3, "overflow encountered in exp (0)")
    assert counts["UserWarning"] == (1, "a user warning")
    assert result.warnings_summary().startswith(
        "4 warnings: 3 RuntimeWarning (first: overflow encountered in exp (0)); 1 UserWarning")
    assert result.to_dict()["warnings"][0] == {
        "category": "RuntimeWarning", "count": 3, "first": "overflow encountered in exp (0)"}
    assert result.n_grid == 504 and result.n_held_out == 36


def test_cli_prints_the_warnings_summary_on_stderr(monkeypatch, capsys):
    import scalebo.bench.demo as demo_mod
    from scalebo.cli.main import main

    caught = [warnings.WarningMessage("bad step", RuntimeWarning, "f.py", 1)] * 2
    monkeypatch.setattr(demo_mod, "run_demo", lambda **kw: _identical_result(caught))
    assert main(["-q", "demo", "--no-plot"]) == 0
    err = capsys.readouterr().err
    assert "warning: demo raised 2 warnings: 2 RuntimeWarning (first: bad step)" in err


def test_help_and_output_agree_on_run_counts():
    from scalebo.bench.demo import _quick_axes
    from scalebo.bench.synthetic import synthetic_runs
    from scalebo.cli.main import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices["demo"]
    text = " ".join(sub.format_help().split())
    assert len(synthetic_runs()) == 1680 and len(synthetic_runs(**_quick_axes())) == 540
    assert "1,680 runs" in text and "1,600 acquirable runs" in text
    assert "540 runs (504 acquirable) instead of 1,680 (1,600)" in text


def test_a_failed_bo_fit_says_why():
    """demo --budget 0.001: both BO laws 'failed' with no reason (a 2-point envelope)."""
    from scalebo.bench.demo import run_demo
    from scalebo.cli.demo import _render as render

    result = run_demo(quick=True, budget=0.001)
    bo = [r for r in result.laws if r.name.startswith("BO")]
    assert {r.status for r in bo} == {"failed"}
    text = render(result)
    assert ("note: BO observed (failed): its Pareto envelope of (compute, loss) has 2 points, "
            "fewer than the compute law's 3 parameters") in text
