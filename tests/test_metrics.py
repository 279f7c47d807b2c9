"""Replay metrics on hand-made cases: a perfect set, a known offset, failures, recovery."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.metrics import EXTRAPOLATION_C, c_key, evaluate, law_metrics
from scalebo.bench.problems import problem_from_table
from scalebo.bench.synthetic import SyntheticLaw, make_synthetic
from scalebo.laws import CHINCHILLA

#: Every 30th of Hoffmann's 4,500 starts: enough for noise-free data, and fast.
COARSE = CHINCHILLA.start_grid()[::30]


@pytest.fixture(scope="module")
def problem():
    """Noise-free synthetic grid: 5 N × 4 D cells × (3 lr × 2 bs) = 120 configurations."""
    frame = make_synthetic(SyntheticLaw(noise=0.0), N=5e7 * 2.0 ** np.arange(5),
                           D=1e9 * 2.0 ** np.arange(4), lr=[5e-4, 1e-3, 2e-3], bs=[128, 256])
    return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="tiny",
                              chinchilla_starts=COARSE)


def test_problem_layout(problem):
    grid = problem.grid
    assert grid.n_configs == 120 and problem.held_out_cells.shape[0] == 2
    assert not grid.held_out[problem.envelope_idx].any()
    assert not grid.held_out[problem.cell_best_idx].any()
    assert problem.cell_best_idx.size == 18
    # Floor: cell-best configurations' cost / C_total; every config of a cell costs the same
    # here, so the floor is 1/6 of the acquirable compute.
    assert problem.floor_cells == pytest.approx(1 / 6)
    assert problem.floor_envelope < problem.floor_cells


def test_all_acquirable_configs_give_zero_error_and_full_recovery(problem):
    idx = np.flatnonzero(~problem.grid.held_out)
    m = evaluate(problem, idx, budget=1.0)
    assert m.spent_fraction == pytest.approx(1.0)
    assert m.n_runs == idx.size
    assert m.envelope_recovery_pct == 100.0 and m.cell_recovery_pct == 100.0
    assert m.floor_multiple_cells == pytest.approx(6.0)
    for law in ("compute", "chinchilla"):
        lm = m.observed[law]
        assert lm.ok, lm.message
        assert max(lm.param_error.values()) < 1e-6
        assert max(abs(v) for v in lm.extrapolation_pct.values()) < 1e-6
    assert m.fantasized is None


def test_envelope_only_recovers_envelope_and_compute_law(problem):
    m = evaluate(problem, problem.envelope_idx, budget=0.1)
    assert m.envelope_recovery_pct == 100.0
    shared = np.intersect1d(problem.envelope_idx, problem.cell_best_idx).size
    assert m.cell_recovery_pct == pytest.approx(100 * shared / 18)
    assert m.observed["compute"].abs_extrapolation(1e25) < 1e-6
    grid = problem.grid
    assert m.spent_flops == pytest.approx(grid.cost[problem.envelope_idx].sum())
    assert m.floor_multiple_envelope == pytest.approx(1.0)


def test_known_offset_gives_known_errors(problem):
    """Losses L_ref(C) + δ are fitted exactly by E + δ: the errors follow by hand."""
    ref = problem.reference_compute
    C = problem.grid.cost[problem.envelope_idx]
    delta = 0.01
    table = pd.DataFrame({"N": 1.0, "D": C / 6, "C": C,
                          "loss": ref.predict(C[:, None]) + delta})
    lm = law_metrics(problem, "compute", table)
    assert lm.ok and lm.n_points == C.size
    assert lm.param_error["E"] == pytest.approx(delta, rel=1e-4)
    assert lm.param_error["alpha"] == pytest.approx(0.0, abs=1e-5)
    assert lm.param_error["log10_A"] == pytest.approx(0.0, abs=1e-4)
    for c in EXTRAPOLATION_C:
        want = 100 * delta / ref.predict(np.array([[c]]))[0]
        assert lm.extrapolation_pct[c_key(c)] == pytest.approx(want, rel=1e-3)
    held = problem.held_out_cells
    want_mse = np.mean((ref.predict(held[["C"]].to_numpy()) + delta - held["best_loss"]) ** 2)
    assert lm.heldout_mse == pytest.approx(want_mse, rel=1e-3)


def test_too_few_points_is_a_recorded_failure(problem):
    m = evaluate(problem, problem.envelope_idx[:2], budget=0.01)
    lm = m.observed["compute"]
    assert lm.status == "failed" and not lm.ok
    # in the user's terms (the law is fitted on a frontier, not on every run)
    assert lm.message == ("its Pareto envelope of (compute, loss) has 2 points, fewer than the "
                          "compute law's 3 parameters")
    assert m.observed["chinchilla"].message == ("it has 2 (N, D) cells, fewer than the "
                                                "chinchilla law's 5 parameters")
    assert lm.params is None and lm.extrapolation_pct is None and lm.heldout_mse is None
    assert m.to_dict()["observed"]["compute"]["params"] is None


def test_rejects_held_out_or_repeated_rows(problem):
    held = np.flatnonzero(problem.grid.held_out)[:1]
    with pytest.raises(ValueError, match="acquirable"):
        evaluate(problem, held, budget=0.1)
    with pytest.raises(ValueError, match="distinct"):
        evaluate(problem, [0, 0], budget=0.1)


def test_repeated_configurations_are_averaged_with_a_note():
    frame = make_synthetic(SyntheticLaw(noise=0.0), N=[1e8, 2e8, 4e8], D=[1e9, 2e9, 4e9],
                           lr=[1e-3, 2e-3], bs=[256])[["N", "D", "lr", "bs", "loss"]]
    extra = frame.iloc[[0]].assign(loss=frame["loss"].iloc[0] + 0.2)
    with pytest.warns(UserWarning, match="averaged"):
        p = problem_from_table(pd.concat([frame, extra]), name="rep", n_held_out_cells=1,
                               chinchilla_starts=COARSE)
    assert p.grid.n_configs == len(frame)
    assert p.n_repeats.max() == 2 and p.notes
    row = p.grid.index_of(frame.iloc[[0]])[0]
    assert p.loss[row] == pytest.approx(frame["loss"].iloc[0] + 0.1)


def test_chinchilla_fit_without_compute_optimum_keeps_its_other_metrics(problem, monkeypatch):
    """An L(N, D) fit with β = 0 (at its bound) has no compute-optimal allocation, so no
    extrapolation in C; the cell must still record the fit, its parameter errors and the
    held-out MSE, and say why the extrapolation is missing (it used to fail the cell)."""
    import dataclasses

    import scalebo.bench.metrics as metrics

    ref = problem.reference_chinchilla
    x = ref.x.copy()
    x[CHINCHILLA.param_names.index("beta")] = 0.0
    flat = dataclasses.replace(ref, x=x)
    monkeypatch.setattr(metrics, "fit_table", lambda problem, law, table: flat)
    table = metrics.observed_table(problem, problem.envelope_idx)
    lm = law_metrics(problem, "chinchilla", table)
    assert lm.ok and lm.params["beta"] == 0.0
    assert lm.extrapolation_pct is None and lm.abs_extrapolation() is None
    assert "no extrapolation in compute" in lm.message and "positive exponents" in lm.message
    assert lm.param_error["beta"] == pytest.approx(ref.params["beta"])
    assert lm.heldout_mse is not None and np.isfinite(lm.heldout_mse)


def test_replay_fit_is_fit_law_with_the_reference_starts_and_never_sees_its_optima(problem):
    """fit_table == fit_law with the start grid of the reference fit (the law's default, or
    the problem's own Chinchilla grid) on the same frontier points; replacing the reference
    fits by nonsense changes nothing."""
    import dataclasses

    from scalebo.bench.metrics import fit_table
    from scalebo.fitting.frontier import best_per_cell, pareto_envelope
    from scalebo.fitting.robust import fit_law
    from scalebo.laws import COMPUTE_LAW

    rng = np.random.default_rng(0)
    idx = rng.choice(np.flatnonzero(~problem.grid.held_out), 40, replace=False)
    table = problem.grid.configs.iloc[idx].copy()
    table["loss"] = problem.loss[idx] * rng.lognormal(0, 0.01, idx.size)
    C, y = table["C"].to_numpy(), table["loss"].to_numpy()
    env = pareto_envelope(C, y)
    want_c = fit_law(COMPUTE_LAW, C[env][:, None], y[env])
    best = best_per_cell(table)
    want_ch = fit_law(CHINCHILLA, best[["N", "D"]].to_numpy(float), best["loss"].to_numpy(),
                      starts=COARSE)
    bad_ref = problem.reference_compute
    bad_ref = dataclasses.replace(bad_ref, converged_x=bad_ref.converged_x * 0 + 7.0)
    nonsense = dataclasses.replace(problem, reference_compute=bad_ref,
                                   reference_chinchilla=None)
    for prob in (problem, nonsense):
        got_c, got_ch = fit_table(prob, "compute", table), fit_table(prob, "chinchilla", table)
        np.testing.assert_array_equal(got_c.x, want_c.x)
        np.testing.assert_array_equal(got_ch.x, want_ch.x)
        assert got_c.n_starts == want_c.n_starts and got_ch.n_starts == COARSE.shape[0]


def test_score_intervals_cover_the_reference_by_hand(problem):
    """covered = the reference's loss inside q10–q90 / q02.5–q97.5 (1e-6 relative slack)."""
    from scalebo.bench.intervals import COVERAGE_RTOL, reference_losses, score_intervals

    ref = reference_losses(problem, "compute")
    C = np.array(EXTRAPOLATION_C)
    np.testing.assert_allclose(list(ref.values()), problem.reference_compute.predict(C[:, None]))
    r = ref["1e+25"]
    quant = {"1e+25": {"q02.5": r - 2, "q10": r + 0.1, "q50": r + 0.2, "q90": r + 0.3,
                       "q97.5": r + 0.4},  # 80 % misses (above), 95 % covers
             "1e+27": {k: ref["1e+27"] * (1 + COVERAGE_RTOL / 2)  # a collapsed, exact fit
                       for k in ("q02.5", "q10", "q50", "q90", "q97.5")},
             "1e+29": {k: ref["1e+29"] * (1 + 10 * COVERAGE_RTOL)  # collapsed, off by 1e-5
                       for k in ("q02.5", "q10", "q50", "q90", "q97.5")}}
    out = score_intervals(problem, {"compute": {"predicted_loss": quant, "samples": 4}})
    cov = out["compute"]["covered"]
    assert cov["1e+25"] == {"80": False, "95": True}
    assert cov["1e+27"] == {"80": True, "95": True}
    assert cov["1e+29"] == {"80": False, "95": False}
    assert out["compute"]["reference_loss"] == ref and out["compute"]["samples"] == 4


def test_shared_point_fits_give_the_same_metrics_and_bootstrap(problem):
    """A replay fits the observed table once and hands the fits to its metrics and its
    bootstrap: both must equal what they compute on their own; a law the table cannot
    identify is left out of ``point_fits`` and still recorded as failed."""
    from scalebo.bench.intervals import bootstrap_summary
    from scalebo.bench.metrics import observed_table, point_fits

    rng = np.random.default_rng(3)
    idx = rng.choice(np.flatnonzero(~problem.grid.held_out), 60, replace=False)
    fits = point_fits(problem, observed_table(problem, idx))
    assert set(fits) == {"compute", "chinchilla"}
    alone = evaluate(problem, idx, budget=0.5)
    shared = evaluate(problem, idx, budget=0.5, observed_fits=fits)
    assert shared == alone
    table = observed_table(problem, idx)
    assert (bootstrap_summary(problem, "compute", table, n_resamples=20, seed=1,
                              fit=fits["compute"])
            == bootstrap_summary(problem, "compute", table, n_resamples=20, seed=1))
    two = problem.envelope_idx[:2]
    assert "compute" not in point_fits(problem, observed_table(problem, two))
    m = evaluate(problem, two, budget=0.01,
                 observed_fits=point_fits(problem, observed_table(problem, two)))
    assert not m.observed["compute"].ok and m.observed["compute"].status == "failed"


def test_bootstrap_summary_says_why_replicates_are_missing(problem):
    """On 7 Chinchilla cells most resamples draw too few distinct cells to identify the law
    (5 distinct (N, D) points and 3 distinct N and D values are needed): the summary counts
    them as unidentified, exactly as many as an independent count over the same seeded
    multinomial draws, and its parts add up to ``n_failed``."""
    from scalebo.bench.intervals import bootstrap_summary
    from scalebo.bench.metrics import _points, observed_table

    cfg = problem.grid.configs
    Ns, Ds = np.sort(cfg["N"].unique()), np.sort(cfg["D"].unique())
    cells = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (1, 2), (2, 1)]
    chosen = np.any([(cfg["N"].to_numpy() == Ns[i]) & (cfg["D"].to_numpy() == Ds[j])
                     for i, j in cells], axis=0)
    table = observed_table(problem, np.flatnonzero(chosen & ~problem.grid.held_out))
    X, _ = _points("chinchilla", table)
    assert X.shape == (7, 2)
    out = bootstrap_summary(problem, "chinchilla", table, n_resamples=200, seed=1)

    counts = np.random.default_rng(1).multinomial(7, np.full(7, 1 / 7), size=200)
    drawn = [X[c > 0] for c in counts]
    expected = sum(len(d) < 5 or len(np.unique(d[:, 0])) < 3 or len(np.unique(d[:, 1])) < 3
                   for d in drawn)
    assert 50 < expected < 200
    assert out["n_unidentified"] == expected
    assert out["n_failed"] == out["n_unidentified"] + out["n_unconverged"] \
        + out["n_no_prediction"]
    assert out["predicted_loss"] is not None and out["samples"] == 200


def test_the_fill_ins_point_is_the_posterior_median_only_outside_its_80_interval(problem):
    """Losses L_ref(C) + δ fit exactly E + δ (above). A law posterior whose 80 % interval at
    1e25 excludes that fit moves the point estimate there, and only there, to its median;
    one that contains it leaves the fit's value; without a posterior nothing changes."""
    from scalebo.bench.metrics import point_estimate

    assert point_estimate(2.0, {"q10": 1.9, "q50": 1.95, "q90": 2.1}) == (2.0, "fit")
    assert point_estimate(2.2, {"q10": 1.9, "q50": 1.95, "q90": 2.1}) == (1.95,
                                                                          "posterior median")
    assert point_estimate(1.8, None) == (1.8, "fit")
    # a review: a posterior collapsed onto the fit is not "outside" it by rounding
    assert point_estimate(2.0 + 1e-12, {"q10": 2.0, "q50": 2.0, "q90": 2.0}) == (2.0 + 1e-12,
                                                                                 "fit")
    ref = problem.reference_compute
    C = problem.grid.cost[problem.envelope_idx]
    delta = 0.01
    table = pd.DataFrame({"N": 1.0, "D": C / 6, "C": C, "loss": ref.predict(C[:, None]) + delta})
    at = {c_key(c): float(ref.predict(np.array([[c]]))[0]) for c in EXTRAPOLATION_C}
    wide = {k: {"q10": v - 1, "q50": v, "q90": v + 1} for k, v in at.items()}
    narrow = dict(wide, **{"1e+25": {"q10": at["1e+25"] - 0.002, "q50": at["1e+25"] - 0.001,
                                     "q90": at["1e+25"]}})  # the fit lies 0.01 above
    plain = law_metrics(problem, "compute", table)
    same = law_metrics(problem, "compute", table, posterior={"predicted_loss": wide})
    moved = law_metrics(problem, "compute", table, posterior={"predicted_loss": narrow})
    assert plain.extrapolation_pct == same.extrapolation_pct
    assert set(plain.point_from.values()) == set(same.point_from.values()) == {"fit"}
    assert moved.point_from == {"1e+25": "posterior median", "1e+27": "fit", "1e+29": "fit"}
    assert moved.extrapolation_pct["1e+25"] == pytest.approx(-100 * 0.001 / at["1e+25"])
    assert moved.extrapolation_pct["1e+27"] == plain.extrapolation_pct["1e+27"]
    assert moved.params == plain.params  # the law itself is the fit's
