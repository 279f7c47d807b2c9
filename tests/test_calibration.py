"""Calibration of the law posterior from hand-made records with known coverages and widths."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_records import budget_metrics

from scalebo.bench.calibration import (
    WIDTH_FLOOR_PCT,
    _width,
    bootstrap_calibration,
    calibration_summary,
    calibration_table,
    covers,
    intervals,
    pooled_table,
    wilson_interval,
)
from scalebo.bench.calibration_plot import calibration_figure
from scalebo.bench.records import Cell, load_records
from scalebo.bench.report import write_report
from scalebo.bench.sweep import SweepConfig, run_sweep

REF = {"compute": 2.0, "chinchilla": 3.0}
#: (budget, seed) → compute law's (q02.5, q10, q90, q97.5); None: no posterior for the cell.
COMPUTE = {
    (0.01, 0): (1.8, 1.9, 2.1, 2.2),        # covers both; 80 % width 10 %
    (0.01, 1): (1.95, 2.05, 2.3, 2.4),      # 80 % misses (above), 95 % covers; 12.5 %
    (0.01, 2): (1.4, 1.5, 1.99, 1.999),     # both miss (below); 24.5 %
    (0.01, 3): (1.9, 2.0, 2.2, 2.3),        # 80 % covers at its edge; 10 %
    (0.05, 0): (2.000001,) * 4,             # collapsed 5e-7 off: covered within 1e-6
    (0.05, 1): (2.00001,) * 4,              # collapsed 5e-6 off: not covered
    (0.05, 2): (1.98, 1.99, 2.01, 2.02),    # covers both; 1 %
    (0.05, 3): None,                        # posterior failed
}


def _law(q: tuple[float, ...] | None, ref: float) -> dict:
    keys = ("q02.5", "q10", "q90", "q97.5")
    pred = None if q is None else {c: {**dict(zip(keys, q, strict=True)), "q50": q[1]}
                                   for c in ("1e+25", "1e+27", "1e+29")}
    # The records' own strict flags are deliberately wrong: the report recomputes coverage.
    return {"predicted_loss": pred, "params": {}, "N_opt": None, "D_opt": None,
            "samples": 64, "n_failed": 0 if q else 64, "seconds": 0.1,
            "reference_loss": {c: ref for c in ("1e+25", "1e+27", "1e+29")},
            "covered": {c: {"80": False, "95": False} for c in ("1e+25", "1e+27", "1e+29")}}


def posterior_cell(cell: Cell) -> dict:
    metrics = budget_metrics(cell.budget, -1.0)
    q = COMPUTE[(cell.budget, cell.seed)]
    if q is None:
        metrics.update(law_posterior=None, posterior_message="law posterior failed: test")
    else:
        metrics.update(posterior_message="", law_posterior={
            "compute": _law(q, REF["compute"]),
            "chinchilla": _law((2.8, 2.9, 3.1, 3.2), REF["chinchilla"])})
    return {"metrics": metrics}


CONFIG = {"name": "cal", "seeds": 4, "budgets": [0.01, 0.05], "datasets": ["toy"],
          "method_defaults": {"surrogate": "gp", "kernel": "matern52"},
          "methods": {"window": {"strategy": "window"}}}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "rec"
    run_sweep(SweepConfig.from_dict(CONFIG), out, cell_fn=posterior_cell, progress=False)
    return out


def test_covers_with_tolerance():
    lo, hi = np.array([1.0, 1.0, 2.0, 2.0, np.nan]), np.array([2.0, 2.0, 2.0, 2.0, 3.0])
    ref = np.array([2.0, 2.0 + 1e-6, 2.0 * (1 + 1e-6), 2.0 * (1 + 2e-6), 2.5])
    np.testing.assert_array_equal(covers(lo, hi, ref), [True, True, True, False, False])
    np.testing.assert_array_equal(covers(lo, hi, ref, rtol=0.0),
                                  [True, False, False, False, False])


def test_intervals_flags_and_widths(records):
    iv = intervals(load_records(records))
    assert len(iv) == 16  # 8 cells × 2 laws, the cell without a posterior included
    comp = iv[iv["law"] == "compute"].set_index(["budget", "seed"])
    assert list(comp.loc[0.01, "covered_80"]) == [True, False, False, True]
    assert list(comp.loc[0.01, "covered_95"]) == [True, True, False, True]
    assert comp.loc[(0.01, 1), "width_80_pct"] == pytest.approx(12.5)
    collapsed = comp.loc[(0.05, 0)]
    assert collapsed["covered_80"] and collapsed["covered_95"]  # within 1e-6 of the point
    assert not collapsed["strict_80"] and collapsed["width_80_pct"] == 0.0
    assert not comp.loc[(0.05, 1), "covered_80"]  # 5e-6 off
    assert not comp.loc[(0.05, 3), "ok"] and not comp.loc[(0.05, 3), "covered_80"]


def test_summary_has_known_coverages(records):
    s = calibration_summary(intervals(load_records(records))).set_index(["law", "budget"])
    c1, c5 = s.loc[("compute", 0.01)], s.loc[("compute", 0.05)]
    assert (c1["coverage_80"], c1["coverage_95"], c1["n"]) == (0.5, 0.75, 4)
    assert c1["median_width_80_pct"] == pytest.approx(11.25)  # median(10, 12.5, 24.5, 10)
    assert c5["coverage_80"] == pytest.approx(2 / 3) and c5["coverage_95"] == pytest.approx(2 / 3)
    assert (c5["n"], c5["missing"], c5["tolerance_only"]) == (3, 1, 2)
    assert s.loc[("chinchilla", 0.01), "median_width_80_pct"] == pytest.approx(100 * 0.2 / 3)
    pooled = calibration_summary(intervals(load_records(records)), pooled=True)
    comp = pooled.set_index("law").loc["compute"]
    assert comp["coverage_80"] == pytest.approx(4 / 7) and comp["n"] == 7


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_pooled_table_prints_targets_and_verdicts(records):
    md = pooled_table(intervals(load_records(records)))
    assert "target 70–90 %" in md and "target 88–99 %" in md
    lo, hi = wilson_interval(4, 7)
    # 4 of 7 is below the band, but with 7 replays its Wilson interval reaches it (a trial
    # read "below" with n = 2 as a verdict)
    assert lo < 0.7 < hi
    assert (f"| window | compute | 57 % [{100 * lo:.0f} %, {100 * hi:.0f} %] | below, but its "
            "95 % CI reaches the target: too few replays to tell | 71 % " in md)
    assert "| window | chinchilla | 100 % [" in md and md.count("above") == 2
    assert md.count(" | 7 (+1 without) |") == 2  # the failed posterior is counted, not dropped


def test_a_group_whose_every_replay_lacks_an_interval_is_shown(records):
    """A budget at which every posterior failed (an envelope of 2 points) was left out of
    the table, so the report looked as if it had not been asked for."""
    iv = intervals(load_records(records))
    md = calibration_table(iv[(iv["budget"] == 0.01) | (iv["seed"] == 3)])
    assert "| toy | window | compute | 5 % | – | – | – | 0 (+1 without) |" in md
    assert "| toy | window | compute | 1 % | 50 % | 75 % | 11.25 | 4 |" in md
    # a method without any law posterior (Full in the main comparison) gets no row at all
    none = iv.assign(method="full", ok=False, key=iv["key"] + "f")
    both = pd.concat([iv, none], ignore_index=True)
    assert "| full |" not in calibration_table(both) and "| full |" not in pooled_table(both)


def test_report_calibration_section_and_figure(records, tmp_path):
    md = write_report(records, tmp_path / "out").read_text()
    assert "## Calibration of the law posterior at 1e25 FLOPs" in md
    assert "`|ref − interval| ≤ 1e-06·ref`" in md and "2 intervals here cover only" in md
    assert "| toy | window | compute | 1 % | 50 % | 75 % | 11.25 | 4 |" in md
    assert "| toy | window | compute | 5 % | 67 % | 67 % | 0.00 | 3 (+1 without) |" in md
    assert "| toy | window | chinchilla | 5 % | 100 % | 100 % | 6.67 | 3 (+1 without) |" in md
    assert md.index("| toy | window | compute | 1 %") < md.index("| toy | window | chinchilla")
    assert "not in the records and is not compared here" in md
    assert (tmp_path / "out" / "figures" / "calibration.png").stat().st_size > 10_000
    assert "figures/calibration.png" in md


def test_no_posterior_anywhere_says_so(tmp_path):
    from test_report import _records

    md = write_report(_records(tmp_path), tmp_path / "out").read_text()
    assert "_no law posterior in the records_" in md
    assert not (tmp_path / "out" / "figures" / "calibration.png").exists()
    assert calibration_figure(intervals(load_records(tmp_path / "rec")),
                              tmp_path / "x.png") is None


def test_bootstrap_hook_reads_only_what_records_hold(records, tmp_path):
    assert bootstrap_calibration(load_records(records)) is None

    def with_bootstrap(cell: Cell) -> dict:
        out = posterior_cell(cell)
        out["metrics"]["observed_bootstrap"] = {"compute": _law((1.0, 1.1, 1.2, 1.3), 2.0)}
        return out

    rec = tmp_path / "boot"
    run_sweep(SweepConfig.from_dict(CONFIG), rec, cell_fn=with_bootstrap, progress=False)
    boot = bootstrap_calibration(load_records(rec))
    assert boot is not None and len(boot) == 8 and not boot["covered_95"].any()
    md = write_report(rec, tmp_path / "out", figures=False).read_text()
    assert "bootstrap over observed runs (as recorded)" in md
    assert "| window | compute | 0 % [" in md


def test_widths_below_the_floor_read_zero():
    assert _width(0.0) == "0.00" and _width(1e-7) == "0.00"
    assert _width(WIDTH_FLOOR_PCT / 2) == "0.00" and _width(0.00345) == "0.00345"
    assert _width(11.25) == "11.25" and _width(float("nan")) == "–"


def test_the_width_panel_draws_its_floor_only_where_a_width_reaches_it(monkeypatch, tmp_path):
    """A trial: the 0.001 % floor line stretched the log axis from 0.001 to 50 % while every
    width lay between 9 and 43 %."""
    import scalebo.bench.calibration_plot as cp

    shown = {}
    monkeypatch.setattr(cp, "save_figure", lambda fig, path, **kw: shown.update(fig=fig))
    for widths in ((9.0, 43.0), (0.0, 12.0)):
        s = pd.DataFrame({"dataset": "g", "method": "window", "law": "compute",
                          "budget": [0.05, 0.1], "coverage_80": 0.8, "coverage_95": 0.95,
                          "median_width_80_pct": widths, "n": 10})
        monkeypatch.setattr(cp, "calibration_summary", lambda iv, s=s: s)
        cp.calibration_figure(pd.DataFrame({"x": [1]}), tmp_path / "c.png")
        ax = shown["fig"].axes[2]
        floor = [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [cp.WIDTH_FLOOR_PCT] * 2]
        assert bool(floor) == (min(widths) < cp.WIDTH_FLOOR_PCT)
        assert ax.get_ylim()[0] > (1.0 if min(widths) > 1 else 0)  # no empty decades
