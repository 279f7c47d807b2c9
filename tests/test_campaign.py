"""The campaign library behind ``scalebo suggest``: first batch without runs, completed runs
counting toward the initial design, budget accounting in FLOPs."""

import numpy as np
import pandas as pd
import pytest

from scalebo.errors import SearchError
from scalebo.search.campaign import campaign_grid, suggest_runs
from scalebo.search.campaign_runs import CampaignRuns, read_campaign_runs


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 3e8, 1e9]\n  D: [2e9, 6e9, 2e10]\n  lr: [1e-3, 3e-3]\n")
    return campaign_grid(path)


def _frame(grid, rows):
    cfg = grid.configs.iloc[rows].reset_index(drop=True)
    loss = 2.0 + 300 * (6 * cfg["N"] * cfg["D"]) ** -0.12 + 5 * np.abs(np.log(cfg["lr"] / 2e-3))
    return cfg.assign(loss=loss)


def _runs(grid, rows):
    return read_campaign_runs(_frame(grid, rows), grid)


def test_first_batch_without_runs_is_the_initial_design(grid):
    assert grid.n_held_out_cells == 0 and len(grid) == 18  # a campaign holds nothing out
    res = suggest_runs(grid, CampaignRuns(), 0.3 * grid.C_total, batch=3)
    sugg = res.suggestions
    assert len({s.index for s in sugg}) == 3
    assert all("initial design" in s.reason for s in sugg)
    assert res.spent == 0 and res.budget == pytest.approx(0.3 * grid.C_total)
    C_total = float((6 * grid.configs["N"] * grid.configs["D"]).sum())  # by hand
    assert res.C_total == pytest.approx(C_total)


def test_completed_runs_count_toward_the_initial_design(grid):
    cheap = np.argsort(grid.cost, kind="stable")[:5]
    runs = _runs(grid, cheap)
    res = suggest_runs(grid, runs, 0.5 * grid.C_total, batch=2)
    sugg = res.suggestions
    assert not any("initial design" in s.reason for s in sugg)  # 5 runs: search at once
    assert not {s.index for s in sugg} & set(cheap.tolist())  # never a completed one again
    frame = _frame(grid, cheap)
    assert res.spent == pytest.approx(float((6 * frame["N"] * frame["D"]).sum()))
    two = _runs(grid, cheap[:2])
    sugg2 = suggest_runs(grid, two, 0.5 * grid.C_total, batch=3).suggestions
    assert sum("initial design" in s.reason for s in sugg2) == 3  # 2 told + 3 designed = 5


def test_budget_spent_and_off_grid_runs_are_errors(grid):
    runs = _runs(grid, np.arange(len(grid)))
    with pytest.raises(SearchError, match="budget is already spent"):
        suggest_runs(grid, runs, 0.2 * grid.C_total)
    with pytest.raises(SearchError, match="not on the grid"):
        read_campaign_runs(pd.DataFrame({"N": [5e8], "D": [2e9], "lr": [1e-3], "loss": [3.0]}),
                           grid)
    with pytest.raises(ValueError, match="positive"):
        suggest_runs(grid, CampaignRuns(), -1.0)


def test_failed_runs_are_spent_and_not_proposed_again_unless_retried(grid):
    order = np.argsort(grid.cost, kind="stable")
    frame = _frame(grid, order[:6])
    frame.loc[5, "loss"] = np.nan  # crashed
    runs = read_campaign_runs(frame, grid)
    failed = int(runs.failed[0])
    budget = float(grid.cost[order[:6]].sum()) + float(grid.cost[order[6]])  # room for one
    res = suggest_runs(grid, runs, budget, batch=3)
    assert res.spent == pytest.approx(float(grid.cost[order[:6]].sum()))  # failure counted
    assert len(res.suggestions) == 1
    assert res.message.startswith("1 of the 3 asked for fit")
    assert failed not in {s.index for s in res.suggestions}
    total = budget + 10 * float(grid.cost.max())
    again = suggest_runs(grid, runs, total, batch=len(grid) - 5, retry_failed=True)
    assert failed in {s.index for s in again.suggestions}  # retried
    # and says so (a trial could not tell a retry from a new configuration)
    assert [s.reason.startswith("retry of a failed run; ") for s in again.suggestions] == [
        s.index == failed for s in again.suggestions]
    assert again.spent == pytest.approx(res.spent)  # the failed attempt stays spent
    plain = suggest_runs(grid, runs, total, batch=len(grid) - 6)
    assert failed not in {s.index for s in plain.suggestions}


def test_retry_crashed_proposes_crashes_again_but_not_diverged_runs(grid):
    """A crash (no loss, or status failed without one) is worth running again; a run that
    diverged (a loss at or above --diverged-above, an infinite one, or failed beside a loss) is
    not: --retry-failed crashed tells them apart, --retry-failed (all) does not."""
    order = np.argsort(grid.cost, kind="stable")
    frame = _frame(grid, order[:8]).assign(status="completed")
    frame.loc[2, "loss"] = np.nan  # crashed
    frame.loc[3, ["loss", "status"]] = [np.nan, "failed"]  # crashed, said
    frame.loc[4, "loss"] = 50.0  # diverged (above --diverged-above)
    frame.loc[5, "loss"] = np.inf  # diverged
    frame.loc[6, "status"] = "failed"  # a loss, but failed: diverged
    runs = read_campaign_runs(frame, grid, diverged_above=20.0)
    at = grid.index_of(frame)
    assert sorted(runs.failed.tolist()) == sorted(at[2:7].tolist())
    assert sorted(runs.crashed.tolist()) == sorted(at[2:4].tolist())
    total = 10 * float(grid.cost.sum())
    proposed = {s.index for s in suggest_runs(grid, runs, total, batch=len(grid),
                                              retry_failed="crashed").suggestions}
    assert set(at[2:4]) <= proposed and not set(at[4:7]) & proposed
    proposed = {s.index for s in suggest_runs(grid, runs, total, batch=len(grid),
                                              retry_failed="all").suggestions}
    assert set(at[2:7]) <= proposed
    with pytest.raises(ValueError, match="retry_failed must be"):
        suggest_runs(grid, runs, total, retry_failed="diverged")


def test_campaign_posterior_is_the_law_posterior_of_its_runs(grid):
    from scalebo.search.campaign import campaign_posterior
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.models.clipping import ClippedGP
    from scalebo.search.models.surrogates import make_surrogate
    from scalebo.search.optimum_shift import OptimumShiftSurrogate

    runs = _runs(grid, np.argsort(grid.cost, kind="stable")[:10])
    for shift in (True, False):  # the default GP sees the moving optimum (0.3.7)
        post = campaign_posterior(grid, runs, n_samples=16, seed=3, schedule="full",
                                  shift_optimum=shift)["compute"].summary()
        gp = make_surrogate("gp", rng=3)
        if shift:
            gp = OptimumShiftSurrogate(gp, (0, 1), categorical=grid.categorical_columns)
        direct = law_posterior(grid, runs.completed, runs.losses, ClippedGP(gp, 5.0),
                               laws=("compute",), scope="grid", n_samples=16,
                               targets=(1e25,), rng=3)["compute"].summary()
        post.pop("seconds"), direct.pop("seconds")  # wall time
        assert post == direct
    q = post["predicted_loss"]["1e+25"]
    assert q["q02.5"] <= q["q10"] <= q["q50"] <= q["q90"] <= q["q97.5"]


def test_campaign_posterior_samples_configurations_beyond_the_window(grid):
    # Ten cheapest runs: the spent window admits only cheap configurations, but the law of the
    # whole grid also depends on the costly ones, so the default samples every one of them.
    from scalebo.search.campaign import campaign_posterior

    runs = _runs(grid, np.argsort(grid.cost, kind="stable")[:10])
    post = campaign_posterior(grid, runs, n_samples=8, seed=0, keep_samples=True)["compute"]
    np.testing.assert_array_equal(post.samples.rows, np.arange(len(grid)))
    old = campaign_posterior(grid, runs, n_samples=8, seed=0, scope="window",
                             keep_samples=True)["compute"]
    assert old.samples.rows.size < len(grid)
    assert grid.cost[old.samples.rows].max() < grid.cost.max()
    with pytest.raises(ValueError, match="scope"):
        campaign_posterior(grid, runs, n_samples=8, scope="everything")


def test_transfer_and_trend_predict_unexplored_scales_by_lr_and_D(tmp_path):
    # The runs of the README's campaign example; nothing at N = 1e9. The default GP predicts
    # every N = 1e9 configuration at one value (its mean); with the transfer kernel and the
    # trend, predictions there follow the lr effect seen at small scale and fall with D.
    from scalebo.search.campaign import campaign_gp

    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 3e8, 1e9]\n  D: [2e9, 6e9, 2e10]\n"
                    "  lr: [1e-4, 3e-4, 1e-3, 3e-3]\n")
    grid = campaign_grid(path)
    runs = pd.DataFrame({"N": [1e8, 1e8, 1e8, 1e8, 3e8], "D": [2e9, 2e9, 2e9, 6e9, 2e9],
                         "lr": [1e-4, 3e-4, 1e-3, 1e-3, 1e-3],
                         "loss": [3.912, 3.655, 3.598, 3.301, 3.402]})
    rows = grid.index_of(runs)
    X = grid.encode()
    far = np.flatnonzero(grid.configs["N"].to_numpy() == 1e9)
    plain = campaign_gp(grid, 0).fit(X[rows], runs["loss"].to_numpy())
    assert np.ptp(plain.predict(X[far])[0]) < 1e-3  # the complaint: one value for all
    model = campaign_gp(grid, 0, kernel="transfer", trend=True)
    mean = model.fit(X[rows], runs["loss"].to_numpy()).predict(X[far])[0]
    table = grid.configs.iloc[far].assign(mean=mean).pivot(index="D", columns="lr",
                                                           values="mean")
    assert np.all(np.diff(table.to_numpy(), axis=0) < 0)  # more tokens, lower loss
    best = table[[3e-4, 1e-3]].min(axis=1)  # the runs' best lrs stay best, 1e-4 the worst
    assert np.all(table[1e-4] > best + 0.05) and np.all(table[3e-3] > best)


def test_the_campaign_gp_sees_the_moving_optimum_unless_told_not_to(grid):
    """0.3.7: campaigns use the replayed default's GP, on hyperparameters relative to an
    optimum fitted to move with N and D; ``--no-shift-optimum`` (suggest, status, replay)
    gives the GP on absolute coordinates, and a replay method without it says so."""
    from scalebo.bench.method import MethodConfig
    from scalebo.cli.main import build_parser
    from scalebo.search.campaign import campaign_gp
    from scalebo.search.optimum_shift import OptimumShiftSurrogate

    assert isinstance(campaign_gp(grid).inner, OptimumShiftSurrogate)
    assert not isinstance(campaign_gp(grid, shift_optimum=False).inner, OptimumShiftSurrogate)
    parser = build_parser()
    for command in ("suggest", "status"):
        base = [command, "--grid", "g.yaml", "--runs", "r.csv", "--budget", "1e20"]
        assert parser.parse_args(base).shift_optimum is True
        assert parser.parse_args([*base, "--no-shift-optimum"]).shift_optimum is False
    assert parser.parse_args(["replay", "--dataset", "x.csv"]).shift_optimum is None
    assert parser.parse_args(["replay", "--dataset", "x.csv",
                              "--no-shift-optimum"]).shift_optimum is False
    assert MethodConfig().shift_optimum and "no-shift" not in MethodConfig().label()
    assert MethodConfig(shift_optimum=False).label().endswith(" no-shift")


def test_a_campaign_runs_the_gp_a_replay_of_the_default_measures(tmp_path):
    """One builder (``gp_stack``) for both: fitted on the same runs, the campaign's GP and
    the default replay method's GP predict the same means and SDs everywhere (and not those
    of the GP on absolute coordinates, on runs whose best lr falls with N); a campaign's
    ``clip_iqr=0`` turns clipping off, where ``MethodConfig(clip_iqr=0)`` clips at the median."""
    from types import SimpleNamespace

    from scalebo.bench.budget_measure import method_surrogate
    from scalebo.bench.method import MethodConfig
    from scalebo.search.campaign import campaign_gp
    from scalebo.search.models.clipping import ClippedGP

    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 3e8, 1e9]\n  D: [2e9, 6e9, 2e10]\n"
                    "  lr: [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]\n")
    grid = campaign_grid(path)
    cfg = grid.configs
    best_lr = 3e-3 * (cfg["N"] / 1e8) ** -0.5
    loss = (2.0 + 300 * (6 * cfg["N"] * cfg["D"]) ** -0.12
            + 0.1 * np.log(cfg["lr"] / best_lr) ** 2).to_numpy()
    rows = np.arange(0, len(cfg), 2)
    y = loss[rows].copy()
    y[0] += 5.0  # one diverged run: clipping changes the fit
    X = grid.encode()
    problem = SimpleNamespace(grid=grid)
    mu_r, sd_r = method_surrogate(MethodConfig(), problem, 3, fantasy=False).fit(
        X[rows], y).predict(X)
    mu_c, sd_c = campaign_gp(grid, 3).fit(X[rows], y).predict(X)
    np.testing.assert_allclose(mu_c, mu_r, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sd_c, sd_r, rtol=0, atol=1e-10)
    mu_a, _ = campaign_gp(grid, 3, shift_optimum=False).fit(X[rows], y).predict(X)
    assert np.abs(mu_a - mu_r).max() > 1e-3
    assert not isinstance(campaign_gp(grid, 3, clip_iqr=0), ClippedGP)
    at_median = method_surrogate(MethodConfig(clip_iqr=0), problem, 3, fantasy=False)
    assert isinstance(at_median, ClippedGP) and at_median.k == 0


def test_sentinel_losses_of_diverged_runs_get_a_note_and_a_too_low_threshold_too(grid):
    """A trial's campaign told diverged runs as completed with loss 10: the law went 21 %
    off with no word about those rows. Now they are named; with --diverged-above they are
    failed runs; and a threshold that fails a quarter of the runs, cell minima among them,
    is said to be too low."""
    rows = list(range(12))
    frame = _frame(grid, rows)
    frame["loss"] = 2.5 + 0.05 * np.arange(12)  # ordinary losses, cell bests ~2.5-3
    frame.loc[[3, 7], "loss"] = 10.0  # data rows 4 and 8
    (note,) = [n for n in read_campaign_runs(frame, grid).notes if "cell's best" in n]
    assert "data rows 4 and 8: completed with a loss over 2x its cell's best" in note
    assert "--diverged-above LOSS" in note
    marked = read_campaign_runs(frame, grid, diverged_above=8.0)
    assert not [n for n in marked.notes if "cell's best" in n or "too low" in n]
    assert marked.failed.size == 2 and marked.completed.size == 10
    # one under the threshold (7.5, 2.5x its cell's best) was let through without a word
    # and took the law posterior's median 55 % off (a new-user trial)
    under = frame.assign(loss=frame["loss"].where(frame.index != 7, 7.5))
    (note,) = [n for n in read_campaign_runs(under, grid, diverged_above=8.0).notes
               if "cell's best" in n]
    assert "data row 8: completed with a loss over 2x its cell's best" in note
    assert "they are below --diverged-above 8: a lower one counts them" in note
    low = read_campaign_runs(frame, grid, diverged_above=2.7)
    (note,) = [n for n in low.notes if "too low" in n]
    ordinary = int(((frame["loss"] >= 2.7) & (frame["loss"] < 8)).sum())  # the 10s are not
    assert f"counts {ordinary} runs as failed whose loss is within 2x" in note
    # a right threshold on an early campaign (one diverged run of four) is not too low
    early = frame.iloc[[0, 1, 3, 4]]
    assert not [n for n in read_campaign_runs(early, grid, diverged_above=8.0).notes
                if "too low" in n]
    clean = read_campaign_runs(_frame(grid, rows), grid)
    assert not [n for n in clean.notes if "cell's best" in n]
    # a lone run in a cell of its own (a trial: 10 nats among 2-4 moved the law by half):
    # over 3x the best of the runs that cost no more
    lone = _frame(grid, [*rows, 17])  # the costliest cell's one run: data row 13
    assert len(lone[["N", "D"]].drop_duplicates()) == 7 and lone.loc[12, "N"] == 1e9
    lone.loc[12, "loss"] = 20.0  # the others: 5.4-7.5 nats
    (note,) = [n for n in read_campaign_runs(lone, grid).notes if "cell's best" in n]
    assert ("data row 13: completed with a loss over 2x its cell's best, or 3x a run's that "
            "cost no more, or 3x the median cell best when every run that cost no more is") in note
    # a small model's badly tuned run (1.5x its cell's best, 2.4x the large models') is no
    # diverged run
    small = frame.assign(loss=np.where(frame["N"] == frame["N"].min(), 5.0, 2.4))
    small.loc[0, "loss"] = 7.5
    assert not [n for n in read_campaign_runs(small, grid).notes if "cell's best" in n]
    # nor its good runs when only one small cell and larger ones are trained (a review)
    one = frame.assign(loss=np.where(frame.index < 2, 5.3, 2.45))
    one = one[(one.index < 2) | (frame["N"] > frame["N"].min())]
    assert not [n for n in read_campaign_runs(one, grid).notes if "cell's best" in n]


def test_a_finished_run_appended_beside_its_running_row_says_to_update_it(grid):
    frame = _frame(grid, [0, 1, 2])
    running = frame.iloc[[1]].assign(loss=np.nan, status="running")
    both = pd.concat([frame.iloc[[0]], running, frame.iloc[[1, 2]]], ignore_index=True)
    with pytest.raises(SearchError, match="data row 3 reports .* finished, and data row 2 "
                       "still lists it as running: update that row"):
        read_campaign_runs(both.assign(status=both.get("status", "completed")
                                       .fillna("completed")), grid)


def test_a_cost_far_above_the_plan_and_an_unread_c_column_are_said(grid):
    """A trial: one run's cost written as 1e21 FLOPs (its 6·N·D is 3e17-ish) made the status
    say "the budget is spent: -8.0e+20 FLOPs left", and a C column off 6·N·D was ignored
    without a word."""
    from scalebo.search.stopping import stop_decision

    frame = _frame(grid, list(range(6)))
    planned = float(grid.cost[2])
    frame["cost"] = np.nan
    frame.loc[2, "cost"] = 1e21  # data row 3
    (note,) = [n for n in read_campaign_runs(frame, grid).notes if "planned" in n]
    assert note.endswith(f"data row 3: its cost 1e+21 FLOPs is {1e21 / planned:.3g}x its "
                         f"configuration's planned {planned:.4g}: a typo? It is charged as "
                         "written")
    assert not [n for n in read_campaign_runs(frame.assign(cost=grid.cost[:6] * 2), grid).notes
                if "planned" in n]  # twice the plan is a real run's overhead, not a typo
    with_c = _frame(grid, list(range(6))).assign(C=grid.cost[:6])
    with_c.loc[4, "C"] = 3 * grid.cost[4]  # data row 5
    (note,) = [n for n in read_campaign_runs(with_c, grid).notes if "column 'C'" in n]
    assert "data row 5" in note and "1 row(s) differ by over 1 %" in note
    assert not [n for n in read_campaign_runs(with_c.assign(C=grid.cost[:6]), grid).notes
                if "column 'C'" in n]
    stop, why = stop_decision({1e25: 0.1}, remaining=-8e20, cheapest_left=6e17)
    assert stop and "over it by 8e+20 FLOPs" in why
    # a trial read a STOP on budget as a sure law: the reason says the interval is not
    assert why.endswith("; the interval is wider than the tolerance: ±10 % at 1e+25 "
                        "FLOPs against ±0.5 %")
    stop, why = stop_decision({1e25: 0.004, 1e27: None}, remaining=0, cheapest_left=6e17)
    assert stop and why.endswith("not surely within the tolerance: none at 1e+27 FLOPs "
                                 "against ±0.5 %")
    assert "tolerance" not in stop_decision({1e25: 0.004}, remaining=0, cheapest_left=1.0)[1]
    unsure = stop_decision({1e25: 0.004}, remaining=0, cheapest_left=1.0, uppers={1e25: 0.006})
    assert unsure[1].endswith("not surely within the tolerance: ±0.4 % at 1e+25 FLOPs against "
                              "±0.5 %")  # within it, but its resampled width is not


def test_a_setting_that_only_ever_failed_is_named_when_suggested_again(tmp_path):
    """A trial's lr 0.016 crashed in 4 of 4 cells and was proposed again in 4 of the next 8
    picks with no word: failures teach the GP nothing. One failure, or a completed run at
    the setting, is not enough to say so."""
    from scalebo.search.failing_values import failing_values_notes

    path = tmp_path / "grid.yaml"
    path.write_text("axes:\n  N: [1e8, 3e8, 1e9]\n  D: [2e9, 6e9, 2e10]\n"
                    "  lr: [1e-3, 3e-3, 1.6e-2]\n")
    g = campaign_grid(path)
    lr = g.configs["lr"].to_numpy()
    bad = np.flatnonzero(lr == 1.6e-2)
    good = np.flatnonzero(lr == 1e-3)
    (note,) = failing_values_notes(g, bad[:3], good[:2], [bad[5], good[4]])
    assert note.startswith("lr=0.016 is suggested although all 3 runs that tried it failed")
    assert "drop it from the grid" in note
    assert failing_values_notes(g, bad[:1], good[:2], [bad[5]]) == ()  # one failure
    assert failing_values_notes(g, bad[:3], [*good[:2], bad[3]], [bad[5]]) == ()  # one ran
    assert failing_values_notes(g, bad[:3], good[:2], [good[4]]) == ()  # not suggested
    # two axes: failures that all share bs=2097152 too name both; spread over batch sizes,
    # only the learning rate (and a value %g would round is written in full)
    path.write_text("axes:\n  N: [1e8, 3e8]\n  D: [2e9, 6e9]\n  lr: [1e-3, 1.6e-2]\n"
                    "  bs: [1048576, 2097152]\n")
    g2 = campaign_grid(path)
    lr2, bs2 = g2.configs["lr"].to_numpy(), g2.configs["bs"].to_numpy()
    same = np.flatnonzero((lr2 == 1.6e-2) & (bs2 == 2097152))
    ok = np.flatnonzero(lr2 == 1e-3)
    (both,) = failing_values_notes(g2, same[:2], ok, [same[3]])
    assert both.startswith("lr=0.016, bs=2097152 is suggested although all 2 runs")
    spread = np.flatnonzero(lr2 == 1.6e-2)[:3]  # both batch sizes
    (one,) = failing_values_notes(g2, spread, ok, [same[3]])
    assert one.startswith("lr=0.016 is suggested although all 3 runs")
    # failures all at bs=2097152, the pick at the other batch size: only lr is named (a
    # review: the note named the failures' combination, which was not suggested)
    other = np.flatnonzero((lr2 == 1.6e-2) & (bs2 == 1048576))
    (pick,) = failing_values_notes(g2, same[:2], ok, [other[0]])
    assert pick.startswith("lr=0.016 is suggested although all 2 runs")
    # an axis of one value has nothing to drop
    path.write_text("axes:\n  N: [1e8, 3e8]\n  D: [2e9, 6e9]\n  lr: [1e-3]\n")
    g3 = campaign_grid(path)
    assert failing_values_notes(g3, [0, 1], [], [2]) == ()
    # through suggest_runs: runs whose every lr-0.016 attempt crashed
    cheap = np.argsort(g.cost, kind="stable")
    rows = [int(i) for i in cheap if lr[i] != 1.6e-2][:5] + [int(i) for i in bad[:3]]
    frame = _frame(g, rows)
    frame.loc[5:, "loss"] = np.nan
    res = suggest_runs(g, read_campaign_runs(frame, g), 0.5 * float(g.cost.sum()), batch=12)
    picked = {float(lr[s.index]) for s in res.suggestions}
    assert (1.6e-2 in picked) == any(n.startswith("lr=0.016 is suggested") for n in res.notes)
    assert 1.6e-2 in picked  # the case the note is for


def test_a_setting_the_grid_has_no_axis_for_is_said(grid):
    """A trial: a runs file's 'bs' column (256 / 512) that the grid does not have was
    ignored without a word. A measured column (a wall time, one value per run) is not a
    setting and stays quiet, as does a column fixed per cell."""
    frame = _frame(grid, list(range(8)))
    assert not [n for n in read_campaign_runs(frame, grid).notes if "vary inside" in n]
    timed = frame.assign(seconds=100.0 * np.arange(1, 9) ** 1.3, width=frame["N"] / 1e5)
    assert not [n for n in read_campaign_runs(timed, grid).notes if "vary inside" in n]
    # a review: a failed attempt beside its retry made a wall time vary like a setting
    retried = pd.concat([timed.iloc[[0]].assign(loss=np.nan, status="failed", seconds=3.0),
                         timed.assign(status="completed")]).reset_index(drop=True)
    assert not [n for n in read_campaign_runs(retried, grid).notes if "vary inside" in n]
    (note,) = [n for n in read_campaign_runs(frame.assign(bs=[256, 512] * 4), grid).notes
               if "vary inside" in n]
    assert note == ("<DataFrame>: column(s) 'bs' vary inside (N, D) cells like settings, but "
                    "the grid has no axis for them: runs that differ only there are one "
                    "configuration to the campaign, and the search does not choose them (add "
                    "an axis to the grid to search them)")


def test_an_anchor_among_the_suggestions_is_not_said_to_be_held_back(tmp_path):
    """A trial: on a 2 × 2 grid the initial design proposed the anchor cell's run while the
    same call said its cost was "held back ... proposed once nothing else fits"."""
    path = tmp_path / "g4.yaml"
    path.write_text("axes:\n  N: [5.0e7, 1.6e9]\n  D: [1e9, 3e10]\n  lr: 1e-3\n")
    grid = campaign_grid(path)
    anchor = (1.6e9, 1e9)  # the costliest cell under 0.7 of the budget
    seen = set()
    for seed in range(6):
        res = suggest_runs(grid, CampaignRuns(), 0.1 * grid.C_total, seed=seed)
        first = tuple(grid.configs.iloc[res.suggestions[0].index][["N", "D"]])
        seen.add(first == anchor)
        if first == anchor:
            assert res.held_back == 0 and res.anchor_cell is None
        else:
            assert res.held_back == pytest.approx(9.6e18) and res.anchor_cell == anchor
    assert seen == {True, False}  # both cases met


def test_a_loss_typed_a_digit_short_is_named_and_not_a_yardstick(grid):
    """A trial: losses 4.0, 0.4 (a typo) and 39.0 in the cheapest cell: the note blamed 4.0
    and 39.0 as over 2x the cell's best (0.4) and never named the typo. Beside two costlier
    cells (3.5, 3.4) the typo is named and the diverged check judges the others against
    4.0. Reviews: a sweep whose other rates diverged (3.0 beside 7.0, 7.1) is not a typo,
    nor are runs whose only costlier cell diverged."""
    from scalebo.search.runs_columns import suspect_low

    grid = campaign_grid_with_lrs(grid, (1e-3, 2e-3, 3e-3))
    cheap = grid.configs.iloc[[0, 1, 2]][["N", "D", "lr"]]  # (1e8, 2e9) at three rates
    costly = grid.configs.iloc[[3, 6]][["N", "D", "lr"]]  # (1e8, 6e9), (1e8, 2e10)
    frame = pd.concat([cheap, costly]).reset_index(drop=True)
    notes = read_campaign_runs(frame.assign(loss=[4.0, 0.4, 39.0, 3.5, 3.4]), grid).notes
    assert ("<DataFrame>: data row 2: completed with a loss under half the best loss of the "
            "other cells costing as much or more (at least two; down to 0.4 nats): a typo"
            ) in " ".join(notes)
    (diverged,) = [n for n in notes if "over 2x its cell's best" in n]
    assert diverged.startswith("<DataFrame>: data row 3: completed")
    swept = read_campaign_runs(frame.assign(loss=[3.0, 7.0, 7.1, 2.9, 2.8]), grid).notes
    assert not [n for n in swept if "typo" in n]
    (diverged,) = [n for n in swept if "over 2x its cell's best" in n]
    assert diverged.startswith("<DataFrame>: data rows 2 and 3: completed")
    one_cell = suspect_low(np.array([4.0, 0.4, 39.0]), np.zeros(3), np.ones(3))
    only_costlier_diverged = suspect_low(np.array([4, 4.1, 4.3, 3.6, 3.7, 3.9, 39.0]),
                                         np.array([0, 0, 0, 1, 1, 1, 2]),
                                         np.array([1, 1, 1, 2, 2, 2, 4.0]))
    assert not one_cell.any() and not only_costlier_diverged.any()


def campaign_grid_with_lrs(grid, lrs):
    """The fixture's N and D with three learning rates (a cell of three runs)."""
    from scalebo.search.grid import Grid

    N, D = sorted(set(grid.configs["N"])), sorted(set(grid.configs["D"]))
    return Grid.from_frame(pd.DataFrame([(n, d, lr) for n in N for d in D for lr in lrs],
                                        columns=["N", "D", "lr"]), n_held_out_cells=0)
