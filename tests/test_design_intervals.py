"""Target-region intervals of design checkpoints (issue 12): calibration against a known
linear-Gaussian truth, the JSON field, and the checkpoint fit's warm starts from the
design's own fit on the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from scalebo.design import (
    build_posterior,
    design_replay,
    make_pool,
    make_target,
    target_predictions,
)
from scalebo.design.pool import TargetRegion
from scalebo.design.replay import checkpoint_rows, fit_rows, target_interval
from scalebo.laws.formula import formula_law

LINE = formula_law("a + b*x", ("x",), {"a": (-10.0, 10.0), "b": (-10.0, 10.0)})


def _draw(rng: np.random.Generator, sigma: float = 0.2):
    x = np.linspace(0.0, 1.0, 30)
    xt = np.linspace(1.0, 2.0, 25)  # extrapolation: parameter uncertainty matters
    truth = lambda v: 1.0 + 2.0 * v  # noqa: E731
    return (x[:, None], truth(x) + sigma * rng.standard_normal(x.size), xt[:, None],
            truth(xt) + sigma * rng.standard_normal(xt.size))


def test_intervals_are_calibrated_on_a_known_linear_gaussian_law():
    """200 replications of a straight line with Gaussian noise (σ = 0.2), 30 rows on [0, 1],
    target rows on [1, 2]: the 80 % and 95 % observation intervals of the residual-noise
    posterior cover new target responses at close to their level (exact t-intervals would
    give 80 / 95 %; the normal approximation is a little short at n − p = 28)."""
    rng = np.random.default_rng(0)
    c80, c95 = [], []
    for _ in range(200):
        X, y, Xt, yt = _draw(rng)
        fit = fit_rows(LINE, X, y, n_starts=4, seed=0)
        iv = target_interval(LINE, fit, X, y, TargetRegion(Xt, yt))
        c80.append(iv["coverage80"])
        c95.append(iv["coverage95"])
    assert abs(np.mean(c80) - 0.80) < 0.03, np.mean(c80)
    assert abs(np.mean(c95) - 0.95) < 0.02, np.mean(c95)


def test_interval_width_matches_the_closed_form_of_ordinary_least_squares():
    """With one mode and a vague prior, the 80 % observation interval at x0 is
    ±z·s·sqrt(1 + x0ᵀ(XᵀX)⁻¹x0), s² = SSE/(n − p) (OLS prediction interval, normal z)."""
    X, y, Xt, yt = _draw(np.random.default_rng(3))
    fit = fit_rows(LINE, X, y, n_starts=4, seed=0)
    post = build_posterior(LINE, fit, X, y, X_target=Xt, noise="residual")
    A = np.column_stack([np.ones(len(y)), X[:, 0]])
    coef, sse = np.linalg.lstsq(A, y, rcond=None)[:2]
    s2 = float(sse[0]) / (len(y) - 2)
    At = np.column_stack([np.ones(len(Xt)), Xt[:, 0]])
    half = norm.ppf(0.9) * np.sqrt(s2 * (1 + np.einsum("ij,jk,ik->i", At,
                                                        np.linalg.inv(A.T @ A), At)))
    lo, hi = post.interval(Xt, 0.8, observation=True)
    np.testing.assert_allclose((hi - lo) / 2, half, rtol=1e-3)
    np.testing.assert_allclose((hi + lo) / 2, At @ coef, atol=1e-6)
    iv = target_interval(LINE, fit, X, y, TargetRegion(Xt, yt))
    assert iv["n_target"] == len(yt)
    assert iv["width80"] == pytest.approx(float(np.median(hi - lo)))
    assert iv["coverage80"] == pytest.approx(float(np.mean((yt >= lo) & (yt <= hi))))


def test_design_posterior_noise_is_the_shrunk_estimate():
    X, y, Xt, _ = _draw(np.random.default_rng(4))
    fit = fit_rows(LINE, X, y, n_starts=4, seed=0)
    n, sse = len(y), 2 * fit.fun
    post = build_posterior(LINE, fit, X, y, X_target=Xt)
    assert post.sigma2 == pytest.approx((2 * np.var(y) + sse / 2) / (n / 2 + 1))
    resid = build_posterior(LINE, fit, X, y, X_target=Xt, noise="residual")
    assert resid.sigma2 == pytest.approx(sse / (n - 2))
    with pytest.raises(ValueError, match="noise"):
        build_posterior(LINE, fit, X, y, noise="bayes")


@pytest.fixture(scope="module")
def chinchilla_pool():
    law = formula_law("E + A*N**(-a) + B*D**(-b)", ("N", "D"),
                      dict(E=(0.0, 5.0), A=(1.0, 1e5), a=(0.05, 1.0), B=(1.0, 1e5),
                           b=(0.05, 1.0)))
    rng = np.random.default_rng(1)
    N, D = (v.ravel() for v in np.meshgrid(np.geomspace(1e6, 3e8, 8),
                                           np.geomspace(1e7, 3e10, 8)))
    f = lambda n, d: 1.7 + 406.4 * n ** -0.34 + 410.7 * d ** -0.28  # noqa: E731
    pool_f = pd.DataFrame({"N": N, "D": D, "loss": f(N, D) + 0.01 * rng.standard_normal(64)})
    Nt, Dt = np.array([1e9, 3e9, 1e10]), np.array([1e11, 3e11, 1e12])
    target_f = pd.DataFrame({"N": Nt, "D": Dt, "loss": f(Nt, Dt)})
    return (law, make_pool(pool_f, law, "6*N*D", response="loss"),
            make_target(target_f, law, response="loss"))


def _spy_checkpoints(monkeypatch) -> list:
    """Record ``(budget, rows, warm starts)`` of every checkpoint fit of a replay."""
    import scalebo.design.replay as replay_mod

    seen, real = [], replay_mod._checkpoint

    def spy(law_, pool_, target_, rows, budget, n_starts, seed, warm=None):
        seen.append((budget, len(rows), warm))
        return real(law_, pool_, target_, rows, budget, n_starts, seed, warm)

    monkeypatch.setattr(replay_mod, "_checkpoint", spy)
    return seen


def test_checkpoints_report_intervals_and_start_from_the_designs_own_fit(chinchilla_pool,
                                                                        monkeypatch):
    """Every checkpoint carries its target intervals (JSON ``interval``); the variance
    design's checkpoint fits get warm starts (optima of its running fit, which never saw a
    later row), the cold replay equals ``fit_rows`` on the checkpoint's rows, and the warm
    objective is not above the cold one here."""
    law, pool, target = chinchilla_pool
    seen = _spy_checkpoints(monkeypatch)
    kw = dict(budgets=(0.01, 0.05), method="variance", seed=2, n_starts=8)
    warm = design_replay(pool, target, law, **kw)
    assert [b for b, _, _ in seen] == [0.01, 0.05]
    for _, _, w in seen:
        assert w is not None and w.ndim == 2 and w.shape[1] == law.n_params and len(w) >= 1
    assert len(seen[1][2]) > len(seen[0][2])  # + the 1 % checkpoint fit's optima
    seen.clear()
    cold = design_replay(pool, target, law, warm_checkpoints=False, **kw)
    assert all(w is None for _, _, w in seen)
    assert warm.order == cold.order
    cum = np.array(cold.cum_cost_fraction)
    for w, c in zip(warm.checkpoints, cold.checkpoints, strict=True):
        rows = list(cold.order[:checkpoint_rows(cum, c.budget)])
        ref = fit_rows(law, pool.X[rows], pool.y[rows], n_starts=8, seed=2)
        assert c.params == pytest.approx(ref.params)
        sse = {k: float(np.sum((law.predict(law.from_natural(cp.params), pool.X[rows])
                                - pool.y[rows]) ** 2)) for k, cp in (("w", w), ("c", c))}
        assert sse["w"] <= sse["c"] * (1 + 1e-9)
        d = w.to_dict()["interval"]
        assert set(d) == {"n_target", "width80", "width95", "coverage80", "coverage95"}
        assert 0 < d["width80"] < d["width95"] and 0 <= d["coverage80"] <= d["coverage95"] <= 1


def test_a_pilot_past_the_first_budget_gets_no_warm_starts_from_later_rows(chinchilla_pool,
                                                                          monkeypatch):
    """A budget below the pilot's spend: its checkpoint holds fewer rows than were bought,
    so no fit of the design (all on more rows) may seed it."""
    law, pool, target = chinchilla_pool
    seen = _spy_checkpoints(monkeypatch)
    rep = design_replay(pool, target, law, budgets=(1e-7, 0.05), method="variance", seed=0,
                        n_starts=8)
    (b0, k0, w0), (_, k1, w1) = seen
    assert k0 < rep.n_pilot < k1 and w0 is None and w1 is not None


def test_interval_needs_more_rows_than_parameters():
    X, y, Xt, yt = _draw(np.random.default_rng(5))
    fit = fit_rows(LINE, X[:2], y[:2], n_starts=4, seed=0)
    assert fit is not None
    assert target_interval(LINE, fit, X[:2], y[:2], TargetRegion(Xt, yt)) == {}


def test_cli_pools_group_intervals_and_reports_none_for_a_failed_fit():
    from scalebo.cli.design import _pooled_interval

    one = {"n_target": 4, "width80": 0.2, "width95": 0.3, "coverage80": 0.75,
           "coverage95": 1.0}
    two = {"n_target": 12, "width80": 0.5, "width95": 0.7, "coverage80": 0.25,
           "coverage95": 0.5}
    assert _pooled_interval(one) == {"cover80": 0.75, "width80": 0.2}
    assert _pooled_interval({"n_target": one, "g2": two}) == {  # a group named n_target
        "cover80": pytest.approx((0.75 * 4 + 0.25 * 12) / 16), "width80": 0.5}
    assert _pooled_interval({"g1": one, "g2": {}}) == {"cover80": None, "width80": None}
    assert _pooled_interval({}) == {"cover80": None, "width80": None}
    no_y = {k: v for k, v in one.items() if not k.startswith("coverage")}
    assert _pooled_interval(no_y) == {"cover80": None, "width80": 0.2}


def test_target_predictions_match_ols_and_fit_each_group_on_its_own_runs():
    """One group: the OLS prediction interval (as above). Two groups with different lines:
    each target row is predicted from its own group's runs."""
    X, y, Xt, _ = _draw(np.random.default_rng(6))
    (p0,) = target_predictions(LINE, X, y, TargetRegion(Xt[:1], None), n_starts=4)
    A = np.column_stack([np.ones(len(y)), X[:, 0]])
    coef, sse = np.linalg.lstsq(A, y, rcond=None)[:2]
    a0 = np.array([1.0, Xt[0, 0]])
    half = norm.ppf(0.975) * np.sqrt(float(sse[0]) / (len(y) - 2)
                                     * (1 + a0 @ np.linalg.inv(A.T @ A) @ a0))
    assert p0["mean"] == pytest.approx(a0 @ coef, abs=1e-6)
    assert (p0["hi95"] - p0["lo95"]) / 2 == pytest.approx(half, rel=1e-3)
    assert p0["target_row"] == 0 and p0["x"] == Xt[0, 0]
    y2 = 5.0 - 1.0 * X[:, 0]  # group b: noise-free, a different line
    preds = target_predictions(LINE, np.vstack([X, X]), np.concatenate([y, y2]),
                               TargetRegion(np.array([[2.0], [3.0]]), None), n_starts=4,
                               target_groups=["b", "a"], done_groups=["a"] * 30 + ["b"] * 30)
    assert [p["group"] for p in preds] == ["b", "a"]
    assert preds[0]["mean"] == pytest.approx(3.0, abs=1e-6)
    assert preds[1]["mean"] == pytest.approx(coef[0] + 3.0 * coef[1], abs=1e-6)
    # a group with no run yet (a campaign's start, 0.4.18): listed, no prediction, the reason
    (young,) = target_predictions(LINE, X, y, TargetRegion(Xt[:1], None), n_starts=4,
                                  target_groups=["c"], done_groups=["a"] * 30)
    assert young["mean"] is None and young["lo80"] is None
    assert young["note"].startswith("group 'c': cannot fit") and "needs at least" in young["note"]
