"""``scalebo design``: choose experiments that make a formula law predict a costly target
region well, per unit cost (:mod:`scalebo.design`). Parses options and prints; the work is
done by :func:`scalebo.design.design_replay` and :func:`scalebo.design.propose_batch`."""

from __future__ import annotations

import argparse
import sys
import warnings

from scalebo.cli.common import format_table, int_at_least, log
from scalebo.cli.design_propose import group_labels, propose

NAME = "design"
DEFAULT_BUDGETS = "0.01,0.05,0.1"
HELP = "pick the next experiments (variance reduction per cost) or replay a design on a pool"
DESCRIPTION = """\
Experiment design for a formula law over a pool of candidate runs with costs, aimed at a
target region (e.g. larger models than any pool row).

Two modes:
  replay    the pool's responses are known: replay a design (ScaleBench's protocol) and
            report the fit and target-region R^2 at each budget checkpoint;
  propose   with --runs (the runs done so far) and --budget: the next --batch pool rows,
            each scoring the expected reduction of the target region's predictive variance
            per (cost/C)^0.4, C the pool's total cost; with fewer runs done than the law
            has parameters (a --runs file of a header alone at the start), the cheapest
            rows, as a replay's pilot starts.
With --group COL holding several groups, a replay fits the law separately in each group
(own parameters) and scores one R^2 over all target rows, each predicted by its group's fit.
--group-budget per-group (default, ScaleBench's protocol): every group is its own episode
with budgets of its own pool cost, and groups whose fit fails are left out of the pooled R^2
(-1 when all fail); shared: one budget over the whole pool, rows of any group, -1 when any
group's fit fails. Proposals with --group: per-group, --batch rows for every group with
target rows under --budget of that group's pool cost (cost_fraction is then of the group's
cost); shared, --batch rows in all under --budget of the whole pool's cost.
Names of the formula that are columns (or mapped with --map) are inputs; every other name is
a parameter and needs --bounds. Fits are least squares in natural units (any sign). A pool
column the formula does not read that differs among rows of equal inputs (a learning rate,
a dataset without --group) is fitted through: a warning names it (keep each cell's best
row, filter the pool, or --group COL).

Intervals (multi-mode Laplace posterior of the fit, residual noise SSE/(n - p), normal):
  replay    cover80 = fraction of target rows whose response lies in its 80 % interval for
            a new observation (pooled over groups), width80 = median width of those
            intervals (with groups, the widest group's); the JSON's interval has 95 % too;
  propose   the table's data_row = the proposed row of --pool (1-based, as errors count),
            then every column of that row but the response, under the pool's own names
            (the JSON's "columns"); a run done counts only for the pool rows it matches in
            its inputs and in the pool's settings --runs has too (the columns the
            warning above names; not the --cost columns: a measured cost is no
            mismatch), and a run done that matches none is named, with the column
            whose value differs (its pool rows may be proposed again);
            design_lo80/design_hi80 (JSON lo80/hi80) = 80 % band of the law's mean at
            the proposed row under the design's posterior, NOT a calibrated interval: its
            noise is ScaleBench's (shrunk toward the response's spread; sd noise_factor x
            the fit's residual sd, printed: no fixed range, larger the closer the fit
            passes through the runs, and said in words when it does) and it is
            conditioned on the rows proposed before it; the JSON's
            target_prediction = every target row's prediction with 80 % / 95 % intervals
            for a new observation (none when the runs done are no more than parameters);
            the JSON's fit = the fit they come from (params, status, message, identified;
            {group: ...} with groups), also printed, with a warning when the runs done do
            not identify the law (e.g. all at one N).
"""
EPILOG = """\
examples:
  scalebo design --pool train.parquet --target-region test.parquet \\
      --formula "E + A*N**(-a) + B*D**(-b)" \\
      --bounds "E=-3:10,A=1e-3:1e9,a=0.05:2,B=1e-3:1e9,b=0.05:2" \\
      --cost "6*N*D" --map N=params,D=tokens --budgets 0.01,0.05,0.1 --seed 0 --json out.json
  scalebo design --pool grid.csv --target-region big.csv --formula ... --bounds ... \\
      --cost "6*N*D" --runs done.csv --budget 0.05 --batch 4
exit codes: 0 ok, 1 the runs done cannot be fitted, 2 bad input or usage, 3 the budget
is spent or no pool row fits what is left of it (the fit of the runs done and the target
prediction are still reported, and --json written with no proposals and "stop": true).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``scalebo design``."""
    a = parser.add_argument
    a("--pool", required=True, metavar="FILE",
      help="candidate runs (CSV/TSV/Parquet/JSON lines), one row per experiment")
    a("--target-region", required=True, metavar="FILE",
      help="inputs where the law must predict well (responses, if present, score a replay)")
    a("--formula", required=True, metavar="EXPR", help="the law, e.g. 'E + A*N**(-a)'")
    a("--bounds", required=True, metavar="NAME=LO:HI,...", help="bounds of every parameter")
    a("--cost", required=True, metavar="EXPR",
      help="cost of a row from inputs/columns, e.g. '6*N*D' (FLOPs) or 'P*D'")
    a("--map", default=None, metavar="NAME=COL,...", help="formula names to table columns")
    a("--response", default="loss", metavar="COL", help="response column (default loss)")
    a("--group", default=None, metavar="COL",
      help="group column: with several groups the law is fitted per group (own parameters)"
           " and R^2 pooled over the target rows; proposals are made per group (--runs"
           " must then have the column too)")
    a("--group-budget", choices=("per-group", "shared"), default="per-group",
      help="with --group: budgets per group of its own cost (default, ScaleBench) or one "
           "budget shared by the whole pool")
    a("--method", choices=("variance", "random", "cheapest", "cost_weighted"),
      default="variance", help="replay: design method (default variance)")
    a("--budgets", default=DEFAULT_BUDGETS, metavar="B,...",
      help="replay: checkpoint budgets as fractions of the pool's total cost, 0.05 or 5%% "
           f"(default {DEFAULT_BUDGETS}); the checkpoints lie on one run up to the largest, "
           "so a smaller budget's checkpoint holds the rows bought before the spend went past "
           "it and depends on the largest budget listed (ScaleBench's protocol)")
    a("--seed", type=int_at_least(0), default=0,
      help="seed of fit starts and baseline draws (default 0)")
    a("--starts", type=int_at_least(1), default=64,
      help="random starts per full fit (default 64)")
    a("--runs", default=None, metavar="FILE",
      help="propose: runs done so far (inputs and response columns, as the pool)")
    a("--budget", default=None, metavar="B",
      help="propose: campaign budget as a fraction of the pool's total cost, 0.05 or 5%%")
    a("--batch", type=int_at_least(1), default=1, metavar="K",
      help="propose: how many rows (default 1)")
    a("--json", default=None, metavar="FILE", help="write the result as JSON to FILE")


def _budgets(text: str) -> tuple[float, ...]:
    """``--budgets``: fractions of the pool's total cost, as ``0.05`` or ``5%`` (as every
    other command's budgets)."""
    from scalebo.search.budget import parse_fraction

    try:
        out = tuple(parse_fraction(t, of="the pool's total cost") for t in text.split(",")
                    if t.strip())
    except ValueError as exc:
        raise ValueError(f"--budgets {text!r}: {exc}") from None
    if not out:
        raise ValueError(f"--budgets {text!r}: expected fractions like 0.01,0.05,0.1 or 1%,5%")
    return out


def _groups(pool_frame, target_frame, args: argparse.Namespace) -> tuple | None:
    """``None`` for a single-group design (today's path), else the pool's and the target
    region's group labels; the target's groups must all have pool rows."""
    if args.group is None:
        return None
    pool_g = group_labels(pool_frame, args.group, args.pool)
    names = list(dict.fromkeys(pool_g))
    note = f" (the pool {args.pool} holds {len(names)} groups {names[:5]})"
    target_g = group_labels(target_frame, args.group, args.target_region, note)
    orphans = [g for g in dict.fromkeys(target_g) if g not in set(names)]
    if orphans:
        raise ValueError(f"{args.target_region}: group(s) {orphans[:5]} of column "
                         f"{args.group!r} have no rows in the pool {args.pool} (its groups: "
                         f"{names[:10]})")
    if len(names) == 1:
        return None
    return pool_g, target_g


def _check_mode_options(args: argparse.Namespace) -> None:
    """Options of the other mode are errors or are reported as ignored; budgets are checked
    before any work."""
    if args.runs is None:
        args.budgets = _budgets(args.budgets)  # parsed once: its warnings said once
        if args.batch != 1:
            warnings.warn("--batch is for proposals (with --runs); ignored in a replay",
                          stacklevel=2)
        return
    if args.budget is not None:
        from scalebo.search.budget import parse_fraction

        try:
            args.budget = parse_fraction(args.budget, of="the pool's total cost")
        except ValueError as exc:
            raise ValueError(f"--budget {args.budget}: {exc}") from None
    for flag, value, default in (("--budgets", args.budgets, DEFAULT_BUDGETS),
                                 ("--method", args.method, "variance")):
        if value != default:
            warnings.warn(f"{flag} is for replays (without --runs); ignored when proposing",
                          stacklevel=2)


def _pooled_interval(interval: dict) -> dict[str, float | None]:
    """``cover80`` (fraction of target rows inside their 80 % interval, pooled over groups)
    and ``width80`` (median width; of the widest group's) of a checkpoint's ``interval``
    (one group's dict, or ``{group: dict}``); ``None`` when a fit has no interval."""
    grouped = bool(interval) and all(isinstance(v, dict) for v in interval.values())
    parts = list(interval.values()) if grouped else [interval]
    if not parts or not all(parts):  # a failed fit (or n ≤ p): no pooled interval
        return {"cover80": None, "width80": None}
    n = sum(p["n_target"] for p in parts)
    cover = (sum(p["coverage80"] * p["n_target"] for p in parts) / n
             if all("coverage80" in p for p in parts) else None)
    return {"cover80": cover, "width80": max(p["width80"] for p in parts)}


def run(args: argparse.Namespace) -> int:
    """Replay or propose (see DESCRIPTION)."""
    from scalebo.data.files import read_table
    from scalebo.design import (
        design_replay,
        grouped_design_replay,
        make_pool,
        make_target,
        separate_group_replays,
    )
    from scalebo.design.pool import shared_rows_note
    from scalebo.design.runs_done import settings_note
    from scalebo.fitting.formula_checks import check_bound_names
    from scalebo.laws.formula import formula_law, formula_names, parse_bounds, parse_variable_map
    from scalebo.outputs import check_output_path, write_json_file

    if args.json:
        check_output_path(args.json, "--json")
    _check_mode_options(args)
    bounds, vmap = parse_bounds(args.bounds), parse_variable_map(args.map or "")
    pool_frame = read_table(args.pool)
    target_frame = read_table(args.target_region)
    grouped = _groups(pool_frame, target_frame, args)
    names = formula_names(args.formula)
    check_bound_names(names, bounds, vmap, pool_frame.columns, args.pool)
    variables = [n for n in names if n not in bounds and (n in vmap or n in pool_frame.columns)]
    unknown = [n for n in names if n not in bounds and n not in variables]
    if unknown:
        raise ValueError(f"--formula names {unknown} are neither parameters (in --bounds) nor "
                         f"columns of {args.pool} (columns: {list(pool_frame.columns)}); map "
                         "formula names to columns with --map NAME=COL,...")
    law = formula_law(args.formula, variables, bounds)
    law_columns = [vmap.get(v, v) for v in law.variables]
    if said := settings_note(pool_frame, law_columns, args.response, args.pool, args.group):
        warnings.warn(said, UserWarning, stacklevel=2)
    target = make_target(target_frame, law, response=args.response, variable_map=vmap,
                         source=args.target_region, group=args.group)
    law_info = {"formula": args.formula, "variables": {v: vmap.get(v, v) for v in law.variables},
                "parameters": list(law.natural_names), "cost": args.cost}
    stop = None
    if args.runs is None:
        if args.budget is not None:
            raise ValueError("--budget needs --runs (propose mode); a replay uses --budgets")
        pool = make_pool(pool_frame, law, args.cost, response=args.response, variable_map=vmap,
                         require_response=True, source=args.pool)
        if target.y is None:
            warnings.warn(f"{args.target_region} has no response column {args.response!r}: the "
                          "replay's r2 and interval coverage are not scored", stacklevel=2)
        if grouped is None:
            if said := shared_rows_note(pool, target, args.target_region):
                warnings.warn(said, UserWarning, stacklevel=2)
            log(f"replaying {args.method} on {pool.n} rows, budgets "
                f"{','.join(f'{b:g}' for b in args.budgets)} ...")
            rep = design_replay(pool, target, law, args.budgets, method=args.method,
                                seed=args.seed, n_starts=args.starts)
            result = {"mode": "replay", "law": law_info, **rep.to_dict()}
        else:
            log(f"replaying {args.method} on {pool.n} rows in {len(set(grouped[0]))} groups "
                f"of {args.group!r}, budgets {','.join(f'{b:g}' for b in args.budgets)} ...")
            replay = (grouped_design_replay if args.group_budget == "shared"
                      else separate_group_replays)
            rep = replay(pool, target, law, *grouped, args.budgets,
                         method=args.method, seed=args.seed, n_starts=args.starts)
            result = {"mode": "replay", "law": law_info, "group": args.group,
                      "group_budget": args.group_budget, **rep.to_dict()}
        rows = [{**{k: c[k] for k in ("budget", "spent_fraction", "n_observed", "r2",
                                      "status")}, **_pooled_interval(c["interval"])}
                for c in result["checkpoints"]]
        for r in rows:
            if isinstance(r["status"], dict):
                r["status"] = "; ".join(f"{g}: {v}" for g, v in r["status"].items())
        columns = ["budget", "spent_fraction", "n_observed", "r2", "cover80", "width80",
                   "status"]
    else:
        if args.budget is None:
            raise ValueError("--runs (propose mode) needs --budget, a fraction of the pool cost")
        result, rows, columns, stop = propose(args, law, pool_frame, target, grouped,
                                              law_info, vmap)
    if args.json:
        write_json_file(result, args.json)
        log(f"JSON written to {args.json}")
    if stop is not None:  # exit 3, after the fit and the target prediction are reported
        raise stop
    sys.stdout.write(format_table(rows, columns))
    return 0
