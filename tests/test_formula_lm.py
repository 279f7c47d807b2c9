"""Batched Levenberg–Marquardt (:mod:`scalebo.fitting.lm`) and the ``lm`` solver of natural
least-squares formula fits: exact on linear least squares (with and without an active
bound), and the same optimum as the previous L-BFGS path on a noisy Chinchilla-type fit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from scalebo.fitting.formula_fit import fit_formula
from scalebo.fitting.lm import minimize_lm_batched
from scalebo.fitting.optim import StartStatus
from scalebo.laws.formula import formula_law


def _linear(A: np.ndarray, b: np.ndarray):
    def resid_jac(x: np.ndarray):
        r = x @ A.T - b[None, :]
        return r, np.broadcast_to(A, (x.shape[0], *A.shape))
    return resid_jac


def test_lm_solves_bounded_linear_least_squares():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 3)) * np.array([1.0, 1e3, 1e-3])  # badly scaled columns
    b = rng.normal(size=40)
    free = lsq_linear(A, b).x
    lower, upper = np.full(3, -np.inf), np.full(3, np.inf)
    starts = rng.normal(size=(5, 3))
    res = minimize_lm_batched(_linear(A, b), starts, lower, upper)
    assert np.all(res.status == StartStatus.CONVERGED)
    np.testing.assert_allclose(res.x, np.tile(free, (5, 1)), rtol=1e-6, atol=1e-9)
    # a bound that cuts the free optimum: the bounded solution (scipy's lsq_linear)
    upper = np.array([np.inf, free[1] - 0.5 * abs(free[1]), np.inf])
    bounded = lsq_linear(A, b, bounds=(lower, upper)).x
    res = minimize_lm_batched(_linear(A, b), np.minimum(starts, upper), lower, upper)
    np.testing.assert_allclose(res.x, np.tile(bounded, (5, 1)), rtol=1e-6, atol=1e-9)
    assert np.all(res.x[:, 1] == upper[1])


def test_lm_solver_matches_lbfgs_on_a_noisy_fit():
    law = formula_law("E + A*N**(-a) + B*D**(-b)", ("N", "D"),
                      dict(E=(0.0, 5.0), A=(1.0, 1e5), a=(0.05, 1.0), B=(1.0, 1e5),
                           b=(0.05, 1.0)))
    rng = np.random.default_rng(1)
    N, D = np.geomspace(1e7, 1e9, 60), rng.permutation(np.geomspace(1e9, 1e11, 60))
    y = 1.69 + 406.4 * N**-0.34 + 410.7 * D**-0.28 + rng.normal(0, 0.01, 60)
    X = np.column_stack([N, D])
    lm = fit_formula(law, X, y, residuals="natural", n_starts=32, seed=0)
    old = fit_formula(law, X, y, residuals="natural", n_starts=32, seed=0, solver="lbfgs")
    assert lm.fun <= old.fun * (1 + 1e-8)
    assert lm.fun == pytest.approx(old.fun, rel=1e-6)
    for k, v in old.params.items():
        assert lm.params[k] == pytest.approx(v, rel=1e-3), k
    assert str(lm.status) == str(old.status)


def test_lm_stopped_at_max_iter_continues_to_the_optimum():
    """A start cut off by ``max_iter`` reports MAX_ITER, and LM restarted from where it
    stopped (what the formula fit does for its best unconverged starts) reaches the optimum
    of Rosenbrock's valley, (1, 1), that scipy's least_squares finds."""
    from scipy.optimize import least_squares

    def resid_jac(x: np.ndarray):
        r = np.stack([10.0 * (x[:, 1] - x[:, 0] ** 2), 1.0 - x[:, 0]], axis=1)
        J = np.zeros((x.shape[0], 2, 2))
        J[:, 0, 0], J[:, 0, 1], J[:, 1, 0] = -20.0 * x[:, 0], 10.0, -1.0
        return r, J

    lower, upper = np.full(2, -5.0), np.full(2, 5.0)
    start = np.array([[-1.2, 1.0], [-1.5, 2.0]])
    cut = minimize_lm_batched(resid_jac, start, lower, upper, max_iter=3)
    assert np.all(cut.status == StartStatus.MAX_ITER)
    assert np.all(np.abs(cut.x - 1.0).max(axis=1) > 1e-2)
    more = minimize_lm_batched(resid_jac, cut.x, lower, upper, max_iter=300)
    assert np.all(more.status == StartStatus.CONVERGED)
    ref = least_squares(lambda v: resid_jac(v[None, :])[0][0], start[0], bounds=(lower, upper))
    np.testing.assert_allclose(more.x, np.tile(ref.x, (2, 1)), atol=1e-6)
    np.testing.assert_allclose(ref.x, [1.0, 1.0], atol=1e-6)
