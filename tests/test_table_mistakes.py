"""Table mistakes a bad-input trial found read silently or with a traceback: a ``--map`` onto a
column beside one already bearing the canonical name (``loss`` and ``val_loss``), a mapped
column a campaign file lacks, a header naming one column twice, a file that is not UTF-8, a
formula predicted where it is undefined, a perplexity read as a loss, repeats that differ
only in a column the grid has no axis for."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.data.runs import load_runs
from scalebo.errors import RunTableError, SearchError
from scalebo.fitting.formula_summary import summarize_formula_fit
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.grid import Grid
from scalebo.search.grid_table import read_grid_table

AXES = {"N": [5e7, 1e8], "D": [1e9, 2e9], "lr": [1e-3, 3e-3]}


def _grid() -> Grid:
    return Grid.from_axes(AXES, n_held_out_cells=0)


def test_a_mapped_loss_beside_a_loss_column_is_the_one_read(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("N,D,lr,loss,val_loss\n5e7,1e9,0.001,3.91,4.01\n1e8,2e9,0.003,3.50,3.62\n")
    runs = read_campaign_runs(path, _grid(), mapping={"loss": "val_loss"})
    assert sorted(runs.losses.tolist()) == [3.62, 4.01]
    table = load_runs(path, mapping={"loss": "val_loss"})  # the fit's reader agrees
    assert sorted(table.frame["loss"].tolist()) == [3.62, 4.01]


def test_a_grid_table_maps_its_columns_as_a_run_table_does(tmp_path):
    path = tmp_path / "grid.csv"
    path.write_text("N,D,lr,N_active\n" + "".join(
        f"{n:g},{d:g},{lr:g},{n / 4:g}\n" for n in AXES["N"] for d in AXES["D"]
        for lr in AXES["lr"]))
    grid = read_grid_table(path, {"N": "N_active", "loss": "val_loss"})  # no loss: fine
    assert sorted(set(grid.configs["N"])) == [1.25e7, 2.5e7]
    assert grid.axes == ("lr",)  # the total N set aside is no axis
    with pytest.warns(UserWarning, match=r"the mapping's column 'N_actve' \(for 'N'\) is not "
                                         r"in the file \(did you mean 'N_active'\?\); its "
                                         r"column 'N' is used"):
        typo = read_grid_table(path, {"N": "N_actve"})
    assert sorted(set(typo.configs["N"])) == AXES["N"]


def test_one_mapping_serves_files_in_either_names(tmp_path):
    """A grid in the grid's own names and runs in the user's (or the reverse): each file
    maps what it has."""
    path = tmp_path / "runs.csv"
    path.write_text("N,D,lr,loss\n5e7,1e9,0.001,3.91\n")
    mapping = {"N": "params", "D": "tokens"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = read_campaign_runs(path, _grid(), mapping=mapping)
    mine = tmp_path / "mine.csv"
    mine.write_text("params,tokens,learning_rate,loss\n5e7,1e9,0.001,3.91\n")
    other = read_campaign_runs(mine, _grid(), mapping={**mapping, "lr": "learning_rate"})
    assert runs.completed.tolist() == other.completed.tolist() == [0]


@pytest.mark.parametrize(("header", "said"), [
    ("N,D,loss,loss", r"'loss' appears 2 times in the header \(columns 3, 4\)"),
    ("N,D,N,loss", r"'N' appears 2 times in the header \(columns 1, 3\)"),
])
def test_a_header_naming_a_column_twice_is_an_error(tmp_path, header, said):
    path = tmp_path / "runs.csv"
    path.write_text(header + "\n5e7,1e9,0.001,3.9\n1e8,2e9,0.003,3.5\n")
    with pytest.raises(RunTableError, match=said):
        load_runs(path)


def test_a_file_that_is_not_utf8_names_its_line_and_byte(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_bytes("N,D,loss,note\n5e7,1e9,3.9,ok\n1e8,2e9,3.5,caf\u00e9\n".encode("latin-1"))
    with pytest.raises(RunTableError, match=r"not UTF-8 text: line 3 has the byte 0xe9 "
                                            r"\(position 16\); save the file as UTF-8"):
        load_runs(path)


def test_a_formula_is_not_predicted_where_it_is_undefined():
    N, D = np.meshgrid(np.geomspace(5e7, 5e9, 4), np.geomspace(1e9, 1e11, 4))
    frame = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    frame["loss"] = 1.69 + 406.4 / frame["N"] ** 0.34 + 410.7 / frame["D"] ** 0.28
    bounds = {"E": (0, 10), "A": (1e-3, 1e9), "a": (0.05, 2), "B": (1e-3, 1e9),
              "b": (0.05, 2)}
    formula = "E + A*N**(-a) + B*D**(-b)"
    with pytest.raises(ValueError, match=r"--predict-at N=-1,D=2e\+11: the fitted formula .* "
                                         r"is not finite there \(N ≤ 0"):
        summarize_formula_fit(frame, formula, bounds=bounds, predict_at=["N=-1,D=2e11"])
    ok = summarize_formula_fit(frame, formula, bounds=bounds, predict_at=["N=1e10,D=2e11"])
    truth = 1.69 + 406.4 / 1e10 ** 0.34 + 410.7 / 2e11 ** 0.28
    got = ok.law.predict(ok.fit.x, np.array([[1e10, 2e11]]))[0]
    assert math.isclose(got, truth, rel_tol=1e-3)


def test_a_perplexity_read_as_a_loss_is_named():
    frame = pd.DataFrame({"N": [5e7, 1e8, 2e8, 4e8], "D": [1e9, 2e9, 4e9, 8e9]})
    frame["loss"] = np.exp([3.4, 3.2, 3.0, 2.9])  # perplexities 30, 25, 20, 18
    with pytest.warns(UserWarning, match=r"the median loss is 22.31 nats .* a perplexity"):
        load_runs(frame)
    frame["loss"] = np.log(frame["loss"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(frame)


def test_repeats_that_differ_off_the_grid_say_in_what(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("N,D,lr,bs,seed,train_loss,loss\n5e7,1e9,0.001,256,0,3.9,3.91\n"
                    "5e7,1e9,0.001,512,1,3.8,3.95\n")  # a seed and a loss are no settings
    with pytest.raises(SearchError, match=r"They differ in \['bs'\], which the grid has no "
                                          r"axis for: a setting among them belongs"):
        read_campaign_runs(path, _grid())


@pytest.mark.parametrize(("value", "said"), [
    ("1.3B", r"write '1.3B' as 1.3e9 \(k = 1e3, M = 1e6, B = 1e9, T = 1e12\)"),
    ("124.4397M", r"write '124.4397M' as 124.4397e6"),
    ("1,234,567,891", r"Thousands separators are not read: write '1,234,567,891' as "
                      r"1234567891\."),
    ("1,024", r"write '1,024' as 1024 if the comma separates thousands, or 1.024 if it is a "
              r"decimal comma"),
    ("3,1", r"Decimal commas are not read"),
])
def test_a_size_written_for_people_says_how_to_write_it(tmp_path, value, said):
    runs = tmp_path / "runs.csv"
    runs.write_text(f'N,D,loss\n"{value}",2e10,3.1\n1e8,2e9,3.5\n')
    with pytest.raises(RunTableError, match=r"data row 1, column 'N'.*" + said):
        load_runs(runs)
    grid_yaml = tmp_path / "grid.yaml"
    grid_yaml.write_text(f'axes:\n  N: ["{value}", 2e9]\n  D: [2e10]\n')
    with pytest.raises(SearchError, match=r"axis 'N', item 1: .*" + said):
        Grid.from_yaml(grid_yaml)
    table = tmp_path / "grid.csv"
    table.write_text(f'N,D\n"{value}",2e10\n2e9,2e10\n')
    with pytest.raises(RunTableError, match=r"data row 1, column 'N'.*" + said):
        read_grid_table(table)


def test_a_header_check_reads_names_as_the_parser_does(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("N,D,loss,,\n5e7,1e9,3.9,,\n1e8,2e9,3.5,,\n")  # a spreadsheet's empties
    assert len(load_runs(path)) == 2
    path.write_bytes(b"\xef\xbb\xbfloss,N,D,loss\n3.9,5e7,1e9,4.0\n")  # BOM ('CSV UTF-8')
    with pytest.raises(RunTableError, match=r"'loss' appears 2 times in the header \(columns "
                                            r"1, 4\)"):
        load_runs(path)
    path.write_text("\nN,D,N,loss\n5e7,1e9,1,3.9\n")  # a blank first line, skipped by pandas
    with pytest.raises(RunTableError, match=r"'N' appears 2 times"):
        load_runs(path)


def test_an_off_grid_value_next_to_zero_is_named():
    grid = Grid.from_axes({"N": [1e8, 3e8], "D": [1e9, 3e9], "wd": [0.0, 0.1]},
                          n_held_out_cells=0)
    with pytest.raises(SearchError, match=r"wd 0.01 is not a grid value \(nearest 0; values "
                                          r"match within 1e-06 relative\)"):
        grid.index_of(pd.DataFrame({"N": [1e8], "D": [1e9], "wd": [0.01]}))
