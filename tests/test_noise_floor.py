"""The noise floor of the compute law (:mod:`scalebo.search.noise_floor`) and the stop rule's
floor clause, on a synthetic grid whose law and noise are known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve

import scalebo.search.noise_floor as nf_module
from scalebo.bench.synthetic import make_synthetic
from scalebo.search.campaign import campaign_gp
from scalebo.search.campaign_runs import read_campaign_runs
from scalebo.search.grid import Grid
from scalebo.search.law_posterior import law_posterior
from scalebo.search.law_samples import draw_with_model
from scalebo.search.models.gp import GaussianProcess
from scalebo.search.noise_floor import noise_floor
from scalebo.search.status import campaign_status
from scalebo.search.stopping import at_floor, stop_decision


@pytest.fixture(scope="module")
def synthetic():
    frame = make_synthetic(lr=1.25e-4 * 4.0 ** np.arange(4), bs=np.array([128.0, 512.0]))
    grid = Grid.from_frame(frame[["N", "D", "lr", "bs"]], n_held_out_cells=0)
    return grid, frame["loss"].to_numpy()


def _floor(grid, loss, idx, **kw):
    return noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), targets=(1e21, 1e22),
                       n_samples=32, rng=0, **kw)


def test_a_fully_trained_grid_is_at_its_floor(synthetic):
    grid, loss = synthetic
    nf = _floor(grid, loss, np.arange(len(grid)))
    assert nf.n_untried == 0 and nf.ratio == (1.0, 1.0) and nf.message == ""
    assert nf.n_fits >= 2 and nf.floor([0.004, None]) == (0.004, None)


def test_the_floor_predicts_the_fully_trained_grids_interval(synthetic):
    """80 % of the configurations trained (at random): the floor the status shows is the
    noise-free half-width of the fully trained grid to within 30 % (measured: 0.129 vs
    0.156 % at 1e21 FLOPs, 0.261 vs 0.279 % at 1e22)."""
    grid, frame = synthetic[0], make_synthetic(lr=1.25e-4 * 4.0 ** np.arange(4),
                                               bs=np.array([128.0, 512.0]))
    cols = ["N", "D", "lr", "bs", "loss"]
    pick = np.random.default_rng(0).random(len(grid))
    kw = dict(targets=(1e21, 1e22), n_samples=32, estimand="noise_free")
    part = campaign_status(grid, read_campaign_runs(frame[pick < 0.8][cols], grid),
                           grid.C_total, **kw)
    full = campaign_status(grid, read_campaign_runs(frame[cols], grid), grid.C_total, **kw)
    for p, f in zip(part.targets, full.targets, strict=True):
        assert p.floor_half_width_pct < p.half_width_pct
        assert p.floor_half_width_pct == pytest.approx(f.half_width_pct, rel=0.3)
    assert part.noise_floor["n_untried"] == int((pick >= 0.8).sum())


def test_the_status_posterior_is_reused_only_when_it_is_the_floors_own(synthetic,
                                                                       monkeypatch):
    """The status passes its noise-free posterior: over the whole grid its draws and fits are
    the floor's own (same result, no second draw); a windowed or reference one is redrawn."""
    grid, loss = synthetic
    idx = np.flatnonzero(np.random.default_rng(1).random(len(grid)) < 0.6)
    kw = dict(laws=("compute",), n_samples=16, targets=(1e21,), rng=0, keep_samples=True)
    fresh = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), targets=(1e21,),
                        n_samples=16, rng=0)
    cap = float(np.median(grid.cost))
    for scope, estimand, reused in (("grid", "noise_free", True), ("window", "noise_free",
                                     False), ("grid", "reference", False)):
        post = law_posterior(grid, idx, loss[idx], campaign_gp(grid, 0), scope=scope,
                             cap=cap if scope == "window" else None, estimand=estimand,
                             **kw)["compute"]
        assert (post.samples.rows.size == len(grid)) == (scope == "grid")
        calls: list[int] = []

        def counted(*args, calls=calls, **kwargs):
            calls.append(1)
            return draw_with_model(*args, **kwargs)

        monkeypatch.setattr(nf_module, "draw_with_model", counted)
        nf = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), targets=(1e21,),
                         n_samples=16, rng=0, prepared=post)
        monkeypatch.undo()
        assert nf.ratio == fresh.ratio and nf.n_fits == fresh.n_fits
        assert len(calls) == (0 if reused else 1)


def test_failed_and_held_out_configurations_are_not_conditioned_on(synthetic):
    """Failed runs are not proposed again and held-out cells are never trained: neither
    counts as untried; a run in flight does (it will be observed)."""
    _, loss = synthetic
    frame = make_synthetic(lr=1.25e-4 * 4.0 ** np.arange(4), bs=np.array([128.0, 512.0]))
    grid = Grid.from_frame(frame[["N", "D", "lr", "bs"]], n_held_out_cells=1)
    held = int(grid.held_out.sum())
    idx = np.flatnonzero(~grid.held_out)[::3]
    failed = np.setdiff1d(np.flatnonzero(~grid.held_out), idx)[:5]
    nf = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), n_samples=16, rng=0,
                     exclude=failed)
    assert held > 0 and nf.n_untried == len(grid) - held - idx.size - failed.size
    assert nf.ratio[0] is not None and 0 < nf.ratio[0] < 1



def test_a_posterior_without_the_failed_runs_is_reused_by_their_floor(synthetic, monkeypatch):
    """``status`` draws its posterior without the failed runs (``failed=``) and hands it to
    the floor with ``exclude=`` those runs: the draws are the floor's own, not redrawn, and
    no draw is made at a failed run."""
    grid, loss = synthetic
    idx = np.flatnonzero(np.random.default_rng(2).random(len(grid)) < 0.6)
    failed = np.setdiff1d(np.arange(len(grid)), idx)[:4]
    post = law_posterior(grid, idx, loss[idx], campaign_gp(grid, 0), laws=("compute",),
                         n_samples=16, targets=(1e21,), rng=0, keep_samples=True,
                         estimand="noise_free", failed=failed)["compute"]
    assert not np.isin(failed, post.samples.rows).any()
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(1)
        return draw_with_model(*args, **kwargs)

    monkeypatch.setattr(nf_module, "draw_with_model", counted)
    nf = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), targets=(1e21,),
                     n_samples=16, rng=0, prepared=post, exclude=failed)
    assert calls == [] and nf.n_untried == len(grid) - idx.size - failed.size
    fresh = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0), targets=(1e21,),
                        n_samples=16, rng=0, exclude=failed)
    assert len(calls) == 1 and fresh.ratio == nf.ratio


@pytest.mark.parametrize("kernel, trend", [("matern52", True), ("transfer", False)])
def test_other_campaign_gps_give_a_floor_or_say_why_not(synthetic, kernel, trend):
    grid, loss = synthetic
    idx = np.flatnonzero(np.random.default_rng(1).random(len(grid)) < 0.4)
    nf = noise_floor(grid, idx, loss[idx], campaign_gp(grid, 0, kernel=kernel, trend=trend),
                     targets=(1e21,), n_samples=16, rng=0)
    assert (nf.ratio[0] is not None and 0 < nf.ratio[0] <= 1) or nf.message


def test_a_gp_whose_noise_is_at_its_bound_has_no_floor(synthetic):
    """A GP that believes the runs noise-free would call any interval shrinkable: no floor."""
    grid, loss = synthetic
    idx = np.arange(0, len(grid), 3)
    gp = GaussianProcess(noise=1e-6, noise_bounds=(1e-6, 1e-6), rng=0)
    nf = noise_floor(grid, idx, loss[idx], gp, targets=(1e21,), n_samples=16, rng=0)
    assert nf.ratio == (None,) and "noise variance is at its lower bound" in nf.message


def test_conditioning_on_every_untried_configuration_matches_the_textbook_formula(synthetic):
    """The floor's covariance: a GP with fixed hyperparameters conditioned on noisy runs at
    every configuration, checked against Σ' = K_ss − K_sA (K_AA + σ²I)⁻¹ K_As."""
    grid, loss = synthetic
    X = grid.encode()
    idx = np.arange(0, len(grid), 7)
    gp = GaussianProcess(rng=0).fit(X[idx], loss[idx])
    rest = np.setdiff1d(np.arange(len(grid)), idx)
    cond = gp.condition_on(X[rest], gp.predict(X[rest], return_std=False))
    s = np.arange(0, len(grid), 23)
    A = np.concatenate([idx, rest])
    k = gp.amplitude_ * gp.kernel_(X[A])
    k.flat[:: A.size + 1] += gp.noise_ + gp.jitter_
    ks = gp.amplitude_ * gp.kernel_(X[A], X[s])
    want = (gp.amplitude_ * gp.kernel_(X[s]) - ks.T @ cho_solve(cho_factor(k), ks)) \
        * gp.y_std_**2
    np.testing.assert_allclose(cond.posterior_cov(X[s]), want, atol=1e-9 * np.abs(want).max())


def test_a_surrogate_without_conditioning_has_no_floor(synthetic):
    grid, loss = synthetic

    class NoCondition:
        def fit(self, X, y):
            return self

    nf = noise_floor(grid, np.arange(10), loss[:10], NoCondition(), targets=(1e21,))
    assert nf.ratio == (None,) and "condition_on" in nf.message
    with pytest.raises(ValueError, match="positive"):
        noise_floor(grid, np.arange(10), loss[:10], NoCondition(), targets=(0.0,))


def test_the_stop_rule_stops_at_the_floor_by_hand():
    kw = dict(remaining=1e20, cheapest_left=1e18)
    stop, why = stop_decision({1e25: 0.04}, floor_ratios={1e25: 0.9}, **kw)
    assert stop and "narrow it by only 10 %" in why and "±3.6 %" in why and "noise floor" in why
    stop, why = stop_decision({1e25: 0.04}, floor_ratios={1e25: 0.5}, **kw)
    assert not stop and "could narrow it to ±2 %" in why
    # every target still wider than the tolerance must be at its floor; a narrow one need not
    assert not stop_decision({1e25: 0.04, 1e24: 0.03}, floor_ratios={1e25: 0.9, 1e24: 0.5},
                             **kw)[0]
    assert stop_decision({1e25: 0.04, 1e24: 0.003}, floor_ratios={1e25: 0.9, 1e24: None},
                         **kw)[0]
    assert not stop_decision({1e25: 0.04}, floor_ratios={1e25: None}, **kw)[0]
    assert not stop_decision({1e25: 0.04}, **kw)[0]  # no floor clause without ratios
    assert stop_decision({1e25: 0.04}, floor_ratios={1e25: 0.75}, min_shrink=0.3, **kw)[0]
    assert at_floor(0.004, None) and not at_floor(None, 1.0) and not at_floor(0.04, 0.79)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="min_shrink"):
            stop_decision({1e25: 0.04}, floor_ratios={1e25: 0.9}, min_shrink=bad, **kw)


def test_the_rule_never_stops_on_a_law_at_a_bound():
    """A StepLaw campaign at 6 % of its compute: E at its lower bound, a ±0.15 % interval
    10 % below the full grid's law, and the rule said STOP. Not any more, unless the budget
    is gone or every configuration is trained."""
    # the names come from law_at_bound, not from the message text (here it names another)
    kw = dict(remaining=1e20, cheapest_left=1e18, law_status="bound hit",
              law_message="converged with alpha at a bound (alpha = 0 at its lower bound)",
              law_at_bound=("E",))
    stop, why = stop_decision({1e25: 0.0015}, **kw)
    assert not stop and "hit a bound (E at its limit)" in why and "alpha" not in why
    two = stop_decision({1e25: 0.0015}, **{**kw, "law_at_bound": ("E", "alpha")})[1]
    assert "hit a bound (E, alpha at their limits)" in two
    unnamed = stop_decision({1e25: 0.0015}, **{**kw, "law_at_bound": ()})[1]
    assert "hit a bound (a parameter at its limit)" in unnamed
    assert not stop_decision({1e25: 0.04}, floor_ratios={1e25: 1.0}, **kw)[0]
    assert stop_decision({1e25: 0.0015}, **{**kw, "remaining": 1e17})[0]
    assert stop_decision({1e25: 0.0015}, **{**kw, "cheapest_left": None})[0]
    assert stop_decision({1e25: 0.0015}, **{**kw, "law_status": "converged"})[0]




def test_status_hands_the_fits_bound_names_to_the_rule():
    """``status`` passes the point fit's :attr:`FitResult.at_bound` to the rule (a fit whose
    E bound excludes the truth, E = 1 under a lower bound of e^0.5)."""
    from types import SimpleNamespace

    from scalebo.fitting.robust import fit_law
    from scalebo.laws import COMPUTE_LAW, PowerLawSum, PowerTerm
    from scalebo.search.status import _law_status

    law = PowerLawSum("bounded", (PowerTerm("C", "A", "alpha"),), log_E_bounds=(0.5, 3.0))
    C = np.geomspace(1e18, 1e22, 12)
    y = COMPUTE_LAW.predict(COMPUTE_LAW.from_natural({"E": 1.0, "A": 50, "alpha": 0.1}), C)
    fit = fit_law(law, C, y)
    settled = _law_status(SimpleNamespace(point=fit), C)
    assert settled == {"law_status": "bound hit", "law_message": fit.message,
                       "law_at_bound": ("E",)}
    assert "hit a bound (E at its limit)" in stop_decision(
        {1e25: 0.001}, remaining=1e20, cheapest_left=1e18, **settled)[1]
