"""Replay problems from run-table files: loading warnings are kept in notes, shown once."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.problems import load_problem
from scalebo.bench.synthetic import make_synthetic
from scalebo.errors import EXCLUDED_IN_PYTHON, ExcludedRunsWarning

AXES = ["lr", "bs"]


def grid_file(directory: Path, *, nan_row: int = 4, repeat_row: int | None = 7) -> Path:
    """A 54-run synthetic grid with a NaN loss at ``nan_row`` (0-based) and, unless None, a
    second run of the configuration of ``repeat_row`` appended (loss + 0.01 nats)."""
    axes = {"N": 5e7 * 2.0 ** np.arange(3), "D": 1e9 * 2.0 ** np.arange(3),
            "lr": 2.5e-4 * 2.0 ** np.arange(3), "bs": np.array([128.0, 256.0])}
    frame = make_synthetic(seed=1, **axes).drop(columns=["loss_noise_free", "is_optimum"])
    frame.loc[nan_row, "loss"] = float("nan")
    if repeat_row is not None:
        again = frame.loc[[repeat_row]].assign(run_id="again", loss=frame.loss[repeat_row] + 0.01)
        frame = pd.concat([frame, again], ignore_index=True)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "runs.csv"
    frame.to_csv(path, index=False)
    return path


def test_loading_warnings_become_notes_and_are_shown_once(tmp_path):
    path = grid_file(tmp_path)
    with pytest.warns(UserWarning) as caught:
        problem = load_problem(path, axes=AXES, duplicates="mean")
    excluded = f"{path}: excluded 1 of 55 runs: 1 non-finite loss (data row 5)"
    messages = [str(w.message) for w in caught]
    # Each warning of the load reaches the user once: the excluded run, the averaged repeat.
    assert sum(excluded in m for m in messages) == 1
    assert any(issubclass(w.category, ExcludedRunsWarning) and excluded in str(w.message)
               for w in caught)
    assert sum("averaged the loss of repeated configurations" in m for m in messages) == 1
    # ... and every one of them is in the notes, which records carry.
    # (without the loader's pointer to RunTable.excluded: a record holds no RunTable)
    assert [n for n in problem.notes if excluded in n] == [
        m.replace(EXCLUDED_IN_PYTHON, "") for m in messages if excluded in m]
    assert not any("RunTable" in n for n in problem.notes)
    assert any("averaged the loss of repeated configurations: 54 runs merged into 53 (1 "
               "configuration(s) had repeats" in n for n in problem.notes)
    # said once (load_runs's note), not twice in two wordings
    assert not any("run more than once" in n for n in problem.notes)
    # the crashed run's configuration stays in the grid as a failed one, and says so
    assert any("1 of 54 configurations have no finite loss" in n for n in problem.notes)
    assert len(problem.notes) == len(set(problem.notes)) == 3
    assert problem.summary()["notes"] == list(problem.notes)
    assert problem.n_repeats.max() == 2 and problem.grid.n_configs == 54
    # A cached load shows nothing again but keeps the notes.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_problem(path, axes=AXES, duplicates="mean") is problem


def test_a_repeated_configuration_is_an_error_unless_averaged(tmp_path):
    """As ``scalebo fit``: a file's repeated run is not merged silently into an average
    (a new user's copied row once became a 2-run mean, seen only in a note)."""
    from scalebo.errors import RunTableError

    path = grid_file(tmp_path / "rep", nan_row=20)
    with pytest.raises(RunTableError) as info:
        load_problem(path, axes=AXES)
    # the repeat is the appended 55th data row, a copy of data row 8 (0-based 7)
    assert f"{path}: data rows 8 and 55 repeat the configuration" in str(info.value)
    assert "--duplicates mean" in str(info.value)
    with pytest.warns(UserWarning, match="54 runs merged into 53"):  # + the crashed one
        assert load_problem(path, axes=AXES, duplicates="mean").grid.n_configs == 54


def test_a_typo_in_a_hyperparameter_column_names_file_row_and_column(tmp_path):
    """'3e-4x' among learning rates once turned lr into text: it stopped being an axis and
    the replay merged 3 learning rates per cell into one averaged configuration."""
    from scalebo.errors import RunTableError

    path = grid_file(tmp_path / "typo", nan_row=0, repeat_row=None)
    frame = pd.read_csv(path)
    frame["lr"] = frame["lr"].astype(object)
    frame.loc[3, "lr"] = "3e-4x"
    frame.to_csv(path, index=False)
    with pytest.raises(RunTableError) as info:
        load_problem(path)  # default axes: the rule that used to drop lr
    assert str(info.value).startswith(
        f"{path}: data row 4, column 'lr': expected a number, got '3e-4x'")


def test_notes_do_not_depend_on_the_callers_warning_filters(tmp_path):
    path = grid_file(tmp_path / "quiet", nan_row=20, repeat_row=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user hides warnings: the notes still hold them
        problem = load_problem(path, axes=AXES)
    assert problem.notes == (f"{path}: excluded 1 of 54 runs: 1 non-finite loss (data row 21).",
                             f"{path}: 1 of 54 configurations have no finite loss (every run "
                             "crashed or failed): left out of the law fits like any run "
                             "without a loss, they stay in the grid and its C_total, and a "
                             "replay that buys one spends its compute and learns no loss (a "
                             "failed run)")


def test_a_clean_file_has_no_notes(tmp_path):
    path = grid_file(tmp_path / "clean", nan_row=0, repeat_row=None)
    frame = pd.read_csv(path)
    frame.loc[0, "loss"] = 4.0
    frame.to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_problem(path, axes=AXES).notes == ()


def test_a_grid_too_small_for_a_reference_law_says_why(tmp_path):
    """2 × 2 cells with 2 held out leave 2 envelope points for a 3-parameter compute law: the
    error names the reference fit, the cells held out and the way out (was only "law
    'compute' has 3 parameters but only 2 observations")."""
    from scalebo.errors import FitError

    frame = make_synthetic(seed=3, N=[1e8, 3e8], D=[2e9, 8e9], lr=[5e-4, 1e-3, 2e-3],
                           bs=[256.0])
    path = tmp_path / "tiny.csv"
    frame[["N", "D", "lr", "loss"]].to_csv(path, index=False)
    with pytest.raises(FitError) as info:
        load_problem(path, axes=["lr"], n_held_out_cells=2)
    msg = str(info.value)
    assert "reference compute law" in msg and "2 of 4 (N, D) cells, 2 held out" in msg
    assert "has 2 point(s)" in msg and "--held-out-cells" in msg
    assert "3 parameters but only 2 observations" in msg
    ok = load_problem(path, axes=["lr"], n_held_out_cells=0)
    assert ok.reference_compute.success and ok.envelope_idx.size >= 3


def test_an_unidentified_reference_law_is_said(tmp_path):
    # Two model sizes cannot identify L(N, D) = E + A/N^alpha + B/D^beta: replays still score
    # against the fit, so the problem says what that fit is (it once went unsaid).
    frame = make_synthetic(seed=1, N=[1e8, 4e8], D=1e9 * 2.0 ** np.arange(5),
                           lr=[1e-3, 2e-3], bs=[256.0])
    path = tmp_path / "two_sizes.csv"
    frame[["N", "D", "lr", "loss"]].to_csv(path, index=False)
    with pytest.warns(UserWarning, match="reference chinchilla law is not identified"):
        problem = load_problem(path, axes=["lr"])
    assert str(problem.reference_chinchilla.status) == "unidentified"
    assert str(problem.reference_compute.status) == "converged"
    assert [n for n in problem.notes if "reference" in n] == [
        n for n in problem.notes if n.startswith(f"{path}: the reference chinchilla law is "
                                                 "not identified by the whole grid (unidentif")]
    assert len([n for n in problem.notes if "reference" in n]) == 1


def test_which_of_equally_costly_cells_is_held_out_is_said(tmp_path):
    """N and D double along the grid, so (1e8, 4e9) and (2e8, 2e9) cost the same 6·4e17
    FLOPs; with 2 cells held out, the costliest (2e8, 4e9) and one of that tied pair are held
    out. Which one was not reported anywhere (a new-user trial asked); by the documented order
    (N, then D) it is the larger N."""
    from scalebo.bench.held_out import held_out_tie

    path = grid_file(tmp_path / "tie", nan_row=0, repeat_row=None)
    frame = pd.read_csv(path)
    frame.loc[0, "loss"] = 4.0
    frame.to_csv(path, index=False)
    problem = load_problem(path, axes=AXES)
    held = {(r.N, r.D) for r in problem.held_out_cells.itertuples()}
    assert held == {(2e8, 4e9), (2e8, 2e9)}
    tie = held_out_tie(problem.grid)
    assert tie == ("cells (N=1e+08, D=4e+09), (N=2e+08, D=2e+09) cost the same (2.4e+18 FLOPs); "
                   "of these, (N=2e+08, D=2e+09) held out (the larger N, then D), "
                   "(N=1e+08, D=4e+09) stay in the search")
    summary = problem.summary()
    assert summary["held_out_tie"] == tie
    assert [(c["N"], c["D"]) for c in summary["held_out_cells"]] == [(2e8, 2e9), (2e8, 4e9)]
    # one cell held out: the costliest is unique, no tie to report; none held out: none
    assert held_out_tie(load_problem(path, axes=AXES, n_held_out_cells=1).grid) is None
    assert held_out_tie(load_problem(path, axes=AXES, n_held_out_cells=0).grid) is None
