"""Candidate experiments for a design: a pool of runnable rows and a target region.

A :class:`Pool` holds the inputs of a law (columns ``law.variables``, natural units), the cost
of each row (any positive unit, e.g. FLOPs from ``"6*N*D"``; only ratios to the pool's total
``C = Σ cost`` matter) and, when the experiments have been run (a replay), their responses.
A :class:`TargetRegion` holds the inputs where the law must predict well (typically larger
and costlier than any pool row) and, for scoring only, their responses.

Cost expressions use ``+ - * / **``, unary minus, numbers, ``log``/``exp``/``sqrt`` and
names; a name is a law variable (through the variable map) or any column of the table. They
are parsed with :mod:`ast` and evaluated on numpy columns, never with ``eval``.
"""

from __future__ import annotations

import ast
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scalebo.data.columns import to_numbers
from scalebo.errors import RunTableError, data_rows, shown
from scalebo.fitting.formula_checks import repeated_rows_note, undefined_rows
from scalebo.fitting.formula_fit import table_inputs
from scalebo.laws.formula import FormulaLaw

__all__ = ["Pool", "TargetRegion", "cost_names", "evaluate_cost", "make_pool", "make_target",
           "repeated_inputs_note"]

_FUNCS = {"log": np.log, "exp": np.exp, "sqrt": np.sqrt}
_OPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide,
        ast.Pow: np.power}


def _cost_tree(expr: str) -> ast.expr:
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("cost expression must be a non-empty string, e.g. '6*N*D'")
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"cost expression {expr!r} is not valid: {exc.msg}") from None
    for node in ast.walk(tree):
        ok = isinstance(node, ast.BinOp | ast.UnaryOp | ast.Name | ast.Load | ast.operator
                        | ast.unaryop)
        if isinstance(node, ast.Constant):
            ok = isinstance(node.value, int | float) and not isinstance(node.value, bool)
        if isinstance(node, ast.BinOp):
            ok = type(node.op) in _OPS
        if isinstance(node, ast.UnaryOp):
            ok = isinstance(node.op, ast.USub | ast.UAdd)
        if isinstance(node, ast.Call):
            ok = (isinstance(node.func, ast.Name) and node.func.id in _FUNCS
                  and len(node.args) == 1 and not node.keywords)
        if not ok and not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            token = ast.get_source_segment(expr.strip(), node) or type(node).__name__
            raise ValueError(f"cost expression {expr!r}: {token!r} is not allowed; allowed: "
                             "numbers, names, + - * / **, unary minus, log, exp, sqrt")
    return tree


def cost_names(expr: str) -> tuple[str, ...]:
    """Names a cost expression reads (function names excluded), in order of appearance."""
    tree = _cost_tree(expr)
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return tuple(dict.fromkeys(n.id for n in ast.walk(tree)
                               if isinstance(n, ast.Name) and id(n) not in funcs))


def evaluate_cost(expr: str, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Evaluate ``expr`` (see the module docstring) on ``columns`` ``{name: (n,) array}``.

    Raises:
        ValueError: a disallowed token, or a name that is not in ``columns``.
    """
    tree = _cost_tree(expr)

    def go(n: ast.AST) -> np.ndarray:
        if isinstance(n, ast.Constant):
            return np.float64(n.value)
        if isinstance(n, ast.Name):
            if n.id not in columns:
                raise ValueError(f"cost expression {expr!r} uses {n.id!r}, which is neither a "
                                 f"law variable nor a column; available: {sorted(columns)}")
            return np.asarray(columns[n.id], dtype=np.float64)
        if isinstance(n, ast.BinOp):
            return _OPS[type(n.op)](go(n.left), go(n.right))
        if isinstance(n, ast.UnaryOp):
            return -go(n.operand) if isinstance(n.op, ast.USub) else go(n.operand)
        return _FUNCS[n.func.id](go(n.args[0]))  # type: ignore[attr-defined]

    with np.errstate(all="ignore"):
        return np.asarray(go(tree), dtype=np.float64)


@dataclass(frozen=True)
class Pool:
    """Runnable experiments.

    Attributes:
        X: inputs ``(n, k)``, columns ``variables``, natural units.
        cost: cost of each row ``(n,)``, positive, finite (units of the cost expression).
        y: responses ``(n,)`` in natural units, or ``None`` when not yet run.
        variables: the law's input names.
        row_ids: the table's row labels, for reports.
        cost_expr: the cost expression used.
    """

    X: np.ndarray
    cost: np.ndarray
    y: np.ndarray | None
    variables: tuple[str, ...]
    row_ids: tuple = field(default=())
    cost_expr: str = ""

    @property
    def n(self) -> int:
        """Number of candidate rows."""
        return int(self.X.shape[0])

    @property
    def total_cost(self) -> float:
        """``C = Σ cost`` over the whole pool; budgets are fractions of it."""
        return float(self.cost.sum())


@dataclass(frozen=True)
class TargetRegion:
    """Inputs ``X`` ``(m, k)`` where predictions matter; ``y`` ``(m,)`` for scoring or None."""

    X: np.ndarray
    y: np.ndarray | None = None


def _numeric(frame: pd.DataFrame, column: str, source: str) -> np.ndarray:
    values = to_numbers(frame[column]).to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise RunTableError(f"{source}: data row {bad[0] + 1}, column {column!r}: "
                            f"{shown(frame[column].iloc[bad[0]])} is not a finite number")
    return values


def _inputs(law: FormulaLaw, frame: pd.DataFrame, vmap: Mapping[str, str],
            source: str) -> np.ndarray:
    try:
        table_inputs(law, frame, vmap)
    except RunTableError as exc:
        raise RunTableError(f"{source}: {exc}") from None
    return np.column_stack([_numeric(frame, vmap.get(v, v), source) for v in law.variables])


def _check_defined(law: FormulaLaw, X: np.ndarray, vmap: Mapping[str, str],
                   source: str) -> np.ndarray:
    """``X``, or RunTableError naming a row the formula is undefined on (a fit would hold
    its residual constant, i.e. silently leave it out)."""
    if said := undefined_rows(law, law.random_starts(16, 0), X,
                              {v: vmap.get(v, v) for v in law.variables}, source,
                              "at 16 parameter vectors drawn inside the bounds"):
        raise RunTableError(said)
    return X


def _response(frame: pd.DataFrame, response: str | None, source: str,
              required: bool) -> np.ndarray | None:
    if response is None or (response not in frame.columns and not required):
        return None
    if response not in frame.columns:
        raise RunTableError(f"{source}: no response column {response!r}; columns are "
                            f"{list(frame.columns)} (choose one with --response; response= "
                            "in Python)")
    return _numeric(frame, response, source)


def make_pool(frame: pd.DataFrame, law: FormulaLaw, cost: str, *,
              response: str | None = None, variable_map: Mapping[str, str] | None = None,
              require_response: bool = False, source: str = "pool",
              allow_empty: bool = False) -> Pool:
    """A :class:`Pool` from a table.

    Args:
        frame: one row per candidate experiment.
        law: the formula law (its ``variables`` are looked up through ``variable_map``).
        cost: cost expression over law variables and table columns, e.g. ``"6*N*D"``.
        response: response column; read when present (required if ``require_response``).
        variable_map: ``{formula name: column}``.
        source: name of the table in error messages (e.g. the file path).
        allow_empty: a table of no rows (a header alone) is a pool of none, e.g. a
            campaign's runs done before the first one (else an error).

    Raises:
        RunTableError: a missing or non-numeric column, or a cost that is not positive and
            finite, naming ``source``, the data row (1-based) and the column.
    """
    vmap = dict(variable_map or {})
    if len(frame) == 0 and not allow_empty:
        raise RunTableError(f"{source}: the table has no rows")
    if said := repeated_rows_note(frame, source, "counts as a row of its own"):
        warnings.warn(said, UserWarning, stacklevel=2)
    X = _inputs(law, frame, vmap, source)
    cols = {c: frame[c].to_numpy() for c in frame.columns if isinstance(c, str)}
    cols.update({v: X[:, i] for i, v in enumerate(law.variables)})
    for name in cost_names(cost):
        if name in cols and name not in law.variables:
            cols[name] = _numeric(frame, name, source)
    c = evaluate_cost(cost, cols) * np.ones(len(frame))
    bad = np.flatnonzero(~(np.isfinite(c) & (c > 0)))
    if bad.size:
        raise RunTableError(f"{source}: data row {bad[0] + 1}: cost {cost!r} = "
                            f"{float(c[bad[0]]):g} is not a positive finite number")
    _check_defined(law, X, vmap, source)
    y = _response(frame, response, source, require_response)
    return Pool(X=X, cost=c, y=y, variables=law.variables, row_ids=tuple(frame.index.tolist()),
                cost_expr=cost)


def make_target(frame: pd.DataFrame, law: FormulaLaw, *, response: str | None = None,
                variable_map: Mapping[str, str] | None = None,
                source: str = "target region", group: str | None = None) -> TargetRegion:
    """A :class:`TargetRegion` from a table (responses read when the column is present).

    Warns when target rows repeat one another: in every column, or in their inputs (and
    ``group`` column, when the law is fitted per group) with other values elsewhere, e.g.
    two responses for one input (:func:`repeated_inputs_note`)."""
    if len(frame) == 0:
        raise RunTableError(f"{source}: the table has no rows")
    vmap = dict(variable_map or {})
    if said := repeated_rows_note(frame, source, "is scored as a row of its own"):
        warnings.warn(said, UserWarning, stacklevel=2)
    X = _check_defined(law, _inputs(law, frame, vmap, source), vmap, source)
    if said := repeated_inputs_note(frame, X, [vmap.get(v, v) for v in law.variables],
                                    source, group, response):
        warnings.warn(said, UserWarning, stacklevel=2)
    return TargetRegion(X=X, y=_response(frame, response, source, required=False))


def repeated_inputs_note(frame: pd.DataFrame, X: np.ndarray, columns: list[str], source: str,
                         group: str | None = None, response: str | None = None) -> str:
    """A note naming the target rows (1-based data rows) whose inputs ``X`` (read from
    ``columns``; and ``group`` value, when given) equal another row's while another column
    differs, or ``""``: each is scored as a row of its own, so the input weighs once per row;
    when the ``response`` column is among those that differ, one input also cannot be
    predicted to both values (said only then: rows that differ in an ID or a label alone
    have one response). Rows that are copies in every column are
    :func:`repeated_rows_note`'s."""
    keys = pd.DataFrame(X, columns=[f"_x{i}" for i in range(X.shape[1])], index=frame.index)
    if group is not None and group in frame.columns:
        keys["_g"] = frame[group].astype(str).to_numpy()
    cell = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    others = [c for c in frame.columns if c not in set(columns) and c != group]
    rows: list[int] = []
    differ: list[str] = []
    for g in np.flatnonzero(np.bincount(cell) > 1):
        at = np.flatnonzero(cell == g)
        part = frame.iloc[at][others]
        varied = [str(c) for c in others if part[c].astype(str).nunique() > 1]
        if varied:
            rows += at.tolist()
            differ += [c for c in varied if c not in differ]
    if not rows:
        return ""
    names = ", ".join(columns) + (f" and {group}" if group is not None else "")
    said = (f"{source}: {data_rows(sorted(rows))} repeat another target row's {names} but "
            f"differ in {', '.join(differ)} ({len(rows)} rows): each is scored as a row of "
            "its own, so the input weighs once per row in the R² and the coverage")
    if response is not None and response in differ:
        return (f"{said}, and one input cannot be predicted to two values of {response} "
                "(average them, or keep one row per input)")
    same = f", with one value of {response}" if response in frame.columns else ""
    return f"{said}{same} (keep one row per input unless it should weigh more)"


def shared_rows_note(pool: Pool, target: TargetRegion, source: str) -> str | None:
    """A note when target rows have the inputs of a pool row: a replay that buys that row
    sees the response it is scored on (a trial's R² 0.887 became 0.919 with pool rows
    appended to the target); None otherwise."""
    inputs = {tuple(row) for row in pool.X.tolist()}
    hits = [i for i, row in enumerate(target.X.tolist()) if tuple(row) in inputs]
    if not hits:
        return None
    return (f"{source}: {len(hits)} target row(s) ({data_rows(hits)}) have the inputs of a "
            "pool row: a design that buys it sees the response it is scored on")


def budget_rows(cost: np.ndarray, fraction: float, total: float) -> int:
    """How many of ``cost`` (in order) fit in ``fraction·total`` (cumulative, inclusive)."""
    if not (0 < fraction <= 1 and math.isfinite(fraction)):
        raise ValueError(f"budget fractions must be in (0, 1], got {fraction}")
    return int(np.searchsorted(np.cumsum(cost), fraction * total, side="right"))
