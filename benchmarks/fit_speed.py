"""Speed of the 4,500-start Chinchilla fit vs a plain per-start SciPy loop, in one run.

Data: Epoch AI's Chinchilla points (``$SCALEBO_DATA_DIR/epoch_chinchilla``; the 5 highest-loss
points dropped, ``D = C / (6N)``); without the data a synthetic Chinchilla grid is used.

* scalebo: :func:`scalebo.fitting.robust.fit_law` (vectorized batched L-BFGS, analytic gradients),
  timed ``--repeats`` times; the median is reported.
* baseline: for every start of the same 4,500-point grid, ``scipy.optimize.minimize(...,
  method="L-BFGS-B")`` with numerical gradients (SciPy's default when no ``jac`` is given) on
  the same objective (summed Huber, δ = 1e-3, of log residuals, log-sum-exp form), default
  tolerances. ``--baseline-starts K`` times a random subset of K starts and scales the time by
  4500 / K (the optimum comparison is then only indicative).

Prints both optima, their relative difference, both times and the ratio; then (untimed) the
baseline's best start continued with the benchmark's own analytic gradient and tight
tolerances, which shows whether a parameter
difference is a different optimum or SciPy's default stopping rule.
Usage: ``python benchmarks/fit_speed.py [--repeats 5] [--baseline-starts 4500]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from scalebo.fitting.robust import fit_law
from scalebo.laws import CHINCHILLA


def load_data() -> tuple[np.ndarray, np.ndarray, str]:
    root = os.environ.get("SCALEBO_DATA_DIR")
    path = Path(root or ".") / "epoch_chinchilla" / "svg_extracted_data.csv"
    if root and path.exists():
        import pandas as pd

        df = pd.read_csv(path).sort_values("loss").iloc[:-5]
        N = df["Model Size"].to_numpy(float)
        D = df["Training FLOP"].to_numpy(float) / (6 * N)
        return np.column_stack([N, D]), df["loss"].to_numpy(float), "Epoch Chinchilla (240)"
    rng = np.random.default_rng(0)
    N = 10 ** rng.uniform(7.5, 10, 240)
    D = 10 ** rng.uniform(9, 12, 240)
    theta = CHINCHILLA.from_natural({"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7,
                                     "beta": 0.28})
    y = CHINCHILLA.predict(theta, np.column_stack([N, D])) * np.exp(rng.normal(0, 0.01, 240))
    return np.column_stack([N, D]), y, "synthetic Chinchilla (240)"


def baseline_objective(log_N, log_D, log_y, delta=1e-3):
    def f(p):
        e, a, alpha, b, beta = p
        pred = logsumexp([a - alpha * log_N, b - beta * log_D, np.full_like(log_N, e)], axis=0)
        r = np.abs(pred - log_y)
        return float(np.sum(np.where(r <= delta, 0.5 * r * r, delta * (r - 0.5 * delta))))

    return f


def baseline_objective_grad(log_N, log_D, log_y, delta=1e-3):
    """Value and analytic gradient of :func:`baseline_objective` (for the untimed refinement)."""

    def fg(p):
        e, a, alpha, b, beta = p
        terms = np.stack([np.full_like(log_N, e), a - alpha * log_N, b - beta * log_D])
        pred = logsumexp(terms, axis=0)
        weights = np.exp(terms - pred)  # softmax: d pred / d (e, a, b)
        r = pred - log_y
        psi = np.clip(r, -delta, delta)
        value = float(np.sum(psi * r - 0.5 * psi * psi))
        grad = np.array([psi @ weights[0], psi @ weights[1], -(psi * weights[1]) @ log_N,
                         psi @ weights[2], -(psi * weights[2]) @ log_D])
        return value, grad

    return fg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline-starts", type=int, default=4500)
    args = ap.parse_args()
    X, y, label = load_data()
    starts = CHINCHILLA.start_grid()
    print(f"data: {label}; starts: {len(starts)}")

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fit = fit_law(CHINCHILLA, X, y)
        times.append(time.perf_counter() - t0)
    ours = float(np.median(times))
    print(f"scalebo fit_law: median {ours:.2f} s over {args.repeats} runs "
          f"(min {min(times):.2f}, max {max(times):.2f}); objective {fit.fun:.10e}; "
          f"{fit.status}; params {fit.params}")

    f = baseline_objective(np.log(X[:, 0]), np.log(X[:, 1]), np.log(y))
    k = min(args.baseline_starts, len(starts))
    idx = np.random.default_rng(0).choice(len(starts), k, replace=False) if k < len(
        starts) else np.arange(len(starts))
    per_start = []
    best = (np.inf, None)
    t_all = time.perf_counter()
    for i in idx:
        t0 = time.perf_counter()
        res = minimize(f, starts[i], method="L-BFGS-B")
        per_start.append(time.perf_counter() - t0)
        if res.fun < best[0]:
            best = (res.fun, res.x)
    base_total = (time.perf_counter() - t_all) * len(starts) / k
    base_params = CHINCHILLA.natural(best[1])
    print(f"baseline per-start scipy L-BFGS-B (numerical gradients): {k} starts, "
          f"median {np.median(per_start) * 1e3:.1f} ms/start, total "
          f"{'(scaled) ' if k < len(starts) else ''}{base_total:.1f} s; objective "
          f"{best[0]:.10e}; params {base_params}")
    rel_obj = abs(best[0] - fit.fun) / abs(fit.fun)
    rel_par = max(abs(base_params[n] - fit.params[n]) / abs(fit.params[n])
                  for n in fit.params)
    print(f"optimum agreement: objective rel diff {rel_obj:.2e}; max parameter rel diff "
          f"{rel_par:.2e} (target 1e-4)")
    # Not timed: continue the baseline's best start with tight tolerances, to tell a
    # different optimum apart from SciPy's default stopping rule on a flat ridge.
    fg = baseline_objective_grad(np.log(X[:, 0]), np.log(X[:, 1]), np.log(y))
    refined = minimize(fg, best[1], jac=True, method="L-BFGS-B",
                       options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 10000})
    ref_params = CHINCHILLA.natural(refined.x)
    rel_ref = max(abs(ref_params[n] - fit.params[n]) / abs(fit.params[n]) for n in fit.params)
    print(f"baseline's best start continued with an analytic gradient to tight tolerances "
          f"(ftol 0, gtol 1e-12; not timed): objective {refined.fun:.10e}; "
          f"max parameter rel diff to scalebo {rel_ref:.2e}")
    print(f"speed-up: {base_total / ours:.0f}x (target >= 100x)")


if __name__ == "__main__":
    main()
