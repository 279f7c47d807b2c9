"""Speed of the 4,500-start Chinchilla fit vs plain per-start SciPy loops, in one run.

Data: Epoch AI's Chinchilla points (``$SCALEBO_DATA_DIR/epoch_chinchilla``; the 5 highest-loss
points dropped, ``D = C / (6N)``); without the data a synthetic Chinchilla grid is used.

* scalebo: :func:`scalebo.fitting.robust.fit_law` (vectorized batched L-BFGS, analytic gradients),
  timed ``--repeats`` times; the median is reported.
* baselines: for every start of the same 4,500-point grid, ``scipy.optimize.minimize(...,
  method="L-BFGS-B")`` on the same objective (summed Huber, δ = 1e-3, of log residuals,
  log-sum-exp form), default tolerances, run twice:

  - with numerical gradients (SciPy's default when no ``jac`` is given: a naive loop);
  - with the analytic gradient, ``jac=True`` (what an expert's loop would do; the gradient
    is checked against central differences before timing).

  ``--baseline-starts K`` times the same random subset of K starts in both loops and
  scales the times by 4500 / K (the optimum comparison is then only indicative).

Prints the optima, their relative differences, the wall and CPU times (CPU time is the
steadier measure on a shared machine) and the ratio against each baseline (``speed-up vs
...``); then (untimed) the best baseline start continued with the
analytic gradient and tight tolerances, which shows whether a parameter difference is a
different optimum or SciPy's default stopping rule.
Usage: ``python benchmarks/fit_speed.py [--repeats 5] [--baseline-starts 4500]
[--blas-threads 1|none]``. By default BLAS is capped at one thread for the whole process, so
both sides run under the same setting: SciPy's L-BFGS-B makes BLAS calls on 5-vectors, and
with several OpenBLAS threads each start was measured ~50x slower on a loaded 2-core machine
(0.7 s instead of 0.015 s), which would inflate the speed-up; ``none`` leaves the BLAS
default.
"""

from __future__ import annotations

import argparse
import contextlib
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
    """Value and analytic gradient of :func:`baseline_objective` (for ``jac=True``)."""

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
    ap.add_argument("--blas-threads", default="1", help="'1' (default) or 'none'")
    args = ap.parse_args()
    if args.blas_threads == "none":
        limit = contextlib.nullcontext()
    else:
        from threadpoolctl import threadpool_limits

        limit = threadpool_limits(limits=int(args.blas_threads), user_api="blas")
    with limit:
        run(args)


def run(args: argparse.Namespace) -> None:
    X, y, label = load_data()
    starts = CHINCHILLA.start_grid()
    print(f"data: {label}; starts: {len(starts)}; BLAS threads: {args.blas_threads}")

    times, cpu_times = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fit = fit_law(CHINCHILLA, X, y)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    ours, ours_cpu = float(np.median(times)), float(np.median(cpu_times))
    print(f"scalebo fit_law: median {ours:.2f} s wall, {ours_cpu:.2f} s CPU over "
          f"{args.repeats} runs (wall min {min(times):.2f}, max {max(times):.2f}); objective "
          f"{fit.fun:.10e}; {fit.status}; params {fit.params}")

    log_N, log_D, log_y = np.log(X[:, 0]), np.log(X[:, 1]), np.log(y)
    f = baseline_objective(log_N, log_D, log_y)
    fg = baseline_objective_grad(log_N, log_D, log_y)
    check_gradient(f, fg, starts[len(starts) // 3])
    k = min(args.baseline_starts, len(starts))
    idx = np.random.default_rng(0).choice(len(starts), k, replace=False) if k < len(
        starts) else np.arange(len(starts))
    scaled = "(scaled) " if k < len(starts) else ""
    totals, cpu_totals, bests = {}, {}, {}
    for label, fun, jac in (("numerical gradients", f, False), ("analytic gradient", fg, True)):
        per_start = []
        best = (np.inf, None)
        t_all, c_all = time.perf_counter(), time.process_time()
        for i in idx:
            t0 = time.perf_counter()
            res = minimize(fun, starts[i], jac=jac, method="L-BFGS-B")
            per_start.append(time.perf_counter() - t0)
            if res.fun < best[0]:
                best = (float(res.fun), res.x)
        totals[label] = (time.perf_counter() - t_all) * len(starts) / k
        cpu_totals[label] = (time.process_time() - c_all) * len(starts) / k
        bests[label] = best
        base_params = CHINCHILLA.natural(best[1])
        rel_obj = abs(best[0] - fit.fun) / abs(fit.fun)
        rel_par = max(abs(base_params[n] - fit.params[n]) / abs(fit.params[n])
                      for n in fit.params)
        print(f"baseline per-start scipy L-BFGS-B ({label}{', jac=True' if jac else ''}): "
              f"{k} starts, median {np.median(per_start) * 1e3:.1f} ms/start, total "
              f"{scaled}{totals[label]:.1f} s wall, {cpu_totals[label]:.1f} s CPU; objective "
              f"{best[0]:.10e}; params {base_params}")
        print(f"  optimum agreement with scalebo: objective rel diff {rel_obj:.2e}; max "
              f"parameter rel diff {rel_par:.2e} (target 1e-4)")
    # Not timed: continue the baselines' best start with tight tolerances, to tell a
    # different optimum apart from SciPy's default stopping rule on a flat ridge.
    best = min(bests.values(), key=lambda b: b[0])
    refined = minimize(fg, best[1], jac=True, method="L-BFGS-B",
                       options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 10000})
    ref_params = CHINCHILLA.natural(refined.x)
    rel_ref = max(abs(ref_params[n] - fit.params[n]) / abs(fit.params[n]) for n in fit.params)
    print(f"baselines' best start continued with the analytic gradient to tight tolerances "
          f"(ftol 0, gtol 1e-12; not timed): objective {refined.fun:.10e}; "
          f"max parameter rel diff to scalebo {rel_ref:.2e}")
    for label, total in totals.items():
        print(f"speed-up vs the per-start loop with {label}: {total / ours:.1f}x wall "
              f"({scaled}{total:.1f} s / {ours:.2f} s), {cpu_totals[label] / ours_cpu:.1f}x CPU "
              f"({scaled}{cpu_totals[label]:.1f} s / {ours_cpu:.2f} s)")


def check_gradient(f, fg, x: np.ndarray) -> None:
    """The analytic gradient equals central differences of ``f`` (and its value ``f``)."""
    value, grad = fg(x)
    h = 1e-6
    fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])
    assert abs(value - f(x)) <= 1e-12 * max(1.0, abs(value)), (value, f(x))
    assert np.allclose(grad, fd, rtol=1e-5, atol=1e-7 * max(1.0, abs(value))), (grad, fd)


if __name__ == "__main__":
    main()
