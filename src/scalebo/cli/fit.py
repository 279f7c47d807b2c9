"""``scalebo fit``: fit a scaling law to a run table, with intervals and predictions.

Pipeline: load runs → choose the points to fit (a frontier, or all runs) → multi-start Huber
fit (:func:`scalebo.fitting.robust.fit_law`) → optional bootstrap over the fitted points
(:func:`scalebo.fitting.bootstrap.bootstrap_fit`, one batched call) → predictions at ``--predict``
compute budgets → table / JSON / CSV on stdout, ``--json`` file, ``--plot`` figure.

Default points (``--frontier``):

* ``compute`` law ``L(C)``: the Pareto **envelope** of (C, loss) — the best loss reached at each
  compute, which is what ``L(C)`` describes;
* laws in ``N`` and ``D`` (``chinchilla``, ``powerlaw:N,D``): the best run of each (N, D)
  **cell**. ``L(N, D)`` describes the loss of a well-tuned model at every (N, D), not only at
  the compute-optimal one, so every cell is informative; keeping only the best run per cell
  drops badly tuned hyperparameters. With one run per cell (e.g. Epoch's Chinchilla points)
  this is the same as ``all`` (Hoffmann et al.'s approach 3);
* other laws: **all** runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from scalebo.cli.collect import collect_warnings
from scalebo.cli.common import (
    add_format_argument,
    add_input_arguments,
    check_outputs,
    emit_result,
    flops,
    input_epilog,
    int_at_least,
    level,
    load_input,
    log,
    positive_float,
    warn_few_resamples,
)
from scalebo.cli.fit_output import (
    CSV_COLUMNS,
    FORMULA_CSV_COLUMNS,
    csv_rows,
    render_formula_table,
    render_table,
    write_fit_csv,
)
from scalebo.fitting.defaults import DEFAULT_HUBER_DELTA

# The numerical library (numpy, pandas, scipy) is imported inside the functions that use it,
# so that ``scalebo --help`` does not load it.

NAME = "fit"
HELP = "fit a scaling law (compute, chinchilla, ...) with bootstrap intervals and predictions"
DESCRIPTION = """\
Fit a scaling law to a table of training runs, robustly (Huber loss on natural-log
residuals, summed, L-BFGS from a grid of starts), with percentile intervals from a bootstrap
over the fitted runs and predictions at larger compute.

laws (--law):
  compute       L(C) = E + A/C^alpha                      C in FLOPs
  chinchilla    L(N, D) = E + A/N^alpha + B/D^beta        N parameters, D tokens
  width_depth   L = E + A/width^alpha + B/depth^beta + G/D^gamma
  powerlaw:X,Y  L = E + A_X/X^alpha_X + A_Y/Y^alpha_Y     any numeric columns
  gadre, sigmoid  downstream error as a function of loss (use --response)
  Losses are in nats; C = 6*N*D FLOPs unless the table has a C column.

points fitted (--frontier, default by law):
  compute law: envelope (best loss at each compute); laws in N and D: cell (best run of
  each (N, D) cell, = all runs when each cell has one run); other laws: all runs.
  hull = vertices of the lower convex hull of the envelope in (log C, log loss).

predictions (--predict C, FLOPs, repeatable): loss at C; for laws in N and D the loss
along the compute-optimal path and N* (parameters), D* (tokens), D*/N* at C = 6*N*D.
"""
EPILOG = input_epilog("""
examples:
  scalebo fit runs.csv --law compute --predict 1e24 --plot fit.png --json fit.json
  scalebo fit runs.csv --law chinchilla --bootstrap 200 --predict 1e23 --predict 1e24
  scalebo fit dataset:epoch_chinchilla --dataset-option drop_highest_loss=5 --law chinchilla
  scalebo fit sweep.parquet --map N=params,D=tokens,loss=val_loss --duplicates mean

exit codes: 0 converged (or a parameter at a bound: a warning is printed), 1 the fit
failed or did not converge within the iteration limit, 2 bad input.
""")

#: Same as :data:`scalebo.fitting.summary.FRONTIERS` (literal so ``--help`` loads no numpy).
FRONTIERS = ("envelope", "hull", "cell", "all")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``scalebo fit``."""
    add_input_arguments(parser)
    group = parser.add_argument_group("fitting")
    group.add_argument("--law", default="compute",
                       help="law to fit: compute, chinchilla, width_depth, gadre, sigmoid or "
                            "powerlaw:VAR1,VAR2 (default compute)")
    group.add_argument("--frontier", choices=FRONTIERS, default=None,
                       help="points to fit: envelope, hull, cell or all runs "
                            "(default: envelope for compute, cell for laws in N and D, "
                            "else all)")
    group.add_argument("--response", "--target", dest="response", default=None,
                       metavar="COL",
                       help="column the law (or --formula) predicts: default loss, in nats; "
                            "for gadre / sigmoid the downstream error column (--target is "
                            "its older name; in status and fragility --target is a compute)")
    group.add_argument("--huber-delta", type=positive_float, default=None,
                       help=f"Huber delta on natural-log residuals "
                            f"(default {DEFAULT_HUBER_DELTA:g}; with --formula --residuals "
                            "natural, in the response's units, default least squares)")
    group.add_argument("--bootstrap", metavar="B", type=int_at_least(0), default=0,
                       help="bootstrap resamples over the fitted runs for percentile "
                            "intervals (0 = none; 1000 is typical)")
    group.add_argument("--run", metavar="COL", default=None,
                       help="column naming each row's training run, when rows are checkpoints: "
                            "--bootstrap then resamples whole runs, and (in a file) two seeds' "
                            "checkpoints at one (N, D) are not repeats (default: a column "
                            "named 'run')")
    group.add_argument("--confidence", type=level, default=0.95,
                       help="level of the percentile intervals (default 0.95)")
    group.add_argument("--seed", type=int_at_least(0), default=0,
                       help="seed of the bootstrap (and of --formula's starts; default 0)")
    group.add_argument("--predict", metavar="C", type=flops, action="append",
                       default=[], help="predict at this compute in FLOPs, e.g. 1e24 "
                                        "(repeatable)")
    formula = parser.add_argument_group(
        "formula laws", "fit any law written as a Python expression; names that are columns "
        "of the table (or mapped with --map NAME=column) are variables, every other name is "
        "a parameter and needs --bounds")
    formula.add_argument("--formula", default=None, metavar="EXPR",
                         help="e.g. 'c0 + A*V**b*P**e*D**g' (+ - * / **, exp, log, sqrt, "
                              "abs, minimum, maximum, clip), fitted to every row; C is 6*N*D "
                              "when the table has N and D but no C; --bootstrap resamples "
                              "rows, --plot draws observed vs predicted and residuals; not "
                              "with --frontier or --predict (use --predict-at); RUNS is then "
                              "a table file, not dataset:NAME")
    formula.add_argument("--bounds", default=None, metavar="NAME=LO:HI,...",
                         help="bounds of every parameter, e.g. 'c0=-100:100,A=-1e4:1e4'")
    formula.add_argument("--residuals", choices=("log", "natural"), default="log",
                         help="Huber on log residuals (positive responses, default) or least "
                              "squares in natural units (any sign)")
    formula.add_argument("--starts", type=int_at_least(1), default=64, metavar="S",
                         help="random starts inside the bounds, seeded by --seed (default 64)")
    formula.add_argument("--predict-at", metavar="NAME=VALUE,...", action="append", default=[],
                         help="predict the response at this point, a value for every "
                              "variable of the formula, e.g. 'N=1e10,D=2e11' (repeatable)")
    out = parser.add_argument_group("output")
    add_format_argument(out)
    out.add_argument("--json", metavar="PATH", default=None,
                     help="also write the full result as JSON to PATH")
    out.add_argument("--plot", metavar="PATH", default=None,
                     help="save a log-log plot of loss vs compute, for a law in C or (N, D) "
                          "(with --formula: observed vs predicted and residuals) (PNG, PDF, "
                          "SVG) to PATH")


# --------------------------------------------------------------------------- command


def run(args: argparse.Namespace) -> int:
    """Run ``scalebo fit`` (see :mod:`scalebo.fitting.summary`); returns the exit code."""
    warn_few_resamples(args.bootstrap, confidence=args.confidence)
    if args.formula is not None:
        if not args.formula.strip():
            raise ValueError("--formula is empty: write the law, e.g. --formula "
                             "'E + A*N**(-a) + B*D**(-b)' with --bounds for its parameters")
        return _run_formula(args)
    if given := _given(args, bounds=None, residuals="log", starts=64):
        raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for "
                         f"--formula only; the built-in law {args.law!r} has bounds, starts "
                         "and residuals of its own")
    from scalebo.errors import RunTableError
    from scalebo.fitting.summary import (
        default_frontier,
        fit_summary,
        law_settings,
        prediction_kind,
    )
    from scalebo.laws import get_law
    from scalebo.laws.downstream import AS_FORMULA

    law = get_law(args.law)
    # a downstream law predicts and plots through its formula (--predict-at loss=...)
    route = (f"; fit it as a formula to predict and plot: --formula '{AS_FORMULA[law.name]}' "
             f"--response {args.response or 'COL'} --predict-at loss=2.0 --plot PATH"
             if law.name in AS_FORMULA
             else _formula_route(law))
    if args.predict_at:
        raise ValueError("--predict-at needs --formula; for a built-in law in C or (N, D) "
                         f"use --predict C{route}")
    if args.predict and prediction_kind(law) is None:
        raise ValueError(f"--predict needs a law in C or in (N, D), not {law.name!r}{route}")
    if args.plot and prediction_kind(law) is None:
        raise ValueError(f"--plot needs a law in C or in (N, D), not {law.name!r}{route}")
    check_outputs(args)
    seen: list[str] = []
    try:
        # a run column tells checkpoints of two runs at one (N, D) apart (seeds)
        table = collect_warnings(lambda: load_input(args, (args.run,) if args.run else ()), seen)
    except RunTableError as exc:
        if ("missing required column(s) ['N']" in str(exc)
                and not {"N", "C"} & set(law.variables)):  # C alone: the hint above says
            raise RunTableError(f"{exc} Law {law.name!r} does not use N, but each run's "
                                "compute C = 6·N·D (frontiers, predictions) needs its parameter "
                                "count: add a column N (e.g. 12·width²·depth for a "
                                "transformer without embeddings).") from None
        if law.name in AS_FORMULA and "missing required column" in str(exc):
            raise RunTableError(f"{exc} Law {law.name!r} takes the loss alone: a table "
                                "without N and D is fitted as a formula, e.g. scalebo fit "
                                f"FILE --formula '{AS_FORMULA[law.name]}' --response "
                                "ERROR_COLUMN (--map loss=COL for another loss column)."
                                ) from None
        raise
    if args.run:
        from scalebo.data.checkpoints import with_runs

        table = with_runs(table, args.run)
    tuned = law_settings(table, law)  # not the law's own inputs (width, depth)
    hps = ", ".join(tuned) or "none"
    if (args.frontier or default_frontier(law)) == "all":
        how = f"--frontier all{'' if args.frontier else ', the law default'}"
        log(f"every run is fitted ({how}), off-optimal {', '.join(tuned)} included: the law "
            "describes the average setting, not the best" if tuned else
            f"{len(table)} runs, every one fitted ({how})")
    else:
        over = ("a cell's best run is the lowest loss over them" if tuned
                else "each (N, D) is one configuration" if prediction_kind(law)
                else f"each ({', '.join(law.variables)}) is one configuration")
        log(f"{len(table)} runs; hyperparameters: {hps} ({over}; --hyperparameters to choose)")
    if args.bootstrap:
        log(f"fitting {law.name}, then {args.bootstrap} bootstrap resamples in one batched "
            "fit ...")
    else:
        log(f"fitting {law.name} ...")
    summary = collect_warnings(
        lambda: fit_summary(table, law, frontier=args.frontier, target=args.response or "loss",
                            huber_delta=DEFAULT_HUBER_DELTA if args.huber_delta is None
                            else args.huber_delta, bootstrap=args.bootstrap,
                            confidence_level=args.confidence, seed=args.seed,
                            predict=args.predict, notes=seen),
        [])
    result = summary.to_dict()
    if args.plot:
        from scalebo.plotting import plot_fit

        plot_fit(table.frame, summary.points, summary.fit, bootstrap=summary.bootstrap,
                 predict_at=args.predict, path=args.plot, loss=summary.target)
        log(f"plot written to {args.plot}")
    emit_result(args, result, render_table, lambda: write_fit_csv(
        csv_rows(result), result["fit"]["status"],
        (result["bootstrap"] or {}).get("confidence_level"), CSV_COLUMNS))
    return 0 if summary.fit.success else 1


def _formula_route(law: Any) -> str:
    """For a sum of power laws in other variables than C or (N, D) (``width_depth``): the
    same law as a formula, which predicts at a point of its variables (``--predict-at``) and
    plots its fit (``--plot``); "" for any other law."""
    from scalebo.fitting.summary import prediction_kind
    from scalebo.laws.power import PowerLawSum

    if not isinstance(law, PowerLawSum) or prediction_kind(law) is not None:
        return ""  # a law in C or (N, D) predicts (--predict) and plots as it is
    formula, bounds = law.as_formula()
    point = ",".join(f"{v}=VALUE" for v in law.variables)
    return (f"; to predict at a point of its variables or plot the fit, fit the same law as "
            f"a formula: --formula '{formula}' --bounds '{bounds}' --predict-at {point} "
            "--plot PATH")


def _given(args: argparse.Namespace, **defaults: Any) -> list[str]:
    """The options among ``defaults`` (dest → default) whose value is not the default, as
    flags (``--diverged-above``)."""
    return ["--" + k.replace("_", "-") for k, v in defaults.items() if getattr(args, k) != v]


def _run_formula(args: argparse.Namespace) -> int:
    """``scalebo fit --formula``: :func:`scalebo.fitting.formula_summary.summarize_formula_fit`."""
    from scalebo.data.files import read_table
    from scalebo.fitting.formula_summary import formula_inputs, summarize_formula_fit
    from scalebo.laws.formula import parse_bounds, parse_variable_map

    bounds = parse_bounds(args.bounds or "")
    if args.frontier:
        raise ValueError("--frontier is not available with --formula (a formula is fitted "
                         "to every row)")
    if args.predict:
        names = formula_inputs(args.formula, bounds)
        raise ValueError("--predict C is for built-in laws; with --formula use --predict-at "
                         "with a value for each variable of the formula, e.g. --predict-at "
                         f"'{','.join(f'{v}=1e10' for v in names)}'")
    if given := _given(args, law="compute", duplicates="error", diverged_above=None,
                       hyperparameters=None, data_dir=None, dataset_option=[], run=None):
        raise ValueError(f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} not "
                         "apply to --formula, which fits every row of the table as it is "
                         "(drop diverged runs or average repeats in the file, or fit a "
                         "built-in --law)")
    check_outputs(args)
    if args.runs.startswith("dataset:"):
        raise ValueError("--formula reads a table file (CSV, Parquet, JSON lines)")
    frame = read_table(args.runs)
    vmap = parse_variable_map(args.map or "")
    response = args.response or "loss"
    if "loss" in vmap and "loss" not in formula_inputs(args.formula, bounds):
        given = vmap.pop("loss")  # --map loss=COL names the response, as for built-in laws
        if args.response is not None and args.response != given:
            raise ValueError(f"--map loss={given} and --response {args.response} name two "
                             "response columns; keep one")
        response = given
    summary = summarize_formula_fit(
        frame, args.formula, bounds=bounds, variable_map=vmap,
        response=response, residuals=args.residuals, n_starts=args.starts,
        seed=args.seed,
        source=args.runs, predict_at=args.predict_at, bootstrap=args.bootstrap,
        confidence_level=args.confidence, progress=log,
        huber_delta=args.huber_delta)
    result = summary.to_dict()
    if args.plot:
        from scalebo.fitting.formula_plot import plot_formula_fit

        plot_formula_fit(summary, args.plot)
        log(f"plot written to {args.plot}")
    emit_result(args, result, render_formula_table, lambda: write_fit_csv(
        summary.rows(), str(summary.fit.status),
        summary.bootstrap and summary.bootstrap.confidence_level, FORMULA_CSV_COLUMNS))
    return 0 if result["fit"]["status"] in ("converged", "bound hit") else 1
