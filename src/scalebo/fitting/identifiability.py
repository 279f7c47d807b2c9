"""Can a law be identified from its inputs? Distinct input points against parameters.

A least-squares (or Huber) fit of a law with ``p`` parameters is determined only by the
*distinct* input points: six runs at one compute give one value of ``C`` however many losses
are recorded there, and ``L(C) = E + A·C^−α`` (``p = 3``) then has a whole curve of exact
optima. The optimizer still stops ("converged"), so the fit must say that the law cannot be
identified instead (:attr:`scalebo.fitting.robust.FitStatus.UNIDENTIFIED`).

Five necessary conditions are checked (none is sufficient in general):

1. the number of distinct rows of ``X`` (among rows of positive weight) is at least
   ``law.n_params``;
2. for a sum of power laws (:class:`~scalebo.laws.PowerLawSum`) whose terms are in different
   variables, every term's variable takes at least 3 distinct values: with two values the
   term ``A·X^−α`` and the constant ``E`` can trade a constant (``E + c``, ``A·X^−α − c`` fit
   equally well), with one value the term is a constant;
3. for such a sum, the logs of its variables are not affinely dependent over the points:
   runs all at ``D = c·N^b`` (a "diagonal" grid, e.g. 20 tokens per parameter) make
   ``B/D^β = (B·c^−β)/N^(bβ)`` a second power of ``N``, and the two terms can swap roles
   (``N``'s term with exponent ``bβ``, ``D``'s with ``α/b``) with the same fit;
4. for a sum of power laws, every term's variable spans at least a factor
   :data:`MIN_SPAN` (largest over smallest positive value): over a narrower range ``X^−α``
   is nearly a straight line, and its exponent trades with its coefficient and ``E`` (a
   mixture-of-experts table whose total parameter count differs by 0.3 % between models).
5. for a law written as a formula, its parameters' effects on the prediction are not
   collinear over the points at every parameter vector drawn inside the bounds (16 draws, of
   which at least 3 must have every parameter act)
   (``c0 + A·V^b·P^e`` on runs at one ``V``: ``b`` only rescales ``A``).

Notation: ``X`` is ``(n, k)`` inputs in natural units, columns ``law.variables``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from scalebo.laws import Law, PowerLawSum, as_inputs

__all__ = ["EXACT_FIT", "JACOBIAN_DRAWS", "JACOBIAN_ROWS", "JACOBIAN_TOL", "LOG_DEPENDENCE_TOL",
           "MIN_SPAN", "MIN_VALUES_PER_TERM", "UNCHECKED_TERM", "distinct_points",
           "exact_fit_note", "exact_term_note", "identification_problem", "with_exact_fit_note"]

#: How :func:`exact_fit_note` begins (a fit's message holds it when the law is exactly
#: determined; ``scalebo replay`` marks such fits "exact").
EXACT_FIT = "exactly determined"
#: The words a converged fit's message holds when a term's variable takes only
#: :data:`MIN_VALUES_PER_TERM` values (:func:`exact_term_note`): its exponent is not tested.
UNCHECKED_TERM = "unchecked;"

#: Distinct values a power term's variable needs beside the constant E (see module docstring).
MIN_VALUES_PER_TERM = 3

#: Smallest ratio of a power term's largest to smallest input (see module docstring).
MIN_SPAN = 1.2


def distinct_points(X: np.ndarray) -> int:
    """Number of distinct rows of ``X`` ``(n, k)`` (exact equality of the floats)."""
    X = np.asarray(X, dtype=np.float64)
    return int(np.unique(X, axis=0).shape[0]) if X.shape[0] else 0


def _points_name(law: Law, count: int) -> str:
    if len(law.variables) == 1:
        return f"value{'' if count == 1 else 's'} of {law.variables[0]}"
    return f"({', '.join(law.variables)}) point{'' if count == 1 else 's'}"


def _data_rows(law: Law, X: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``X`` as the law's inputs ``(n, k)``, without the rows of weight 0 (not data)."""
    X = as_inputs(X, law.variables)
    return X if weights is None else X[np.asarray(weights, dtype=np.float64).ravel() > 0]


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
    X = _data_rows(law, X, weights)
    n, p = X.shape[0], law.n_params
    pts = np.unique(X, axis=0) if n else X  # distinct rows, as distinct_points counts them
    k = pts.shape[0]
    if k < p:
        return (f"{n} run{'' if n == 1 else 's'} but only {k} distinct "
                f"{_points_name(law, k)}; the law has {p} parameters")
    if isinstance(law, PowerLawSum) and (narrow := _narrow_term(law, X)):
        return f"{n} runs but {narrow}"
    if isinstance(law, PowerLawSum) and len(law.variables) > 1:
        if len(set(law.variables)) == len(law.variables):
            for j, term in enumerate(law.terms):
                m = int(np.unique(X[:, j]).size)
                if m < MIN_VALUES_PER_TERM:
                    return (f"{n} runs but only {m} distinct value{'' if m == 1 else 's'} of "
                            f"{term.variable}; its term {term.coef}·{term.variable}^-"
                            f"{term.exponent} needs {MIN_VALUES_PER_TERM} to be told apart "
                            "from the constant E")
            return _log_dependence(law, pts)
    from scalebo.laws.formula import FormulaLaw

    if isinstance(law, FormulaLaw):
        return _collinear_parameters(law, pts)
    return ""


#: Relative size of the smallest singular value of a formula law's column-scaled Jacobian
#: under which its parameters count as not identified (exact trade-offs give ~1e-16).
JACOBIAN_TOL = 1e-10
#: Rows of one block of the Jacobian test (its memory: a block's square of floats).
JACOBIAN_ROWS = 400
#: Parameter vectors drawn inside the bounds at which the Jacobian test looks.
JACOBIAN_DRAWS = 16


def _collinear_parameters(law: Any, pts: np.ndarray) -> str:
    """Condition 5, for a law written as a formula: the parameters whose effects on the
    prediction cannot be told apart over the distinct rows ``pts`` — the Jacobian
    (rows × parameters, columns scaled to unit norm) is singular at every one of
    :data:`JACOBIAN_DRAWS` parameter vectors drawn inside the bounds where it can be judged
    (an exponent of a variable with one value trades with its coefficient: ``A·V^b`` at one
    ``V``). A draw where the formula is not finite or a parameter has no effect at all (a
    saturated sigmoid) says nothing; with fewer than 3 draws that say something, or one of
    full rank, ``""``."""
    Z, k = law.prepare(pts), pts.shape[0]
    nulls = []
    for theta in law.random_starts(JACOBIAN_DRAWS, seed=0):
        J, value = _jacobian(law, theta, Z)
        norms = np.linalg.norm(J, axis=0)
        if not (np.all(np.isfinite(J)) and np.all(np.isfinite(value)) and np.all(norms > 0)):
            continue
        _, sv, vt = np.linalg.svd(J / norms, full_matrices=False)
        if sv[-1] > JACOBIAN_TOL * sv[0]:
            return ""
        nulls.append(np.abs(vt[-1]))
    if len(nulls) < 3:
        return ""
    null = nulls[0]
    names = [law.natural_names[j] for j in np.flatnonzero(null > 0.1 * null.max())]
    single = [v for j, v in enumerate(law.variables) if np.unique(pts[:, j]).size == 1]
    return (f"{k} distinct ({', '.join(law.variables)}) points, but the parameters "
            f"{', '.join(names)} change the prediction in ways these points cannot tell apart"
            + (f" ({', '.join(single)} take{'s' if len(single) == 1 else ''} one value)"
               if single else ""))


def _jacobian(law: Any, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(J, value)``: the ``(n, p)`` Jacobian of ``law``'s natural prediction w.r.t. its
    internal parameters at ``theta`` ``(p,)`` over the prepared rows ``Z``, and the
    predictions ``(n,)``, built :data:`JACOBIAN_ROWS` rows at a time (row i of a block is the
    vector-Jacobian product with the i-th unit vector)."""
    rows, values = [], []
    for start in range(0, Z.shape[0], JACOBIAN_ROWS):
        block = Z[start:start + JACOBIAN_ROWS]
        value, vjp = law.predict_natural_vjp(np.repeat(theta[None, :], len(block), axis=0),
                                             block)
        rows.append(vjp(np.eye(len(block))))
        values.append(np.diagonal(value) if value.ndim == 2 else value)
    return np.vstack(rows), np.concatenate(values)


def _narrow_term(law: PowerLawSum, X: np.ndarray) -> str:
    """Condition 4: the first term whose variable spans less than :data:`MIN_SPAN`, said as
    the rest of a reason (``""`` when none does, or the inputs are not all positive)."""
    for term in law.terms:
        col = X[:, law.variables.index(term.variable)]
        if col.size < 2 or not np.all(col > 0) or np.unique(col).size < 2:
            continue  # conditions 1 and 2 speak for too few values
        lo, hi = float(col.min()), float(col.max())
        if hi < MIN_SPAN * lo:
            return (f"{term.variable} spans only {100 * (hi / lo - 1):.3g} % ({lo:.4g} to "
                    f"{hi:.4g}); its term {term.coef}·{term.variable}^-{term.exponent} needs "
                    f"a factor of at least {MIN_SPAN:g} to be told apart from the constant E")
    return ""


#: Relative size of the smallest singular value of the centred log inputs under which the
#: variables count as affinely dependent in log space (exact diagonals give ~1e-16).
LOG_DEPENDENCE_TOL = 1e-9


def _log_dependence(law: Law, pts: np.ndarray) -> str:
    """Why the logs of the columns of ``pts`` (the distinct input rows) are affinely
    dependent, or ``""`` (condition 3 of the module docstring; non-positive inputs: ``""``)."""
    if not np.all(pts > 0):
        return ""
    logs = np.log(pts)
    centred = logs - logs.mean(axis=0)
    sv = np.linalg.svd(centred, compute_uv=False)
    if sv[0] == 0 or sv[-1] > LOG_DEPENDENCE_TOL * sv[0]:
        return ""
    names = law.variables
    if len(names) == 2:
        slope = float(np.polyfit(logs[:, 0], logs[:, 1], 1)[0])
        relation = f"{names[1]} ∝ {names[0]}^{slope:.3g} at every point"
    else:
        relation = f"log {', log '.join(names)} are affinely dependent over the points"
    return (f"{pts.shape[0]} distinct ({', '.join(names)}) points, but {relation}: the terms "
            f"in {' and '.join(names)} can trade roles with the same fit (runs at a fixed "
            "number of tokens per parameter, or any D = c·N^b, cannot separate them)")


def exact_fit_note(law: Law, X: np.ndarray, weights: np.ndarray | None = None) -> str:
    """A note when ``law`` has exactly as many parameters as ``X`` has distinct points (rows of
    positive weight), else ``""``.

    Such a law is identified but not tested: it passes through every point (objective ≈ 0)
    and leaves no residual to measure its error by, and every bootstrap resample that still
    identifies it holds all the points, so its percentile intervals have zero width. With
    repeated inputs it passes through each point's centre instead, and the residuals
    measure only the scatter among repeats, not the law's shape.
    """
    X = _data_rows(law, X, weights)
    k, p = distinct_points(X), law.n_params
    if k != p:
        return ""
    head = f"{EXACT_FIT}: {k} distinct {_points_name(law, k)} for {p} parameters"
    if X.shape[0] == k:
        return (f"{head}, so the law passes through every point and nothing tests it (no "
                "residual degree of freedom; bootstrap intervals have zero width)")
    return (f"{head}, so the law passes through each point's centre and its residuals measure "
            f"only the scatter among the {X.shape[0]} runs' repeats, not the law's shape")


def exact_term_note(law: Law, X: np.ndarray) -> str:
    """A note for a sum of power laws in distinct variables naming each term whose variable
    takes exactly :data:`MIN_VALUES_PER_TERM` values, else ``""``. The law's values at those
    three levels are three free numbers (whatever the other variables' design), and the term
    and E — three parameters — pass through them, so nothing tests the term's shape in that
    variable and its exponent is whatever goes through them (a 3 N × 4 D Chinchilla grid:
    α 0.29 for a true 0.34 on residuals that look noise-free). Only a converged fit gets it:
    levels the term cannot pass through end at a bound, which tells the shape was tested."""
    if not (isinstance(law, PowerLawSum) and len(law.variables) > 1
            and len(set(law.variables)) == len(law.variables)):
        return ""
    X = as_inputs(X, law.variables)
    terms = [t for j, t in enumerate(law.terms)
             if int(np.unique(X[:, j]).size) == MIN_VALUES_PER_TERM]
    if not terms:
        return ""
    said = " and ".join(f"{t.variable} takes only {MIN_VALUES_PER_TERM} values: its term "
                        f"{t.coef}·{t.variable}^-{t.exponent} and E pass through them exactly"
                        for t in terms)
    exps = " and ".join(t.exponent for t in terms)
    return (f"{said}, so the runs do not test the shape in {'that' if len(terms) == 1 else 'each'}"
            f" variable ({exps} {UNCHECKED_TERM} {MIN_VALUES_PER_TERM + 1} or more values would "
            "check it)")


def with_exact_fit_note(fit: Any, X: np.ndarray, weights: np.ndarray | None = None) -> Any:
    """``fit`` (a :class:`~scalebo.fitting.robust.FitResult`) with :func:`exact_fit_note`
    appended to its message (or, for a converged fit, :func:`exact_term_note`), unless it is
    unidentified or the note is empty."""
    if str(fit.status) == "unidentified":
        return fit
    note = exact_fit_note(fit.law, X, weights)
    if not note and str(fit.status) == "converged":
        note = exact_term_note(fit.law, _data_rows(fit.law, X, weights))
    return replace(fit, message=f"{fit.message}; {note}") if note else fit
