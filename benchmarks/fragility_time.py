"""Time ``scalebo fragility`` on Gemstones and check the reduced start policy against full grids.

Usage::

    SCALEBO_DATA_DIR=/path/to/datasets python benchmarks/fragility_time.py [--check-full]

Prints the wall-clock time of the full analysis (base fit on the 4,500-start Chinchilla grid,
35 variants, joblib on all cores) and, with ``--check-full``, refits every variant on the full
grid and reports the largest relative objective gap and parameter differences of the reduced
policy (slow: ~10 s per variant).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scalebo.analysis.fragility import (
    StartPolicy,
    _distinct,
    build_variants,
    check_law,
    fit_variant,
    fragility,
    gemstones_extras,
)
from scalebo.data.datasets import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check-full", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=-1)
    args = parser.parse_args()
    start = time.perf_counter()
    hot = load_dataset("gemstones", variant="hot")
    extra = gemstones_extras()
    report = fragility(hot, law="chinchilla", target=1e24, extra=extra, n_jobs=args.n_jobs)
    total = time.perf_counter() - start
    print(f"fragility: {len(report.results)} fits in {report.seconds:.1f} s "
          f"(with loading {total:.1f} s, n_jobs={args.n_jobs})")
    if not args.check_full:
        return
    law = check_law("chinchilla")
    variants = build_variants(hot, extra=extra)
    base = fit_variant(law, variants[0], 1e24, policy=StartPolicy(full=True))[1]
    optima = _distinct(np.vstack([base.x[None, :], base.converged_x]), 8)
    worst_gap, worst_dx = 0.0, 0.0
    for policy in (StartPolicy(), StartPolicy(n_grid=0)):
        worst_gap, worst_dx, t_reduced = 0.0, 0.0, 0.0
        for variant in variants[1:]:
            t0 = time.perf_counter()
            reduced = fit_variant(law, variant, 1e24, base_optima=optima, policy=policy)[1]
            t_reduced += time.perf_counter() - t0
            full = fit_variant(law, variant, 1e24, policy=StartPolicy(full=True))[1]
            gap = (reduced.fun - full.fun) / full.fun
            dx = float(np.max(np.abs(reduced.x - full.x)))
            worst_gap, worst_dx = max(worst_gap, gap), max(worst_dx, dx)
            print(f"  {variant.name:24s} gap {gap:+.2e}  max|dx| {dx:.2e}")
        print(f"{policy}: worst relative objective gap {worst_gap:.2e}, worst max|Δθ| "
              f"{worst_dx:.2e}, {t_reduced / (len(variants) - 1):.2f} s per variant")


if __name__ == "__main__":
    main()
