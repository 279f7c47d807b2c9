"""Bootstrap of formula laws (:mod:`scalebo.fitting.formula_bootstrap`): noise-free data give
intervals that are narrow and hold the truth; with noise of known SD the 80 % intervals cover
the truth about 80 % of the time; each batched replicate reaches the optimum a full 64-start
refit of the same resample finds; failures are counted; inputs are checked."""

from __future__ import annotations

import numpy as np
import pytest

from scalebo.fitting.bootstrap import BootstrapResult, distinct_optima
from scalebo.fitting.formula_bootstrap import FormulaBootstrapResult, bootstrap_formula
from scalebo.fitting.formula_fit import fit_formula, natural_objective
from scalebo.fitting.robust import fit_law, objective
from scalebo.laws import COMPUTE_LAW
from scalebo.laws.formula import formula_law

CHIN = "E + A*N**(-a) + B*D**(-b)"
CHIN_BOUNDS = {"E": (0.1, 10.0), "A": (1.0, 1e5), "a": (0.01, 2.0), "B": (1.0, 1e5),
               "b": (0.01, 2.0)}
CHIN_TRUTH = {"E": 1.7, "A": 400.0, "a": 0.34, "B": 800.0, "b": 0.28}


def chinchilla_data(n: int, seed: int = 0, log_sd: float = 0.0):
    rng = np.random.default_rng(seed)
    N = np.exp(rng.uniform(np.log(1e7), np.log(1e9), n))
    D = np.exp(rng.uniform(np.log(1e9), np.log(1e11), n))
    t = CHIN_TRUTH
    y = t["E"] + t["A"] * N ** -t["a"] + t["B"] * D ** -t["b"]
    return np.column_stack([N, D]), y * np.exp(rng.normal(0.0, log_sd, n))


@pytest.mark.parametrize("residuals", ["log", "natural"])
def test_noise_free_intervals_hold_the_truth_and_are_narrow(residuals):
    law = formula_law(CHIN, ["N", "D"], CHIN_BOUNDS)
    X, y = chinchilla_data(40)
    fit = fit_formula(law, X, y, residuals=residuals, n_starts=32, seed=1)
    boot = bootstrap_formula(fit, X, y, residuals=residuals, n_resamples=40, rng=3)
    assert isinstance(boot, FormulaBootstrapResult) and isinstance(boot, BootstrapResult)
    assert boot.n_failed == 0 and boot.samples.shape == (40, 5)
    assert boot.residuals == residuals and boot.seed == 3
    for k, truth in CHIN_TRUTH.items():
        lo, hi = boot.intervals[k]
        tol = 1e-4 * abs(truth)
        assert lo - tol <= truth <= hi + tol, (k, lo, hi)
        assert hi - lo < 1e-3 * abs(truth), (k, lo, hi)
    # the band of an extrapolated prediction holds the true value too
    far = np.array([[1e11, 2e12]])
    t = CHIN_TRUTH
    truth = t["E"] + t["A"] * 1e11 ** -t["a"] + t["B"] * 2e12 ** -t["b"]
    lo, hi = boot.predict_interval(far)
    assert lo[0] - 1e-6 <= truth <= hi[0] + 1e-6 and hi[0] - lo[0] < 1e-4


def test_80_percent_intervals_cover_the_truth_about_80_percent_of_the_time():
    """40 data sets of 24 rows with Gaussian noise of SD 0.02 on a power law; the 80 %
    percentile interval of the exponent covers the true 0.15 in 60–95 % of them (were the
    resampling or its weights wrong, the intervals would be points or far too narrow)."""
    law = formula_law("A*C**(-alpha)", ["C"], {"A": (1.0, 1e4), "alpha": (0.01, 1.0)})
    C = np.repeat(np.geomspace(1e17, 1e21, 8), 3)[:, None]
    clean = 300.0 * C[:, 0] ** -0.15
    covered, widths = [], []
    for r in range(40):
        y = clean + np.random.default_rng(100 + r).normal(0.0, 0.02, clean.size)
        fit = fit_formula(law, C, y, residuals="natural", n_starts=4, seed=r)
        boot = bootstrap_formula(fit, C, y, residuals="natural", n_resamples=50,
                                 confidence_level=0.8, rng=r, n_optima=1, n_random=1)
        lo, hi = boot.intervals["alpha"]
        covered.append(lo <= 0.15 <= hi)
        widths.append(hi - lo)
    assert 0.60 <= np.mean(covered) <= 0.95, np.mean(covered)
    assert 1e-3 < np.median(widths) < 0.05


@pytest.mark.parametrize("residuals", ["log", "natural"])
def test_each_replicate_reaches_the_optimum_of_a_full_refit(residuals):
    """Replicate b refits the rows with weights Multinomial(n, 1/n) drawn first from the
    seed; from 6 starts in one batch it finds what 64 starts of fit_formula find."""
    law = formula_law(CHIN, ["N", "D"], CHIN_BOUNDS)
    X, y = chinchilla_data(60, seed=2, log_sd=0.01)
    fit = fit_formula(law, X, y, residuals=residuals, n_starts=32, seed=0)
    B = 4
    boot = bootstrap_formula(fit, X, y, residuals=residuals, n_resamples=B, rng=7)
    # the full fit's distinct optima (at most 2; fewer when all its starts agree) + 4 random
    n_opt = len(distinct_optima(fit, 2))
    assert boot.n_failed == 0 and boot.starts_per_resample == n_opt + 4
    counts = np.random.default_rng(7).multinomial(60, np.full(60, 1 / 60), size=B)
    for b in range(B):
        w = counts[b].astype(float)
        ref = fit_formula(law, X, y, residuals=residuals, n_starts=64, seed=b,
                          sample_weight=w)
        if residuals == "log":
            got = float(np.ravel(objective(law, boot.samples[b], X, y,
                                           huber_delta=fit.huber_delta, sample_weight=w))[0])
        else:
            fg = natural_objective(law, law.prepare(X), y, np.inf, w)
            got = float(fg(boot.samples[b][None, :], np.array([0]))[0][0])
        assert got <= ref.fun * (1 + 1e-7) + 1e-12, (b, got, ref.fun)
        assert not np.allclose(boot.samples[b], fit.x)  # a resample moves the estimate


def test_seeded_and_reproducible():
    law = formula_law("E + A*C**(-alpha)", ["C"], {"E": (0.0, 10.0), "A": (1.0, 1e4),
                                                   "alpha": (0.01, 1.0)})
    C = np.geomspace(1e17, 1e21, 12)[:, None]
    y = (1.8 + 300.0 * C[:, 0] ** -0.15) * np.exp(np.random.default_rng(0).normal(0, 0.01, 12))
    fit = fit_formula(law, C, y, n_starts=8)
    a, b = (bootstrap_formula(fit, C, y, n_resamples=10, rng=5) for _ in range(2))
    c = bootstrap_formula(fit, C, y, n_resamples=10, rng=6)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, c.samples)
    d = a.to_dict()
    assert d["method"] == "percentile, resampling the rows" and d["seed"] == 5
    assert set(d["intervals"]) == {"E", "A", "alpha"} and d["starts_per_resample"] == 6


def test_resamples_that_cannot_identify_the_law_fail_and_are_counted():
    """4 distinct compute values and 3 parameters: many resamples keep fewer than 3."""
    law = formula_law("E + A*C**(-alpha)", ["C"], {"E": (0.0, 10.0), "A": (1.0, 1e4),
                                                   "alpha": (0.01, 1.0)})
    C = np.geomspace(1e18, 1e21, 4)[:, None]
    y = 1.8 + 300.0 * C[:, 0] ** -0.15
    fit = fit_formula(law, C, y, n_starts=8)
    boot = bootstrap_formula(fit, C, y, n_resamples=60, rng=0)
    counts = np.random.default_rng(0).multinomial(4, np.full(4, 0.25), size=60)
    expected = int(np.sum((counts > 0).sum(axis=1) < 3))
    assert expected > 0 and boot.n_unidentified == expected
    assert boot.n_failed >= expected and len(boot.samples) == 60 - boot.n_failed


def test_natural_predictions_keep_their_sign():
    """Natural residuals fit negative responses; replicate predictions are not exp(log)."""
    law = formula_law("c0 + A*x**b", ["x"], {"c0": (-10.0, 10.0), "A": (-100.0, 100.0),
                                             "b": (-3.0, 3.0)})
    x = np.geomspace(1.0, 100.0, 15)[:, None]
    y = -2.0 + 3.0 * x[:, 0] ** -0.5 + np.random.default_rng(1).normal(0, 0.01, 15)
    fit = fit_formula(law, x, y, residuals="natural", n_starts=16)
    boot = bootstrap_formula(fit, x, y, residuals="natural", n_resamples=30, rng=0)
    far = np.array([[1000.0]])
    lo, hi = boot.predict_interval(far)
    assert np.all(boot.predict_samples(far) < 0) and lo[0] < hi[0] < 0
    assert lo[0] - 0.05 < -2.0 + 3.0 / np.sqrt(1000.0) < hi[0] + 0.05


def test_bad_inputs_are_refused():
    law = formula_law("A*C**(-alpha)", ["C"], {"A": (1.0, 1e4), "alpha": (0.01, 1.0)})
    C = np.geomspace(1e17, 1e21, 6)[:, None]
    y = 300.0 * C[:, 0] ** -0.15
    fit = fit_formula(law, C, y, n_starts=4)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_formula(fit, C, y, n_resamples=0)
    with pytest.raises(ValueError, match="confidence_level"):
        bootstrap_formula(fit, C, y, confidence_level=95)
    with pytest.raises(ValueError, match="residuals"):
        bootstrap_formula(fit, C, y, residuals="abs")
    with pytest.raises(ValueError, match="rows"):
        bootstrap_formula(fit, C, y[:-1])
    built_in = fit_law(COMPUTE_LAW, C, y + 1.0)
    with pytest.raises(TypeError, match="bootstrap_fit"):
        bootstrap_formula(built_in, C, y + 1.0)
