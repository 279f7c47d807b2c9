"""Calibration of the design posterior's target-region intervals on ScaleBench (issue 12).

For every law family of the vocab and data_constrained tasks × seeds: a cost-weighted random
design (seeded, rows drawn ∝ 1/cost while they fit) to 1 / 5 / 10 % of the pool's cost; at
each budget the natural least-squares fit (64 starts), its multi-mode Laplace posterior
(:func:`scalebo.design.build_posterior`) and the normal-approximation intervals for a new
observation at every target row (:meth:`~scalebo.design.Posterior.interval`). Printed per
task and budget: the fraction of target rows inside the 80 % and 95 % intervals (mean and
median over (law, seed)) and the median width of the 80 % interval of the law's mean
(response units).

    SCALEBO_DATA_DIR=/work/shared/datasets python benchmarks/scalebench_calibration.py --seeds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BUDGETS = (0.01, 0.05, 0.1)


def _scalebench():
    spec = importlib.util.spec_from_file_location("_scalebench", HERE / "scalebench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def run_one(task: str, key: str, seed: int) -> list[dict]:
    """Coverage rows of one (task, law, seed) at every budget."""
    warnings.simplefilter("ignore")
    from scalebo.design import baseline_pick, build_posterior
    from scalebo.design.replay import fit_rows

    law, pool, target = _scalebench().load_task(task, key)
    rng, C = np.random.default_rng(seed), pool.total_cost
    order, spent, free, out = [], 0.0, np.ones(pool.n, dtype=bool), []
    for b in BUDGETS:
        while (cand := np.flatnonzero(free & (spent + pool.cost <= b * C))).size:
            pick = baseline_pick("cost_weighted", pool.cost, cand, rng)
            order.append(pick)
            free[pick] = False
            spent += float(pool.cost[pick])
        X, y = pool.X[order], pool.y[order]
        row = dict(task=task, law=key, seed=seed, budget=b, n=len(order), ok=False)
        fit = fit_rows(law, X, y, n_starts=64, seed=seed)
        if fit is not None:
            post = build_posterior(law, fit, X, y, X_target=target.X)
            for level, name in ((0.8, "c80"), (0.95, "c95")):
                lo, hi = post.interval(target.X, level, observation=True)
                row[name] = float(np.mean((target.y >= lo) & (target.y <= hi)))
            lo, hi = post.interval(target.X, 0.8)
            row.update(ok=True, w80=float(np.median(hi - lo)))
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per law (default 3)")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers (default 2)")
    args = parser.parse_args()
    from joblib import Parallel, delayed

    fams = _scalebench()._families()
    jobs = [(t, k, s) for t in fams for k in fams[t] for s in range(args.seeds)]
    rows = Parallel(n_jobs=args.jobs)(delayed(run_one)(*j) for j in jobs)
    df = pd.DataFrame([r for rr in rows for r in rr])
    ok = df[df.ok]
    print(ok.groupby(["task", "budget"])[["c80", "c95", "w80"]].agg(["mean", "median"])
          .round(3).to_string())
    print(f"failed fits: {int((~df.ok).sum())} of {len(df)}")


if __name__ == "__main__":
    main()
