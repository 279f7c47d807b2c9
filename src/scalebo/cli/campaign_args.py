"""Options shared by the campaign commands (``suggest``, ``status``): parsing only."""

from __future__ import annotations

import argparse
import warnings

from scalebo.cli.common import (
    anchor_share,
    int_at_least,
    non_negative_float,
    polish_share,
    positive_float,
)

GRID_HELP = ("GRID: a YAML axis product ('axes: {N: [...], D: [...], lr: [...]}', optional "
             "'held_out_cells', default none for a campaign) or a table of candidate "
             "configurations (a column of which at least half the values are numbers is "
             "numeric, a non-number in it is an error; a mostly-text column is "
             "categorical). RUNS: the campaign's runs (the grid's columns, loss in nats, "
             "optional status completed|failed|running and cost); a NaN or missing loss is a "
             "failed run, whose cost counts as spent. A grid table with a 'cost' column "
             "(GPU-hours per configuration) budgets in GPU-hours: --budget 500GPUh or a "
             "fraction of its total; the runs' cost is then in GPU-hours too.")


def add_campaign_arguments(parser: argparse.ArgumentParser, *, budget_required: bool) -> None:
    """``--grid``, ``--runs``, ``--pending``, ``--map``, ``--budget``, ``--diverged-above``,
    ``--seed``, ``--schedule``, ``--clip-iqr``, ``--kernel``, ``--trend``,
    ``--no-shift-optimum`` and the cost model."""
    group = parser.add_argument_group("campaign")
    group.add_argument("--grid", required=True, help="YAML axes or a table of configurations")
    group.add_argument("--runs", default=None,
                       help="table of the campaign's runs (omit it before the first run)")
    group.add_argument("--pending", default=None, metavar="PATH",
                       help="table of further configurations in flight (the grid's columns; "
                            "as status running in RUNS): their compute counts as pending and "
                            "they are not proposed again")
    group.add_argument("--map", default=None, metavar="CANON=COL,...",
                       help="column mapping for the tables, e.g. N=params,D=tokens")
    group.add_argument("--budget", required=budget_required, default=None,
                       help="total budget: a fraction of the grid's total (C_total, its summed "
                            "compute), e.g. 0.05, an amount of compute, e.g. 2e21FLOPs, or "
                            "GPU-hours for a grid with a cost column, e.g. 500GPUh")
    group.add_argument("--diverged-above", type=positive_float, default=None, metavar="LOSS",
                       help="a loss (nats) at or above this counts as a failed (diverged) run")
    group.add_argument("--schedule", choices=("sweep", "spent", "coverage", "full"),
                       default="spent", help="compute window of the search's suggestions "
                       "(default spent; the status's law posterior covers the whole grid)")
    group.add_argument("--clip-iqr", type=non_negative_float, default=5.0,
                       help="the GP sees losses clipped at median + K x IQR of the completed "
                            "runs, which limits a diverged run's pull on it but does not remove "
                            "it: record such runs as failed or use --diverged-above "
                            "(default 5; 0: off)")
    group.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the GP and samples "
                       "(default 0)")
    group.add_argument("--kernel", choices=("matern52", "transfer"), default="matern52",
                       help="GP kernel: matern52 (the replayed default; far from every run "
                            "it predicts the runs' mean) or transfer (also carries each "
                            "hyperparameter's effect to scales with no run)")
    group.add_argument("--trend", action="store_true",
                       help="give the GP a linear mean in log N and log D, so predictions "
                            "far from the runs follow the scale")
    group.add_argument("--no-shift-optimum", dest="shift_optimum", action="store_false",
                       help="the GP sees hyperparameters as they are, not relative to an "
                            "optimum fitted to move with N and D (the default since 0.3.7, "
                            "as in replays)")
    group.add_argument("--anchor", type=anchor_share, default=0.7, metavar="SHARE",
                       help="hold back one run of the costliest cell costing at most SHARE of "
                            "the budget, and suggest it once nothing else fits, so the law "
                            "gets the largest scale the budget affords, unless a run no dearer "
                            "already beats that cell's prediction by 1 SD (default 0.7, as in "
                            "replays; 0: no anchor run)")
    group.add_argument("--polish", type=polish_share, default=0.2, metavar="SHARE",
                       help="once all but SHARE of the budget is committed, suggest untried "
                            "neighbours (one step along one hyperparameter) of the best runs "
                            "of the loss envelope's cells first, by compute^2 / runs (default 0.2, "
                            "as in replays; 0: none)")
    add_cost_model_arguments(group)


def add_cost_model_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup
                             ) -> None:
    """``--cost-model independent|wsd`` and ``--cooldown F``."""
    parser.add_argument("--cost-model", choices=("independent", "wsd"), default=None,
                        help="independent runs (6*N*D each, default) or wsd: configurations "
                             "that differ only in D share one warmup-stable-decay run, each "
                             "checkpoint paying its cooldown")
    parser.add_argument("--cooldown", type=float, default=None, metavar="F",
                        help="wsd cooldown as a fraction of a checkpoint's tokens "
                             "(default 0.1)")


def cost_model(args: argparse.Namespace):
    """The :class:`~scalebo.search.cost_model.CostModel` of the parsed options."""
    from scalebo.search.cost_model import CostModel

    if args.cooldown is not None and args.cost_model != "wsd":
        raise ValueError("--cooldown applies to --cost-model wsd")
    return CostModel(args.cost_model or "independent",
                     0.1 if args.cooldown is None else args.cooldown)


def load_campaign(args: argparse.Namespace):
    """``(grid, runs, budget)`` from the parsed campaign options (budget in the grid's unit:
    FLOPs, or GPU-hours for a grid with a cost column; None without --budget); the runs
    include those of --pending (running)."""
    from scalebo.data.runs import parse_mapping
    from scalebo.search.campaign import campaign_grid, parse_budget
    from scalebo.search.campaign_runs import read_campaign_runs, read_pending_runs

    mapping = parse_mapping(args.map) if args.map else None
    budget = parse_budget(args.budget) if args.budget is not None else None
    grid = campaign_grid(args.grid, mapping)
    runs = read_campaign_runs(args.runs, grid, mapping=mapping,
                              diverged_above=args.diverged_above)
    if args.pending:
        runs = runs.with_running(read_pending_runs(args.pending, grid, mapping=mapping),
                                 grid=grid)
    amount = budget.resolve(grid) if budget is not None else None
    if getattr(args, "cost_model", None) == "wsd":
        from dataclasses import replace

        import numpy as np

        from scalebo.search.wsd_runs import wsd_cost_notes

        model = cost_model(args)
        runs = replace(runs, notes=runs.notes + wsd_cost_notes(runs, grid, model.cooldown))
        whole = model.total(grid, ~np.asarray(grid.held_out, dtype=bool), priced=True)
        if amount is not None and whole < amount <= grid.budget_total * (1 + 1e-9):
            said = str(budget)  # as written; in the grid's unit when it is a fraction
            said += "" if said.endswith(grid.price_unit) else f" ({amount:.4g} {grid.price_unit})"
            warnings.warn(f"the budget {said} is more than "
                          f"training the whole grid costs under --cost-model wsd ({whole:.4g}, "
                          f"{whole / grid.budget_total:.3g} of the grid's total of independent "
                          "runs, which fractions refer to): every configuration fits",
                          UserWarning, stacklevel=2)
    return grid, runs, amount


def file_columns(args: argparse.Namespace) -> dict[str, str]:
    """``{canonical name: the user's column}`` for each column ``--map`` renames, so that what
    a command writes back (proposals a worker appends to its runs file) uses the user's
    names."""
    from scalebo.data.runs import parse_mapping

    mapping = parse_mapping(args.map) if args.map else {}
    return {k: v for k, v in mapping.items() if k != v}


def cell_text(n: float, d: float, names: dict[str, str] | None = None) -> str:
    """An (N, D) cell as the commands write it, in the user's ``--map`` names
    (:func:`file_columns`): ``params 1e+08, tokens 2e+09``."""
    names = names or {}
    return f"{names.get('N', 'N')} {n:.4g}, {names.get('D', 'D')} {d:.4g}"


def anchor_dropped_note(n: float, d: float, names: dict[str, str] | None = None) -> str:
    """What ``suggest`` and ``status`` say when the anchor run is dropped (N parameters, D
    tokens of its cell; ``names``: the user's column names)."""
    return (f"the anchor run ({cell_text(n, d, names)}) is dropped: a run costing no more already "
            "has a lower loss than that cell's lowest predicted loss minus one SD, so what it "
            "held back is searched as usual (--anchor 0: no anchor run)")
