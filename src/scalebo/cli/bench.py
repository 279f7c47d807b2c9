"""``scalebo bench``: run a benchmark sweep of search strategies, and report on it.

* ``scalebo bench run CONFIG.yaml --out DIR [--jobs N | --dask-scheduler ADDRESS]`` runs
  every unfinished cell (dataset × method × seed × budget) of the config and writes one JSON
  record per cell to ``DIR`` (:func:`scalebo.bench.sweep.run_sweep`). A rerun skips finished
  cells, so an interrupted sweep resumes where it stopped; a cell's key holds the package
  version and every method setting after defaults, so a new scalebo version or a changed
  default recomputes instead of reusing old records. A record file that cannot be used
  (unparsable, truncated, another schema) is recomputed with a warning naming it and why;
  warnings raised while loading a dataset are shown once and kept in the records' ``notes``.
  Progress (cells done / total, ETA) on stderr; the summary on stdout.
* ``scalebo bench report DIR --out REPORT_DIR`` writes ``REPORT_DIR/report.md`` with mean ± SD
  tables and figures (:func:`scalebo.bench.report.write_report`), the calibration of the law
  posterior and floor-oracle rows (``--no-oracle`` leaves them out; they need the datasets,
  ``--data-dir`` or ``$SCALEBO_DATA_DIR``); unusable record files are named in a warning and
  counted in the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from scalebo.cli.arg_types import positive_float
from scalebo.cli.common import (
    add_format_argument,
    format_table,
    int_at_least,
    is_quiet,
    log,
    note,
)

NAME = "bench"
HELP = "benchmark search strategies over datasets, budgets and seeds (run a sweep, report)"
DESCRIPTION = """\
Benchmark search strategies by replaying them on recorded grids.

  scalebo bench run CONFIG.yaml --out DIR [--jobs N | --dask-scheduler ADDRESS]
    runs every unfinished cell (dataset x method x seed x budget) of the config and writes
    one JSON record per cell to DIR. A rerun skips finished cells, so an interrupted sweep
    resumes where it stopped; a cell's key holds the package version and every method
    setting after defaults, so a new scalebo version or a changed default recomputes
    instead of reusing old records. A record file that cannot be used (unparsable,
    truncated, another schema) is recomputed with a warning naming it and why. Progress
    (cells done / total, ETA) on stderr; the summary on stdout.
  scalebo bench report DIR --out REPORT_DIR
    writes REPORT_DIR/report.md with mean +- SD tables and figures (REPORT_DIR/figures),
    the calibration of the law posterior and floor-oracle rows (--no-oracle leaves them
    out; they need the datasets, --data-dir or $SCALEBO_DATA_DIR).

Config datasets: steplaw, steplaw_moe, oellm_english, synthetic or {source: PATH} for a
run-table file (the registered epoch_chinchilla, gadre_overtraining, gemstones and
porian_isoflop hold no hyperparameter grid to replay). Record layout: docs/records.md.
"""
RUN_DESCRIPTION = """\
Run the unfinished cells of a sweep config (YAML: name, seeds, budgets as fractions of
C_total, datasets, method_defaults, methods; see benchmarks/configs/), one JSON record per
cell in --out.
"""
REPORT_DESCRIPTION = """\
Write report.md (mean +- SD over seeds of the relative extrapolation error in % at each
target compute, 1e25, 1e27 and 1e29 FLOPs unless a dataset gives its own targets; the law
posterior's calibration, fitted coefficients, compute saved, recoveries) and figures/*.png
from a directory of records.
"""
EPILOG = """\
examples:
  scalebo bench run benchmarks/configs/smoke.yaml --out runs/smoke --jobs 2
  scalebo bench run benchmarks/configs/main_comparison.yaml --out runs/main --seeds 0-2
  scalebo bench report runs/main --out docs
exit codes: 0 ok, 1 some cells failed (their error records are kept), 2 bad config or usage.
"""


def _seeds(text: str) -> list[int]:
    """``"0-4"`` → 0..4, ``"0,3,7"`` → those."""
    out: list[int] = []
    for part in text.split(","):
        if "-" in part.strip()[1:]:
            lo, hi = part.split("-", 1)
            out += list(range(int(lo), int(hi) + 1))
        elif part.strip():
            out.append(int(part))
    if not out:
        raise argparse.ArgumentTypeError(f"no seeds in {text!r}")
    return out


def _jobs(text: str) -> int:
    """argparse type of ``--jobs``: an integer ≥ 1, or -1 (every core)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"expected a number of worker processes >= 1, or -1 "
                                         f"for every core, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench_command", metavar="ACTION", required=True,
                                help="run a sweep or report on its records")
    run = sub.add_parser("run", help="run the unfinished cells of a sweep config",
                         description=RUN_DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", help="sweep config (YAML), e.g. benchmarks/configs/smoke.yaml")
    run.add_argument("--out", required=True, metavar="DIR",
                     help="record directory (created; one JSON file per cell)")
    run.add_argument("--jobs", "-j", type=_jobs, default=1,
                     help="local worker processes (joblib/loky; -1 = all cores; default 1)")
    run.add_argument("--dask-scheduler", metavar="ADDRESS", default=None,
                     help="run the cells on a Dask cluster, e.g. tcp://10.0.0.1:8786 "
                          "(needs pip install 'scalebo[dask]')")
    run.add_argument("--seeds", type=_seeds, default=None, metavar="SEEDS",
                     help="only these seeds (e.g. 0-2 or 0,5), overriding the config")
    run.add_argument("--limit", type=int_at_least(1), default=None, metavar="N",
                     help="run at most this many tasks, then stop (rerun to continue)")
    run.add_argument("--data-dir", default=None, metavar="DIR",
                     help="public datasets folder (default $SCALEBO_DATA_DIR)")
    add_format_argument(run)
    rep = sub.add_parser("report", help="Markdown report with tables and figures from records",
                         description=REPORT_DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    for action in (run, rep):  # -q after the action too, as after every other command
        action.add_argument("-q", "--quiet", dest="quiet", action="store_true",
                            default=argparse.SUPPRESS,
                            help="no progress or log lines on stderr")
    rep.add_argument("records", help="record directory written by 'scalebo bench run'")
    rep.add_argument("--out", required=True, metavar="DIR",
                     help="report directory (report.md, figures/; created)")
    rep.add_argument("--title", default=None, help="report title")
    rep.add_argument("--no-figures", action="store_true", help="tables only")
    rep.add_argument("--law", choices=("compute", "chinchilla"), default="compute",
                     help="law whose metrics fill the tables (default compute)")
    rep.add_argument("--threshold", type=_percent, default=1.0, metavar="PCT",
                     help="accuracy of the compute-saved table: the mean |error| at the "
                          "headline target to stay within, in %% (default 1; 2 or 2%%): a "
                          "grid whose reference law is itself only ±1.4 %% sure never reaches "
                          "1 %%")
    rep.add_argument("--no-oracle", action="store_true",
                     help="leave out the floor-oracle rows (they load each dataset)")
    rep.add_argument("--data-dir", default=None, metavar="DIR",
                     help="public datasets folder for the floor oracles "
                          "(default $SCALEBO_DATA_DIR)")
    rep.add_argument("--all-records", action="store_true",
                     help="also report records of a dataset/method label written under "
                          "other settings, version or data than its newest (left out and "
                          "said by default: an edited config's old cells)")


def _percent(text: str) -> float:
    """argparse type: a positive percentage, ``2`` or ``2%``."""
    return positive_float(text.strip().removesuffix("%"))


def _run(args: argparse.Namespace) -> int:
    from scalebo.bench.replay_datasets import check_replay_datasets, target_acquisition_notes
    from scalebo.bench.sweep import SweepConfig, run_sweep
    from scalebo.extras import require_extra

    config = SweepConfig.from_yaml(args.config)
    if args.seeds is not None:
        config = config.with_seeds(args.seeds)
    trees = [m.name for m in config.methods if m.resolved_kwargs().get("surrogate") == "trees"]
    if trees:  # else every cell of those methods would fail, one record each
        require_extra("trees", f"method {trees[0]!r} (surrogate: trees)")
    if args.dask_scheduler is not None:
        require_extra("dask", "--dask-scheduler")
        if args.jobs != 1:
            raise ValueError(f"--jobs {args.jobs} and --dask-scheduler: the cluster's workers "
                             "run the cells; give one of them")
    data_dir = args.data_dir or os.environ.get("SCALEBO_DATA_DIR")
    try:  # before any cell runs, naming the config (run_sweep checks them again)
        check_replay_datasets(config.datasets, data_dir)
    except ValueError as exc:
        raise ValueError(f"{args.config}: datasets: {exc}") from None
    for text in target_acquisition_notes(config):
        note(text)
    n = len(config.cells())
    log(f"sweep {config.name}: {len(config.datasets)} datasets × {len(config.methods)} methods "
        f"× {len(config.seeds)} seeds × {len(config.budgets)} budgets = {n} cells → {args.out}")
    summary = run_sweep(config, args.out, n_jobs=args.jobs, dask_scheduler=args.dask_scheduler,
                        data_dir=data_dir, progress=not is_quiet(), limit=args.limit)
    if is_quiet() and (summary.failed or summary.corrupt):  # why cells failed is not progress
        print(summary.describe(), file=sys.stderr, flush=True)
    else:
        log(summary.describe())
    result = {"config": config.name, "out": summary.out_dir, "cells": summary.total,
              "skipped": summary.skipped, "ran": summary.ran, "failed": summary.failed,
              "tasks": summary.n_tasks, "seconds": round(summary.seconds, 3),
              "cells_per_second": round(summary.cells_per_second, 4),
              "recomputed_corrupt": len(summary.corrupt), "notes": len(summary.notes),
              "failures": [{"message": m, "cells": k} for m, k in summary.failures],
              "corrupt_records": [{"file": c.path, "reason": c.reason} for c in summary.corrupt],
              "note_texts": list(summary.notes)}
    lists = ("failures", "corrupt_records", "note_texts")
    if args.format == "json":
        print(json.dumps(result, indent=2))
    elif args.format == "csv":
        keys = [k for k in result if k not in lists]
        print(",".join(keys))
        print(",".join(str(result[k]) for k in keys))
    else:
        rows = [{"field": k, "value": v} for k, v in result.items() if k not in lists]
        print(format_table(rows, ["field", "value"]), end="")
    return 1 if summary.failed else 0


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from scalebo.bench.report import write_report

    if not Path(args.records).is_dir():
        raise FileNotFoundError(f"{args.records}: no such record folder (write one with "
                                "'scalebo bench run CONFIG --out DIR')")

    path = write_report(args.records, args.out, title=args.title, figures=not args.no_figures,
                        law=args.law, oracle=not args.no_oracle, threshold_pct=args.threshold,
                        data_dir=args.data_dir or os.environ.get("SCALEBO_DATA_DIR"),
                        all_records=args.all_records)
    log(f"report written to {path}")
    print(path)
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``bench run`` / ``bench report``."""
    return _run(args) if args.bench_command == "run" else _report(args)
