"""Time one Bayesian-optimization step: scalebo's GP against scikit-learn's.

A step is: fit the GP (hyperparameters refitted) on 500 observations in 4 dimensions, predict
mean and std on 2,000 candidates, and compute expected improvement (closed form, inline).

- (a) scalebo, full fit: ``GaussianProcess(n_restarts=2)`` (one start at the initial values
  plus two screened random restarts), fresh object each repeat;
- (b) scalebo, warm refit: the GP was fitted on the first 499 observations; refit on all 500
  from the previous hyperparameters only (``fit(..., warm_start=True)``), the loop's path;
- (c) scikit-learn: ``GaussianProcessRegressor(ConstantKernel * Matern(ARD, nu=2.5) +
  WhiteKernel, normalize_y=True, n_restarts_optimizer=2, alpha=0)``, same bounds.

Run: ``python benchmarks/bo_step.py [--repeats 5] [--blas-threads 1|none]``. Wall and CPU
times are both reported (medians): on a shared machine CPU time is the steadier measure. By
default BLAS is capped at one thread for the whole process, so both libraries run under the
same setting (scalebo caps its own BLAS calls at one thread anyway; ``none`` leaves
scikit-learn at the BLAS default, which on a loaded 2-core machine made it several times
slower).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings

import numpy as np
from scipy.stats import norm

from scalebo.search.models.gp import GaussianProcess

N_OBS, N_DIMS, N_CAND = 500, 4, 2_000
LS_BOUNDS, AMP_BOUNDS, NOISE_BOUNDS = (1e-2, 1e2), (1e-2, 1e2), (1e-6, 1e1)


def synthetic(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A loss-like surface on [0, 1]^4: power-law-ish decay in two axes, a learning-rate
    bowl, a weak interaction, 0.01-nat noise. Returns X (500, 4), y (500,), X_cand (2000, 4)."""
    rng = np.random.default_rng(seed)

    def f(X: np.ndarray) -> np.ndarray:
        return (1.8 + 0.9 * np.exp(-2.5 * X[:, 0]) + 0.6 * np.exp(-2.0 * X[:, 1])
                + 0.4 * (X[:, 2] - 0.4) ** 2 + 0.1 * X[:, 3] * X[:, 0])

    X = rng.random((N_OBS, N_DIMS))
    y = f(X) + 0.01 * rng.standard_normal(N_OBS)
    return X, y, rng.random((N_CAND, N_DIMS))


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """EI for minimization, closed form: (best − μ)Φ(z) + σφ(z), z = (best − μ)/σ."""
    std = np.maximum(std, 1e-12)
    z = (best - mean) / std
    return (best - mean) * norm.cdf(z) + std * norm.pdf(z)


Timing = tuple[float, float, float]  # wall s, CPU s, LML


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float], lml: float) -> Timing:
    return time.perf_counter() - t0[0], time.process_time() - t0[1], lml


def step_scalebo(X: np.ndarray, y: np.ndarray, Xc: np.ndarray, seed: int) -> Timing:
    t0 = _clock()
    gp = GaussianProcess(n_restarts=2, amplitude_bounds=AMP_BOUNDS, noise_bounds=NOISE_BOUNDS,
                         rng=seed).fit(X, y)
    mean, std = gp.predict(Xc)
    ei = expected_improvement(mean, std, float(y.min()))
    assert np.all(np.isfinite(ei))
    return _since(t0, gp.log_marginal_likelihood_value_)


def step_scalebo_warm(X: np.ndarray, y: np.ndarray, Xc: np.ndarray, seed: int) -> Timing:
    gp = GaussianProcess(n_restarts=2, amplitude_bounds=AMP_BOUNDS, noise_bounds=NOISE_BOUNDS,
                         rng=seed).fit(X[:-1], y[:-1])
    t0 = _clock()
    gp.fit(X, y, warm_start=True)
    mean, std = gp.predict(Xc)
    ei = expected_improvement(mean, std, float(y.min()))
    assert np.all(np.isfinite(ei))
    return _since(t0, gp.log_marginal_likelihood_value_)


def step_sklearn(X: np.ndarray, y: np.ndarray, Xc: np.ndarray, seed: int) -> Timing:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    kernel = (ConstantKernel(1.0, AMP_BOUNDS) * Matern([0.5] * X.shape[1], LS_BOUNDS, nu=2.5)
              + WhiteKernel(1e-2, NOISE_BOUNDS))
    t0 = _clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at bounds
        gp = GaussianProcessRegressor(kernel, alpha=0.0, normalize_y=True,
                                      n_restarts_optimizer=2, random_state=seed).fit(X, y)
        mean, std = gp.predict(Xc, return_std=True)
    ei = expected_improvement(mean, std, float(y.min()))
    assert np.all(np.isfinite(ei))
    return _since(t0, float(gp.log_marginal_likelihood_value_))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--blas-threads", default="1", help="'1' (default) or 'none'")
    args = parser.parse_args()
    if args.blas_threads == "none":
        limit = contextlib.nullcontext()
    else:
        from threadpoolctl import threadpool_limits

        limit = threadpool_limits(limits=int(args.blas_threads), user_api="blas")

    X, y, Xc = synthetic()
    cases = {"scalebo full": step_scalebo, "scalebo warm": step_scalebo_warm,
             "scikit-learn": step_sklearn}
    wall: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    lmls: dict[str, list[float]] = {k: [] for k in cases}
    with limit:
        for rep in range(args.repeats):
            for name, fn in cases.items():  # interleaved: machine noise hits all alike
                w, c, lml = fn(X, y, Xc, rep)
                wall[name].append(w)
                cpu[name].append(c)
                lmls[name].append(lml)
                print(f"repeat {rep}: {name:13s} wall {w:7.3f} s  CPU {c:7.3f} s  LML {lml:.4f}",
                      flush=True)
    print(f"\nBO step: {N_OBS} obs, d={N_DIMS}, {N_CAND} candidates, {args.repeats} repeats, "
          f"BLAS threads: {args.blas_threads}")
    for label, table in (("wall", wall), ("CPU", cpu)):
        med = {k: statistics.median(v) for k, v in table.items()}
        for name in cases:
            print(f"  {label:4s} {name:13s} median {med[name]:7.3f} s   "
                  f"best LML {max(lmls[name]):.4f}")
        for name in ("scalebo full", "scalebo warm"):
            print(f"  {label:4s} ratio scikit-learn / {name}: "
                  f"{med['scikit-learn'] / med[name]:.1f}x")

if __name__ == "__main__":
    main()
