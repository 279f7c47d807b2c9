"""``scalebo suggest``: the next configurations of a real campaign to train, and why."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
    parser.add_argument("--runs", required=True, help="table of completed runs (with loss)")
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


def _read(path: str, mapping: dict[str, str] | None) -> Any:
    from scalebo.data.runs import read_table

    frame = read_table(path)
    return frame.rename(columns={v: k for k, v in (mapping or {}).items()})


def _grid(path: str, mapping: dict[str, str] | None) -> Any:
    from scalebo.search.grid import Grid

    if Path(path).suffix.lower() in (".yaml", ".yml"):
        grid = Grid.from_yaml(path)
        if grid.n_held_out_cells:  # a real campaign holds nothing out unless asked
            import yaml

            if "held_out_cells" not in (yaml.safe_load(Path(path).read_text()) or {}):
                axes = {c: list(dict.fromkeys(grid.configs[c])) for c in grid.input_columns}
                grid = Grid.from_axes(axes, n_held_out_cells=0)
        return grid
    frame = _read(path, mapping)
    return Grid.from_frame(frame.drop(columns=["loss"], errors="ignore"), n_held_out_cells=0)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from scalebo.data.runs import load_runs, parse_mapping
    from scalebo.errors import SearchError
    from scalebo.search.loop import SearchLoop
    from scalebo.search.models.clipping import ClippedGP
    from scalebo.search.models.surrogates import make_surrogate

    if args.out:
        check_output_path(args.out, "--out")
    mapping = parse_mapping(args.map) if args.map else None
    if not (0 < args.budget <= 1):
        raise ValueError(f"--budget must be a fraction of C_total in (0, 1], got {args.budget}")
    grid = _grid(args.grid, mapping)
    runs = load_runs(Path(args.runs), mapping=mapping, hyperparameters=grid.axes)
    idx = grid.index_of(runs.frame)  # off-grid runs: SearchError naming them
    if np.unique(idx).size != idx.size:
        dup = sorted({int(i) for i in idx if (idx == i).sum() > 1})
        raise SearchError(f"{args.runs}: several runs map to the same grid configuration "
                          f"(grid rows {dup[:5]}); average repeats first.")
    budget = args.budget * grid.C_total
    spent = float(grid.cost[idx].sum())
    pending = np.zeros(0, dtype=np.int64)
    if args.pending:
        pending = grid.index_of(_read(args.pending, mapping))
    committed = spent + float(grid.cost[pending].sum())
    if committed >= budget:
        raise SearchError(f"the budget is already spent: {committed:.3g} FLOPs of "
                          f"{budget:.3g} ({args.budget:g} of C_total {grid.C_total:.3g}) are "
                          "done or pending; raise --budget to continue.")
    surrogate = make_surrogate("gp", categorical=grid.categorical_columns, rng=args.seed)
    if args.clip_iqr > 0:  # diverged runs would otherwise dominate the standardized GP
        surrogate = ClippedGP(surrogate, args.clip_iqr)
    loop = SearchLoop(grid, args.budget, surrogate, acquisition=args.acq,
                      incumbent=args.incumbent, schedule=args.schedule,
                      n_initial=max(0, 5 - idx.size), rng=args.seed)
    if idx.size:
        loop.tell(idx, runs.loss)
    if pending.size:
        loop.mark_pending(pending)
    log(f"{idx.size} runs ({spent / grid.C_total:.4g} of C_total), {pending.size} pending; "
        f"budget {args.budget:g} of C_total = {budget:.3g} FLOPs")
    suggestions = loop.suggest(args.q)
    if not suggestions:
        raise SearchError("no configuration fits the remaining budget "
                          f"({budget - committed:.3g} FLOPs).")
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
