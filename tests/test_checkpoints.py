"""Checkpoint tables and selections on hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from scalebo.data.checkpoints import (
    Phase,
    checkpoint_table,
    every_kth,
    final_checkpoints,
    min_tokens,
    phase,
    run_names,
)
from scalebo.data.runs import RunTable
from scalebo.errors import RunTableError
from scalebo.fitting.frontier import lower_convex_hull


def _raw() -> pd.DataFrame:
    # run a: 7 checkpoints (listed out of token order), run b: 3 checkpoints
    rows = [("a", 1e6, d, 4.0 - 0.1 * d / 1e9) for d in (3e9, 1e9, 2e9, 4e9, 5e9, 6e9, 7e9)]
    rows += [("b", 4e6, d, 3.5 - 0.1 * d / 1e9) for d in (1e9, 2e9, 3e9)]
    return pd.DataFrame(rows, columns=["name", "params", "tokens", "val"])


MAPPING = {"N": "params", "D": "tokens", "loss": "val"}


def test_checkpoint_table_columns_and_compute():
    table = checkpoint_table(_raw(), run="name", mapping=MAPPING)
    assert isinstance(table, RunTable) and len(table) == 10
    assert set(table.frame["phase"]) == {"stable"}
    assert run_names(table) == ["a", "b"]
    assert table.frame["run_id"].is_unique
    # each checkpoint's compute is the FLOPs up to it: 6 N D
    np.testing.assert_allclose(table.C, 6 * table.N * table.D)
    assert table.config_columns == ("run", "phase")


def test_checkpoint_table_errors():
    with pytest.raises(RunTableError, match="run column 'run'"):
        checkpoint_table(_raw(), mapping=MAPPING)
    with pytest.raises(ValueError, match="hot"):
        checkpoint_table(_raw(), run="name", mapping=MAPPING, phase="hot")
    frame = _raw().assign(phase="warm")
    with pytest.raises(RunTableError, match="unknown phase value"):
        checkpoint_table(frame, run="name", mapping=MAPPING, phase=None)
    repeated = pd.concat([_raw(), _raw().iloc[:1]])
    with pytest.raises(RunTableError):
        checkpoint_table(repeated, run="name", mapping=MAPPING)


def test_every_kth_keeps_kth_ranks_and_last():
    table = checkpoint_table(_raw(), run="name", mapping=MAPPING)
    kept = every_kth(table, 3).frame
    # run a ranks 3, 6 and last 7 -> 3e9, 6e9, 7e9; run b: rank 3 (= last) -> 3e9
    assert sorted(kept.loc[kept.run == "a", "D"]) == [3e9, 6e9, 7e9]
    assert kept.loc[kept.run == "b", "D"].tolist() == [3e9]
    # input order is kept (3e9 was listed first for run a)
    assert kept["D"].tolist()[0] == 3e9
    assert len(every_kth(table, 1)) == 10
    two = every_kth(table.frame, 2)  # DataFrames work too
    assert isinstance(two, pd.DataFrame)
    assert sorted(two.loc[two.run == "a", "D"]) == [2e9, 4e9, 6e9, 7e9]
    assert sorted(two.loc[two.run == "b", "D"]) == [2e9, 3e9]
    with pytest.raises(ValueError, match="integer"):
        every_kth(table, 0)


def test_min_tokens_phase_and_final():
    raw = _raw()
    hot = checkpoint_table(raw, run="name", mapping=MAPPING)
    cool = checkpoint_table(raw.assign(val=raw["val"] - 0.05), run="name", mapping=MAPPING,
                            phase=Phase.COOLDOWN_END)
    both = hot.with_frame(pd.concat([hot.frame, cool.frame]))
    assert len(min_tokens(hot, 3e9)) == 6  # a: 3..7e9 (5), b: 3e9 (1)
    assert len(phase(both, "cooldown-end")) == 10
    assert len(phase(both, Phase.STABLE, Phase.COOLDOWN_END)) == 20
    last = final_checkpoints(hot).frame
    assert dict(zip(last.run, last.D, strict=True)) == {"a": 7e9, "b": 3e9}
    assert len(final_checkpoints(both)) == 2  # one per run even with two phases at 7e9
    with pytest.raises(RunTableError, match="needs columns"):
        every_kth(pd.DataFrame({"D": [1.0]}), 2)


def test_frontier_over_checkpoints_uses_each_checkpoint_compute():
    table = checkpoint_table(_raw(), run="name", mapping=MAPPING)
    mask = lower_convex_hull(table.C, table.loss)
    hull = table.frame.loc[mask]
    # the cheapest point (run a, 1e9 tokens) starts the hull; the lowest loss ends it
    assert hull["C"].min() == table.C.min()
    assert hull["loss"].min() == table.loss.min()
    assert set(hull["run"]) <= {"a", "b"}
