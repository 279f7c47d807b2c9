"""Values a built-in law cannot fit, named by file, 1-based data row and column before fitting.

``load_runs`` checks the canonical columns (N, D, C, loss); a law's other inputs (``width``,
``depth``, any column of ``powerlaw:X,Y``) and a response named with ``--response`` (a
downstream error) reached the fit unchecked: a NaN, a 0 or a text value ended as "needs
positive, finite inputs" (no row, no column), an opaque non-finite objective, or — an error
rate of 1.3, or of 30 (a percentage) — a fit that silently "converged" or hit a bound.

Domains: every built-in law is fitted on natural-log residuals, so its response must be a
finite number > 0; a power law's inputs (logged) must be > 0; a downstream law's response is
an error rate in (0, 1] and its input, the loss in nats, a finite number > 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from scalebo.data.columns import to_numbers
from scalebo.laws import Law, PowerLawSum

__all__ = ["check_law_inputs"]


def _domain(law: Law, column: str, target: str) -> tuple[str, float, float, bool]:
    """(what is expected, lower bound, upper bound, whether the upper bound is included)."""
    downstream = tuple(law.variables) == ("loss",)
    if column == target and downstream:
        return "an error rate in (0, 1] (e.g. 1 - accuracy)", 0.0, 1.0, True
    if column == target or isinstance(law, PowerLawSum) or downstream:
        return "a finite number > 0", 0.0, np.inf, False
    return "a finite number", -np.inf, np.inf, False


def check_law_inputs(frame: pd.DataFrame, law: Law, target: str, source: str,
                     columns: Sequence[str] | None = None,
                     shown: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` for the first row whose value of a law input or of ``target`` lies
    outside the law's domain (module docstring), naming ``source``, the 1-based data row
    (``frame.index`` + 1: the 0-based position in the source, as a
    :class:`~scalebo.data.runs.RunTable` keeps it), the column and the value.

    Args:
        frame: the rows to fit (every loaded row: a bad row is an error, not left out).
        law: the law; its ``variables`` and ``target`` are checked (``columns`` to restrict).
        target: the response column.
        source: the file (or ``"<DataFrame>"``) for the message.
        shown: the user's name of a column the caller renamed (law name → user's name).
    """
    for column in columns or (*law.variables, target):
        if column not in frame.columns:
            continue  # a missing column has its own message (select_points)
        values = to_numbers(frame[column]).to_numpy(dtype=np.float64)
        expected, lo, hi, closed = _domain(law, column, target)
        ok = np.isfinite(values) & (values > lo) & ((values <= hi) if closed else (values < hi))
        if ok.all():
            continue
        bad = np.flatnonzero(~ok)
        j = int(bad[0])
        role = "response" if column == target else "input"
        more = f" ({bad.size} rows in all)" if bad.size > 1 else ""
        hint = ""
        finite = values[np.isfinite(values)]
        if column == target and closed and finite.size and np.all(finite <= 100) \
                and np.median(finite) > 1:
            hint = "; percentages? give the error as a fraction (divide by 100)"
        name = (shown or {}).get(column, column)
        raise ValueError(f"{source}: column {name!r} ({role} of law {law.name!r}), data row "
                         f"{int(frame.index[j]) + 1}: expected {expected}, got "
                         f"{_shown(frame[column].iloc[j])}{more}{hint}")


def _shown(value: object) -> str:
    """A cell for a message: ``1.3``, ``nan``, ``'12L'`` (no ``np.float64(...)`` wrapper)."""
    return repr(value.item() if isinstance(value, np.generic) else value)
