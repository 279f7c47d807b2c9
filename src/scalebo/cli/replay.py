"""``scalebo replay``: replay a search strategy on a recorded grid and print its metrics.

Parsing and printing only: :func:`scalebo.bench.replay.replay` runs the search and
:func:`scalebo.bench.trace_plot.plot_trace` draws ``--plot``.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from scalebo.cli.arg_types import flops
from scalebo.cli.campaign_args import add_cost_model_arguments
from scalebo.cli.common import (
    add_format_argument,
    anchor_share,
    budget_bar,
    check_outputs,
    coupling_share,
    format_table,
    fraction,
    fractions,
    guard_ratio,
    int_at_least,
    log,
    note,
    polish_share,
    positive_float,
    write_csv,
    write_json,
    write_json_file,
)
from scalebo.cli.replay_tables import (
    failure_rows,
    interval_rows,
    metric_legend,
    metric_notes,
    untrusted_notes,
)

NAME = "replay"
HELP = "replay a budgeted search on a recorded grid and score the recovered law"
DESCRIPTION = """\
Replay a search strategy on a recorded grid: the recorded loss of each configuration is the
oracle, the 2 largest-compute (N, D) cells are held out (--held-out-cells), and the laws
refitted from what the search bought (and, with --fantasize, from observed +
surrogate-predicted losses) are compared with the reference fit on the whole acquirable grid:
compute spent, envelope and per-cell recovery, held-out MSE (nats^2) and the relative error
at each --target (default 1e25, 1e27 and 1e29 FLOPs; definitions: docs/records.md).
Budget: a fraction of C_total, the summed compute of the acquirable grid (FLOPs).
"""
EPILOG = """\
datasets (--dataset):
  steplaw, oellm_english,  recorded lr x bs grids (public datasets, --data-dir or
  steplaw_moe              $SCALEBO_DATA_DIR; steplaw_moe: N = active parameters)
  synthetic                built-in grid from a known law (no data needed)
  a run-table file         CSV/TSV/Parquet/JSON lines (--map as for 'scalebo fit'; --axes
                           default: numeric columns varying inside an (N, D) cell, not
                           derived from others or measured per run; printed)
  The other registered datasets, epoch_chinchilla, gadre_overtraining, gemstones and
  porian_isoflop, hold no hyperparameter grid to search; fit them with
  'scalebo fit dataset:NAME' (or 'scalebo fragility dataset:gemstones').
example: scalebo replay --dataset steplaw --budget 0.05 --seed 0 --json out.json --plot t.png
"""


#: Method options left unset (None) take ``MethodConfig``'s defaults (kept out of module
#: import so that ``scalebo --help`` does not load numpy).
_METHOD_OPTIONS = {"strategy": "strategy", "schedule": "schedule", "surrogate": "surrogate",
                   "kernel": "kernel", "trend": "trend", "acq": "acquisition",
                   "incumbent": "incumbent",
                   "fantasize": "fantasize", "estimator": "estimator",
                   "scope": "fantasize_scope", "batch": "q", "target_compute": "target_compute",
                   "target_law": "target_law", "cost_power": "cost_power",
                   "ei_cost_power": "ei_cost_power",
                   "target_samples": "target_samples", "target_every": "target_every",
                   "target_estimator": "target_estimator",
                   "posterior_samples": "posterior_samples",
                   "posterior_estimand": "posterior_estimand",
                   "posterior_scope": "posterior_scope",
                   "posterior_coupling": "posterior_coupling",
                   "bootstrap_samples": "bootstrap_samples", "cost_model": "cost_model",
                   "cooldown": "cooldown", "shift_optimum": "shift_optimum",
                   "anchor": "anchor", "polish": "polish",
                   "extrapolation_guard": "extrapolation_guard"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True,
                        help="grid to replay: steplaw, steplaw_moe, oellm_english, synthetic or "
                             "a run-table file (see 'datasets' below)")
    parser.add_argument("--map", default=None, metavar="CANON=COL,...",
                        help="column mapping for a file, e.g. N=params,D=tokens")
    parser.add_argument("--axes", default=None, metavar="COL,...",
                        help="hyperparameter axes of a file (default: numeric columns that "
                             "vary inside an (N, D) cell; a named column of names, e.g. an "
                             "optimizer, is a categorical axis)")
    parser.add_argument("--duplicates", choices=("error", "mean"), default="error",
                        help="repeated configurations in a file (same N, D and axes): fail "
                             "(default, as 'scalebo fit') or average their losses into one "
                             "oracle loss")
    parser.add_argument("--diverged-above", type=positive_float, default=None, metavar="LOSS",
                        help="a configuration whose recorded loss is at or above LOSS (nats) is a "
                             "diverged run: buying it spends its compute and teaches the "
                             "search no loss, as a failed run in a campaign (default: every "
                             "recorded loss is an outcome; a sentinel like 10 for diverged "
                             "runs then misleads the search)")
    parser.add_argument("--data-dir", default=None, help="public datasets folder "
                        "(default $SCALEBO_DATA_DIR)")
    parser.add_argument("--held-out-cells", type=int_at_least(0), default=2, metavar="K",
                        help="largest-compute (N, D) cells held out of the search and scored "
                             "by the held-out MSE (default 2)")
    parser.add_argument("--budget", type=fraction, default=0.05,
                        help="budget as a fraction of C_total, 0.05 or 5%% (default 0.05)")
    parser.add_argument("--record-budgets", type=fractions, default=[], metavar="F,...",
                        help="smaller budgets to record too, e.g. 0.01,0.05 or 1%%,5%%")
    parser.add_argument("--target", type=flops, action="append", default=None, metavar="C",
                        help="score the recovered law at this compute in FLOPs (repeatable; "
                             "default 1e25, 1e27 and 1e29); the smallest is the headline: "
                             "its intervals are printed. A grid of small models is better "
                             "judged a few decades past its largest run")
    parser.add_argument("--seed", type=int_at_least(0), default=0,
                        help="seed of the initial design, the surrogate and the samples "
                             "(default 0)")
    group = parser.add_argument_group("method (unset options take the library defaults, "
                                      "see scalebo.bench.replay.MethodConfig)")
    group.add_argument("--strategy", choices=("window", "full"),
                       help="window: candidates capped by a compute window that grows as the "
                            "budget is spent; full: the whole grid is a candidate at every step")
    group.add_argument("--schedule", choices=("sweep", "spent", "coverage"),
                       help="window schedule")
    group.add_argument("--surrogate", choices=("gp", "random", "trees"),
                       help="model of the loss: Gaussian process; random (a random order of "
                            "the admissible configurations); gradient-boosted trees (needs "
                            "pip install 'scalebo[trees]')")
    group.add_argument("--kernel", help="GP kernel (matern52, rbf, additive, mixed, transfer: "
                                        "hyperparameter effects carried across scales)")
    group.add_argument("--trend", action="store_const", const=True, default=None,
                       help="give the GP a linear mean in log N and log D, as suggest --trend")
    group.add_argument("--shift-optimum", action=argparse.BooleanOptionalAction, default=None,
                       help="the GP sees hyperparameters relative to an optimum fitted to move "
                            "with N and D (default since 0.3.7; --no-shift-optimum: as they "
                            "are)")
    group.add_argument("--anchor", type=anchor_share, default=None, metavar="SHARE",
                       help="hold back one run of the costliest cell costing at most SHARE of "
                            "the budget, trained once nothing else fits (default 0.7 since "
                            "0.3.8; 0: none); a smaller recorded budget forks from the long run "
                            "where its choices differ (its own run with --batch > 1)")
    group.add_argument("--polish", type=polish_share, default=None, metavar="SHARE",
                       help="once all but SHARE of the budget is committed, train untried "
                            "neighbours (one step along one hyperparameter) of the best runs "
                            "of the loss envelope's cells first, by compute^2 / runs (default 0.2 "
                            "since 0.4.0; 0: none)")
    group.add_argument("--extrapolation-guard", type=guard_ratio, default=None,
                       metavar="RATIO",
                       help="the fill-in and the law posterior leave out an untried "
                            "configuration whose posterior std exceeds RATIO x that of its "
                            "cell's most certain one (default 5 since 0.3.9; 0: off)")
    group.add_argument("--acq", choices=("ei", "pi", "lcb", "target"),
                       help="acquisition; 'target': the run that most reduces the law "
                            "posterior's variance at --target-compute per cost^--cost-power")
    group.add_argument("--incumbent", choices=("envelope", "frontier", "global"),
                       help="improvement over the lower of the candidate cell's best loss and "
                            "the envelope at its compute (envelope, default), over the cell's "
                            "best loss (frontier) or over the best loss overall (global)")
    group.add_argument("--ei-cost-power", type=float, metavar="GAMMA",
                       help="EI and PI per cost^GAMMA: score = log EI - GAMMA*log(cost/C_total)"
                            " (default 1: per FLOP; 0: cost-blind)")
    group.add_argument("--fantasize", action=argparse.BooleanOptionalAction, default=None,
                       help="also score observed + surrogate-predicted losses")
    group.add_argument("--estimator", choices=("mean", "cell_best"),
                       help="fantasized cell loss: posterior mean or expected cell minimum")
    group.add_argument("--scope", choices=("window", "observed", "grid"),
                       help="fantasization scope: the final window (default), up to the "
                            "costliest observed cell, or the whole grid")
    group.add_argument("--batch", type=int_at_least(1), help="configurations per ask (q)")
    group.add_argument("--posterior-samples", type=int_at_least(0), metavar="S",
                       help="samples of the law posterior at every recorded budget (default "
                            "64; 0: none)")
    group.add_argument("--posterior-scope", choices=("grid", "fantasize"),
                       help="which untrained configurations the law posterior samples: every "
                            "acquirable one (default grid), or only the fill-in's scope "
                            "(--scope; the default until 0.3.2)")
    group.add_argument("--posterior-coupling", type=coupling_share, metavar="RHO",
                       help="share of their sampled deviation that an (N, D) cell's untried "
                            "configurations hold in common in the law posterior (default "
                            "0.85 since 0.4.4; 0: independent GP draws, as before)")
    group.add_argument("--posterior-estimand", choices=("reference", "noise_free"),
                       help="what the law posterior is about: the law of the whole grid's "
                            "recorded runs, which the replay scores against (default "
                            "reference), or the noise-free law (trained runs redrawn from "
                            "the GP's latent posterior)")
    group.add_argument("--bootstrap-samples", type=int_at_least(0), metavar="B",
                       help="also a bootstrap over the observed runs, for comparison "
                            "(default 0: none)")
    add_cost_model_arguments(group)
    target = parser.add_argument_group("target acquisition (--acq target)")
    target.add_argument("--target-compute", type=float, metavar="FLOPS",
                        help="compute whose law prediction is sharpened (default 1e25, "
                             "whatever --target says: a note tells when they differ)")
    target.add_argument("--target-law", choices=("compute", "chinchilla"),
                        help="law of the target prediction (default compute: L(C) on the "
                             "envelope)")
    target.add_argument("--cost-power", type=float, metavar="GAMMA",
                        help="score = log(variance reduction) - GAMMA*log(cost/C_total); "
                             "0: cost-blind, 1: per FLOP (default 0.5, the best over StepLaw "
                             "and OELLM-English, docs/reproduction.md)")
    target.add_argument("--target-samples", type=int_at_least(8), metavar="S",
                        help="posterior samples (law fits) per ensemble")
    target.add_argument("--target-every", type=int_at_least(1), metavar="K",
                        help="rebuild the ensemble every K asks (square-root updates between)")
    target.add_argument("--target-estimator", choices=("stein", "ensemble"),
                        help="covariance of target and candidate: exact GP covariance times "
                             "the law's expected sensitivities (stein) or sample covariance")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the full record")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="plot the acquisition trace (compute vs order, cap; C vs loss)")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> int:
    from scalebo.bench.problems import REGISTERED, load_problem
    from scalebo.bench.replay import (
        MethodConfig,
        envelope_out_of_reach,
        replay,
        unaffordable_budgets,
    )
    from scalebo.data.runs import parse_mapping
    from scalebo.errors import EXCLUDED_IN_PYTHON
    from scalebo.extras import require_extra

    axes = None if args.axes is None else [a.strip() for a in args.axes.split(",") if a.strip()]
    mapping = parse_mapping(args.map) if args.map else None
    if not (0 < args.budget <= 1):
        raise ValueError(f"--budget must be a fraction of C_total in (0, 1], got {args.budget}")
    if bad := [b for b in args.record_budgets if b > args.budget]:
        raise ValueError(f"--record-budgets {','.join(f'{b:g}' for b in bad)}: a budget "
                         f"recorded on the way must be at most --budget {args.budget:g}")
    method = MethodConfig(**{field: getattr(args, option)
                             for option, field in _METHOD_OPTIONS.items()
                             if getattr(args, option) is not None})
    if method.surrogate == "trees":  # before the dataset and its reference fit load
        require_extra("trees", "--surrogate trees")
    check_outputs(args)
    log(f"loading {args.dataset} and its reference fit ...")
    with warnings.catch_warnings(record=True) as caught:  # kept in the notes, printed below
        warnings.simplefilter("always")
        try:
            problem = load_problem(args.dataset, mapping=mapping, axes=axes,
                                   n_held_out_cells=args.held_out_cells, data_dir=args.data_dir,
                                   duplicates=args.duplicates, diverged_above=args.diverged_above,
                                   targets=args.target)
        except Exception:  # no problem, so no notes: what loading said may be why it failed
            for text in dict.fromkeys(str(w.message) for w in caught):
                note(text.replace(EXCLUDED_IN_PYTHON, ""))
            raise
    for text in problem.notes:
        note(text)
    if method.acquisition == "target" and method.target_compute not in problem.targets:
        note(f"--acq target sharpens the law's prediction at {method.target_compute:g} FLOPs "
             "(--target-compute), a compute the replay is not scored at (--target): give "
             f"--target-compute {min(problem.targets)!r} to aim it at the headline target")
    summary = problem.summary()
    if axes is None and args.dataset.removeprefix("dataset:") not in REGISTERED:
        # a file's axes are a guess from its columns: say which
        note(f"hyperparameter axes: {', '.join(problem.grid.axes) or 'none'} (inferred from "
            "the columns that vary inside an (N, D) cell, not derived or measured; --axes to "
            "choose)")
    held = [f"(N={c['N']:.4g}, D={c['D']:.4g})" for c in summary["held_out_cells"]]
    if held:
        tie = summary["held_out_tie"]
        grid = problem.grid
        share = grid.held_out_share
        note(f"held out of the search, scored by heldout_mse: {', '.join(held)}"
            + (f" ({tie})" if tie else "") + f"; they hold {100 * share:.3g} % of the grid's "
            f"compute, and budgets are fractions of the rest, C_total = {grid.C_total:.4g} "
            "FLOPs" + (" (a large share: the search and the reference law never see the "
                       "grid's costliest runs; --held-out-cells 0 keeps them)"
                       if share > HELD_OUT_SHARE else ""))
    for law in ("compute", "chinchilla"):
        ref = summary[f"reference_{law}"]
        if ref is not None:
            params = ", ".join(f"{k}={v:.4g}" for k, v in ref["params"].items())
            log(f"reference {law} law (the whole acquirable grid): {params} ({ref['status']})")
    from scalebo.bench.reference_spread import reference_frontier_note, reference_spread
    from scalebo.bench.targets import headline

    spread = reference_spread(problem, headline(problem.targets))
    if spread is not None:
        note(spread.describe())
        summary = {**summary, "reference_spread": spread.to_dict()}
    if text := reference_frontier_note(problem, headline(problem.targets)):
        note(text)
        summary = {**summary, "notes": [*summary["notes"], text]}  # kept with the record
    records = list(args.record_budgets)
    log(f"replaying {method.label()} to {args.budget:g} of C_total, seed {args.seed} ...")
    with budget_bar(f"replay seed {args.seed}") as progress:
        rec = replay(problem, method, args.budget, args.seed, record_budgets=records,
                     progress=progress)
    for message in [*unaffordable_budgets(rec, problem), *envelope_out_of_reach(rec, problem)]:
        warnings.warn(message, stacklevel=1)
    data = rec.to_dict()
    data["problem"] = summary
    if args.json:
        write_json_file(data, args.json)
        log(f"wrote {args.json}")
    if args.plot:
        from scalebo.bench.trace_plot import plot_trace

        plot_trace(rec, problem, args.plot)
        log(f"wrote {args.plot}")
    if args.format == "json":
        write_json(data)
    elif args.format == "csv":  # one table: the metric rows, then the interval rows
        rows = _csv_rows(rec, problem.targets)
        write_csv(rows, list(dict.fromkeys(k for r in rows for k in r)) or ["budget"])
    else:
        print(_table(rec, problem.targets))
    return 0


#: Share of the grid's compute in held-out cells above which ``replay`` says it is large.
HELD_OUT_SHARE = 0.25


def _metric_rows(rec: Any, targets: tuple[float, ...]) -> list[dict]:
    """One row per budget × source (observed, fantasized) × law; ``|d|%`` at each target."""
    from scalebo.bench.metrics import c_key
    from scalebo.fitting.identifiability import EXACT_FIT, UNCHECKED_TERM

    rows = []
    for m in rec.metrics:
        for source, laws in (("observed", m.observed), ("fantasized", m.fantasized)):
            for name, lm in (laws or {}).items():
                said = (lm.message or "") if lm.params is not None else ""
                status = (f"{lm.status}, exact" if EXACT_FIT in said else
                          f"{lm.status}, shape unchecked" if UNCHECKED_TERM in said else lm.status)
                row = {"budget": m.budget, "source": source, "law": name, "status": status,
                       "runs": m.n_runs + m.n_failed, "spent": m.spent_fraction,
                       "x_floor": m.floor_multiple_cells, "env_%": m.envelope_recovery_pct,
                       "cell_%": m.cell_recovery_pct, "heldout_mse": lm.heldout_mse}
                for c in targets:
                    v = lm.abs_extrapolation(c)
                    row[f"|d|%@{c_key(c)}"] = v
                rows.append(row)
    return rows


def _csv_rows(rec: Any, targets: tuple[float, ...]) -> list[dict]:
    """The text output's three tables as one: metric rows with each fit's message (why there
    is no estimate), then the law intervals at the headline target (``source`` posterior or
    bootstrap) and the law posteriors not drawn (``source`` posterior, ``message``)."""
    messages = {(m.budget, source, name): lm.message
                for m in rec.metrics
                for source, laws in (("observed", m.observed), ("fantasized", m.fantasized))
                for name, lm in (laws or {}).items()}
    rows = [{**r, "message": messages.get((r["budget"], r["source"], r["law"]), "")}
            for r in _metric_rows(rec, targets)]
    rows += interval_rows(rec)
    rows += [{"budget": r["budget"], "source": r["source"], "law": r["law"],
              "message": r["reason"]} for r in failure_rows(rec)
             if r["source"] == "posterior" or (r["source"] == "fantasized" and r["law"] == "-")]
    return rows


def _table(rec: Any, targets: tuple[float, ...]) -> str:
    from scalebo.bench.metrics import c_key
    from scalebo.bench.targets import shown_key

    rows = _metric_rows(rec, targets)
    cols = list(rows[0]) if rows else []
    head = (f"{rec.dataset}: {rec.method.label()}, seed {rec.seed}; "
            f"{rec.timings['total']:.1f} s\n")
    out = head + format_table(rows, cols) + "\n" + metric_legend(rows)
    out += "".join("\n" + n for n in metric_notes(rec))
    why = failure_rows(rec)
    if why:
        out += ("\n\nwhy there is no estimate (fits that failed, law posteriors not drawn)\n"
                + format_table(why, list(why[0])))
    intervals = interval_rows(rec)
    if intervals:
        at = shown_key(c_key(min(targets)))
        out += (f"\n\nlaw intervals at {at} FLOPs (loss, nats; source: posterior = the law "
                "posterior, fits to draws of the untried configurations, bootstrap = fits to "
                "resamples of the runs trained; covers: whether the full-grid "
                "reference is inside the 80 % / 95 % interval; fits: sample fits that failed or "
                "ended at a parameter bound)\n"
                + format_table(intervals, list(intervals[0])))
        out += "".join("\n" + n for n in untrusted_notes(rec))
    return out
