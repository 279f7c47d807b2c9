"""Time one Bayesian-optimization step: scalebo's GP against scikit-learn's, like with like.

A step is: fit the GP (hyperparameters refitted) on 500 observations in 4 dimensions, predict
mean and std on 2,000 candidates, and compute expected improvement (closed form, inline).
Both libraries use the same model (``σ²·Matern-5/2(ARD) + white noise`` on standardized y),
the same initial values (σ² = 1, length scales 0.5, noise 1e-2), the same bounds (σ² and
length scales in [1e-2, 1e2], noise in [1e-6, 1e1]) and L-BFGS-B with analytic gradients.

Full fits, 3 L-BFGS-B starts each (the initial values plus 2 random restarts):

- scikit-learn full: ``GaussianProcessRegressor(..., n_restarts_optimizer=2)``: restarts drawn
  uniformly in the log bounds; every start run to SciPy's default tolerances;
- scalebo full: ``GaussianProcess(n_restarts=2)`` as the library ships it: each restart the
  best of 10 draws from the central 60 % of the log bounds, screened by the LML on 256 rows
  (screening included in the time), losing starts stopped at a loose tolerance and the winner
  polished at SciPy's default;
- scalebo full, unscreened: the same with ``n_screen=1`` (plain uniform restarts, as
  scikit-learn's), to separate the screening from the rest.

Warm refits (the BO loop's path), one L-BFGS-B start each: the GP was fitted (untimed, 3
starts) on the first 499 observations; it is refitted on all 500 starting from those
hyperparameters only, with no restart:

- scalebo warm: ``fit(X, y, warm_start=True)``;
- scikit-learn warm: ``GaussianProcessRegressor(previous.kernel_, n_restarts_optimizer=0)``,
  whose optimizer starts from the kernel's current (fitted) hyperparameters.

Ratios: scikit-learn full / each scalebo full, scikit-learn warm / scalebo warm.

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


def _scalebo_gp(seed: int, n_screen: int = 10) -> GaussianProcess:
    return GaussianProcess(n_restarts=2, n_screen=n_screen, amplitude_bounds=AMP_BOUNDS,
                           noise_bounds=NOISE_BOUNDS, rng=seed)


def _sklearn_gp(seed: int, kernel=None, n_restarts: int = 2):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    if kernel is None:
        kernel = (ConstantKernel(1.0, AMP_BOUNDS)
                  * Matern([0.5] * N_DIMS, LS_BOUNDS, nu=2.5)
                  + WhiteKernel(1e-2, NOISE_BOUNDS))
    return GaussianProcessRegressor(kernel, alpha=0.0, normalize_y=True,
                                    n_restarts_optimizer=n_restarts, random_state=seed)


def _predict_ei(gp, Xc: np.ndarray, y: np.ndarray, sklearn: bool) -> None:
    if sklearn:
        mean, std = gp.predict(Xc, return_std=True)
    else:
        mean, std = gp.predict(Xc)
    ei = expected_improvement(mean, std, float(y.min()))
    assert np.all(np.isfinite(ei))


def step_scalebo(X, y, Xc, seed: int, prev=None) -> Timing:
    t0 = _clock()
    gp = _scalebo_gp(seed).fit(X, y)
    _predict_ei(gp, Xc, y, False)
    return _since(t0, gp.log_marginal_likelihood_value_)


def step_scalebo_unscreened(X, y, Xc, seed: int, prev=None) -> Timing:
    t0 = _clock()
    gp = _scalebo_gp(seed, n_screen=1).fit(X, y)
    _predict_ei(gp, Xc, y, False)
    return _since(t0, gp.log_marginal_likelihood_value_)


def step_sklearn(X, y, Xc, seed: int, prev=None) -> Timing:
    t0 = _clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at bounds
        gp = _sklearn_gp(seed).fit(X, y)
        _predict_ei(gp, Xc, y, True)
    return _since(t0, float(gp.log_marginal_likelihood_value_))


def step_scalebo_warm(X, y, Xc, seed: int, prev=None) -> Timing:
    gp = prev["scalebo"]
    t0 = _clock()
    gp.fit(X, y, warm_start=True)
    _predict_ei(gp, Xc, y, False)
    assert gp.fit_result_.n_starts == 1
    return _since(t0, gp.log_marginal_likelihood_value_)


def step_sklearn_warm(X, y, Xc, seed: int, prev=None) -> Timing:
    kernel = prev["scikit-learn"].kernel_  # fitted on the first 499 observations
    t0 = _clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp = _sklearn_gp(seed, kernel=kernel, n_restarts=0).fit(X, y)
        _predict_ei(gp, Xc, y, True)
    return _since(t0, float(gp.log_marginal_likelihood_value_))


def previous_fits(X: np.ndarray, y: np.ndarray, seed: int) -> dict:
    """Both libraries' full fits on the first 499 observations (untimed), for warm refits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"scalebo": _scalebo_gp(seed).fit(X[:-1], y[:-1]),
                "scikit-learn": _sklearn_gp(seed).fit(X[:-1], y[:-1])}


CASES = {"scalebo full": step_scalebo, "scalebo full unscr.": step_scalebo_unscreened,
         "scikit-learn full": step_sklearn, "scalebo warm": step_scalebo_warm,
         "scikit-learn warm": step_sklearn_warm}
RATIOS = (("scikit-learn full", "scalebo full"), ("scikit-learn full", "scalebo full unscr."),
          ("scikit-learn warm", "scalebo warm"))


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
    wall: dict[str, list[float]] = {k: [] for k in CASES}
    cpu: dict[str, list[float]] = {k: [] for k in CASES}
    lmls: dict[str, list[float]] = {k: [] for k in CASES}
    with limit:
        for rep in range(args.repeats):
            prev = previous_fits(X, y, rep)
            for name, fn in CASES.items():  # interleaved: machine noise hits all alike
                w, c, lml = fn(X, y, Xc, rep, prev)
                wall[name].append(w)
                cpu[name].append(c)
                lmls[name].append(lml)
                print(f"repeat {rep}: {name:19s} wall {w:7.3f} s  CPU {c:7.3f} s  LML {lml:.4f}",
                      flush=True)
    print(f"\nBO step: {N_OBS} obs, d={N_DIMS}, {N_CAND} candidates, {args.repeats} repeats, "
          f"BLAS threads: {args.blas_threads}")
    for label, table in (("wall", wall), ("CPU", cpu)):
        med = {k: statistics.median(v) for k, v in table.items()}
        for name in CASES:
            print(f"  {label:4s} {name:19s} median {med[name]:7.3f} s   "
                  f"best LML {max(lmls[name]):.4f}")
        for num, den in RATIOS:
            print(f"  {label:4s} ratio {num} / {den}: {med[num] / med[den]:.1f}x")


if __name__ == "__main__":
    main()
