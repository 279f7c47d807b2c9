"""Laws written as formulas: ``formula_law("c0 + A*V**b*P**e*D**g", ("V", "P", "D"), bounds)``.

A formula is a Python expression parsed with :mod:`ast` (never evaluated) into sympy. Allowed:
numbers, names, ``+ - * / **``, unary ``±``, ``exp``, ``log`` (natural), ``sqrt``, ``abs``,
``minimum``/``min`` and ``maximum``/``max`` (≥ 2 arguments), ``clip(x, lo, hi)``. Names given
as ``variables`` are inputs (table columns, natural units); every other name is a parameter
with bounds. There are no named constants (``e``, ``pi`` are parameters).

Gradients come from ``sympy.diff``, lambdified once to numpy (common subexpressions shared);
parameters ``(S, 1)`` broadcast against input columns ``(1, n)`` give ``(S, n)``. Subgradients:
``∂ max(a, b)/∂a = H(a − b)``, ``∂ min(a, b)/∂a = H(b − a)`` with ``H(0) = 1/2`` (a tie
splits the derivative evenly), ``∂|x|/∂x = sign(x)``, ``sign(0) = 0``. A NaN partial where the
value is finite (``0·∞``: ``∂ x^c/∂c = x^c·log x`` at ``x = 0``, limit 0 for ``c > 0``) is 0.

A parameter with a positive lower bound is optimized as ``log_<name>`` by default (like the
coefficients of :class:`~scalebo.laws.PowerLawSum`); :meth:`FormulaLaw.natural` gives the
parameters as written. The law predicts in natural units (:meth:`FormulaLaw.predict_natural`);
:meth:`FormulaLaw.log_predict` is its log, clamped at ``log 1e-300`` with zero gradient where
the prediction is ≤ 1e-300 (as :mod:`scalebo.laws.downstream`). Conventions:
:mod:`scalebo.laws.base`.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import sympy as sp

from scalebo.errors import RunTableError
from scalebo.laws.base import _TINY, VJP, Law, as_inputs
from scalebo.laws.downstream import _clamped_log

__all__ = ["FUNCTIONS", "FormulaLaw", "formula_law", "formula_names", "parse_bounds",
           "parse_variable_map"]


def _nonsmooth(name: str, nargs: int, fdiff: Callable) -> type[sp.Function]:
    """Sympy function printed as ``name`` (numpy: :data:`_NUMPY`), ``∂/∂arg_i = fdiff(args, i)``."""
    return type(name, (sp.Function,), {"nargs": nargs,
                                       "fdiff": lambda self, i=1: fdiff(self.args, i)})


#: ``H`` (``H(0) = 1/2``), ``sign`` (derivatives 0); ``|x|``, binary max/min by subgradients.
_step = _nonsmooth("_step", 1, lambda a, i: sp.S.Zero)
_sign = _nonsmooth("_sign", 1, lambda a, i: sp.S.Zero)
_abs = _nonsmooth("_abs", 1, lambda a, i: _sign(a[0]))
_max2 = _nonsmooth("_max2", 2, lambda a, i: _step(a[0] - a[1]) if i == 1 else _step(a[1] - a[0]))
_min2 = _nonsmooth("_min2", 2, lambda a, i: _step(a[1] - a[0]) if i == 1 else _step(a[0] - a[1]))
_NUMPY = {"_step": lambda x: np.heaviside(x, 0.5), "_sign": np.sign, "_abs": np.abs,
          "_max2": np.maximum, "_min2": np.minimum}


#: Allowed functions: name -> (fewest, most arguments, builder from the argument list).
FUNCTIONS: dict[str, tuple[int, int, Callable[[list[sp.Expr]], sp.Expr]]] = {
    "exp": (1, 1, lambda a: sp.exp(a[0])), "log": (1, 1, lambda a: sp.log(a[0])),
    "sqrt": (1, 1, lambda a: sp.sqrt(a[0])), "abs": (1, 1, lambda a: _abs(a[0])),
    **{f: (2, 99, lambda a: functools.reduce(_min2, a)) for f in ("minimum", "min")},
    **{f: (2, 99, lambda a: functools.reduce(_max2, a)) for f in ("maximum", "max")},
    "clip": (3, 3, lambda a: _min2(_max2(a[0], a[1]), a[2])),
}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.Pow: lambda a, b: a ** b}


def _parse(formula: str) -> ast.expr:
    if not isinstance(formula, str) or not formula.strip():
        raise ValueError("formula must be a non-empty expression string, e.g. 'E + A*C**(-alpha)'")
    try:
        return ast.parse(formula.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"formula {formula!r} is not a valid expression: {exc.msg} "
                         f"(column {exc.offset})") from None


def _walk(node: ast.expr, formula: str, symbol: Callable[[str], sp.Expr]) -> sp.Expr:
    """Sympy expression of an allowed ``ast`` node; ``symbol(name)`` gives each name's symbol."""
    text = formula.strip()

    def bad(what: str, n: ast.AST, hint: str = "", token: str | None = None) -> ValueError:
        token = token or ast.get_source_segment(text, n) or type(n).__name__
        return ValueError(f"formula {formula!r}: {what} {token!r} is not allowed{hint}; allowed: "
                          f"numbers, names, + - * / **, unary minus, {', '.join(FUNCTIONS)}")

    def go(n: ast.AST) -> sp.Expr:
        if isinstance(n, ast.Constant):
            if isinstance(n.value, bool) or not isinstance(n.value, int | float):
                raise bad("constant", n)
            if isinstance(n.value, int) and abs(n.value) < 2**53:
                return sp.Integer(n.value)
            return sp.Float(float(n.value))
        if isinstance(n, ast.Name):
            if n.id in FUNCTIONS:
                raise bad("function name", n, f" as a value (call it: {n.id}(...))")
            return symbol(n.id)
        if isinstance(n, ast.BinOp):
            op = _BINOPS.get(type(n.op))
            if op is None:
                hint = " (use ** for powers)" if isinstance(n.op, ast.BitXor) else ""
                gap = text.splitlines()[n.right.lineno - 1][:n.right.col_offset]
                raise bad("operator", n, hint, gap[n.left.end_col_offset:].strip(" ()") or None)
            return op(go(n.left), go(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
            inner = go(n.operand)
            return -inner if isinstance(n.op, ast.USub) else inner
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name):
                raise bad("call", n)
            if n.func.id not in FUNCTIONS:
                raise bad("function", n.func, " (unknown function)")
            if n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
                raise bad("call", n, " (positional arguments only)")
            lo, hi, build = FUNCTIONS[n.func.id]
            if not lo <= len(n.args) <= hi:
                need = f"{lo}" if lo == hi else f"at least {lo}"
                raise bad("call", n, f" ({n.func.id} takes {need} argument(s))")
            return build([go(a) for a in n.args])
        kind = {ast.Attribute: "attribute access", ast.Subscript: "subscript",
                ast.Lambda: "lambda", ast.Compare: "comparison", ast.BoolOp: "boolean operator",
                ast.IfExp: "conditional"}.get(type(n), "expression")
        raise bad(kind, n)

    return go(node)


def formula_names(formula: str) -> tuple[str, ...]:
    """Names used in ``formula`` (inputs and parameters), in order of first appearance;
    raises :class:`ValueError` for a formula outside the allowed grammar."""
    names: dict[str, sp.Symbol] = {}
    _walk(_parse(formula), formula, lambda n: names.setdefault(n, sp.Symbol(f"_n{len(names)}")))
    return tuple(names)


@functools.lru_cache(maxsize=256)
def _compile(formula: str, variables: tuple[str, ...], params: tuple[str, ...]):
    """``(expression, f)``: ``f(*columns, *natural params) -> [value, ∂/∂param_1, …]``."""
    order = variables + params
    syms = [sp.Symbol(f"_x{i}") if i < len(variables) else sp.Symbol(f"_t{i - len(variables)}")
            for i in range(len(order))]
    table = dict(zip(order, syms, strict=True))
    expr = _walk(_parse(formula), formula, lambda name: table[name])
    grads = [sp.diff(expr, s) for s in syms[len(variables):]]
    return expr, sp.lambdify(syms, [expr, *grads], modules=[_NUMPY, "numpy"], cse=True)


def _vjp(partials: list[np.ndarray], scale: np.ndarray | None) -> VJP:
    """``cot (S, n) -> Σ_n cot · scale · partial_j`` stacked over ``j`` → ``(S, p)``; each
    partial is broadcastable to ``(S, n)`` (a constant, ``(S, 1)``, ``(1, n)`` or full)."""

    def vjp(cot: np.ndarray) -> np.ndarray:
        c = cot if scale is None else cot * scale
        with np.errstate(all="ignore"):
            return np.column_stack([
                np.einsum("sn,sn->s", c, d) if d.shape == c.shape else c @ d[0]
                if d.ndim == 2 and d.shape[0] == 1 < d.shape[1] else c.sum(1) * d.reshape(-1)
                for d in partials])

    return vjp


@dataclass(frozen=True)
class FormulaLaw(Law):
    """A law given by a formula (see the module docstring for the grammar and conventions).

    Attributes:
        formula: the expression text, e.g. ``"E + A*C**(-alpha)"``.
        variables: input names, the columns of ``X`` in this order (natural units).
        natural_names: parameters as written in the formula, in internal order.
        bounds: ``(lo, hi)`` per parameter in natural units, finite, ``lo < hi``.
        log_scale: per parameter, whether it is optimized as ``log_<name>`` (needs ``lo > 0``).
        name: name of the law (defaults to the formula text).
    """

    formula: str
    variables: tuple[str, ...]
    natural_names: tuple[str, ...]
    bounds: tuple[tuple[float, float], ...]
    log_scale: tuple[bool, ...]
    name: str = ""
    _fn: Callable = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.formula.strip())
        used, declared = formula_names(self.formula), self.variables + self.natural_names
        if sorted(used) != sorted(declared) or not (
                len(self.bounds) == len(self.log_scale) == self.n_params):
            raise ValueError(f"formula {self.formula!r} uses {list(used)}: variables and "
                             f"parameters {list(declared)} must partition them, with one bound "
                             "and one log_scale flag per parameter")
        for p, (lo, hi), log in zip(self.natural_names, self.bounds, self.log_scale, strict=True):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"bounds of {p!r} must be finite with lo < hi, got ({lo}, {hi})")
            if log and not lo > 0:
                raise ValueError(f"{p!r} cannot be log-scaled: its lower bound {lo} is not > 0")
        object.__setattr__(self, "_fn", _compile(self.formula, self.variables,
                                                 self.natural_names)[1])

    def __reduce__(self):
        return (FormulaLaw, (self.formula, self.variables, self.natural_names, self.bounds,
                             self.log_scale, self.name))

    @property
    def param_names(self) -> tuple[str, ...]:  # type: ignore[override]
        """Internal parameter names: ``log_<name>`` for log-scaled parameters."""
        return tuple(f"log_{p}" if log else p
                     for p, log in zip(self.natural_names, self.log_scale, strict=True))

    def _internal(self, natural: Sequence[float]) -> np.ndarray:
        """Natural parameter values ``(p,)`` to internal ones (log of log-scaled ones)."""
        v = np.asarray(natural, dtype=np.float64)
        return np.where(self.log_scale, np.log(np.where(self.log_scale, v, 1.0)), v)

    @property
    def lower(self) -> np.ndarray:  # type: ignore[override]
        return self._internal([b[0] for b in self.bounds])

    @property
    def upper(self) -> np.ndarray:  # type: ignore[override]
        return self._internal([b[1] for b in self.bounds])

    def prepare(self, X: np.ndarray) -> np.ndarray:
        """Inputs as float64 ``(n, k)``, columns ``variables``, natural units; must be finite."""
        X = as_inputs(X, self.variables)
        if not np.all(np.isfinite(X)):
            raise ValueError(f"law {self.name!r} needs finite inputs {self.variables}")
        return X

    def _natural_theta(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
        if theta.shape[1] != self.n_params:
            raise ValueError(f"law {self.name!r} has {self.n_params} parameters "
                             f"{self.param_names}; got theta of shape {theta.shape}")
        mask = np.asarray(self.log_scale)
        return np.where(mask, np.exp(np.where(mask, theta, 0.0)), theta)

    def _evaluate(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Prediction ``(S, n)``, partials w.r.t. internal parameters (broadcastable to it)."""
        nat = self._natural_theta(theta)  # columns (1, n) x parameters (S, 1) -> (S, n)
        with np.errstate(all="ignore"):
            out = self._fn(*(Z[None, :, i] for i in range(Z.shape[1])), *nat.T[:, :, None])
            value = np.array(np.broadcast_to(out[0], (nat.shape[0], Z.shape[0])), dtype=float)
            partials = []
            for j, d in enumerate(out[1:]):
                d = np.asarray(d, dtype=np.float64)
                if self.log_scale[j]:
                    d = d * nat[:, j : j + 1]  # ∂/∂ log a = a · ∂/∂a
                if np.isnan(d.sum()):
                    d = np.where(np.isnan(d) & np.isfinite(value), 0.0, d)
                partials.append(d)
        return value, partials

    def predict_natural(self, theta: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Prediction in natural units ``(S, n)`` for internal ``theta`` (S, p) or (p,)."""
        return self._evaluate(theta, Z)[0]

    def predict_natural_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        """Natural prediction ``(S, n)`` and ``cot (S, n) -> Σ_n cot · ∂L̂/∂θ`` of shape (S, p)."""
        value, partials = self._evaluate(theta, Z)
        return value, _vjp(partials, None)

    def log_predict_vjp(self, theta: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, VJP]:
        """``log L̂`` ``(S, n)``, clamped where ``L̂ ≤ 1e-300`` (zero gradient there), and its
        vector-Jacobian product."""
        value, partials = self._evaluate(theta, Z)
        log_pred, inv_pred = _clamped_log(value)
        ok = value > _TINY
        if not ok.all():
            partials = [np.where(ok, d, 0.0) for d in partials]
        return log_pred, _vjp(partials, inv_pred)

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Prediction in natural units (may be ≤ 0) for one ``theta`` (p,) at ``X`` (n, k)."""
        Z = self.prepare(as_inputs(X, self.variables))
        return self.predict_natural(np.asarray(theta, float)[None, :], Z)[0]

    def random_starts(self, n_starts: int, seed: int | None = 0) -> np.ndarray:
        """``n_starts`` internal start vectors ``(S, p)``: log-uniform inside the bounds for
        parameters with a positive lower bound, uniform otherwise (seeded)."""
        u = np.random.default_rng(seed).uniform(size=(n_starts, self.n_params))
        lo, hi = np.array(self.bounds, dtype=np.float64).reshape(-1, 2).T
        logu = (lo > 0) & ~np.asarray(self.log_scale, dtype=bool)  # log-uniform, natural scale
        with np.errstate(all="ignore"):
            out = np.where(logu, lo * (hi / lo) ** u, self.lower + u * (self.upper - self.lower))
        return np.clip(out, self.lower, self.upper)

    def start_grid(self, Z: np.ndarray | None = None) -> np.ndarray:
        """64 seeded random starts (:meth:`random_starts` with seed 0); ``Z`` is unused."""
        return self.random_starts(64, seed=0)

    def natural(self, theta: np.ndarray) -> dict[str, float]:
        return dict(zip(self.natural_names, map(float, self._natural_theta(theta)[0]), strict=True))

    def from_natural(self, params: Mapping[str, float]) -> np.ndarray:
        return self._internal([float(params[p]) for p in self.natural_names])


def formula_law(
    formula: str,
    variables: Sequence[str],
    bounds: Mapping[str, tuple[float, float]] | None = None,
    *,
    default_bounds: tuple[float, float] | None = None,
    log_scale: Literal["auto"] | bool | Collection[str] = "auto",
    name: str | None = None,
) -> FormulaLaw:
    """Build a :class:`FormulaLaw`.

    Args:
        formula: Python-syntax expression (grammar in the module docstring).
        variables: candidate input names (e.g. every table column); those the formula uses
            are the inputs, in this order. Other names are parameters, in order of appearance.
        bounds: ``{parameter: (lo, hi)}`` in natural units, finite, ``lo < hi``.
        default_bounds: bounds of parameters not in ``bounds`` (else all need bounds).
        log_scale: ``"auto"``/``True``: optimize parameters with ``lo > 0`` as their log;
            ``False``: none; or the names to log-scale.
        name: law name (default: the formula text).

    Raises:
        ValueError: bad formula (naming the offending token), no input used, bounds missing
            or malformed, or bounds for a name that is not a parameter.
    """
    names, variables = formula_names(formula), tuple(variables)
    inputs = tuple(dict.fromkeys(v for v in variables if v in names))
    if not inputs:
        raise ValueError(f"formula {formula!r} uses none of the variables {list(variables)}; "
                         f"its names are {list(names)}")
    params = tuple(n for n in names if n not in variables)
    bounds = dict(bounds or {})
    stray = [b for b in bounds if b not in params]
    if stray:
        raise ValueError(f"bounds given for {stray}, which formula {formula!r} does not use as "
                         f"parameters (inputs: {list(inputs)}; parameters: {list(params)})")
    missing = [p for p in params if p not in bounds]
    if missing and default_bounds is None:
        raise ValueError(
            f"parameters {missing} of formula {formula!r} have no bounds; give bounds for "
            f"each (e.g. {missing[0]}=-10:10) or default bounds. If {missing[0]!r} is meant "
            f"to be an input, it is not among the variables/columns {list(variables)}")
    resolved = []
    for p in params:
        pair = bounds.get(p, default_bounds)
        try:
            lo, hi = (float(v) for v in pair)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise ValueError(f"bounds of {p!r} must be a pair (lo, hi), got {pair!r}") from None
        resolved.append((lo, hi))
    if log_scale in ("auto", True, False):
        chosen = {p for p, (lo, _) in zip(params, resolved, strict=True) if lo > 0 and log_scale}
    elif not set(log_scale) <= set(params):  # type: ignore[arg-type]
        raise ValueError(f"log_scale names {sorted(set(log_scale) - set(params))} are not "
                         f"parameters {list(params)}")
    else:
        chosen = set(log_scale)  # type: ignore[arg-type]
    return FormulaLaw(formula=formula, variables=inputs, natural_names=params,
                      bounds=tuple(resolved), log_scale=tuple(p in chosen for p in params),
                      name=name or "")


def _items(text: str, what: str, form: str, error: type[ValueError]):
    """``(key, value, item)`` per ``key=value`` item of ``text`` (comma-separated)."""
    seen: set[str] = set()
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key.isidentifier() or not value:
            raise error(f"{what} {text!r}: item {item!r} is not of the form {form}")
        if key in seen:
            raise error(f"{what} {text!r}: {key!r} is given twice; keep one")
        seen.add(key)
        yield key, value, item


def parse_bounds(text: str) -> dict[str, tuple[float, float]]:
    """Parse a CLI bounds string ``"c0=-100:100,A=-1e4:1e4"`` into ``{"c0": (-100.0, 100.0),
    ...}``; raises :class:`ValueError` on a malformed item or a name given twice."""
    form = "NAME=LO:HI, e.g. 'c0=-100:100,A=-1e4:1e4'"
    out: dict[str, tuple[float, float]] = {}
    for key, value, item in _items(text, "bounds", form, ValueError):
        lo, colon, hi = value.partition(":")
        try:
            out[key] = (float(lo), float(hi)) if colon else float("")  # type: ignore[assignment]
        except ValueError:
            raise ValueError(f"bounds {text!r}: item {item!r} is not of the form {form}") from None
    return out


def parse_variable_map(text: str) -> dict[str, str]:
    """Parse ``"P=non_vocab_parameters,V=vocab_size"`` into ``{formula name: table column}``
    (unlike :func:`scalebo.data.files.parse_mapping`, keys are any identifiers); raises
    :class:`~scalebo.errors.RunTableError` on a malformed item or a name given twice."""
    form = "NAME=column, e.g. 'P=non_vocab_parameters,D=tokens'"
    return {k: v for k, v, _ in _items(text, "variable map", form, RunTableError)}
