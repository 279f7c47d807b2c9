"""``scalebo fragility``: refit a law under named variants and report how much it moves.

Thin wrapper of :func:`scalebo.analysis.fragility.fragility`: load the base points (every run or
checkpoint of RUNS), build the variants, fit them (joblib), print a table / JSON / CSV, and
optionally write the figure and a JSON file.
"""

from __future__ import annotations

import argparse
import sys

from scalebo.cli.arg_types import n_jobs
from scalebo.cli.common import (
    DATASET_PREFIX,
    add_format_argument,
    add_input_arguments,
    check_outputs,
    flops,
    format_table,
    input_epilog,
    int_at_least,
    level,
    load_input,
    log,
    note,
    positive_float,
    warn,
    warn_few_resamples,
    write_csv,
    write_json,
    write_json_file,
)
from scalebo.fitting.defaults import DEFAULT_HUBER_DELTA

NAME = "fragility"
HELP = "refit a law under variants (leave one model out, checkpoints, cooldown, δ, ...)"
DESCRIPTION = """\
Refit a law in (N, D) (default chinchilla: L = E + A/N^alpha + B/D^beta) on every point of
RUNS (each run or checkpoint; with hyperparameters, the best run of each (N, D) cell;
C = 6*N*D FLOPs) and under named variants, and report alpha,
beta, E, the compute-optimal N* (parameters) and D* (tokens) at --target FLOPs, D*/N*, and
the predicted loss there (nats), with the spread across variants (min, max, median and
rel_spread = (max - min)/median, a ratio: 0.35 is 35 %). Variants that fail, cannot be
identified, end at a parameter bound or run out of iterations are left out of the spread
(named in a warning and in the spread's header; 'in_spread' in JSON and CSV).

variants:
  base                      all points, --huber-delta
  leave out N=<N>           one per model size (--no-leave-one-out to skip)
  drop K smallest/largest   the K smallest / largest model sizes removed (--drop-count K)
  every Kth checkpoint      per training run (run label, hyperparameters, phase), every
                            K-th checkpoint and the last (--every-k K, repeatable; needs a
                            'run' column, e.g. dataset:gemstones, or --run COL; a training
                            run repeating a D is warned)
  huber δ=<δ>               base points, another Huber delta (--huber-deltas 1e-4,1e-2)
  NAME                      any other table, --variant-file NAME=PATH (repeatable; its
                            columns mapped with --variant-map, default --map)
  With RUNS = dataset:gemstones the Gemstones files are added automatically:
  cooldown end, cooldown start, half lr, val fineweb_edu, val dclm, checkpoints every 2B
  (--no-dataset-variants to skip).

starts: the base fit uses the law's full grid (4,500 starts for chinchilla); variants start
from the base's distinct optima plus the 16 grid starts with the lowest initial objective
(--starts full to use the whole grid for every variant: ~15x slower). A variant whose best
reduced start no other start agrees with (or none converged) is refitted on the full grid and
keeps the lower objective; its 'starts' (JSON, CSV) says 'reduced, refit on the full grid'.
"""
EPILOG = input_epilog("""
examples:
  scalebo fragility dataset:gemstones --target 1e24 --plot fragility.png
  scalebo fragility hot.jsonl --map N=params_active_precise,D=tokens,loss=final_loss \\
      --variant-file "cooldown end=cool_end.jsonl" --format json

exit codes (as scalebo fit's, of the base fit): 0 the base fit converged (or a parameter at
a bound: a warning names it), 1 the base fit failed, is unidentified or did not converge
within the iteration limit, 2 bad input. A variant without a usable fit is a warning.
""")

#: ``--every-k`` when not given.
DEFAULT_EVERY_K = (2, 5)

COLUMNS = ("variant", "n_points", "alpha", "beta", "E", "N_opt", "D_opt",
           "tokens_per_param", "loss_at_target", "status")


def _variant_file(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name.strip(), path.strip()


def _floats(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated positive numbers, each checked by ``positive_float``."""
    try:
        return tuple(positive_float(v) for v in text.split(",") if v.strip())
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{err} in {text!r} (e.g. 1e-4,1e-2)") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``scalebo fragility``."""
    add_input_arguments(parser)
    group = parser.add_argument_group("fitting")
    group.add_argument("--law", default="chinchilla",
                       help="law in (N, D): chinchilla (default) or powerlaw:N,D")
    group.add_argument("--target", type=flops, default=1e24,
                       help="compute in FLOPs at which N*, D* and the loss are reported "
                            "(default 1e24)")
    group.add_argument("--huber-delta", type=positive_float, default=DEFAULT_HUBER_DELTA,
                       help=f"Huber delta of the base fit (default {DEFAULT_HUBER_DELTA:g})")
    group.add_argument("--starts", choices=("reduced", "full"), default="reduced",
                       help="start grid of the variant fits (see above; default reduced)")
    group.add_argument("--n-jobs", type=n_jobs, default=1,
                       help="parallel variant fits (joblib: >= 1 workers, -1 = all cores, -2 "
                            "all but one; default 1: the "
                            "whole Gemstones analysis is ~21 CPU-seconds, so worker start-up "
                            "and a busy machine cost more than they save)")
    group.add_argument("--bootstrap", metavar="B", type=int_at_least(0), default=0,
                       help="also bootstrap the base fit B times (percentile intervals at "
                            "--confidence)")
    group.add_argument("--confidence", type=level, default=0.95,
                       help="level of the bootstrap's percentile intervals (default 0.95)")
    group.add_argument("--seed", type=int_at_least(0), default=0, help="bootstrap seed (default 0)")
    var = parser.add_argument_group("variants")
    var.add_argument("--no-leave-one-out", action="store_true",
                     help="skip the leave-one-model-out variants")
    var.add_argument("--drop-count", type=int_at_least(0), default=None,
                     help="K of 'drop K smallest/largest' (0 to skip; default 3)")
    var.add_argument("--run", metavar="COL", default=None,
                     help="column naming each point's training run: its rows are the run's "
                          "checkpoints (every-K-th-checkpoint variants; the bootstrap "
                          "resamples whole runs). Default: a column named 'run'")
    var.add_argument("--every-k", type=int_at_least(1), action="append", default=None,
                     help="checkpoint spacing K (repeatable; default 2 and 5)")
    var.add_argument("--huber-deltas", type=_floats, default=(1e-4, 1e-2),
                     help="other Huber deltas, comma-separated (default 1e-4,1e-2)")
    var.add_argument("--variant-file", type=_variant_file, action="append", default=[],
                     metavar="NAME=PATH", help="another table fitted as variant NAME")
    var.add_argument("--variant-map", metavar="CANON=COL,...", default=None,
                     help="column mapping of the --variant-file tables (default: --map)")
    var.add_argument("--no-dataset-variants", action="store_true",
                     help="with dataset:gemstones, do not add its other files as variants")
    out = parser.add_argument_group("output")
    add_format_argument(out)
    out.add_argument("--json", metavar="PATH", default=None, help="also write JSON to PATH")
    out.add_argument("--plot", metavar="PATH", default=None,
                     help="save the figure (exponents, N*, loss at target across variants)")


def _extras(args: argparse.Namespace) -> dict:
    from scalebo.cli.common import split_names
    from scalebo.data.runs import load_runs, parse_mapping
    from scalebo.errors import RunTableError

    extra = {}
    if args.runs == f"{DATASET_PREFIX}gemstones" and not args.no_dataset_variants:
        from scalebo.analysis.fragility import gemstones_extras

        extra.update(gemstones_extras(args.data_dir, dict(args.dataset_option or [])))
    text = args.variant_map or args.map
    files: set[str] = set()
    for name, path in args.variant_file:
        if name in extra:
            raise ValueError(f"--variant-file {name}={path}: the name {name!r} is taken "
                             + ("by another --variant-file" if name in files
                                else "by a variant of the dataset")
                             + "; give each variant a name of its own")
        files.add(name)
        try:
            extra[name] = load_runs(path, mapping=parse_mapping(text) if text else None,
                                    hyperparameters=split_names(args.hyperparameters),
                                    duplicates=args.duplicates,
                                    diverged_above=args.diverged_above)
        except RunTableError as exc:  # a missing column: mapped with --variant-map here
            if "missing required column" not in str(exc):
                raise
            raise RunTableError(f"{exc} A --variant-file's columns are mapped with "
                                "--variant-map (default: --map).") from None
    return extra


def run(args: argparse.Namespace) -> int:
    """Run ``scalebo fragility``; exit 0 when the base fit has an estimate (a variant that
    fails, cannot be identified, hits a bound or runs out of iterations is warned about and
    left out of the spread; a base at a bound is warned about, as ``scalebo fit`` does), 1
    when the base fit failed, is unidentified or ran out of iterations (``fit``: 1)."""
    from scalebo.analysis.fragility import StartPolicy, check_law, fragility, plot_fragility

    check_law(args.law)  # before the data are read and the base fitted
    check_outputs(args)
    warn_few_resamples(args.bootstrap, confidence=args.confidence)
    table = load_input(args, (args.run,) if args.run else ())
    if args.run:
        from scalebo.data.checkpoints import with_runs

        table = with_runs(table, args.run)
    extra = _extras(args)
    from scalebo.analysis.variants import skipped_variants

    every_k = tuple(args.every_k) if args.every_k else DEFAULT_EVERY_K
    for why in skipped_variants(table.frame, args.drop_count or 0, every_k,
                                every_k_given=bool(args.every_k),
                                skip=table.hyperparameters):
        # a warning: variants lost to a misnamed run column; a note: the points lack them
        (warn if why.severity == "warning" else note)(why.text)
    options = {
        "leave_one_out": not args.no_leave_one_out,
        "drop_count": 3 if args.drop_count is None else args.drop_count,
        "every_k": every_k,
        "huber_deltas": args.huber_deltas, "extra": extra,
    }
    cells = (f" (the best of each of {table.frame.groupby(['N', 'D']).ngroups} (N, D) cells "
             f"over {', '.join(table.hyperparameters)} is fitted)" if table.hyperparameters
             else "")
    log(f"fragility: {len(table)} runs{cells}, {len(extra)} extra tables, "
        f"n_jobs={args.n_jobs} ...")
    report = fragility(table, law=args.law, target=args.target, huber_delta=args.huber_delta,
                       policy=StartPolicy(full=args.starts == "full"), n_jobs=args.n_jobs,
                       bootstrap=args.bootstrap, rng=args.seed,
                       confidence_level=args.confidence, **options)
    log(f"{len(report.results)} fits in {report.seconds:.1f} s")
    result = report.to_dict()
    if args.plot:
        plot_fragility(report, args.plot)
        log(f"figure written to {args.plot}")
    if args.json:
        write_json_file(result, args.json)
    rows = result["variants"]
    if args.format == "json":
        write_json(result)
    elif args.format == "csv":
        write_csv(rows, [*COLUMNS, "A", "B", "objective", "huber_delta", "in_spread",
                         "starts", "message"])
    else:
        law = report.law if report.law == args.law else f"{args.law} ({report.law})"
        sys.stdout.write(f"law {law}, target C = {report.target:.3g} FLOPs\n")
        sys.stdout.write(format_table(rows, COLUMNS))
        spread_rows = [{"quantity": k, **v} for k, v in result["spread"].items()]
        left = [f"{r['variant']} ({r['status']})" for r in rows if not r["in_spread"]]
        sys.stdout.write("spread across variants"
                         + (f" (left out: {', '.join(left)})" if left else "") + "\n")
        sys.stdout.write(format_table(spread_rows,
                                      ("quantity", "base", "median", "min", "max",
                                       "rel_spread", "min_variant", "max_variant")))
        boot = result.get("bootstrap")
        if boot:
            runs = (f" of {boot['n_clusters']} training runs" if boot.get("n_clusters")
                    else "")
            sys.stdout.write(f"bootstrap of the base points ({boot['n_resamples']} resamples"
                             f"{runs}, "
                             f"{boot['n_failed']} failed, seed {boot['seed']}): "
                             f"{100 * boot['confidence_level']:g} % percentile intervals\n")
            sys.stdout.write(format_table(
                [{"quantity": k, **v} for k, v in boot.items() if isinstance(v, dict)],
                ("quantity", "lower", "upper")))
    if args.format == "csv" and result.get("bootstrap"):
        note("the bootstrap's intervals are in --format json (or --json PATH), not in the "
             "CSV of variants")
    failed = [r for r in rows[1:] if not r["in_spread"]]  # the base: its own word
    if failed:  # each with why (a trial saw 'unidentified' with no reason)
        why = "; ".join(f"{r['variant']!r}: {r['status']}" + (f" ({r['message']})" if
                                                             r.get("message") else "")
                        for r in failed)
        warn(f"{len(failed)} variant fit(s) without a usable estimate (failed, unidentified by "
             f"their points, at a parameter bound or out of iterations), left out of the "
             f"spread: {why}")
    # a variant the data cannot identify is a finding of the analysis; without the base
    # fit there is nothing to compare against. As in ``scalebo fit``: a base at a bound is
    # a warning (the library's) and exits 0, one out of iterations exits 1
    if rows and rows[0]["status"] in ("failed", "unidentified", "max iterations"):
        said = {"max iterations": "out of iterations"}.get(rows[0]["status"], rows[0]["status"])
        print(f"error: the base fit is {said}: {rows[0].get('message') or '?'}",
              file=sys.stderr)
        return 1
    return 0
