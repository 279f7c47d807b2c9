"""The ``scalebo`` command: an argparse root and a registry of subcommands.

Each subcommand is a module of :mod:`scalebo.cli` exposing

* ``NAME`` — the subcommand's name (``str``);
* ``HELP`` — one line for ``scalebo --help``;
* ``DESCRIPTION`` (optional) — longer text for ``scalebo NAME --help``;
* ``EPILOG`` (optional) — text after the options, or a callable returning it, called only
  when the help is printed (for a list the library must be imported to build);
* ``add_arguments(parser)`` — declares its options on an ``argparse.ArgumentParser``;
* ``run(args) -> int`` — does the work and returns the exit code.

**Adding a subcommand is a one-line change**: write ``src/scalebo/cli/<name>.py`` with the
attributes above and add ``"<name>",`` on its own line to :data:`COMMAND_MODULES`. Import
numpy, pandas and the library inside ``run`` (or the helpers it calls), not at module level,
so that ``scalebo --help`` stays instant whatever the number of commands.

Conventions (as in Optuna's CLI): data go to stdout, logs / progress / warnings to stderr.
Exit codes: 0 success; 1 a fit (or search) that produced no usable estimate
(:class:`~scalebo.errors.FitError`) or did not converge; 2 bad input or usage
(:class:`~scalebo.errors.RunTableError`, ``ValueError``, ``FileNotFoundError``,
:class:`~scalebo.errors.SearchError`, a missing optional extra:
:class:`~scalebo.errors.MissingExtraError`, argparse errors); 3 nothing left to suggest: the
budget is spent or nothing untried fits it (:class:`~scalebo.errors.BudgetExhausted`), so a
worker loop can stop on it without mistaking a typo for the end; 130 interrupted. Library errors are
printed as one ``error: ...`` line, without a traceback (``SCALEBO_DEBUG=1`` re-raises them).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

from scalebo import __version__
from scalebo.cli.common import set_quiet
from scalebo.errors import (
    BudgetExhausted,
    FitError,
    MissingExtraError,
    RunTableError,
    SearchError,
)

#: Subcommand modules of :mod:`scalebo.cli`, in ``--help`` order. One line per command.
COMMAND_MODULES: tuple[str, ...] = (
    "fit",
    "allocate",
    "bench",
    "demo",
    "fragility",
    "replay",
    "suggest",
    "status",
    "design",
)

EXIT_OK = 0
EXIT_FIT_ERROR = 1
EXIT_INPUT_ERROR = 2
EXIT_BUDGET_SPENT = 3
EXIT_INTERRUPTED = 130

DESCRIPTION = """\
scalebo: fit LLM scaling laws robustly and choose which training runs to do.

units:
  N     model size in parameters
  D     training tokens
  C     training compute in FLOPs (6*N*D unless the table has a C column)
  loss  cross-entropy in nats (laws are fitted on natural-log residuals)
"""

EPILOG = """\
input files: CSV, TSV, Parquet or JSON lines with columns N, D, loss (and optionally C,
run_id, hyperparameters); map other names with --map N=params,D=tokens. Public datasets:
dataset:NAME (steplaw, steplaw_moe, oellm_english, epoch_chinchilla, porian_isoflop, gemstones,
gadre_overtraining) with --data-dir or $SCALEBO_DATA_DIR.
Run 'scalebo COMMAND --help' for details.
exit codes: 0 ok, 1 fit failed or did not converge, 2 bad input or usage, 3 the budget
is spent (suggest: nothing left to propose), 130 interrupted.
"""


def _commands() -> list[ModuleType]:
    return [importlib.import_module(f"scalebo.cli.{name}") for name in COMMAND_MODULES]


#: The loaded subcommand modules (see the module docstring for their interface).
COMMANDS: list[ModuleType] = _commands()


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose ``epilog`` may be a callable, called (once) when the help
    is printed, so that parsing never pays for building it, and which reads ``-1e24`` as a
    negative number (a value its option then refuses with a reason), not as an unknown
    option (Python's own rule knows ``-1`` and ``-0.5`` only)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-((\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)$", re.IGNORECASE)

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """The root parser with one subparser per module of :data:`COMMANDS`."""
    parser = _Parser(
        prog="scalebo",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"scalebo {__version__}")
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        help="no progress or log lines on stderr (warnings and errors are still shown)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands",
                                help="one of the commands below")
    for module in COMMANDS:
        cmd = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=getattr(module, "EPILOG", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.add_argument("-q", "--quiet", dest="quiet",
                         action="store_true", default=argparse.SUPPRESS,
                         help="no progress or log lines on stderr")
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from scalebo.cli.common import warn

    warn(message)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit code."""
    with warnings.catch_warnings():  # warnings while parsing too (e.g. a large --tolerance)
        warnings.showwarning = _show_warning
        return _parse_and_run(argv)


def _parse_and_run(argv: Sequence[str] | None) -> int:
    """:func:`main` inside its warning hook: parse, run, map exceptions to exit codes."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_INPUT_ERROR
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT_ERROR
    set_quiet(args.quiet)
    debug = bool(os.environ.get("SCALEBO_DEBUG"))
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. '| head': the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except FitError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FIT_ERROR
    except BudgetExhausted as exc:  # before SearchError, its base class
        if debug:
            raise
        print(f"stop: {exc}", file=sys.stderr)
        return EXIT_BUDGET_SPENT
    except (RunTableError, SearchError, ValueError, FileNotFoundError,
            IsADirectoryError, MissingExtraError) as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
