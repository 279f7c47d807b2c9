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
    common = ("replay", "--dataset", str(path), "--map", "N=params", "--axes", "lr,bs",
              "--budget", "0.2", "--no-fantasize", "--posterior-samples", "0", "--format", "json")
    out = _scalebo(*common, "--record-budgets", "0.1", "--json", "rec.json",
                   "--plot", "trace.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [m["budget"] for m in data["metrics"]] == [0.1, 0.2]
    assert data["method"]["fantasize"] is False
    assert data["method"]["incumbent"] == "envelope" and data["method"]["ei_cost_power"] == 1.0
    assert all(m["spent_fraction"] <= m["budget"] + 1e-12 for m in data["metrics"])
    assert data["problem"]["n_configs"] == 72
    # (1e8, 8e9) and (2e8, 4e9) cost the same; which of them is held out is said
    assert [(c["N"], c["D"]) for c in data["problem"]["held_out_cells"]] == [(2e8, 4e9),
                                                                           (2e8, 8e9)]
    assert ("held out of the search, scored by heldout_mse: (N=2e+08, D=4e+09), (N=2e+08, "
            "D=8e+09) (cells (N=1e+08, D=8e+09), (N=2e+08, D=4e+09) cost the same") in out.stderr
    assert "(N=1e+08, D=8e+09) stay in the search" in data["problem"]["held_out_tie"]
    assert json.loads((tmp_path / "rec.json").read_text())["seed"] == 0
    assert (tmp_path / "trace.png").stat().st_size > 1000

    bad = _scalebo("replay", "--dataset", str(path), "--budget", "2", cwd=tmp_path)
    assert bad.returncode == 2 and "--budget" in bad.stderr
    late = _scalebo("replay", "--dataset", str(path), "--budget", "0.1", "--record-budgets",
                    "0.05,0.2", cwd=tmp_path)  # refused before the data load
    assert late.returncode == 2 and "loading" not in late.stderr
    assert ("--record-budgets 0.2: a budget recorded on the way must be at most --budget 0.1"
            in late.stderr)

    # The 0.2 search (cell-best incumbent, cost-blind EI) is two options away, and it picks
    # other runs: per unit cost, EI buys more of the cheap configurations.
    old = _scalebo(*common, "--record-budgets", "0.1", "--incumbent", "frontier",
                   "--ei-cost-power", "0", cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    prev = json.loads(old.stdout)
    assert prev["method"]["incumbent"] == "frontier" and prev["method"]["ei_cost_power"] == 0.0
    assert [t["index"] for t in prev["trace"]] != [t["index"] for t in data["trace"]]


def test_replay_table_prints_the_law_intervals(tmp_path):
    """The table ends with the law posterior's and the observed bootstrap's intervals at
    1e25 FLOPs, equal to the JSON record's; --posterior-samples 0 drops them."""
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(4), D=1e9 * 2.0 ** np.arange(4),
                           lr=[5e-4, 1e-3, 2e-3], bs=[128, 256], seed=2)
    path = tmp_path / "runs.csv"
    frame[["N", "D", "lr", "bs", "loss"]].to_csv(path, index=False)
    args = ("replay", "--dataset", str(path), "--axes", "lr,bs", "--budget", "0.2",
            "--posterior-samples", "16", "--bootstrap-samples", "20", "--json", "rec.json")
    out = _scalebo(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "law intervals at 1e25 FLOPs" in out.stdout
    # every abbreviated column of the metric table is explained under it
    header = next(line.split() for line in out.stdout.splitlines() if "x_floor" in line)
    legend = next(line for line in out.stdout.splitlines() if line.startswith("source: "))
    for column in ("x_floor", "env_%", "cell_%", "heldout_mse", "|d|%@C", "spent"):
        assert column in legend, column
    assert legend.startswith("source: observed = the law fitted on the runs trained, "
                             "fantasized = on them plus")
    assert "source: posterior = the law posterior" in out.stdout
    assert {"x_floor", "env_%", "cell_%", "|d|%@1e+25"} <= set(header)
    rec = json.loads((tmp_path / "rec.json").read_text())
    for m in rec["metrics"]:  # a fill-in's note is printed, not left in the JSON only
        if m["fantasized"] and m["fantasize_message"]:
            assert f"note at {m['budget']:g}: {m['fantasize_message']}" in out.stdout
    post = rec["metrics"][0]["law_posterior"]["compute"]
    assert post["samples"] == 16
    rows = [line.split() for line in out.stdout.splitlines()
            if line.split()[:3] == ["0.2", "posterior", "compute"]]
    assert len(rows) == 1
    assert float(rows[0][5]) == round(post["predicted_loss"]["1e+25"]["q50"], 4)
    assert any(line.split()[:2] == ["0.2", "bootstrap"] for line in out.stdout.splitlines())
    none = _scalebo(*args[:-4], "--posterior-samples", "0", cwd=tmp_path)
    assert none.returncode == 0 and "law intervals" not in none.stdout


def test_format_csv_prints_csv(tmp_path):
    import csv
    import io

    proc = _scalebo("replay", "--dataset", "synthetic", "--budget", "0.02", "--format", "csv",
                    "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    fits = [r for r in rows if r["source"] in ("observed", "fantasized")]
    assert {(r["source"], r["law"]) for r in fits} == {
        ("observed", "compute"), ("observed", "chinchilla"), ("fantasized", "compute"),
        ("fantasized", "chinchilla")}
    assert all(float(r["spent"]) <= 0.02 * (1 + 1e-6) and r["message"] for r in fits)
    # The law intervals are in the same CSV (they were dropped from it): one row per law.
    post = [r for r in rows if r["source"] == "posterior"]
    assert {r["law"] for r in post} == {"compute", "chinchilla"}
    for r in post:
        q = [float(r[k]) for k in ("q02.5", "q10", "q50", "q90", "q97.5")]
        assert q == sorted(q) and r["covers_80"] in ("True", "False") and r["fits"]


def test_a_budget_that_buys_nothing_and_failed_fits_say_why(tmp_path):
    """Few cells of similar cost (every configuration > 2 % of C_total): the 1 % budget
    buys no run. It used to print only 'failed' rows with 0 runs; now stderr says the
    budget affords no run and what the cheapest run costs, and the table lists each fit
    without an estimate with its reason."""
    frame = make_synthetic(N=[1e8, 1.5e8, 2.2e8], D=[2e9, 3e9, 4.5e9], lr=[5e-4, 1e-3],
                           bs=[256.0], seed=4)
    path = tmp_path / "flat.csv"
    frame[["N", "D", "lr", "loss"]].to_csv(path, index=False)
    out = _scalebo("replay", "--dataset", str(path), "--axes", "lr", "--budget", "0.1",
                   "--record-budgets", "0.01", "--posterior-samples", "0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "warning: budget 0.01 of C_total affords no run: the cheapest acquirable " \
           "configuration costs 0.0" in out.stderr
    assert "budget 0.1 of C_total affords no run" not in out.stderr
    # the costliest envelope configuration (0.118 of C_total here) is out of reach at both
    assert "warning: budget 0.1 of C_total is below the cost of 1 of the reference " \
           "envelope's" in out.stderr and "warning: budget 0.01 of C_total is below" in out.stderr
    assert "why there is no estimate" in out.stdout
    why = out.stdout.split("why there is no estimate")[1].splitlines()
    assert any(line.split()[:3] == ["0.01", "observed", "compute"]
               and "no observation to fit" in line for line in why)
    assert any(line.split()[:2] == ["0.01", "fantasized"]
               and "nothing to fantasize from" in line for line in why)


def test_an_exactly_determined_fit_is_marked_exact_in_the_table():
    from dataclasses import replace
    from types import SimpleNamespace

    from scalebo.bench.metrics import BudgetMetrics, LawMetrics
    from scalebo.cli.replay import _metric_rows
    from scalebo.cli.replay_tables import metric_legend as _legend

    keys = ("1e+25", "1e+27", "1e+29")

    exact = LawMetrics("compute", "converged", "converged; 1 of 1 converged starts agree; "
                       "exactly determined: 3 distinct values of C for 3 parameters, so ...",
                       3, {"E": 1.0, "A": 10.0, "alpha": 0.1}, {}, None, dict.fromkeys(keys, 2.0))
    tested = LawMetrics("chinchilla", "converged", "converged; 9 of 9 converged starts agree",
                        9, {"E": 1.0}, {}, None, dict.fromkeys(keys, -1.0))
    failed = LawMetrics("compute", "failed", "exactly determined is not the point here", 2)
    m = BudgetMetrics(budget=0.05, n_runs=9, spent_flops=1.0, spent_fraction=0.05,
                      floor_multiple_cells=1.0, floor_multiple_envelope=1.0,
                      envelope_recovery_pct=0.0, cell_recovery_pct=0.0,
                      observed={"compute": exact, "chinchilla": tested},
                      fantasized={"compute": failed})
    rows = _metric_rows(SimpleNamespace(metrics=[m]), (1e25, 1e27, 1e29))
    assert [r["status"] for r in rows] == ["converged, exact", "converged", "failed"]
    assert 'status "exact"' in _legend(rows)
    assert 'status "exact"' not in _legend(rows[1:])  # explained only when a row has it
    # a trial read |d| % beside "unidentified" as a score: the legend says what it is
    assert "not pinned down" not in _legend(rows)
    # a 3 N x 4 D Chinchilla fit: its N term passes through the three N levels
    from scalebo.fitting.identifiability import exact_term_note
    from scalebo.laws import CHINCHILLA

    X = np.array([(n, d) for n in (1e8, 2e8, 4e8) for d in (1e9, 2e9, 4e9, 8e9)])
    levels = LawMetrics("chinchilla", "converged", "converged; " + exact_term_note(CHINCHILLA, X),
                        12, {"E": 1.0}, {}, None, dict.fromkeys(keys, 0.5))
    m3 = replace(m, observed={"chinchilla": levels}, fantasized=None)
    three = _metric_rows(SimpleNamespace(metrics=[m3]), (1e25, 1e27, 1e29))
    assert [r["status"] for r in three] == ["converged, shape unchecked"]
    assert 'status "shape unchecked": a term\'s variable (N or D) takes only 3' in _legend(three)
    assert "shape unchecked" not in _legend(rows)
    loose = [{**rows[1], "status": "unidentified"}, {**rows[2], "status": "bound hit"}]
    assert ('status "unidentified" / "bound hit": the law\'s parameters are not pinned down by '
            "these points, so its |d|% is a number, not a measure of the search") in _legend(loose)


def test_an_interval_made_by_bound_hits_gets_a_note():
    """A replay printed '±3 %' around a value 23 % off with only '39/64 at a bound' in its
    fits column; half or more of the sample fits failed or at a bound now get a note."""
    from types import SimpleNamespace

    from scalebo.cli.replay_tables import untrusted_notes

    def post(failed, bound):
        return {"samples": 64, "n_failed": failed, "n_bound_hit": bound}

    rec = SimpleNamespace(metrics=[
        SimpleNamespace(budget=0.05, law_posterior={"compute": post(0, 39),
                                                    "chinchilla": post(6, 20)}),
        SimpleNamespace(budget=0.01, law_posterior={"compute": post(6, 26)}),
        SimpleNamespace(budget=0.1, law_posterior=None),
        SimpleNamespace(budget=0.2, law_posterior={"compute": post(64, 0)})])  # no interval
    notes = untrusted_notes(rec)
    assert len(notes) == 3 and notes[0].startswith(
        "note at 0.05: 39 of the compute law posterior's 64 sample fits failed or ended at a "
        "parameter bound") and notes[2].startswith("note at 0.01: 32 of the compute")
    # 20 of 64 at a bound (and 6 failed): under half, but its intervals are cut at the bound
    assert notes[1].startswith("note at 0.05: 20 of the chinchilla law posterior's 64 sample "
                               "fits ended at a parameter bound: its intervals are cut")


def test_a_zero_width_law_posterior_interval_gets_a_note():
    """A trial read q10 = q90 = 1.9659 (reference 1.972) as certainty; a collapsed interval
    is now said to be the point fit, and an interval of any width is not noted."""
    from types import SimpleNamespace

    from scalebo.cli.replay_tables import untrusted_notes

    def post(lo, hi):
        q = {"q02.5": lo, "q10": lo, "q50": lo, "q90": hi, "q97.5": hi}
        return {"samples": 64, "n_failed": 0, "n_bound_hit": 0,
                "predicted_loss": {"1e+25": q}}

    rec = SimpleNamespace(metrics=[
        SimpleNamespace(budget=0.1, law_posterior={"compute": post(1.9659, 1.9659),
                                                   "chinchilla": post(1.90, 2.02)})])
    (note,) = untrusted_notes(rec)
    assert note.startswith("note at 0.1: the compute law posterior's interval has zero width")


def test_the_reference_notes_and_json_whether_or_not_its_spread_is_known(tmp_path):
    """The reference's bootstrap spread goes to the JSON whenever it is known, and a grid
    whose reference hits a bound (no spread) but whose hull parts from its envelope gets the
    hull note without failing (a slip put the JSON line under the hull note: the field went
    missing on grids without the note, and replay crashed on this one)."""
    from scalebo.bench.problems import load_problem
    from scalebo.bench.reference_spread import reference_frontier_note, reference_spread

    N, D, lr = (x.ravel() for x in np.meshgrid(np.geomspace(2e7, 5e8, 3), [4e9, 2.56e11],
                                                [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]))
    loss = (1.9 + 400 / N**0.33 + 1800 / D**0.30
            + 0.04 * np.log2(lr / (3e-3 * (N / 1e8) ** -0.5)) ** 2)
    import pandas as pd

    bound = tmp_path / "bound.csv"
    pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": loss}).to_csv(bound, index=False)
    noisy = tmp_path / "noisy.csv"
    make_synthetic(N=5e7 * 2.0 ** np.arange(3), D=1e9 * 2.0 ** np.arange(4), lr=[5e-4, 1e-3],
                   bs=[128], seed=1)[["N", "D", "lr", "loss"]].to_csv(noisy, index=False)
    for path in (bound, noisy):
        problem = load_problem(str(path), n_held_out_cells=0)
        spread, hull = reference_spread(problem, 1e25), reference_frontier_note(problem)
        out = _scalebo("replay", "--dataset", str(path), "--held-out-cells", "0", "--budget",
                       "0.1", "--surrogate", "random", "--posterior-samples", "0",
                       "--bootstrap-samples", "0", "--format", "json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)["problem"].get("reference_spread")
        assert (got is None) == (spread is None)
        assert ("reference compute law: fitted on the lower convex hull" in out.stderr) == (
            hull is not None)
        assert (hull in json.loads(out.stdout)["problem"]["notes"]) == (hull is not None)
        if path == bound:
            assert spread is None and hull is not None  # the case that crashed
        else:
            assert got == spread.to_dict()


def test_held_out_cells_say_their_share_of_the_compute_and_a_large_one_is_called_so(tmp_path):
    """A trial's 3 × 3 × 3 grid: the two held-out cells held 65 % of its compute, so replay's
    --budget 0.3 meant a third of what suggest's did, with only the cells named."""
    import pandas as pd

    from scalebo.bench.problems import load_problem

    N, D, lr = (x.ravel() for x in np.meshgrid([1e9, 3e9, 7e9], [2e10, 6e10, 2e11],
                                                [1e-3, 2e-3, 4e-3]))
    loss = (1.8 + 480 / N**0.34 + 2100 / D**0.36
            + 0.03 * np.log2(lr / (3e-3 * (N / 1e9) ** -0.3)) ** 2)
    path = tmp_path / "runs.csv"
    pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": loss}).to_csv(path, index=False)
    grid = load_problem(str(path)).grid
    share = 1 - grid.C_total / grid.C_total_all
    assert share > 0.6  # by hand: (3e9 + 7e9)·2e11·3 of Σ N·D·3
    out = _scalebo("replay", "--dataset", str(path), "--budget", "0.3", "--surrogate",
                   "random", "--posterior-samples", "0", "--bootstrap-samples", "0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (f"they hold {100 * share:.3g} % of the grid's compute, and budgets are fractions of "
            f"the rest, C_total = {grid.C_total:.4g} FLOPs (a large share") in out.stderr


def test_a_grid_without_a_reference_law_says_what_loading_excluded(tmp_path):
    # A trial: a table whose NaN row left too few compute levels for a reference law got
    # only the reference error; the exclusion that caused it was said nowhere (CLI nor
    # Python), because the loader's warnings were dropped when it raised.
    import pandas as pd
    import pytest

    from scalebo.bench.problems import load_problem
    from scalebo.errors import FitError

    rows = [(n, d, lr, 3.0 - 0.1 * np.log10(n * d)) for n in (1e8, 2e8) for d in (1e9, 2e9)
            for lr in (5e-4, 1e-3, 2e-3)]
    frame = pd.DataFrame(rows, columns=["N", "D", "lr", "loss"])
    frame.loc[1, "loss"] = np.nan
    frame.to_csv(tmp_path / "tiny.csv", index=False)
    out = _scalebo("replay", "--dataset", "tiny.csv", "--budget", "0.1", cwd=tmp_path)
    assert out.returncode == 1  # a law that cannot be fitted
    assert "note: tiny.csv: excluded 1 of 12 runs: 1 non-finite loss (data row 2).\n" in out.stderr
    assert "RunTable.excluded" not in out.stderr  # Python's pointer, not the CLI's
    assert "error: tiny.csv: no reference compute law" in out.stderr
    with pytest.warns(UserWarning, match=r"excluded 1 of 12 runs: 1 non-finite loss \(data "
                                         r"row 2\)"), pytest.raises(FitError):
        load_problem(str(tmp_path / "tiny.csv"))
