"""FLOP conventions, GPU-hours and Approach 1 on the hull, on hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from scalebo.analysis.hull_allocation import approach1_on_hull
from scalebo.data.resources import (
    FlopsConvention,
    flops,
    flops_per_token,
    gpu_hours,
    resource_values,
)


def test_flops_conventions_by_hand():
    N, w, d, V, s = 1.0e6, 100.0, 4.0, 1000, 10
    assert flops_per_token("6N", N=N) == 6e6
    assert flops_per_token("6N_no_embed", N=N, width=w, vocab=V) == 6 * (1e6 - 1e5)
    # Kaplan Table 1: 6 N_nonembed + 6 n_layer n_ctx d_model
    assert flops_per_token("kaplan", N=N, width=w, depth=d, vocab=V, seq_len=s) == (
        6 * 9e5 + 6 * 4 * 10 * 100
    )
    # Chinchilla App. F, one layer written out: w=100, heads=2, ffw=400, seq=10, vocab=1000
    per_layer = (2 * 3 * 10 * 100 * 100 + 2 * 10 * 10 * 100 + 3 * 2 * 10 * 10
                 + 2 * 10 * 10 * 100 + 2 * 10 * 100 * 100 + 2 * 10 * (100 * 400 * 2))
    forward = 2 * 10 * 1000 * 100 + 4 * per_layer + 2 * 10 * 100 * 1000
    got = flops_per_token("chinchilla", width=w, depth=d, vocab=V, seq_len=s, n_heads=2)
    assert got == pytest.approx(3 * forward / 10, rel=1e-12)
    with pytest.raises(ValueError, match="needs width"):
        flops_per_token(FlopsConvention.KAPLAN, N=N)


def test_chinchilla_count_approaches_6n_for_wide_models():
    # with 12 w^2 d non-embedding parameters and a short context, the full count ≈ 6N
    w, d = 8192.0, 64.0
    n_nonembed = 12 * w * w * d
    full = flops_per_token("chinchilla", width=w, depth=d, vocab=32000, seq_len=2048)
    six_n = flops_per_token("6N", N=n_nonembed + 2 * 32000 * w)
    assert full / six_n == pytest.approx(1.0, abs=0.05)


def test_flops_of_a_frame_times_tokens():
    frame = pd.DataFrame({"N": [1e6, 2e6], "D": [1e9, 3e9], "width": [100.0, 200.0]})
    np.testing.assert_allclose(flops(frame), [6e15, 36e15])
    np.testing.assert_allclose(flops(frame, "6N_no_embed", vocab=1000),
                               [6 * 9e5 * 1e9, 6 * 1.8e6 * 3e9])


def test_gpu_hours_by_hand():
    assert gpu_hours(100, 36.0, 2) == 16.0  # 100 steps × 36 s × 2 nodes × 8 GPUs / 3600
    assert gpu_hours(100, 36.0, 2, gpus_per_node=4) == 8.0
    np.testing.assert_allclose(gpu_hours([1, 2], [3600, 1800], [1, 1], 1), [1.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        gpu_hours(1, np.nan, 1)


def _hull_table() -> pd.DataFrame:
    # four hull points with N* = 1e-3·R^0.5, D* = R/(6 N*) and a convex loss curve,
    # plus two dominated points above it
    R = np.array([1e18, 1e19, 1e20, 1e21])
    N = 1e-3 * R**0.5
    D = R / (6 * N)
    loss = np.array([4.0, 3.0, 2.5, 2.25])
    hull = pd.DataFrame({"N": N, "D": D, "C": R, "loss": loss})
    above = pd.DataFrame({"N": [3e6, 4e7], "D": [1e11, 1e11], "C": [1.8e18, 2.4e19],
                          "loss": [3.9, 3.0]})
    return pd.concat([hull, above], ignore_index=True)


def test_approach1_on_hull_flops_recovers_exponents():
    res = approach1_on_hull(_hull_table())
    assert sorted(res.hull.index) == [0, 1, 2, 3]
    assert res.law.n_opt.exponent == pytest.approx(0.5, abs=1e-12)
    assert res.law.d_opt.exponent == pytest.approx(0.5, abs=1e-12)
    at = res.at(1e22)
    assert at["N_opt"] == pytest.approx(1e-3 * 1e11, rel=1e-9)
    assert at["tokens_per_param"] == pytest.approx(1e22 / (6 * 1e16), rel=1e-9)


def test_approach1_on_hull_gpu_hours_axis():
    frame = _hull_table()
    # GPU-hours: hull points take 1, 10, 100, 1000 hours; D proportional to hours
    frame["step"] = [1, 10, 100, 1000, 5, 50]
    frame["seconds_per_step"] = 3600.0 / 8
    frame["num_nodes"] = 1
    hours = resource_values(frame, "gpu_hours")
    np.testing.assert_allclose(hours[:4], [1, 10, 100, 1000])
    res = approach1_on_hull(frame, "gpu_hours")
    assert res.resource == "gpu_hours"
    # on this axis (5, 3.9) and (50, 3.0) are dominated too; N* ∝ R^0.5 at the same points
    assert sorted(res.hull.index) == [0, 1, 2, 3]
    assert res.law.n_opt.exponent == pytest.approx(0.5, abs=1e-12)
    assert res.at(1.0)["N_opt"] == pytest.approx(1e6, rel=1e-9)
    with pytest.raises(ValueError, match="unknown resource"):
        resource_values(frame, "watts")
