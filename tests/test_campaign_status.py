"""Campaign runs (completed / failed / running), budgets, the stop rule and ``status``,
on a synthetic grid whose law is known (:mod:`scalebo.bench.synthetic`)."""

import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.synthetic import DEFAULT_LAW, make_synthetic
from scalebo.errors import RunTableError, SearchError, shown_config
from scalebo.search.campaign import parse_budget
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.grid import Grid
from scalebo.search.status import campaign_status
from scalebo.search.stopping import half_width, stop_decision


@pytest.fixture(scope="module")
def synthetic():
    frame = make_synthetic(lr=1.25e-4 * 4.0 ** np.arange(4), bs=np.array([128.0, 512.0]))
    grid = Grid.from_frame(frame[["N", "D", "lr", "bs"]], n_held_out_cells=0)
    return frame, grid


def test_budget_forms(synthetic):
    _, grid = synthetic
    assert parse_budget("0.05").resolve(grid) == pytest.approx(0.05 * grid.C_total)
    half = f"{0.5 * grid.C_total:.6g}FLOPs"
    assert parse_budget(half).resolve(grid) == pytest.approx(0.5 * grid.C_total)
    assert parse_budget("2e21 flops").flops == 2e21
    # more than the whole grid: kept, but said (a typo in the exponent, most often)
    with pytest.warns(UserWarning, match=r"the budget 1e\+30 FLOPs is [0-9.e+]+× the grid's "
                      r"total \(.* FLOPs\): every configuration fits"):
        assert parse_budget("1e30FLOPs").resolve(grid) == 1e30
    for bad, match in (("5", r"at most 1 \(100%\); for 5 % write 0.05 \(or 5%\); for an "
                              r"amount of compute write e.g. 2e21FLOPs"),
                       ("2e19", r"for an amount of compute write 2e19FLOPs, or 2e19GPUh"),
                       ("-0.1", "positive"), ("lots", "expected a fraction")):
        with pytest.raises(ValueError, match=match):
            parse_budget(bad)


def test_a_fraction_passed_as_a_budget_amount_is_refused(synthetic):
    # A trial's Python campaign passed 0.3 (the CLI's fraction) to campaign_status, which
    # took it as 0.3 FLOPs and stopped "the budget is committed"; suggest_runs said the
    # budget was exhausted. Both take an amount in the grid's unit and now say so.
    from scalebo.search.campaign import suggest_runs

    frame, grid = synthetic
    runs = read_campaign_runs(frame.iloc[:5][["N", "D", "lr", "bs", "loss"]], grid)
    said = r"budget 0.3 FLOPs: the budget is an amount in FLOPs here; .*parse_budget\(0.3\)"
    with pytest.raises(ValueError, match=said):
        campaign_status(grid, runs, 0.3)
    with pytest.raises(ValueError, match=said):
        suggest_runs(grid, runs, 0.3)
    with pytest.raises(ValueError, match=r"budget must be a positive finite amount \(FLOPs\), "
                       r"got -1"):
        suggest_runs(grid, runs, -1.0)
    for whole in (1.0, np.float64(1.0)):  # the whole grid as a fraction, not 1 FLOP
        with pytest.raises(ValueError, match=r"budget 1 FLOPs: .*parse_budget\(1.0\)"):
            campaign_status(grid, runs, whole)
    with pytest.raises(ValueError, match="positive finite amount"):
        suggest_runs(grid, runs, float("inf"))
    amount = parse_budget(0.3).resolve(grid)  # what was meant
    assert suggest_runs(grid, runs, amount).budget == pytest.approx(0.3 * grid.C_total)


def test_runs_by_status_and_cost(synthetic):
    frame, grid = synthetic
    rows = frame.iloc[[0, 1, 2, 3, 4]][["N", "D", "lr", "bs", "loss"]].copy()
    rows["status"] = ["completed", "failed", "running", "Completed", None]
    rows.iloc[3, 4] = np.nan   # says completed but has no loss: failed, with a note
    rows["cost"] = [np.nan, 5e17, np.nan, np.nan, np.nan]
    runs = read_campaign_runs(rows, grid, diverged_above=10.0)
    idx = grid.index_of(rows)
    assert runs.completed.tolist() == [idx[0], idx[4]]
    assert runs.failed.tolist() == [idx[1], idx[3]] and runs.running.tolist() == [idx[2]]
    # a failed or running row's loss is not used, and said (it once vanished silently)
    y = rows["loss"].to_numpy()
    assert runs.notes == (f"{runs.source}: data row 2: status failed, so its loss {y[1]:g} is "
                          "not used",
                          f"{runs.source}: data row 3: status running, so its loss {y[2]:g} "
                          "is not used until the status says completed",
                          f"{runs.source}: data row 4: counted as failed because its loss is "
                          "missing or not finite")
    by_hand = 6 * rows["N"] * rows["D"]  # FLOPs, except the given cost of row 2
    assert runs.spent() == pytest.approx(by_hand.iloc[[0, 3, 4]].sum() + 5e17)
    assert runs.pending() == pytest.approx(by_hand.iloc[2])
    assert read_campaign_runs(rows.iloc[:0], grid).n_runs == 0  # header only: no runs yet


def test_bad_rows_are_named(synthetic, tmp_path):
    frame, grid = synthetic
    rows = frame.iloc[[0, 1]][["N", "D", "lr", "bs", "loss"]].copy()
    path = tmp_path / "runs.csv"
    rows.assign(status=["completed", "done"]).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"runs.csv: data row 2, column 'status': 'done' "
                       r"is not one of \['completed', 'failed', 'running'\] \(write "
                       r"'completed' for it\)\.$"):
        read_campaign_runs(path, grid)
    for word, status in (("error", "failed"), ("in_progress", "running"), ("typo", None)):
        rows.assign(status=["completed", word]).to_csv(path, index=False)
        with pytest.raises(RunTableError) as err:
            read_campaign_runs(path, grid)
        assert str(err.value).endswith(f"(write {status!r} for it)." if status else "].")
    # W&B's run states, which fit reads too, are read as their campaign words (a trial)
    rows.assign(status=["Finished", "crashed"], loss=[3.1, float("nan")]).to_csv(path,
                                                                             index=False)
    wandb = read_campaign_runs(path, grid)
    assert wandb.completed.size == 1 and wandb.failed.size == 1 and wandb.crashed.size == 1
    rows.assign(status=["finished", "killed"]).to_csv(path, index=False)
    assert read_campaign_runs(path, grid).failed.size == 1
    rows.assign(loss=["3.1", "x"]).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"data row 2, column 'loss': expected a number, "
                       r"got 'x'\.$"):
        read_campaign_runs(path, grid)
    # a typo in a numeric axis (was numpy's "could not convert string to float: 'le-3'")
    rows.assign(lr=[str(rows.lr.iloc[0]), "le-3"]).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"runs.csv: data row 2, column 'lr': expected a "
                       r"number \(the grid's lr is numeric\), got 'le-3'\.$"):
        read_campaign_runs(path, grid)
    # a loss <= 0 was taken as a completed run, and the status then failed on internal rows
    rows.assign(loss=[3.1, 0.0]).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"runs.csv: data row 2, column 'loss': expected a loss "
                       r"> 0 \(nats; laws are fitted in log space\), got 0\.$"):
        read_campaign_runs(path, grid)
    rows.assign(cost=[5.0, -1.0]).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"runs.csv: data row 2, column 'cost': expected a "
                       r"cost > 0 \(FLOPs\), got -1\.$"):
        read_campaign_runs(path, grid)
    pd.concat([rows, rows.iloc[:1]]).to_csv(path, index=False)
    with pytest.raises(SearchError, match=r"data rows 1 and 3 are the same configuration "
                       r"\(N=5e\+07, D=1e\+09, "):
        read_campaign_runs(path, grid)
    off = rows.assign(N=[1.23e8, rows["N"].iloc[1]])
    off.to_csv(path, index=False)
    with pytest.raises(SearchError, match=r"runs.csv: 1 of 2 rows are not on the grid \(data "
                                          r"row 1; first: \(N=1.23e\+08, D=1e\+09, "):
        read_campaign_runs(path, grid)


def test_a_misspelt_loss_or_status_column_is_an_error_not_failed_runs(synthetic, tmp_path):
    # A header typo made every run "failed" (its compute spent, never proposed again) with
    # exit 0; `fit` refused the same file. Now the campaign refuses it too, naming the column.
    frame, grid = synthetic
    rows = frame.iloc[[0, 1, 2]][["N", "D", "lr", "bs", "loss"]].copy()
    path = tmp_path / "runs.csv"
    rows.rename(columns={"loss": "loos"}).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"runs.csv: no 'loss' column: did you mean 'loos'\? "
                       r".*data row 1 and every other finished run would count as failed\. "
                       r"The file's columns: \['N', 'D', 'lr', 'bs', 'loos'\]"):
        read_campaign_runs(path, grid)
    with pytest.raises(RunTableError, match=r"the mapping's loss column 'val' is not in the"):
        read_campaign_runs(path, grid, mapping={"loss": "val"})
    # ... also when the file has a 'loss' column that the mapping did not mean
    rows.to_csv(path, index=False)
    with pytest.raises(RunTableError, match=r"the mapping's loss column 'val_loss' is not in"):
        read_campaign_runs(path, grid, mapping={"loss": "val_loss"})
    # without a loss column, runs that are all running or failed are fine
    running = rows.drop(columns="loss").assign(status=["running", "failed", "running"])
    runs = read_campaign_runs(running, grid)
    assert runs.running.size == 2 and runs.failed.size == 1
    # a misspelt status column (or 'Status', 'state') would turn the runs in flight (no loss
    # yet) into failed ones
    for column in ("stauts", "Status", "state"):
        typo = rows.assign(loss=[rows.loss.iloc[0], None, None],
                           **{column: ["", "Running", "running"]})
        typo.to_csv(path, index=False)
        with pytest.raises(RunTableError, match=rf"no 'status' column, but '{column}' holds only "
                           r"run statuses \(completed, failed, running\); without a 'status' "
                           r"column data row 2, which has no loss, would count as failed"):
            read_campaign_runs(path, grid)
    # a column of other values (a start time, an exit code) is no status: rows without a
    # loss are then failed, as documented
    for other in (["2026-01-01", "2026-01-02", "2026-01-03"], ["0", "137", "running"]):
        runs = read_campaign_runs(typo.drop(columns="state").assign(start=other), grid)
        assert runs.completed.size == 1 and runs.failed.size == 2


def test_stop_rule_by_hand():
    assert half_width({"q10": 1.99, "q50": 2.0, "q90": 2.01}) == pytest.approx(0.005)
    stop, why = stop_decision({1e25: 0.004}, remaining=1e20, cheapest_left=1e18)
    assert stop and "within ±0.5 %" in why
    stop, why = stop_decision({1e25: 0.004, 1e24: 0.02}, remaining=1e20, cheapest_left=1e18)
    assert not stop and "1e+24" in why and "±2 %" in why
    stop, why = stop_decision({1e25: 0.3}, remaining=1e17, cheapest_left=1e18)
    assert stop and "budget is spent" in why
    assert stop_decision({1e25: None}, remaining=1e20, cheapest_left=1e18)[0] is False
    # A target that is not a round power of ten is named with its digits.
    stop, why = stop_decision({1e25: 0.004, 1.4e24: 0.02}, remaining=1e20, cheapest_left=1e18)
    assert not stop and "1.4e+24 FLOPs" in why
    assert "1.4e+24" in stop_decision({1.4e24: None}, remaining=1e20, cheapest_left=1e18)[1]
    # A width within the tolerance that its resamples do not settle is "not surely" within
    # it; one plainly outside is "wider than" it (a trial read "not surely within" of ±5.9 %)
    stop, why = stop_decision({1e25: 0.004, 1e24: 0.02}, remaining=0.0, cheapest_left=1e18,
                              uppers={1e25: 0.007, 1e24: 0.03})
    assert stop and why.endswith("; the interval is wider than the tolerance: ±2 % at 1e+24 "
                                 "FLOPs; not surely within it: ±0.4 % at 1e+25 FLOPs against "
                                 "±0.5 %")
    assert "the interval" not in stop_decision({1e25: 0.004}, remaining=0.0, cheapest_left=1e18,
                                               uppers={1e25: 0.0045})[1]
    # Budget used up with runs in flight: stop starting runs, but the law is not final yet.
    stop, why = stop_decision({1e25: 0.3}, remaining=0.0, cheapest_left=1e18, n_running=2)
    assert stop and why == ("the budget is committed: 0 FLOPs left, the cheapest untried "
                            "configuration costs 1e+18; the interval is wider than "
                            "the tolerance: ±30 % at 1e+25 FLOPs against ±0.5 %; 2 runs still in "
                            "flight: nothing more "
                            "to start, but the law and its interval change when they finish "
                            "(run status again then)")


def test_status_covers_the_known_law_and_counts_compute(synthetic):
    """With every cell's best configuration up to 1e20 FLOPs observed, the 95 % interval at
    1e21 FLOPs (one decade out) holds the known law's compute-optimal loss."""
    frame, grid = synthetic
    rows = frame[frame["is_optimum"] & (6 * frame["N"] * frame["D"] <= 1e20)]
    runs = read_campaign_runs(rows[["N", "D", "lr", "bs", "loss"]], grid)
    st = campaign_status(grid, runs, 0.2 * grid.C_total, targets=(1e21,), n_samples=32)
    t = st.targets[0]
    # the law's compute-optimal loss at C = 6ND = 1e21, minimized over N on a fine grid
    N = np.geomspace(1e7, 1e12, 20001)
    truth = DEFAULT_LAW.law_loss(N, 1e21 / (6 * N)).min()
    assert t.interval_95[0] <= truth <= t.interval_95[1]
    assert t.interval_95[0] <= t.interval_80[0] <= t.prediction <= t.interval_80[1]
    assert st.spent == pytest.approx(float((6 * rows["N"] * rows["D"]).sum()))
    assert st.remaining == pytest.approx(0.2 * grid.C_total - st.spent)
    assert st.law["params"]["alpha"] > 0 and st.law["status"] == "converged"
    # N*: the known law's compute-optimal size lies inside the 80 % interval around it
    N_true = N[np.argmin(DEFAULT_LAW.law_loss(N, 1e21 / (6 * N)))]
    assert t.N_opt_80[0] <= N_true <= t.N_opt_80[1] and t.N_opt_80[0] <= t.N_opt <= t.N_opt_80[1]
    assert t.D_opt_80[0] <= 1e21 / (6 * N_true) <= t.D_opt_80[1]


def test_status_command_json_and_no_runs(synthetic, tmp_path):
    frame, grid = synthetic
    frame[["N", "D", "lr", "bs"]].to_csv(tmp_path / "grid.csv", index=False)
    cmd = [sys.executable, "-m", "scalebo.cli", "status", "--grid", str(tmp_path / "grid.csv"),
           "--budget", "2e21FLOPs", "--format", "json", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stop"] is False and out["targets"][0]["interval_80"] is None  # no made-up one
    assert out["spent"] == 0 and out["budget"] == 2e21 and out["law"]["params"] is None
    assert "no completed run" in " ".join(out["notes"])
    assert len(out["next"]) == 4 and all("initial design" in n["reason"] for n in out["next"])


def test_noise_free_status_keeps_the_noise_of_a_fully_trained_grid(synthetic, tmp_path):
    """Every configuration trained: the reference interval is the point fit on the recorded
    (noisy) losses, which misses the known law; the noise-free interval covers it."""
    frame, grid = synthetic
    runs = read_campaign_runs(frame[["N", "D", "lr", "bs", "loss"]], grid)
    targets = (1e21, 1e22)
    N = np.geomspace(1e7, 1e12, 20001)
    truth = [DEFAULT_LAW.law_loss(N, C / (6 * N)).min() for C in targets]
    kw = dict(targets=targets, n_samples=32)
    ref = campaign_status(grid, runs, grid.C_total, **kw)
    free = campaign_status(grid, runs, grid.C_total, estimand="noise_free", **kw)
    assert ref.estimand == "reference" and free.to_dict()["estimand"] == "noise_free"
    for r, f, true in zip(ref.targets, free.targets, truth, strict=True):
        assert r.interval_80[0] == pytest.approx(r.interval_80[1], rel=1e-12)
        assert not r.interval_95[0] <= true <= r.interval_95[1]
        assert f.interval_80[0] <= true <= f.interval_80[1]
        # the noise-free point fit is on the latent posterior means: inside its own interval
        assert f.interval_80[0] <= f.prediction <= f.interval_80[1]
    frame[["N", "D", "lr", "bs"]].to_csv(tmp_path / "grid.csv", index=False)
    frame[["N", "D", "lr", "bs", "loss"]].to_csv(tmp_path / "runs.csv", index=False)
    cmd = [sys.executable, "-m", "scalebo.cli", "status", "--grid", str(tmp_path / "grid.csv"),
           "--runs", str(tmp_path / "runs.csv"), "--budget", "1", "--samples", "16",
           "--target", "1e21", "--estimand", "noise_free", "--next", "0", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "intervals of the noise-free law" in proc.stdout and "floor ±%" in proc.stdout
    assert "every configuration of the grid is trained" in proc.stdout


def test_noise_free_status_csv_says_its_estimand_and_floor(synthetic, tmp_path):
    """The CSV had no estimand column: a noise-free and a reference interval looked alike.
    Half of the grid trained: the floor is at most the interval's own half-width."""
    frame, grid = synthetic
    frame[["N", "D", "lr", "bs"]].to_csv(tmp_path / "grid.csv", index=False)
    half = frame.sample(frac=0.5, random_state=0)
    runs = half[["N", "D", "lr", "bs", "loss"]].assign(status="completed")
    failed = runs.iloc[[0]].assign(loss=9.9, status="failed")  # an attempt, then a retry
    pd.concat([failed, runs]).to_csv(tmp_path / "runs.csv", index=False)
    cmd = [sys.executable, "-m", "scalebo.cli", "status", "--grid", str(tmp_path / "grid.csv"),
           "--runs", str(tmp_path / "runs.csv"), "--budget", "1", "--samples", "16",
           "--target", "1e21", "--target", "1e22", "--estimand", "noise_free", "--next", "0",
           "--format", "csv", "--json", str(tmp_path / "status.json"), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(io.StringIO(proc.stdout))
    assert list(table["estimand"]) == ["noise_free", "noise_free"]
    notes = json.loads((tmp_path / "status.json").read_text())["notes"]
    assert "data row 1: status failed, so its loss 9.9 is not used" in notes[0]
    assert all(f"note: {n}" in proc.stderr for n in notes)  # not lost under --format csv
    assert (table["floor_half_width_pct"] <= table["half_width_pct"] + 1e-12).all()
    assert (table["floor_half_width_pct"] > 0).all()
    status = json.loads((tmp_path / "status.json").read_text())
    ratio = status["noise_floor"]["ratio"]
    assert set(ratio) == {"1e+21", "1e+22"} and all(0 < r <= 1 for r in ratio.values())
    assert status["noise_floor"]["n_untried"] == len(frame) - len(half)
    for t, r in zip(status["targets"], ratio.values(), strict=True):
        assert t["floor_half_width_pct"] == pytest.approx(r * t["half_width_pct"])
    # the stop decision is in the CSV too (a CSV reader could not tell whether to stop)
    assert list(table["stop"]) == [status["stop"]] * 2
    assert list(table["reason"]) == [status["reason"]] * 2 and status["reason"]
    for key in ("budget", "spent", "pending", "remaining"):
        assert list(table[key]) == pytest.approx([status[key]] * 2)
    # the law and the run counts too (a trial's CSV reader had neither)
    for key in ("E", "A", "alpha"):
        assert list(table[key]) == pytest.approx([status["law"]["params"][key]] * 2)
    assert list(table["law_status"]) == [status["law"]["status"]] * 2
    assert (table["n_completed"][0], table["n_failed"][0]) == (len(half),
                                                             status["n_failed"])
    assert table["n_retried"][0] == status["n_retried"]  # the counts add up to the rows
    assert table["spent"][0] + table["pending"][0] + table["remaining"][0] == pytest.approx(
        table["budget"][0])
    for (_, row), t in zip(table.iterrows(), status["targets"], strict=True):  # CSV = JSON
        assert [row["low_80"], row["high_80"]] == pytest.approx(t["interval_80"])
        # the stop rule's ± is half the 80 % interval over the posterior median, shown beside
        # the point fit (a user measured the ± around the printed fit and found it off)
        assert row["median"] == pytest.approx(t["median"])
        assert t["half_width_pct"] == pytest.approx(
            100 * (t["interval_80"][1] - t["interval_80"][0]) / 2 / t["median"])
        assert [row["low_95"], row["high_95"]] == pytest.approx(t["interval_95"])
        for name in ("N_opt", "D_opt"):
            iv = t[f"{name}_80"]
            ends = [row[f"{name}_low_80"], row[f"{name}_high_80"]]
            assert (pd.isna(ends).all() if iv is None else ends == pytest.approx(iv))


def test_targets_that_round_alike_keep_their_own_intervals(synthetic):
    """1e21 and 1.4e21 FLOPs both had the key "1e+21": the status gave the second target's
    quantiles to both."""
    frame, grid = synthetic
    runs = read_campaign_runs(frame[["N", "D", "lr", "bs", "loss"]].iloc[::2], grid)
    st = campaign_status(grid, runs, grid.C_total, targets=(1e21, 1.4e21), n_samples=16)
    a, b = st.targets
    assert set(st.posterior["compute"]["predicted_loss"]) == {"1e+21", "1.4e+21"}
    assert b.prediction < a.prediction and b.interval_80[1] < a.interval_80[1]
    for t in (a, b):
        assert t.interval_95[0] <= t.interval_80[0] <= t.interval_80[1] <= t.interval_95[1]


def test_bad_estimand_is_an_error_not_a_note(synthetic):
    """A misspelt estimand raised no error: the status came back with no interval, a note and
    the bad name in its JSON (and with no completed run it was accepted as it was)."""
    frame, grid = synthetic
    runs = read_campaign_runs(frame.iloc[:20][["N", "D", "lr", "bs", "loss"]], grid)
    for r in (runs, read_campaign_runs(frame.iloc[:0][["N", "D", "lr", "bs", "loss"]], grid)):
        with pytest.raises(ValueError, match="estimand"):
            campaign_status(grid, r, grid.C_total, n_samples=8, estimand="noisefree")


def test_status_plot_with_a_prediction_outside_its_interval(synthetic, tmp_path):
    """The point fit (recorded losses) can lie outside the noise-free 80 % interval; the
    figure drew it as an error bar around the prediction and matplotlib refused negative
    error lengths ('yerr' must not contain negative values), so --plot crashed status."""
    import dataclasses

    from scalebo.search.status_plot import plot_status, status_title

    frame, grid = synthetic
    runs = read_campaign_runs(frame.iloc[:40][["N", "D", "lr", "bs", "loss"]], grid)
    status = campaign_status(grid, runs, grid.C_total, targets=(1e21,), n_samples=8)
    t = status.targets[0]
    assert t.prediction is not None
    off = dataclasses.replace(t, interval_80=[t.prediction + 0.01, t.prediction + 0.03])
    status = dataclasses.replace(status, targets=(off,))
    path = plot_status(grid, runs, status, tmp_path / "status.png")
    assert path.exists() and path.stat().st_size > 0
    long = dataclasses.replace(status, reason="the budget is committed; " + "word " * 60)
    lines = status_title(long).splitlines()  # the reason was one line, cut at both edges
    assert len(lines) >= 4 and max(map(len, lines)) <= 95 and lines[1].startswith("continue: ")


def test_status_plot_labels_the_proposals_and_counts_those_of_one_cell(synthetic, tmp_path,
                                                                      monkeypatch):
    # A trial's plot showed 2 of 3 "next" stars (two proposals of one cell overlap) and green
    # ticks that the legend did not name.
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from scalebo.search.status_plot import plot_status

    frame, grid = synthetic
    runs = read_campaign_runs(frame.iloc[:40][["N", "D", "lr", "bs", "loss"]], grid)
    status = campaign_status(grid, runs, grid.C_total, targets=(1e21,), n_samples=8)
    cell = np.flatnonzero(grid.cost == grid.cost[45])[:2]
    proposed = [SimpleNamespace(index=int(i), predicted_mean=3.0 + 0.001 * k)
                for k, i in enumerate([*cell, 60])]
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it
    plot_status(grid, runs, status, tmp_path / "status.png", proposed=proposed)
    ax = figures[0].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert ("next (3; just above the bottom edge, at their compute; ★ at predicted loss)"
            in labels)
    # the cell's two ticks and two stars each say ×2
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("×")] == ["×2", "×2"]
    # a completed run under a proposal's star stays visible: hollow stars below the runs
    stars = [c for c in ax.collections if len(c.get_offsets()) == 3
             and not c.get_facecolors().size]
    completed = next(c for c in ax.collections if str(c.get_label()).startswith("completed"))
    assert len(stars) == 1 and completed.get_zorder() > stars[0].get_zorder()
    assert ax.get_ylim()[1] >= max(p.predicted_mean for p in proposed)  # no star cut off


def test_status_plot_keeps_runs_in_flight_and_failures_of_one_compute_visible(
        synthetic, tmp_path, monkeypatch):
    # Two failed runs of one compute drew one red tick, and a run in flight under a
    # proposal of the same compute was hidden by its green tick.
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from scalebo.search.status_plot import plot_status

    frame, grid = synthetic
    cols = ["N", "D", "lr", "bs", "loss"]
    done = frame.iloc[:30][cols].assign(status="completed")
    cell = np.flatnonzero(grid.cost == grid.cost[45])
    assert cell.size >= 4
    extra = pd.DataFrame([grid.config(int(i)) for i in cell[:3]])[cols[:-1]]
    extra["loss"] = np.nan
    extra["status"] = ["failed", "failed", "running"]
    runs = read_campaign_runs(pd.concat([done, extra], ignore_index=True), grid)
    status = campaign_status(grid, runs, grid.C_total, targets=(1e21,), n_samples=8)
    proposed = [SimpleNamespace(index=int(cell[3]), predicted_mean=3.0)]
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_status(grid, runs, status, tmp_path / "status.png", proposed=proposed)
    ax = figures[0].axes[0]
    ticks = {c.get_label().split(" ")[0]: c for c in ax.collections
             if c.get_label().split(" ")[0] in ("failed", "running", "next")}
    assert set(ticks) == {"failed", "running", "next"}
    red = [t for t in ax.texts if t.get_color() == "tab:red"]
    assert [t.get_text() for t in red] == ["×2"]

    def screen_y(c):
        return c.get_offset_transform().transform(c.get_offsets())[:, 1]

    # the proposal and the run in flight share a compute: their ticks stand apart
    assert screen_y(ticks["next"])[0] - screen_y(ticks["running"])[0] > 10


def test_status_plot_spans_runs_in_flight_beyond_every_completed_one(synthetic, tmp_path,
                                                                     monkeypatch):
    """A trial's first status figure (4 runs done, one in flight at a larger compute, no law
    yet) ended its axis below the run in flight, whose tick sat outside the axes."""
    import matplotlib.pyplot as plt

    from scalebo.search.status_plot import plot_status

    frame, grid = synthetic
    cheap = np.argsort(grid.cost, kind="stable")[:4]
    far = int(np.argmax(np.where(grid.held_out, -np.inf, grid.cost)))
    table = pd.DataFrame([grid.config(int(i)) for i in [*cheap, far]])[["N", "D", "lr", "bs"]]
    table["loss"] = [*frame.set_index(["N", "D", "lr", "bs"]).loc[
        list(map(tuple, table.iloc[:4].to_numpy()))]["loss"], np.nan]
    table["status"] = ["completed"] * 4 + ["running"]
    runs = read_campaign_runs(table, grid)
    status = campaign_status(grid, runs, grid.C_total, targets=(1e21,), n_samples=8)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_status(grid, runs, status, tmp_path / "status.png")
    lo, hi = figures[0].axes[0].get_xlim()
    assert lo <= grid.cost[cheap].min() and grid.cost[far] <= hi and 1e21 <= hi


def test_a_retried_failed_run_keeps_both_rows(synthetic):
    # scalebo suggest --retry-failed proposes a failed configuration again; its retry is a
    # new row of the same configuration, beside the failed one, whose compute stays spent.
    frame, grid = synthetic
    rows = frame.iloc[[0, 1, 2]][["N", "D", "lr", "bs", "loss"]].copy()
    rows["status"] = ["failed", "completed", "completed"]
    retry = rows.iloc[[0]].assign(status="completed")
    runs = read_campaign_runs(pd.concat([rows, retry]), grid)
    flops = 6 * rows["N"] * rows["D"]
    assert sorted(runs.completed.tolist()) == sorted(grid.index_of(rows).tolist())
    assert runs.failed.size == 0 and runs.n_runs == 4 and runs.n_superseded == 1
    assert runs.spent() == pytest.approx(flops.sum() + flops.iloc[0])  # both attempts
    assert runs.notes == (f"<DataFrame>: data row 1: status failed, so its loss "
                          f"{rows.loss.iloc[0]:g} is not used",
                          "<DataFrame>: data row 1: a failed attempt of "
                          f"{shown_config(grid.config(int(grid.index_of(rows.iloc[[0]])[0])))}, "
                          "run again in "
                          "data row 4; its compute counts as spent",)
    # The status counts the failed attempt (it once vanished: 0 failed, compute spent).
    status = campaign_status(grid, runs, 0.5 * grid.budget_total, n_samples=8)
    assert (status.n_failed, status.n_retried, status.n_completed) == (0, 1, 3)
    assert status.to_dict()["n_retried"] == 1
    assert runs.counts() == "3 completed, 0 failed, 0 running; 1 failed attempt retried"
    assert status.spent == pytest.approx(runs.spent())
    # Two failed attempts: still failed, both spent; a retry in flight is pending.
    twice = read_campaign_runs(pd.concat([rows, rows.iloc[[0]]]), grid)
    assert twice.failed.size == 1 and twice.spent() == pytest.approx(flops.sum() + flops.iloc[0])
    flying = read_campaign_runs(pd.concat([rows, retry.assign(status="running", loss=None)]),
                                grid)
    assert flying.failed.size == 0 and flying.running.size == 1
    assert flying.pending() == pytest.approx(flops.iloc[0])
    assert flying.spent() == pytest.approx(flops.sum())
    # Two runs that did not fail are still an error.
    with pytest.raises(SearchError, match=r"data rows 2 and 4 are the same configuration"):
        read_campaign_runs(pd.concat([rows, rows.iloc[[1]]]), grid)


def test_no_allocation_from_a_chinchilla_law_at_a_bound(tmp_path):
    # The README's campaign: five runs in the two cheapest cells. The Chinchilla law of the
    # whole grid's posterior mean sits at a bound there; its N* and D* would be the bound's,
    # so the status shows none and says why (it once printed N* = 7e5 parameters).
    grid = Grid.from_frame(pd.DataFrame(
        [(n, d, lr) for n in (1e8, 3e8, 1e9) for d in (2e9, 6e9, 2e10)
         for lr in (1e-4, 3e-4, 1e-3, 3e-3)], columns=["N", "D", "lr"]), n_held_out_cells=0)
    runs = read_campaign_runs(pd.DataFrame({
        "N": [1e8, 1e8, 1e8, 1e8, 3e8], "D": [2e9, 2e9, 2e9, 6e9, 2e9],
        "lr": [1e-4, 3e-4, 1e-3, 1e-3, 1e-3], "loss": [3.912, 3.655, 3.598, 3.301, 3.402]}), grid)
    st = campaign_status(grid, runs, 0.3 * grid.C_total, targets=(1e21,), n_samples=16)
    chin = st.law_posteriors["chinchilla"].point
    assert chin is not None and str(chin.status) != "converged"
    assert st.targets[0].N_opt is None and st.targets[0].N_opt_80 is None
    # 3 distinct (N, D) points for 5 parameters: the runs, not the bound, are the reason
    assert any(n.startswith("N*, D* not shown: the completed runs cannot identify the "
                            "Chinchilla law L(N, D) (5 runs but only 3 distinct (N, D) points")
               and f"its fit on the posterior-mean table ends with status '{chin.status}'" in n
               for n in st.notes), st.notes
    # nor a note on the spread of that law's interval, which is not shown (a trial)
    assert not any("chinchilla law posterior's" in n for n in st.notes)


def test_runs_that_cannot_identify_a_law_give_no_allocation_and_no_stop(synthetic):
    # A trial's campaign: four learning rates of the cheapest cell. The posterior-mean table
    # fills every other cell from the GP, and the Chinchilla law converged on it, so the
    # status printed N* = D* = sqrt(C/6) (alpha = beta at 2) where `fit` said unidentified.
    grid = Grid.from_frame(pd.DataFrame(
        [(n, d, lr) for n in (5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9)
         for d in (1e9, 3e9, 1e10, 3e10, 1e11) for lr in 5e-4 * 2.0 ** np.arange(6)],
        columns=["N", "D", "lr"]), n_held_out_cells=0)
    runs = read_campaign_runs(pd.DataFrame({
        "N": [5e7] * 4, "D": [1e9] * 4, "lr": [2e-3, 4e-3, 8e-3, 1.6e-2],
        "loss": [6.09537, 6.08618, 6.11126, 6.1538]}), grid)
    st = campaign_status(grid, runs, 0.1 * grid.C_total, targets=(1e24,), n_samples=16)
    # on the table it converged where this was written; with NumPy's AVX-512 kernels and
    # OpenBLAS's SkylakeX ones it ends at a bound: either way the runs decide, not the table
    assert str(st.law_posteriors["chinchilla"].point.status) in ("converged", "bound hit")
    assert st.targets[0].N_opt is None and st.targets[0].D_opt_80 is None
    assert any("the completed runs cannot identify the Chinchilla law L(N, D) (4 runs but "
               "only 1 distinct (N, D) point; the law has 5 parameters)" in n for n in st.notes)
    # two compute levels, every configuration of both: the compute law's 3 parameters
    frame, grid = synthetic
    two = frame[(frame["N"] == frame["N"].min()) & (frame["D"] <= np.sort(frame["D"].unique())[1])]
    st = campaign_status(grid, read_campaign_runs(two[["N", "D", "lr", "bs", "loss"]], grid),
                         0.2 * grid.C_total, targets=(1e21,), n_samples=16)
    assert not st.stop and st.law["status"] == "unidentified"
    assert st.reason.startswith("the law's fit is unidentified (the completed runs: 16 runs "
                                "but only 2 distinct values of C; the law has 3 parameters)")


def test_status_notes_when_the_chinchilla_law_disagrees_with_its_interval():
    # A trial's campaign on a grid whose largest models (1.6e9) are far below N* at the
    # target (8e9): every run trained, the compute law's interval at 1e24 FLOPs collapsed on
    # 2.60 nats and the status said STOP, while the known law's compute-optimal loss is
    # 2.177, next to the Chinchilla posterior's, which the status computed and hid.
    E, A, a, B, b = 1.8, 400.0, 0.34, 1100.0, 0.28
    rows = [(n, d, lr) for n in (5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9)
            for d in (1e9, 3e9, 1e10, 3e10, 1e11) for lr in (1e-3, 2e-3, 4e-3)]
    frame = pd.DataFrame(rows, columns=["N", "D", "lr"])
    frame["loss"] = (E + A / frame.N**a + B / frame.D**b
                     + 0.03 * np.log(frame.lr / (3e-3 * (frame.N / 1e8) ** -0.3)) ** 2)
    grid = Grid.from_frame(frame[["N", "D", "lr"]], n_held_out_cells=0)
    st = campaign_status(grid, read_campaign_runs(frame, grid), grid.C_total,
                         targets=(1e24,), n_samples=16, tolerance=0.01)
    N = np.geomspace(1e8, 1e12, 40001)
    truth = (E + A / N**a + B / (1e24 / (6 * N)) ** b).min()  # 2.177
    t = st.targets[0]
    assert not t.interval_80[0] <= truth <= t.interval_80[1]  # the compute law's is off
    chin = st.posterior["chinchilla"]["predicted_loss"]["1e+24"]
    assert chin["q50"] == pytest.approx(truth, rel=0.005) and chin["q90"] < t.interval_80[0]
    note = next(n for n in st.notes if n.startswith("the Chinchilla law L(N, D) predicts"))
    assert f"{chin['q50']:.4f} nats at 1e+24 FLOPs" in note and "do not overlap" in note
    assert st.stop and st.reason.endswith("; the Chinchilla law's loss lies outside the "
                                          "compute law's 80 % interval (see the notes)")


def test_a_run_in_a_held_out_cell_is_spent_noted_and_set_aside(synthetic):
    # A trial's grid file said held_out_cells: 2 and one run landed in such a cell: the
    # status counted it as spent, left it out of the law without a word, and could not
    # suggest anything ("Indices [175] are in held-out cells, which are never acquired").
    from scalebo.search.campaign import suggest_runs

    frame, _ = synthetic
    grid = Grid.from_frame(frame[["N", "D", "lr", "bs"]], n_held_out_cells=2)
    held = frame[grid.held_out].iloc[[0]]
    cheap = frame[(6 * frame["N"] * frame["D"] <= 2e18) & ~grid.held_out].iloc[:6]
    rows = pd.concat([cheap, held])[["N", "D", "lr", "bs", "loss"]]
    runs = read_campaign_runs(rows, grid)
    assert runs.completed.size == 6 and not grid.held_out[runs.completed].any()
    assert runs.spent() == pytest.approx(float((6 * rows["N"] * rows["D"]).sum()))
    assert any(n.startswith(f"{runs.source}: data row 7: in the grid's held-out cells (2 "
                            "costliest")
               for n in runs.notes)
    st = campaign_status(grid, runs, 0.2 * grid.C_total, targets=(1e21,), n_samples=8)
    assert st.spent == pytest.approx(runs.spent()) and st.n_completed == 6
    assert len(suggest_runs(grid, runs, 0.2 * grid.C_total, batch=2, seed=0).suggestions) == 2
    # running there: pending, not spent; listed again as in flight: the usual error
    flying = rows.assign(status=["completed"] * 6 + ["running"])
    runs = read_campaign_runs(flying, grid)
    cost = float(6 * held["N"].iloc[0] * held["D"].iloc[0])
    assert runs.pending() == pytest.approx(cost) and runs.spent() == pytest.approx(
        float((6 * cheap["N"] * cheap["D"]).sum()))
    with pytest.raises(SearchError, match="is already running in <DataFrame>"):
        runs.with_running(read_campaign_runs(held[["N", "D", "lr", "bs"]].assign(
            status="running"), grid))


def test_status_cell_coupling_moves_the_interval_not_the_point(synthetic):
    """``campaign_status(..., cell_coupling=)`` (``scalebo status --posterior-coupling``):
    the point fit is the same, the interval is drawn with or without the cells' shared
    deviation; a share outside [0, 1] is a usage error."""
    from scalebo.cli.main import build_parser

    frame, grid = synthetic
    rows = frame[(6 * frame["N"] * frame["D"] <= 1e19)].iloc[::2]  # half of each small cell
    runs = read_campaign_runs(rows[["N", "D", "lr", "bs", "loss"]], grid)
    kw = {"targets": (1e21,), "n_samples": 32, "seed": 3}
    coupled = campaign_status(grid, runs, 0.2 * grid.C_total, **kw).targets[0]
    free = campaign_status(grid, runs, 0.2 * grid.C_total, cell_coupling=0.0, **kw).targets[0]
    assert coupled.prediction == pytest.approx(free.prediction, rel=1e-9)
    assert coupled.interval_80 != free.interval_80
    parser = build_parser()
    base = ["status", "--grid", "g.csv", "--budget", "0.1"]
    # the command's literal default (it does not import the library at parse time) is the
    # library's, so the CLI and campaign_status cannot drift apart
    from scalebo.search.law_samples import CELL_COUPLING

    assert parser.parse_args(base).posterior_coupling == CELL_COUPLING
    assert parser.parse_args([*base, "--posterior-coupling", "0"]).posterior_coupling == 0.0
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--posterior-coupling", "2"])


def test_status_says_when_its_law_depends_on_the_frontier():
    """Every configuration of a coarse noise-free grid of a known Chinchilla law trained
    (5 N × 4 D): the status's law is the envelope's, 8.5 % below the hull's at 1e25 FLOPs
    (the hull's lies within 1 % of the truth, see test_cli_fit); its intervals are about the
    envelope's law only, and the status now says so."""
    E, A, a, B, b = 1.80, 400.0, 0.34, 410.0, 0.28
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(2e7, 1e9, 5), np.geomspace(4e8, 4e10, 4)))
    frame = pd.DataFrame({"N": N, "D": D, "loss": E + A / N**a + B / D**b})
    grid = Grid.from_frame(frame[["N", "D"]], n_held_out_cells=0)
    status = campaign_status(grid, read_campaign_runs(frame, grid), grid.C_total,
                             targets=(1e25,), n_samples=8)
    note = [n for n in status.notes if "lower convex hull" in n]
    gap = re.search(r"\+([0-9.]+) % from this fit's", note[0])
    assert len(note) == 1 and gap and 7 < float(gap[1]) < 10  # 8.5 % when written
    assert "the intervals are about the envelope's law" in note[0]


def test_status_names_the_compute_laws_parameter_at_a_bound(tmp_path):
    # Losses of a pure power law in compute (E = 0, under the fit's lower bound of e^-10):
    # all but one configuration trained, the compute law's fit ends with E at its bound. JSON names
    # it in law.at_bound, the text beside the law, and the rule does not stop on it.
    rows = [(n, d, lr, 40.0 * (6 * n * d) ** -0.08 * (1 + 0.02 * np.log(lr / 3e-4) ** 2))
            for n in (1e8, 3e8, 1e9) for d in (2e9, 6e9, 2e10) for lr in (1e-4, 3e-4, 1e-3)]
    frame = pd.DataFrame(rows, columns=["N", "D", "lr", "loss"])
    frame[["N", "D", "lr"]].to_csv(tmp_path / "grid.csv", index=False)
    frame.iloc[1:].to_csv(tmp_path / "runs.csv", index=False)  # one left untried
    base = [sys.executable, "-m", "scalebo.cli", "status", "--grid", str(tmp_path / "grid.csv"),
            "--runs", str(tmp_path / "runs.csv"), "--budget", "1e22FLOPs", "--samples", "16",
            "--quiet"]
    proc = subprocess.run([*base, "--format", "json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    law = json.loads(proc.stdout)["law"]
    assert law["status"] == "bound hit" and law["at_bound"] == ["E"]
    assert law["params"]["E"] == pytest.approx(np.exp(-10), rel=1e-3)
    out = json.loads(proc.stdout)
    assert out["stop"] is False and "E at its limit" in out["reason"]
    text = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "(bound hit: E at its limit)" in text.stdout, text.stdout


def test_a_point_fit_outside_its_own_95_interval_is_said():
    """A trial's status printed loss (fit) 3.198 beside a 95 % interval [0.043, 2.984] at
    1e24 FLOPs (a 25-nat run told as a loss) and said nothing about it."""
    from scalebo.search.status import TargetStatus, _outside_note

    def row(C, fit, lo, hi):
        return TargetStatus(C=C, prediction=fit, interval_80=[lo, hi], interval_95=[lo, hi],
                            half_width_pct=1.0, N_opt=None, D_opt=None, N_opt_80=None,
                            D_opt_80=None, median=(lo + hi) / 2, floor_half_width_pct=None)

    inside = [row(1e22, 2.1, 2.0, 2.2), row(1e24, 1.9, 1.8, 2.0)]
    assert _outside_note(inside) == ""
    assert _outside_note([row(1e22, 2.1, 2.0, 2.2), row(1e24, None, 1.8, 2.0)]) == ""
    note = _outside_note([*inside, row(1e25, 3.198, 0.043, 2.984), row(1e26, 0.5, 1, 2)])
    assert note.startswith("the point fit's loss at 1e+25 FLOPs (3.198 nats) lies outside the "
                           "law posterior's own 95 % interval [0.043, 2.984] (and at 1 more "
                           "target(s))")


def test_n_star_of_the_runs_alone_is_named_when_the_posterior_interval_excludes_it():
    """A trial's status gave N* 3.57e8 (80 %: 3.3e8-3.9e8) at its grid's largest compute,
    where `fit --law chinchilla` on the same runs gave 3.99e8 (truth 4.02e8), with no word.
    Runs from a known Chinchilla law: the runs-alone N* is the closed form's."""
    from scalebo.search.law_posterior import target_key
    from scalebo.search.runs_only import runs_only_note

    E, A, a, B, b = 1.9, 400.0, 0.33, 1800.0, 0.30
    N, D = (x.ravel() for x in np.meshgrid(np.geomspace(2e7, 5e8, 5),
                                            np.geomspace(4e9, 2.6e11, 4)))
    N, D = np.repeat(N, 2), np.repeat(D, 2)
    loss = E + A / N**a + B / D**b + np.tile([0.0, 0.05], N.size // 2)  # a worse lr each
    C = 1e24
    G = (a * A / (b * B)) ** (1 / (a + b))
    n_star = G * (C / 6) ** (b / (a + b))
    key = target_key(C)

    def summary(lo, hi):
        return {"N_opt": {key: {"q10": lo, "q50": (lo + hi) / 2, "q90": hi}}}

    assert runs_only_note(N, D, loss, summary(0.8 * n_star, 1.2 * n_star), (C,)) == ""
    note = runs_only_note(N, D, loss, summary(0.5 * n_star, 0.9 * n_star), (C,))
    assert f"gives N* {n_star:.3g}, D* {C / 6 / n_star:.3g} at 1e+24 FLOPs" in note
    assert f"80 % interval of N*: [{0.5 * n_star:.3g}, {0.9 * n_star:.3g}]" in note
    assert runs_only_note(N, D, loss, None, (C,)) == ""  # N* not shown: nothing to compare
    assert runs_only_note(N[:8], D[:8], loss[:8], summary(1.0, 2.0), (C,)) == ""  # 4 cells


# A trial's campaign (its own grid of a known law; 30 completed runs after 8 rounds).
TRIAL_RUNS = [(2e7, 4e9, 2e-3), (2e7, 4e9, 4e-3), (2e7, 4e9, 5e-4), (2e7, 4e9, 1e-3),
              (2e7, 4e9, 8e-3), (44721360, 4e9, 1.6e-2), (1e8, 4e9, 2e-3), (2e7, 1.6e10, 8e-3),
              (44721360, 4e9, 4e-3), (2e7, 1.6e10, 2.5e-4), (44721360, 1.6e10, 1.6e-2),
              (2e7, 1.6e10, 1.6e-2), (2e7, 6.4e10, 8e-3), (44721360, 1.6e10, 4e-3),
              (44721360, 6.4e10, 4e-3), (2e7, 2.56e11, 8e-3), (1e8, 1.6e10, 2e-3),
              (1e8, 6.4e10, 4e-3), (223606798, 6.4e10, 2e-3), (1e8, 2.56e11, 4e-3),
              (44721360, 2.56e11, 4e-3), (1e8, 1.6e10, 4e-3), (1e8, 6.4e10, 2e-3),
              (2e7, 6.4e10, 4e-3), (2e7, 1.6e10, 4e-3), (44721360, 4e9, 8e-3),
              (44721360, 4e9, 2e-3), (44721360, 4e9, 5e-4), (2e7, 4e9, 2.5e-4),
              (5e8, 2.56e11, 1e-3)]


def test_status_names_the_runs_alone_n_star_where_its_posterior_interval_misses_it(tmp_path):
    """The wiring of the note above: `status` on the trial's runs (its law, seeded noise)
    carries exactly the note `runs_only_note` gives for them, and here it has one."""
    from scalebo.search.campaign import campaign_grid
    from scalebo.search.campaign_runs import read_campaign_runs
    from scalebo.search.runs_only import runs_only_note
    from scalebo.search.status import campaign_status

    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [20000000, 44721360, 100000000, 223606798, 500000000]\n"
                    "  D: [4.0e9, 1.6e10, 6.4e10, 2.56e11]\n"
                    "  lr: [2.5e-4, 5.0e-4, 1.0e-3, 2.0e-3, 4.0e-3, 8.0e-3, 1.6e-2]\n")
    grid = campaign_grid(path)
    rng, table = np.random.default_rng(42), {}  # the trial's grid: noise drawn in this order
    for n in np.geomspace(2e7, 5e8, 5):
        for d in np.geomspace(4e9, 2.56e11, 4):
            for r in (2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2):
                table[round(n), round(d), r] = (
                    1.9 + 400 / n**0.33 + 1800 / d**0.30
                    + 0.04 * np.log2(r / (3e-3 * (n / 1e8) ** -0.5)) ** 2 + rng.normal(0, 0.003))
    N, D, lr = (np.array(v) for v in zip(*TRIAL_RUNS, strict=True))
    loss = np.array([table[round(n), round(d), r] for n, d, r in TRIAL_RUNS])
    runs = read_campaign_runs(pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": loss}), grid)
    status = campaign_status(grid, runs, 0.1 * grid.budget_total, targets=(7.68e20, 1e24))
    chin = status.posterior["chinchilla"]
    expected = runs_only_note(N, D, loss, chin, (7.68e20, 1e24))
    said = [n for n in status.notes if n.startswith("the Chinchilla law fitted on the "
                                                    "completed runs alone")]
    assert said == [expected]
    assert "gives N* 3.99e+08, D* 3.21e+11 at 7.68e+20 FLOPs" in expected  # the trial's


def test_a_point_fit_outside_its_80_percent_interval_points_to_the_median():
    """A trial: `loss (fit)` 3.04 against a median of 2.35 with no word. Outside the 95 %
    interval the fit and the posterior disagree (said before); outside the 80 % only, the
    median is named as the better point estimate; inside it nothing is said."""
    from scalebo.search.status import TargetStatus, _outside_note

    def row(fit):
        return TargetStatus(C=1e22, prediction=fit, interval_80=[2.02, 2.29],
                            interval_95=[1.91, 2.40], half_width_pct=6.0, N_opt=None,
                            D_opt=None, median=2.24)

    assert _outside_note([row(2.28)]) == _outside_note([row(2.28)], 80) == ""
    assert _outside_note([row(2.33)]) == ""  # inside the 95 %
    note = _outside_note([row(2.33)], 80)
    assert note.startswith("the point fit's loss at 1e+22 FLOPs (2.33 nats) lies outside the "
                           "law posterior's 80 % interval [2.02, 2.29]: the posterior median "
                           "(2.24) is the better point estimate there")
    assert "95 % interval [1.91, 2.4]" in _outside_note([row(2.5)])
    assert _outside_note([row(2.29 + 1e-9)], 80) == ""  # the fitter's precision, not outside
    with pytest.raises(ValueError, match="level must be 80 or 95"):
        _outside_note([row(2.5)], 90)
