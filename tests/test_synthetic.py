"""The built-in synthetic grid: known truth, and the issue's recovery check."""

from __future__ import annotations

import numpy as np
import pytest

from scalebo.bench.problems import load_problem
from scalebo.bench.replay import MethodConfig, replay
from scalebo.bench.synthetic import DEFAULT_LAW, SyntheticLaw, make_synthetic, synthetic_runs


def test_noise_free_cell_best_follows_the_law_exactly():
    frame = make_synthetic(SyntheticLaw(noise=0.0))
    assert len(frame) == 6 * 7 * 8 * 5
    best = frame.groupby(["N", "D"])["loss"].min()
    N = best.index.get_level_values("N").to_numpy()
    D = best.index.get_level_values("D").to_numpy()
    np.testing.assert_allclose(best.to_numpy(), DEFAULT_LAW.law_loss(N, D), rtol=0, atol=1e-12)
    # exactly one optimum per cell, and it is the cell's best configuration
    assert frame.groupby(["N", "D"])["is_optimum"].sum().eq(1).all()
    at_opt = frame[frame["is_optimum"]].set_index(["N", "D"])["loss"]
    np.testing.assert_allclose(at_opt.loc[best.index].to_numpy(), best.to_numpy())


def test_optimum_drifts_with_N_and_D():
    frame = make_synthetic(SyntheticLaw(noise=0.0))
    opt = frame[frame["is_optimum"]]
    lr_small_N = opt[(opt.N == opt.N.min()) & (opt.D == opt.D.min())]["lr"].item()
    lr_big_N = opt[(opt.N == opt.N.max()) & (opt.D == opt.D.min())]["lr"].item()
    bs_small_D = opt[(opt.N == opt.N.min()) & (opt.D == opt.D.min())]["bs"].item()
    bs_big_D = opt[(opt.N == opt.N.min()) & (opt.D == opt.D.max())]["bs"].item()
    assert lr_big_N < lr_small_N and bs_big_D > bs_small_D


def test_noise_is_seeded_and_sized():
    a, b = synthetic_runs(seed=1).frame, synthetic_runs(seed=1).frame
    np.testing.assert_array_equal(a["loss"], b["loss"])
    resid = make_synthetic(seed=2)
    assert np.std(resid["loss"] - resid["loss_noise_free"]) == pytest.approx(0.005, rel=0.1)


def test_window_gp_ei_recovers_compute_law_at_10_percent():
    """Issue check: window + GP + EI at 10 % of C_total, within 1 % at 1e25 FLOPs."""
    problem = load_problem("synthetic")
    method = MethodConfig(strategy="window", surrogate="gp", acquisition="ei")
    rec = replay(problem, method, 0.10, seed=0)
    m = rec.at(0.10)
    assert m.spent_fraction <= 0.10 + 1e-9
    assert m.law("compute", "fantasized").abs_extrapolation(1e25) < 1.0
    assert m.law("compute", "observed").abs_extrapolation(1e25) < 1.0
