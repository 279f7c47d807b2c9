"""``scalebo demo``: recover a known scaling law at a fraction of an exhaustive grid's compute.

Runs on a fresh install with no data file (:func:`scalebo.bench.demo.run_demo`): a synthetic
grid from a known law (hyperparameter-sensitive, noisy), the exhaustive fit on the whole grid
(100 % of the compute) vs Window + fantasize Bayesian optimization at ``--budget``, then
prints the compute spent, the fitted laws next to the true one, and the extrapolation errors,
and draws a figure.
"""

from __future__ import annotations

import argparse
import json

from scalebo.cli.common import check_output_path, format_table, log

NAME = "demo"
HELP = "end-to-end demonstration on a synthetic grid (no data needed); --quick for a short one"
DESCRIPTION = __doc__.split("\n\n", 1)[1] if __doc__ else HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="smaller grid (540 instead of 1,680 runs), well under 20 s")
    parser.add_argument("--budget", type=float, default=0.05,
                        help="BO budget as a fraction of the grid's compute (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise and the search")
    parser.add_argument("--plot", default="scalebo_demo.png",
                        help="figure path (default scalebo_demo.png in the current directory)")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the figure")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: readable text or JSON (default table)")


def _render(result) -> str:
    exh = result.law("exhaustive")
    lines = [f"grid: {result.n_grid} runs, C_total = {result.C_total:.3g} FLOPs", ""]
    rows = []
    for r in result.laws:
        rows.append({"law": r.name, "E": r.E, "A": r.A, "alpha": r.alpha,
                     "runs": r.runs if r.name != "true" else "-",
                     "compute %": 100 * r.compute_fraction if r.name != "true" else "-",
                     "FLOPs": r.flops if r.name != "true" else "-", "status": r.status})
    lines.append("fitted compute laws  L(C) = E + A / C^alpha  (C in FLOPs, L in nats)")
    lines.append(format_table(rows, ["law", "E", "A", "alpha", "runs", "compute %", "FLOPs",
                                     "status"]))
    bo = [r for r in result.laws if r.name.startswith("BO")]
    if bo:
        frac = bo[0].compute_fraction
        lines.append(f"BO spent {100 * frac:.2f} % of the exhaustive grid's compute "
                     f"({bo[0].flops:.3g} of {exh.flops:.3g} FLOPs, "
                     f"{1 / frac if frac > 0 else float('inf'):.0f}x less)")
    lines.append("")
    lines.append("extrapolation error, relative % (signed)")
    erows = []
    for name, d in result.error_vs_true.items():
        row = {"law": name, "vs": "true law"}
        row.update({f"{c:.0e}": v for c, v in d.items()})
        erows.append(row)
    for name, d in result.error_vs_exhaustive.items():
        row = {"law": name, "vs": "exhaustive fit"}
        row.update({f"{c:.0e}": v for c, v in d.items()})
        erows.append(row)
    lines.append(format_table(erows, ["law", "vs", "1e+25", "1e+27", "1e+29"]))
    lines.append(f"done in {result.seconds:.1f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the demo, print it, draw the figure."""
    from scalebo.bench.demo import plot_demo, run_demo

    if not 0 < args.budget <= 1:
        raise ValueError(f"--budget must be a fraction in (0, 1], got {args.budget}")
    if not args.no_plot:
        check_output_path(args.plot, "--plot")
    result = run_demo(quick=args.quick, budget=args.budget, seed=args.seed, log=log)
    out = result.to_dict()
    if not args.no_plot:
        out["plot"] = str(plot_demo(result, args.plot))
        log(f"figure written to {out['plot']}")
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(_render(result))
    return 0
