"""The search's EI defaults, replayed: incumbent × cost power, paired over seeds.

Each variant replays Window (``spent``) + GP + EI + fantasize to 10 % of C_total on each grid
and records 1 and 5 % on the way (budget-independent methods: the same as separate runs),
without the law posterior (it does not change the picks). Prints, per grid and budget, the
mean ± SD and median |error| of the fantasized compute law at 1e25 FLOPs, the reference
envelope recovered and, against the first variant, how many seeds got better / worse and a
paired Wilcoxon signed-rank p-value. This is how the 0.3 defaults (envelope incumbent, EI per
unit cost) were chosen; docs/reproduction.md has the 20-seed table.

    SCALEBO_DATA_DIR=/path/to/datasets python benchmarks/ei_defaults.py --seeds 20 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.stats import wilcoxon

from scalebo.bench.problems import load_problem
from scalebo.bench.replay import MethodConfig, replay

BUDGETS = (0.01, 0.05, 0.1)
VARIANTS = {
    "frontier, gamma 0 (before 0.3)": dict(incumbent="frontier", ei_cost_power=0.0),
    "envelope, gamma 0": dict(incumbent="envelope", ei_cost_power=0.0),
    "envelope, gamma 0.5": dict(incumbent="envelope", ei_cost_power=0.5),
    "envelope, gamma 1 (default)": dict(incumbent="envelope", ei_cost_power=1.0),
}


def one(dataset: str, variant: str, seed: int) -> list[dict]:
    """Replay one (grid, variant, seed) to 10 % and return a row per recorded budget."""
    method = MethodConfig(posterior_samples=0, **VARIANTS[variant])
    t0 = time.process_time()
    rec = replay(load_problem(dataset), method, budget=max(BUDGETS), seed=seed,
                 record_budgets=BUDGETS)
    cpu = time.process_time() - t0
    rows = []
    for m in rec.metrics:
        law = m.fantasized["compute"] if m.fantasized else m.observed["compute"]
        err = abs(law.extrapolation_pct["1e+25"]) if law.extrapolation_pct else np.nan
        rows.append(dict(dataset=dataset, variant=variant, seed=seed, budget=m.budget,
                         err=err, env=m.envelope_recovery_pct, runs=m.n_runs, cpu=cpu))
    return rows


def summary(frame: pd.DataFrame) -> str:
    """Mean ± SD (median) per variant, grid and budget, and the paired test vs the first."""
    base = next(iter(VARIANTS))
    lines = ["| grid | variant | 1 % | 5 % | 10 % | envelope trained, % | better / worse "
             "vs first, p |", "|---|---|---|---|---|---|---|"]
    for ds, by_ds in frame.groupby("dataset"):
        for variant in VARIANTS:
            cells, env, paired = [], [], []
            for b in BUDGETS:
                g = by_ds[(by_ds.variant == variant) & (by_ds.budget == b)].set_index("seed")
                cells.append(f"{g.err.mean():.2f} ± {g.err.std():.2f} ({g.err.median():.2f})")
                env.append(f"{g.env.mean():.0f}")
                if variant != base:
                    r = by_ds[(by_ds.variant == base) & (by_ds.budget == b)].set_index("seed")
                    d = (g.err - r.err.reindex(g.index)).dropna()
                    p = wilcoxon(d).pvalue if np.any(d != 0) else 1.0
                    paired.append(f"{int((d < 0).sum())}/{int((d > 0).sum())}, {p:.2f}")
            lines.append(f"| {ds} | {variant} | " + " | ".join(cells)
                         + f" | {' / '.join(env)} | {'; '.join(paired) or '–'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--datasets", default="steplaw,oellm_english,synthetic")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    if not os.environ.get("SCALEBO_DATA_DIR"):
        raise SystemExit("set SCALEBO_DATA_DIR to the datasets folder (steplaw/, oellm_english/)")
    tasks = [(ds, v, s) for ds in args.datasets.split(",") for v in VARIANTS
             for s in range(args.seeds)]
    t0 = time.perf_counter()
    out = Parallel(n_jobs=args.jobs)(delayed(one)(*t) for t in tasks)
    frame = pd.DataFrame([row for rows in out for row in rows])
    print(summary(frame))
    print(f"\n{len(tasks)} replays in {time.perf_counter() - t0:.0f} s on {args.jobs} worker(s); "
          f"median CPU {frame.groupby(['dataset', 'variant', 'seed']).cpu.first().median():.1f} "
          "s per replay")


if __name__ == "__main__":
    main()
