"""GaussianProcess against scikit-learn, dense formulas, finite differences and refits."""

import warnings

import numpy as np
import pytest

from scalebo.errors import NumericalWarning
from scalebo.search.models import gp_hyperparameters
from scalebo.search.models.composite_kernels import KERNEL_NAMES, make_kernel
from scalebo.search.models.gp import GaussianProcess, GPPrior
from scalebo.search.models.kernels import Matern52

sk_gp = pytest.importorskip("sklearn.gaussian_process")
sk_kernels = pytest.importorskip("sklearn.gaussian_process.kernels")

AMP_B, LS_B, NOISE_B = (1e-2, 1e2), (1e-2, 1e2), (1e-6, 1e1)


def _data(n: int = 40, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = 2.0 + np.sin(4 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.standard_normal(n)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def _sklearn(theta: np.ndarray, d: int, optimizer="fmin_l_bfgs_b", n_restarts: int = 0):
    K = sk_kernels
    kernel = (K.ConstantKernel(np.exp(theta[0]), AMP_B)
              * K.Matern(np.exp(theta[1:-1]), LS_B, nu=2.5)
              + K.WhiteKernel(np.exp(theta[-1]), NOISE_B))
    return sk_gp.GaussianProcessRegressor(kernel, alpha=0.0, normalize_y=True,
                                          optimizer=optimizer, n_restarts_optimizer=n_restarts,
                                          random_state=0)


def _fixed_gp(theta: np.ndarray, **kw) -> GaussianProcess:
    return GaussianProcess(Matern52(tuple(np.exp(theta[1:-1]))), amplitude=np.exp(theta[0]),
                           noise=np.exp(theta[-1]), optimize=False, **kw)


THETA = np.log([1.7, 0.3, 0.8, 2.5, 1e-3])


def test_fixed_hyperparameters_equal_scikit_learn():
    X, y = _data()
    Xs = np.random.default_rng(5).random((30, 3))
    ours = _fixed_gp(THETA).fit(X, y)
    sk = _sklearn(THETA, 3, optimizer=None).fit(X, y)
    np.testing.assert_allclose(ours.theta_, sk.kernel_.theta, rtol=1e-12)
    mean, std = ours.predict(Xs, include_noise=True)
    sk_mean, sk_std = sk.predict(Xs, return_std=True)
    np.testing.assert_allclose(mean, sk_mean, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(std, sk_std, rtol=1e-8, atol=1e-9)
    # latent std: scikit-learn's minus the white-noise variance (in y units)
    _, latent = ours.predict(Xs)
    noise_y = np.exp(THETA[-1]) * ours.y_std_**2
    np.testing.assert_allclose(latent**2, sk_std**2 - noise_y, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               sk.log_marginal_likelihood_value_, rtol=1e-10)
    _, cov = sk.predict(Xs, return_cov=True)
    np.testing.assert_allclose(ours.posterior_cov(Xs, include_noise=True), cov, rtol=1e-7,
                               atol=1e-10)


def test_lml_gradient_equals_scikit_learn_and_finite_differences():
    X, y = _data()
    ours = _fixed_gp(THETA).fit(X, y)
    sk = _sklearn(THETA, 3, optimizer=None).fit(X, y)
    for theta in (THETA, THETA + np.array([0.5, -0.3, 0.2, 0.1, 2.0])):
        lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        sk_lml, sk_grad = sk.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(lml, sk_lml, rtol=1e-10)
        np.testing.assert_allclose(grad, sk_grad, rtol=1e-7, atol=1e-7)
        h = np.finfo(float).eps ** (1 / 3)
        fd = [(ours.log_marginal_likelihood(theta + h * e)
               - ours.log_marginal_likelihood(theta - h * e)) / (2 * h) for e in np.eye(5)]
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_lml_equals_dense_formula_and_its_gradient_fd(name):
    rng = np.random.default_rng(4)
    X = rng.random((30, 3))
    X[:, 2] = rng.integers(0, 3, 30)
    y = X[:, 0] + 0.3 * X[:, 2] + 0.1 * rng.standard_normal(30)
    gp = GaussianProcess(name, categorical=[2], optimize=False).fit(X, y)
    theta = gp.theta_ + rng.normal(0, 0.3, gp.theta_.shape)
    amp, kern, noise = np.exp(theta[0]), gp._base_kernel.with_theta(theta[1:-1]), np.exp(
        theta[-1])
    K = amp * kern(X) + noise * np.eye(30)
    ys = (y - y.mean()) / y.std()
    dense = (-0.5 * ys @ np.linalg.solve(K, ys) - 0.5 * np.linalg.slogdet(K)[1]
             - 15 * np.log(2 * np.pi))
    lml, grad = gp.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(lml, dense, rtol=1e-10)
    h = np.finfo(float).eps ** (1 / 3)
    fd = [(gp.log_marginal_likelihood(theta + h * e) - gp.log_marginal_likelihood(theta - h * e))
          / (2 * h) for e in np.eye(len(theta))]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_fitted_lml_at_least_scikit_learn_and_at_a_local_maximum():
    X, y = _data(60)
    ours = GaussianProcess(n_restarts=2, rng=0, amplitude_bounds=AMP_B,
                           noise_bounds=NOISE_B).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = _sklearn(np.log([1.0, 0.5, 0.5, 0.5, 1e-2]), 3, n_restarts=2).fit(X, y)
    assert ours.log_marginal_likelihood_value_ >= sk.log_marginal_likelihood_value_ - 1e-4
    assert ours.fit_result_.n_starts == 3 and ours.fit_result_.nfev > 0
    _, grad = ours.log_marginal_likelihood(ours.theta_, eval_gradient=True)
    bounds = ours._bounds(ours._base_kernel)
    at_bound = np.isclose(ours.theta_, bounds[:, 0]) | np.isclose(ours.theta_, bounds[:, 1])
    assert np.all((np.abs(grad) < 1e-2) | at_bound), grad


def test_warm_start_uses_one_start_and_reaches_the_same_optimum():
    X, y = _data(60)
    gp = GaussianProcess(rng=0).fit(X[:-1], y[:-1])
    full = GaussianProcess(rng=0).fit(X, y)
    gp.fit(X, y, warm_start=True)
    assert gp.fit_result_.warm_start and gp.fit_result_.n_starts == 1
    assert gp.fit_result_.nfev < full.fit_result_.nfev
    np.testing.assert_allclose(gp.log_marginal_likelihood_value_,
                               full.log_marginal_likelihood_value_, atol=1e-3)


def test_same_seed_same_fit():
    X, y = _data(40)
    a = GaussianProcess(rng=7).fit(X, y)
    b = GaussianProcess(rng=7).fit(X, y)
    np.testing.assert_array_equal(a.theta_, b.theta_)


def test_condition_on_equals_full_refactorization():
    X, y = _data(50)
    gp = GaussianProcess(rng=0).fit(X[:40], y[:40])
    cond = gp.condition_on(X[40:], y[40:])
    # independent route: a GP with the same hyperparameters on all the data, standardized by
    # the first fit's mean and std, and nothing optimized or re-standardized
    ref = GaussianProcess(gp.kernel_, amplitude=gp.amplitude_, noise=gp.noise_,
                          optimize=False, normalize_y=False)
    ref.fit(X, (y - gp.y_mean_) / gp.y_std_)
    Xs = np.random.default_rng(1).random((20, 3))
    m, s = cond.predict(Xs)
    rm, rs = ref.predict(Xs)
    np.testing.assert_allclose(m, rm * gp.y_std_ + gp.y_mean_, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s, rs * gp.y_std_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(cond.L_, ref.L_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cond.log_marginal_likelihood_value_,
                               ref.log_marginal_likelihood_value_, rtol=1e-10)
    assert gp.X_train_.shape == (40, 3)  # the original is untouched


def test_duplicate_rows_without_noise_add_jitter_and_warn():
    X, y = _data(20)
    X2 = np.vstack([X, X[:5]])
    y2 = np.concatenate([y, y[:5] + 0.01])
    gp = GaussianProcess(noise=1e-30, noise_bounds=(1e-30, 1e-30), optimize=False)
    with pytest.warns(NumericalWarning, match="jitter"):
        gp.fit(X2, y2)
    assert gp.jitter_ > 0
    mean, std = gp.predict(np.random.default_rng(0).random((10, 3)))
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std >= 0)
    assert np.isfinite(gp.log_marginal_likelihood_value_)
    with pytest.warns(NumericalWarning):  # the optimizing path survives too
        fitted = GaussianProcess(noise_bounds=(1e-30, 1e-30), noise=1e-30, rng=0).fit(X2, y2)
    assert np.all(np.isfinite(fitted.predict(X)[0]))


def test_optimizer_failing_everywhere_falls_back_with_a_warning(monkeypatch):
    def broken(*args, **kwargs):
        raise np.linalg.LinAlgError("simulated")

    monkeypatch.setattr(gp_hyperparameters, "minimize", broken)
    X, y = _data(20)
    with pytest.warns(NumericalWarning, match="failed from all 3 starts"):
        gp = GaussianProcess(rng=0).fit(X, y)
    assert gp.fit_result_.status == 3 and not gp.fit_result_.success
    np.testing.assert_allclose(gp.amplitude_, 1.0)
    assert np.all(np.isfinite(gp.predict(X)[1]))


def test_sample_joint_matches_posterior_moments_and_is_seeded():
    X, y = _data(30)
    gp = GaussianProcess(rng=0).fit(X, y)
    Xs = np.random.default_rng(2).random((6, 3))
    S = gp.sample_joint(Xs, 40_000, rng=3)
    assert S.shape == (40_000, 6)
    np.testing.assert_array_equal(S[:10], gp.sample_joint(Xs, 40_000, rng=3)[:10])
    cov = gp.posterior_cov(Xs)
    mean, std = gp.predict(Xs)
    np.testing.assert_allclose(np.diag(cov), std**2, rtol=1e-10, atol=1e-14)
    se_mean = std / np.sqrt(len(S))
    assert np.all(np.abs(S.mean(0) - mean) < 5 * se_mean)
    # SE of a sample covariance: sqrt((Σ_ii Σ_jj + Σ_ij²)/n)
    emp = np.cov(S.T)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / len(S))
    assert np.all(np.abs(emp - cov) < 5 * se)


def test_prior_gradient_by_finite_differences():
    prior = GPPrior()
    theta = np.array([0.3, -1.0, 0.2, -3.0])
    lp, g = prior.log_pdf_and_grad(theta)
    mu, sd = np.array([0.0, np.log(0.5), np.log(0.5), np.log(1e-2)]), np.array([2, 2, 2, 3.0])
    assert lp == pytest.approx(-0.5 * np.sum(((theta - mu) / sd) ** 2), rel=1e-12)
    h = 1e-6
    fd = [(prior.log_pdf_and_grad(theta + h * e)[0] - prior.log_pdf_and_grad(theta - h * e)[0])
          / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_map_fit_moves_the_length_scale_to_a_stationary_point_of_the_posterior():
    """Few points and a tight prior on the log length scale far from the maximum-likelihood
    one: the MAP length scale lies between the two, nearer the prior mean; there the
    gradient of log posterior = LML (scikit-learn's, an independent implementation) + log
    prior (by hand) is ~0, while the LML gradient alone is not."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.random((12, 1)), axis=0)
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(12)
    mu, sd = 0.0, 0.3  # log length scale ~ N(log 1, 0.3²); weak priors on the rest
    prior = GPPrior(log_amplitude=(0.0, 10.0), kernel=(mu, sd), log_noise=(np.log(1e-2), 10.0))
    mu_all, sd_all = np.array([0.0, mu, np.log(1e-2)]), np.array([10.0, sd, 10.0])

    def log_prior_grad(theta):
        return -(theta - mu_all) / sd_all**2

    def sk_lml(theta):
        sk = _sklearn(theta, 1, optimizer=None).fit(X, y)
        return sk.log_marginal_likelihood(theta, eval_gradient=True)

    ml = GaussianProcess(rng=0).fit(X, y)
    gp = GaussianProcess(prior=prior, rng=0).fit(X, y)
    assert gp.fit_result_.success and ml.fit_result_.success
    bounds = gp._bounds(gp._base_kernel)
    for theta in (ml.theta_, gp.theta_):  # both optima inside the bounds: gradients must vanish
        assert np.all((theta > bounds[:, 0] + 0.1) & (theta < bounds[:, 1] - 0.1)), theta
    ls_ml, ls_map = ml.theta_[1], gp.theta_[1]
    assert ls_ml < -0.5  # the data want a short length scale (about e^-1)...
    assert ls_ml < ls_map < mu and abs(ls_map - mu) < 0.5 * abs(ls_ml - mu)  # ...the prior wins
    # ML: its own optimum is a stationary point of the LML.
    _, g_ml = sk_lml(ml.theta_)
    np.testing.assert_allclose(g_ml, 0.0, atol=1e-3)
    # MAP: a stationary point of LML + log prior, not of the LML (whose slope there is what
    # the prior pulls against: |∂lml/∂log ℓ| = |log ℓ − μ|/σ² > 2).
    lml_map, g_map = sk_lml(gp.theta_)
    np.testing.assert_allclose(g_map + log_prior_grad(gp.theta_), 0.0, atol=1e-3)
    assert abs(g_map[1]) > 2.0
    np.testing.assert_allclose(gp.log_marginal_likelihood_value_, lml_map, rtol=1e-10)
    # Each optimum wins on its own objective.
    lml_ml, _ = sk_lml(ml.theta_)
    lp_ml = -0.5 * np.sum(((ml.theta_ - mu_all) / sd_all) ** 2)
    lp_map = -0.5 * np.sum(((gp.theta_ - mu_all) / sd_all) ** 2)
    assert lml_ml > lml_map + 0.5 and lml_map + lp_map > lml_ml + lp_ml + 0.5


def test_input_validation_messages():
    X, y = _data(10)
    with pytest.raises(RuntimeError, match="not fitted"):
        GaussianProcess().predict(X)
    with pytest.raises(ValueError, match="NaN"):
        GaussianProcess().fit(X, np.where(np.arange(10) == 3, np.nan, y))
    with pytest.raises(ValueError, match=r"y must have shape \(10,\)"):
        GaussianProcess().fit(X, y[:5])
    gp = GaussianProcess(rng=0).fit(X, y)
    with pytest.raises(ValueError, match=r"X must have shape \(m, 3\)"):
        gp.predict(np.zeros((2, 4)))


def test_constant_y_and_single_point_are_finite():
    X, _ = _data(5)
    gp = GaussianProcess(rng=0).fit(X, np.full(5, 3.0))
    mean, std = gp.predict(X)
    np.testing.assert_allclose(mean, 3.0, atol=1e-6)
    gp1 = GaussianProcess(rng=0).fit(X[:1], np.array([2.5]))
    assert np.all(np.isfinite(gp1.predict(X)[1]))


def test_mixed_kernel_learns_categorical_effect():
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    X[:, 1] = rng.integers(0, 3, 60)
    y = np.sin(3 * X[:, 0]) + np.array([0.0, 1.0, -1.0])[X[:, 1].astype(int)]
    y = y + 0.01 * rng.standard_normal(60)
    gp = GaussianProcess(make_kernel("mixed", 2, categorical=[1]), rng=0).fit(X, y)
    Xt = np.column_stack([np.full(3, 0.5), [0.0, 1.0, 2.0]])
    mean, _ = gp.predict(Xt)
    np.testing.assert_allclose(mean, np.sin(1.5) + np.array([0.0, 1.0, -1.0]), atol=0.05)


def test_additive_kernel_fit_recovers_an_additive_function():
    rng = np.random.default_rng(1)
    X = rng.random((80, 2))
    y = np.sin(5 * X[:, 0]) + (X[:, 1] - 0.5) ** 2 + 0.01 * rng.standard_normal(80)
    gp = GaussianProcess("additive", rng=0).fit(X, y)
    Xt = rng.random((20, 2))
    mean, std = gp.predict(Xt)
    truth = np.sin(5 * Xt[:, 0]) + (Xt[:, 1] - 0.5) ** 2
    assert np.sqrt(np.mean((mean - truth) ** 2)) < 0.05
    assert np.all(np.abs(mean - truth) < 5 * std + 0.03)


def test_transfer_kernel_carries_a_hyperparameter_effect_to_an_unobserved_scale():
    # y = 4·(lr − 0.3)² + 0.3·sin(20·N): runs only at N, D ∈ [0, 0.4], predictions at
    # N = D = 1, many length scales of N away. The transfer kernel's hyperparameter term
    # keeps the lr effect there, where a product Matérn kernel has reverted to its mean and
    # predicts every lr alike.
    rng = np.random.default_rng(3)
    X = rng.random((50, 3))
    X[:, :2] *= 0.4
    effect = lambda lr: 4 * (lr - 0.3) ** 2  # noqa: E731
    y = effect(X[:, 2]) + 0.3 * np.sin(20 * X[:, 0]) + 0.005 * rng.standard_normal(50)
    lr = np.linspace(0, 1, 6)
    far = np.column_stack([np.ones(6), np.ones(6), lr])
    transfer = GaussianProcess(make_kernel("transfer", 3), rng=0).fit(X, y).predict(far)[0]
    product = GaussianProcess(make_kernel("matern52", 3), rng=0).fit(X, y).predict(far)[0]
    shape = effect(lr) - effect(lr).mean()
    miss = lambda m: np.sqrt(np.mean((m - m.mean() - shape) ** 2))  # noqa: E731
    assert np.corrcoef(transfer, shape)[0, 1] > 0.95
    assert miss(transfer) < 0.05 * np.ptp(shape) and miss(transfer) < 0.2 * miss(product)
