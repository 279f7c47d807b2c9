"""Speed of the law posterior on StepLaw (S = 64 samples, both laws) vs a per-sample fit loop.

Data: StepLaw (``$SCALEBO_DATA_DIR/steplaw``, 1,911 configurations) through
:func:`scalebo.bench.problems.load_problem`; without ``SCALEBO_DATA_DIR`` the benchmark says so
and exits. Observations: the configurations a seeded replay of the default method bought at
5 % of C_total (``--design replay``, default) or a seeded random 5 % of the acquirable
configurations (``--design random``). Surrogate: the replays' fantasy GP (Matérn-5/2 ARD on
losses clipped at median + 5·IQR), fresh, seeded. Scope: every acquirable configuration (the
posterior's default since 0.3.3; at 5 % of StepLaw the search's window spans them all anyway).

* scalebo: :func:`scalebo.search.law_posterior.law_posterior` with ``n_samples=64`` for the
  compute law and Chinchilla, timed ``--repeats`` times; the median total is reported with its
  split: sampling (surrogate fit + joint draws, shared by the laws), the point fit on the
  posterior-mean table (start selection), the batched fit of the 64 tables, derived numbers.
* baseline (same run): what a user would write — for each of the 64 sampled tables, build the
  frontier with :mod:`scalebo.fitting.frontier` and call :func:`scalebo.fitting.robust.fit_law`
  with the same starts; its median time is compared with the batched fit's, and the predictions
  at 1e25 FLOPs are compared. (They agree to ~1e-7 nats on the replay design. On ill-posed
  samples — few envelope points, the random design — ``fit_law`` itself is chaotic: perturbing
  the 8 starts by 1e-12 relative flips a sample between two optima whose 1e25 predictions differ
  by 0.4 nats, so the batch, whose sums differ only by rounding, can land in the other one.)

Also printed: the 80 % interval (q10–q90) of the 1e25-FLOPs prediction vs the point estimate
(posterior-mean table) and the reference law (full grid), with and without observation noise
in the samples. Target: S = 64 in ≤ 2 s on 2 cores.
Usage: ``python benchmarks/law_posterior_speed.py [--repeats 5] [--design replay|random]
[--discrepancy 1.0]`` (the law posterior's opt-in hyperparameter-shift term; the baseline loop
fits the plain samples).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from scalebo.errors import FitError
from scalebo.fitting.allocation import compute_law_from_chinchilla
from scalebo.fitting.frontier import best_per_cell, pareto_envelope
from scalebo.fitting.robust import fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW
from scalebo.search.law_posterior import law_posterior, sample_losses
from scalebo.search.models.clipping import ClippedGP
from scalebo.search.models.surrogates import make_surrogate

S = 64
C25 = np.array([1e25])


def observations(problem, design: str, seed: int) -> np.ndarray:
    if design == "replay":
        from scalebo.bench.replay import replay

        record = replay(problem, budget=0.05, seed=seed)
        return np.array(sorted(e.index for e in record.trace), dtype=np.int64)
    acq = np.flatnonzero(~problem.grid.held_out)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(acq, int(round(0.05 * acq.size)), replace=False))


def surrogate(problem, seed: int):
    gp = make_surrogate("gp", kernel="matern52", categorical=problem.grid.categorical_columns,
                        rng=seed)
    return ClippedGP(gp, 5.0)


def _fit_predict(law, X, y, starts) -> tuple[float, float]:
    """fit_law seconds and the 1e25 prediction (NaN for a failed sample, as in the posterior:
    too few points, or no compute-optimal path)."""
    t0 = time.perf_counter()
    try:
        fit = fit_law(law, X, y, starts=starts)
    except FitError:
        return time.perf_counter() - t0, np.nan
    seconds = time.perf_counter() - t0
    if not fit.success:
        return seconds, np.nan
    try:
        pred = (fit.predict(C25[:, None]) if law is COMPUTE_LAW
                else compute_law_from_chinchilla(fit, C25))[0]
    except FitError:
        pred = np.nan
    return seconds, pred


def baseline(problem, rows, losses, starts) -> tuple[float, float, dict]:
    """64 fit_law calls per law on the sampled tables: total seconds, seconds inside
    fit_law, and the 1e25 predictions."""
    grid = problem.grid
    frame = grid.configs.iloc[rows].reset_index(drop=True)
    C = grid.cost[rows]
    preds = {"compute": [], "chinchilla": []}
    in_fit = 0.0
    t0 = time.perf_counter()
    for s in range(losses.shape[0]):
        keep = pareto_envelope(C, losses[s])
        t, pred = _fit_predict(COMPUTE_LAW, C[keep][:, None], losses[s, keep],
                               starts["compute"])
        in_fit += t
        preds["compute"].append(pred)
        best = best_per_cell(frame.assign(loss=losses[s]))
        t, pred = _fit_predict(CHINCHILLA, best[["N", "D"]].to_numpy(float),
                               best["loss"].to_numpy(float), starts["chinchilla"])
        in_fit += t
        preds["chinchilla"].append(pred)
    return time.perf_counter() - t0, in_fit, {k: np.array(v) for k, v in preds.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--design", choices=("replay", "random"), default="replay")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--discrepancy", type=float, default=0.0,
                    help="law_posterior(discrepancy=...): hyperparameter-shift term (0: off)")
    args = ap.parse_args()
    if not os.environ.get("SCALEBO_DATA_DIR"):
        print("SCALEBO_DATA_DIR is not set: this benchmark needs the StepLaw data "
              "(e.g. SCALEBO_DATA_DIR=/path/to/datasets); skipped.")
        return 0
    from scalebo.bench.problems import load_problem

    problem = load_problem("steplaw")
    grid = problem.grid
    idx = observations(problem, args.design, args.seed)
    y = problem.loss[idx]
    frac = grid.cost[idx].sum() / problem.C_total
    print(f"StepLaw: {grid.n_configs} configurations; {idx.size} observed ({args.design}, "
          f"{100 * frac:.2f} % of C_total); S = {S}; {os.cpu_count()} CPUs")
    kw = dict(scope="grid", n_samples=S, rng=args.seed)
    post_kw = dict(kw, discrepancy=args.discrepancy)

    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        post = law_posterior(grid, idx, y, surrogate(problem, args.seed), **post_kw)
        runs.append((time.perf_counter() - t0, post))
    post = runs[-1][1]
    print(f"\nlaw_posterior, both laws, median of {args.repeats}: "
          f"{np.median([r[0] for r in runs]):.3f} s")
    print(f"  sampling (GP fit + draws, shared): "
          f"{np.median([r[1]['compute'].timings['sample'] for r in runs]):.3f} s")
    for law in ("compute", "chinchilla"):
        parts = {k: np.median([r[1][law].timings[k] for r in runs])
                 for k in ("starts", "fit", "derive")}
        print(f"  {law:10s}: point fit (starts) {parts['starts']:.3f} s, batched fit of {S} "
              f"tables {parts['fit']:.3f} s, derive {parts['derive']:.3f} s; "
              f"{post[law].n_failed} failed; {post[law].starts.shape[0]} starts per sample")

    rows, losses = sample_losses(grid, idx, y, surrogate(problem, args.seed), **kw)
    starts = {law: post[law].starts for law in post}
    times, fit_times, preds = [], [], None
    for _ in range(args.repeats):
        t, t_fit, preds = baseline(problem, rows, losses, starts)
        times.append(t)
        fit_times.append(t_fit)
    batched = sum(np.median([r[1][law].timings["fit"] for r in runs]) for law in post)
    print(f"\nbaseline: {S} separate fit_law calls per law "
          "(frontiers with scalebo.fitting.frontier), "
          f"same starts, median of {args.repeats}: {np.median(times):.3f} s, of which "
          f"{np.median(fit_times):.3f} s in fit_law; batched fits (frontiers included): "
          f"{batched:.3f} s ({np.median(times) / batched:.1f}x; "
          f"{np.median(fit_times) / batched:.1f}x on fitting alone)")
    for law in post:
        ours = np.full(S, np.nan)
        ours[post[law].sample_index] = post[law].predicted_loss[:, 0]
        ok = np.isfinite(ours) & np.isfinite(preds[law])  # samples both count as successful
        diff = np.abs(ours[ok] - preds[law][ok])
        print(f"  {law:10s}: |batched − loop| at 1e25 ≤ 1e-6 nats on {np.sum(diff <= 1e-6)} of "
              f"{ok.sum()} samples; max {diff.max():.2e} nats")

    print("\n80 % interval of the 1e25-FLOPs prediction (nats; % of the point estimate):")
    refs = {"compute": problem.reference_compute.predict(C25[:, None])[0],
            "chinchilla": compute_law_from_chinchilla(problem.reference_chinchilla, C25)[0]}
    for noise in (True, False):
        res = law_posterior(grid, idx, y, surrogate(problem, args.seed), include_noise=noise,
                            **post_kw)
        for law, p in res.items():
            q = p.summary()["predicted_loss"]["1e+25"]
            point = (p.point.predict(C25[:, None])[0] if law == "compute"
                     else compute_law_from_chinchilla(p.point, C25)[0])
            at_point = np.mean(np.abs(p.predicted_loss[:, 0] - point) <= 1e-9 * point)
            print(f"  include_noise={noise!s:5s} {law:10s}: point {point:.4f}, reference "
                  f"{refs[law]:.4f}, q10–q90 {q['q10']:.4f}–{q['q90']:.4f} (width "
                  f"{100 * (q['q90'] - q['q10']) / point:.2f} %), q50 {q['q50']:.4f}; "
                  f"{100 * at_point:.0f} % of samples exactly at the point fit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
