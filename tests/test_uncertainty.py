"""Bootstrap: seeded reproducibility, coverage of a known truth, and equivalence with
refitting resampled data one replicate at a time."""

import numpy as np
import pytest

from scalebo.fitting.bootstrap import bootstrap_fit
from scalebo.fitting.robust import fit_law
from scalebo.laws import COMPUTE_LAW

TRUTH = {"E": 1.8, "A": 180.0, "alpha": 0.11}


def _data(seed=0, n=40, noise=0.01):
    rng = np.random.default_rng(seed)
    C = np.geomspace(1e18, 1e22, n)
    y = COMPUTE_LAW.predict(COMPUTE_LAW.from_natural(TRUTH), C) * np.exp(rng.normal(0, noise, n))
    return C, y


def test_seeded_and_reproducible():
    C, y = _data()
    fit = fit_law(COMPUTE_LAW, C, y)
    a = bootstrap_fit(fit, C, y, n_resamples=50, rng=7)
    b = bootstrap_fit(fit, C, y, n_resamples=50, rng=7)
    c = bootstrap_fit(fit, C, y, n_resamples=50, rng=8)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, c.samples)
    assert a.seed == 7 and a.n_failed == 0 and a.samples.shape == (50, 3)


def test_generator_draws_like_its_seed():
    """A Generator is accepted like every seeded function: the same stream as its seed."""
    C, y = _data()
    fit = fit_law(COMPUTE_LAW, C, y)
    by_seed = bootstrap_fit(fit, C, y, n_resamples=20, rng=3)
    by_gen = bootstrap_fit(fit, C, y, n_resamples=20, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(by_seed.samples, by_gen.samples)
    assert by_gen.seed is None  # a Generator's state is not a seed; not recorded as one
    gen = np.random.default_rng(3)
    first = bootstrap_fit(fit, C, y, n_resamples=20, rng=gen)
    second = bootstrap_fit(fit, C, y, n_resamples=20, rng=gen)  # the stream moved on
    assert not np.array_equal(first.samples, second.samples)


def test_replicate_equals_refit_on_resampled_rows():
    """Weights from multinomial counts are the same estimator as refitting duplicated rows."""
    C, y = _data(n=25)
    fit = fit_law(COMPUTE_LAW, C, y)
    boot = bootstrap_fit(fit, C, y, n_resamples=3, rng=1)
    counts = np.random.default_rng(1).multinomial(25, np.full(25, 1 / 25), size=3)
    for b in range(3):
        idx = np.repeat(np.arange(25), counts[b])
        direct = fit_law(COMPUTE_LAW, C[idx], y[idx])
        np.testing.assert_allclose(boot.samples[b], direct.x, rtol=1e-5, atol=1e-7)


def test_intervals_cover_truth_in_most_data_sets():
    """95 % intervals should cover the true exponent in most of 10 independent data sets."""
    covered = 0
    for seed in range(10):
        C, y = _data(seed=seed, n=30)
        boot = bootstrap_fit(fit_law(COMPUTE_LAW, C, y), C, y, n_resamples=100, rng=seed)
        lo, hi = boot.intervals["alpha"]
        covered += lo <= TRUTH["alpha"] <= hi
    assert covered >= 7


def test_intervals_shrink_with_noise():
    C, y = _data(noise=0.01)
    wide = bootstrap_fit(fit_law(COMPUTE_LAW, C, y), C, y, n_resamples=200, rng=0)
    C2, y2 = _data(noise=0.001)
    narrow = bootstrap_fit(fit_law(COMPUTE_LAW, C2, y2), C2, y2, n_resamples=200, rng=0)
    w = wide.intervals["alpha"][1] - wide.intervals["alpha"][0]
    n = narrow.intervals["alpha"][1] - narrow.intervals["alpha"][0]
    assert n < w / 3
    lo, hi = wide.predict_interval(np.array([1e25]))
    point = fit_law(COMPUTE_LAW, C, y).predict([1e25])[0]
    assert lo[0] < point < hi[0]
    s_lo, s_hi, values = wide.statistic_interval(lambda f: f.params["alpha"])
    assert (s_lo, s_hi) == pytest.approx(wide.intervals["alpha"])
    assert values.shape == (200,)
