"""Gemstones and Gadre loaders against the counts in their SOURCE.md."""

import warnings

import numpy as np
import pytest

from scalebo.data.checkpoints import every_kth
from scalebo.data.datasets import load_dataset
from scalebo.data.loaders import GEMSTONES_VARIANTS
from scalebo.errors import RunTableError

COUNTS = {"hot": (220, 22), "hot_477": (1100, 22), "hot_100b+": (770, 22),
          "cool_begin": (199, 20), "cool_end": (199, 20), "lr_ablation_hot": (200, 20)}


def test_gemstones_variants(data_dir):
    for variant, (rows, models) in COUNTS.items():
        table = load_dataset("gemstones", data_dir, variant=variant)
        assert len(table) == rows and table.frame["run"].nunique() == models, variant
        np.testing.assert_allclose(table.C, 6 * table.N * table.D)
    hot = load_dataset("gemstones", data_dir).frame
    assert hot["N"].min() == pytest.approx(48.4e6, rel=1e-2)
    assert hot["N"].max() == pytest.approx(2.01e9, rel=1e-2)
    assert set(hot["phase"]) == {"stable"}
    assert set(load_dataset("gemstones", data_dir, variant="cool_end").frame["phase"]) == {
        "cooldown-end"
    }
    assert {"width", "depth", "step", "num_nodes", "seconds_per_step"} <= set(hot.columns)
    assert set(GEMSTONES_VARIANTS) >= set(COUNTS)


def test_gemstones_every_fifth_dense_checkpoint_is_the_hot_table(data_dir):
    hot = load_dataset("gemstones", data_dir, variant="hot").frame
    dense = every_kth(load_dataset("gemstones", data_dir, variant="hot_477"), 5).frame
    merged = hot.merge(dense, on=["run", "step"], suffixes=("", "_dense"))
    assert len(dense) == len(hot) == len(merged) == 220
    np.testing.assert_array_equal(merged["loss"], merged["loss_dense"])


def test_gemstones_validation_sets(data_dir):
    main = load_dataset("gemstones", data_dir).frame
    for name in ("fineweb_edu", "dclm"):
        other = load_dataset("gemstones", data_dir, validation=name).frame
        assert len(other) == 220
        np.testing.assert_array_equal(other["N"].to_numpy(), main["N"].to_numpy())
        assert not np.allclose(other["loss"], main["loss"])
    with pytest.raises(RunTableError, match="no fineweb_edu loss"):
        load_dataset("gemstones", data_dir, variant="hot_477", validation="fineweb_edu")
    with pytest.raises(ValueError, match="unknown variant"):
        load_dataset("gemstones", data_dir, variant="warm")


def test_gadre_overtraining(data_dir):
    with pytest.warns(UserWarning, match=r"pools 3 training corpora \(dataset = c4_original "
                      r"\(34\), rpj \(35\), rw_original \(35\)\).* \(in Python: load_dataset\("
                      r"'gadre_overtraining', dataset='rw_original'\)\)") as said_here:
        c4 = load_dataset("gadre_overtraining", data_dir)
    assert said_here[0].filename == __file__  # points at the caller, not at the package
    assert len(c4) == 104 and set(c4.frame["val_set"]) == {"c4_val"}
    assert c4.frame["N"].nunique() == 6
    with pytest.warns(UserWarning) as caught:
        everything = load_dataset("gadre_overtraining", data_dir, val_set=None)
    assert len(everything) == 832 and everything.frame["val_set"].nunique() == 8
    said = [str(w.message) for w in caught]
    assert any("pools 8 validation sets" in m for m in said)
    assert any("pools 3 training corpora (dataset = c4_original (272)" in m for m in said)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one corpus, one validation set: no warning
        rpj = load_dataset("gadre_overtraining", data_dir, dataset="rpj")
    assert set(rpj.frame["dataset"]) == {"rpj"} and len(rpj) < 104
    # a trial looked up "data row 1" of a filtered table in the file: the name says so
    assert c4.source.endswith("gadre_models_losses.csv (its dataset options keep 104 of its "
                              "832 rows; a data row here counts the rows kept)")
    assert everything.source.endswith("gadre_models_losses.csv")
    with pytest.raises(RunTableError, match="available"):
        load_dataset("gadre_overtraining", data_dir, val_set="nope")
