"""Runs in flight listed in ``--pending PATH``: ``scalebo suggest`` and ``scalebo status``
count their compute as pending and never propose them; errors about the file name it and
its 1-based data rows (they said ``<DataFrame>``, and grid indices, before)."""

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.synthetic import make_synthetic
from scalebo.cli.main import main
from scalebo.errors import SearchError
from scalebo.search.campaign_runs import read_campaign_runs, read_pending_runs
from scalebo.search.grid import Grid

COLS = ["N", "D", "lr"]
GRID_YAML = """\
axes:
  N: [5.0e7, 1.0e8, 2.0e8]
  D: [1.0e9, 3.0e9, 1.0e10]
  lr: [3.0e-4, 1.0e-3, 3.0e-3]
"""


@pytest.fixture()
def campaign(tmp_path, monkeypatch):
    """A grid.yaml and a runs.csv of 8 completed runs in ``tmp_path`` (the working folder,
    so that messages show plain file names); the grid and the runs' frame."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "grid.yaml").write_text(GRID_YAML)
    frame = make_synthetic(N=np.array([5e7, 1e8, 2e8]), D=np.array([1e9, 3e9, 1e10]),
                           lr=np.array([3e-4, 1e-3, 3e-3]), bs=np.array([256.0]), seed=0)
    done = frame.iloc[[0, 1, 2, 3, 4, 9, 10, 18]][[*COLS, "loss"]]
    done.to_csv("runs.csv", index=False)
    return Grid.from_yaml(tmp_path / "grid.yaml"), done


def _status(*extra: str, capsys) -> dict:
    code = main(["-q", "status", "--grid", "grid.yaml", "--runs", "runs.csv", "--budget", "0.5",
                 "--samples", "8", "--format", "json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_status_pending_counts_compute_and_is_not_proposed(campaign, capsys):
    before = _status(capsys=capsys)
    flying = before["next"][0]  # what status would propose: now it is in flight
    with open("pending.csv", "w") as fh:
        fh.write(f"N,D,lr\n{flying['N']},{flying['D']},{flying['lr']}\n")
    after = _status("--pending", "pending.csv", capsys=capsys)
    cost = 6 * flying["N"] * flying["D"]
    assert after["pending"] == pytest.approx(cost) and after["n_running"] == 1
    assert after["spent"] == pytest.approx(before["spent"])
    assert after["remaining"] == pytest.approx(before["remaining"] - cost)
    proposed = [tuple(n[c] for c in COLS) for n in after["next"]]
    assert len(proposed) == 4 and tuple(flying[c] for c in COLS) not in proposed
    # suggest reads the same file the same way
    code = main(["-q", "suggest", "--grid", "grid.yaml", "--runs", "runs.csv", "--pending",
                 "pending.csv", "--budget", "0.5", "--batch", "4", "--format", "json"])
    sug = json.loads(capsys.readouterr().out)
    assert code == 0 and sug["pending"] == pytest.approx(cost)
    assert sug["remaining"] == pytest.approx(after["remaining"])
    assert tuple(flying[c] for c in COLS) not in [tuple(s[c] for c in COLS)
                                                   for s in sug["suggestions"]]


@pytest.mark.parametrize(("text", "message"), [
    # a finished run also listed as in flight
    ("N,D,lr\n2e8,1e10,3e-3\n5e7,1e9,1e-3\n",
     "pending.csv: data row 2, configuration (N=5e+07, D=1e+09, C=3e+17, lr=0.001), is "
     "already completed in runs.csv (data row 2); list each run once (a finished run belongs "
     "in the runs table only)."),
    ("N,D\n5e7,1e9\n",
     "pending.csv: column 'lr' is missing; other axes are matched by name (--map renames "
     "only run_id, N, D, C, loss): rename the file's column or the grid's axis (the grid's "
     "columns: ['N', 'D', 'lr'])"),
    ("N,D,LR\n5e7,1e9,2e-3\n",  # a trial: the hint sent them to --map lr=LR, an error
     "pending.csv: column 'lr' (the file has 'LR') is missing; other axes are matched by "
     "name (--map renames only run_id, N, D, C, loss): rename the file's column or the "
     "grid's axis (the grid's columns: ['N', 'D', 'lr'])"),
    ("N,D,lr\n5e7,1e9,2e-3\n",
     "pending.csv: 1 of 1 rows are not on the grid (data row 1; first: (N=5e+07, D=1e+09, "
     "lr=0.002): lr 0.002 is not a grid value (nearest 0.003, 33 % away; values match within "
     "1e-06 relative)). Add their values to the grid "
     "axes or drop those runs."),
    ("N,D,lr\n2e8,1e10,3e-3\n2e8,1e10,3e-3\n",
     "pending.csv: data rows 1 and 2 are the same configuration (N=2e+08, D=1e+10, "
     "C=1.2e+19, lr=0.003), run more than once without failing; "
     "keep one run per configuration (average repeats into one row, or drop the older one); "
     "failed attempts may stay beside their retry."),
])
def test_pending_errors_name_the_file_and_its_rows(campaign, capsys, text, message):
    with open("pending.csv", "w") as fh:
        fh.write(text)
    for command in (["suggest"], ["status", "--samples", "8"]):
        code = main([command[0], "--grid", "grid.yaml", "--runs", "runs.csv", "--pending",
                     "pending.csv", "--budget", "0.5", *command[1:]])
        err = capsys.readouterr().err
        assert code == 2 and err == f"error: {message}\n"


def test_library_pending_runs_and_their_rows(campaign):
    grid, done = campaign
    runs = read_campaign_runs("runs.csv", grid)
    assert runs.rows[int(grid.index_of(done.iloc[[1]])[0])] == ("runs.csv", 2)
    flying = read_pending_runs(done.iloc[[1]][COLS], grid)  # a frame: <DataFrame>
    with pytest.raises(SearchError, match=r"^<DataFrame>: data row 1 is already completed in "
                                          r"runs.csv \(data row 2\); list each run once"):
        runs.with_running(flying)
    with pytest.raises(SearchError, match=r"^queue: data row 1 is already completed"):
        runs.with_running(flying, "queue")


def test_a_pending_file_keeps_its_notes_and_rejects_finished_rows(tmp_path):
    """Its rows are in flight: a loss on one is noted (with the file's name) rather than
    dropped, and a row whose status says completed is an error, not silently 'running'."""
    from scalebo.errors import RunTableError
    from scalebo.search.campaign_runs import CampaignRuns, read_pending_runs

    grid = Grid.from_frame(pd.DataFrame({"N": [5e7, 5e7, 1e8, 1e8], "D": [1e9] * 4,
                                         "lr": [1e-3, 3e-3] * 2}), n_held_out_cells=0)
    path = tmp_path / "pending.csv"
    pd.DataFrame({"N": [5e7], "D": [1e9], "lr": [1e-3], "loss": [3.2]}).to_csv(path, index=False)
    runs = CampaignRuns().with_running(read_pending_runs(path, grid), grid=grid)
    assert runs.running.size == 1
    assert runs.notes == (f"{path}: data row 1: status running, so its loss 3.2 is not used "
                          "until the status says completed",)
    renamed = CampaignRuns().with_running(read_pending_runs(path, grid), "queue", grid=grid)
    assert renamed.notes == ("queue: data row 1: status running, so its loss 3.2 is not "
                             "used until the status says completed",)  # a review
    pd.DataFrame({"N": [5e7, 1e8], "D": [1e9, 1e9], "lr": [1e-3, 1e-3],
                  "status": ["running", "completed"]}).to_csv(path, index=False)
    with pytest.raises(RunTableError, match=rf"^{path}: data row 2, column 'status': "
                       r"'completed'; a pending file lists runs in flight"):
        read_pending_runs(path, grid)
