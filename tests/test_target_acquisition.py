"""Target-aware acquisition: hand-made ensembles with known covariances, the square-root
update against the exact Gaussian conditional, the Stein sensitivities against finite
differences of a refit, and the search loop's invariants with acquisition="target"."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from scalebo.bench.replay import MethodConfig, _make_loop, replay
from scalebo.bench.synthetic import make_synthetic
from scalebo.errors import SearchError
from scalebo.fitting.robust import fit_law
from scalebo.laws import COMPUTE_LAW
from scalebo.search.acquisition import Acquisition, score
from scalebo.search.loop import SearchLoop
from scalebo.search.target import (
    TargetEnsemble,
    TargetSettings,
    sqrt_update,
    stein_weights,
    target_score,
    variance_reduction,
)

# Four samples, three orthogonal zero-mean directions: z_i·z_j = 4·δ_ij, so with (S − 1) = 3
# every covariance below is a multiple of 4/3.
Z1 = np.array([1.0, -1.0, 1.0, -1.0])
Z2 = np.array([1.0, 1.0, -1.0, -1.0])
Z3 = np.array([1.0, -1.0, -1.0, 1.0])


def test_variance_reduction_on_a_hand_made_ensemble():
    g = Z1 + Z2  # Var(g) = 8/3
    losses = np.column_stack([Z1, Z1, Z3, 2 * Z2, Z1 + Z2])
    # Cov(g, f) = 4/3, 4/3, 0, 8/3, 8/3; Var(f) = 4/3, 4/3, 4/3, 16/3, 8/3
    vr = variance_reduction(g, losses)
    np.testing.assert_allclose(vr, [4 / 3, 4 / 3, 0.0, 4 / 3, 8 / 3])
    # the last candidate is g itself: observing it removes all of Var(g)
    assert vr[-1] == pytest.approx(float(g @ g) / 3)
    # observation noise r: Cov² / (Var + r)
    np.testing.assert_allclose(variance_reduction(g, losses[:, :1], noise_var=4 / 3), [2 / 3])
    # a shift of the samples changes nothing (anomalies)
    np.testing.assert_allclose(variance_reduction(g + 7.0, losses + 3.0), vr)


def test_score_prefers_most_reduction_per_flop():
    g = Z1 + Z2
    losses = np.column_stack([Z1, Z1, Z3, Z1 + Z2])
    cost = np.array([1e18, 1e19, 1e18, 1e20])  # FLOPs
    vr = variance_reduction(g, losses)  # 4/3, 4/3, 0, 8/3
    s1 = target_score(vr, cost, 1e21, gamma=1.0)
    # per FLOP: 1.3e-18 (4/3 / 1e18) > 1.3e-19 (4/3 / 1e19) > 2.7e-20 (8/3 / 1e20) > 0
    assert np.argsort(-s1).tolist() == [0, 1, 3, 2]
    np.testing.assert_allclose(s1[0] - s1[1], np.log(10.0))  # same reduction, 10× the cost
    s0 = target_score(vr, cost, 1e21, gamma=0.0)
    assert int(np.argmax(s0)) == 3 and s0[0] == s0[1]  # cost-blind: the largest reduction
    assert np.all(np.isfinite(s1))  # VR = 0 is floored, never -inf
    with pytest.raises(SearchError):
        target_score(vr, cost, 1e21, gamma=-1.0)
    with pytest.raises(SearchError):
        variance_reduction(g, losses[:, :2] * np.nan)


@pytest.mark.parametrize("noise_var", [0.0, 0.3])
def test_sqrt_update_gives_the_exact_gaussian_conditional(noise_var):
    P = np.array([[2.0, 0.8, -0.5, 0.3],
                  [0.8, 1.0, 0.2, 0.0],
                  [-0.5, 0.2, 1.5, 0.4],
                  [0.3, 0.0, 0.4, 0.7]])
    rng = np.random.default_rng(0)
    A = rng.multivariate_normal(np.zeros(4), P, size=40_000)
    A -= A.mean(axis=0)
    j = 1
    new = sqrt_update(A, j, noise_var)
    # exactly the Kalman update of the ensemble's own covariance ...
    Ps = A.T @ A / (A.shape[0] - 1)
    exact_s = Ps - np.outer(Ps[:, j], Ps[:, j]) / (Ps[j, j] + noise_var)
    np.testing.assert_allclose(new.T @ new / (A.shape[0] - 1), exact_s, atol=1e-10)
    # ... hence, for a large Gaussian ensemble, the true conditional covariance
    exact = P - np.outer(P[:, j], P[:, j]) / (P[j, j] + noise_var)
    np.testing.assert_allclose(new.T @ new / (A.shape[0] - 1), exact, atol=0.03)
    if noise_var == 0.0:
        np.testing.assert_allclose(new[:, j], 0.0, atol=1e-12)  # observed exactly
    # two scalar updates = conditioning on both at once
    both = sqrt_update(sqrt_update(A, 1, noise_var), 3, noise_var)
    R = noise_var * np.eye(2)
    K = Ps[:, [1, 3]] @ np.linalg.inv(Ps[np.ix_([1, 3], [1, 3])] + R)
    np.testing.assert_allclose(both.T @ both / (A.shape[0] - 1), Ps - K @ Ps[[1, 3], :],
                               atol=1e-10)


def test_ensemble_observe_accounts_for_a_pick_before_the_next():
    g = Z1 + Z2
    # rows 10 and 11 are the same quantity; row 12 independent of them
    A = np.column_stack([g, Z1, Z1, Z2]).astype(float)
    ens = TargetEnsemble(rows=np.array([10, 11, 12]), anomalies=A, cap=np.inf,
                         target_var=8 / 3, n_samples=4, n_failed=0)
    np.testing.assert_allclose(ens.variance_reduction(np.array([10, 11, 12])), [4 / 3] * 3)
    after = ens.observe([10])
    np.testing.assert_allclose(after.variance_reduction(np.array([10, 11, 12])),
                               [0.0, 0.0, 4 / 3], atol=1e-12)
    assert after.current_var == pytest.approx(4 / 3) and after.known == {10}
    assert after.observe([10, 99]).current_var == pytest.approx(4 / 3)  # known / out of scope
    with pytest.raises(SearchError, match="scope"):
        ens.variance_reduction(np.array([13]))


def test_stein_weights_match_finite_differences_of_a_refit():
    law, target = COMPUTE_LAW, 1e25
    theta = law.from_natural({"E": 1.7, "A": 2000.0, "alpha": 0.17})
    cost = np.array([1e18, 3e18, 1e19, 3e19, 1e20])  # FLOPs
    y = law.predict(theta, cost[:, None])  # nats, exactly on the law ...
    y[3] *= 0.99  # ... but row 3: on the envelope, 1 % below the law (beyond δ = 0.1 %)
    second = y.copy()
    second[2] = 9.0  # in the second sample row 2 is far above: off the envelope
    w = stein_weights(cost, np.vstack([y, second]), np.vstack([theta, theta]), target)

    def sensitivity(keep):  # ∂ log L̂(1e25)/∂y_i of a fit on the in-δ rows (theta is its optimum)
        out = np.zeros(cost.size)
        for i in keep:
            vals = []
            for sign in (1, -1):
                v = y.copy()
                v[i] += sign * 1e-4
                fit = fit_law(law, cost[keep][:, None], v[keep])
                vals.append(np.log(fit.predict(np.array([[target]]))[0]))
            out[i] = (vals[0] - vals[1]) / 2e-4
        return out

    four, three = sensitivity([0, 1, 2, 4]), sensitivity([0, 1, 4])  # samples 1 and 2
    assert w[3] == 0.0  # beyond δ a residual weighs only through its sign
    np.testing.assert_allclose(w, (four + three) / 2, rtol=2e-3, atol=1e-9)
    assert w[2] != 0.0 and three[2] == 0.0


@pytest.fixture(scope="module")
def problem(small_problem):
    return small_problem


TARGET = MethodConfig(acquisition="target", fantasize=False, target_samples=16,
                      cost_power=0.5, posterior_samples=0)  # no wall-clock fields to compare


def _trace(rec):
    return [(t.index, t.cost) for t in rec.trace]


@pytest.fixture(scope="module")
def target_run(problem):
    """TARGET to 10 % of C_total (seed 2), also recording 4 %: read, never changed (a frozen
    ReplayRecord), by the reproducibility test and the recorded-budget test."""
    return replay(problem, TARGET, 0.1, seed=2, record_budgets=(0.04,))


# The ensemble estimator with q = 2 buys ~2x the runs per budget (74 at 10 %, at ~2x the
# time per pick): 5 % still makes it ~40 picks, most of them target-scored batches.
@pytest.mark.parametrize("method,budget", [
    (TARGET, 0.1), (TARGET.with_(target_estimator="ensemble", q=2), 0.05),
    (TARGET.with_(strategy="full", target_every=3), 0.1)])
def test_target_loop_within_budget_and_reproducible(problem, method, budget, target_run):
    # For TARGET the first run is the one that also recorded 4 %: the same trace as a plain
    # run then also says that recording a budget leaves the search unchanged.
    a = target_run if method == TARGET else replay(problem, method, budget, seed=2)
    b = replay(problem, method, budget, seed=2)
    assert _trace(a) == _trace(b)
    idx = np.array([t.index for t in a.trace])
    assert np.unique(idx).size == idx.size and not problem.grid.held_out[idx].any()
    assert problem.grid.cost[idx].sum() <= budget * problem.C_total * (1 + 1e-9)


def test_target_recorded_budget_equals_a_separate_run(problem, target_run):
    rec = target_run
    alone = replay(problem, TARGET, 0.04, seed=2)
    assert not rec.separate_runs
    assert rec.at(0.04).to_dict() == alone.at(0.04).to_dict()
    assert rec.at(0.1).n_runs > rec.at(0.04).n_runs


def test_target_scores_are_used_and_fallbacks_say_why(problem):
    loop = _make_loop(problem, TARGET, 0.1, seed=0)
    reasons = []
    while True:
        out = loop.suggest(1)
        if not out:
            break
        reasons.append(out[0].reason)
        loop.tell([out[0].index], problem.loss[[out[0].index]])
    used = [r for r in reasons if "max target score" in r]
    assert used and all("stein estimate from" in r for r in used)
    fallback = [r for r in reasons if r.startswith("target fallback to EI")]
    assert all("max log EI" in r for r in fallback)
    assert all(np.isfinite(t.acquisition_value) for t in loop.trace
               if t.acquisition_value is not None)


def test_settings_are_validated(problem):
    with pytest.raises(SearchError):
        TargetSettings(law="nope")
    with pytest.raises(SearchError):
        TargetSettings(samples=2)
    with pytest.raises(SearchError):
        TargetSettings(estimator="magic")
    with pytest.raises(SearchError):
        SearchLoop(problem.grid, 0.1, None, acquisition="target", cost_power=-1)
    with pytest.raises(ValueError):
        MethodConfig(acquisition="target", target_every=0)
    with pytest.raises(ValueError):
        MethodConfig(target_estimator="magic")
    with pytest.raises(SearchError, match="law ensemble"):
        score(Acquisition.TARGET, np.zeros(2), np.ones(2), 0.0)
    assert "target/compute@1e+25" in TARGET.label()


def test_cli_replay_with_the_target_acquisition(tmp_path):
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(3), D=1e9 * 2.0 ** np.arange(4),
                           lr=[5e-4, 1e-3, 2e-3], bs=[128, 256], seed=1)
    frame[["N", "D", "lr", "bs", "loss"]].to_csv(tmp_path / "runs.csv", index=False)
    out = subprocess.run(
        [sys.executable, "-m", "scalebo.cli", "replay", "--dataset", "runs.csv", "--axes",
         "lr,bs", "--budget", "0.2", "--no-fantasize", "--acq", "target", "--cost-power",
         "0.5", "--target-samples", "12", "--target-every", "2", "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    method = json.loads(out.stdout)["method"]
    assert (method["acquisition"], method["cost_power"], method["target_samples"],
            method["target_every"], method["target_estimator"]) == ("target", 0.5, 12, 2,
                                                                    "stein")


def _fitted_surrogate(problem, n=40):
    from scalebo.bench.budget_measure import method_surrogate

    rows = np.arange(0, problem.grid.n_configs, problem.grid.n_configs // n)[:n]
    y = problem.loss[rows]
    mu, sd = float(y.mean()), float(y.std())
    model = method_surrogate(MethodConfig(acquisition="target"), problem, 0, fantasy=False)
    model.fit(problem.grid.encode()[rows], (y - mu) / sd)
    return model, rows, mu, sd


def test_joint_draws_share_one_factor_with_sample_joint(problem):
    """The ensemble's draws and its Stein factor come from one Cholesky factorization and
    are the samples ``sample_joint`` draws (the second factorization was 104 of 320 s of a
    profiled StepLaw replay)."""
    from scalebo.search.target_draws import joint_draws, recorded_cov

    model, rows, _, _ = _fitted_surrogate(problem)
    X = problem.grid.encode()[np.setdiff1d(np.arange(120), rows)]
    ref = model.sample_joint(X, 16, np.random.default_rng(5), include_noise=True)
    draws, L = joint_draws(model, X, 16, np.random.default_rng(5), with_factor=True)
    np.testing.assert_allclose(draws, ref, rtol=1e-9, atol=1e-9)  # the same samples
    cov = recorded_cov(model, X)
    np.testing.assert_allclose(L @ L.T, cov, atol=1e-8 * np.abs(cov).max())
    again, none = joint_draws(model, X, 16, np.random.default_rng(5), with_factor=False)
    assert none is None
    np.testing.assert_allclose(again, ref, rtol=1e-9, atol=1e-9)
