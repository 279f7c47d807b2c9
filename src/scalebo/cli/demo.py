"""``scalebo demo``: recover a known scaling law at a fraction of an exhaustive grid's compute.

Thin wrapper of :func:`scalebo.bench.demo.run_demo` and :func:`scalebo.bench.demo.plot_demo`:
parse the options, print the result (table or JSON) and the warnings summary, draw the figure.
"""

from __future__ import annotations

import argparse
import json
import sys

from scalebo.cli.common import check_figure_path, format_table, fraction, int_at_least, log

NAME = "demo"
HELP = "end-to-end demonstration on a synthetic grid (no data needed); --quick for a short one"
DESCRIPTION = """\
Runs on a fresh install with no data file: a synthetic grid of training runs drawn from a
known law L(N, D) (hyperparameter-sensitive, noisy; losses in nats) of 1,680 runs, of which
the 80 runs of the 2 largest-compute (N, D) cells are held out, leaving 1,600 acquirable runs
(--quick: 540 runs, 36 held out, 504 acquirable). It compares the compute law L(C) fitted on
all 1,600 acquirable runs (100 % of C_total, their summed compute in FLOPs) with the one
fitted on the runs Window + fantasize Bayesian optimization picks at --budget, prints the
compute spent, the laws next to the true one, the extrapolation errors at 1e25, 1e27 and
1e29 FLOPs and a one-line summary of the warnings raised, and draws a figure.
"""
EPILOG = """\
examples:
  scalebo demo                      # 2-5 s on 2 cores (printed), writes scalebo_demo.png
  scalebo demo --quick --no-plot    # the 540-run grid, no figure
  scalebo demo --budget 0.1 --format json
"""
SAME = "BO observed = BO + fantasize"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="smaller grid: 540 runs (504 acquirable) instead of 1,680 (1,600)")
    parser.add_argument("--budget", type=fraction, default=0.05,
                        help="BO budget as a fraction of the grid's compute, 0.05 or 5%% "
                             "(default 0.05)")
    parser.add_argument("--seed", type=int_at_least(0), default=0,
                        help="seed of the noise and the search")
    parser.add_argument("--plot", default="scalebo_demo.png",
                        help="figure path (default scalebo_demo.png in the current directory)")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the figure")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: readable text or JSON (default table)")


def _render(result) -> str:
    """The readable report: grid, laws, compute spent, extrapolation errors, warnings."""
    exh = result.law("exhaustive")
    same = result.fantasize_identical
    held = (f" ({result.n_grid} acquirable; {result.n_held_out} in the 2 largest-compute "
            "cells held out)" if result.n_held_out else "")
    lines = [f"grid: {result.n_grid + result.n_held_out} runs{held}, "
             f"C_total = {result.C_total:.3g} FLOPs (acquirable runs)", ""]
    rows = []
    for r in result.laws:
        if same and r.name == "BO + fantasize":
            continue
        name = SAME if same and r.name == "BO observed" else r.name
        rows.append({"law": name, "E": r.E, "A": r.A, "alpha": r.alpha,
                     "runs": r.runs if r.name != "true" else "-",
                     "compute %": 100 * r.compute_fraction if r.name != "true" else "-",
                     "FLOPs": r.flops if r.name != "true" else "-", "status": r.status})
    lines.append("fitted compute laws  L(C) = E + A / C^alpha  (C in FLOPs, L in nats)")
    lines.append(format_table(rows, ["law", "E", "A", "alpha", "runs", "compute %", "FLOPs",
                                     "status"]))
    lines += [f"note: {r.name} ({r.status}): {r.message}" for r in result.laws
              if r.message and not (same and r.name == "BO + fantasize")]
    if same:
        lines.append("note: BO + fantasize fitted the same law as BO observed (parameters "
                     "within 1e-6):\n      the fantasized losses left the (C, loss) envelope "
                     "unchanged, so the fit is shown once.")
    bo = [r for r in result.laws if r.name.startswith("BO")]
    if bo:
        frac = bo[0].compute_fraction
        lines.append(f"BO spent {100 * frac:.2f} % of the exhaustive grid's compute "
                     f"({bo[0].flops:.3g} of {exh.flops:.3g} FLOPs, "
                     f"{1 / frac if frac > 0 else float('inf'):.0f}x less)")
    lines.append("")
    lines.append("extrapolation error, relative % (signed)")
    erows = []
    for vs, table in (("true law", result.error_vs_true),
                      ("exhaustive fit", result.error_vs_exhaustive)):
        for name, d in table.items():
            if same and name == "BO + fantasize":
                continue
            row = {"law": SAME if same and name == "BO observed" else name, "vs": vs}
            row.update({f"{c:.0e}": v for c, v in d.items()})
            erows.append(row)
    lines.append(format_table(erows, ["law", "vs", "1e+25", "1e+27", "1e+29"]))
    lines.append(f"done in {result.seconds:.1f} s; {result.warnings_summary()}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the demo, print it, draw the figure."""
    from scalebo.bench.demo import plot_demo, run_demo

    if not 0 < args.budget <= 1:
        raise ValueError(f"--budget must be a fraction in (0, 1], got {args.budget}")
    if not args.no_plot:
        check_figure_path(args.plot, "--plot")
    result = run_demo(quick=args.quick, budget=args.budget, seed=args.seed, log=log)
    if result.warnings:  # recorded, not hidden: one line, shown even with --quiet
        print(f"warning: demo raised {result.warnings_summary()}", file=sys.stderr, flush=True)
    out = result.to_dict()
    if not args.no_plot:
        out["plot"] = str(plot_demo(result, args.plot))
        log(f"figure written to {out['plot']}")
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(_render(result))
    return 0
