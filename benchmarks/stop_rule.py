"""The stop rule on recorded grids: the compute it spends and the error when it stops.

For each dataset and seed, the default method is replayed to ``--budget`` (default 25 % of
C_total); then :func:`scalebo.bench.stop_rule.replay_stop_rule` walks the acquisition order
and stops at the first checkpoint where the law posterior's 80 % interval of the compute
law's loss at 1e25 FLOPs is within ±``--tolerance`` (default 0.5 %). Prints, per dataset,
the fraction of seeds that stopped, the compute spent at the stop (% of C_total; mean ± SD,
median) and the |relative error| of the fantasized fit at the stop (%), beside the error of
the same method at fixed budgets. With ``--estimand noise_free`` the rule also stops at the
grid's noise floor: when training every untried configuration would narrow the interval by
less than ``--min-shrink`` (default 0.2; :mod:`scalebo.search.noise_floor`).

    SCALEBO_DATA_DIR=/path/to/datasets python benchmarks/stop_rule.py --seeds 10 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed

from scalebo.cli.arg_types import coupling_share


def one(dataset: str, seed: int, budget: float, tolerance: float, estimand: str,
        min_shrink: float, coupling: float | None) -> dict:
    warnings.simplefilter("ignore")
    from scalebo.bench.method import DEFAULT_METHOD
    from scalebo.bench.problems import load_problem
    from scalebo.bench.replay import replay
    from scalebo.bench.stop_rule import replay_stop_rule

    problem = load_problem(dataset)
    method = DEFAULT_METHOD.with_(posterior_samples=0, posterior_estimand=estimand)
    if coupling is not None:
        method = method.with_(posterior_coupling=coupling)
    t0 = time.perf_counter()
    rec = replay(problem, method, budget, seed)
    out = replay_stop_rule(problem, method, [t.index for t in rec.trace], budget=budget,
                           seed=seed, tolerance=tolerance, min_shrink=min_shrink)
    return {"dataset": dataset, "seed": seed, "seconds": time.perf_counter() - t0,
            **out.to_dict()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="steplaw,oellm_english")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=float, default=0.25)
    ap.add_argument("--tolerance", type=float, default=0.005)
    from scalebo.search.law_posterior import ESTIMANDS

    ap.add_argument("--estimand", default="reference", choices=ESTIMANDS,
                    help="what the law posterior's interval is about (law_posterior)")
    ap.add_argument("--min-shrink", type=float, default=0.2,
                    help="noise_free: also stop when training everything left would narrow "
                         "the interval by less than this fraction")
    ap.add_argument("--posterior-coupling", type=coupling_share, default=None, metavar="RHO",
                    help="the law posterior's cell coupling (default: the method's, 0.85)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write every outcome to this file")
    args = ap.parse_args()
    if not os.environ.get("SCALEBO_DATA_DIR"):
        print("SCALEBO_DATA_DIR is not set: nothing to measure", file=sys.stderr)
        return 2
    datasets = args.datasets.split(",")
    t0 = time.perf_counter()
    rows = Parallel(n_jobs=args.jobs)(
        delayed(one)(d, s, args.budget, args.tolerance, args.estimand, args.min_shrink,
                     args.posterior_coupling)
        for d in datasets
        for s in range(args.seeds))
    print(f"stop rule ±{100 * args.tolerance:g} % on the 80 % interval at 1e25 FLOPs, "
          f"budget {100 * args.budget:g} %, {args.estimand} posterior"
          + (f" (noise floor: min shrink {args.min_shrink:g})"
             if args.estimand == "noise_free" else "")
          + ("" if args.posterior_coupling is None
             else f", cell coupling {args.posterior_coupling:g}") + f", {args.seeds} seeds, "
          f"{time.perf_counter() - t0:.0f} s")
    print("| dataset | stopped | spent at stop, % of C_total (mean ± SD, median) | "
          "error at stop, % (mean ± SD, max) |")
    print("|---|---|---|---|")
    for d in datasets:
        rs = [r for r in rows if r["dataset"] == d]
        spent = np.array([100 * r["spent_fraction"] for r in rs])
        err = np.array([r["error_pct"] for r in rs if r["error_pct"] is not None])
        print(f"| {d} | {sum(r['stopped'] for r in rs)}/{len(rs)} | {spent.mean():.2f} ± "
              f"{spent.std(ddof=1):.2f}, {np.median(spent):.2f} | {err.mean():.3g} ± "
              f"{err.std(ddof=1):.2g}, {err.max():.3g} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
