"""Diverged runs in a replay (``diverged_above``): bought as failed runs (compute spent, no
loss told), never filled in, left out of the reference, recorded budgets still equal separate
replays; and the note for a grid whose sentinel losses nobody marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.diverged import diverged_note
from scalebo.bench.intervals import without_wall_times
from scalebo.bench.problems import load_problem, problem_from_table
from scalebo.bench.replay import MethodConfig, replay, search_state
from scalebo.laws import CHINCHILLA
from scalebo.search.campaign import campaign_gp
from scalebo.search.fantasize import fantasize
from scalebo.search.law_posterior import law_posterior

SENTINEL = 10.0


def _frame(seed: int = 0) -> pd.DataFrame:
    """4 N × 4 D × 6 learning rates; the two highest learning rates diverge (loss 10) in
    every other cell."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, N in enumerate(np.geomspace(5e7, 4e8, 4)):
        for j, D in enumerate(np.geomspace(1e9, 8e9, 4)):
            for k, lr in enumerate(np.geomspace(2.5e-4, 8e-3, 6)):
                loss = (1.8 + 480 / N**0.34 + 2100 / D**0.36
                        + 0.03 * np.log2(lr / 1e-3) ** 2 + rng.normal(0, 0.003))
                if k >= 4 and (i + j) % 2 == 0:
                    loss = SENTINEL
                rows.append({"N": N, "D": D, "lr": lr, "loss": loss})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def problems():
    frame = _frame()
    starts = CHINCHILLA.start_grid()[::30]
    plain = problem_from_table(frame, name="plain", chinchilla_starts=starts)
    with pytest.warns(UserWarning, match="16 of 96 configurations have a recorded loss at or "
                                         "above"):
        marked = problem_from_table(frame, name="marked", chinchilla_starts=starts,
                                    diverged_above=5.0)
    return plain, marked


FAST = MethodConfig(strategy="window", schedule="spent", refit_every=5, posterior_samples=8)


def test_diverged_configurations_are_marked_and_left_out_of_the_reference(problems):
    plain, marked = problems
    assert marked.diverged.sum() == 16 and plain.diverged is None
    assert not marked.diverged[marked.envelope_idx].any()
    assert not marked.diverged[marked.cell_best_idx].any()
    assert marked.C_total == plain.C_total  # the diverged runs were trained: they cost
    acquirable = marked.diverged & ~marked.grid.held_out
    assert marked.summary()["n_diverged_configs"] == acquirable.sum() < 16  # some held out
    with pytest.raises(ValueError, match="finite loss"):
        problem_from_table(_frame(), name="x", diverged_above=float("nan"))


def test_a_replay_spends_on_diverged_runs_and_never_tells_their_loss(problems):
    _, marked = problems
    rec = replay(marked, FAST, 0.4, seed=1)
    loop = search_state(marked, FAST, 0.4, seed=1)
    failed = loop.failed_indices
    assert failed.size and marked.diverged[failed].all()
    assert not marked.diverged[loop.observed_indices].any()
    assert (loop.observed_losses < SENTINEL).all()
    m = rec.at(0.4)
    cost = marked.grid.cost
    assert m.n_failed == failed.size and m.n_runs == loop.observed_indices.size
    assert m.spent_fraction == pytest.approx(
        (cost[loop.observed_indices].sum() + cost[failed].sum()) / marked.C_total)
    assert m.spent_fraction <= 0.4 + 1e-12


@pytest.mark.parametrize("settings", [{}, {"anchor": 0.0, "polish": 0.0}])
def test_recorded_budgets_equal_separate_replays_with_diverged_runs(problems, settings):
    """Both recording paths: budget forks (an anchor or polish) and one long replay."""
    _, marked = problems
    method = FAST.with_(**settings)
    both = replay(marked, method, 0.4, seed=3, record_budgets=(0.1,))
    alone = replay(marked, method, 0.1, seed=3)
    assert (without_wall_times(both.at(0.1).to_dict())
            == without_wall_times(alone.at(0.1).to_dict()))
    assert both.at(0.4).n_failed > 0


def test_a_diverged_seed_leaves_the_mean_and_a_crashed_configuration_is_a_failed_one(tmp_path):
    """Repeats: a configuration with runs at 3.0 and 10 (diverged) has the oracle loss 3.0,
    not 6.5; one whose every run diverged is a diverged configuration; a file's NaN-only
    configuration (a crash) is kept as a failed configuration at its cost."""
    frame = _frame().query("loss < 5")
    rows = frame.iloc[[0, 1]]
    extra = pd.concat([rows.iloc[[0]].assign(loss=SENTINEL),  # a second seed, diverged
                       rows.iloc[[1]].assign(loss=SENTINEL)])  # its only other run diverged
    both = pd.concat([frame.drop(index=rows.index[1]), extra], ignore_index=True)
    with pytest.warns(UserWarning):
        p = problem_from_table(both, name="r", diverged_above=5.0,
                               chinchilla_starts=CHINCHILLA.start_grid()[::30])
    cfg = p.grid.configs
    first = (cfg["N"] == rows.iloc[0]["N"]) & (cfg["D"] == rows.iloc[0]["D"]) & (
        cfg["lr"] == rows.iloc[0]["lr"])
    second = (cfg["N"] == rows.iloc[1]["N"]) & (cfg["D"] == rows.iloc[1]["D"]) & (
        cfg["lr"] == rows.iloc[1]["lr"])
    assert p.loss[first.to_numpy()][0] == pytest.approx(rows.iloc[0]["loss"])
    assert p.diverged[second.to_numpy()][0] and not p.diverged[first.to_numpy()][0]
    path = tmp_path / "crash.csv"
    crashed = frame.copy()
    crashed.loc[crashed.index[3], "loss"] = np.nan
    crashed.to_csv(path, index=False)
    with pytest.warns(UserWarning, match="1 crashed"):
        q = load_problem(path, diverged_above=5.0)
    assert q.grid.n_configs == len(frame) and q.diverged.sum() == 1
    assert np.isinf(q.loss[q.diverged]).all()
    assert (q.n_repeats == 1).all()
    # without diverged_above too (a trial: the crashed configuration left the grid and its
    # compute, so no replay could ever buy a crash)
    with pytest.warns(UserWarning, match="1 of 80 configurations have no finite loss"):
        r = load_problem(path)
    assert r.grid.n_configs == len(frame) and r.diverged.sum() == 1
    assert r.grid.cost.sum() == pytest.approx(q.grid.cost.sum())
    assert np.isinf(r.loss[r.diverged]).all() and np.isfinite(r.loss[~r.diverged]).all()


def test_the_fill_in_and_the_law_posterior_never_fill_a_failed_run(problems):
    _, marked = problems
    grid = marked.grid
    ok = np.flatnonzero(~grid.held_out & ~marked.diverged)
    tried = ok[::3]
    failed = np.flatnonzero(marked.diverged & ~grid.held_out)
    gp = campaign_gp(grid, 0)
    table = fantasize(grid, tried, marked.loss[tried], gp, scope="grid", failed=failed,
                      max_std_ratio=None)
    assert not set(table["grid_index"]) & set(failed)
    untouched = fantasize(grid, tried, marked.loss[tried], campaign_gp(grid, 0),
                          scope="grid", max_std_ratio=None)
    assert set(failed) <= set(untouched["grid_index"])  # without it they are filled in
    post = law_posterior(grid, tried, marked.loss[tried], campaign_gp(grid, 0),
                         laws=("compute",), n_samples=4, failed=failed, keep_samples=True)
    assert not set(post["compute"].samples.rows) & set(failed)
    # a failed run retried and told keeps its row
    retried = np.concatenate([tried, failed[:1]])
    losses = np.concatenate([marked.loss[tried], [3.0]])
    table = fantasize(grid, retried, losses, campaign_gp(grid, 0), scope="grid",
                      failed=failed)
    assert failed[0] in set(table["grid_index"])


def test_a_file_with_sentinel_losses_gets_a_note_and_a_clean_one_none(tmp_path, problems):
    plain, marked = problems
    assert "16 configurations have a recorded loss over 2x its cell's best" in (
        diverged_note(plain) or "")
    assert diverged_note(marked) is None  # marked: nothing to say
    path = tmp_path / "grid.csv"
    _frame().to_csv(path, index=False)
    with pytest.warns(UserWarning, match="--diverged-above LOSS"):
        noted = load_problem(path)
    assert any("diverged" in n for n in noted.notes)
    clean = tmp_path / "clean.csv"
    _frame().query("loss < 5").to_csv(clean, index=False)
    assert diverged_note(load_problem(clean)) is None


def test_cli_replay_marks_diverged_runs_and_says_what_it_inferred_under_quiet(tmp_path,
                                                                               capsys):
    from scalebo.cli.main import main

    path = tmp_path / "grid.csv"
    _frame().to_csv(path, index=False)
    args = ["replay", "--dataset", str(path), "--budget", "0.4", "--seed", "1",
            "--posterior-samples", "0", "--bootstrap-samples", "0", "-q"]
    assert main([*args, "--diverged-above", "5"]) == 0
    out, err = capsys.readouterr()
    assert "16 of 96 configurations have a recorded loss at or above diverged_above=5" in err
    assert "hyperparameter axes: lr" in err and "held out of the search" in err  # even -q
    assert "runs failed (crashed, or diverged under --diverged-above): compute spent" in out
    assert main(args) == 0
    assert "--diverged-above LOSS" in capsys.readouterr().err


def test_the_target_acquisitions_ensemble_never_draws_a_failed_run(problems):
    from scalebo.search import target as tgt
    from scalebo.search.models.scaling import standardization

    _, marked = problems
    grid = marked.grid
    ok = np.flatnonzero(~grid.held_out & ~marked.diverged)
    tried = ok[::5]
    y = marked.loss[tried]
    mu, sd = standardization(y)
    model = campaign_gp(grid, 0)
    model.fit(grid.encode()[tried], (y - mu) / sd)
    known = np.isin(np.arange(grid.n_configs), tried)
    failed = marked.diverged & ~grid.held_out
    args = (tgt.TargetSettings(samples=32), grid, np.inf, known, model,
            dict(zip(tried.tolist(), y.tolist(), strict=True)), {}, mu, sd)
    ens, why = tgt.refresh_ensemble(None, *args, np.random.default_rng(0), failed)
    assert ens is not None, why
    assert not failed[ens.rows].any() and known[ens.rows].sum() == tried.size
    ens_all, _ = tgt.refresh_ensemble(None, *args, np.random.default_rng(0))
    assert failed[ens_all.rows].sum() == failed.sum()  # without it they are drawn


def test_a_run_recorded_as_failed_is_a_failed_configuration_too(tmp_path):
    """A campaign's own runs file marks a crash with status 'failed' (a review): with
    diverged_above its configuration stays in the grid as a failed one, as a NaN loss does."""
    frame = _frame().query("loss < 5").assign(status="completed")
    frame.loc[frame.index[3], "status"] = "failed"
    path = tmp_path / "status.csv"
    frame.to_csv(path, index=False)
    with pytest.warns(UserWarning):
        p = load_problem(path, diverged_above=5.0, axes=["lr"])
    assert p.grid.n_configs == len(frame) and p.diverged.sum() == 1


def test_a_held_out_cell_whose_every_run_crashed_is_said(tmp_path):
    """The held-out cells are the costliest, usable or not: one whose every run crashed
    leaves the held-out MSE to the other, and a note says so (a review)."""
    frame = _frame().query("loss < 5")
    top = frame["N"].max() * frame["D"].max()
    frame.loc[frame["N"] * frame["D"] == top, "loss"] = np.nan
    path = tmp_path / "top.csv"
    frame.to_csv(path, index=False)
    with pytest.warns(UserWarning):
        p = load_problem(path, diverged_above=5.0)
    assert len(p.held_out_cells) == 1
    assert any("has no usable run" in n and "scores the 1 other(s)" in n for n in p.notes)


def test_a_crash_neither_hides_the_sentinel_note_nor_shifts_row_numbers(tmp_path):
    """A review: one NaN row made every configuration 'marked' (no --diverged-above hint),
    renumbered the rows after it (a typo note named data row 40 for 41), and a RunTable
    given to problem_from_table dropped the crash that load_problem kept."""
    from scalebo.data.runs import load_runs

    frame = _frame()
    frame.loc[3, "loss"] = np.nan  # data row 4, a crash (not a sentinel cell)
    frame.loc[40, "lr"] = frame.loc[40, "lr"] * 1.01  # data row 41, a typo'd learning rate
    path = tmp_path / "grid.csv"
    frame.to_csv(path, index=False)
    with pytest.warns(UserWarning) as caught:
        problem = load_problem(path, axes=["lr"])
    said = [str(w.message) for w in caught]
    assert any("--diverged-above LOSS" in m for m in said)  # the sentinels, still named
    assert any("(data row 41) is 1 % from" in m for m in said), said
    assert problem.diverged.sum() == 1 and problem.grid.n_configs == len(frame)
    with pytest.warns(UserWarning):
        table = load_runs(path, hyperparameters=["lr"])
        direct = problem_from_table(table, name="x",
                                    chinchilla_starts=CHINCHILLA.start_grid()[::30])
    assert direct.grid.n_configs == len(frame) and direct.diverged.sum() == 1


def test_a_sentinel_loss_written_at_the_threshold_counts_as_diverged():
    """A trial: --diverged-above 9 on runs recorded at a sentinel of 9.0 kept all 13 as
    losses (the rule was 'above'); fit, replay and a campaign now count a loss at it."""
    import pandas as pd

    from scalebo.bench.diverged import diverged_rows
    from scalebo.data.runs import load_runs
    from scalebo.search.campaign_runs import read_campaign_runs
    from scalebo.search.grid import Grid

    mask, note = diverged_rows(np.array([3.1, 9.0, 8.99, np.nan]), 9.0, "g.csv")
    assert mask.tolist() == [False, True, False, True]
    assert "2 of 4 configurations have a recorded loss at or above diverged_above=9" in note
    runs = pd.DataFrame({"N": [1e8, 1e8, 2e8], "D": [1e9, 2e9, 1e9], "loss": [3.1, 9.0, 3.0]})
    table = load_runs(runs, diverged_above=9.0)
    assert len(table.frame) == 2 and len(table.excluded) == 1
    grid = Grid.from_axes({"N": [1e8, 2e8], "D": [1e9, 2e9]}, n_held_out_cells=0)
    assert read_campaign_runs(runs, grid, diverged_above=9.0).failed.size == 1


def test_a_replay_threshold_among_good_losses_is_called_too_low():
    """A trial: --diverged-above 3 marked 76 % of ordinary runs in a replay with no word
    (suggest and status said 'too low?'); the right threshold stays quiet."""
    import warnings

    frame, starts = _frame(), CHINCHILLA.start_grid()[::30]
    good = frame.loss[frame.loss < SENTINEL]
    low = float(good.quantile(0.6))  # marks 40 % of the good losses
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        problem_from_table(frame, name="low", chinchilla_starts=starts, diverged_above=low)
        problem_from_table(frame, name="right", chinchilla_starts=starts, diverged_above=5.0)
    text = [str(w.message) for w in said]
    usable = frame[frame.loss < SENTINEL]  # by hand: each cell's best kept loss, 2x of it
    best = usable[usable.loss < low].groupby(["N", "D"]).loss.min()
    ref = usable.set_index(["N", "D"]).index.map(best).to_numpy(dtype=float)
    ref = np.where(np.isnan(ref), best.median(), ref)
    ordinary = int(((usable.loss >= low) & (usable.loss <= 2 * ref)).sum())
    assert any(t.startswith(f"low: diverged_above={low:g} (--diverged-above) counts "
                            f"{ordinary} configurations as diverged whose loss is within 2x")
               for t in text), text
    assert not any(t.startswith("right:") and "too low" in t for t in text)


def test_a_repeat_at_the_threshold_leaves_its_configurations_mean():
    """keep_usable_runs drops a configuration's runs at or above diverged_above when another
    run of it is usable (a sentinel written at the threshold is a diverged repeat)."""
    from scalebo.bench.diverged import keep_usable_runs

    runs = pd.DataFrame({"N": [1.0, 1.0, 2.0, 2.0], "loss": [3.0, 9.0, 9.0, 9.0]})
    kept = keep_usable_runs(runs, ["N"], 9.0)
    assert kept["loss"].tolist() == [3.0, 9.0, 9.0]  # N=2: every run diverged, kept (marked)
