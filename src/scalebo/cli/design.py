"""``scalebo design``: choose experiments that make a formula law predict a costly target
region well, per unit cost (:mod:`scalebo.design`). Parses options and prints; the work is
done by :func:`scalebo.design.design_replay` and :func:`scalebo.design.propose_batch`."""

from __future__ import annotations

import argparse
import sys
import warnings

from scalebo.cli.common import format_table, int_at_least, log

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
            its inputs and every other column --runs shares with the pool;
            lo80/hi80 = 80 % interval of the law's mean at the proposed row
            (the design's posterior, shrunk by the rows proposed before it); the JSON's
            target_prediction = every target row's prediction with 80 % / 95 % intervals
            for a new observation (none when the runs done are no more than parameters).
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
is spent or no pool row fits what is left of it.
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


def _group_labels(frame, column: str, source: str, pool_note: str = "") -> list[str]:
    """The group label (as text) of every row of ``frame``, or a ValueError naming the file,
    the column and the data row."""
    if column not in frame.columns:
        raise ValueError(f"{source}: no group column {column!r}{pool_note}; columns: "
                         f"{list(frame.columns)}")
    missing = frame[column].isna().to_numpy().nonzero()[0]
    if missing.size:
        raise ValueError(f"{source}: data row {missing[0] + 1}, column {column!r}: no group "
                         "value")
    return frame[column].astype(str).tolist()


def _groups(pool_frame, target_frame, args: argparse.Namespace) -> tuple | None:
    """``None`` for a single-group design (today's path), else the pool's and the target
    region's group labels; the target's groups must all have pool rows."""
    if args.group is None:
        return None
    pool_g = _group_labels(pool_frame, args.group, args.pool)
    names = list(dict.fromkeys(pool_g))
    note = f" (the pool {args.pool} holds {len(names)} groups {names[:5]})"
    target_g = _group_labels(target_frame, args.group, args.target_region, note)
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


def _log_target(preds: list[dict]) -> None:
    """One line on the target region: predicted range and the median 80 % width."""
    widths = [p["hi80"] - p["lo80"] for p in preds if p["lo80"] is not None]
    means = [p["mean"] for p in preds if p["mean"] is not None]
    if means:
        width = (f", median 80 % interval width {sorted(widths)[len(widths) // 2]:.4g}"
                 if widths else ", no interval (no more runs than parameters)")
        log(f"target region ({len(means)} rows): predicted {min(means):.4g} to "
            f"{max(means):.4g}{width} (JSON: target_prediction)")


def run(args: argparse.Namespace) -> int:
    """Replay or propose (see DESCRIPTION)."""
    from scalebo.data.files import read_table
    from scalebo.design import (
        design_replay,
        grouped_design_replay,
        make_pool,
        make_target,
        propose_batch,
        propose_groups,
        separate_group_replays,
        target_predictions,
    )
    from scalebo.design.pool import shared_rows_note
    from scalebo.design.runs_done import column_matches, done_rows, row_values, settings_note
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
        pool = make_pool(pool_frame, law, args.cost, variable_map=vmap, source=args.pool)
        runs_frame = read_table(args.runs)
        done = make_pool(runs_frame, law, args.cost, response=args.response,
                         variable_map=vmap, require_response=True, source=args.runs,
                         allow_empty=True)  # a header alone: a campaign's start
        matches, _ = column_matches(pool, pool_frame, done.X, runs_frame,
                                    skip=[*law_columns, args.response])
        if grouped is None:
            log(f"fitting {len(done.cost)} runs done, proposing {args.batch} of {pool.n} rows")
            props = propose_batch(pool, target, law, done.X, done.y, done.cost, args.budget,
                                  args.batch, seed=args.seed, n_starts=args.starts,
                                  matches=matches)
        else:
            runs_g = _group_labels(runs_frame, args.group, args.runs)
            each = "per group" if args.group_budget == "per-group" else "in all"
            log(f"fitting {len(done.cost)} runs done, each group of {args.group!r} on its own; "
                f"proposing {args.batch} rows {each} ({args.group_budget} budget) ...")
            props = propose_groups(pool, target, law, *grouped, done.X, done.y, done.cost,
                                   runs_g, args.budget, args.batch,
                                   group_budget=args.group_budget, seed=args.seed,
                                   n_starts=args.starts, matches=matches)
        predicted = target_predictions(law, done.X, done.y, target, seed=args.seed,
                                       n_starts=args.starts,
                                       target_groups=grouped[1] if grouped else None,
                                       done_groups=runs_g if grouped else None)
        shown = [c for c in map(str, pool_frame.columns) if c not in (args.response, args.group)]
        proposals = [{**p.to_dict(), "columns": row_values(pool_frame, p.row, [args.response])}
                     for p in props]
        result = {"mode": "propose", "law": law_info, "budget": args.budget,
                  "spent_fraction": float(done.cost.sum() / pool.total_cost),
                  "proposals": proposals, "target_prediction": predicted}
        if grouped is not None:
            result.update(group=args.group, group_budget=args.group_budget)
        _log_target(result["target_prediction"])
        pilot = all(p.mean is None for p in props)  # too young to fit: the pilot says why
        if len(props) < args.batch and not pilot and (grouped is None
                                                      or args.group_budget == "shared"):
            untried = ~(done_rows(pool, done.X, matches=matches) if grouped is None
                        else done_rows(pool, done.X, grouped[0], runs_g, matches))
            untried[[p.row for p in props]] = False
            warnings.warn(f"{len(props)} of the {args.batch} rows asked for (--batch) " + (
                f"fit what is left of --budget {args.budget:g}; raise it for more"
                if untried.any() else "are proposed: every other pool row is done"),
                stacklevel=2)
        rows = [{"data_row": p["data_row"], **({"group": p["group"]} if grouped else {}),
                 **{c: p["columns"][c] for c in shown}, "cost_fraction": p["cost_fraction"],
                 "mean": p["mean"], "lo80": p["lo80"], "hi80": p["hi80"]} for p in proposals]
        columns = ["data_row", *(["group"] if grouped else []), *shown, "cost_fraction",
                   "mean", "lo80", "hi80"]
    if args.json:
        write_json_file(result, args.json)
        log(f"JSON written to {args.json}")
    sys.stdout.write(format_table(rows, columns))
    return 0
