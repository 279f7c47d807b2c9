"""Run tables: formats, mapping, validation messages, exclusions, repeats, FLOPs."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.data.runs import (
    ExclusionReason,
    RunTable,
    compute_flops,
    load_runs,
    parse_mapping,
)
from scalebo.errors import ExcludedRunsWarning, RunTableError


def _frame():
    return pd.DataFrame(
        {
            "params": [10**9, 10**9, 2 * 10**9, 2 * 10**9],
            "tokens": [10**11, 10**11, 2 * 10**11, 2 * 10**11],
            "lr": [1e-3, 2e-3, 1e-3, 2e-3],
            "width": [1024, 1024, 2048, 2048],
            "seed": [1, 2, 3, 4],
            "val_loss": [2.5, 2.4, 2.2, 2.3],
            "loss_se": [0.01, 0.02, 0.0, 0.0],
        }
    )


MAP = {"N": "params", "D": "tokens", "loss": "val_loss"}


def test_compute_flops_float64_no_int64_overflow():
    n = np.array([10**9, 7 * 10**9], dtype=np.int64)
    d = np.array([10**11, 3 * 10**11], dtype=np.int64)
    flops = compute_flops(n, d)
    assert flops.dtype == np.float64
    # 6e20 and 1.26e22 exceed int64's 9.2e18: an integer product would wrap around
    np.testing.assert_array_equal(flops, [6e20, 1.26e22])


def test_load_dataframe_canonical_schema():
    table = load_runs(_frame(), mapping=MAP)
    assert isinstance(table, RunTable) and len(table) == 4
    assert table.frame.columns[:6].tolist() == ["run_id", "N", "D", "C", "loss", "lr"]
    for column in ("N", "D", "C", "loss", "lr"):
        assert table.frame[column].dtype == np.float64
    np.testing.assert_array_equal(table.C, [6e20, 6e20, 2.4e21, 2.4e21])
    np.testing.assert_array_equal(table.loss, [2.5, 2.4, 2.2, 2.3])
    assert table.frame["run_id"].tolist() == ["row1", "row2", "row3", "row4"]
    assert table.n_excluded == 0 and len(table.excluded) == 0
    assert table.source == "<DataFrame>"
    assert table.hyperparameter_array.shape == (4, 1)


def test_default_hyperparameters_skip_bookkeeping_and_cell_constants():
    # width is fixed per (N, D) cell, seed is bookkeeping, loss_se names a loss: only lr varies
    assert load_runs(_frame(), mapping=MAP).hyperparameters == ("lr",)


def test_default_hyperparameters_skip_measured_and_derived_columns():
    # A grid of 2 cells × 3 lr × 2 batch sizes × 2 warmups, with what a training log adds:
    # the wall time of each run (a distinct value per run, before the settings in the file)
    # and the iteration count tokens / (batch · 2048), which varies inside a cell with the
    # batch. Only the three settings are axes (a new-user trial's replay of the StepLaw MoE
    # file took 'ti', 'average_iter_time', 'final_iter' and 'total_time' as axes too).
    rng = np.random.default_rng(0)
    rows = [(n, d, lr, bs, w) for n, d in ((1e8, 2e9), (3e8, 6e9)) for lr in (1e-4, 3e-4, 1e-3)
            for bs in (64, 256) for w in (100, 1000)]
    frame = pd.DataFrame(rows, columns=["params", "tokens", "lr", "bs", "warmup"])
    frame.insert(2, "wall_seconds", rng.uniform(1e3, 1e4, len(frame)))
    frame["iters"] = frame["tokens"] / (frame["bs"] * 2048)
    frame["loss"] = 3.0 + rng.normal(0, 0.01, len(frame))
    table = load_runs(frame, mapping={"N": "params", "D": "tokens"})
    assert table.hyperparameters == ("lr", "bs", "warmup")
    # one warmup only: the two other settings stay the axes
    one_warmup = frame[frame["warmup"] == 100].drop(columns="warmup")
    assert load_runs(one_warmup, mapping={"N": "params", "D": "tokens"}).hyperparameters == (
        "lr", "bs")
    # random search: lr and weight decay drawn per run (unique, a tie in distinct values)
    # beside a batch size of the grid; all three stay, although lr alone tells runs apart
    n = 40
    random = pd.DataFrame({"params": np.repeat([1e8, 3e8], n // 2), "tokens": 2e9,
                           "lr": rng.uniform(1e-4, 1e-3, n), "wd": rng.uniform(0, 0.1, n),
                           "bs": np.tile([64, 256], n // 2), "loss": 3.0})
    assert load_runs(random, mapping={"N": "params", "D": "tokens"}).hyperparameters == (
        "lr", "wd", "bs")
    # a grid table keeps a derived column: it is still a value to launch a run with
    from scalebo.search.grid import Grid

    grid = Grid.from_frame(frame.drop(columns=["loss", "wall_seconds"]).rename(
        columns={"params": "N", "tokens": "D"}), n_held_out_cells=0)
    assert grid.axes == ("lr", "bs", "warmup", "iters")


def test_given_compute_column_is_kept():
    frame = _frame().assign(flops=[1.0, 2.0, 3.0, 4.0])
    table = load_runs(frame, mapping={**MAP, "C": "flops"})
    np.testing.assert_array_equal(table.C, [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json"])
def test_file_formats_give_the_same_table(tmp_path, suffix):
    frame = _frame()
    path = tmp_path / f"runs{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix in (".parquet", ".pq"):
        frame.to_parquet(path)
    elif suffix == ".json":
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    else:
        frame.to_json(path, orient="records", lines=True)
    table = load_runs(path, mapping=MAP)
    reference = load_runs(frame, mapping=MAP)
    assert table.source == str(path)
    pd.testing.assert_frame_equal(
        table.frame[["N", "D", "C", "loss", "lr"]], reference.frame[["N", "D", "C", "loss", "lr"]]
    )


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_a_csv_separated_otherwise_reads_as_the_same_table(tmp_path, sep):
    path = tmp_path / "runs.csv"
    _frame().to_csv(path, index=False, sep=sep)
    table = load_runs(path, mapping=MAP)
    reference = load_runs(_frame(), mapping=MAP)
    pd.testing.assert_frame_equal(table.frame[["N", "D", "C", "loss", "lr"]],
                                  reference.frame[["N", "D", "C", "loss", "lr"]])


@pytest.mark.parametrize("rows, where", [("3,1\n2e8;4e9;2,9", "data rows 1, 2"),
                                         ("3,1\n2e8;4e9;2.9", "data row 1")])
def test_a_semicolon_csv_with_decimal_commas_names_the_value(tmp_path, rows, where):
    path = tmp_path / "runs.csv"
    path.write_text(f"N;D;loss\n1e8;2e9;{rows}\n")
    with pytest.raises(RunTableError, match=rf"{where}, column 'loss'.*got '3,1'.* Decimal "
                                            r"commas are not read: write the number with a "
                                            r"point \(3\.1, not 3,1\)\.$"):
        load_runs(path)


def test_a_one_column_csv_is_not_reread(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("loss\n3.1\n2.9\n")
    with pytest.raises(RunTableError, match=r"missing required column\(s\) \['N', 'D'\]"):
        load_runs(path)


def test_mapping_mistakes_name_the_files_own_columns():
    """A typo in --map gets the closest column; a required column left unmapped lists the
    file's own names (it listed 'N', 'D' as renamed) and the whole --map to write."""
    frame = pd.DataFrame({"model_params": [1e8, 2e8], "train_tokens": [1e9, 1e9],
                          "final_loss": [3.0, 2.9]})
    with pytest.raises(RunTableError) as info:
        load_runs(frame, mapping={"N": "model_param", "D": "train_tokens", "loss": "final_loss"})
    assert ("mapped column(s) {'N': 'model_param'} not found (did you mean 'model_params' for "
            "'model_param'?)") in str(info.value)
    with pytest.raises(RunTableError) as info:
        load_runs(frame, mapping={"N": "model_params", "D": "train_tokens"})
    assert ("missing required column(s) ['loss'] (N: parameters, D: tokens, loss: nats). The "
            "file's columns: ['model_params', 'train_tokens', 'final_loss']. Map yours with "
            "--map N=model_params,D=train_tokens,loss=final_loss") in str(info.value)


def test_json_lines_in_a_json_file(tmp_path):
    path = tmp_path / "runs.json"
    _frame().to_json(path, orient="records", lines=True)
    assert len(load_runs(path, mapping=MAP)) == 4


def test_unsupported_suffix_and_missing_file(tmp_path):
    with pytest.raises(RunTableError, match=r"unsupported file type '\.xlsx'"):
        load_runs(tmp_path / "runs.xlsx")
    with pytest.raises(RunTableError, match="no such file"):
        load_runs(tmp_path / "absent.csv")


@pytest.mark.parametrize("name, text", [("runs.csv", ""), ("runs.csv", "\n \n"),
                                        ("runs.json", ""), ("runs.tsv", "\n")])
def test_an_empty_file_says_so(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RunTableError, match=rf"{name}: the file is empty; expected a header"):
        load_runs(path)


def test_spaces_around_column_names_are_removed_with_a_warning(tmp_path):
    """'lr ' in a header is the column 'lr' for every command (``fit`` took 'lr ' as a
    hyperparameter that ``--hyperparameters lr`` could not name, and a sweep's header check,
    which strips names, passed while every cell failed); names that become equal are an
    error."""
    path = tmp_path / "runs.csv"
    path.write_text("N, D ,lr ,loss\n1e8,2e9,1e-3,3.1\n2e8,4e9,1e-3,2.9\n")
    with pytest.warns(UserWarning, match=r"runs.csv: spaces around column name\(s\) "
                      r"\[' D ', 'lr '\] removed \(read as \['D', 'lr'\]\)"):
        table = load_runs(path, hyperparameters=["lr"])
    assert list(table.frame["lr"]) == [1e-3, 1e-3] and list(table.frame["D"]) == [2e9, 4e9]
    path.write_text("N,D,lr,lr ,loss\n1e8,2e9,1e-3,2e-3,3.1\n")
    with pytest.raises(RunTableError, match=r"runs.csv: columns differ only by spaces around "
                                            r"their names \(\['lr'\]: \['lr', 'lr '\]\)"):
        load_runs(path)


def test_errors_name_the_file_column_behind_a_mapping(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("params,tokens,final_loss\n1e8,2e9,3.1\n2e8,4e9,abc\n")
    mapping = {"N": "params", "D": "tokens", "loss": "final_loss"}
    with pytest.raises(RunTableError, match=r"data row 2, column 'loss' \(file column "
                                            r"'final_loss'\): expected a number, got 'abc'"):
        load_runs(path, mapping=mapping)
    path.write_text("params,tokens,final_loss\n1e8,2e9,3.1\n-2e8,4e9,2.9\n")
    with pytest.raises(RunTableError, match=r"column 'N' \(parameters; file column 'params'\), "
                                            r"data row 2: expected a finite value > 0"):
        load_runs(path, mapping=mapping)
    path.write_text("N,D,loss\n1e8,2e9,3.1\n-2e8,4e9,2.9\n")  # no mapping: the name alone
    with pytest.raises(RunTableError, match=r"column 'N' \(parameters\), data row 2"):
        load_runs(path)


def test_parse_mapping():
    assert parse_mapping("N=params, D=tokens,loss=smooth loss") == {
        "N": "params",
        "D": "tokens",
        "loss": "smooth loss",
    }
    with pytest.raises(RunTableError, match="not of the form"):
        parse_mapping("N:params")
    with pytest.raises(RunTableError, match="'size' is not a canonical column"):
        parse_mapping("size=params")
    with pytest.raises(RunTableError, match="mapped twice"):
        parse_mapping("N=a,N=b")
    # items split by ';' were read as one column named "params;D=tokens"
    with pytest.raises(RunTableError, match=r"separate its items with commas, not ';': "
                       r"'N=params,D=tokens'\.$"):
        parse_mapping("N=params;D=tokens")
    assert parse_mapping("loss=val;loss") == {"loss": "val;loss"}  # a ';' alone is a name


def test_mapping_keeps_displaced_column():
    frame = _frame().rename(columns={"params": "N"}).assign(loss=9.0)
    table = load_runs(frame, mapping={"D": "tokens", "loss": "val_loss"})
    np.testing.assert_array_equal(table.loss, [2.5, 2.4, 2.2, 2.3])
    assert (table.frame["loss_unmapped"] == 9.0).all()


def test_missing_required_column_lists_columns_and_suggests_map():
    with pytest.raises(RunTableError) as info:
        load_runs(_frame(), mapping={"N": "params"})
    message = str(info.value)
    assert "['D', 'loss']" in message and "'tokens'" in message
    # the columns spell D and the loss in a common way: the hint names them, beside the
    # mapping already given (the whole --map to write)
    assert "--map N=params,D=tokens,loss=val_loss " in message


def test_mapping_to_absent_column():
    with pytest.raises(RunTableError, match="'nope'.*not found"):
        load_runs(_frame(), mapping={**MAP, "N": "nope"})


def test_non_numeric_value_names_value_row_and_column(tmp_path):
    path = tmp_path / "runs.csv"
    frame = _frame().astype({"tokens": object})
    frame.loc[2, "tokens"] = "2e11x"
    frame.to_csv(path, index=False)
    with pytest.raises(RunTableError) as info:
        load_runs(path, mapping=MAP)
    message = str(info.value)
    assert str(path) in message and "'D'" in message and "'2e11x'" in message
    assert "row 3" in message


def test_nonpositive_size_is_an_error():
    frame = _frame()
    frame.loc[1, "params"] = 0
    expected = r"'N' \(parameters; file column 'params'\), data row 2: expected a finite value > 0"
    with pytest.raises(RunTableError, match=expected):
        load_runs(frame, mapping=MAP)


def test_nonpositive_loss_is_an_error():
    frame = _frame()
    frame.loc[3, "val_loss"] = -1.0
    with pytest.raises(RunTableError, match="row 4"):
        load_runs(frame, mapping=MAP)


def test_non_finite_and_diverged_losses_are_excluded_with_a_warning():
    frame = _frame()
    frame.loc[0, "val_loss"] = np.nan
    frame.loc[1, "val_loss"] = np.inf
    frame.loc[2, "val_loss"] = 7.0
    with pytest.warns(ExcludedRunsWarning, match=r"excluded 3 of 4 runs: 2 non-finite.*1 diverged"):
        table = load_runs(frame, mapping=MAP, diverged_above=4.0)
    assert len(table) == 1 and table.n_excluded == 3
    assert table.frame.index.tolist() == [3]  # the source position survives
    assert table.excluded["reason"].tolist() == [
        ExclusionReason.NON_FINITE,
        ExclusionReason.NON_FINITE,
        ExclusionReason.DIVERGED,
    ]


def test_a_campaigns_failed_and_running_rows_are_excluded_with_a_warning():
    # A trial: `fit` on a campaign's runs file used a failed run's 2.5 and a running run's
    # 2.6 as finished losses, which `suggest` and `status` ignore.
    frame = _frame().assign(status=["completed", " Failed", "RUNNING", ""])
    with pytest.warns(ExcludedRunsWarning, match=r"excluded 2 of 4 runs: 2 status failed or "
                                                 r"running, so not a finished run's loss "
                                                 r"\(data rows 2, 3\)"):
        table = load_runs(frame, mapping=MAP)
    assert table.frame.index.tolist() == [0, 3] and "status" not in table.hyperparameters
    assert table.excluded["reason"].tolist() == [ExclusionReason.NOT_COMPLETED] * 2
    # a failed run may have no loss, or none that is positive: no error for it
    frame.loc[1, "val_loss"] = -1.0
    with pytest.warns(ExcludedRunsWarning):
        assert len(load_runs(frame, mapping=MAP)) == 2
    # a campaign's words beside others: failed and running out, a known synonym read as its
    # campaign word (crashed: failed), an unknown word named and fitted
    odd = _frame().assign(status=["completed", "crashed", "failed", "weird"])
    with pytest.warns(UserWarning) as caught:
        assert load_runs(odd, mapping=MAP).frame.index.tolist() == [0, 3]
    assert [str(w.message) for w in caught] == [
        "<DataFrame>: column 'status' has 'weird', not completed, failed or running: those "
        "rows are fitted as finished runs",
        "<DataFrame>: excluded 2 of 4 runs: 2 status failed or running, so not a finished "
        "run's loss (data rows 2, 3). They are listed in RunTable.excluded."]
    # W&B's words (finished / crashed / killed): a status column all the same, read as the
    # campaign words they mean (a review: a crashed run was fitted as finished)
    wandb = _frame().assign(status=["finished", "crashed", "finished", "Killed"])
    with pytest.warns(UserWarning) as caught:
        assert load_runs(wandb, mapping=MAP).frame.index.tolist() == [0, 2]
    assert [str(w.message) for w in caught] == [
        "<DataFrame>: excluded 2 of 4 runs: 2 status failed or running, so not a finished "
        "run's loss (data rows 2, 4). They are listed in RunTable.excluded."]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every run finished: nothing to say
        assert len(load_runs(_frame().assign(status="finished"), mapping=MAP)) == 4

    # a status column of other values is not a campaign's: nothing is excluded for it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_runs(_frame().assign(status=["ok", "ok", "retry", "ok"]),
                             mapping=MAP)) == 4


def test_all_runs_excluded_is_an_error():
    frame = _frame().assign(val_loss=np.nan)
    with pytest.raises(RunTableError, match="nothing is left"):
        load_runs(frame, mapping=MAP)


def test_repeated_configuration_names_both_rows():
    frame = pd.concat([_frame(), _frame().iloc[[2]]], ignore_index=True)
    with pytest.raises(RunTableError, match=r"data rows 3 and 5 repeat the configuration"):
        load_runs(frame, mapping=MAP, hyperparameters=["lr"])
    # values in 6 significant digits, the CLI's option before Python's spelling
    odd = pd.DataFrame({"N": [1e8, 1e8], "D": [10**9.5] * 2, "loss": [3.0, 3.1]})
    with pytest.raises(RunTableError) as info:
        load_runs(odd)
    assert "(N=1e+08, D=3.16228e+09); 1 row(s) repeat an earlier one. Average repeats with " \
           "--duplicates mean (a sweep config: duplicates: mean in the dataset's options; " \
           "Python: duplicates='mean')" in str(info.value)


def test_repeats_averaged_with_mean():
    extra = _frame().iloc[[2, 2]].assign(val_loss=[2.4, 2.6])
    frame = pd.concat([_frame(), extra], ignore_index=True)
    with pytest.warns(UserWarning, match="6 runs merged into 4"):
        table = load_runs(frame, mapping=MAP, hyperparameters=["lr"], duplicates="mean")
    assert table.frame["n_repeats"].tolist() == [1, 1, 3, 1]
    np.testing.assert_allclose(table.loss, [2.5, 2.4, (2.2 + 2.4 + 2.6) / 3, 2.3], rtol=1e-15)
    assert table.frame.index.tolist() == [0, 1, 2, 3]


def test_config_columns_take_part_in_the_repeat_check():
    frame = pd.concat([_frame().assign(setup="a"), _frame().assign(setup="b")], ignore_index=True)
    with pytest.raises(RunTableError, match="repeat"):
        load_runs(frame, mapping=MAP, hyperparameters=["lr"])
    table = load_runs(frame, mapping=MAP, hyperparameters=["lr"], config_columns=["setup"])
    assert len(table) == 8 and table.config_columns == ("setup",)


def test_missing_hyperparameter_value_is_an_error():
    frame = _frame()
    frame.loc[1, "lr"] = np.nan
    with pytest.raises(RunTableError, match="'lr', data row 2: missing"):
        load_runs(frame, mapping=MAP, hyperparameters=["lr"])


def test_run_ids_from_column_must_be_unique():
    table = load_runs(_frame().assign(name=["a", "b", "c", "d"]), mapping=MAP, run_id="name")
    assert table.frame["run_id"].tolist() == ["a", "b", "c", "d"]
    with pytest.raises(RunTableError, match="'a' appears on data rows 1, 4"):
        load_runs(_frame().assign(name=["a", "b", "c", "a"]), mapping=MAP, run_id="name")


def test_with_frame_keeps_fields_and_checks_columns():
    table = load_runs(_frame(), mapping=MAP)
    subset = table.with_frame(table.frame.iloc[:2])
    assert len(subset) == 2 and subset.hyperparameters == table.hyperparameters
    with pytest.raises(RunTableError, match="lacks column"):
        table.with_frame(table.frame.drop(columns=["lr"]))


def test_no_warning_on_a_clean_table():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(_frame(), mapping=MAP)


def test_a_typo_among_numbers_is_an_error_but_a_column_of_names_is_not():
    """Default hyperparameters: a text column whose values are mostly numbers has a typo
    (data row, column, value named); a column of names stays a categorical column."""
    base = pd.DataFrame({"N": [1e8] * 4 + [2e8] * 4, "D": [1e9] * 8,
                         "lr": ["1e-4", "3e-4", "1e-3", "3e-3"] * 2,
                         "loss": [3.1, 3.0, 3.05, 3.2, 2.9, 2.8, 2.85, 3.0]})
    assert load_runs(base.assign(lr=base.lr.astype(float))).hyperparameters == ("lr",)
    typo = base.copy()
    typo.loc[5, "lr"] = "le-3"
    with pytest.raises(RunTableError, match=r"^<DataFrame>: data row 6, column 'lr': expected "
                       r"a number, got 'le-3' \(the column is numeric: 7 of its 8 values are "
                       r"numbers; a categorical column is mostly text\)\. Fix the value"):
        load_runs(typo)
    assert "A run without a loss" not in str(pytest.raises(RunTableError, load_runs, typo).value)
    word = base.astype({"loss": object})
    word.loc[2, "loss"] = "diverged"  # a trial's crashed run: an empty cell or NaN says it
    with pytest.raises(RunTableError, match=r"data row 3, column 'loss': expected a number, got "
                       r"'diverged'\. .* A run without a loss \(crashed, diverged\) is an empty "
                       r"cell or NaN: it is then left out of fits"):
        load_runs(word)
    two = typo.copy()
    two.loc[6, "lr"] = "1e-3?"
    with pytest.raises(RunTableError, match=r"data rows 6, 7, column 'lr'"):
        load_runs(two)
    names = base.assign(opt=["adam", "sgd", "lion", "adam"] * 2)
    table = load_runs(names.assign(lr=names.lr.astype(float)), duplicates="error")
    assert table.hyperparameters == ("lr",)  # run tables keep numeric axes; no error


def test_numeric_typos_rule():
    from scalebo.data.columns import numeric_typos

    assert numeric_typos(pd.Series(["1e-3", "3e-4x", "2e-3"])).tolist() == [1]
    assert numeric_typos(pd.Series(["adam", "sgd", "1"])).tolist() == []  # names
    assert numeric_typos(pd.Series(["1", "x"])).tolist() == [1]  # half: numbers (as grids)
    assert numeric_typos(pd.Series(["1", "x", "y"])).tolist() == []  # a minority: names
    assert numeric_typos(pd.Series([1.0, float("nan")])).tolist() == []  # numeric dtype
    assert numeric_typos(pd.Series(["1", None, "2", "inf?"])).tolist() == [3]


def test_a_bad_value_names_its_data_row_once():
    frame = _frame()
    frame.loc[1, "params"] = -1.0
    with pytest.raises(RunTableError) as info:
        load_runs(frame, mapping=MAP)
    assert str(info.value).endswith("data row 2: expected a finite value > 0, got -1.0.")
    frame.loc[3, "params"] = 0.0
    with pytest.raises(RunTableError, match=r"data rows 2, 4: expected a finite value > 0, "
                                            r"got -1.0 \(first at data row 2\)\.$"):
        load_runs(frame, mapping=MAP)


def test_columns_that_cannot_be_hyperparameters_are_not_checked_for_typos():
    """A W&B-style export: 'OOM' in train_loss, 'random' in seed are not typos of a
    hyperparameter (neither column can be one), so the table loads as it did."""
    frame = pd.DataFrame({"N": [1e8] * 4 + [2e8] * 4, "D": [1e9] * 8,
                          "lr": [1e-4, 3e-4, 1e-3, 3e-3] * 2,
                          "loss": [3.1, 3.0, 3.05, 3.2, 2.9, 2.8, 2.85, 3.0],
                          "train_loss": ["3.0", "2.9", "OOM", "3.1", "2.8", "2.7", "2.7", "2.9"],
                          "seed": ["1", "2", "3", "random", "1", "2", "3", "4"]})
    table = load_runs(frame)
    assert table.hyperparameters == ("lr",) and len(table) == 8
    inf = frame.assign(warmup=["100", "200", "inf", "100", "200", "100", "200", "100"])
    with pytest.raises(RunTableError, match=r"data row 3, column 'warmup': expected a finite "
                       r"number, got 'inf' \(the column is numeric: 8 of its 8 values"):
        load_runs(inf)


def test_text_column_rule_counts_blank_cells_as_empty():
    from scalebo.data.columns import text_column

    numeric, bad, n_numbers, n_present = text_column(
        pd.Series(["1e-3", " ", None, "2e-3", "x", "3e-3"]))
    assert (numeric, bad.tolist(), n_numbers, n_present) == (True, [4], 3, 4)
    many = pd.Series(["1e-3", "2e-3", "oops"] * 100_000)  # 300k cells, 3 distinct values
    numeric, bad, n_numbers, n_present = text_column(many)
    assert numeric and bad.size == 100_000 and bad[:2].tolist() == [2, 5]


def test_runs_told_apart_by_a_text_column_are_not_advised_to_be_averaged():
    """An optimizer column (adam / sgd) makes rows look repeated: the error names it and says
    to name it as a hyperparameter (it once advised --duplicates mean, which would average two
    optimizers into one loss). Named, it is a categorical hyperparameter kept as text."""
    frame = pd.DataFrame({"N": [1e8] * 4, "D": [1e9] * 4, "lr": [1e-3, 3e-3] * 2,
                          "opt": ["adam", "adam", " sgd", "sgd"], "loss": [3.0, 3.1, 3.2, 3.3]})
    with pytest.raises(RunTableError) as info:
        load_runs(frame)
    message = str(info.value)
    assert "data rows 1 and 3 repeat the configuration" in message
    assert "They differ in the text column 'opt' ('adam' vs ' sgd'), so do not average them: " \
           "name it with the other hyperparameters to make it a categorical one" in message
    assert "--duplicates mean" not in message
    table = load_runs(frame, hyperparameters=["lr", "opt"])  # the advice works
    assert table.hyperparameters == ("lr", "opt") and table.categorical == ("opt",)
    assert table.frame["opt"].tolist() == ["adam", "adam", "sgd", "sgd"]  # stripped labels
    assert table.frame["lr"].dtype == np.float64
    with pytest.raises(RunTableError, match=r"\['opt'\] are categorical"):
        _ = table.hyperparameter_array
    with pytest.warns(UserWarning, match="averaged the loss of repeated configurations"):
        assert load_runs(frame, hyperparameters=["lr"], duplicates="mean").categorical == ()
    blank = frame.assign(opt=["adam", "", "sgd", "sgd"])
    with pytest.raises(RunTableError, match=r"column 'opt', data row 2: missing value; a "
                                            r"categorical hyperparameter needs a value"):
        load_runs(blank, hyperparameters=["lr", "opt"])
    typo = frame.assign(lr=["1e-3", "3e-3", "1e-3", "3e-3x"])  # numbers with a typo: not labels
    with pytest.raises(RunTableError, match=r"data row 4, column 'lr': expected a number"):
        load_runs(typo, hyperparameters=["lr", "opt"])


def test_a_categorical_hyperparameter_is_a_categorical_axis_of_a_replay():
    """A replay of a run table with an optimizer axis: the grid has one configuration per
    (N, D, lr, optimizer), the optimizer column is categorical for the GP, and the reference
    envelope holds only the better optimizer's runs (sgd is 0.05 nats worse everywhere)."""
    from scalebo.bench.problems import problem_from_table
    from scalebo.bench.synthetic import make_synthetic

    base = make_synthetic(N=[5e7, 1e8, 2e8, 4e8], D=[1e9, 2e9, 4e9], lr=[5e-4, 1e-3, 2e-3],
                          bs=[128], seed=0)[["N", "D", "lr", "loss"]]
    frame = pd.concat([base.assign(optimizer="adam"),
                       base.assign(optimizer="sgd", loss=base["loss"] + 0.05)])
    table = load_runs(frame, hyperparameters=["lr", "optimizer"])
    problem = problem_from_table(table, name="opt", n_held_out_cells=1,
                                 chinchilla_starts=np.array([[1.5, 5.0, 0.3, 5.0, 0.3]]))
    grid = problem.grid
    assert grid.n_configs == len(frame) == 72 and grid.axes == ("lr", "optimizer")
    assert grid.categorical_columns and len(grid.categorical_columns) == 1
    assert set(grid.configs["optimizer"].iloc[problem.envelope_idx]) == {"adam"}


def test_a_blank_cell_in_a_numeric_axis_is_named_not_silently_dropped():
    """lr varies inside cells but data row 3 is blank: lr cannot be an axis, and the repeats
    error names lr and the blank row instead of advising to average; with averaging the
    load warns first. A complete column, a constant one and a text column are unaffected."""
    from scalebo.data.columns import blank_axes

    base = pd.DataFrame({"N": [1e8] * 4 + [2e8] * 4, "D": [1e9] * 8,
                         "lr": [1e-4, 3e-4, 1e-3, 3e-3] * 2,
                         "loss": [3.1, 3.0, 3.05, 3.2, 2.9, 2.8, 2.85, 3.0]})
    blank = base.copy()
    blank.loc[2, "lr"] = np.nan
    assert blank_axes(blank).keys() == {"lr"} and blank_axes(blank)["lr"].tolist() == [2]
    assert blank_axes(base) == {}
    assert blank_axes(blank.assign(lr=1e-3).assign(width=[np.nan] + [1.0] * 7)) == {}
    assert blank_axes(blank.assign(lr=["1e-4", "3e-4", "", "3e-3"] * 2)).keys() == {"lr"}
    assert blank_axes(blank.assign(lr=["a", "b", "", "c"] * 2)) == {}  # names, not numbers
    # the cause leads the error (it once came after "data rows 1 and 5 repeat ...")
    with pytest.raises(RunTableError, match=r"^<DataFrame>: column 'lr' varies inside \(N, D\) "
                       r"cells like a hyperparameter but is blank on data row 3, so it is not "
                       r"one, and without it data rows 1 and 2 repeat the configuration "
                       r"\(N=1e\+08, D=1e\+09\); 6 row\(s\) repeat an earlier one\. Fill"), \
            pytest.warns(UserWarning, match="but data row 3 is blank"):
        load_runs(blank)
    with pytest.warns(UserWarning, match=r"column 'lr' varies inside \(N, D\) cells like a "
                      r"hyperparameter, but data row 3 is blank"), \
            pytest.warns(UserWarning, match="averaged the loss"):
        table = load_runs(blank, duplicates="mean")
    assert table.hyperparameters == () and len(table) == 2
    with pytest.raises(RunTableError, match=r"column 'lr', data row 3: missing"):
        load_runs(blank, hyperparameters=["lr"])


def test_numbers_written_as_text_read_as_python_reads_them():
    """'10_000' (a digit separator, as Python's float reads it) and ' 3e-4 ' are numbers in
    every rule: the typo check, the default hyperparameters and named ones; '1__0' is not."""
    from scalebo.data.columns import text_column, to_numbers

    got = to_numbers(pd.Series([" 1_000", "2e1_0", "1__0", None, "x", 3, True]))
    np.testing.assert_array_equal(got, [1000.0, 2e10, np.nan, np.nan, np.nan, 3.0, np.nan])
    assert to_numbers(pd.Series([True, False])).isna().all()  # booleans are not numbers
    assert np.isnan(to_numbers(pd.Series(["1__0", "_1", "1_"]))).all()
    assert text_column(pd.Series(["1_000", "2_000", "3000"]))[0]  # numeric, no typo
    frame = pd.DataFrame({"N": [1e8] * 2 + [2e8] * 2, "D": [1e9] * 4,
                          "warmup": ["1_000", " 2_000 "] * 2, "loss": [3.0, 3.1, 2.9, 2.95]})
    default = load_runs(frame)
    assert default.hyperparameters == ("warmup",)
    assert default.frame["warmup"].tolist() == [1000.0, 2000.0, 1000.0, 2000.0]
    named = load_runs(frame, hyperparameters=["warmup"])
    assert named.frame["warmup"].tolist() == [1000.0, 2000.0, 1000.0, 2000.0]
    with pytest.raises(RunTableError, match=r"data row 2, column 'warmup': expected a number, "
                                            r"got '2__000'"):
        load_runs(frame.assign(warmup=["1_000", "2__000", "1_000", "2_000"]))


def test_a_crashed_run_takes_no_part_in_choosing_the_axes():
    """A run with a NaN loss and a blank lr (it crashed before logging) is excluded; it no
    longer knocks lr out of the hyperparameters (which turned 8 runs into repeats with the
    advice to average them). A metric column with a gap, where lr already tells every run
    apart, is not warned about."""
    frame = pd.DataFrame({"N": [1e8] * 4 + [2e8] * 4, "D": [1e9] * 8,
                          "lr": [1e-4, 3e-4, 1e-3, 3e-3] * 2,
                          "loss": [3.1, 3.0, 3.05, 3.2, 2.9, 2.8, 2.85, 3.0],
                          "grad_norm": [0.1, 0.2, np.nan, 0.4, 0.5, 0.6, 0.7, 0.8]})
    crashed = frame.copy()
    crashed.loc[2, ["lr", "loss"]] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_runs(crashed.drop(columns="grad_norm"))
    assert table.hyperparameters == ("lr",) and len(table) == 7
    assert table.excluded["reason"].tolist() == ["non_finite"]
    assert [type(w.message) for w in caught] == [ExcludedRunsWarning]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_runs(frame).hyperparameters == ("lr",)  # grad_norm: a gap, no warning


def test_a_named_boolean_column_is_a_categorical_hyperparameter():
    frame = pd.DataFrame({"N": [1e8] * 4, "D": [1e9] * 4, "lr": [1e-3, 3e-3] * 2,
                          "qk_norm": [True, True, False, False], "loss": [3.0, 3.1, 3.2, 3.3]})
    table = load_runs(frame, hyperparameters=["lr", "qk_norm"])
    assert table.categorical == ("qk_norm",)
    assert table.frame["qk_norm"].tolist() == ["True", "True", "False", "False"]
    with pytest.raises(RunTableError, match=r"They differ in the text column 'qk_norm' "
                       r"\(True vs False\), so do not average them: name it"):
        load_runs(frame)  # unnamed: not an axis, and the advice is not to average
    # a trial: two seeds' checkpoints told apart by a run label were advised to make the
    # label a categorical hyperparameter; a label is pointed to --run first
    seeds = pd.DataFrame({"N": [1e8] * 4, "D": [1e9, 2e9] * 2, "loss": [3.0, 2.9, 3.01, 2.91],
                          "run_name": ["a", "a", "a_seed2", "a_seed2"]})
    with pytest.raises(RunTableError, match=r"'run_name' \('a' vs 'a_seed2'\), so do not "
                       r"average them: if they are checkpoints of two training runs \(seeds\), "
                       r"say so with --run run_name"):
        load_runs(seeds)


def test_missing_required_columns_name_the_likely_mapping(tmp_path):
    """A table that spells N, D and the loss in a common way gets the exact --map to use;
    nothing is renamed without being asked, and unknown spellings keep a placeholder."""
    from scalebo.data.columns import suggested_mapping

    path = tmp_path / "runs.csv"
    pd.DataFrame({"Params": [1e8, 2e8], "num_tokens": [1e9, 2e9], "lr": [1e-3, 1e-3],
                  "eval/loss": [3.1, 2.9]}).to_csv(path, index=False)
    with pytest.raises(RunTableError) as err:
        load_runs(path)
    assert "--map N=Params,D=num_tokens,loss=eval/loss " in str(err.value)
    frame = pd.DataFrame({"size": [1e8], "amount": [1e9], "loss": [3.0]})
    with pytest.raises(RunTableError, match=r"--map N=<column>,D=<column> "):
        load_runs(frame)
    with pytest.raises(RunTableError, match=r"--map N=<column>,D=toks "):  # 'tokens' typo'd
        load_runs(frame.rename(columns={"amount": "toks"}))
    # two columns that spell the same alias, or one column fitting two names: no guess
    assert suggested_mapping(["params", "PARAMS", "tokens"], ["N", "D"]) == {"D": "tokens"}
    assert suggested_mapping(["n_params", "non-embedding params"], ["N"]) == {"N": "n_params"}
    assert suggested_mapping(["d"], ["N", "D"]) == {"D": "d"}
    # another case or a typo of a spelling: the one close column; two close ones: no guess
    assert suggested_mapping(["N", "D", "Loss"], ["loss"]) == {"loss": "Loss"}
    assert suggested_mapping(["N", "tokns", "los"], ["D", "loss"]) == {"D": "tokns",
                                                                      "loss": "los"}
    assert suggested_mapping(["los", "loss_"], ["loss"]) == {"loss": "loss_"}  # exact key
    assert suggested_mapping(["lossa", "lossb"], ["loss"]) == {}


def test_a_mistyped_hyperparameter_column_gets_the_closest_name(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("params,tokens,learning_rate,loss\n1e8,2e9,1e-3,3.1\n2e8,4e9,1e-3,2.9\n")
    with pytest.raises(RunTableError, match=r"runs.csv: hyperparameter column\(s\) "
                       r"\['learning_rat' \(did you mean 'learning_rate'\?\)\] not found; "
                       r"available columns: \['N', 'D', 'learning_rate', 'loss'\] \(N, D, "
                       r"loss: as mapped\)\.$"):  # a trial: not C and run_id, made by scalebo
        load_runs(path, mapping={"N": "params", "D": "tokens"},
                  hyperparameters=["learning_rat"])
    # a two-letter name one letter off scores 0.5 (under the usual 0.6 cutoff)
    path.write_text("params,tokens,lr,bs,loss\n1e8,2e9,1e-3,64,3.1\n2e8,4e9,1e-3,64,2.9\n")
    with pytest.raises(RunTableError, match=r"\['bz' \(did you mean 'bs'\?\)\] not found"):
        load_runs(path, mapping={"N": "params", "D": "tokens"}, hyperparameters=["lr", "bz"])


@pytest.mark.parametrize(("name", "text", "said"), [
    # pandas said 'Expected 3 fields in line 3, saw 4' (a file line, the header counted; a
    # campaign trial read it as data row 3)
    ("runs.csv", "N,D,loss\n1e8,1e9,3.1\n2e8,1e9,3.0,9\n",
     r"runs.csv: data row 2 \(line 3 of the file\) has 4 fields where the header has 3"),
    # a blank line and a quoted line break shift pandas' line count (a review)
    ("runs.csv", 'N,D,loss,name\n1e8,1e9,3.1,"a\nb"\n\n2e8,1e9,3.0,x,9\n',
     r"runs.csv: data row 2 \(line 5 of the file\) has 5 fields where the header has 4"),
    # pandas said 'Expected object or value at position 455' (a trial)
    ("runs.jsonl", '{"N": 1e8, "D": 1e9, "loss": 3.1}\n\n{"N": 2e8, "D": 1e9\n',
     r"runs.jsonl: line 3 \(data row 2\) is not valid JSON \(Expecting ',' delimiter at "
     r"column 20\)"),
])
def test_a_malformed_row_names_its_data_row(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RunTableError, match=said):
        load_runs(path)


def test_a_short_csv_row_is_named_before_it_counts_as_failed(tmp_path):
    # A trial: '1e8,4e9' under 'N,D,loss' was only "a non-finite loss (data row 2)".
    path = tmp_path / "short.csv"
    path.write_text("N,D,loss\n1e8,2e9,3.45\n\n1e8,4e9\n2e8,2e9,3.2\n2e8,4e9,\n")
    with pytest.warns(UserWarning) as caught:
        table = load_runs(path)
    texts = [str(w.message) for w in caught]
    assert any("1 row(s) have fewer fields than the header's 3: data row 2 (2 fields)" in t
               for t in texts)  # the blank line is no data row; a trailing ',' is whole
    assert table.n_excluded == 2


def test_a_config_column_may_be_blank_only_on_runs_without_a_loss():
    frame = pd.DataFrame({"N": [1e8, 1e8, 2e8, 2e8], "D": [1e9, 2e9, 1e9, 2e9],
                          "loss": [3.0, np.nan, 2.9, 2.8], "run": ["a", None, "b", "b"]})
    table = load_runs(frame, config_columns=("run",))  # the blank run has no loss: excluded
    assert len(table) == 3 and table.n_excluded == 1
    frame.loc[0, "run"] = None
    with pytest.raises(RunTableError, match="column 'run', data row 1: missing"):
        load_runs(frame, config_columns=("run",))


def test_a_typo_in_a_column_no_fit_uses_is_a_warning():
    """A trial: '0.3x' in an 'error' column beside the loss (one run per cell, so not a
    setting) stopped a loss fit with advice to name hyperparameters. It is said and kept;
    the same typo in a column that tells runs of a cell apart stays an error (above)."""
    frame = pd.DataFrame({"N": [1e8, 1e8, 2e8, 2e8], "D": [1e9, 2e9, 1e9, 2e9],
                          "loss": [3.1, 3.0, 2.9, 2.8], "error": ["0.7", "0.3x", "0.6", "0.5"]})
    with pytest.warns(UserWarning, match=r"data row 2, column 'error': expected a number, got "
                      r"'0\.3x' .*; it is not taken as a hyperparameter, so its values are kept "
                      r"as written"):
        table = load_runs(frame)
    assert table.hyperparameters == () and len(table.frame) == 4
    assert table.frame["error"].tolist() == ["0.7", "0.3x", "0.6", "0.5"]
    # a review: the typo itself can be what makes a column vary inside a cell (lr 1e-3
    # everywhere, a second run of one cell at '3e-4x'): still the error that names it
    lr = frame.drop(columns="error").assign(N=[1e8, 1e8, 2e8, 4e8], D=1e9,
                                            lr=["1e-3", "3e-4x", "1e-3", "1e-3"])
    with pytest.raises(RunTableError, match=r"data row 2, column 'lr': expected a number, got "
                       r"'3e-4x'"):
        load_runs(lr)
    # a second review: a blank beside the typo made the probe drop the column (NaN)
    blank = pd.DataFrame({"N": [1e8] * 4 + [2e8] * 4, "D": 1e9,
                          "lr": ["1e-4", "3e-4", "1e-3x", "3e-3", "1e-4", "", "1e-3", "3e-3"],
                          "loss": [3.1, 3.0, 3.05, 3.2, 2.9, 2.8, 2.85, 3.0]})
    with pytest.raises(RunTableError, match=r"data row 3, column 'lr': expected a number, got "
                       r"'1e-3x'"):
        load_runs(blank)
    # a measured column beside a learning-rate sweep is not a setting: a warning too
    sweep = pd.DataFrame({"N": [1e8] * 3 + [2e8] * 3, "D": 1e9, "lr": [1e-3, 2e-3, 4e-3] * 2,
                          "loss": [3.1, 3.0, 3.2, 2.9, 2.8, 3.0],
                          "acc": ["0.31", "0.33x", "0.30", "0.35", "0.36", "0.34"]})
    with pytest.warns(UserWarning, match="column 'acc': expected a number"):
        assert load_runs(sweep).hyperparameters == ("lr",)
