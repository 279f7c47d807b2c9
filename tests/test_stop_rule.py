"""The stop rule replayed along an acquisition order, on a small synthetic grid."""

from __future__ import annotations

import numpy as np
import pytest

from scalebo.bench.method import DEFAULT_METHOD
from scalebo.bench.problems import problem_from_table
from scalebo.bench.stop_rule import replay_stop_rule
from scalebo.bench.synthetic import make_synthetic
from scalebo.laws import CHINCHILLA


@pytest.fixture(scope="module")
def problem():
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(4), D=1e9 * 2.0 ** np.arange(4),
                           lr=[5e-4, 1e-3, 2e-3], bs=[128, 256], seed=4)
    return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="stop",
                              chinchilla_starts=CHINCHILLA.start_grid()[::30])


def _cheapest_first(problem):
    order = np.flatnonzero(~problem.grid.held_out)
    return order[np.argsort(problem.grid.cost[order], kind="stable")]


@pytest.fixture(scope="module")
def tight(problem):
    """The rule at tolerance 1e-4 along the cheapest-first order (a frozen StopOutcome,
    computed once for the two tests that read it)."""
    return replay_stop_rule(problem, DEFAULT_METHOD, _cheapest_first(problem), budget=1.0,
                            seed=0, tolerance=1e-4, n_samples=16, first=8)


def test_stops_at_the_first_check_within_tolerance_and_reports_it(problem, tight):
    """A campaign that trains the whole acquirable grid, cheapest first: the posterior
    collapses on the full table, which is the reference (error 0); the rule fires at the
    first check whose half-width is within the tolerance, never before."""
    order = _cheapest_first(problem)
    out = tight
    assert out.stopped
    last = out.checks[-1]
    assert (last.n_runs, last.spent_fraction) == (out.n_runs, out.spent_fraction)
    assert out.half_width_pct <= 1e-2
    assert all(c.half_width_pct is None or c.half_width_pct > 1e-2 for c in out.checks[:-1])
    spent = np.cumsum(problem.grid.cost[order]) / problem.C_total
    for c in out.checks:
        assert c.spent_fraction == pytest.approx(spent[c.n_runs - 1])
    for a, b in zip(out.checks, out.checks[1:-1], strict=False):  # growth >= 1.25 between
        assert b.spent_fraction >= 1.25 * a.spent_fraction * (1 - 1e-12)
    if out.n_runs == order.size:
        assert out.error_pct < 1e-6


def test_a_loose_tolerance_stops_earlier_and_a_bad_one_is_refused(problem, tight):
    order = _cheapest_first(problem)
    loose = replay_stop_rule(problem, DEFAULT_METHOD, order, budget=1.0, seed=0,
                             tolerance=0.5, n_samples=16, first=8)
    assert loose.stopped and loose.n_runs <= tight.n_runs
    assert loose.half_width_pct <= 50
    with pytest.raises(ValueError, match="tolerance"):
        replay_stop_rule(problem, DEFAULT_METHOD, order, budget=1.0, tolerance=0.0)


def test_a_noise_free_posterior_stops_at_the_noise_floor(problem):
    """The noise-free interval keeps the runs' noise, so a tolerance of 1e-4 % is never met;
    the rule stops at the first check whose noise-floor ratio is at least 1 − min_shrink
    (cheapest first on this grid: 0.02–0.18 up to 71 of 84 runs, 0.34 at 79), and a looser
    min_shrink never stops later."""
    order = _cheapest_first(problem)
    method = DEFAULT_METHOD.with_(posterior_estimand="noise_free")
    kw = dict(budget=1.0, seed=0, tolerance=1e-6, n_samples=16, first=8)
    out = replay_stop_rule(problem, method, order, min_shrink=0.7, **kw)
    assert out.stopped and out.min_shrink == 0.7 and out.n_runs < order.size
    assert all(c.half_width_pct is None or c.half_width_pct > 1e-4 for c in out.checks)
    assert out.checks[-1].floor_ratio >= 0.3
    assert all(c.floor_ratio is None or c.floor_ratio < 0.3 for c in out.checks[:-1])
    assert sum(c.floor_ratio is not None for c in out.checks) >= len(out.checks) // 2
    assert out.checks[-1].law_status == "converged"
    loose = replay_stop_rule(problem, method, order, min_shrink=0.95, **kw)
    assert loose.n_runs < out.n_runs
    assert out.checks[: len(loose.checks)] == loose.checks  # the same checks up to its stop
    reference = replay_stop_rule(problem, DEFAULT_METHOD, order[:12], **kw)
    assert all(c.floor_ratio is None for c in reference.checks)  # no floor without noise_free


def test_a_posterior_names_the_parameters_its_samples_left_at_a_bound():
    import numpy as np

    from scalebo.search.law_posterior import LawPosterior

    # E at its lower bound e^-10 in two samples, alpha nowhere near one; then none at all
    E = np.array([np.exp(-10.0), 1.7, np.exp(-10.0), 1.9])
    post = LawPosterior("compute", (1e25,), np.zeros((4, 1)),
                        {"E": E, "A": np.full(4, 300.0), "alpha": np.full(4, 0.1)}, None, None,
                        ("bound hit", "converged", "bound hit", "converged"), ("",) * 4,
                        np.arange(4), 4, 0, 0.0)
    assert post.at_bound() == ("E",)
    inside = LawPosterior("compute", (1e25,), np.zeros((2, 1)),
                          {"E": np.array([1.7, 1.8]), "A": np.full(2, 300.0),
                           "alpha": np.full(2, 0.1)}, None, None, ("converged",) * 2,
                          ("",) * 2, np.arange(2), 2, 0, 0.0)
    assert inside.at_bound() == ()


def test_bound_note_at_half_the_samples_and_not_without_an_interval():
    from scalebo.search.stopping import bound_note

    def s(failed, bound, S=64):
        return {"samples": S, "n_failed": failed, "n_bound_hit": bound}

    assert bound_note(s(0, 6), "compute") is None  # 6 of 64: under a tenth
    # 7 to 31 of 64: the intervals are cut at the bound (a campaign's N* within ±25 % while
    # a bootstrap of its runs gave a factor of 7), named when the caller knows the names
    assert bound_note(s(0, 31), "compute") == (
        "31 of the compute law posterior's 64 sample fits ended at a parameter bound: its "
        "intervals are cut at the bound, narrower than the runs alone would make them")
    assert "ended at a parameter bound (A, alpha): its intervals are cut" in bound_note(
        s(3, 7), "chinchilla", ("A", "alpha"))
    assert bound_note(s(2, 30), "compute").startswith(
        "32 of the compute law posterior's 64 sample fits failed or ended at a parameter bound")
    assert bound_note(s(64, 0), "chinchilla") is None  # no interval to misread
    assert bound_note(s(0, 0, S=0), "compute") is None and bound_note({}, "compute") is None


def test_a_width_its_draws_cannot_settle_does_not_stop():
    """A trial: draws in two clusters (1.8268 and 1.7004 nats) put q10 in one or the other
    with the seed, ±0.52 % or ±3.46 %: a STOP that another --seed undid. With 6 of 64 draws
    in the lower cluster (under a tenth), q10 is in the upper one and the width is 0, but a
    resample of the draws holds 7 or more of them about a third of the time (binomial(64,
    6/64) ≥ 7: 0.39), and its width is then (1.8268 − 1.7004)/2/1.8268 ≈ 3.5 %."""
    from scipy.stats import binom

    from scalebo.search.stopping import MC_LEVEL, half_width, stop_decision, width_upper

    draws = np.array([1.8268] * 58 + [1.7004] * 6)
    q = dict(zip(("q10", "q50", "q90"), np.quantile(draws, [0.1, 0.5, 0.9]), strict=True))
    assert half_width(q) == 0.0
    assert binom.sf(6, 64, 6 / 64) > 1 - MC_LEVEL  # so the 90th percentile is the far one
    upper = width_upper(draws)
    assert upper == pytest.approx((1.8268 - 1.7004) / 2 / 1.8268, rel=0.05)
    common = {"remaining": 1e21, "cheapest_left": 1e18}
    stop, reason = stop_decision({1e25: 0.0}, uppers={1e25: upper}, **common)
    assert not stop and "but not surely" in reason and "--samples" in reason
    # a tight unimodal posterior: 0.1 % SD gives a width near 1.28 × 0.1 %, surely
    tight = 2.0 * (1 + 0.001 * np.random.default_rng(0).standard_normal(64))
    assert 0.0005 < width_upper(tight) < 0.005
    assert stop_decision({1e25: 0.0013}, uppers={1e25: width_upper(tight)}, **common)[0]


def test_status_and_the_replay_judge_a_target_alike():
    """A review: the replay's at_floor let the noise-floor clause override an unsure width
    while stop_decision did not, and one draw (width 0) stopped "surely"."""
    from scalebo.search.stopping import at_floor, stop_decision, width_upper

    assert width_upper(np.array([2.0])) == np.inf  # one draw settles nothing
    assert width_upper(np.array([1.0, -1.0, -1.0, -2.0])) == np.inf  # no positive median
    common = {"remaining": 1e21, "cheapest_left": 1e18}
    cases = [(0.004, 0.99, 0.02), (0.004, None, 0.02), (0.004, 0.5, 0.004),
             (0.02, 0.99, 0.03), (0.02, 0.5, 0.03), (0.004, None, np.inf)]
    for w, r, u in cases:
        replay = at_floor(w, r, upper=u)
        status, _ = stop_decision({1e25: w}, uppers={1e25: u}, floor_ratios={1e25: r},
                                  **common)
        assert status == replay, (w, r, u)
    # two targets: an unsure one is not waved through by the other's floor
    stop, why = stop_decision({1e24: 0.004, 1e25: 0.02}, uppers={1e24: 0.03, 1e25: 0.02},
                              floor_ratios={1e24: None, 1e25: 0.99}, **common)
    assert not stop and "1e+25" in why
