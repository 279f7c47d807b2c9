"""Exceptions and warnings raised by scalebo.

Three outcomes, as in SciPy and the Open-Athena scaling-law package:

* bad input raises :class:`RunTableError` (a ``ValueError``) that names the file, the row and
  the column, and says what was expected;
* a fit with no usable estimate raises :class:`FitError`;
* anything else returns a result with a ``status`` and a ``message``.
"""

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

#: Data rows a message lists before "(and k more)".
ROWS_SHOWN = 5


def shown(value: object) -> str:
    """A table value as a :class:`RunTableError` message shows it: text quoted, numbers plain
    (``nan``, not ``np.float64(nan)``)."""
    return repr(value) if isinstance(value, str) else str(value)


def data_rows(positions: Iterable[int]) -> str:
    """0-based file rows as 1-based data rows: ``"data rows 3, 7 (and 4 more)"``."""
    rows = [int(p) + 1 for p in positions]
    shown_ = ", ".join(str(r) for r in rows[:ROWS_SHOWN])
    more = f" (and {len(rows) - ROWS_SHOWN} more)" if len(rows) > ROWS_SHOWN else ""
    return f"data row{'s' if len(rows) > 1 else ''} {shown_}{more}"


def file_rows(index: Iterable[object], mask: Iterable[bool]) -> list[int]:
    """The 0-based file rows of the rows under ``mask``: their ``index`` labels when every
    label is an integer (a loaded table keeps its file rows as its index), else their
    positions (a DataFrame indexed by names or dates)."""
    labels, flags = list(index), [bool(m) for m in mask]
    if all(isinstance(i, numbers.Integral) for i in labels):
        return [int(i) for i, m in zip(labels, flags, strict=True) if m]
    return [k for k, m in enumerate(flags) if m]


def shown_config(config: dict) -> str:
    """A configuration as messages show it: ``(N=1e+08, D=1e+09, lr=0.001)`` (numbers in
    ``%g``, text quoted), not a Python dict."""
    def one(v: object) -> str:
        number = isinstance(v, int | float) and not isinstance(v, bool)
        return format(v, "g") if number else shown(v)

    return "(" + ", ".join(f"{k}={one(v)}" for k, v in config.items()) + ")"


def closest(name: object, known: list[str] | tuple[str, ...], cutoff: float = 0.6) -> str | None:
    """The name among ``known`` closest to ``name`` (:func:`difflib.get_close_matches` at
    ``cutoff``, at most 0.5 for a name of up to 3 characters, where one wrong letter of two
    scores 0.5: ``bz`` for ``bs``), or None: what a "did you mean" hint offers."""
    import difflib

    if len(str(name)) <= 3:
        cutoff = min(cutoff, 0.5)
    match = difflib.get_close_matches(str(name), list(known), n=1, cutoff=cutoff)
    return match[0] if match else None


def yaml_problem(exc: Exception) -> str:
    """Where and what a YAML syntax error (``yaml.YAMLError``) is, as messages append it to
    "not valid YAML": `` at line 5, column 12: expected ',' or '}', but got '<stream end>'``."""
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{at}: {problem}"


def with_hints(names: list[str], known: list[str] | tuple[str, ...],
               cutoff: float = 0.6) -> str:
    """``names`` as messages list them, each with its :func:`closest` hint:
    ``'parmas' (did you mean 'params'?), 'x'``."""
    def one(name: str) -> str:
        hint = closest(name, known, cutoff)
        return f"{name!r}" + (f" (did you mean {hint!r}?)" if hint else "")

    return ", ".join(one(n) for n in names)


def shown_rows(rows: list[int]) -> str:
    """1-based data rows as messages show them: ``data row 4``, ``data rows 3 and 7``,
    ``data rows 1, 2 and 5``."""
    if len(rows) == 1:
        return f"data row {rows[0]}"
    return f"data rows {', '.join(str(r) for r in rows[:-1])} and {rows[-1]}"


class ScaleboError(Exception):
    """Base class of every scalebo exception."""


class RunTableError(ScaleboError, ValueError):
    """A run table is malformed: the message names the source, row(s) and column."""


class FitError(ScaleboError, RuntimeError):
    """No start of a fit produced a finite estimate."""


class SearchError(ScaleboError, ValueError):
    """A search request cannot be served (off-grid run, spent budget, no candidate)."""


class BudgetExhausted(SearchError):
    """The budget is spent, or no untried configuration fits what is left of it.

    ``account`` holds the campaign's budget accounting when the raiser knows it (``budget``,
    ``spent``, ``pending``, ``remaining``, ``C_total``, ``unit``; empty otherwise), so that a
    caller can still report it.
    """

    def __init__(self, message: str, account: dict | None = None) -> None:
        super().__init__(message)
        self.account = dict(account or {})


class DataDirError(ScaleboError, FileNotFoundError):
    """The public datasets folder is not given (``SCALEBO_DATA_DIR`` / ``data_dir``), is not
    a directory, or lacks a dataset's file: the message names which and the expected layout."""


class MissingExtraError(ScaleboError, ImportError):
    """An optional extra (``pip install 'scalebo[trees]'``, ``[dask]``, ``[optuna]``) is not
    installed; the message says what needed it and how to install it
    (:func:`scalebo.extras.require_extra`)."""


class NumericalWarning(UserWarning):
    """A numerical fallback was used (jitter added to a Cholesky, clipped values, …)."""


class ExcludedRunsWarning(UserWarning):
    """Some runs were excluded from a table (non-finite or diverged loss); the count is given.
    Messages end with :data:`EXCLUDED_IN_PYTHON`, which the CLI leaves out (its users have
    no ``RunTable``; the message already names the data rows)."""


#: The sentence ending an :class:`ExcludedRunsWarning`, for library users.
EXCLUDED_IN_PYTHON = " They are listed in RunTable.excluded."


def missing_columns(missing: list[str], have: Iterable[object],
                    renamable: Sequence[str]) -> str:
    """``columns 'lr' (the file has 'LR') are missing; ...``: each missing column with the
    file's column of the same name but for case (else the closest), and how to fix it:
    ``--map`` renames only the ``renamable`` (canonical) columns, other axes match by name."""
    have = [str(c) for c in have]

    def one(c: str) -> str:
        near = next((h for h in have if h.lower() == c.lower()), None) or closest(c, have)
        return f"{c!r}" + (f" (the file has {near!r})" if near else "")

    canonical = [c for c in missing if c in renamable]
    how = [f"--map {','.join(f'{c}=<column>' for c in canonical)} names the file's column for "
           f"{', '.join(canonical)}"] if canonical else []
    if len(canonical) < len(missing):
        how.append("other axes are matched by name (--map renames only "
                   f"{', '.join(renamable)}): rename the file's column or the grid's "
                   "axis")
    return (f"column{'s' if len(missing) > 1 else ''} {', '.join(one(c) for c in missing)} "
            f"{'are' if len(missing) > 1 else 'is'} missing; {'; '.join(how)}")


def grid_value(value: Any) -> Any:
    """A grid value as proposals give it: a whole number as an int (a batch size of 256,
    not 256.0; up to 2^53, where floats stop being exact), anything else unchanged."""
    import numpy as np

    if (isinstance(value, (float, np.floating)) and math.isfinite(value)
            and float(value).is_integer() and abs(value) < 2.0 ** 53):
        return int(value)
    return value


def exact_number(value: Any) -> str:
    """A grid value as text that reads back to the same float: 6 significant digits when
    they do (``1e+09``, ``0.003``), else the shortest exact form (``0.0049593113``; a whole
    number in full, ``187973632``), so a value copied from a message or a table into a runs
    or grid file is on the grid; ``-`` for a missing or NaN value, text as it is."""
    import numpy as np

    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        short = f"{float(value):.6g}"
        if float(short) == float(value):
            return short
        whole = grid_value(value)
        return str(whole) if isinstance(whole, int) else repr(float(value))
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "-"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return str(value)
