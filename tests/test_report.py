"""Report: mean ± SD tables in the study's layouts, savings, figures only for present methods."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from test_records import budget_metrics

from scalebo.bench import report_figures
from scalebo.bench.records import IGNORED_ATTR, Cell, RecordWarning, load_records
from scalebo.bench.report import (
    ERROR_FLOOR_PCT,
    comparison_groups,
    extrapolation_table,
    format_pm,
    recovery_figure,
    summarize,
    write_report,
)
from scalebo.bench.sweep import SweepConfig, run_sweep

ERR = {"full": 8.0, "window": 2.0}  # |error| at 1e25 × budget, per method


def fake_cell(cell: Cell) -> dict:
    """Error shrinking with budget, ±seed spread; fantasized = observed / 2."""
    base = ERR[cell.method.as_kwargs()["strategy"]] * 0.01 / cell.budget
    err = base * (1 + 0.1 * (cell.seed - 1))  # seeds 0,1,2 → mean base, SD 0.1·base
    return {"metrics": budget_metrics(cell.budget, -err)}


CONFIG = {"name": "r", "seeds": 3, "budgets": [0.01, 0.05, 0.25], "datasets": ["toy"],
          "method_defaults": {"surrogate": "gp", "kernel": "matern52"},
          "methods": {"full": {"strategy": "full"}, "window": {"strategy": "window"}}}


def _records(tmp_path, config=CONFIG):
    run_sweep(SweepConfig.from_dict(config), tmp_path / "rec", cell_fn=fake_cell,
              progress=False)
    return tmp_path / "rec"


def test_summary_is_mean_and_sd_over_seeds(tmp_path):
    summary = summarize(load_records(_records(tmp_path)))
    row = summary[(summary["method"] == "window") & (summary["kind"] == "observed")
                  & (summary["metric"] == "compute.extrapolation_pct.1e+25")
                  & (summary["budget"] == 0.05)].iloc[0]
    assert np.isclose(row["mean"], 2.0 * 0.01 / 0.05)  # absolute value of the signed error
    assert np.isclose(row["sd"], 0.1 * 2.0 * 0.01 / 0.05) and row["n"] == 3


def test_one_seed_has_no_sd_and_its_tables_show_the_value_alone(tmp_path):
    path = write_report(_records(tmp_path, {**CONFIG, "seeds": [1]}), tmp_path / "out")
    md = path.read_text()
    assert "| toy | window | 2.00 | 0.40 | 0.08 | 1 |" in md and "±" not in md.split(
        "## Figures")[0].split("at 1e25 FLOPs")[1].split("##")[0]


def test_report_tables_and_figures(tmp_path):
    path = write_report(_records(tmp_path), tmp_path / "out", title="T")
    md = path.read_text()
    assert md.startswith("# T")
    # Table 1 layout: rows dataset × variant, columns budgets, mean ± SD and n.
    assert "| dataset | method | 1 % | 5 % | 25 % | n |" in md
    assert "| toy | window | 2.00 ± 0.20 | 0.40 ± 0.04 | 0.08 ± 0.01 | 3 |" in md
    assert "| toy | window + fantasize | 1.00 ± 0.10 | 0.20 ± 0.02 | 0.04 ± 0.00 | 3 |" in md
    assert "| toy | full | 8.00 ± 0.80 | 1.60 ± 0.16 | 0.32 ± 0.03 | 3 |" in md
    for C in ("1e25", "1e27", "1e29"):
        assert f"at {C} FLOPs" in md
    # Compute saved: first budget from which the mean error stays ≤ 1 %.
    assert re.search(r"\| toy \| window \| 5 % \| 20× \| 5\.00 \| 5\.7 \|", md)
    # met at the smallest budget recorded: a bound (a smaller one was never tried)
    assert re.search(r"\| toy \| window \+ fantasize \| ≤ 1 % \| ≥ 100× \|", md)
    assert re.search(r"\| toy \| full \| 25 % \| 4× \|", md)
    # Table 5 layout: coefficients per budget.
    assert "| toy | window | alpha | 0.1800 ± 0.0000 |" in md
    # Recovery figure per dataset; no surrogate/kernel comparison without such methods.
    assert (tmp_path / "out" / "figures" / "recovery_toy.png").stat().st_size > 10_000
    assert "figures/recovery_toy.png" in md
    assert not list((tmp_path / "out" / "figures").glob("compare_*"))


def test_report_names_and_counts_ignored_records(tmp_path):
    rec = _records(tmp_path)
    clean = write_report(rec, tmp_path / "clean", figures=False).read_text()
    assert "ignored" not in clean
    victim = sorted(p for p in rec.glob("*.json") if not p.name.startswith("sweep_"))[0]
    victim.write_text(victim.read_text()[:300])  # truncated record
    (rec / "notes.json").write_text('{"comment": "not a record"}')
    with pytest.warns(RecordWarning, match="ignored 2 record file") as caught:
        md = write_report(rec, tmp_path / "out", figures=False).read_text()
    assert victim.name in str(caught[0].message) and "notes.json" in str(caught[0].message)
    assert "2 record file(s) were ignored as unusable" in md
    assert f"`{victim.name}: not valid JSON" in md and "`notes.json: not a scalebo" in md
    assert "17 cells" in md  # 18 - the truncated one
    with pytest.warns(RecordWarning):
        assert len(load_records(rec).attrs[IGNORED_ATTR]) == 2
    for p in rec.glob("*.json"):
        if not p.name.startswith("sweep_"):
            p.write_text("{")
    with pytest.warns(RecordWarning), pytest.raises(
            ValueError, match=r"holds no scalebo record .*\(19 unusable record file"):
        write_report(rec, tmp_path / "none")


def test_comparison_figures_only_for_methods_that_differ(tmp_path):
    cfg = {**CONFIG, "seeds": 2, "methods": {
        "full": {"strategy": "full"}, "window": {"strategy": "window"},
        "window-rbf": {"strategy": "window", "kernel": "rbf"},
        "window-random": {"strategy": "window", "surrogate": "random"}}}
    frame = load_records(_records(tmp_path, cfg))
    assert comparison_groups(frame, "kernel") == [["window", "window-rbf"]]
    assert comparison_groups(frame, "surrogate") == [["window", "window-random"]]
    assert comparison_groups(frame, "acquisition") == []
    write_report(tmp_path / "rec", tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out" / "figures").glob("compare_*"))
    assert names == ["compare_kernel_0.png", "compare_surrogate_0.png"]


def test_cli_report_in_subprocess(tmp_path):
    rec = _records(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", "bench", "report", str(rec),
                           "--out", str(tmp_path / "rep"), "--no-figures"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rep" / "report.md").exists()
    assert not (tmp_path / "rep" / "figures").exists()
    # --threshold 2%: full's mean error 8 / 1.6 / 0.32 % stays within 2 % from 5 % on
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", "bench", "report", str(rec),
                           "--out", str(tmp_path / "rep2"), "--no-figures", "--no-oracle",
                           "--threshold", "2%"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    saved = (tmp_path / "rep2" / "report.md").read_text().split("## Compute saved")[1]
    assert saved.startswith(" to reach ≤ 2 % error") and "| toy | full | 5 % | 20× |" in saved
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", "bench", "report", str(empty),
                           "--out", str(tmp_path / "x")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "holds no scalebo record" in proc.stderr


def _oracle_cell(m) -> str:
    lm = m.observed["compute"]
    return "no fit" if lm.extrapolation_pct is None else f"{lm.abs_extrapolation(1e25):.2f}"


def test_oracle_rows_in_the_1e25_table(tmp_path, monkeypatch):
    from test_oracle import tiny_problem

    from scalebo.bench import problems as problems_mod
    from scalebo.bench.oracle import floor_oracle

    tiny = tiny_problem()
    monkeypatch.setattr(problems_mod, "load_problem",
                        lambda source, **kw: tiny if source == "toy" else None)
    budgets = (0.002, 0.05, 0.25)
    rec = _records(tmp_path, {**CONFIG, "budgets": list(budgets)})
    md = write_report(rec, tmp_path / "out", figures=False).read_text()
    for kind, label in (("envelope", "oracle: envelope"), ("cells", "oracle: cell bests"),
                        ("anchored", "oracle: envelope, costliest first")):
        cells = [_oracle_cell(floor_oracle(tiny, b, kind, laws=("compute",))) for b in budgets]
        assert f"| toy | {label} | " + " | ".join(cells) + " | – |" in md
    # 0.2 % buys 2 configurations (too few for a fit); 25 % the whole envelope (exact refit).
    assert "| toy | oracle: envelope | no fit | 1.37 | 0.00 | – |" in md
    assert "| toy | oracle: cell bests | no fit | 1.77 | 0.00 | – |" in md
    at25, at27 = md.index("at 1e25 FLOPs"), md.index("at 1e27 FLOPs")
    assert at25 < md.index("oracle: envelope") < at27 and md.count("| toy | oracle:") == 3
    # After the dataset's methods, and the floors are named.
    assert md.index("| toy | window + fantasize |") < md.index("| toy | oracle: envelope |")
    assert f"toy {100 * tiny.floor_envelope:.2f} / {100 * tiny.floor_cells:.2f}" in md
    share = tiny.grid.cost[tiny.grid.held_out].sum() / tiny.grid.cost.sum()  # by hand
    assert f"held-out cells (scored by `heldout_mse`): they hold {100 * share:.3g} % of toy's" in md


def test_oracle_rows_load_the_dataset_as_the_ok_records_do(tmp_path, monkeypatch):
    """A failed record left by an earlier config of the same dataset name (here: before a
    column mapping was added) does not decide how the oracle loads the data."""
    from test_oracle import tiny_problem

    from scalebo.bench import problems as problems_mod

    tiny = tiny_problem()

    def load(source, **kw):
        if kw.get("mapping") != {"N": "params"}:
            raise ValueError(f"{source}: missing required column(s) ['N']")
        return tiny

    def failing(cell):
        raise ValueError("missing required column(s) ['N']")

    monkeypatch.setattr(problems_mod, "load_problem", load)
    monkeypatch.chdir(tmp_path)  # a source file must exist when the config is read
    (tmp_path / "runs.csv").write_text("params,D,loss\n")
    old = {**CONFIG, "datasets": {"toy": {"source": "runs.csv"}}}
    run_sweep(SweepConfig.from_dict(old), tmp_path / "rec", cell_fn=failing, progress=False)
    new = {**CONFIG, "datasets": {"toy": {"source": "runs.csv",
                                          "mapping": {"N": "params"}}}}
    rec = _records(tmp_path, new)
    md = write_report(rec, tmp_path / "out", figures=False).read_text()
    assert "| toy | oracle: envelope |" in md and "cannot load" not in md
    # an unloadable dataset is named with its error, without a data-folder hint that
    # would not help here
    monkeypatch.setattr(problems_mod, "load_problem",
                        lambda source, **kw: (_ for _ in ()).throw(ValueError("bad column")))
    md = write_report(rec, tmp_path / "out2", figures=False).read_text()
    assert "No oracle rows for toy (cannot load it: ValueError: bad column)." in md
    assert "SCALEBO_DATA_DIR" not in md


def test_oracle_rows_skipped_when_the_dataset_cannot_be_loaded(tmp_path):
    rec = _records(tmp_path)
    md = write_report(rec, tmp_path / "out", figures=False).read_text()
    assert "No oracle rows for toy (cannot load it: " in md and "| toy | oracle:" not in md
    assert "Set `SCALEBO_DATA_DIR`" not in md  # a missing CSV of the user's is not a data dir


def test_the_oracle_names_the_data_folder_when_the_public_datasets_are_not_found(
        tmp_path, monkeypatch):
    from scalebo.bench.oracle import oracle_summary
    from scalebo.errors import DataDirError

    monkeypatch.delenv("SCALEBO_DATA_DIR", raising=False)
    orc = oracle_summary({"steplaw": ("steplaw", {})}, [0.01])
    assert orc.data_dir_missing and orc.skipped[0][0] == "steplaw"
    assert "DataDirError: no data directory given" in orc.skipped[0][1]
    empty = tmp_path / "empty"
    empty.mkdir()
    orc = oracle_summary({"steplaw": ("steplaw", {})}, [0.01], data_dir=empty)
    assert orc.data_dir_missing and "not found; expected the public" in orc.skipped[0][1]
    with pytest.raises(FileNotFoundError):  # still what callers caught before
        raise DataDirError("x")


def test_oracle_rows_not_computed_on_request(tmp_path):
    rec = _records(tmp_path)
    md = write_report(rec, tmp_path / "off", figures=False, oracle=False).read_text()
    assert "Floor-oracle rows not computed" in md and "cannot load" not in md
    proc = subprocess.run([sys.executable, "-m", "scalebo.cli", "bench", "report", str(rec),
                           "--out", str(tmp_path / "cli"), "--no-figures", "--no-oracle"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Floor-oracle rows not computed" in (tmp_path / "cli" / "report.md").read_text()


def test_numbers_below_the_display_floor_read_zero():
    assert format_pm(1.7e-10, 0.0) == "0.00 ± 0.00"
    assert format_pm(1.79e-07, 2.8e-23) == "0.00 ± 0.00"
    assert format_pm(-3e-9, 1e-9) == "0.00 ± 0.00"  # no "-0.00"
    assert format_pm(0.004, 0.006) == "0.00 ± 0.01"  # below half the last decimal: 0.00
    assert format_pm(0.4, 0.04) == "0.40 ± 0.04"
    assert format_pm(2790.0, 6.2e-06, 4) == "2.79e+03 ± 0.0000"
    assert format_pm(2810.0, 350.0, 4) == "2.81e+03 ± 3.5e+02"
    assert format_pm(float("nan"), 0.0) == "–"
    assert format_pm(0.4, float("nan")) == "0.40"  # one seed: no SD to show


def _tiny_error_cell(cell: Cell) -> dict:
    """Errors of 1.7e-10 % (a refit of the reference's own points), no spread."""
    return {"metrics": budget_metrics(cell.budget, -1.7e-10)}


def test_table_cell_and_figure_of_rounding_level_errors(tmp_path, monkeypatch):
    cfg = {**CONFIG, "seeds": 2}
    run_sweep(SweepConfig.from_dict(cfg), tmp_path / "rec", cell_fn=_tiny_error_cell,
              progress=False)
    summary = summarize(load_records(tmp_path / "rec"))
    table = extrapolation_table(summary)
    assert "| toy | window | 0.00 ± 0.00 | 0.00 ± 0.00 | 0.00 ± 0.00 | 2 |" in table
    assert "e-10" not in table and "e+00" not in table
    figures = []
    monkeypatch.setattr(report_figures, "save_figure", lambda fig, path, **kw: figures.append(fig))
    recovery_figure(summary, "toy", ["full", "window"], tmp_path / "f.png")
    ax = figures[0].axes[0]
    ys = np.concatenate([line.get_ydata() for line in ax.get_lines()])
    assert ys.min() >= ERROR_FLOOR_PCT  # drawn at the floor, not at 1e-10
    lo, hi = ax.get_ylim()
    assert lo > ERROR_FLOOR_PCT / 100 and np.log10(hi / lo) < 3  # not 8 decades down to 1e-10
    assert "0.001 %" in ax.get_ylabel()
    legend = figures[0].legends[0]
    styles = {h.get_linestyle() for h in legend.legend_handles}
    assert {"--", "-"} <= styles and legend.handlelength >= 3
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:2] == ["full", "window"] and "law on observed runs" in labels


def test_recovery_bands_stay_inside_their_range(tmp_path, monkeypatch):
    """SD larger than the mean: the log band stays positive, the percentage band in 0–100."""
    figures = []
    monkeypatch.setattr(report_figures, "save_figure", lambda fig, path, **kw: figures.append(fig))
    summary = summarize(load_records(_records(tmp_path)))
    wide = summary.assign(sd=summary["mean"] * 3)
    recovery_figure(wide, "toy", ["full", "window"], tmp_path / "f.png")
    for ax in figures[0].axes:
        for band in ax.collections:
            y = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
            if ax.get_yscale() == "linear":
                assert 0 <= y.min() and y.max() <= 100
            else:
                assert y.min() > 0


def test_one_budget_draws_its_spread_as_an_error_bar(tmp_path, monkeypatch):
    """A trial's sweep at one budget: the ±1 SD band had no width, so the figure showed no
    spread although the table said 8.58 ± 3.49; now an error bar of that spread."""
    figures = []
    monkeypatch.setattr(report_figures, "save_figure", lambda fig, path, **kw: figures.append(fig))
    summary = summarize(load_records(_records(tmp_path)))
    one = summary[summary["budget"] == summary["budget"].min()]
    recovery_figure(one, "toy", ["full", "window"], tmp_path / "f.png")
    ax = figures[0].axes[0]  # |extrapolation| at 1e25, log panel
    spans = [abs(seg[1][1] - seg[0][1]) for c in ax.collections if hasattr(c, "get_segments")
             for seg in c.get_segments()]
    assert len(spans) == 4 and min(spans) > 0  # 2 methods × observed / fantasized
    # one seed: no SD at all; neither a bar from the floor nor an axis stretched down to it
    figures.clear()
    recovery_figure(one.assign(sd=np.nan), "toy", ["full", "window"], tmp_path / "f.png")
    ax = figures[0].axes[0]
    assert not [c for c in ax.collections if hasattr(c, "get_segments") and c.get_segments()]
    assert ax.dataLim.y0 > 10 * ERROR_FLOOR_PCT


def test_the_report_counts_the_fits_that_converged(tmp_path):
    # Seed 2's compute-law fits at 1 % hit a bound: they still enter the mean ± SD tables,
    # and the report says how many of the seeds' fits behind each cell converged.
    def cell_fn(cell: Cell) -> dict:
        out = fake_cell(cell)
        if cell.seed == 2 and cell.budget == 0.01:
            for kind in ("observed", "fantasized"):
                out["metrics"][kind]["compute"]["status"] = "bound hit"
        return out

    run_sweep(SweepConfig.from_dict(CONFIG), tmp_path / "rec", cell_fn=cell_fn, progress=False)
    md = write_report(tmp_path / "rec", tmp_path / "out", figures=False, oracle=False).read_text()
    assert "## Fits that converged" in md
    assert "| toy | window | 2 / 3 | 3 / 3 | 3 / 3 |" in md
    assert "| toy | full + fantasize | 2 / 3 | 3 / 3 | 3 / 3 |" in md
    chin = write_report(tmp_path / "rec", tmp_path / "chin", figures=False, oracle=False,
                        law="chinchilla").read_text()
    assert "| toy | window | 0 / 3 | 0 / 3 | 0 / 3 |" in chin  # every Chinchilla fit failed


def test_compute_saved_needs_the_error_to_stay_within_the_threshold(tmp_path):
    """A method within 1 % at 5 % and 4.25 % at 10 % was reported as saving 20×; the saving
    is now read from the budget after which every larger one stays within."""
    errors = {0.01: 3.0, 0.05: 0.5, 0.10: 4.25, 0.25: 0.2}

    def cell(c: Cell) -> dict:
        return {"metrics": budget_metrics(c.budget, -errors[c.budget])}

    config = {**CONFIG, "seeds": 2, "budgets": list(errors), "methods": {
        "window": {"strategy": "window"}}}
    run_sweep(SweepConfig.from_dict(config), tmp_path / "rec", cell_fn=cell, progress=False)
    md = write_report(tmp_path / "rec", tmp_path / "out", figures=False).read_text()
    assert "from which mean error stays ≤ 1 %" in md
    assert re.search(r"\| toy \| window \| 25 % \| 4× \|", md)
    assert not re.search(r"\| toy \| window \| 5 % \| 20× \|", md)


def test_records_of_an_edited_config_are_left_out_and_said(tmp_path):
    """A trial edited a method setting and a budget and resumed into the same folder: the
    report averaged both settings' records at 5 % (n = 2 printed for 4) and showed the old
    setting's 10 % cells under the label's new meaning, without a word in report.md."""
    import os
    import time

    old = {**CONFIG, "seeds": 2, "budgets": [0.05, 0.1], "methods": {"window": {
        "strategy": "window", "kappa": 2.0}}}
    rec = _records(tmp_path, old)
    past = time.time() - 60
    for p in rec.glob("*.json"):
        os.utime(p, (past, past))  # written before the edit
    new = {**old, "budgets": [0.05, 0.2], "methods": {"window": {"strategy": "window",
                                                                 "kappa": 3.0}}}
    run_sweep(SweepConfig.from_dict(new), rec, cell_fn=fake_cell, progress=False)
    with pytest.warns(RecordWarning, match="several records"):
        assert load_records(rec)["key"].nunique() == 8  # every record, both settings
    md = write_report(rec, tmp_path / "out", figures=False, oracle=False).read_text()
    assert "4 cells:" in md and "budgets 5 %, 20 % of C_total" in md
    assert "toy/window: 4 older record(s) of other method settings" in md
    with pytest.warns(RecordWarning, match="several records"):
        both = write_report(rec, tmp_path / "all", figures=False, oracle=False,
                            all_records=True).read_text()
    assert "8 cells:" in both and "stale" not in both
    # back to the first config: its rerun recomputes nothing, yet its manifest makes its
    # records current again (a review: the newest record file decided, not the config)
    assert run_sweep(SweepConfig.from_dict(old), rec, cell_fn=fake_cell,
                     progress=False).ran == 0
    md = write_report(rec, tmp_path / "back", figures=False, oracle=False).read_text()
    assert "budgets 5 %, 10 % of C_total" in md and "4 older record(s)" in md
    # a config whose every cell fails: the report says where the ok records went
    failing = {**old, "methods": {"window": {"strategy": "window", "kappa": 5.0}}}

    def broken(cell):
        raise RuntimeError("boom")

    run_sweep(SweepConfig.from_dict(failing), rec, cell_fn=broken, progress=False)
    with pytest.raises(ValueError, match=r"every current record .* is of a failed cell .*"
                                         r"Left out as written under older settings: .*"
                                         r"--all-records"):
        write_report(rec, tmp_path / "none", figures=False, oracle=False)


def test_failed_runs_get_a_table_only_when_some_were_bought(tmp_path):
    """A trial's report had no count of the diverged runs a replay bought in vain."""

    def failing_runs(cell: Cell) -> dict:
        out = fake_cell(cell)
        out["metrics"]["n_failed"] = int(100 * cell.budget) + cell.seed  # 1 % → 1, 2, 3
        return out

    clean = write_report(_records(tmp_path / "a"), tmp_path / "ra", figures=False,
                         oracle=False).read_text()
    assert "Failed runs bought" not in clean
    run_sweep(SweepConfig.from_dict(CONFIG), tmp_path / "b", cell_fn=failing_runs,
              progress=False)
    md = write_report(tmp_path / "b", tmp_path / "rb", figures=False, oracle=False).read_text()
    table = md.split("## Failed runs bought")[1]
    assert "| toy | window | 2.0 ± 1.0 | 6.0 ± 1.0 | 26.0 ± 1.0 | 3 |" in table


def test_the_records_notes_on_the_data_are_in_the_report_once(tmp_path):
    """A trial: records held "excluded 3 of 120 runs (data rows 4, 41, 42)", and report.md
    said nothing of it."""
    import json

    rec = _records(tmp_path)
    note = "grid.csv: excluded 3 of 120 runs: 3 non-finite loss (data rows 4, 41, 42)."
    files = [p for p in rec.glob("*.json") if not p.name.startswith("sweep_")]
    for path in files:
        data = json.loads(path.read_text())
        data["notes"] = [note]
        path.write_text(json.dumps(data))
    md = write_report(rec, tmp_path / "out", figures=False, oracle=False).read_text()
    section = md.split("## Notes on the data (from the records)")[1].split("##")[0]
    assert section.strip() == f"- toy: {note}" and len(files) == 18
    clean = write_report(_records(tmp_path / "b"), tmp_path / "o2", figures=False,
                         oracle=False).read_text()
    assert "Notes on the data" not in clean


def test_a_chinchilla_report_says_whose_spread_its_caption_gives(tmp_path, monkeypatch):
    """A trial's `bench report --law chinchilla` quoted the reference compute law's spread
    above a table of Chinchilla errors, as if it were that law's."""
    from test_oracle import tiny_problem

    from scalebo.bench import problems as problems_mod

    tiny = tiny_problem()
    monkeypatch.setattr(problems_mod, "load_problem",
                        lambda source, **kw: tiny if source == "toy" else None)
    rec = _records(tmp_path, {**CONFIG, "budgets": [0.05, 0.25]})
    compute = write_report(rec, tmp_path / "out", figures=False).read_text()
    chin = write_report(rec, tmp_path / "chin", figures=False, law="chinchilla").read_text()
    assert "The reference compute law a replay is scored against is itself uncertain" in compute
    assert "That spread is the compute law's" not in compute
    assert ("That spread is the compute law's; this report's chinchilla reference is not "
            "bootstrapped, and its errors are against that one fit.") in chin
