"""``scalebo replay``: replay a search strategy on a recorded grid and print its metrics."""

from __future__ import annotations

import argparse
from typing import Any

from scalebo.cli.common import (
    add_format_argument,
    check_output_path,
    format_table,
    log,
    write_json,
    write_json_file,
)
from scalebo.outputs import save_figure

NAME = "replay"
HELP = "replay a budgeted search on a recorded grid and score the recovered law"
DESCRIPTION = """\
Replay a search strategy on a recorded grid: the recorded loss of each configuration is the
oracle, the 2 largest-compute (N, D) cells are held out, and the laws refitted from what
the search bought (and, with --fantasize, from observed + surrogate-predicted losses) are
compared with the reference fit on the whole grid (DESIGN.md metrics). Budget: a fraction of
C_total, the summed compute of the acquirable grid (FLOPs).
"""
EPILOG = """\
datasets: steplaw, oellm_english, synthetic (built-in, known law), or a run-table file
(--map as for 'scalebo fit'; --axes default: numeric columns varying inside a cell).
example: scalebo replay --dataset steplaw --budget 0.05 --seed 0 --json out.json
"""


#: Method options left unset (None) take ``MethodConfig``'s defaults (kept out of module
#: import so that ``scalebo --help`` does not load numpy).
_METHOD_OPTIONS = {"strategy": "strategy", "schedule": "schedule", "surrogate": "surrogate",
                   "kernel": "kernel", "acq": "acquisition", "incumbent": "incumbent",
                   "fantasize": "fantasize", "estimator": "estimator",
                   "scope": "fantasize_scope", "batch": "q", "target_compute": "target_compute",
                   "target_law": "target_law", "cost_power": "cost_power",
                   "target_samples": "target_samples", "target_every": "target_every",
                   "target_estimator": "target_estimator",
                   "posterior_samples": "posterior_samples",
                   "bootstrap_samples": "bootstrap_samples"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True,
                        help="steplaw, oellm_english, synthetic or a run-table file")
    parser.add_argument("--map", default=None, metavar="CANON=COL,...",
                        help="column mapping for a file, e.g. N=params,D=tokens")
    parser.add_argument("--axes", default=None, metavar="COL,...",
                        help="hyperparameter axes of a file (default: numeric columns that "
                             "vary inside an (N, D) cell)")
    parser.add_argument("--data-dir", default=None, help="public datasets folder "
                        "(default $SCALEBO_DATA_DIR)")
    parser.add_argument("--held-out-cells", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.05,
                        help="budget as a fraction of C_total (default 0.05)")
    parser.add_argument("--record-budgets", default="", metavar="F,...",
                        help="smaller budgets to record too, e.g. 0.01,0.05")
    parser.add_argument("--seed", type=int, default=0)
    group = parser.add_argument_group("method (unset options take the library defaults, "
                                      "see scalebo.bench.replay.MethodConfig)")
    group.add_argument("--strategy", choices=("window", "full"))
    group.add_argument("--schedule", choices=("sweep", "spent", "coverage"),
                       help="window schedule")
    group.add_argument("--surrogate", choices=("gp", "random", "trees"))
    group.add_argument("--kernel", help="GP kernel (matern52, rbf, additive, mixed)")
    group.add_argument("--acq", choices=("ei", "pi", "lcb", "target"),
                       help="acquisition; 'target': the run that most reduces the law "
                            "posterior's variance at --target-compute per cost^--cost-power")
    group.add_argument("--incumbent", choices=("frontier", "global"))
    group.add_argument("--fantasize", action=argparse.BooleanOptionalAction, default=None,
                       help="also score observed + surrogate-predicted losses")
    group.add_argument("--estimator", choices=("mean", "cell_best"),
                       help="fantasized cell loss: posterior mean or expected cell minimum")
    group.add_argument("--scope", choices=("window", "observed", "grid"),
                       help="fantasization scope: the final window (default), up to the "
                            "costliest observed cell, or the whole grid")
    group.add_argument("--batch", type=int, help="configurations per ask (q)")
    group.add_argument("--posterior-samples", type=int, metavar="S",
                       help="samples of the law posterior at every recorded budget (default "
                            "64; 0: none)")
    group.add_argument("--bootstrap-samples", type=int, metavar="B",
                       help="also a bootstrap over the observed runs, for comparison "
                            "(default 0: none)")
    target = parser.add_argument_group("target acquisition (--acq target)")
    target.add_argument("--target-compute", type=float, metavar="FLOPS",
                        help="compute whose law prediction is sharpened (default 1e25)")
    target.add_argument("--target-law", choices=("compute", "chinchilla"),
                        help="law of the target prediction (default compute: L(C) on the "
                             "envelope)")
    target.add_argument("--cost-power", type=float, metavar="GAMMA",
                        help="score = log(variance reduction) - GAMMA*log(cost/C_total); "
                             "0: cost-blind, 1: per FLOP (default 0.5, the best over StepLaw "
                             "and OELLM-English, docs/reproduction.md)")
    target.add_argument("--target-samples", type=int, metavar="S",
                        help="posterior samples (law fits) per ensemble")
    target.add_argument("--target-every", type=int, metavar="K",
                        help="rebuild the ensemble every K asks (square-root updates between)")
    target.add_argument("--target-estimator", choices=("stein", "ensemble"),
                        help="covariance of target and candidate: exact GP covariance times "
                             "the law's expected sensitivities (stein) or sample covariance")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the full record")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="plot the acquisition trace (compute vs order, cap; C vs loss)")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> int:
    from scalebo.bench.problems import load_problem
    from scalebo.bench.replay import MethodConfig, replay
    from scalebo.data.runs import parse_mapping

    axes = None if args.axes is None else [a.strip() for a in args.axes.split(",") if a.strip()]
    mapping = parse_mapping(args.map) if args.map else None
    if not (0 < args.budget <= 1):
        raise ValueError(f"--budget must be a fraction of C_total in (0, 1], got {args.budget}")
    method = MethodConfig(**{field: getattr(args, option)
                             for option, field in _METHOD_OPTIONS.items()
                             if getattr(args, option) is not None})
    for path, option in ((args.json, "--json"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    log(f"loading {args.dataset} and its reference fit ...")
    problem = load_problem(args.dataset, mapping=mapping, axes=axes,
                           n_held_out_cells=args.held_out_cells, data_dir=args.data_dir)
    for note in problem.notes:
        log(f"note: {note}")
    records = [float(b) for b in args.record_budgets.split(",") if b.strip()]
    log(f"replaying {method.label()} to {args.budget:g} of C_total, seed {args.seed} ...")
    rec = replay(problem, method, args.budget, args.seed, record_budgets=records)
    data = rec.to_dict()
    data["problem"] = problem.summary()
    if args.json:
        write_json_file(data, args.json)
        log(f"wrote {args.json}")
    if args.plot:
        plot_trace(rec, problem, args.plot)
        log(f"wrote {args.plot}")
    if args.format == "json":
        write_json(data)
    else:
        print(_table(rec))
    return 0


def _table(rec: Any) -> str:
    from scalebo.bench.metrics import EXTRAPOLATION_C, c_key

    rows = []
    for m in rec.metrics:
        for source, laws in (("observed", m.observed), ("fantasized", m.fantasized)):
            for name, lm in (laws or {}).items():
                row = {"budget": m.budget, "source": source, "law": name, "status": lm.status,
                       "runs": m.n_runs, "spent": m.spent_fraction,
                       "x_floor": m.floor_multiple_cells, "env_%": m.envelope_recovery_pct,
                       "cell_%": m.cell_recovery_pct, "heldout_mse": lm.heldout_mse}
                for c in EXTRAPOLATION_C:
                    v = lm.abs_extrapolation(c)
                    row[f"|d|%@{c_key(c)}"] = v
                rows.append(row)
    cols = list(rows[0]) if rows else []
    head = (f"{rec.dataset}: {rec.method.label()}, seed {rec.seed}; "
            f"{rec.timings['total']:.1f} s\n")
    out = head + format_table(rows, cols)
    intervals = _interval_rows(rec)
    if intervals:
        out += ("\n\nlaw intervals at 1e25 FLOPs (loss, nats; covers: whether the full-grid "
                "reference is inside the 80 % / 95 % interval)\n"
                + format_table(intervals, list(intervals[0])))
    return out


def _interval_rows(rec: Any) -> list[dict]:
    """One row per budget × law × interval source (law posterior, observed bootstrap)."""
    rows = []
    for m in rec.metrics:
        for source, table in (("posterior", m.law_posterior),
                              ("bootstrap", m.observed_bootstrap)):
            for law, entry in (table or {}).items():
                q = (entry.get("predicted_loss") or {}).get("1e+25")
                if not q or q.get("q10") is None:
                    continue
                cov = (entry.get("covered") or {}).get("1e+25") or {}
                ref = (entry.get("reference_loss") or {}).get("1e+25")
                rows.append({"budget": m.budget, "source": source, "law": law,
                             "q02.5": q["q02.5"], "q10": q["q10"], "q50": q["q50"],
                             "q90": q["q90"], "q97.5": q["q97.5"],
                             "80%_halfwidth_%": 50 * (q["q90"] - q["q10"]) / q["q50"],
                             "reference": ref, "covers_80": cov.get("80"),
                             "covers_95": cov.get("95")})
    return rows


def plot_trace(rec: Any, problem: Any, path: str) -> None:
    """Two panels: cumulative compute and cap (FLOPs) vs acquisition order; the acquired
    configurations in (C, loss), the reference envelope and compute law."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.array([t.order for t in rec.trace])
    cum = np.array([t.cumulative_cost for t in rec.trace])
    cap = np.array([t.cap for t in rec.trace])
    idx = np.array([t.index for t in rec.trace], dtype=np.int64)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(order, cum, label="cumulative compute")
    finite = np.isfinite(cap)
    a.step(order[finite], cap[finite], where="post", label="window cap")
    a.axhline(rec.budget * problem.C_total, color="k", ls=":", label="budget")
    a.set(yscale="log", xlabel="acquisition order", ylabel="FLOPs")
    a.legend()
    g = problem.grid
    acq = ~g.held_out
    b.scatter(g.cost[acq], problem.loss[acq], s=6, c="0.8", label="grid")
    b.scatter(g.cost[idx], problem.loss[idx], s=12, c=order, cmap="viridis",
              label="acquired (colour: order)")
    env = problem.envelope_idx
    b.plot(g.cost[env], problem.loss[env], "r.", ms=9, label="reference envelope")
    Cs = np.geomspace(g.cost[acq].min(), g.cost.max(), 100)
    b.plot(Cs, problem.reference_compute.predict(Cs[:, None]), "r-", lw=1,
           label="reference compute law")
    top = np.percentile(problem.loss[acq], 95)
    b.set(xscale="log", xlabel="C (FLOPs)", ylabel="loss (nats)",
          ylim=(problem.loss.min() * 0.98, top))
    b.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
