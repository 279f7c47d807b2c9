"""fit_batch: one batched call gives, data set by data set, what fit_law gives."""

import numpy as np
import pytest

from scalebo.errors import FitError
from scalebo.fitting.batch import fit_batch
from scalebo.fitting.huber import log_targets
from scalebo.fitting.robust import fit_law, make_objective
from scalebo.laws import CHINCHILLA, COMPUTE_LAW


def _chinchilla_sets(n_sets=5, seed=0):
    rng = np.random.default_rng(seed)
    N = np.repeat(np.geomspace(1e7, 1e9, 5), 4)
    D = np.tile(np.geomspace(1e9, 1e11, 4), 5)
    X = np.column_stack([N, D])
    theta = CHINCHILLA.from_natural({"E": 1.8, "A": 400.0, "alpha": 0.34, "B": 2000.0,
                                     "beta": 0.36})
    y = CHINCHILLA.predict(theta, X) * np.exp(rng.normal(0, 0.01, (n_sets, X.shape[0])))
    return X, y, rng


def _compute_sets(n_sets=6, seed=1):
    rng = np.random.default_rng(seed)
    C = np.geomspace(1e17, 1e21, 12)
    y = (1.7 + 300.0 * C ** -0.15) * np.exp(rng.normal(0, 0.004, (n_sets, C.size)))
    return C[:, None], y, rng


def _assert_same(batched, single, rtol=1e-6):
    assert batched is not None
    assert batched.status == single.status
    assert batched.n_obs == single.n_obs and batched.n_starts == single.n_starts
    assert batched.n_converged == single.n_converged
    np.testing.assert_allclose(batched.x, single.x, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(batched.fun, single.fun, rtol=1e-8, atol=1e-15)


@pytest.mark.parametrize("which", ["compute", "chinchilla"])
def test_batched_equals_fit_law_per_data_set(which):
    law = COMPUTE_LAW if which == "compute" else CHINCHILLA
    X, y, _ = _compute_sets() if which == "compute" else _chinchilla_sets()
    starts = law.start_grid(law.prepare(X))[::7]
    out = fit_batch(law, X, y, starts)
    assert len(out) == y.shape[0] and out.n_failed == 0 and out.success.all()
    for s in range(y.shape[0]):
        _assert_same(out[s], fit_law(law, X, y[s], starts=starts))


def test_zero_weights_equal_dropping_rows_and_per_set_starts():
    X, y, rng = _chinchilla_sets(n_sets=6)
    w = (rng.random(y.shape) > 0.3).astype(float)
    grid = CHINCHILLA.start_grid()
    starts = np.stack([grid[rng.choice(grid.shape[0], 40, replace=False)] for _ in range(6)])
    y_nan = np.where(w > 0, y, np.nan)  # targets of zero-weight rows are ignored
    out = fit_batch(CHINCHILLA, X, y_nan, starts, sample_weight=w)
    for s in range(6):
        keep = w[s] > 0
        _assert_same(out[s], fit_law(CHINCHILLA, X[keep], y[s, keep], starts=starts[s]))


def test_general_weights_equal_fit_law_with_sample_weight():
    X, y, rng = _compute_sets(n_sets=4)
    w = rng.integers(0, 4, y.shape).astype(float)
    starts = COMPUTE_LAW.start_grid(COMPUTE_LAW.prepare(X))
    out = fit_batch(COMPUTE_LAW, X, y, starts, sample_weight=w)
    for s in range(4):
        single = fit_law(COMPUTE_LAW, X, y[s], starts=starts, sample_weight=w[s])
        np.testing.assert_allclose(out[s].x, single.x, rtol=1e-6, atol=1e-6)


def test_default_starts_are_the_law_grid_of_X():
    X, y, _ = _compute_sets(n_sets=2)
    out = fit_batch(COMPUTE_LAW, X, y)
    for s in range(2):
        _assert_same(out[s], fit_law(COMPUTE_LAW, X, y[s]))


def test_too_few_rows_is_a_reported_failure_like_fit_law():
    X, y, _ = _compute_sets(n_sets=3)
    w = np.ones(y.shape)
    w[1, 2:] = 0.0  # 2 rows for 3 parameters
    out = fit_batch(COMPUTE_LAW, X, y, COMPUTE_LAW.start_grid()[:5], sample_weight=w)
    assert out[1] is None and "only 2 observations" in out.errors[1]
    assert out.errors[0] == "" and out[0] is not None
    assert out.n_failed == 1 and out.success.tolist() == [True, False, True]
    with pytest.raises(FitError):
        fit_law(COMPUTE_LAW, X[:2], y[1, :2])


def test_bad_inputs_raise():
    X, y, _ = _compute_sets(n_sets=2)
    starts = COMPUTE_LAW.start_grid()[:3]
    with pytest.raises(ValueError, match="positive and finite"):
        fit_batch(COMPUTE_LAW, X, np.where(y > 2.2, -1.0, y), starts)
    with pytest.raises(ValueError, match="sample_weight"):
        fit_batch(COMPUTE_LAW, X, y, starts, sample_weight=np.ones((3, X.shape[0])))
    with pytest.raises(ValueError, match="starts"):
        fit_batch(COMPUTE_LAW, X, y, np.zeros((3, 3, 3)))
    with pytest.raises(ValueError, match="rows"):
        fit_batch(COMPUTE_LAW, X[:-1], y, starts)


def test_make_objective_accepts_per_start_log_targets():
    X, y, rng = _chinchilla_sets(n_sets=3)
    Z = CHINCHILLA.prepare(X)
    theta = CHINCHILLA.start_grid()[rng.choice(4500, 6, replace=False)]
    log_y = np.log(y)
    owner = np.array([0, 1, 2, 2, 1, 0])
    fg = make_objective(CHINCHILLA, Z, log_y, 1e-3)
    f, g = fg(theta, owner)
    for i, s in enumerate(owner):
        fs, gs = make_objective(CHINCHILLA, Z, log_targets(y[s]), 1e-3)(theta[i:i + 1],
                                                                          np.arange(1))
        np.testing.assert_allclose(f[i], fs[0], rtol=1e-12)
        np.testing.assert_allclose(g[i], gs[0], rtol=1e-10, atol=1e-14)
