"""Options and output helpers shared by the subcommands.

Input: every command that reads runs takes one positional ``RUNS`` argument, either a file
(CSV, TSV, Parquet or JSON lines; format by suffix) or ``dataset:NAME`` for a registered public
dataset read from ``--data-dir`` / ``$SCALEBO_DATA_DIR``. :func:`add_input_arguments` declares
it with ``--map``, ``--duplicates``, ``--diverged-above``, ``--hyperparameters``,
``--data-dir`` and ``--dataset-option``; :func:`load_input` turns the parsed options into a
validated :class:`~scalebo.data.runs.RunTable`.

Output: data go to stdout (``--format table|json|csv``), logs and progress to stderr
(:func:`log`, silenced by the root ``--quiet``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from scalebo.cli.arg_types import (  # noqa: F401 - the commands import them from here
    MIN_RESAMPLES,
    TOLERANCE_WARN,
    anchor_share,
    coupling_share,
    flops,
    fraction,
    fractions,
    guard_ratio,
    int_at_least,
    level,
    non_negative_float,
    polish_share,
    positive_float,
    tolerance,
    warn_few_resamples,
)
from scalebo.errors import RunTableError, exact_number, grid_value  # noqa: F401 - re-exported
from scalebo.outputs import (  # noqa: F401 - re-exported for the commands
    atomic_path,
    check_figure_path,
    check_output_path,
    jsonable,
    write_json_file,
    write_text_file,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from scalebo.data.runs import RunTable

# numpy, pandas, PyYAML and the library are imported inside the functions that need them, so
# that ``scalebo --help`` and usage errors answer without loading them (as Optuna's CLI does).

__all__ = [
    "DATASET_PREFIX",
    "FORMATS",
    "check_outputs",
    "fraction",
    "fractions",
    "INPUT_HELP",
    "add_format_argument",
    "add_input_arguments",
    "input_epilog",
    "int_at_least",
    "format_number",
    "format_table",
    "jsonable",
    "load_input",
    "log",
    "note",
    "set_quiet",
    "tolerance",
    "write_csv",
    "write_json",
]

DATASET_PREFIX = "dataset:"
FORMATS = ("table", "json", "csv")

#: Shared description of the input, reused in ``--help`` texts (argparse keeps line breaks
#: with ``RawDescriptionHelpFormatter``).
INPUT_HELP = """\
input (RUNS):
  a table with one row per finished training run, as CSV (.csv), TSV (.tsv),
  Parquet (.parquet, .pq) or JSON lines (.jsonl, .ndjson, .json), with columns
    N     model size in parameters
    D     training tokens
    loss  final loss in nats
    C     training compute in FLOPs (optional; default 6*N*D)
    run_id (optional) and hyperparameter columns (e.g. lr, bs)
  Other names are mapped with --map, e.g. --map N=params,D=tokens,loss=val_loss.
  Runs with NaN/inf loss (or a loss at or above --diverged-above) are excluded and counted.
  Repeated configurations are an error unless --duplicates mean averages them.
  Or dataset:NAME for a public dataset (steplaw, steplaw_moe, oellm_english,
  epoch_chinchilla, porian_isoflop, gemstones, gadre_overtraining) read from --data-dir or
  $SCALEBO_DATA_DIR; --dataset-option passes a loader's keyword options (below).
"""

#: Heads the list of every dataset's options in :func:`input_epilog`.
DATASET_OPTIONS_HELP = """
dataset options (--dataset-option KEY=VALUE with dataset:NAME, repeatable; VALUE is read
as YAML: 5, 1.5e-3, null, [a, b]), read from each dataset's loader:
"""

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or restore) :func:`log` messages; warnings and errors are always shown."""
    global _quiet
    _quiet = bool(quiet)


def is_quiet() -> bool:
    """Whether progress and log lines are silenced."""
    return _quiet


def warn(message: object) -> str:
    """Print ``warning: <message>`` to stderr (also under ``--quiet``) and return the text;
    the library's pointer to ``RunTable.excluded`` is left out (CLI users have none)."""
    from scalebo.errors import EXCLUDED_IN_PYTHON

    text = str(message).replace(EXCLUDED_IN_PYTHON, "")
    print(f"warning: {text}", file=sys.stderr, flush=True)
    return text


def note(message: object) -> None:
    """Print ``note: <message>`` to stderr, also under ``--quiet``: what the data or the
    options did (a run counted as failed, excluded runs, a variant skipped), not progress."""
    print(f"note: {message}", file=sys.stderr, flush=True)


def log(message: str) -> None:
    """Write a progress or log line to stderr (unless ``--quiet``)."""
    if not _quiet:
        print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def budget_bar(desc: str) -> Iterator[Callable[[float], None] | None]:
    """A tqdm bar on stderr over the % of a budget committed (None under ``--quiet``): yields
    the callback that takes the committed fraction (0–1); the bar is removed when done."""
    if _quiet:
        yield None
        return
    from scalebo.progress import progress

    done = 0.0
    with progress(100, desc, "%", step=0.25, leave=False,
                  amount=lambda pct, _total: f"{pct:.0f} % of the budget committed",
                  bar_format="{desc}: {bar} {n:.0f}% of the budget [{elapsed}<{remaining}]"
                  ) as update:
        def advance(fraction: float) -> None:
            nonlocal done
            now = max(0.0, min(100.0, 100.0 * fraction))
            update(now - done)
            done = now

        yield advance


# --------------------------------------------------------------------------- input


def input_epilog(tail: str) -> Callable[[], str]:
    """A command's lazy ``EPILOG`` (see :mod:`scalebo.cli.main`): :data:`INPUT_HELP`, every
    registered dataset's ``--dataset-option`` keys (read from the loaders' signatures by
    :func:`scalebo.data.dataset_options.options_help`), then ``tail``. Built only when the
    help is printed, since reading the loaders imports numpy and pandas."""

    def build() -> str:
        from scalebo.data.dataset_options import options_help

        return INPUT_HELP + DATASET_OPTIONS_HELP + options_help() + tail

    return build


def _key_value(text: str) -> tuple[str, Any]:
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), yaml.safe_load(value)


def check_outputs(args: argparse.Namespace) -> None:
    """Check ``--json`` and ``--plot`` (when the command has them) before any work: the
    folder exists, and a figure's suffix is a format matplotlib writes."""
    if getattr(args, "json", None):
        check_output_path(args.json, "--json")
    if getattr(args, "plot", None):
        check_figure_path(args.plot, "--plot")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``RUNS`` and the options that control how runs are loaded."""
    parser.add_argument(
        "runs", metavar="RUNS",
        help="run table (CSV/TSV/Parquet/JSON lines) or dataset:NAME (see 'input' below)",
    )
    group = parser.add_argument_group("loading runs")
    group.add_argument(
        "--map", metavar="CANON=COL,...", default=None,
        help="map canonical columns (run_id, N, D, C, loss) to the table's names, "
             "e.g. N=params,D=tokens",
    )
    group.add_argument(
        "--duplicates", choices=("error", "mean"), default="error",
        help="repeated configurations (same N, D and hyperparameters): fail (default) or "
             "average their losses",
    )
    group.add_argument(
        "--diverged-above", metavar="NATS", type=float, default=None,
        help="exclude runs whose loss is at or above this many nats (diverged; a sentinel "
             "written at it counts)",
    )
    group.add_argument(
        "--hyperparameters", metavar="COL,...", default=None,
        help="hyperparameter columns (comma-separated; '' for none; a named column of "
             "names, e.g. an optimizer, is categorical); default: numeric columns that vary "
             "inside an (N, D) cell",
    )
    group.add_argument(
        "--data-dir", metavar="DIR", default=None,
        help="folder of the public datasets for dataset:NAME (default $SCALEBO_DATA_DIR)",
    )
    group.add_argument(
        "--dataset-option", metavar="KEY=VALUE", type=_key_value, action="append",
        default=[],
        help="keyword option of a dataset loader, e.g. drop_highest_loss=5 "
             "(repeatable; values parsed as YAML; each dataset's options are listed below)",
    )


def split_names(text: str | None) -> tuple[str, ...] | None:
    """``"lr, bs"`` → ``("lr", "bs")``; None stays None (the default hyperparameters)."""
    if text is None:
        return None
    return tuple(name.strip() for name in text.split(",") if name.strip())


def load_input(args: argparse.Namespace, config_columns: Sequence[str] = ()) -> RunTable:
    """Load ``args.runs`` with the loading options declared by :func:`add_input_arguments`.

    For ``dataset:NAME`` the dataset's own loader is used (``--dataset-option`` passed to it);
    ``--diverged-above`` and ``--duplicates mean`` are then applied to its table, and
    ``--map`` / ``--hyperparameters`` are rejected (a dataset's columns are fixed).
    ``config_columns`` (a file's columns that tell runs of one configuration apart, e.g.
    ``--run``'s) go to :func:`~scalebo.data.runs.load_runs`.

    Raises:
        RunTableError: malformed table or options (names file, row and column).
        FileNotFoundError: missing data directory or dataset file.
        ValueError: unknown dataset name.
    """
    from scalebo.data.runs import load_runs, parse_mapping, refilter_runs

    source: str = args.runs
    options = dict(getattr(args, "dataset_option", None) or [])
    hyperparameters = split_names(args.hyperparameters)
    if not source.startswith(DATASET_PREFIX):
        if options:
            raise RunTableError("--dataset-option only applies to RUNS of the form dataset:NAME")
        return load_runs(
            Path(source),
            mapping=parse_mapping(args.map) if args.map else None,
            hyperparameters=hyperparameters,
            duplicates=args.duplicates,
            diverged_above=args.diverged_above,
            config_columns=tuple(config_columns),
        )
    from scalebo.data.dataset_options import check_dataset_options
    from scalebo.data.datasets import DATASETS, load_dataset

    name = source[len(DATASET_PREFIX):]
    if args.map or hyperparameters is not None:
        raise RunTableError(
            f"{source}: --map and --hyperparameters apply to files, not to a registered "
            "dataset, whose columns are fixed"
        )
    if options and name in DATASETS:
        try:
            options = check_dataset_options(name, options)
        except ValueError as exc:
            raise RunTableError(f"--dataset-option: {exc}") from None
    table = load_dataset(name, data_dir=args.data_dir, **options)
    return refilter_runs(table, duplicates=args.duplicates, diverged_above=args.diverged_above)


# --------------------------------------------------------------------------- output


def add_format_argument(parser: argparse.ArgumentParser, default: str = "table") -> None:
    """Declare ``--format {table,json,csv}`` (what goes to stdout)."""
    parser.add_argument(
        "--format", choices=FORMATS, default=default,
        help=f"what to print on stdout: a readable table, JSON or CSV (default {default})",
    )


def emit_result(args: argparse.Namespace, result: dict[str, Any],
                table: Callable[[dict[str, Any]], str], csv_out: Callable[[], None]) -> None:
    """What a command prints: ``result`` to ``--json PATH`` when given, then to stdout in
    ``--format``: JSON, CSV (``csv_out()`` writes it) or the readable ``table(result)``."""
    if getattr(args, "json", None):
        write_json_file(result, args.json)
        log(f"JSON written to {args.json}")
    if args.format == "json":
        write_json(result)
    elif args.format == "csv":
        csv_out()
    else:
        sys.stdout.write(table(result))


def write_json(data: Any, stream: TextIO | None = None) -> None:
    """Write ``data`` as indented, strict JSON (no NaN) to ``stream`` (default stdout)."""
    stream = sys.stdout if stream is None else stream
    json.dump(jsonable(data), stream, indent=2, allow_nan=False)
    stream.write("\n")


def write_csv(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], stream: TextIO | None = None
) -> None:
    """Write ``rows`` as CSV with a header of ``columns`` (missing values empty)."""
    stream = sys.stdout if stream is None else stream
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if jsonable(row.get(c)) is None else jsonable(row.get(c))
                         for c in columns])


def format_number(value: Any, digits: int = 5) -> str:
    """Compact text of a number (``digits`` significant digits), ``-`` for missing."""
    import numpy as np

    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return "-" if math.isnan(value) else f"{value:.{digits}g}"
    return str(value)


def format_table(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    headers: Sequence[str] | None = None,
    *,
    indent: str = "  ",
) -> str:
    """Left-aligned text table of ``rows`` (numbers through :func:`format_number`)."""
    headers = list(columns if headers is None else headers)
    cells = [[format_number(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    out = io.StringIO()
    for line in [headers, *cells]:
        out.write(indent + "  ".join(t.ljust(w) for t, w in zip(line, widths, strict=True))
                  .rstrip() + "\n")
    return out.getvalue()
