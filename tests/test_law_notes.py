"""status says when most of the envelope its compute law is fitted on is the GP's fill-in
(hand-made envelopes; a campaign on a grid made from Chinchilla's published law)."""

import numpy as np
import pandas as pd

from scalebo.search.campaign import campaign_grid
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.law_notes import envelope_share_note
from scalebo.search.status import campaign_status


def test_the_share_of_runs_on_the_envelope_is_counted_by_hand():
    C = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    loss = np.array([4.0, 3.0, 2.0, 1.0, 1.5])  # the last is above the envelope
    note = envelope_share_note(C, loss, np.array([True, False, False, False, True]))
    assert note.startswith("3 of the 4 points of the Pareto envelope the compute law is "
                           "fitted on are the GP's predictions at configurations no completed "
                           "run has tried (1 is a run)")
    assert envelope_share_note(C, loss, np.array([True, True, False, False, False])) == ""
    assert envelope_share_note(C[:0], loss[:0], np.zeros(0, dtype=bool)) == ""


def _loss(N, D, lr):
    return 1.69 + 406.4 / N ** 0.34 + 410.7 / D ** 0.28 + 0.05 * np.log(lr / 1e-3) ** 2


def test_a_campaign_of_few_cells_is_told_its_law_is_mostly_the_gps(tmp_path):
    (tmp_path / "grid.yaml").write_text(
        "axes:\n  N: [1.0e8, 2.0e8, 4.0e8, 8.0e8]\n  D: [2.0e9, 4.0e9, 8.0e9, 1.6e10]\n"
        "  lr: [3.0e-4, 1.0e-3, 3.0e-3]\n")
    grid = campaign_grid(tmp_path / "grid.yaml")
    few = [(1e8, 2e9, 3e-4), (1e8, 2e9, 1e-3), (1e8, 2e9, 3e-3), (2e8, 2e9, 1e-3),
           (1e8, 4e9, 1e-3), (2e8, 4e9, 1e-3), (1e8, 8e9, 1e-3), (4e8, 2e9, 1e-3)]
    every = [(N, D, 1e-3) for N in (1e8, 2e8, 4e8, 8e8) for D in (2e9, 4e9, 8e9, 1.6e10)]
    said = {}
    for name, configs in (("few", few), ("every cell", every)):
        runs = pd.DataFrame(configs, columns=["N", "D", "lr"])
        runs["loss"] = _loss(runs.N, runs.D, runs.lr)
        status = campaign_status(grid, read_campaign_runs(runs, grid), grid.budget_total,
                                 targets=(1e21,), n_samples=16)
        said[name] = [n for n in status.notes if "Pareto envelope the compute law" in n]
    assert said["few"] == ["4 of the 7 points of the Pareto envelope the compute law is fitted "
                           "on are the GP's predictions at configurations no completed run has "
                           "tried (3 are runs): the law and its intervals say what the GP "
                           "believes there, which only runs there can check"]
    assert said["every cell"] == []  # each cell's best lr trained: the envelope is runs


def _small_campaign(tmp_path):
    """3 N × 3 D at one learning rate, the 6 runs of the two smaller N trained."""
    (tmp_path / "grid.yaml").write_text(
        "axes:\n  N: [1.0e8, 2.0e8, 4.0e8]\n  D: [2.0e9, 4.0e9, 8.0e9]\n  lr: [1.0e-3]\n")
    grid = campaign_grid(tmp_path / "grid.yaml")
    runs = pd.DataFrame([(N, D, 1e-3) for N in (1e8, 2e8) for D in (2e9, 4e9, 8e9)],
                        columns=["N", "D", "lr"])
    runs["loss"] = _loss(runs.N, runs.D, runs.lr)
    return grid, read_campaign_runs(runs, grid)


def test_one_target_is_a_number_and_the_json_names_its_units(tmp_path):
    """A trial: campaign_status(..., targets=1e24) was a TypeError where campaign_posterior and
    fit_summary take one number, and the status JSON gave no unit for its losses."""
    grid, runs = _small_campaign(tmp_path)
    one = campaign_status(grid, runs, grid.budget_total, targets=1e21, n_samples=8)
    many = campaign_status(grid, runs, grid.budget_total, targets=(1e21,), n_samples=8)
    assert [t.C for t in one.targets] == [1e21] and one.targets == many.targets
    units = one.to_dict()["units"]
    assert units["loss"] == "nats" and units["C"] == "FLOPs" and units["budget"] == "FLOPs"


def test_a_law_posterior_prints_its_medians_not_its_samples(tmp_path):
    """A trial: print(campaign_posterior(...)) dumped every sample array (hundreds of lines)."""
    from scalebo.search.campaign import campaign_posterior

    grid, runs = _small_campaign(tmp_path)
    post = campaign_posterior(grid, runs, targets=1e21,
                              n_samples=16)["compute"]
    text = repr(post)
    median = float(np.median(post.predicted_loss[:, 0]))
    assert "\n" not in text and len(text) < 200
    assert f"median_loss=[{round(median, 4)}]" in text and "n_samples=16" in text


def test_the_status_table_writes_its_notes_on_stderr(tmp_path, capsys):
    """A trial: status's table put its notes on stdout, where the README says every
    command's notes go to stderr."""
    from scalebo.cli.main import main

    grid, runs = _small_campaign(tmp_path)
    frame = grid.configs.iloc[runs.completed].assign(loss=runs.losses)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    assert main(["status", "--grid", str(tmp_path / "grid.yaml"), "--runs",
                 str(tmp_path / "runs.csv"), "--budget", "0.9", "--target", "1e21",
                 "--samples", "8", "--next", "0"]) == 0
    out, err = capsys.readouterr()
    assert "note:" not in out and "predictions (C in FLOPs" in out
    assert "note:" in err
