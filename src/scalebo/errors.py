"""Exceptions and warnings raised by scalebo.

Three outcomes, as in SciPy and the Open-Athena scaling-law package:

* bad input raises :class:`RunTableError` (a ``ValueError``) that names the file, the row and
  the column, and says what was expected;
* a fit with no usable estimate raises :class:`FitError`;
* anything else returns a result with a ``status`` and a ``message``.
"""


def shown(value: object) -> str:
    """A table value as a :class:`RunTableError` message shows it: text quoted, numbers plain
    (``nan``, not ``np.float64(nan)``)."""
    return repr(value) if isinstance(value, str) else str(value)


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


class MissingExtraError(ScaleboError, ImportError):
    """An optional extra (``pip install 'scalebo[trees]'``, ``[dask]``, ``[optuna]``) is not
    installed; the message says what needed it and how to install it
    (:func:`scalebo.extras.require_extra`)."""


class NumericalWarning(UserWarning):
    """A numerical fallback was used (jitter added to a Cholesky, clipped values, …)."""


class ExcludedRunsWarning(UserWarning):
    """Some runs were excluded from a table (non-finite or diverged loss); the count is given."""
