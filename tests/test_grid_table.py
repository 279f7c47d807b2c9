"""Grid tables (``--grid grid.csv``) get the YAML grid's checks: a typo in a numeric column,
a value of N, D, C or cost that is not a positive number, an empty or non-finite value and a
repeated configuration are errors naming the file, the 1-based data row and the column
(the defects of a new-user trial: ``le-3`` became a proposed run, ``abc`` in D said "could
not convert string to float", a repeated row said "first rows [2, 3]", 0-based)."""

import pandas as pd
import pytest

from scalebo.cli.main import main
from scalebo.errors import RunTableError, SearchError
from scalebo.search.campaign import campaign_grid

ROWS = "5e7,1e9,3e-4\n5e7,1e9,1e-3\n1e8,1e9,1e-3\n1e8,1e9,3e-4\n"


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """Work in ``tmp_path`` so that messages show the plain file name."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(name: str, text: str) -> str:
    with open(name, "w") as fh:
        fh.write(text)
    return name


@pytest.mark.parametrize(("text", "error", "message"), [
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,1e-3\n1e8,1e9,le-3\n1e8,1e9,3e-4\n", RunTableError,
     "grid.csv: data row 3, column 'lr': expected a number, got 'le-3' (the column is "
     "numeric: 3 of its 4 values are numbers; a categorical column is mostly text)."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,abc\n", RunTableError,
     "grid.csv: data row 2, column 'lr': expected a number, got 'abc' (the column is "
     "numeric: 1 of its 2 values is a number; a categorical column is mostly text)."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,abc,1e-3\n", RunTableError,
     "grid.csv: data row 2, column 'D' (tokens): expected a positive number, got 'abc'."),
    ("N,D,lr\n5e7,1e9,3e-4\n-5e7,1e9,1e-3\n0,1e9,1e-3\n", RunTableError,
     "grid.csv: data row 2, column 'N' (parameters): expected a positive number, got "
     "-50000000.0; 1 more such rows."),
    ("N,D,lr,cost\n5e7,1e9,3e-4,1\n5e7,1e9,1e-3,\n", RunTableError,
     "grid.csv: data row 2, column 'cost' (GPU-hours of the configuration): expected a "
     "positive number, got an empty value."),
    ("N,D,C,lr\n5e7,1e9,3e17,3e-4\n5e7,1e9,0,1e-3\n", RunTableError,
     "grid.csv: data row 2, column 'C' (FLOPs of the configuration): expected a positive "
     "number, got 0.0."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,\n1e8,1e9,1e-3\n", RunTableError,
     "grid.csv: data row 2, column 'lr': expected a number, got an empty value."),
    ("N,D,learning_rate\n5e7,1e9,3e-4\n5e7,1e9,0\n5e7,1e9,-1e-3\n", RunTableError,
     "grid.csv: data row 2, column 'learning_rate': expected a positive number (a learning "
     "rate), got 0.0; 1 more such rows."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,inf\n", RunTableError,
     "grid.csv: data row 2, column 'lr': expected a finite number, got inf."),
    ("N,D,opt\n5e7,1e9,adam\n5e7,1e9,\n", RunTableError,
     "grid.csv: data row 2, column 'opt': expected a value (a category of the column), got "
     "an empty value."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,1e-3\n1e8,1e9,1e-3\n1e8,1e9,1e-3\n", SearchError,
     "grid.csv: data rows 3 and 4 are the same configuration (N=1e+08, D=1e+09, lr=0.001); "
     "list each configuration once."),
    ("N,D,lr\n5e7,1e9,3e-4\n5e7,1e9,3e-4\n", SearchError,  # lr, fixed, is no axis: still shown
     "grid.csv: data rows 1 and 2 are the same configuration (N=5e+07, D=1e+09, lr=0.0003); "
     "list each configuration once."),
    ("N,tokens,lr\n5e7,1e9,3e-4\n", RunTableError,
     "grid.csv: columns ['D'] are missing (a grid table needs N, parameters, and D, tokens; "
     "it has ['N', 'tokens', 'lr']); rename them with --map, e.g. --map N=params,D=tokens "
     "(mapping= in Python)."),
])
def test_grid_table_mistakes_name_file_row_and_column(here, text, error, message):
    with pytest.raises(error) as err:
        campaign_grid(_write("grid.csv", text))
    assert str(err.value) == message


def test_cli_exit_2_with_the_message(here, capsys):
    _write("gstr2.csv", "N,D,lr\n" + ROWS.replace("1e8,1e9,1e-3", "1e8,1e9,le-3"))
    for command in (["suggest"], ["status", "--next", "0", "--samples", "8"]):
        assert main([*command, "--grid", "gstr2.csv", "--budget", "0.5"]) == 2
        err = capsys.readouterr().err
        assert ("gstr2.csv: data row 3, column 'lr': expected a number, got 'le-3'" in err
                and "Traceback" not in err)


def test_categorical_numbers_and_mapping(here):
    # mostly text: categorical, a numeric-looking label ("2") kept as text
    grid = campaign_grid(_write("cat.csv", "N,D,opt,bs\n5e7,1e9,adam,128\n5e7,1e9,sgd,256\n"
                                           "1e8,1e9,adam,128\n1e8,1e9,2,256\n1e8,1e9,lion,128\n"))
    assert grid.categorical_axes == ("opt",) and grid.axes == ("opt", "bs")
    assert sorted(grid.configs["opt"]) == ["2", "adam", "adam", "lion", "sgd"]
    assert grid.config(0)["bs"] == 128 and isinstance(grid.config(0)["bs"], int)
    # numbers written as text (a JSON-lines grid) are numbers; --map renames
    pd.DataFrame({"params": [5e7, 5e7], "D": [1e9, 1e9], "lr": ["3e-4", "1e-3"]}).to_json(
        "g.jsonl", orient="records", lines=True)
    grid = campaign_grid("g.jsonl", {"N": "params"})
    assert grid.axes == ("lr",) and list(grid.configs["lr"]) == [3e-4, 1e-3]
    assert not grid.categorical_axes
    # a bad value of a mapped column is named as run tables name it (file column too)
    _write("neg.csv", "params,D,lr\n5e7,1e9,3e-4\n-5e7,1e9,1e-3\n")
    with pytest.raises(RunTableError, match=r"neg.csv: data row 2, column 'N' \(parameters; "
                                            r"file column 'params'\): expected a positive"):
        campaign_grid("neg.csv", {"N": "params"})


def test_category_labels_match_without_surrounding_blanks(here):
    """' adam' in a grid table is 'adam', as in run tables: a campaign's 'adam ' run is on the
    grid, and ' adam' next to 'adam' in one cell is a repeated configuration."""
    from scalebo.search.campaign_runs import read_campaign_runs

    grid = campaign_grid(_write("cat.csv", 'N,D,opt\n5e7,1e9," adam"\n5e7,1e9,sgd\n'
                                           "1e8,1e9,adam\n1e8,1e9,sgd\n"))
    assert sorted(set(grid.configs["opt"])) == ["adam", "sgd"]
    runs = pd.DataFrame({"N": [5e7, 1e8], "D": [1e9, 1e9], "opt": ["adam ", "sgd"],
                         "loss": [3.1, 2.9]})
    assert grid.index_of(runs).tolist() == [0, 3]
    assert read_campaign_runs(runs, grid).completed.tolist() == [0, 3]
    with pytest.raises(SearchError, match=r"data rows 1 and 3 are the same configuration"):
        campaign_grid(_write("dup.csv", 'N,D,opt\n5e7,1e9," adam"\n5e7,1e9,sgd\n'
                                        "5e7,1e9,adam\n"))
