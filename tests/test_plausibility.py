"""Run tables that load but look wrong: swapped N and D, sizes in millions, a C column that is
not 6·N·D (or one row off it), a text setting left out of the default axes."""

import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.data.plausibility import unit_notes
from scalebo.data.runs import load_runs


def _grid(**extra) -> pd.DataFrame:
    N = np.repeat([1e8, 3e8, 1e9], 4)
    D = np.tile([2e9, 6e9, 2e10, 6e10], 3)
    frame = pd.DataFrame({"N": N, "D": D,
                          "loss": 1.7 + 400 / N**0.34 + 400 / D**0.28})
    return frame.assign(**extra)


def _messages(frame: pd.DataFrame, **kw) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_runs(frame, **kw)
    return [str(w.message) for w in caught]


def test_a_plausible_table_gets_no_note():
    frame = _grid()
    assert unit_notes(frame.assign(C=6 * frame.N * frame.D), "t", has_C=True) == []
    assert _messages(frame) == []


def test_swapped_sizes_and_sizes_in_millions_are_named():
    frame = _grid()
    swapped = frame.rename(columns={"N": "D", "D": "N"})
    (note,) = [m for m in _messages(swapped) if "swapped" in m]
    assert "D/N from 0.00167 to 0.5" in note  # by hand: 1e8 / 6e10 and 1e9 / 2e9
    millions = frame.assign(N=frame.N / 1e6, D=frame.D / 1e9)  # 100..1000 M, 2..60 B
    notes = _messages(millions)
    assert any("largest N is 1000" in m for m in notes)
    assert any("largest D is 60" in m for m in notes)


def test_a_compute_column_off_six_n_d_is_said_and_one_odd_row_named():
    frame = _grid()
    C = 6 * frame.N * frame.D
    (note,) = _messages(frame.assign(C=2 * C))
    assert "the C column is 2 × 6·N·D" in note
    typo = C.copy()
    typo.iloc[6] *= 10  # data row 7
    (note,) = _messages(frame.assign(C=typo))
    assert "data row(s) 7: C is 10 × 6·N·D where the other runs of N = 3e+08 have 1 ×" in note
    drift = C * frame["N"].map({1e8: 1.5, 3e8: 1.2, 1e9: 1.05})  # total vs non-embedding N
    assert not [m for m in _messages(frame.assign(C=drift)) if "typo" in m]


def test_a_text_setting_left_out_of_the_axes_is_said_but_a_run_label_is_not():
    """Two optimizers at the same learning rates are runs the default axes (numeric) leave
    together: said. A run name, a seed tag and a text copy of the learning rate are not
    settings the axes miss: not said."""
    settings = [(1e-3, "adam"), (2e-3, "adam"), (3e-4, "lion"), (6e-4, "lion")]  # a trial's
    frame = pd.concat([_grid(lr=lr, opt=opt) for lr, opt in settings], ignore_index=True)
    frame["name"] = [f"run{i}" for i in range(len(frame))]
    frame["seed_tag"] = np.where(frame.index % 2, "s0", "s1")
    frame["lr_tag"] = frame["lr"].map({1e-3: "a", 2e-3: "b", 3e-4: "c", 6e-4: "d"})
    (note,) = [m for m in _messages(frame) if "text column" in m]
    assert "'opt' (adam, lion)" in note
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # named: nothing to say
        table = load_runs(frame, hyperparameters=["lr", "opt"])
    assert table.hyperparameters == ("lr", "opt")


@pytest.mark.parametrize("ratio", [0.95, 1.05, 1.2])
def test_a_compute_column_near_six_n_d_is_not_flagged(ratio):
    frame = _grid()
    assert _messages(frame.assign(C=ratio * 6 * frame.N * frame.D)) == []


def test_a_wall_time_that_splits_repeats_is_said_but_a_random_search_setting_is_not():
    """Two seeds of each (N, D, lr) and a wall time per run: the wall time split the seeds,
    so --duplicates mean averaged nothing and a cell's best was the luckier seed, without
    a word. A learning rate drawn at random per run (random search) is a real axis."""
    rng = np.random.default_rng(0)
    frame = pd.concat([_grid(lr=lr) for lr in (1e-3, 3e-3) for _ in range(2)],
                      ignore_index=True)
    frame["wall_hours"] = 6 * frame.N * frame.D / 1e17 * rng.uniform(0.9, 1.1, len(frame))
    (note,) = [m for m in _messages(frame, duplicates="mean") if "every run" in m]
    assert "column 'wall_hours' has a different value on every run" in note
    named = _messages(frame, hyperparameters=["lr"], duplicates="mean")
    assert [m.split(": ", 1)[1][:33] for m in named] == ["averaged the loss of repeated con"]
    assert len(load_runs(frame, hyperparameters=["lr"], duplicates="mean")) == len(frame) // 2
    # the wall time as the only varying column (seeds, no searched setting): said too
    seeds = pd.concat([_grid(), _grid()], ignore_index=True)
    seeds["wall_hours"] = 6 * seeds.N * seeds.D / 1e17 * rng.uniform(0.9, 1.1, len(seeds))
    assert [m for m in _messages(seeds) if "'wall_hours' has a different value" in m]
    # a learning rate drawn per run beside a batch grid (random search) is a real axis (a
    # review: the first rule, which did not look at compute, called it a measurement)
    search = _grid().loc[np.repeat(np.arange(12), 4)].reset_index(drop=True)
    search["lr"] = 10 ** rng.uniform(-4, -2, len(search))
    search["bs"] = np.tile([32, 64], len(search) // 2)
    assert not [m for m in _messages(search) if "every run" in m]
    # nor one drawn around an optimum that falls with the model size (a review)
    scaled = search.assign(lr=search["lr"] * (search["N"] / 1e8) ** -0.5)
    assert not [m for m in _messages(scaled) if "every run" in m]
    one = pd.concat([_grid().iloc[[0]]] * 6, ignore_index=True)  # one cell: no compute trend
    one["wall_hours"] = rng.uniform(1, 2, 6)
    assert not [m for m in _messages(one) if "every run" in m or "constant" in m]
