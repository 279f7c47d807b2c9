"""Acquisitions on hand-computed Gaussian posteriors (no model), and the incumbents."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

from scalebo.errors import SearchError
from scalebo.search.acquisition import (
    Acquisition,
    cost_weighted,
    expected_improvement,
    frontier_incumbent,
    global_incumbent,
    incumbent_score,
    log_expected_improvement,
    log_h,
    log_probability_of_improvement,
    lower_confidence_bound,
    parse_acquisition,
    score,
)
from scalebo.search.grid import Grid


def test_ei_hand_values():
    # BoTorch's case (maximization, mean −0.5, best 0) is minimization at mean +0.5:
    # z = (0 − 0.5)/1 = −0.5, EI = φ(−0.5) − 0.5·Φ(−0.5) = 0.352065 − 0.154269 = 0.197797.
    assert expected_improvement(0.5, 1.0, 0.0) == pytest.approx(0.19780, abs=1e-5)
    # Mean −0.5: z = 0.5, EI = φ(0.5) + 0.5·Φ(0.5) = 0.352065 + 0.345731 = 0.697796;
    # and EI(min) − EI(max) = best − mean = 0.5.
    assert expected_improvement(-0.5, 1.0, 0.0) == pytest.approx(0.697796, abs=1e-6)
    # Scaling: EI(mean, s·std, best) at fixed z is s times larger (std 2, mean 1 → z = −0.5).
    assert expected_improvement(1.0, 2.0, 0.0) == pytest.approx(2 * 0.197797, abs=1e-5)


def test_log_ei_matches_log_of_ei_where_representable():
    z = np.linspace(-25.0, 6.0, 301)
    direct = np.log(norm.pdf(z) + z * norm.cdf(z))
    np.testing.assert_allclose(log_h(z), direct, rtol=1e-9, atol=1e-12)
    mean = -z * 0.3
    np.testing.assert_allclose(
        log_expected_improvement(mean, 0.3, 0.0), np.log(0.3) + direct, rtol=1e-9
    )


def test_log_ei_finite_and_ordered_far_in_the_tail():
    z = np.array([-40.0, -100.0, -1e4, -1e9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = log_h(z)
    assert np.all(np.isfinite(out))
    assert np.all(np.diff(out) < 0)
    # Asymptotic series: h(z) = φ(z)/z² · (1 − 3/z² + 15/z⁴ − 105/z⁶ + 945/z⁸ − …);
    # the first omitted term is < 1e-11 at z = −40.
    u = 1 / z**2
    tail = np.log1p(-3 * u + 15 * u**2 - 105 * u**3 + 945 * u**4)
    series = -0.5 * z**2 - 0.5 * np.log(2 * np.pi) - 2 * np.log(-z) + tail
    np.testing.assert_allclose(out, series, rtol=1e-13, atol=1e-9)
    # Plain EI underflows to exact ties there; logEI still ranks the candidates.
    assert expected_improvement(np.array([40.0, 41.0]), 1.0, 0.0).tolist() == [0.0, 0.0]
    lei = log_expected_improvement(np.array([40.0, 41.0]), 1.0, 0.0)
    assert lei[0] > lei[1]


def test_ei_with_zero_std_is_the_plain_improvement():
    assert expected_improvement(-1.0, 0.0, 0.0) == pytest.approx(1.0, rel=1e-9)
    assert np.isfinite(log_expected_improvement(1.0, 0.0, 0.0))


def test_pi_hand_values():
    # z = (0 − 1)/2 = −0.5; Φ(−0.5) = 0.3085375
    assert np.exp(log_probability_of_improvement(1.0, 2.0, 0.0)) == pytest.approx(
        0.3085375, abs=1e-7
    )
    assert log_probability_of_improvement(0.0, 1.0, 0.0) == pytest.approx(np.log(0.5))
    assert np.isfinite(log_probability_of_improvement(100.0, 1.0, 0.0))


def test_lcb_score():
    # −(1 − 2·0.5) = 0, −(1 − 3·0.5) = 0.5
    np.testing.assert_allclose(lower_confidence_bound(np.array([1.0, 1.0]), 0.5), [0.0, 0.0])
    assert lower_confidence_bound(1.0, 0.5, kappa=3.0) == pytest.approx(0.5)


def test_score_dispatch_and_errors():
    mean, std = np.array([0.5, -0.5]), np.array([1.0, 1.0])
    np.testing.assert_allclose(score("ei", mean, std, 0.0), np.log([0.197797, 0.697796]), rtol=1e-5)
    np.testing.assert_allclose(score(Acquisition.PI, mean, std, 0.0), norm.logcdf([-0.5, 0.5]))
    np.testing.assert_allclose(score("LCB", mean, std, 0.0, kappa=1.0), [0.5, 1.5])
    with pytest.raises(SearchError, match="Unknown acquisition"):
        score("ucb", mean, std, 0.0)
    with pytest.raises(SearchError, match="finite"):
        score("ei", np.array([np.nan]), np.array([1.0]), 0.0)
    with pytest.raises(SearchError, match=">= 0"):
        score("ei", mean, -std, 0.0)
    assert parse_acquisition("TARGET") is Acquisition.TARGET
    with pytest.raises(SearchError, match="law ensemble"):
        score("target", mean, std, 0.0)


def test_global_incumbent():
    assert global_incumbent(np.array([3.0, 2.5, 2.7])) == 2.5
    with pytest.raises(SearchError, match="at least one"):
        global_incumbent(np.array([]))


def test_frontier_incumbent_fallbacks():
    # Cells by cost: A (1e6,1e9) 6e15, B (2e6,1e9) 1.2e16, C (4e6,1e9) 2.4e16,
    # D (8e6,1e9) 4.8e16; two lrs each; no held-out cell.
    g = Grid.from_axes(
        {"N": [1e6, 2e6, 4e6, 8e6], "D": [1e9], "lr": [1e-3, 1e-2]}, n_held_out_cells=0
    )
    row = {(n, lr): i for i, (n, lr) in enumerate(zip(g.configs.N, g.configs.lr, strict=True))}
    obs = np.array([row[2e6, 1e-3], row[4e6, 1e-3], row[4e6, 1e-2]])
    y = np.array([3.0, 2.0, 2.5])
    cand = np.array([row[1e6, 1e-2], row[2e6, 1e-2], row[4e6, 1e-3], row[8e6, 1e-2]])
    inc = frontier_incumbent(g, obs, y, cand)
    # A: nothing at cost ≤ 6e15 observed → global best 2.0.
    # B: its own cell best 3.0.  C: own cell best min(2.0, 2.5) = 2.0.
    # D: no observation in its cell → envelope at 4.8e16 = best at cost ≤ 4.8e16 = 2.0.
    np.testing.assert_allclose(inc, [2.0, 3.0, 2.0, 2.0])
    # Envelope fallback that differs from the global best: a costlier run is better.
    obs2, y2 = np.array([row[1e6, 1e-3], row[4e6, 1e-3]]), np.array([3.0, 1.0])
    inc2 = frontier_incumbent(g, obs2, y2, np.array([row[2e6, 1e-3], row[8e6, 1e-3]]))
    np.testing.assert_allclose(inc2, [3.0, 1.0])


def test_incumbent_score_uses_the_frontier_or_the_global_best():
    g = Grid.from_axes({"N": [1e6, 2e6], "D": [1e9], "lr": [1e-3, 1e-2]}, n_held_out_cells=0)
    row = {(n, lr): i for i, (n, lr) in enumerate(zip(g.configs.N, g.configs.lr, strict=True))}
    obs, y = np.array([row[1e6, 1e-3], row[2e6, 1e-3]]), np.array([1.0, 3.0])
    cand = np.array([row[1e6, 1e-2], row[2e6, 1e-2]])
    mean, std = np.array([2.0, 2.0]), np.array([1.0, 1.0])
    s, inc = incumbent_score("ei", g, obs, y, cand, mean, std, incumbent="frontier")
    np.testing.assert_allclose(inc, [1.0, 3.0])  # each candidate's own cell best
    np.testing.assert_allclose(s, score("ei", mean, std, np.array([1.0, 3.0])))
    s, inc = incumbent_score("lcb", g, obs, y, cand, mean, std, incumbent="global", kappa=1.0)
    np.testing.assert_allclose(inc, [1.0, 1.0])
    np.testing.assert_allclose(s, [-1.0, -1.0])


def test_envelope_incumbent_is_the_lower_of_the_cell_best_and_the_reachable_envelope():
    # Cells by cost: A (1e6) 6e15, B (2e6) 1.2e16, C (4e6) 2.4e16; two lrs each.
    g = Grid.from_axes({"N": [1e6, 2e6, 4e6], "D": [1e9], "lr": [1e-3, 1e-2]},
                       n_held_out_cells=0)
    row = {(n, lr): i for i, (n, lr) in enumerate(zip(g.configs.N, g.configs.lr, strict=True))}
    # A cheap run at 2.0 dominates B's best 2.6: a B run must beat 2.0 to move the envelope.
    obs = np.array([row[1e6, 1e-3], row[2e6, 1e-3], row[4e6, 1e-3]])
    y = np.array([2.0, 2.6, 1.5])
    cand = np.array([row[1e6, 1e-2], row[2e6, 1e-2], row[4e6, 1e-2]])
    np.testing.assert_allclose(frontier_incumbent(g, obs, y, cand), [2.0, 2.6, 1.5])
    np.testing.assert_allclose(frontier_incumbent(g, obs, y, cand, envelope=True),
                               [2.0, 2.0, 1.5])
    mean, std = np.full(3, 2.3), np.full(3, 0.1)
    s, inc = incumbent_score("ei", g, obs, y, cand, mean, std)  # the default: envelope
    np.testing.assert_allclose(inc, [2.0, 2.0, 1.5])
    # B's EI is against 2.0, not 2.6: z = -3 instead of +3.
    np.testing.assert_allclose(s, score("ei", mean, std, np.array([2.0, 2.0, 1.5])))
    assert s[1] < score("ei", mean[1:2], std[1:2], np.array([2.6]))[0] - 5


def test_cost_weighted_scores_are_per_cost_to_the_power():
    logei = np.log(np.array([0.2, 0.2, 0.4]))
    cost = np.array([1.0, 4.0, 4.0])
    out = cost_weighted(logei, cost, 8.0, 1.0)
    # EI / (cost/total): 0.2/(1/8) = 1.6, 0.2/(4/8) = 0.4, 0.4/(4/8) = 0.8.
    np.testing.assert_allclose(np.exp(out), [1.6, 0.4, 0.8])
    np.testing.assert_allclose(np.exp(cost_weighted(logei, cost, 8.0, 0.5)),
                               [0.2 / (1 / 8) ** 0.5, 0.2 / 0.5**0.5, 0.4 / 0.5**0.5])
    np.testing.assert_allclose(cost_weighted(logei, cost, 8.0, 0.0), logei)
    assert np.all(np.isfinite(cost_weighted(logei, np.zeros(3), 8.0, 1.0)))  # floored
    with pytest.raises(SearchError, match="cost power"):
        cost_weighted(logei, cost, 8.0, -1.0)


def test_incumbent_score_weights_ei_and_pi_by_cost_but_never_lcb():
    g = Grid.from_axes({"N": [1e6, 2e6], "D": [1e9], "lr": [1e-3, 1e-2]}, n_held_out_cells=0)
    obs, y = np.array([0]), np.array([3.0])
    cand = np.array([1, 2, 3])
    mean, std = np.full(3, 2.9), np.full(3, 0.2)
    cost = g.cost[cand]
    for kind in ("ei", "pi"):
        plain, _ = incumbent_score(kind, g, obs, y, cand, mean, std)
        per, _ = incumbent_score(kind, g, obs, y, cand, mean, std, cost=(cost, 10.0, 1.0))
        np.testing.assert_allclose(per, plain - np.log(cost / 10.0))
    plain, _ = incumbent_score("lcb", g, obs, y, cand, mean, std)
    per, _ = incumbent_score("lcb", g, obs, y, cand, mean, std, cost=(cost, 10.0, 1.0))
    np.testing.assert_allclose(per, plain)
