"""Cost of sympy-lambdified gradients: the compute law written as a formula vs the built-in.

Data: a synthetic compute sweep ``L(C) = 1.8 + 2e3·C^(−0.17)``, C log-spaced over 1e18–1e22
FLOPs (``--n`` points), 0.5 % log-normal noise, seeded.

* built-in: :func:`scalebo.fitting.robust.fit_law` on ``COMPUTE_LAW`` (log-sum-exp form with
  hand-written gradients);
* formula: :func:`scalebo.fitting.formula_fit.fit_formula` on ``E + A*C**(-alpha)`` with
  COMPUTE_LAW's bounds, so both optimize the same internal parameters (log E, log A, alpha)
  with the same objective (Huber δ = 1e-3 on log residuals) and the same optimizer, from the
  same starts.

Two start sets: COMPUTE_LAW's data-aware grid (80 starts here) and ``--many`` log-uniform
random starts. The fits alternate over ``--repeats`` runs (the 2 cores are shared, so each
ratio is taken within a repeat); printed: median times, the median paired ratio formula /
built-in, the one-off cost of building the formula law (parse, ``sympy.diff``, lambdify) and
the natural-residual fit of the formula from the grid.
Usage: ``python benchmarks/formula_speed.py [--repeats 7] [--n 40] [--many 4096]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from scalebo.fitting.formula_fit import fit_formula
from scalebo.fitting.robust import fit_law
from scalebo.laws import COMPUTE_LAW
from scalebo.laws.formula import _compile, formula_law


def paired_times(fns, repeats: int) -> list[list[float]]:
    """Wall times ``[fn][repeat]``; the functions alternate within each repeat, so load from
    other processes on the shared cores hits all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--n", type=int, default=40, help="observations")
    parser.add_argument("--many", type=int, default=4096, help="random starts, second set")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    C = np.geomspace(1e18, 1e22, args.n)[:, None]
    y = COMPUTE_LAW.predict(COMPUTE_LAW.from_natural({"E": 1.8, "A": 2e3, "alpha": 0.17}), C)
    y = y * np.exp(rng.normal(0.0, 0.005, args.n))
    lo, hi = COMPUTE_LAW.lower, COMPUTE_LAW.upper
    bounds = {"E": (np.exp(lo[0]), np.exp(hi[0])), "A": (np.exp(lo[1]), np.exp(hi[1])),
              "alpha": (lo[2], hi[2])}

    _compile.cache_clear()
    t0 = time.perf_counter()
    law = formula_law("E + A*C**(-alpha)", ("C",), bounds)
    build = time.perf_counter() - t0
    print(f"building the formula law (parse, sympy.diff, lambdify): {build * 1e3:.0f} ms (once)")

    grid = COMPUTE_LAW.start_grid(COMPUTE_LAW.prepare(C))
    many = law.random_starts(args.many, seed=0)
    print(f"{args.n} observations, median of {args.repeats} runs")
    for label, starts in (("grid", grid), ("random", many)):
        ref = fit_law(COMPUTE_LAW, C, y, starts=starts)
        got = fit_formula(law, C, y, starts=starts)
        gap = max(abs(got.params[k] / v - 1) for k, v in ref.params.items())
        t_ref, t_got = paired_times([lambda s=starts: fit_law(COMPUTE_LAW, C, y, starts=s),
                                     lambda s=starts: fit_formula(law, C, y, starts=s)],
                                    args.repeats)
        ratio = statistics.median(g / r for g, r in zip(t_got, t_ref, strict=True))
        print(f"{label:>6} ({len(starts)} starts): built-in {statistics.median(t_ref) * 1e3:7.1f} "
              f"ms, formula {statistics.median(t_got) * 1e3:7.1f} ms, median paired ratio "
              f"{ratio:.2f}; max relative parameter difference {gap:.1e} "
              f"({ref.status} / {got.status})")
    (t_nat,) = paired_times([lambda: fit_formula(law, C, y, starts=grid, residuals="natural")],
                            args.repeats)
    print(f"formula, natural residuals (least squares), grid: "
          f"{statistics.median(t_nat) * 1e3:.1f} ms")

if __name__ == "__main__":
    main()
