"""Where a replay's remaining error is: the surrogate's fill-in, the window, or the runs.

For each seed, the default search (or ``--method`` settings) is replayed to ``--budget`` and
the compute law's relative error at 1e25 FLOPs is scored three ways on the same runs: fitted
on the observed runs, on observed + the fill-in (posterior means, the default estimate), and
on observed + the *recorded* losses of every configuration the fill-in covers — a perfect
surrogate inside the same window. Where the third column is near 0 the gap is the
surrogate's prediction; where it is not, the window (cells above its cap are never filled)
or the runs themselves. Then, per reference-envelope configuration not trained, its cell's
runs, the gap of the cell's best run to the configuration's recorded loss and the fill-in's
cell minimum (mnats).

Run: ``SCALEBO_DATA_DIR=... python benchmarks/error_decomposition.py --dataset oellm_english
--budget 5% --seeds 10 [--cells]``. Units: losses in nats, gaps in millinats, errors in %.
"""

from __future__ import annotations

import argparse

import numpy as np

from scalebo.bench.budget_measure import fill_in
from scalebo.bench.metrics import law_metrics, observed_table
from scalebo.bench.problems import load_problem
from scalebo.bench.replay import DEFAULT_METHOD, search_state
from scalebo.cli.arg_types import fraction


def error(problem, table) -> float:
    """Signed relative error (%) of the compute law fitted on ``table`` at 1e25 FLOPs."""
    m = law_metrics(problem, "compute", table)
    return float("nan") if m.extrapolation_pct is None else m.extrapolation_pct["1e+25"]


def decompose(problem, seed: int, budget: float, method=DEFAULT_METHOD) -> dict:
    """The three errors of one replay and the untried reference-envelope configurations."""
    loop = search_state(problem, method, budget, seed)
    idx = loop.observed_indices
    filled = fill_in(problem, method, loop, seed)  # the fill-in a replay's record scores
    perfect = filled.copy()
    perfect["loss"] = problem.loss[perfect["grid_index"].to_numpy()]
    cells = problem.grid.cell_ids
    missed = []
    for e in np.setdiff1d(problem.envelope_idx, idx):
        runs = idx[cells[idx] == cells[e]]
        fill = filled["loss"][cells[filled["grid_index"].to_numpy()] == cells[e]]
        cfg = problem.grid.config(int(e))
        missed.append({"N": cfg["N"], "D": cfg["D"], "runs": int(runs.size),
                       "best_run_gap": (1e3 * (problem.loss[runs].min() - problem.loss[e])
                                        if runs.size else None),
                       "fill_gap": 1e3 * (fill.min() - problem.loss[e]) if len(fill) else None})
    return {"runs": int(idx.size), "observed": error(problem, observed_table(problem, idx)),
            "fill_in": error(problem, filled), "perfect_fill_in": error(problem, perfect),
            "missed": missed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="oellm_english")
    parser.add_argument("--budget", type=fraction, default=0.05)
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1")
    parser.add_argument("--cells", action="store_true", help="list the missed envelope configs")
    args = parser.parse_args(argv)
    problem = load_problem(args.dataset)
    rows = []
    print("seed  runs  observed  fill-in  perfect fill-in   (signed % error at 1e25 FLOPs)")
    for seed in range(args.seeds):
        r = decompose(problem, seed, args.budget)
        rows.append(r)
        print(f"{seed:4d}  {r['runs']:4d}  {r['observed']:8.2f}  {r['fill_in']:7.2f}  "
              f"{r['perfect_fill_in']:15.2f}", flush=True)
        for m in r["missed"] if args.cells else ():
            gap = "no run" if m["best_run_gap"] is None else f"{m['best_run_gap']:.1f}"
            fill = "not filled" if m["fill_gap"] is None else f"{m['fill_gap']:.1f}"
            print(f"      missed N={m['N']:.3g} D={m['D']:.3g}: {m['runs']} runs, best run "
                  f"+{gap} mnats, fill-in minimum {fill} mnats")
    mean = {k: np.mean([abs(r[k]) for r in rows]) for k in ("observed", "fill_in",
                                                             "perfect_fill_in")}
    print(f"mean |error| %: observed {mean['observed']:.2f}, fill-in {mean['fill_in']:.2f}, "
          f"perfect fill-in {mean['perfect_fill_in']:.2f} ({args.dataset}, "
          f"{100 * args.budget:g} % of C_total, seeds 0-{args.seeds - 1})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
