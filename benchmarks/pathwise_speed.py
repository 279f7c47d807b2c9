"""Exact vs pathwise joint posterior samples of the GP: time, peak memory, accuracy, law quantiles.

``GaussianProcess.sample_joint`` draws S joint samples at m points either exactly (the m × m
posterior covariance and its Cholesky: ``O(m³)`` time, ``O(m²)`` memory) or pathwise
(:mod:`scalebo.search.models.pathwise`: random Fourier features of the prior + Matheron's
update with the exact kernel, ``O(m·(F + n)·S)`` time, ``O(m·S)`` memory); ``method="auto"``
(the default) is exact up to ``PATHWISE_MIN_POINTS`` points. Printed:

1. Speed and memory, S = 64: a Matérn-5/2 ARD GP fitted on 200 random configurations of a
   20,000-configuration synthetic grid (N 10 × D 10 × lr 20 × bs 10,
   :func:`scalebo.bench.synthetic.make_synthetic`), sampled at m random other configurations
   (m = 1k, 5k, 20k by default): median wall time of ``--repeats`` runs and the peak of
   numpy allocations (tracemalloc, a separate run). Exact is skipped where its ~3 m × m
   arrays (588 MB measured at m = 5,000) would pass 2 GB.
2. Feature accuracy vs F at m = 1,000 (same GP): the covariance the pathwise sampler has
   given its frequencies, ``[I, −A]·(K̂ + blockdiag(0, s²I))·[I, −A]ᵀ`` with
   ``A = K*X(K_XX + s²I)⁻¹`` and ``K̂`` the feature kernel, against ``posterior_cov``: max
   |ΔC| / max variance, ‖ΔC‖_F / ‖C‖_F and the median relative variance error (signed),
   mean of 3 frequency draws; with the pathwise time at m = 20,000 for each F.
3. Law quantiles: :func:`scalebo.search.law_posterior.law_posterior` (compute law, S = 64,
   the default ClippedGP surrogate) on two synthetic grids (1,680 and 5,376 configurations) with
   a random 5 % of the acquirable configurations observed, run with exact and with pathwise
   samples for ``--seeds`` seeds: mean q10 / q50 / q90 of the loss at 1e25 FLOPs over seeds,
   their standard errors and the z of the difference (|z| ≲ 2: within Monte-Carlo error).

The machine is shared: times are medians, and still noisy. Usage:
``python benchmarks/pathwise_speed.py [--repeats 3] [--sizes 1000,5000,20000] [--seeds 10]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
import warnings

import numpy as np
from scipy.linalg import cho_solve

from scalebo.bench.problems import problem_from_table
from scalebo.bench.synthetic import make_synthetic
from scalebo.laws import CHINCHILLA
from scalebo.search.law_posterior import law_posterior
from scalebo.search.models import pathwise
from scalebo.search.models.clipping import ClippedGP
from scalebo.search.models.gp import GaussianProcess
from scalebo.search.models.linalg import blas_threads
from scalebo.search.models.surrogates import make_surrogate

S = 64
BIG_AXES = dict(N=5e7 * 2.0 ** np.arange(10), D=1e9 * 2.0 ** np.arange(10),
                lr=1e-4 * 2.0 ** (np.arange(20) / 3), bs=16.0 * 2.0 ** (np.arange(10) / 1.5))
MID_AXES = dict(N=5e7 * 2.0 ** np.arange(8), D=1e9 * 2.0 ** np.arange(8),
                lr=6.25e-5 * 2.0 ** np.arange(12), bs=32.0 * 2.0 ** np.arange(7))


def _problem(axes: dict, seed: int = 0):
    frame = make_synthetic(seed=seed, **axes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="synthetic",
                                  chinchilla_starts=CHINCHILLA.start_grid()[::300])


def _timed(fn, repeats: int) -> tuple[float, float]:
    """Median seconds over ``repeats`` runs and the peak traced MB of one more run."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return float(np.median(times)), peak


def speed(gp: GaussianProcess, X: np.ndarray, rest: np.ndarray, sizes: list[int],
          repeats: int) -> None:
    print(f"\n1. sample_joint, S = {S}, n = {gp.X_train_.shape[0]} training points, "
          f"F = {pathwise.N_FEATURES}, median of {repeats} (peak traced memory):")
    print(f"  {'m':>6s}  {'exact':>22s}  {'pathwise':>22s}")
    for m in sizes:
        Xs = X[rest[:m]]
        cells = []
        for method in ("exact", "pathwise"):
            if method == "exact" and 3 * 8 * m * m > 2e9:
                cells.append(f"skipped (~{3 * 8 * m * m / 1e9:.1f} GB)")
                continue
            t, mb = _timed(lambda Xs=Xs, method=method: gp.sample_joint(
                Xs, S, 0, include_noise=True, method=method), repeats)
            cells.append(f"{t:7.3f} s {mb:8.0f} MB")
        print(f"  {m:6d}  {cells[0]:>22s}  {cells[1]:>22s}")


def _feature_cov(gp: GaussianProcess, Xs: np.ndarray, F: int, seed: int) -> np.ndarray:
    """The pathwise sampler's latent covariance at ``Xs`` given its frequencies
    (standardized units)."""
    prior = pathwise.fourier_prior(gp.kernel_, F, np.random.default_rng(seed))
    X, L, amp = gp.X_train_, gp.L_, gp.amplitude_
    Ks = amp * gp.kernel_(Xs, X)
    A = cho_solve((L, True), Ks.T).T  # K*X (K_XX + s²I)⁻¹, (m, n)
    B = np.sqrt(amp) * (prior.features(Xs) - A @ prior.features(X))
    return B @ B.T + (gp.noise_ + gp.jitter_) * (A @ A.T)


def accuracy(gp: GaussianProcess, X: np.ndarray, rest: np.ndarray, features: list[int],
             repeats: int) -> None:
    Xs, Xbig = X[rest[:1000]], X[rest[:20000]]
    C = gp.posterior_cov(Xs) / gp.y_std_**2
    var = np.diag(C)
    print("\n2. feature accuracy at m = 1,000 (mean of 3 frequency draws) and pathwise time "
          f"at m = {Xbig.shape[0]:,}:")
    print(f"  {'F':>6s}  {'max|ΔC|/max var':>16s}  {'‖ΔC‖/‖C‖':>9s}  {'var err':>8s}  "
          f"{'time':>8s}")
    for F in features:
        with blas_threads(1):
            errs = [_feature_cov(gp, Xs, F, seed) - C for seed in range(3)]
        a = np.mean([np.abs(E).max() / var.max() for E in errs])
        f = np.mean([np.linalg.norm(E) / np.linalg.norm(C) for E in errs])
        v = np.mean([np.median(np.diag(E) / var) for E in errs])
        ts = []
        for r in range(repeats):
            t0 = time.perf_counter()
            with blas_threads(1):
                pathwise.pathwise_samples(gp, Xbig, S, r, include_noise=True, n_features=F)
            ts.append(time.perf_counter() - t0)
        print(f"  {F:6d}  {a:16.3f}  {f:9.3f}  {v:+8.3f}  {np.median(ts):6.2f} s")


def quantiles(seeds: int) -> None:
    print(f"\n3. compute law's loss at 1e25 FLOPs, law_posterior (S = {S}), random 5 % observed, "
          f"mean over {seeds} seeds ± standard error:")
    saved = pathwise.PATHWISE_MIN_POINTS
    try:
        for axes in ({}, MID_AXES):
            problem = _problem(axes)
            grid = problem.grid
            acq = np.flatnonzero(~grid.held_out)
            idx = np.sort(np.random.default_rng(0).choice(acq, int(0.05 * acq.size),
                                                          replace=False))
            y = problem.loss[idx]
            res, secs = {}, {}
            for method, threshold in (("exact", sys.maxsize), ("pathwise", 0)):
                pathwise.PATHWISE_MIN_POINTS = threshold
                q, t = [], []
                for seed in range(seeds):
                    gp = ClippedGP(make_surrogate("gp", kernel="matern52", rng=0), 5.0)
                    post = law_posterior(grid, idx, y, gp, laws=("compute",), n_samples=S,
                                         targets=(1e25,), rng=seed)["compute"]
                    s = post.summary()["predicted_loss"]["1e+25"]
                    q.append((s["q10"], s["q50"], s["q90"]))
                    t.append(post.timings["sample"])
                res[method], secs[method] = np.array(q), float(np.median(t))
            m = acq.size - idx.size
            print(f"  grid of {grid.n_configs:,} configurations, {idx.size} observed, "
                  f"{m:,} sampled:")
            for method, q in res.items():
                se = q.std(axis=0, ddof=1) / np.sqrt(seeds)
                cells = "  ".join(f"q{p} {mu:.4f} ± {s:.4f}"
                                  for p, mu, s in zip((10, 50, 90), q.mean(0), se, strict=True))
                print(f"    {method:8s} {cells}   (sampling {secs[method]:.2f} s)")
            diff = res["pathwise"].mean(0) - res["exact"].mean(0)
            se = np.sqrt((res["pathwise"].var(0, ddof=1) + res["exact"].var(0, ddof=1)) / seeds)
            print("    difference " + "  ".join(f"q{p} {d:+.4f} (z {d / s:+.2f})"
                                                for p, d, s in zip((10, 50, 90), diff, se,
                                                                   strict=True)))
    finally:
        pathwise.PATHWISE_MIN_POINTS = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--features", default="1024,2048,4096,8192,16384")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: 1,2,3")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    print(f"{os.cpu_count()} CPUs; auto threshold {pathwise.PATHWISE_MIN_POINTS} points, "
          f"F = {pathwise.N_FEATURES} features per kernel term")
    if not {"1", "2"} <= skip:
        problem = _problem(BIG_AXES)
        X = problem.grid.encode()
        rng = np.random.default_rng(0)
        obs = rng.choice(X.shape[0], 200, replace=False)
        gp = GaussianProcess("matern52", rng=0).fit(X[obs], problem.loss[obs])
        rest = rng.permutation(np.setdiff1d(np.arange(X.shape[0]), obs))
        print(f"GP: amplitude {gp.amplitude_:.3g}, length scales "
              f"{np.round(gp.kernel_.length_scale, 2).tolist()}, noise {gp.noise_:.2g} "
              "(standardized units)")
        if "1" not in skip:
            speed(gp, X, rest, [int(s) for s in args.sizes.split(",")], args.repeats)
        if "2" not in skip:
            accuracy(gp, X, rest, [int(f) for f in args.features.split(",")], args.repeats)
    if "3" not in skip:
        quantiles(args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
