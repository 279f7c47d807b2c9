"""couple_cells: the untried configurations of a cell share a share ρ of their deviation."""

import numpy as np
import pytest

from scalebo.search.law_samples import couple_cells


def _independent(S: int = 40_000, m: int = 7, seed: int = 0):
    rng = np.random.default_rng(seed)
    mean = np.array([2.0, 1.9, 2.1, 2.2, 3.0, 2.9, 5.0])  # cell 0: cols 0-3, cell 1: 4-5
    cells = np.array([0, 0, 0, 0, 1, 1, 2])
    draws = mean + 0.01 * rng.standard_normal((S, m))
    return draws, mean, cells


def test_rho_zero_and_untried_only_leave_draws_as_they_are():
    draws, mean, cells = _independent(S=100)
    assert np.array_equal(couple_cells(draws, mean, cells, np.arange(7), 0.0), draws)
    out = couple_cells(draws, mean, cells, np.array([0, 2]), 1.0)  # cols 1, 3: observed
    assert np.array_equal(out[:, [1, 3, 4, 5, 6]], draws[:, [1, 3, 4, 5, 6]])
    # in cell 0 only cols 0 and 2 were drawn; 0 has the lower mean and keeps its draw
    assert np.array_equal(out[:, 0], draws[:, 0])
    assert np.allclose(out[:, 2] - mean[2], draws[:, 0] - mean[0])


def test_rho_one_moves_a_cell_by_the_draw_of_its_lowest_mean():
    draws, mean, cells = _independent(S=50)
    out = couple_cells(draws, mean, cells, np.arange(7), 1.0)
    dev = out - mean
    assert np.allclose(dev[:, :4], (draws[:, 1] - mean[1])[:, None])  # col 1: lowest mean
    assert np.allclose(dev[:, 4:6], (draws[:, 5] - mean[5])[:, None])
    assert np.array_equal(out[:, 6], draws[:, 6])  # a cell of one configuration


def test_marginals_kept_and_correlations_as_hand_computed():
    # independent deviations of equal variance: the kept column j and another one correlate
    # by √ρ, two others by ρ, and every marginal SD stays 0.01
    draws, mean, cells = _independent()
    rho = 0.85
    out = couple_cells(draws, mean, cells, np.arange(7), rho)
    assert np.allclose(out.mean(axis=0), mean, atol=3e-4)
    assert np.allclose(out.std(axis=0), 0.01, rtol=0.02)
    c = np.corrcoef(out.T)
    assert c[1, 0] == pytest.approx(np.sqrt(rho), abs=0.01)
    assert c[0, 2] == pytest.approx(rho, abs=0.01)
    assert abs(c[0, 4]) < 0.02  # across cells: as drawn (independent here)


def test_cell_minimum_is_no_longer_biased_low():
    # four configurations of equal mean whose true losses move together (a fully
    # correlated truth): independent draws put the cell minimum ~1 SD low, coupled ones
    # near the mean (E[min of 4 std normals] = −1.03)
    rng = np.random.default_rng(1)
    mean = np.full(4, 2.0)
    draws = mean + 0.01 * rng.standard_normal((20_000, 4))
    cells = np.zeros(4, dtype=int)
    assert (draws.min(axis=1) - 2.0).mean() == pytest.approx(-0.0103, abs=5e-4)
    out = couple_cells(draws, mean, cells, np.arange(4), 0.85)
    assert -0.004 < (out.min(axis=1) - 2.0).mean() < 0.0


def test_bad_rho():
    draws, mean, cells = _independent(S=5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        couple_cells(draws, mean, cells, np.arange(7), 1.5)


def test_method_and_replay_command_take_the_coupling(capsys):
    """``MethodConfig.posterior_coupling`` (default CELL_COUPLING; another value is named in
    the label) and ``scalebo replay --posterior-coupling RHO``; a share outside [0, 1] is
    refused with what is expected."""
    from scalebo.bench.method import MethodConfig
    from scalebo.cli.main import build_parser
    from scalebo.search.law_samples import CELL_COUPLING

    assert MethodConfig().posterior_coupling == CELL_COUPLING
    assert "coupling" not in MethodConfig().label()
    assert MethodConfig(posterior_coupling=0.0).label().endswith(" coupling=0")
    with pytest.raises(ValueError, match="posterior_coupling"):
        MethodConfig(posterior_coupling=1.5)
    parser = build_parser()
    base = ["replay", "--dataset", "x.csv"]
    assert parser.parse_args(base).posterior_coupling is None
    assert parser.parse_args([*base, "--posterior-coupling", "0"]).posterior_coupling == 0.0
    for bad in ("-0.1", "1.2", "some"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--posterior-coupling", bad])
        assert "expected a share" in capsys.readouterr().err


def test_replay_posterior_reads_the_method_coupling(small_problem):
    """The coupling moves the law posterior's intervals and nothing the search does."""
    from scalebo.bench.replay import MethodConfig, replay

    fast = MethodConfig(fantasize=False, refit_every=5, posterior_samples=16)
    a = replay(small_problem, fast, 0.1, seed=2)
    b = replay(small_problem, fast.with_(posterior_coupling=0.0), 0.1, seed=2)
    assert [t.index for t in a.trace] == [t.index for t in b.trace]
    qa = a.at(0.1).law_posterior["compute"]["predicted_loss"]["1e+25"]
    qb = b.at(0.1).law_posterior["compute"]["predicted_loss"]["1e+25"]
    assert qa["q50"] != qb["q50"] and qa["q90"] != qb["q90"]
    assert b.to_dict()["method"]["posterior_coupling"] == 0.0
