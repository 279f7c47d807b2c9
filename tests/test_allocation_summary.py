"""``scalebo allocate``: approaches 1-3 side by side, against a planted law and published fits."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scalebo.cli import main as cli_main
from scalebo.data.runs import load_runs
from scalebo.errors import FitError
from scalebo.fitting.allocation import fit_power
from scalebo.fitting.allocation_summary import (
    allocation_summary,
    exponent_interval,
    isoflop_budgets,
)

TRUE = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
A_TRUE = TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"])  # N* ∝ C^0.4516


def _loss(N, D):
    return TRUE["E"] + TRUE["A"] / N ** TRUE["alpha"] + TRUE["B"] / D ** TRUE["beta"]


def _isoflop_table(rng=None, noise=0.0, round_sizes=True) -> pd.DataFrame:
    """Seven model sizes, log-spaced around the true optimum, at each of five budgets; N and
    D rounded to whole numbers as a real table would hold them (C = 6ND off by < 0.1 %)."""
    rows = []
    for C in np.geomspace(1e19, 1e23, 5):
        n_star = (TRUE["alpha"] * TRUE["A"] / (TRUE["beta"] * TRUE["B"])) ** (
            1 / (TRUE["alpha"] + TRUE["beta"])) * (C / 6) ** A_TRUE
        for N in n_star * np.geomspace(1 / 8, 8, 7):
            D = C / (6 * N)
            N, D = (np.round(N, -3), np.round(D, -3)) if round_sizes else (N, D)
            loss = _loss(N, D) * (np.exp(noise * rng.standard_normal()) if noise else 1.0)
            rows.append({"N": N, "D": D, "loss": loss, "budget": C})
    return pd.DataFrame(rows)


def test_isoflop_budgets_group_close_computes_and_refuse_a_chain():
    C = np.array([2.0e18, 1.0e18, 1.004e18, 2.01e18, 8e18])
    got = isoflop_budgets(C)
    assert got[1] == got[2] == pytest.approx(np.sqrt(1.0e18 * 1.004e18))
    assert got[0] == got[3] == pytest.approx(np.sqrt(2.0e18 * 2.01e18))
    assert got[4] == pytest.approx(8e18, rel=1e-12)
    chain = 1e18 * 1.008 ** np.arange(5)  # each within 1 % of the last, 3.2 % end to end
    with pytest.raises(FitError, match="not one isoFLOP budget"):
        isoflop_budgets(chain)


def test_exponent_interval_equals_the_ols_slope_interval():
    rng = np.random.default_rng(3)
    x = np.geomspace(1e18, 1e22, 8)
    y = 0.1 * x**0.5 * np.exp(0.05 * rng.standard_normal(8))
    fit = fit_power(x, y)
    ref = stats.linregress(np.log(x), np.log(y))
    half = stats.t.ppf(0.975, 6) * ref.stderr
    lo, hi = exponent_interval(fit, x, y)
    assert (lo, hi) == pytest.approx((ref.slope - half, ref.slope + half), rel=1e-9)
    assert exponent_interval(fit_power(x[:2], y[:2]), x[:2], y[:2]) is None


def test_three_approaches_recover_a_planted_law_on_isoflop_profiles():
    table = load_runs(_isoflop_table())
    summary = allocation_summary(table, predict=[1e24])
    one, two, three = summary.estimates
    assert [e.approach for e in summary.estimates] == [1, 2, 3]
    # 3: the law itself is fitted, so the closed-form optimum is exact up to rounding.
    assert three.law.n_opt.exponent == pytest.approx(A_TRUE, abs=2e-3)
    # 2: the parabola in log N is an approximation of the profile; all five budgets used
    # without a budget column (rounded N, D move C by < 0.1 %).
    assert two.points["used"].all() and len(two.points) == 5
    assert two.law.n_opt.exponent == pytest.approx(A_TRUE, abs=0.02)
    lo, hi = two.intervals["N_opt"]
    assert lo < two.law.n_opt.exponent < hi
    # 1: one envelope run per budget (runs within 1 % of a budget's compute are at that
    # compute: without it, off-optimal runs a little cheaper than their budget's best join
    # the envelope and pull the slope to 0.37); its size is the grid's nearest to N*.
    assert len(one.points) == 5
    assert one.law.n_opt.exponent == pytest.approx(A_TRUE, abs=0.03)
    for est in summary.estimates:
        assert est.law.n_opt.exponent + est.law.d_opt.exponent == pytest.approx(1.0, abs=1e-6)
    rows = summary.predictions()
    assert [r["approach"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert 6 * r["N_opt"] * r["D_opt"] == pytest.approx(1e24, rel=0.02)
    assert summary.warnings == ()  # the approaches agree: nothing to say


def test_approaches_that_disagree_far_out_are_named():
    # The best run of the i-th budget moved to the (i+1)-th of its seven sizes (each 2x the
    # last): the envelope's N* grows ~2x faster per decade of C than the L(N, D) law says,
    # so far out the two allocations are many times apart.
    frame = _isoflop_table()
    for i, budget in enumerate(sorted(frame["budget"].unique())):
        rows = frame.index[frame["budget"] == budget]
        frame.loc[rows[i + 1], "loss"] -= 0.2
    summary = allocation_summary(load_runs(frame), [1, 3], predict=[1e21, 1e30])
    n_star = {r["C"]: [] for r in summary.predictions()}
    for r in summary.predictions():
        n_star[r["C"]].append(r["N_opt"])
    assert max(n_star[1e30]) / min(n_star[1e30]) > 2 > max(n_star[1e21]) / min(n_star[1e21])
    assert len(summary.warnings) == 1 and "C = 1e+30" in summary.warnings[0]


def test_a_budget_column_gives_the_same_approach_2():
    frame = _isoflop_table()
    by_c = allocation_summary(load_runs(frame), [2]).estimates[0]
    by_col = allocation_summary(load_runs(frame, hyperparameters=()), [2],
                                isoflop_column="budget").estimates[0]
    assert by_col.law.n_opt.exponent == pytest.approx(by_c.law.n_opt.exponent, abs=1e-3)
    assert by_col.points["C"].tolist() == pytest.approx(sorted(frame["budget"].unique()))


def test_approaches_the_table_cannot_support_say_why():
    # A 3 × 2 grid: no isoFLOP budget has three sizes, and L(N, D) has 5 parameters for 6
    # cells, still fitted; with 4 cells approach 3 has no law either.
    frame = pd.DataFrame([{"N": N, "D": D, "loss": _loss(N, D)}
                          for N in (1e8, 3e8) for D in (2e9, 8e9)])
    summary = allocation_summary(load_runs(frame))
    reasons = {e.approach: e.reason for e in summary.estimates}
    assert summary.estimates[0].law is not None
    assert "isoFLOP profiles need several model sizes" in reasons[2]
    assert "5 parameters" in reasons[3] and "4 (N, D) cells" in reasons[3]
    with pytest.raises(ValueError, match="approaches must be among"):
        allocation_summary(load_runs(frame), [4])
    # A trial: six sizes at one token count gave approach 1 "a = 1, b = -1e-15, r² 1": with
    # D fixed, C = 6·N·D makes N ∝ C whatever the losses, so there is no law to report
    one_d = pd.DataFrame([{"N": N, "D": 1e10, "loss": _loss(N, 1e10)}
                          for N in np.geomspace(5e7, 2e9, 6)])
    (first, *_) = allocation_summary(load_runs(one_d), [1]).estimates
    assert first.law is None and first.reason == ("every envelope run has the same D: the "
                                                  "table does not say how D* grows with C")


def test_cli_allocate_formats_and_bad_input(tmp_path, capsys):
    path = tmp_path / "iso.csv"
    _isoflop_table().to_csv(path, index=False)
    assert cli_main(["-q", "allocate", str(path), "--predict", "1e24", "--format", "json",
                     "--hyperparameters", ""]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["approach"] for e in out["estimates"]] == [1, 2, 3]
    assert out["estimates"][1]["N_opt"]["exponent"] == pytest.approx(A_TRUE, abs=0.02)
    assert len(out["predictions"]) == 3
    assert cli_main(["-q", "allocate", str(path), "--approach", "2", "--format", "csv",
                     "--hyperparameters", ""]) == 0
    csv_out = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    exp = csv_out[(csv_out["kind"] == "exponent") & (csv_out["name"] == "N_opt")]
    assert exp["lower"].iloc[0] < exp["estimate"].iloc[0] < exp["upper"].iloc[0]
    assert cli_main(["-q", "allocate", str(path), "--approach", "2", "--hyperparameters", "",
                     "--plot", str(tmp_path / "a.png")]) == 0
    text = capsys.readouterr().out
    assert "2 isoFLOP" in text and "isoFLOP budgets" in text
    assert (tmp_path / "a.png").stat().st_size > 0
    assert cli_main(["-q", "allocate", str(path), "--isoflop-column", "nope",
                     "--hyperparameters", ""]) == 2
    assert "'nope' is not a column" in capsys.readouterr().err
    bad = _isoflop_table()
    bad.loc[3, "budget"] = -1
    bad.to_csv(path, index=False)
    assert cli_main(["-q", "allocate", str(path), "--isoflop-column", "budget",
                     "--hyperparameters", ""]) == 2
    assert "data row 4" in capsys.readouterr().err
    tiny = tmp_path / "tiny.csv"
    pd.DataFrame({"N": [1e8, 1e8], "D": [1e9, 2e9], "loss": [3.0, 2.9]}).to_csv(tiny,
                                                                            index=False)
    assert cli_main(["-q", "allocate", str(tiny)]) == 1
    assert "no law from approach 1" in capsys.readouterr().out


def test_approach3_on_epoch_chinchilla_matches_the_published_refit(data_dir):
    """Besiroglu et al. (2024) refit Hoffmann's approach 3 on these points (the five
    highest losses dropped): alpha 0.3478, beta 0.3658, so N* ∝ C^0.513."""
    from scalebo.data.datasets import load_dataset

    table = load_dataset("epoch_chinchilla", data_dir=data_dir, drop_highest_loss=5)
    three = allocation_summary(table, [3]).estimates[0]
    assert three.fit_status == "converged"
    assert three.law.n_opt.exponent == pytest.approx(0.3658 / (0.3478 + 0.3658), abs=0.01)


def test_approach3_says_when_its_law_does_not_describe_the_runs(data_dir):
    """A trial: on Porian et al.'s tuned profiles (rw) approach 3 said "fit converged" with
    E = 3.131 nats above the best run's 3.097, which `fit --law chinchilla` warns about."""
    from scalebo.data.datasets import load_dataset

    table = load_dataset("porian_isoflop", data_dir=data_dir, dataset="rw", hparams="tuned",
                         warmup="short", decay="const", param_count="standard",
                         loss_type="val")
    summary = allocation_summary(table, [3])
    E, best = summary.estimates[0].law_params["E"], float(table.frame["loss"].min())
    assert E > best  # the independent fact the warning is about
    assert any(f"E = {E:.4g} nats is above the best run's loss ({best:.4g} nats" in w
               for w in summary.warnings)


def test_envelope_points_piled_at_the_smallest_model_are_named_with_the_slope_without():
    from scalebo.fitting.allocation import edge_note

    # Four checkpoints of the smallest model below its crossing, then one optimum per size.
    C = np.array([1e17, 2e17, 4e17, 8e17, 1.6e18, 1e19, 1e20, 1e21])
    N = np.array([1e7, 1e7, 1e7, 1e7, 1e7, 4e7, 1.3e8, 4e8])
    points = pd.DataFrame({"C": C, "N": N})
    note = edge_note(points, 1e7, 1e9)
    inner = fit_power(C[5:], N[5:]).exponent
    assert note.startswith("5 of the 8 envelope points are runs of the smallest model "
                           "(N = 1e+07)")
    assert f"without them N* grows as C^{inner:.3f}" in note
    assert edge_note(points.iloc[3:], 1e7, 1e9) is None  # 2 of 5 at the edge: too few
    assert edge_note(points, 1e6, 1e9) is None  # the smallest model of the table is smaller
    # allocate's approach 1 says it too (as a warning carried in the summary)
    table = load_runs(pd.DataFrame({"N": N, "D": C / (6 * N), "loss": 10 / C**0.05}))
    assert any("smallest model" in w for w in allocation_summary(table, [1]).warnings)


def test_approach3_bootstrap_interval_holds_the_truth_and_is_seeded():
    rng = np.random.default_rng(0)
    table = load_runs(_isoflop_table(rng, noise=0.01))
    one = allocation_summary(table, [3], bootstrap=60, seed=1).estimates[0]
    lo, hi = one.intervals["N_opt"]
    assert lo < one.law.n_opt.exponent < hi and lo < A_TRUE < hi
    assert one.intervals["D_opt"] == pytest.approx((1 - hi, 1 - lo))
    again = allocation_summary(table, [3], bootstrap=60, seed=1).estimates[0]
    assert again.intervals == one.intervals
    assert allocation_summary(table, [3]).estimates[0].intervals == {}


def test_extrapolated_isoflop_vertices_are_named_with_the_slope_without_them():
    # A review: a fourth budget whose four sizes all lie far below its N* pulled the
    # exponent from 0.449 to 0.323 without a word.
    frame = _isoflop_table()
    budgets = sorted(frame["budget"].unique())
    top = frame[frame["budget"] == budgets[-1]].sort_values("N").iloc[:3]  # left of N*
    frame = pd.concat([frame[frame["budget"] != budgets[-1]], top])
    summary = allocation_summary(load_runs(frame), [2])
    two = summary.estimates[0]
    inside = two.points[two.points["used"]]["vertex_inside"].astype(bool)
    assert (~inside).sum() == 1
    note = next(w for w in summary.warnings if "outside the sizes they trained" in w)
    assert f"C = {budgets[-1]:.3g} FLOPs" in note and "without them N* grows as C^0.45" in note


def test_isoflop_d_star_uses_the_tables_flops_per_parameter_token():
    # A review: with C = 8·N·D, D* = C/(6 N*) was 33 % too high.
    frame = _isoflop_table(round_sizes=False)
    frame["C"] = 8 * frame["N"] * frame["D"]
    with pytest.warns(UserWarning, match="the C column is 1.33"):
        table = load_runs(frame)
    two = allocation_summary(table, [2]).estimates[0]
    used = two.points[two.points["used"]]
    assert (used["C"] / (8 * used["N_opt"] * used["D_opt"])).tolist() == pytest.approx(
        [1.0] * len(used))


def test_two_points_and_a_lonely_bootstrap_are_said():
    frame = pd.DataFrame({"N": [1e8, 4e8], "D": [2e9, 4e9], "loss": [3.0, 2.8]})
    summary = allocation_summary(load_runs(frame), [1], bootstrap=50)
    assert summary.estimates[0].law is not None
    assert any("only 2 envelope runs: a line through them has no interval" in w
               for w in summary.warnings)
    assert any("only approach 3 is bootstrapped" in w for w in summary.warnings)


def test_approach1_groups_close_computes_within_each_budget_not_whole_chains():
    # A review: one chain of close computes spanning > 2 % switched the 1 % grouping off for
    # the whole table (Epoch's points); a second review: merging whole chains put 136
    # checkpoint cells spanning 2x in C into one compute. A budget spans at most 2 %.
    C = np.array([1.0e18, 1.005e18, 1.01e18, 4e18, 4.01e18,  # two budgets
                  9.0e18, 9.08e18, 9.16e18, 9.24e18])  # a 2.7 % chain: each run its own C
    N = np.array([1e8, 1e8, 1e8, 1.5e8, 2.5e8, 2e8, 2e8, 2e8, 2e8])
    loss = np.array([3.0, 3.01, 2.99, 2.9, 2.91, 2.85, 2.84, 2.83, 2.82])
    table = load_runs(pd.DataFrame({"N": N, "D": C / (6 * N), "loss": loss}))
    one = allocation_summary(table, [1]).estimates[0]
    # 1.0e18 (3.0) is on the envelope of raw C, not of the budget, whose best is 2.99;
    # 4.01e18 (2.91) is within 1 % of 4e18 and worse: off; the chain's four all stay
    assert one.points["C"].tolist() == pytest.approx([1.01e18, 4e18, 9.0e18, 9.08e18,
                                                      9.16e18, 9.24e18])


def test_a_budget_column_in_another_unit_is_refused():
    # A trial: budgets given as labels 1..5 or in PF-days gave D* of 2e-9 tokens, exit 0.
    frame = _isoflop_table()
    frame["label"] = frame["budget"].rank(method="dense")
    frame["zero"] = frame["budget"].where(frame.index != 4, 0.0)
    table = load_runs(frame, hyperparameters=())
    with pytest.raises(ValueError, match=r"column 'label' is [0-9.e-]+x the runs' compute C"):
        allocation_summary(table, [2], isoflop_column="label")
    with pytest.raises(ValueError, match="data row 5 has 0.0"):
        allocation_summary(table, [2], isoflop_column="zero")


def test_approach3_answers_at_the_tables_own_compute():
    # A trial: with C = 7.2·N·D approaches 1 and 2 were right at 1e24 and approach 3 (solving
    # 6·N·D = C) 8.6 % off in N*, without a word.
    frame = _isoflop_table(round_sizes=False)
    frame["C"] = 7.2 * frame["N"] * frame["D"]
    summary = allocation_summary(load_runs(frame), [3], predict=[1e24])
    r = summary.predictions()[0]
    assert 7.2 * r["N_opt"] * r["D_opt"] == pytest.approx(1e24, rel=1e-9)
    G = (TRUE["alpha"] * TRUE["A"] / (TRUE["beta"] * TRUE["B"])) ** (
        1 / (TRUE["alpha"] + TRUE["beta"]))
    assert r["N_opt"] == pytest.approx(G * (1e24 / 7.2) ** A_TRUE, rel=0.01)
    assert any("approach 3 solves 7.2·N·D = C" in w for w in summary.warnings)


def test_a_stray_chain_of_close_computes_is_listed_not_fatal():
    # A trial: four stray runs chaining over 2.8 % stopped approach 2 on a clean design.
    frame = _isoflop_table()
    stray = pd.DataFrame({"N": [1e8, 2e8, 3e8, 4e8], "budget": np.nan,
                          "C": [5e18, 5.04e18, 5.09e18, 5.14e18]})
    stray["D"] = stray["C"] / (6 * stray["N"])
    stray["loss"] = _loss(stray["N"], stray["D"])
    table = load_runs(pd.concat([frame, stray.drop(columns="C")], ignore_index=True),
                      hyperparameters=())
    two = allocation_summary(table, [2]).estimates[0]
    assert two.law.n_opt.exponent == pytest.approx(A_TRUE, abs=0.02)
    unused = two.points[~two.points["used"].astype(bool)]
    assert len(unused) == 1 and "not one isoFLOP budget" in unused["reason"].iloc[0]


def test_approach2_needs_an_isoflop_design_without_a_budget_column():
    # Gemstones' checkpoints: 20 of 220 cells share a compute with 2 other sizes by chance;
    # their parabolas gave a = 0.86 [-0.16, 1.88]. Here two clean profiles (14 cells) among
    # 40 cells at other computes (one lands on a profile): no design's law from 15 of 54.
    iso = _isoflop_table()
    iso = iso[iso["budget"].isin(sorted(iso["budget"].unique())[:2])].drop(columns="budget")
    rng = np.random.default_rng(0)
    N = rng.choice(np.geomspace(1e8, 1e9, 6), 40)
    D = np.geomspace(3e9, 3e11, 40)
    extra = pd.DataFrame({"N": N, "D": D, "loss": _loss(N, D)})
    table = load_runs(pd.concat([iso, extra], ignore_index=True))
    two = allocation_summary(table, [2]).estimates[0]
    assert two.law is None and "of the 54 cells lie on isoFLOP profiles" in two.reason
    assert not two.points["used"].astype(bool).any()
    assert (two.points["reason"] == "not an isoFLOP design").sum() == 2


def test_approach1_tracking_the_edge_of_each_profile_is_said():
    # A trial: every size 8x above N*: approach 1 gave the true slope with a zero-width
    # interval and N* 2.9x too large, silently.
    frame = _isoflop_table()
    n_star = frame.loc[frame.groupby("budget")["loss"].idxmin(), ["budget", "N"]]
    frame = frame.merge(n_star.rename(columns={"N": "N_star"}), on="budget")
    frame = frame[frame["N"] > 1.5 * frame["N_star"]].drop(columns=["N_star", "budget"])
    summary = allocation_summary(load_runs(frame), [1])
    assert any("smallest or largest size of their profile" in w for w in summary.warnings)


def test_the_python_entry_checks_its_arguments():
    table = load_runs(_isoflop_table())
    with pytest.raises(TypeError, match="takes a RunTable"):
        allocation_summary(_isoflop_table())
    with pytest.raises(ValueError, match="computes must be finite FLOPs > 0"):
        allocation_summary(table, predict=[0.0])
    tiny = allocation_summary(table, [1], predict=[24.0])
    assert any("(did you mean 1e24?)" in w for w in tiny.warnings)
    assert [e.approach for e in allocation_summary(table, 2).estimates] == [2]


def test_a_design_whose_budgets_vary_by_a_few_percent_is_said_or_named():
    # A review: budgets jittered by ±1.5 % chain over 2 %: the runs keep their own C, off-
    # optimal sizes join the envelope (a = 0.530 against 0.452), silently. Now a warning
    # points to the budget column, with which approach 1 groups by it.
    frame = _isoflop_table()
    rng = np.random.default_rng(1)
    frame["D"] *= np.exp(rng.uniform(-0.015, 0.015, len(frame)))
    frame["loss"] = _loss(frame["N"], frame["D"])
    loose = allocation_summary(load_runs(frame, hyperparameters=()), [1])
    assert any("their runs keep their own C on the envelope; if they are isoFLOP budgets"
               in w for w in loose.warnings)
    named = allocation_summary(load_runs(frame, hyperparameters=()), [1, 2],
                               isoflop_column="budget")
    one, two = named.estimates
    assert len(one.points) == 5 and one.law.n_opt.exponent == pytest.approx(A_TRUE, abs=0.02)
    assert two.law.n_opt.exponent == pytest.approx(A_TRUE, abs=0.02)


def test_the_budget_table_counts_computes_of_one_or_two_sizes(tmp_path, capsys):
    # A new user's Epoch output listed ~150 budgets, most 'only 1 distinct N (< 3)'.
    iso = _isoflop_table().drop(columns="budget")
    N = np.array([1e8, 2e8, 4e8, 8e8])
    extra = pd.DataFrame({"N": N, "D": [3e9, 7e9, 2e10, 5e10]})
    extra["loss"] = _loss(extra["N"], extra["D"])
    path = tmp_path / "runs.csv"
    pd.concat([iso, extra]).to_csv(path, index=False)
    assert cli_main(["-q", "allocate", str(path), "--approach", "2"]) == 0
    out = capsys.readouterr().out
    assert "and 4 compute(s) of fewer than 3 sizes (all in --format json)" in out
    assert "only 1 distinct N" not in out


def _axis(fig, ylabel):
    return next(ax for ax in fig.axes if ax.get_ylabel() == ylabel)


def test_the_figure_shows_the_isoflop_profiles_behind_approach_2():
    """Approach 2's N* are parabola vertices; a trial asked to see the parabolas, as in
    Hoffmann et al.'s Fig. 3: each budget's runs, its curve over the sizes trained, its
    vertex a star where the summary puts N* (hollow when outside the sizes)."""
    from scalebo.fitting.allocation_plot import plot_allocation

    frame = _isoflop_table()
    smallest = frame["budget"].min()  # its vertex pushed beyond the sizes it trained
    frame = frame[(frame["budget"] != smallest) | (frame["N"] < frame.loc[
        frame["budget"] == smallest, "N"].median())]
    summary = allocation_summary(load_runs(frame), predict=[1e24])
    two = summary.estimates[1]
    fig = plot_allocation(summary)
    ax = _axis(fig, "loss (nats)")
    used = two.points[two.points["used"].astype(bool)]
    stars = [ln for ln in ax.get_lines() if ln.get_marker() == "*"]
    drawn = sorted((ln.get_xdata()[0], ln.get_ydata()[0]) for ln in stars)
    assert np.ravel(drawn) == pytest.approx(np.ravel(sorted(zip(
        used["N_opt"], used["loss_opt"], strict=True))))
    hollow = [ln.get_xdata()[0] for ln in stars if ln.get_markerfacecolor() == "white"]
    assert hollow == pytest.approx(list(used.loc[~used["vertex_inside"], "N_opt"]))
    assert len(hollow) == 1
    solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and ln.get_marker() != "*"]
    ranges = sorted((min(ln.get_xdata()), max(ln.get_xdata())) for ln in solid)
    sizes = frame.groupby("budget")["N"].agg(["min", "max"]).sort_index()
    assert np.ravel(ranges) == pytest.approx(sizes.to_numpy().ravel(), rel=1e-6)
    # without an approach-2 law, two panels
    assert len(plot_allocation(allocation_summary(load_runs(frame), (1, 3))).axes) == 2


def test_the_figure_dashes_extrapolation_and_marks_each_prediction():
    """A trial: the lines ran solid 3 decades past the runs, the predicted N* were unmarked
    (the approaches differed by 20 % there) and the markers had no legend."""
    from scalebo.fitting.allocation_plot import plot_allocation

    summary = allocation_summary(load_runs(_isoflop_table()), predict=[1e24])
    fig = plot_allocation(summary)
    ax_n = _axis(fig, "N* (parameters)")
    top = summary.C_range[1]
    dashed = [ln for ln in ax_n.get_lines() if ln.get_linestyle() == "--"
              and min(ln.get_xdata()) == pytest.approx(top)]
    assert len(dashed) == 3 and all(max(ln.get_xdata()) > 1e24 for ln in dashed)
    solid = [ln for ln in ax_n.get_lines() if str(ln.get_label()).startswith(("1:", "2:", "3:"))]
    assert all(max(ln.get_xdata()) == pytest.approx(top) for ln in solid)
    for est in summary.estimates:  # each approach's N* at 1e24 is drawn
        n_star = est.at(1e24)["N_opt"]
        assert any(list(ln.get_xdata()) == [1e24] and ln.get_ydata()[0] == pytest.approx(n_star)
                   for ln in ax_n.get_lines())
    labels = ax_n.get_legend_handles_labels()[1]
    assert "envelope runs" in labels and any(lab.startswith("isoFLOP vertices") for lab in labels)
    assert any(lab.startswith("2: isoFLOP: C^") and "[" in lab for lab in labels)  # interval


def test_the_figure_dashes_predictions_below_the_runs_too():
    from scalebo.fitting.allocation_plot import plot_allocation

    summary = allocation_summary(load_runs(_isoflop_table()), 2, predict=[1e15])
    ax_n = _axis(plot_allocation(summary), "N* (parameters)")
    low, top = summary.C_range
    solid = next(ln for ln in ax_n.get_lines() if str(ln.get_label()).startswith("2:"))
    assert min(solid.get_xdata()) == pytest.approx(low)
    assert max(solid.get_xdata()) == pytest.approx(top)
    dashed = [ln for ln in ax_n.get_lines() if ln.get_linestyle() == "--"]
    assert min(min(ln.get_xdata()) for ln in dashed) < 1e15 < low


def test_an_envelope_of_checkpoints_says_its_interval_is_too_narrow():
    """A trial: Gemstones' 143 envelope checkpoints of 14 runs gave a t-interval (0.536,
    0.582) that missed the published 0.4994, with no word that the points share runs."""
    rows = []
    for i, N in enumerate(1e8 * 2.0 ** np.arange(6)):
        for D in 2e9 * 2.0 ** np.arange(4):  # 4 checkpoints of one run per size
            rows.append({"run": f"r{i}", "N": N, "D": D,
                         "loss": 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28})
    table = load_runs(pd.DataFrame(rows))
    summary = allocation_summary(table, [1])
    one = summary.estimates[0]
    n_runs = len(set(table.frame.loc[table.frame["C"].isin(one.points["C"]), "run"]))
    assert any(f"its {len(one.points)} envelope points are checkpoints of {n_runs} training "
               "runs" in w for w in summary.warnings)
    assert n_runs < len(one.points)
    flat = load_runs(pd.DataFrame(rows).drop(columns="run"))
    assert not any("checkpoints of" in w for w in allocation_summary(flat, [1]).warnings)


def test_approach3_predictions_carry_the_bootstrap_intervals_fit_gives():
    """A trial: `allocate --bootstrap B --predict C` gave intervals of the exponents only,
    where `fit --law chinchilla --bootstrap B --predict C` gives N*, D* and D*/N* intervals.
    Same table, resamples, seed and level: the same intervals, from another code path."""
    from scalebo.fitting.summary import fit_summary

    table = load_runs(_isoflop_table(np.random.default_rng(3), noise=0.01))
    row = next(r for r in allocation_summary(table, [3], predict=[1e24],
                                             bootstrap=80).predictions())
    ref = fit_summary(table, "chinchilla", bootstrap=80, predict=[1e24]).predictions[0]
    for key in ("N_opt", "D_opt", "tokens_per_param"):
        lo, hi = row["intervals"][key]
        assert lo < row[key] < hi
        assert (lo, hi) == pytest.approx(tuple(ref[f"{key}_interval"]), rel=1e-9)
    no_boot = allocation_summary(table, [1, 3], predict=[1e24]).predictions()
    assert all(r["intervals"] is None for r in no_boot)


def test_approach3_solves_the_tables_own_compute_with_its_bootstrap_alike():
    """With C = 8·N·D the law's optimum is solved under 8·N·D = C, for the point law and each
    bootstrap resample alike (one function, optimum_logs), and said in a note."""
    frame = _isoflop_table(np.random.default_rng(2), noise=0.01, round_sizes=False)
    frame["C"] = 8 * frame["N"] * frame["D"]
    with pytest.warns(UserWarning):
        table = load_runs(frame)
    summary = allocation_summary(table, [3], predict=[1e24], bootstrap=60)
    (row,) = summary.predictions()
    assert 8 * row["N_opt"] * row["D_opt"] == pytest.approx(1e24, rel=1e-9)
    assert any("the table's C is 8·N·D (median), not 6·N·D" in w for w in summary.warnings)
    lo, hi = row["intervals"]["N_opt"]
    assert lo < row["N_opt"] < hi
    three = summary.estimates[0]
    g_n, a, g_d, b = three.boot_laws.T  # each resample's optimum also spends 8·N·D = C
    np.testing.assert_allclose(8 * np.exp(g_n + g_d + (a + b) * np.log(1e24)), 1e24,
                               rtol=1e-9)
