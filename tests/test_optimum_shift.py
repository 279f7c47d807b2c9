"""OptimumShiftSurrogate on hand-made data with a known moving optimum."""

from __future__ import annotations

import numpy as np

from scalebo.search.optimum_shift import OptimumShiftSurrogate


class _Recorder:
    """Inner surrogate that remembers what it was given; predicts its first input column."""

    def fit(self, X, y, warm_start=False):
        self.X, self.y = np.array(X), np.array(y)
        return self

    def predict(self, X):
        return np.asarray(X)[:, 2], np.ones(len(X))

    def condition_on(self, X, y):
        new = _Recorder()
        new.X, new.y = np.array(X), np.array(y)
        return new


def _data():
    """Cells at encoded (log N, log D) = (s, s); lr column 2 with the optimum at
    h*(s) = 0.2 + 0.6·s, a categorical column 3; loss = (h − h*)²."""
    rows, y = [], []
    for s in (0.0, 0.25, 0.5, 0.75, 1.0):
        for h in np.linspace(0, 1, 11):
            rows.append([s, s, h, 1.0])
            y.append((h - (0.2 + 0.6 * s)) ** 2)
    return np.array(rows), np.array(y)


def test_fitted_shift_recovers_the_moving_optimum():
    X, y = _data()
    model = OptimumShiftSurrogate(_Recorder(), (0, 1), categorical=(3,), ridge=1e-9).fit(X, y)
    # h* = 0.2 + 0.6 s is split over two identical scale columns: slopes sum to 0.6
    assert model.slopes_.shape == (2, 1)
    assert abs(model.slopes_.sum() - 0.6) < 0.02
    Z = model.inner.X
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], X[:, [0, 1, 3]])  # scale, categorical kept
    best = [np.argmin(np.where(X[:, 0] == s, y, np.inf)) for s in np.unique(X[:, 0])]
    assert np.ptp(Z[best, 2]) < 0.11  # every cell's optimum at one shifted coordinate
    assert np.ptp(X[best, 2]) > 0.5
    mean, _ = model.predict(X)
    np.testing.assert_allclose(mean, model.transform(X)[:, 2])
    cond = model.condition_on(X[:3], y[:3])
    np.testing.assert_allclose(cond.inner.X, model.transform(X[:3]))


def test_no_shift_with_too_few_cells():
    X, y = _data()
    two = X[:, 0] <= 0.25
    model = OptimumShiftSurrogate(_Recorder(), (0, 1), categorical=(3,)).fit(X[two], y[two])
    assert not model.slopes_.any()
    np.testing.assert_array_equal(model.inner.X, X[two])
