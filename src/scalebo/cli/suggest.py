"""``scalebo suggest``: the next configurations of a real campaign to train, and why."""

from __future__ import annotations

import argparse
from pathlib import Path

from scalebo.cli.common import (
    add_format_argument,
    check_output_path,
    format_table,
    log,
    write_json,
    write_text_file,
)

NAME = "suggest"
HELP = "suggest the next training runs of a grid under a compute budget"
DESCRIPTION = """\
Fit a GP to the completed runs and pick the next configurations of the grid to train:
expected improvement over the best loss of each candidate's (N, D) cell, among configurations
that fit the remaining budget and the compute window. Budget: a fraction of C_total, the
summed compute (FLOPs) of every grid configuration.
GRID: a YAML axis product ('axes: {N: [...], D: [...], lr: [...]}') or a run-table file of
candidate configurations; RUNS: completed runs (N, D, axes, loss); PENDING: runs in flight.
"""
EPILOG = "example: scalebo suggest --grid grid.yaml --runs done.csv --budget 0.05 -q 4"
#: '-q' is the batch size here (as in BO's q); quiet keeps its long form only.
QUIET_FLAGS = ("--quiet",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grid", required=True, help="YAML axes or a table of configurations")
    parser.add_argument("--runs", default=None,
                        help="table of completed runs (with loss); omit it for the first "
                             "batch (the initial design)")
    parser.add_argument("--pending", default=None, help="table of configurations in flight")
    parser.add_argument("--map", default=None, metavar="CANON=COL,...",
                        help="column mapping for the tables, e.g. N=params,D=tokens")
    parser.add_argument("--budget", type=float, required=True,
                        help="total budget as a fraction of C_total, e.g. 0.05")
    parser.add_argument("-q", "--batch", dest="q", type=int, default=1,
                        help="configurations to suggest (default 1)")
    parser.add_argument("--schedule", choices=("sweep", "spent", "coverage", "full"),
                        default="spent", help="compute window (default spent)")
    parser.add_argument("--acq", choices=("ei", "pi", "lcb"), default="ei")
    parser.add_argument("--incumbent", choices=("frontier", "global"), default="frontier")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clip-iqr", type=float, default=5.0,
                        help="the GP sees losses clipped at median + K x IQR of the finished "
                             "runs, so diverged runs do not swamp it (default 5; 0: off)")
    parser.add_argument("--out", default=None, help="also write the suggestions (CSV/JSON)")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Parse, call :func:`scalebo.search.campaign.suggest_runs`, print."""
    import numpy as np

    from scalebo.data.files import read_table
    from scalebo.data.runs import load_runs, parse_mapping
    from scalebo.search.campaign import campaign_grid, suggest_runs

    if args.out:
        check_output_path(args.out, "--out")
    mapping = parse_mapping(args.map) if args.map else None
    if not (0 < args.budget <= 1):
        raise ValueError(f"--budget must be a fraction of C_total in (0, 1], got {args.budget}")
    grid = campaign_grid(args.grid, mapping)
    runs = (load_runs(Path(args.runs), mapping=mapping, hyperparameters=grid.axes)
            if args.runs else None)
    pending = None
    if args.pending:
        pending = read_table(args.pending).rename(
            columns={v: k for k, v in (mapping or {}).items()})
    suggestions, acc = suggest_runs(grid, runs, args.budget, pending=pending, batch=args.q,
                                    schedule=args.schedule, acquisition=args.acq,
                                    incumbent=args.incumbent, clip_iqr=args.clip_iqr,
                                    seed=args.seed, runs_name=str(args.runs))
    n_runs = 0 if runs is None else len(runs)
    log(f"{n_runs} runs ({acc['spent'] / acc['C_total']:.4g} of C_total), "
        f"{acc['pending'] / acc['C_total']:.4g} of C_total pending; budget {args.budget:g} "
        f"of C_total = {acc['budget']:.3g} FLOPs")
    rows = []
    for s in suggestions:
        row = {k: v for k, v in s.config.items()}
        row.update(predicted_loss=s.predicted_mean, predicted_std=s.predicted_std,
                   cost=s.cost, cap=s.cap if np.isfinite(s.cap) else None,
                   acquisition=s.acquisition_value, grid_index=s.index, reason=s.reason)
        rows.append(row)
    _write(rows, args)
    return 0


def _write(rows: list[dict], args: argparse.Namespace) -> None:
    import pandas as pd

    if args.out:
        frame = pd.DataFrame(rows)
        if args.out.endswith(".json"):
            write_text_file(args.out, frame.to_json(orient="records", indent=2))
        else:
            write_text_file(args.out, frame.to_csv(index=False))
        log(f"wrote {args.out}")
    if args.format == "json":
        write_json({"suggestions": rows})
    elif args.format == "csv":
        print(pd.DataFrame(rows).to_csv(index=False), end="")
    else:
        cols = [c for c in rows[0] if c != "reason"]
        print(format_table(rows, cols))
        for i, r in enumerate(rows):
            print(f"  {i + 1}. {r['reason']}")
