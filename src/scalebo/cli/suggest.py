"""``scalebo suggest``: the next configurations of a real campaign to train, and why."""

from __future__ import annotations

import argparse

from scalebo.cli.campaign_args import (
    GRID_HELP,
    add_campaign_arguments,
    anchor_dropped_note,
    cell_text,
    cost_model,
    file_columns,
    load_campaign,
)
from scalebo.cli.common import (
    add_format_argument,
    check_output_path,
    exact_number,
    format_table,
    grid_value,
    int_at_least,
    log,
    note,
    write_csv,
    write_json,
    write_json_file,
)

NAME = "suggest"
HELP = "suggest the next training runs of a grid under a compute budget"
DESCRIPTION = """\
Fit a GP to the completed runs and pick the next configurations of the grid to train:
expected improvement per unit cost over the envelope incumbent (the lower of the candidate
cell's best loss and the best loss reached at or below its compute; --acq, --incumbent),
among configurations that fit the remaining budget and the compute window.
Without runs, the first batch is the initial design (random configurations of the cheapest
compute levels); completed runs count toward it. Running runs, and those of --pending, are
pending (their compute is committed, they are not proposed again); failed runs count as
spent and are not proposed again unless --retry-failed (--retry-failed crashed: only those
without a loss, not diverged ones; log the retry as a new row beside the failed one).
""" + GRID_HELP
EPILOG = """\
example: scalebo suggest --grid grid.yaml --runs runs.csv --budget 0.05 --batch 4
exit codes: 0 suggestions made, 2 bad input, 3 nothing left to propose (the budget is spent,
or no untried configuration fits it); the JSON (--json, --format json) is written on exit 3
too, with no suggestions, "stop": true and the reason in "message".
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_campaign_arguments(parser, budget_required=True)
    group = parser.add_argument_group("suggestions")
    group.add_argument("-n", "--batch", type=int_at_least(1), default=1,
                       help="configurations to suggest (default 1)")
    group.add_argument("--retry-failed", nargs="?", const="all", default=False,
                       choices=("all", "crashed"),
                       help="failed runs may be proposed again (their compute stays spent): "
                            "all of them (the default of the bare flag), or only crashed ones "
                            "(no loss; a diverged run stays failed)")
    group.add_argument("--acq", choices=("ei", "pi", "lcb"), default="ei",
                       help="acquisition: expected improvement (default), probability of "
                            "improvement or lower confidence bound")
    group.add_argument("--incumbent", choices=("envelope", "frontier", "global"),
                       default="envelope",
                       help="improvement over the lower of the candidate cell's best loss and "
                            "the envelope at its compute (envelope, default), over the cell's "
                            "best loss (frontier) or over the best loss overall (global); EI "
                            "and PI are per unit cost (the replayed default)")
    group.add_argument("--json", default=None, metavar="PATH",
                       help="also write the suggestions and the budget as JSON to PATH "
                            "(on exit 3 too: no suggestions, stop true, the reason in "
                            "message)")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Parse, call :func:`scalebo.search.campaign.suggest_runs`, print."""
    import numpy as np

    from scalebo.errors import BudgetExhausted
    from scalebo.search.campaign import suggest_runs

    if args.json:
        check_output_path(args.json, "--json")
    grid, runs, budget = load_campaign(args)
    names = file_columns(args)  # proposals in the user's column names (--map)
    config_columns = [names.get(c, c) for c in grid.configs.columns]
    wsd = args.cost_model == "wsd"  # the same columns and keys on every exit
    try:
        res = suggest_runs(grid, runs, budget, batch=args.batch,
                           retry_failed=args.retry_failed, schedule=args.schedule,
                           acquisition=args.acq, incumbent=args.incumbent,
                           clip_iqr=args.clip_iqr, seed=args.seed, cost_model=cost_model(args),
                           kernel=args.kernel, trend=args.trend,
                           shift_optimum=args.shift_optimum, anchor=args.anchor,
                           polish=args.polish)
    except BudgetExhausted as exc:  # exit 3, but a worker reading the JSON must see it too
        _write(args, {"suggestions": [], **exc.account, "message": str(exc),
                      "notes": list(runs.notes), "stop": True,
                      **({"wsd_runs": []} if wsd else {})})
        if args.format == "csv":  # the header alone: a reader sees zero proposals
            write_csv([], _columns(config_columns, wsd=wsd))
        for text in runs.notes:  # what the runs file says still matters when nothing fits
            note(text)
        raise
    log(f"{runs.counts()}; spent {res.spent:.4g} + pending {res.pending:.4g} of budget "
        f"{res.budget:.4g} {res.unit} ({res.budget / res.C_total:.4g} of the grid's total)")
    if res.anchor_cell is not None:
        n, d = res.anchor_cell
        log(f"held back {res.held_back:.4g} {res.unit} for the anchor run "
            f"({cell_text(n, d, names)}), proposed once nothing else fits (--anchor 0: none)")
    if res.anchor_dropped is not None:
        log(anchor_dropped_note(*res.anchor_dropped, names))
    for text in (*runs.notes, *res.notes):
        note(text)
    if res.message:
        note(res.message)
    rows = []
    for pick, (s, price) in enumerate(zip(res.suggestions, res.prices, strict=True)):
        row = {names.get(k, k): grid_value(v) for k, v in s.config.items()}
        if res.wsd_runs:  # which training run the row is a cooldown of
            row["wsd_run"] = res.run_numbers[pick]
        row.update(predicted_loss=s.predicted_mean, predicted_std=s.predicted_std,
                   cost=price, cap=s.cap if np.isfinite(s.cap) else None,
                   acquisition=s.acquisition_value, reason=s.reason)
        rows.append(row)
    nd = (names.get("N", "N"), names.get("D", "D"))
    result = {"suggestions": rows, "budget": res.budget, "spent": res.spent,
              "pending": res.pending, "remaining": res.remaining, "C_total": res.C_total,
              "unit": res.unit, "held_back": res.held_back,
              "anchor_cell": (None if res.anchor_cell is None else
                              dict(zip(nd, map(grid_value, res.anchor_cell), strict=True))),
              "anchor_dropped": (None if res.anchor_dropped is None else
                                 dict(zip(nd, map(grid_value, res.anchor_dropped),
                                          strict=True))),
              "message": res.message, "notes": [*runs.notes, *res.notes], "stop": False}
    if wsd:
        result["wsd_runs"] = [r.to_dict(names) for r in res.wsd_runs]
    _write(args, result)
    if args.format == "csv":
        write_csv(rows, _columns(config_columns, wsd=wsd))
    elif args.format == "table":
        cols = [c for c in rows[0] if c != "reason"]
        exact = [{**r, **{c: exact_number(r.get(c)) for c in config_columns}} for r in rows]
        print(format_table(exact, cols))
        for i, r in enumerate(rows):
            print(f"  {i + 1}. {r['reason']}")
        if res.wsd_runs:
            print()
            for run in res.wsd_runs:
                print(f"  {run.describe(names)}")
    return 0


def _columns(config: list[str], wsd: bool = False) -> list[str]:
    """The CSV header: the grid's configuration columns, then what each proposal adds
    (``wsd``: the number of the WSD run each row is a cooldown of)."""
    return [*config, *(["wsd_run"] if wsd else []), "predicted_loss", "predicted_std", "cost",
            "cap", "acquisition", "reason"]


def _write(args: argparse.Namespace, result: dict) -> None:
    """The JSON outputs: ``--json PATH`` (replaced atomically) and ``--format json``. Also
    on exit 3 (nothing left to propose: no suggestions, ``stop`` true, ``message`` why), so
    that a worker loop reading either never acts on the previous iteration's proposals."""
    if args.json:
        write_json_file(result, args.json)
        log(f"wrote {args.json}")
    if args.format == "json":
        write_json(result)
