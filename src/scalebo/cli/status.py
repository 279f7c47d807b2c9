"""``scalebo status``: how sure the campaign's law is, what is spent, and whether to stop."""

from __future__ import annotations

import argparse
import sys
from typing import Any

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
    check_outputs,
    coupling_share,
    exact_number,
    flops,
    format_number,
    format_table,
    grid_value,
    int_at_least,
    log,
    note,
    positive_float,
    tolerance,
    write_csv,
    write_json,
    write_json_file,
)

NAME = "status"
HELP = "a campaign's law with its intervals, the compute spent, and whether to stop"
DESCRIPTION = """\
Fit the compute law L(C) = E + A/C^alpha on the campaign's observed and fantasized losses,
with 80 % and 95 % intervals from the law posterior (joint GP samples of the untrained
configurations, one law fit each; with --estimand noise_free of the trained ones too), the
compute-optimal N* and D* (Chinchilla law), the compute spent, pending and remaining, and
the stop rule: stop once the 80 % interval at every target is within +-tolerance (and stays
so over 200 resamples of its posterior draws, 90th percentile: else "not surely", and more
--samples settle it), or when the budget is gone. Runs in flight (status running in RUNS, or
listed in --pending) count as pending compute and are not among the next runs proposed. With
--estimand noise_free the interval keeps the noise of the trained runs; then the status also
shows its noise floor (the half-width training every untried configuration could reach) and
the rule stops at it too: when training everything left would narrow the interval by less
than --min-shrink.
""" + GRID_HELP
EPILOG = ("example: scalebo status --grid grid.yaml --runs runs.csv --budget 0.05 "
          "--target 1e24 --target 1e25 --plot status.png")
CSV_COLUMNS = ("C", "prediction", "median", "low_80", "high_80", "low_95", "high_95",
               "half_width_pct", "floor_half_width_pct", "N_opt", "N_opt_low_80",
               "N_opt_high_80", "D_opt", "D_opt_low_80", "D_opt_high_80", "estimand", "stop",
               "reason", "budget", "spent", "pending", "remaining", "unit", "law_status", "E",
               "A", "alpha", "n_completed", "n_failed", "n_running", "n_retried")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_campaign_arguments(parser, budget_required=True)
    group = parser.add_argument_group("status")
    group.add_argument("--target", type=flops, action="append", default=None,
                       metavar="C", help="target compute in FLOPs (repeatable; default 1e25)")
    group.add_argument("--tolerance", type=tolerance, default=0.005, metavar="FRACTION",
                       help="stop when the 80 %% interval is within +-this fraction of its "
                            "median at every target (half its width over the posterior "
                            "median): 0.005 (the default) or 0.5%% is +-0.5 %%; 0.5 would be "
                            "+-50 %% (a warning from 0.2 up)")
    group.add_argument("--samples", type=int_at_least(8), default=64,
                       help="law-posterior samples, at least 8 (default 64)")
    group.add_argument("--estimand", choices=("reference", "noise_free"), default="reference",
                       help="what the intervals are about: the law a fit on the whole grid "
                            "of recorded runs would give (reference; 0 wide once the "
                            "envelope's runs are trained) or the noise-free law (noise_free: "
                            "keeps the run-to-run noise of the trained runs, and fits the "
                            "point law on the GP's noise-free means of trained runs too, so "
                            "'loss (fit)' moves as well; default reference)")
    group.add_argument("--min-shrink", type=positive_float, default=0.2, metavar="F",
                       help="with --estimand noise_free, also stop when training every "
                            "untried configuration would narrow the 80 %% interval by less "
                            "than this fraction, in (0, 1) (default 0.2; ignored with "
                            "--estimand reference)")
    group.add_argument("--posterior-coupling", type=coupling_share, default=0.85, metavar="RHO",
                       help="share of their sampled deviation that an (N, D) cell's untried "
                            "configurations hold in common in the law posterior (default "
                            "0.85, as in replays; 0: independent GP draws)")
    group.add_argument("--next", type=int_at_least(0), default=4, metavar="K",
                       help="also propose the next K runs (as scalebo suggest --batch K) for "
                            "the JSON and the figure; 0: none (default 4)")
    group.add_argument("--plot", default=None, metavar="PATH",
                       help="draw runs, envelope, law with its bands, failed, running and "
                            "the next proposed runs")
    group.add_argument("--json", default=None, metavar="PATH", help="also write JSON to PATH")
    add_format_argument(parser)


def _interval(iv: list[float] | None) -> str:
    return "-" if iv is None else f"[{format_number(iv[0], 4)}, {format_number(iv[1], 4)}]"


def _median(value: float | None, iv: list[float] | None) -> str:
    """``"2.7e+09 (2.4e+09–3e+09)"``: a median with its 80 % interval, or "-"."""
    if value is None:
        return "-"
    return format_number(value, 3) + ("" if iv is None else
                                      f" ({format_number(iv[0], 2)}–{format_number(iv[1], 2)})")


def _shaky(law: dict[str, Any]) -> str:
    """`` (<status>: why)`` after a law whose fit is not ``converged``: the parameters the fit
    left at a bound, or that the runs do not identify it."""
    from scalebo.search.stopping import at_limit

    at_bound = law.get("at_bound") or ()
    if at_bound:
        why = f": {at_limit(at_bound)}"
    elif law.get("status") == "unidentified":
        why = ": not identified by these runs"
    else:
        why = ""
    return f" ({law['status']}{why})"


def _csv_row(t: Any, status: Any) -> dict[str, Any]:
    """One target's CSV row (:data:`CSV_COLUMNS`; an interval's ends empty without it); the
    campaign's stop decision, its reason, its budget account, the compute law's status and
    parameters (E nats, A, alpha; C in FLOPs) and its run counts repeat on every row."""
    low_80, high_80 = t.interval_80 or (None, None)
    low_95, high_95 = t.interval_95 or (None, None)
    n_low, n_high = t.N_opt_80 or (None, None)
    d_low, d_high = t.D_opt_80 or (None, None)
    return {"C": t.C, "prediction": t.prediction, "median": t.median, "low_80": low_80,
            "high_80": high_80,
            "low_95": low_95, "high_95": high_95, "half_width_pct": t.half_width_pct,
            "floor_half_width_pct": t.floor_half_width_pct, "N_opt": t.N_opt,
            "N_opt_low_80": n_low, "N_opt_high_80": n_high, "D_opt": t.D_opt,
            "D_opt_low_80": d_low, "D_opt_high_80": d_high, "estimand": status.estimand,
            "stop": status.stop, "reason": status.reason, "budget": status.budget,
            "spent": status.spent, "pending": status.pending, "remaining": status.remaining,
            "unit": status.unit, "law_status": status.law.get("status"),
            **{k: (status.law.get("params") or {}).get(k) for k in ("E", "A", "alpha")},
            "n_completed": status.n_completed, "n_failed": status.n_failed,
            "n_running": status.n_running, "n_retried": status.n_retried}


def run(args: argparse.Namespace) -> int:
    """Parse, call :func:`scalebo.search.status.campaign_status`, print."""
    from scalebo.search.status import campaign_status
    from scalebo.search.stopping import check_min_shrink

    check_outputs(args)
    check_min_shrink(args.min_shrink, "--min-shrink")
    grid, runs, budget = load_campaign(args)
    log(f"{runs.n_runs} runs ({runs.counts()}); law posterior with {args.samples} samples ...")
    status = campaign_status(grid, runs, budget, targets=tuple(args.target or (1e25,)),
                             tolerance=args.tolerance, n_samples=args.samples,
                             clip_iqr=args.clip_iqr, seed=args.seed,
                             cost_model=cost_model(args), kernel=args.kernel, trend=args.trend,
                             shift_optimum=args.shift_optimum, estimand=args.estimand,
                             min_shrink=args.min_shrink,
                             cell_coupling=args.posterior_coupling)
    result = status.to_dict()
    proposed, prices, numbers = [], (), ()
    names = file_columns(args)  # what is written back is in the user's names, as suggest's
    if args.cost_model == "wsd":  # the key on every exit, as suggest's JSON has it
        result["wsd_runs"] = []
    if args.next > 0 and not status.stop:
        from scalebo.errors import SearchError
        from scalebo.search.campaign import suggest_runs

        try:
            res = suggest_runs(grid, runs, budget, batch=args.next, schedule=args.schedule,
                               clip_iqr=args.clip_iqr, seed=args.seed,
                               cost_model=cost_model(args), kernel=args.kernel,
                               trend=args.trend, shift_optimum=args.shift_optimum,
                               anchor=args.anchor, polish=args.polish)
            proposed, prices = res.suggestions, res.prices
            numbers = res.run_numbers if res.wsd_runs else ()
            if res.wsd_runs:  # as suggest's JSON: the training runs the rows make up
                result["wsd_runs"] = [r.to_dict(names) for r in res.wsd_runs]
            if res.anchor_cell is not None:
                result["held_back"] = res.held_back
                result["anchor_cell"] = dict(zip((names.get("N", "N"), names.get("D", "D")),
                                                 map(grid_value, res.anchor_cell), strict=True))
                note(f"the next runs hold back {res.held_back:.4g} {res.unit} for the "
                     f"anchor run ({cell_text(*res.anchor_cell, names)})")
            if res.anchor_dropped is not None:
                note(anchor_dropped_note(*res.anchor_dropped, names))
            for text in (*res.notes, *([res.message] if res.message else [])):
                if text not in status.notes:  # the accounting note is in both
                    note(text)  # settings that only failed; why fewer than --next
        except SearchError as exc:
            note(f"no next runs: {exc}")
    result["next"] = [{**{names.get(k, k): grid_value(v) for k, v in s.config.items()},
                       **({"wsd_run": numbers[i]} if numbers else {}),
                       "predicted_loss": s.predicted_mean, "cost": p, "reason": s.reason}
                      for i, (s, p) in enumerate(zip(proposed, prices, strict=True))]
    if args.plot:
        from scalebo.search.status_plot import plot_status

        plot_status(grid, runs, status, args.plot,
                    posterior=status.law_posteriors.get("compute"), proposed=proposed)
        log(f"wrote {args.plot}")
    if args.json:
        write_json_file(result, args.json)
        log(f"wrote {args.json}")
    rows = [{"C": t.C, "prediction": t.prediction, "median": t.median,
             "interval_80": _interval(t.interval_80),
             "interval_95": _interval(t.interval_95), "half_width_pct": t.half_width_pct,
             "N_opt": _median(t.N_opt, t.N_opt_80), "D_opt": _median(t.D_opt, t.D_opt_80)}
            for t in status.targets]
    headers = ["C", "loss (fit)", "median", "80 %", "95 %", "±80 % of median (%)",
               "N* median (80 %)", "D* median (80 %)"]
    if status.noise_floor is not None:  # noise-free intervals: their floor beside the width
        for row, t in zip(rows, status.targets, strict=True):
            row["floor"] = t.floor_half_width_pct
        headers.append("floor ±% (all trained)")
    if args.format == "json":
        write_json(result)
    elif args.format == "csv":
        write_csv([_csv_row(t, status) for t in status.targets], CSV_COLUMNS)
        for text in status.notes:  # the table prints them; a CSV has no room for them
            note(text)
    else:
        law = status.law
        params = ", ".join(f"{k} {format_number(v)}" for k, v in (law.get("params") or {}).items())
        shaky = law.get("status") not in (None, "converged")
        out = [f"law         {law['formula']}: {params or law.get('message', '-')}"
               + (_shaky(law) if shaky else ""),
               f"runs        {status.n_completed} completed, {status.n_failed} failed, "
               f"{status.n_running} running" + (
                   f"; {status.n_retried} failed attempt{'s' if status.n_retried > 1 else ''} "
                   "retried (compute counted as spent)" if status.n_retried else ""),
               f"budget      spent {status.spent:.4g} {status.unit}, pending "
               f"{status.pending:.4g}, remaining {status.remaining:.4g} of budget "
               f"{status.budget:.4g} (% of the grid's total {status.C_total:.4g}: spent "
               f"{result['spent_fraction']:.3%}, pending {result['pending_fraction']:.3%}, "
               f"remaining {result['remaining_fraction']:.3%})",
               "", "predictions (C in FLOPs, loss in nats, N* parameters, D* tokens; "
               + ("intervals of the noise-free law)" if status.estimand == "noise_free"
                  else "intervals of the law the whole grid's recorded runs would give)"),
               format_table(rows, list(rows[0]), headers).rstrip("\n"),
               "", f"{'STOP' if status.stop else 'continue'}: {status.reason}"]
        out += [f"next {i + 1}: "
                + ", ".join(f"{names.get(k, k)} {exact_number(v)}" for k, v in s.config.items())
                + f" ({s.reason})" for i, s in enumerate(proposed)]
        sys.stdout.write("\n".join(out) + "\n")
        for text in status.notes:  # on stderr, as every command's notes (README)
            note(text)
    return 0
