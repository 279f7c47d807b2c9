"""Dataset loaders against the counts documented in each folder's SOURCE.md."""

import warnings

import numpy as np
import pytest

from scalebo.data.datasets import (
    DATASETS,
    data_dir,
    list_datasets,
    load_dataset,
    register_dataset,
    round_significant,
)
from scalebo.data.runs import ExclusionReason, RunTable, load_runs
from scalebo.errors import ExcludedRunsWarning, RunTableError

# --------------------------------------------------------------------------- no data needed


def test_round_significant_on_decimal_spelling():
    values = [0.01105, 0.0111, 0.0003453, 0.000345, 0.0009766, 1234.5, -0.01105, 0.0, 0.0221]
    expected = [0.0111, 0.0111, 0.000345, 0.000345, 0.000977, 1230.0, -0.0111, 0.0, 0.0221]
    np.testing.assert_array_equal(round_significant(values, 3), expected)
    np.testing.assert_array_equal(round_significant([[0.125, 0.135]], 2), [[0.13, 0.14]])


def test_data_dir_explicit_env_and_missing(tmp_path, monkeypatch):
    assert data_dir(tmp_path) == tmp_path
    monkeypatch.setenv("SCALEBO_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    monkeypatch.delenv("SCALEBO_DATA_DIR")
    with pytest.raises(FileNotFoundError, match="SCALEBO_DATA_DIR"):
        data_dir()
    with pytest.raises(FileNotFoundError, match="not a directory"):
        data_dir(tmp_path / "absent")


def test_registry(tmp_path, monkeypatch):
    assert {"steplaw", "oellm_english", "epoch_chinchilla", "porian_isoflop"} <= set(
        list_datasets()
    )
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("steplaw", DATASETS["steplaw"].loader, "again")
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope", tmp_path)
    with pytest.raises(ValueError, match=r"unknown dataset 'steplaw_mo' \(did you mean "
                                         r"'steplaw_moe'\?\); registered"):
        load_dataset("steplaw_mo", tmp_path)
    with pytest.raises(FileNotFoundError, match="steplaw/dense_lr_bs_loss.csv"):
        load_dataset("steplaw", tmp_path)

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "runs.csv").write_text("N,D,loss\n1e6,1e8,3.0\n2e6,2e8,2.5\n")
    monkeypatch.setitem(DATASETS, "mine", DATASETS["steplaw"])  # restored after the test
    register_dataset("mine", lambda root: load_runs(root / "mine" / "runs.csv"), "toy",
                     overwrite=True)
    table = load_dataset("mine", tmp_path)
    assert isinstance(table, RunTable) and table.loss.tolist() == [3.0, 2.5]


# --------------------------------------------------------------------------- public data


@pytest.fixture(scope="module")
def steplaw(data_dir):
    return load_dataset("steplaw", data_dir)


def test_steplaw_counts(steplaw):
    frame = steplaw.frame
    assert len(steplaw) == 1911 and steplaw.n_excluded == 0
    assert steplaw.hyperparameters == ("lr", "bs")
    assert sorted(frame["N"].unique().tolist()) == [
        214_663_680, 268_304_384, 429_260_800, 536_872_960, 1_073_741_824
    ]
    assert frame["D"].nunique() == 15
    assert frame.groupby(["N", "D"]).ngroups == 17
    assert frame["lr_raw"].nunique() == 26 and frame["lr"].nunique() == 14
    assert frame["lr"].min() == 2.44e-4 and frame["lr"].max() == 2.21e-2
    assert sorted(frame["bs"].unique().tolist()) == [
        16, 24, 32, 64, 96, 128, 192, 256, 352, 512, 736, 1024, 2048
    ]
    assert not frame.duplicated(["N", "D", "lr", "bs"]).any()
    # loss is the smoothed loss; 181 diverged runs (> 4 nats) are kept by default
    assert (frame["loss"] > 4).sum() == 181
    assert frame["loss"].max() == pytest.approx(11.09, abs=5e-3)
    assert not np.array_equal(frame["loss"], frame["raw_loss"])
    small = frame[(frame["N"] == 1_073_741_824) & (frame["D"].round(-8) == 5.69e10)]
    assert len(small) == 47 and small["lr"].nunique() == 5


def test_steplaw_moe_counts_active_parameters(data_dir):
    # steplaw/SOURCE.md: 708 rows, 4 D, 9 lr, 5 bs; its 3 total sizes (about 2.15e9) hide four
    # models of different sparsity, which N = active parameters (the file's Na) tells apart
    table = load_dataset("steplaw_moe", data_dir)
    frame = table.frame
    assert len(table) == 708 and table.n_excluded == 0 and table.hyperparameters == ("lr", "bs")
    assert sorted(frame["N"].unique().tolist()) == [187_973_632, 232_579_072, 590_436_352,
                                                    1_241_270_272]
    assert frame["N_total"].nunique() == 3 and frame["N_total"].between(2.15e9, 2.16e9).all()
    assert sorted(frame["D"].unique().tolist()) == [2e9, 4e9, 8e9, 2e10]
    assert frame.groupby(["N", "D"]).ngroups == 16 and frame.groupby(["N", "D"]).size().max() == 45
    assert frame["lr"].nunique() == 9 and sorted(frame["bs"].unique()) == [32, 64, 128, 256, 512]
    np.testing.assert_array_equal(table.C, 6.0 * table.N * table.D)
    first = frame.iloc[0]  # the file's first data row: 1 of 89 experts, lr 1.726e-4, bs 32
    assert (first["N"], first["moe_name"], first["lr"], first["bs"]) == (187_973_632, "1in89",
                                                                         1.73e-4, 32)
    assert first["loss"] == pytest.approx(2.680629944853511) and first["raw_loss"] == 2.721691


def test_steplaw_moe_envelope_is_the_sparse_models(data_dir):
    # the costliest acquirable cell (1.24B active at 8B tokens) lies off the compute envelope,
    # which the two sparsest models make
    from scalebo.bench.problems import load_problem

    problem = load_problem("steplaw_moe", data_dir=data_dir)
    N = problem.grid.configs["N"].to_numpy()
    assert set(N[problem.envelope_idx].tolist()) == {187_973_632, 232_579_072}
    costliest = np.argmax(np.where(problem.grid.held_out, -np.inf, problem.grid.cost))
    assert N[costliest] == 1_241_270_272 and costliest not in problem.envelope_idx


def test_steplaw_flops_float64(steplaw):
    assert steplaw.C.dtype == np.float64
    np.testing.assert_array_equal(steplaw.C, 6.0 * steplaw.N * steplaw.D)
    assert steplaw.C.max() > np.iinfo(np.int64).max  # int64 arithmetic would have overflowed


def test_steplaw_diverged_passthrough(data_dir):
    with pytest.warns(ExcludedRunsWarning, match="181 diverged"):
        table = load_dataset("steplaw", data_dir, diverged_above=4.0)
    assert len(table) == 1911 - 181 and table.n_excluded == 181
    assert set(table.excluded["reason"]) == {ExclusionReason.DIVERGED}


def test_oellm_english_counts(data_dir):
    table = load_dataset("oellm_english", data_dir)
    frame = table.frame
    assert len(table) == 909 and table.hyperparameters == ("lr", "bs")
    assert frame["N"].nunique() == 6 and frame["D"].nunique() == 9
    assert frame.groupby(["N", "D"]).ngroups == 51
    assert sorted(frame["lr"].unique().tolist()) == [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3]
    assert sorted(frame["bs"].unique().tolist()) == [16, 32, 64, 128, 256, 512, 1024]
    assert frame["N_approx"].value_counts().sort_index().tolist() == [189, 167, 170, 161, 163, 59]
    assert frame.loc[frame["N"] == frame["N"].max(), "D"].nunique() == 6
    assert frame["run_id"].str.startswith("dense_").all()
    np.testing.assert_allclose(table.C, 6.0 * table.N * table.D, rtol=1e-15)


def test_epoch_chinchilla(data_dir):
    # a trial: the default kept all 245 points without pointing to the published setting
    with pytest.warns(UserWarning, match=r"Besiroglu et al. \(2024\).*drop the 5 highest"):
        table = load_dataset("epoch_chinchilla", data_dir)
    assert len(table) == 245 and table.hyperparameters == ()
    assert table.N.min() == pytest.approx(57.3e6, rel=1e-3)
    assert table.N.max() == pytest.approx(16.2e9, rel=1e-2)
    np.testing.assert_allclose(table.C, table.frame["C"], rtol=0)  # the file's FLOPs kept
    np.testing.assert_allclose(6.0 * table.N * table.D, table.C, rtol=1e-14)
    assert table.D.min() == pytest.approx(0.25e9, rel=0.05)
    assert table.D.max() == pytest.approx(318e9, rel=0.01)

    dropped = load_dataset("epoch_chinchilla", data_dir, drop_highest_loss=5)
    assert len(dropped) == 240 and dropped.n_excluded == 5
    assert set(dropped.excluded["reason"]) == {ExclusionReason.DROPPED}
    five_worst = np.sort(table.loss)[-5:]
    np.testing.assert_array_equal(np.sort(dropped.excluded["loss"].to_numpy()), five_worst)
    assert dropped.loss.max() <= five_worst.min()


def test_porian_isoflop(data_dir):
    # 15 analysis configurations (corpora, recipes) in one table: said, with a way out
    with pytest.warns(UserWarning, match=r"porian_isoflop: the table pools 15 analysis "
                      r"configurations .* --dataset-option dataset=rw --dataset-option "):
        table = load_dataset("porian_isoflop", data_dir)
    frame = table.frame
    assert len(table) == 1745 and table.config_columns == ("config",)
    assert frame["config"].nunique() == 15
    assert frame.groupby("config")["flops_budget"].nunique().max() <= 12
    np.testing.assert_allclose(table.C, frame["flops_budget"], rtol=1e-12)
    # the same (N, D) occurs in several configurations: only `config` keeps them apart
    with pytest.raises(RunTableError, match="repeat the configuration"):
        load_runs(frame.drop(columns=["config"]), hyperparameters=())

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one configuration: nothing pooled, no warning
        one = load_dataset("porian_isoflop", data_dir, dataset="rw", hparams="tuned",
                           param_count="standard", loss_type="val")
    assert len(one) == 121 and one.frame["config"].unique().tolist() == [
        "rw/tuned/short/const/standard/val"
    ]
    assert one.frame["N"].nunique() == 16
    with pytest.raises(RunTableError, match=r"dataset=\['c4'\] does not occur.*'owt2', 'rw'"):
        load_dataset("porian_isoflop", data_dir, dataset="c4")


def test_steplaw_lr_digits_below_one_is_an_error(data_dir):
    """lr_digits=0 or -2 rounded every lr to 0.0 and surfaced as a duplicates error."""
    for bad in (0, -2):
        with pytest.raises(RunTableError, match=rf"steplaw: lr_digits must be an integer >= 1 "
                           rf".*got {bad}\."):
            load_dataset("steplaw", data_dir, lr_digits=bad)
