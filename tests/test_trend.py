"""TrendSurrogate: exact on linear truths, extrapolates along the trend where a stationary GP
reverts to its mean, and passes optional capabilities through only when the inner has them."""

import numpy as np
import pytest

from scalebo.search.models.surrogates import GPSurrogate
from scalebo.search.models.trend import TrendSurrogate


class ZeroMean:
    """Inner surrogate that predicts 0 ± 1 everywhere (no condition_on, no sample_joint)."""

    def fit(self, X, y):
        self.seen_ = np.asarray(y).copy()
        return self

    def predict(self, X):
        return np.zeros(len(X)), np.ones(len(X))


def test_linear_truth_is_reproduced_exactly_and_residuals_go_to_inner():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(20, 3))
    y = 2.0 + 3.0 * X[:, 0] - 1.0 * X[:, 1]  # column 2 is not in the trend
    model = TrendSurrogate(ZeroMean(), columns=(0, 1), ridge=0.0).fit(X, y)
    np.testing.assert_allclose(model.coef_, [2.0, 3.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(model.inner.seen_, 0.0, atol=1e-12)
    X_new = rng.uniform(-1, 2, size=(5, 3))
    mean, std = model.predict(X_new)
    np.testing.assert_allclose(mean, 2 + 3 * X_new[:, 0] - X_new[:, 1], atol=1e-12)
    np.testing.assert_allclose(std, 1.0)
    assert not hasattr(model, "condition_on") and not hasattr(model, "sample_joint")


def test_extrapolates_along_the_trend_where_a_plain_gp_reverts():
    x = np.linspace(0, 0.5, 12)[:, None]
    y = 3.0 - 2.0 * x[:, 0] + 0.01 * np.sin(20 * x[:, 0])
    far = np.array([[1.0]])
    plain = GPSurrogate(rng=0).fit(x, y)
    trended = TrendSurrogate(GPSurrogate(rng=0), columns=(0,)).fit(x, y)
    truth = 3.0 - 2.0
    assert abs(trended.predict(far)[0][0] - truth) < 0.05
    assert abs(plain.predict(far)[0][0] - truth) > 2 * abs(trended.predict(far)[0][0] - truth)


def test_condition_on_and_sample_joint_pass_through():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(15, 2))
    y = 1.0 + X[:, 0] + 0.1 * np.cos(5 * X[:, 1])
    model = TrendSurrogate(GPSurrogate(rng=0, noise_bounds=(1e-8, 1e-6))).fit(X, y)
    x_new, y_new = np.array([[0.3, 0.9]]), np.array([5.0])
    cond = model.condition_on(x_new, y_new)
    assert cond.predict(x_new)[0][0] == pytest.approx(5.0, abs=1e-3)
    np.testing.assert_array_equal(cond.coef_, model.coef_)  # the trend is kept
    samples = model.sample_joint(X[:3], 2000, rng=0)
    np.testing.assert_allclose(samples.mean(axis=0), model.predict(X[:3])[0], atol=0.02)


def test_power_form_recovers_a_saturating_truth_and_extrapolates_it():
    """y = c + a·e^(−k₁x₁) + b·e^(−k₂x₂) with rates on the grid: recovered, and predicted
    where the data never went; a linear trend overshoots there."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 0.5, size=(40, 3))

    def truth(X):
        return 0.3 + 2.0 * np.exp(-1.5 * X[:, 0]) + 0.7 * np.exp(-4.0 * X[:, 1])

    model = TrendSurrogate(ZeroMean(), form="power").fit(X, truth(X))
    np.testing.assert_allclose(model.rates_, [1.5, 4.0])
    np.testing.assert_allclose(model.coef_, [0.3, 2.0, 0.7], atol=1e-4)
    far = rng.uniform(0.9, 1.0, size=(5, 3))
    np.testing.assert_allclose(model.predict(far)[0], truth(far), atol=1e-4)
    linear = TrendSurrogate(ZeroMean()).fit(X, truth(X))
    assert np.all(np.abs(linear.predict(far)[0] - truth(far)) > 0.05)


def test_power_form_rejects_rising_terms_and_falls_back_to_linear():
    x = np.linspace(0, 1, 15)[:, None]
    rising = 1.0 + 2.0 * x[:, 0]  # no c + a·e^(−kx) with a ≥ 0 fits a rise
    model = TrendSurrogate(ZeroMean(), columns=(0,), ridge=0.0, form="power").fit(x, rising)
    assert model.rates_ is None
    np.testing.assert_allclose(model.coef_, [1.0, 2.0], atol=1e-10)
    with pytest.raises(ValueError, match="form must be one of"):
        TrendSurrogate(ZeroMean(), form="cubic")
