"""Grid files: every mistake of a hand-written YAML grid is an error that names the file, the
axis and the item (the typos of issue 10: ``le-3``, ``lr: 1e-3, 3e-3``, a syntax error)."""

import pytest

from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.grid_file import read_grid_file


def _file(tmp_path, text):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "match"), [
    ("axes:\n  N: [1e8]\n  D: [1e9]\n  lr: [le-3, 3e-3]\n",
     r"axis 'lr', item 1: 'le-3' is not a number, while other values .* are; a typo"),
    ("axes:\n  N: [1e8]\n  D: [1e9]\n  lr: 1e-3, 3e-3\n",
     r"axis 'lr' is the text '1e-3, 3e-3', not a list; .* lr: \[1e-3, 3e-3\]"),
    ("axes:\n  N: [1e8\n  D: [1e9]\n", r"not valid YAML at line \d+, column \d+"),
    ("axes:\n  N: [1e8, -1e9]\n  D: [1e9]\n", r"axis 'N', item 2: .* must be positive"),
    ("axes:\n  N: [1e8]\n  D: [1e9]\n  peak_lr: [1e-3, -3e-3]\n",  # a trial's was accepted
     r"axis 'peak_lr', item 2: '-3e-3' must be positive \(a learning rate; the search reads "),
    ("axes:\n  N: [1e8]\n  D: [1e9, 1e9]\n", r"axis 'D': items 1 and 2 repeat"),
    ("axes:\n  N: [1e8]\n  D: [.nan]\n", r"axis 'D', item 1: .* not finite"),
    ("axes:\n  N: [1e8]\n  D: [1e9]\nheld_out: 1\n", r"unknown key\(s\) \['held_out'\]"),
    ("axes:\n  N: [1e8]\n  D: [1e9]\nheld_out_cells: -1\n", r"held_out_cells must be"),
    ("axes:\n  N: [1e8]\n  D: [tokens]\n", r"axis 'D', item 1: 'tokens' is not a number"),
    ("N: [1e8]\n", r"expected a mapping with an 'axes' mapping"),
    ("axes:\n  N: [1e8]\n  D: [1e9]\n  lr: [1e-3]\n  lr: [3e-3]\n",
     r"line 5, column 3: the key 'lr' is given twice"),
    ("axes:\n  n: [1e8]\n  D: [1e9]\n", r"axis 'n' — did you mean 'N'\?"),
])
def test_mistakes_are_named(tmp_path, text, match):
    path = _file(tmp_path, text)
    with pytest.raises(SearchError, match=match) as err:
        read_grid_file(path)
    assert str(path) in str(err.value)


def test_a_schedule_axis_may_hold_zero_but_a_learning_rate_not(tmp_path):
    """min_lr (cosine decay to 0) and lr_warmup_steps may be 0 (a review: an lr-like name
    test refused them); learning_rate may not."""
    axes, _ = read_grid_file(_file(tmp_path, "axes:\n  N: [1e8]\n  D: [1e9]\n  min_lr: [0, 1e-5]"
                                   "\n  lr_warmup_steps: [0, 2000]\n"))
    assert axes["min_lr"] == [0, 1e-5] and axes["lr_warmup_steps"] == [0, 2000]
    with pytest.raises(SearchError, match=r"axis 'Learning-Rate', item 1: 0 must be positive"):
        read_grid_file(_file(tmp_path, "axes:\n  N: [1e8]\n  D: [1e9]\n  Learning-Rate: [0]\n"))


def test_valid_file_numbers_text_and_single_values(tmp_path):
    path = _file(tmp_path, 'axes:\n  N: ["1e8", 3e8]\n  D: [1e9]\n  lr: 3e-3\n'
                           "  opt: [adam, lion]\nheld_out_cells: 0\n")
    axes, held = read_grid_file(path)
    assert axes == {"N": [1e8, 3e8], "D": [1e9], "lr": [3e-3], "opt": ["adam", "lion"]}
    assert held == 0
    grid = Grid.from_yaml(path)
    assert len(grid) == 2 * 1 * 1 * 2 and grid.categorical_columns
    assert read_grid_file(_file(tmp_path, "axes: {N: [1e8], D: [1e9]}\n"))[1] is None


def test_cli_reports_the_typo_with_exit_2(tmp_path, capsys):
    from scalebo.cli.main import main

    path = _file(tmp_path, "axes:\n  N: [1e8]\n  D: [1e9]\n  lr: [le-3, 3e-3]\n")
    assert main(["suggest", "--grid", str(path), "--budget", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "'le-3' is not a number" in err and "Traceback" not in err


def test_from_yaml_takes_held_out_cells_and_a_mapping_as_the_readme_says(tmp_path):
    """A trial: Grid.from_yaml(path, n_held_out_cells=0), as the README's Python table says,
    was a TypeError, and a params/tokens file that --map reads had no way in from Python."""
    from scalebo.search.campaign import campaign_grid

    path = _file(tmp_path, "axes:\n  params: [1.0e8, 2.0e8]\n  tokens: [1.0e9, 3.0e9]\n"
                           "  lr: [1.0e-3, 3.0e-3]\n")
    mapping = {"N": "params", "D": "tokens"}
    with pytest.raises(SearchError, match=r"Axis 'N' is required, got axes \['params', "
                       r"'tokens', 'lr'\]; add e.g. N: \[1e8, 1e9\], or name the axis that "
                       r"holds it \(--map N=NAME; mapping=\{'N': NAME\} in Python\)\.$"):
        Grid.from_yaml(path)
    replay_like = Grid.from_yaml(path, mapping=mapping)  # 2 of the 4 cells held out
    campaign = Grid.from_yaml(path, n_held_out_cells=0, mapping=mapping)
    assert campaign.C_total == campaign_grid(path, mapping).C_total
    assert campaign.C_total == pytest.approx(2 * 6 * (1e8 + 2e8) * (1e9 + 3e9))  # by hand
    assert replay_like.C_total == pytest.approx(2 * 6 * (1e8 + 2e8) * 1e9)  # 3e9: held out


def test_a_mapped_campaign_names_its_own_columns_in_off_grid_errors(tmp_path):
    """A trial with --map N=params,D=tokens: the off-grid and missing-column errors said N, D
    where the files say params, tokens."""
    import pandas as pd

    from scalebo.search.campaign import campaign_grid
    from scalebo.search.campaign_runs import read_campaign_runs

    path = _file(tmp_path, "axes:\n  params: [1.0e8, 3.0e8]\n  tokens: [2.0e9, 6.0e9]\n"
                           "  lr: [1.0e-3, 3.0e-3]\n")
    mapping = {"N": "params", "D": "tokens", "loss": "val_loss"}
    grid = campaign_grid(path, mapping)
    off = pd.DataFrame({"params": [1e8, 2e8], "tokens": [2e9, 6e9], "lr": [1e-3, 1e-3],
                        "val_loss": [3.5, 3.2]})
    with pytest.raises(SearchError, match=r"runs.csv: 1 of 2 rows are not on the grid \(data "
                       r"row 2; first: \(params=2e\+08, tokens=6e\+09, lr=0.001\): params "
                       r"200000000 is not a grid value \(nearest 300000000"):
        read_campaign_runs(off, grid, mapping=mapping, name="runs.csv")
    with pytest.raises(SearchError, match=r"\(the grid's columns: \['params', 'tokens', "
                                          r"'lr'\]\)$"):
        read_campaign_runs(off.drop(columns="lr"), grid, mapping=mapping, name="runs.csv")
