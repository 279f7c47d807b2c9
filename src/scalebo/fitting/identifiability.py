"""Can a law be identified from its inputs? Distinct input points against parameters.

A least-squares (or Huber) fit of a law with ``p`` parameters is determined only by the
*distinct* input points: six runs at one compute give one value of ``C`` however many losses
are recorded there, and ``L(C) = E + A·C^−α`` (``p = 3``) then has a whole curve of exact
optima. The optimizer still stops ("converged"), so the fit must say that the law cannot be
identified instead (:attr:`scalebo.fitting.robust.FitStatus.UNIDENTIFIED`).

Two necessary conditions are checked (neither is sufficient in general):

1. the number of distinct rows of ``X`` (among rows of positive weight) is at least
   ``law.n_params``;
2. for a sum of power laws (:class:`~scalebo.laws.PowerLawSum`) whose terms are in different
   variables, every term's variable takes at least 3 distinct values: with two values the
   term ``A·X^−α`` and the constant ``E`` can trade a constant (``E + c``, ``A·X^−α − c`` fit
   equally well), with one value the term is a constant.

Notation: ``X`` is ``(n, k)`` inputs in natural units, columns ``law.variables``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from scalebo.laws import Law, PowerLawSum, as_inputs

__all__ = ["MIN_VALUES_PER_TERM", "distinct_points", "exact_fit_note", "identification_problem",
           "with_exact_fit_note"]

#: Distinct values a power term's variable needs beside the constant E (see module docstring).
MIN_VALUES_PER_TERM = 3


def distinct_points(X: np.ndarray) -> int:
    """Number of distinct rows of ``X`` ``(n, k)`` (exact equality of the floats)."""
    X = np.asarray(X, dtype=np.float64)
    return int(np.unique(X, axis=0).shape[0]) if X.shape[0] else 0


def _points_name(law: Law, count: int) -> str:
    if len(law.variables) == 1:
        return f"value{'' if count == 1 else 's'} of {law.variables[0]}"
    return f"({', '.join(law.variables)}) point{'' if count == 1 else 's'}"


def identification_problem(law: Law, X: np.ndarray, weights: np.ndarray | None = None) -> str:
    """Why ``law`` cannot be identified from inputs ``X`` (n, k), or ``""`` when it can.

    Args:
        law: The law; ``X`` columns follow ``law.variables``.
        X: Inputs in natural units, shape ``(n, k)``.
        weights: Optional weight per row ``(n,)``; rows of weight 0 are not data.

    Returns:
        A one-line reason, e.g. ``"6 runs but only 1 distinct value of C; the law has 3
        parameters"``, or ``""``.
    """
    X = as_inputs(X, len(law.variables))
    if weights is not None:
        X = X[np.asarray(weights, dtype=np.float64).ravel() > 0]
    n, p = X.shape[0], law.n_params
    k = distinct_points(X)
    if k < p:
        return (f"{n} run{'' if n == 1 else 's'} but only {k} distinct "
                f"{_points_name(law, k)}; the law has {p} parameters")
    if isinstance(law, PowerLawSum) and len(law.variables) > 1:
        if len(set(law.variables)) == len(law.variables):
            for j, term in enumerate(law.terms):
                m = int(np.unique(X[:, j]).size)
                if m < MIN_VALUES_PER_TERM:
                    return (f"{n} runs but only {m} distinct value{'' if m == 1 else 's'} of "
                            f"{term.variable}; its term {term.coef}·{term.variable}^-"
                            f"{term.exponent} needs {MIN_VALUES_PER_TERM} to be told apart "
                            "from the constant E")
    return ""


def exact_fit_note(law: Law, X: np.ndarray, weights: np.ndarray | None = None) -> str:
    """A note when ``law`` has exactly as many parameters as ``X`` has distinct points (rows of
    positive weight), else ``""``.

    Such a law is identified but not tested: it passes through every point (objective ≈ 0)
    and leaves no residual to measure its error by, and every bootstrap resample that still
    identifies it holds all the points, so its percentile intervals have zero width. With
    repeated inputs it passes through each point's centre instead, and the residuals
    measure only the scatter among repeats, not the law's shape.
    """
    X = as_inputs(X, len(law.variables))
    if weights is not None:
        X = X[np.asarray(weights, dtype=np.float64).ravel() > 0]
    k, p = distinct_points(X), law.n_params
    if k != p:
        return ""
    head = f"exactly determined: {k} distinct {_points_name(law, k)} for {p} parameters"
    if X.shape[0] == k:
        return (f"{head}, so the law passes through every point and nothing tests it (no "
                "residual degree of freedom; bootstrap intervals have zero width)")
    return (f"{head}, so the law passes through each point's centre and its residuals measure "
            f"only the scatter among the {X.shape[0]} runs' repeats, not the law's shape")


def with_exact_fit_note(fit: Any, X: np.ndarray, weights: np.ndarray | None = None) -> Any:
    """``fit`` (a :class:`~scalebo.fitting.robust.FitResult`) with :func:`exact_fit_note`
    appended to its message, unless it is unidentified or the note is empty."""
    if str(fit.status) == "unidentified":
        return fit
    note = exact_fit_note(fit.law, X, weights)
    return replace(fit, message=f"{fit.message}; {note}") if note else fit
