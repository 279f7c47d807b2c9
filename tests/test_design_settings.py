"""Pool columns the law does not read (a new-user trial: a pool of 5 N × 5 D × 4 learning
rates was fitted through every learning rate without a word, proposals left the learning
rate out, and running one learning rate of a cell marked the cell's other three done): a
warning names the column, proposals show every pool column under the user's names, and a
run done counts only for the pool rows it matches in every column it shares with the pool."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main
from scalebo.design import make_pool, make_target
from scalebo.design.runs_done import column_matches, done_rows, match_columns
from scalebo.laws.formula import formula_law

FORMULA = "E + A*N**(-a) + B*D**(-b)"
BOUNDS = "E=0:5,A=1:1e5,a=0.05:1,B=1:1e5,b=0.05:1"


def _truth(N, D):
    return 1.7 + 406.4 * N**-0.34 + 410.7 * D**-0.28


def _pool() -> pd.DataFrame:
    """3 params × 3 tokens × lr {1e-3, 3e-3}, in that order (lr fastest); noise-free, the
    law at lr 1e-3 and 0.06 above it at 3e-3."""
    N, D, lr = (a.ravel() for a in np.meshgrid([1e7, 4e7, 1.6e8], [2e8, 1e9, 5e9],
                                                [1e-3, 3e-3], indexing="ij"))
    loss = _truth(N, D) + 0.05 * np.log(lr / 1e-3) ** 2
    return pd.DataFrame({"params": N, "tokens": D, "lr": lr, "loss": loss})


def _args(tmp_path, pool: pd.DataFrame) -> list[str]:
    pool.to_csv(tmp_path / "pool.csv", index=False)
    pd.DataFrame({"params": [1e9, 3e9], "tokens": [2e10, 6e10]}).to_csv(tmp_path / "t.csv",
                                                                        index=False)
    return ["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
            str(tmp_path / "t.csv"), "--formula", FORMULA, "--bounds", BOUNDS, "--cost",
            "6*N*D", "--map", "N=params,D=tokens", "--starts", "4"]


def test_a_setting_the_law_does_not_read_is_named_with_the_cells_it_repeats(tmp_path, capsys):
    pool = _pool()
    assert main([*_args(tmp_path, pool), "--budgets", "0.5", "--method", "cheapest"]) == 0
    err = capsys.readouterr().err
    assert (f"{tmp_path / 'pool.csv'}: rows with the same params, tokens differ in lr, which "
            "the formula does not use (9 of 9 combinations of params, tokens hold several "
            "rows)") in err, err
    assert "--group COL" in err and "keep each cell's best row" in err
    # a dataset name (text) repeating a cell is a setting too; one value per cell is not
    text = pool.assign(data=np.where(pool.lr == 1e-3, "web", "code"), lr=1e-3)
    text.loc[text.params == 1e7, "data"] = "web"  # 3 of 9 cells hold one dataset twice
    assert main([*_args(tmp_path, text), "--budgets", "0.5", "--method", "cheapest"]) == 0
    assert "differ in data, which the formula does not use (9 of 9" in capsys.readouterr().err
    one = pool[pool.lr == 1e-3].assign(flops=lambda f: 6 * f.params * f.tokens)
    assert main([*_args(tmp_path, one), "--budgets", "0.5", "--method", "cheapest"]) == 0
    assert "does not use" not in capsys.readouterr().err


def test_a_run_done_marks_only_the_pool_row_it_matches(tmp_path, capsys):
    """Six runs at lr 1e-3: with --budget 100% and a batch as large as the pool, the
    proposals are exactly the 12 other rows, the lr 3e-3 rows of the same cells included
    (before: 6, every row of a cell with a run done counted as done); the table and the
    JSON show lr, and the user's names, not the formula's."""
    pool = _pool()
    args = _args(tmp_path, pool.drop(columns="loss"))
    done = [0, 2, 4, 6, 8, 10]  # lr 1e-3 in 6 of the 9 cells
    pool.iloc[done].to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "100%", "--batch",
                 "18", "--json", str(out)]) == 0
    printed, err = capsys.readouterr()
    props = json.loads(out.read_text())["proposals"]
    assert sorted(p["row"] for p in props) == sorted(set(range(18)) - set(done))
    for p in props:
        assert p["columns"] == {"params": pool.params[p["row"]],
                                "tokens": pool.tokens[p["row"]], "lr": pool.lr[p["row"]]}
    header = printed.splitlines()[0].split()
    assert header[:4] == ["data_row", "params", "tokens", "lr"], header
    assert "12 of the 18 rows asked for (--batch) are proposed" in err
    # a runs file without the lr column shares only the inputs: a run is its whole cell
    pool.iloc[done].drop(columns="lr").to_csv(tmp_path / "done.csv", index=False)
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "100%", "--batch",
                 "18", "--json", str(out)]) == 0
    props = json.loads(out.read_text())["proposals"]
    assert sorted(p["row"] for p in props) == [12, 13, 14, 15, 16, 17]


def test_column_matches_compares_numbers_text_and_blanks():
    law = formula_law("E + A*N**(-a)", ("N",), {"E": (0, 5), "A": (1, 1e3), "a": (0.1, 1)})
    pool_f = pd.DataFrame({"N": [1e6, 1e6, 1e6, 2e6], "lr": [1e-3, 3e-3, 1e-3, 1e-3],
                           "data": ["web", "web", "code", None]})
    runs_f = pd.DataFrame({"N": [1e6, 2e6, 1e6], "lr": ["0.001", "1e-3", "3e-3"],
                           "data": [" web", "", "code"], "loss": [3.0, 2.9, 3.1]})
    pool = make_pool(pool_f, law, "N")
    X = runs_f[["N"]].to_numpy(float)
    m = column_matches(pool, pool_f, X, runs_f, ["data", "lr", "absent"])
    assert m.columns == ("lr", "data")  # the pool's order; a column the runs lack is not
    assert m.matrix.tolist() == [[True, False, False, False],  # 1e-3 from text, " web" stripped
                                 [False, False, False, True],  # a blank matches a blank
                                 [False, False, False, False]]  # 3e-3 is web's, not code's
    assert [m.differing(i) for i in range(3)] == [(), (), ("lr", "data")]  # each, not both
    assert done_rows(pool, X, matches=m).tolist() == [True, False, False, True]
    assert done_rows(pool, X).tolist() == [True, True, True, True]  # inputs alone


def _measured_runs(pool: pd.DataFrame) -> pd.DataFrame:
    """Runs of pool rows 2, 4, 8, 10, 12 (lr 1e-3) whose flops were measured 3 % over plan,
    a run at lr 2e-3 (no pool row's) in the cell of rows 0 and 1, and a run id the pool
    lacks."""
    runs = pool.iloc[[2, 4, 0, 8, 10, 12]].assign(flops=lambda f: 1.03 * f.flops,
                                                   run=list("abcdef"))
    runs.iloc[2, runs.columns.get_loc("lr")] = 2e-3
    return runs.reset_index(drop=True)


def test_a_measured_cost_is_not_compared_and_a_differing_setting_is_named(tmp_path, capsys):
    """A review of 0.4.20: every column the runs shared with the pool was compared, the
    --cost column too, so runs recording their measured cost (3 % over plan) matched no pool
    row and were proposed again. Only the pool's settings (lr here) are compared; the
    warning names the run's data row, its inputs and the column whose value is no pool
    row's, and says its pool rows may be proposed again."""
    pool = _pool().assign(flops=lambda f: 6 * f.params * f.tokens)
    law = formula_law(FORMULA, ("N", "D"), {"E": (0, 5), "A": (1, 1e5), "a": (0.05, 1),
                                             "B": (1, 1e5), "b": (0.05, 1)})
    vmap = {"N": "params", "D": "tokens"}
    runs = _measured_runs(pool)
    cols = match_columns(pool, ["params", "tokens"], "loss")
    assert cols == ("lr",)  # not flops (the cost), not loss; a pool without repeats: none
    assert match_columns(pool[pool.lr == 1e-3], ["params", "tokens"], "loss") == ()
    pool_p = make_pool(pool, law, "flops", variable_map=vmap)
    X = runs[["params", "tokens"]].to_numpy(float)
    m = column_matches(pool_p, pool, X, runs, cols)
    assert np.flatnonzero(done_rows(pool_p, X, matches=m)).tolist() == [2, 4, 8, 10, 12]
    assert m.differing(2) == ("lr",) and m.differing(0) == ()
    runs.to_csv(tmp_path / "done.csv", index=False)
    args = [*_args(tmp_path, pool.drop(columns="loss")), "--cost", "flops"]
    out = tmp_path / "p.json"
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "100%", "--batch",
                 "18", "--json", str(out)]) == 0
    err = capsys.readouterr().err
    rows = [p["row"] for p in json.loads(out.read_text())["proposals"]]
    assert not {2, 4, 8, 10, 12} & set(rows) and len(rows) == len(set(rows)) >= 10, rows
    said = " ".join(err.split())
    assert ("1 of the 6 runs done match no pool row in their inputs (N, D) and lr (data row "
            "3): data row 3 (N=1e+07, D=2e+08): lr 0.002 is no pool row's of its inputs; they "
            "are fitted all the same, but no pool row counts as done for them, so the pool "
            "rows they ran may be proposed again") in said, err


def test_a_batch_size_the_cost_reads_still_tells_pool_rows_apart():
    """A GPU-hour cost 6·N·D·bs/256 reads bs: a run at bs 256 is not the bs 512 row (a review
    saw both marked done once the cost's columns were never compared)."""
    pool = pd.DataFrame([(n, d, bs, 3.0) for n in (1e8, 2e8) for d in (1e9, 2e9)
                         for bs in (256, 512)], columns=["N", "D", "bs", "loss"])
    law = formula_law(FORMULA, ("N", "D"), {"E": (0, 5), "A": (1, 1e5), "a": (0.05, 1),
                                             "B": (1, 1e5), "b": (0.05, 1)})
    cost = "6*N*D*bs/256"
    cols = match_columns(pool, ["N", "D"], "loss")
    assert cols == ("bs",)
    runs = pool.iloc[[0]]  # (1e8, 1e9) at bs 256
    pool_p = make_pool(pool, law, cost)
    X = runs[["N", "D"]].to_numpy(float)
    done = done_rows(pool_p, X, matches=column_matches(pool_p, pool, X, runs, cols))
    assert np.flatnonzero(done).tolist() == [0]


def test_target_rows_with_one_input_and_two_responses_are_named(tmp_path, capsys):
    """A trial: a target row repeated with another response got no warning (only copies in
    every column did), though the README promises one for rows that repeat one another."""
    law = formula_law(FORMULA, ("N", "D"), {"E": (0, 5), "A": (1, 1e5), "a": (0.05, 1),
                                             "B": (1, 1e5), "b": (0.05, 1)})
    t = pd.DataFrame({"N": [3e9, 3e9, 1e10, 1e10, 3e9], "D": [6e10, 2e11, 6e10, 2e11, 6e10]})
    t["loss"] = _truth(t.N, t.D)
    t.loc[4, "loss"] += 0.1
    with pytest.warns(UserWarning) as said:
        make_target(t, law, response="loss", source="t.csv")
    (text,) = [str(w.message) for w in said]
    assert text.startswith("t.csv: data rows 1, 5 repeat another target row's N, D but "
                           "differ in loss (2 rows)"), text
    with warnings.catch_warnings():  # one input in two groups: a row of each group
        warnings.simplefilter("error")
        make_target(t.assign(g=["a"] * 4 + ["b"]), law, response="loss", group="g")
    assert text.endswith("each is scored as a row of its own, so the input weighs once per "
                         "row in the R² and the coverage, and one input cannot be predicted "
                         "to two values of loss (average them, or keep one row per input)")
    # an ID alone differs: one response, so no 'two values' (a review of 0.4.20)
    ids = t.iloc[:4].assign(run=list("abcd"))
    ids = pd.concat([ids, ids.iloc[[0]].assign(run="e")], ignore_index=True)
    with pytest.warns(UserWarning) as said:
        make_target(ids, law, response="loss", source="t.csv")
    (text,) = [str(w.message) for w in said]
    assert text == ("t.csv: data rows 1, 5 repeat another target row's N, D but differ in run "
                    "(2 rows): each is scored as a row of its own, so the input weighs once "
                    "per row in the R² and the coverage, with one value of loss (keep one row "
                    "per input unless it should weigh more)"), text
    copies = pd.concat([t.iloc[:4], t.iloc[[3]]], ignore_index=True)
    with pytest.warns(UserWarning) as said:
        make_target(copies, law, response="loss", source="t.csv")
    assert [str(w.message)[:60] for w in said] == [
        "t.csv: data rows 4, 5 repeat another row in every column (2 "]


def test_a_pool_column_named_as_a_table_column_is_shown_under_another_name(tmp_path, capsys):
    """A review of 0.4.20: a pool column called ``mean`` or ``data_row`` overwrote the
    proposal table's own (the row dict kept one value, the header named it twice). It is
    shown as ``pool_<name>`` (``pool_pool_mean`` when the pool has a ``pool_mean`` too),
    with a warning; the table's ``mean`` is the prediction, the JSON keeps the pool's names."""
    pool = _pool()
    pool = pool[pool.lr == 1e-3].drop(columns="lr").reset_index(drop=True)
    pool = pool.assign(mean=7.0, pool_mean=8.0, data_row=np.arange(100, 109))
    pool.iloc[[0, 2, 4, 6, 8]].to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    assert main([*_args(tmp_path, pool.drop(columns="loss")), "--runs",
                 str(tmp_path / "done.csv"), "--budget", "100%", "--batch", "2", "--json",
                 str(out)]) == 0
    printed, err = capsys.readouterr()
    lines = [line.split() for line in printed.splitlines()]
    assert lines[0] == ["data_row", "params", "tokens", "pool_pool_mean", "pool_mean",
                        "pool_data_row", "cost_fraction", "mean", "design_lo80", "design_hi80"]
    props = json.loads(out.read_text())["proposals"]
    for line, p in zip(lines[1:], props, strict=True):
        assert line[0] == str(p["row"] + 1) and line[3:6] == ["7", "8", str(100 + p["row"])]
        assert float(line[7]) == pytest.approx(p["mean"], rel=1e-3)  # the prediction
        assert p["mean"] == pytest.approx(pool.loss[p["row"]], abs=0.01)  # noise-free truth
        assert p["columns"]["mean"] == 7.0 and p["columns"]["data_row"] == 100 + p["row"]
    said = " ".join(err.split())
    assert ("pool.csv: columns 'mean', 'data_row' share a name with the proposal table's own "
            "columns; shown as 'pool_pool_mean', 'pool_data_row'") in said, err
