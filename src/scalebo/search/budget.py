"""Budgets: a fraction of a grid's total (``0.05``, ``5%``), FLOPs (``2e21FLOPs``) or GPU-hours
(``500GPUh``, for a grid priced per configuration), and their one parser.

:func:`parse_fraction` reads the fraction form alone (sweep configs, ``--budget`` of
``replay`` and ``demo``, ``design --budgets``); :func:`parse_budget` reads every form (campaigns).
Both raise ValueError with the text they could not read and, for a percentage written as a
number (``5``), how to write it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scalebo.search.grid import Grid

__all__ = ["GPU_HOUR_SUFFIXES", "NOTHING_FITS", "Budget", "as_fractions", "check_budget_amount",
           "check_fraction", "parse_budget", "parse_fraction", "remaining_budget"]

#: Suffixes of a budget in GPU-hours (case-insensitive), e.g. ``500GPUh``, ``500 GPU-hours``.
GPU_HOUR_SUFFIXES = ("gpu-hours", "gpu_hours", "gpu hours", "gpuhours", "gpu-h", "gpuh")


@dataclass(frozen=True)
class Budget:
    """A campaign budget: a ``fraction`` of the grid's total, ``flops``, or ``gpu_hours``."""

    fraction: float | None = None
    flops: float | None = None
    gpu_hours: float | None = None

    def resolve(self, grid: Grid) -> float:
        """The budget in the grid's budget unit (:attr:`Grid.price_unit`).

        A grid without a price (no ``cost`` column) budgets in FLOPs: a fraction of
        ``C_total`` or FLOPs. A priced grid (GPU-hours per configuration) budgets in
        GPU-hours: a fraction of its total price or GPU-hours.

        An amount above the grid's total is kept (every configuration fits) with a
        UserWarning that says how many times the total it is: often a typo in the exponent.

        Raises:
            ValueError: GPU-hours for a grid without a cost column, or FLOPs for a priced one.
        """
        if self.fraction is not None:
            return self.fraction * grid.budget_total
        if self.gpu_hours is not None:
            if grid.price is None:
                raise ValueError(f"a budget in GPU-hours ({self.gpu_hours:g}) needs a grid "
                                 "table with a 'cost' column (GPU-hours of each "
                                 "configuration); give this grid a fraction or FLOPs")
            amount = float(self.gpu_hours)
        elif grid.price is not None:
            raise ValueError(f"this grid prices its configurations in {grid.price_unit} (its "
                             f"'cost' column); give the budget as a fraction or in "
                             f"{grid.price_unit} (e.g. 500GPUh), not {self.flops:.3g} FLOPs")
        else:
            amount = float(self.flops)  # type: ignore[arg-type]
        if amount > grid.budget_total * (1 + 1e-9):
            warnings.warn(f"the budget {self} is {amount / grid.budget_total:.3g}× the grid's "
                          f"total ({grid.budget_total:.4g} {grid.price_unit}): every "
                          "configuration fits, and the campaign may train the whole grid",
                          UserWarning, stacklevel=2)
        return amount

    def __str__(self) -> str:
        if self.fraction is not None:
            return f"{self.fraction:g} of the grid's total"
        return (f"{self.flops:.3g} FLOPs" if self.flops is not None
                else f"{self.gpu_hours:.6g} GPU-hours")


def parse_budget(text: str | float) -> Budget:
    """``"0.05"`` or ``"5%"`` (a fraction of the grid's total in (0, 1]), ``"2e21FLOPs"``,
    or GPU-hours (``"500GPUh"``, ``"500 GPU-hours"``, :data:`GPU_HOUR_SUFFIXES`).

    Raises:
        ValueError: anything else, with the accepted forms.
    """
    raw = str(text).strip()
    number, unit = raw, ""
    low = raw.lower()
    gpu = next((x for x in GPU_HOUR_SUFFIXES if low.endswith(x)), None)
    if gpu is not None:
        number, unit = raw[: -len(gpu)].strip(), "gpuh"
    elif low.endswith("flops"):
        number, unit = raw[: -len("flops")].strip(), "flops"
    elif low.endswith("%"):
        number, unit = raw[:-1].strip(), "%"
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"budget {raw!r}: expected a fraction of C_total such as 0.05, an "
                         "amount of compute such as 2e21FLOPs, or GPU-hours such as 500GPUh "
                         "(grids with a cost column)") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"budget {raw!r} must be positive and finite")
    if unit == "flops":
        return Budget(flops=value)
    if unit == "gpuh":
        return Budget(gpu_hours=value)
    if unit == "%":
        value /= 100
    if value > 1:
        as_percent = (f"for {value:g} % write {value / 100:g} (or {value:g}%); "
                      if unit != "%" and value <= 100 else "")
        as_amount = (f"for an amount of compute write {number}FLOPs, or {number}GPUh for a "
                     "grid priced in GPU-hours" if unit != "%" and value > 100 else
                     "for an amount of compute write e.g. 2e21FLOPs")
        raise ValueError(f"budget {raw!r}: a fraction of C_total is at most 1 (100%); "
                         f"{as_percent}{as_amount}")
    return Budget(fraction=value)


def parse_fraction(value: object, of: str = "C_total") -> float:
    """A fraction of ``C_total`` in (0, 1] from a number or text: ``0.05``, ``"0.05"``, ``"5%"``;
    ``of``: what it is a fraction of, as messages name it (``design``: the pool's total cost).

    Raises:
        ValueError: not a number, or outside (0, 1]; for a value in (1, 100] the message says
            how to write it as a percentage.
    """
    raw = str(value).strip()
    try:
        out = round(float(raw[:-1]) / 100, 12) if raw.endswith("%") else float(raw)  # 0.7% = 0.007
    except ValueError:
        raise ValueError(f"expected a fraction of {of} such as 0.05 or 5%, got "
                         f"{value!r}") from None
    if not (math.isfinite(out) and 0 < out <= 1):
        hint = (f" (for {out:g} % write {out / 100:g} or {out:g}%)"
                if 1 < out <= 100 and not raw.endswith("%") else "")
        raise ValueError(f"expected a fraction of {of} in (0, 1], got {value!r}{hint}")
    if out == 1 and not raw.endswith("%"):
        warnings.warn(f"a budget of {raw} is the whole of {of} (100 %); for 1 % write 0.01 "
                      "or 1% (100% says the whole without this warning)", UserWarning,
                      stacklevel=2)
    return out


def check_budget_amount(budget: float, unit: str = "FLOPs") -> None:
    """ValueError for a budget amount (in ``unit``, a grid's :attr:`~scalebo.search.grid.
    Grid.price_unit`) that is not a positive finite number, or in FLOPs at most 1: a fraction
    of ``C_total`` (1 = the whole grid) passed where the Python functions take an amount (the
    CLI's ``--budget 0.3`` is a fraction; here it would be 0.3 FLOPs)."""
    value = float(budget)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"budget must be a positive finite amount ({unit}), got {value}")
    if unit == "FLOPs" and value <= 1:
        raise ValueError(f"budget {value:g} FLOPs: the budget is an amount in FLOPs here; for "
                         f"a fraction of the grid's compute pass "
                         f"parse_budget({value!r}).resolve(grid) (= {value:g} × grid.C_total)")


def remaining_budget(budget: float, spent: float, pending: float) -> float:
    """``budget − spent − pending`` (the grid's budget unit), 0 where it is within 1e-9 of
    the budget of zero: the sums' rounding (3.3e4 FLOPs of a 3e20 budget), not compute."""
    left = budget - spent - pending
    return 0.0 if abs(left) <= 1e-9 * abs(budget) else left


#: The start of :func:`check_fraction`'s warning (a filter for callers that say it their way).
NOTHING_FITS = "a budget of .* fits no configuration"


def check_fraction(budget_fraction: object, grid: Grid) -> float:
    """``budget_fraction`` of a search loop as a float in (0, 1], with a UserWarning when not
    one acquirable configuration of ``grid`` fits the budget it makes (the loop is then done
    before its first ask).

    Raises:
        SearchError: not a number (text such as ``"5%"`` is read by :func:`parse_budget`), or
            outside (0, 1] (a percentage written as a number says how to write it).
    """
    from numbers import Real

    import numpy as np

    from scalebo.errors import SearchError

    if isinstance(budget_fraction, bool | np.bool_) or not isinstance(budget_fraction, Real):
        hint = (f" (parse_budget({budget_fraction!r}).fraction reads text)"
                if isinstance(budget_fraction, str) else "")
        raise SearchError(f"budget_fraction must be a number in (0, 1], a fraction of the "
                          f"grid's total, got {budget_fraction!r}{hint}.")
    value = float(budget_fraction)
    if not (math.isfinite(value) and 0 < value <= 1):
        raise SearchError(
            f"budget_fraction must be a fraction of C_total in (0, 1], got {value:g}"
            + (f" (for {value:g} % write {value / 100:g})" if value > 1 else "") + ".")
    costs = grid.budget_cost[~grid.held_out]
    if costs.size and (cheapest := float(np.min(costs))) > value * grid.budget_total:
        warnings.warn(f"a budget of {value:g} of the grid's total ({value * grid.budget_total:.4g}"
                      f" {grid.price_unit}) fits no configuration: the cheapest costs "
                      f"{cheapest:.4g}, so the search proposes nothing", UserWarning,
                      stacklevel=3)
    return value


def as_fractions(value: object, of: str = "C_total") -> tuple[float, ...]:
    """One budget fraction or several, sorted: numbers in (0, 1] as they are, text such as
    ``"5%"`` read by :func:`parse_fraction` (the Python twin of the options that take
    ``0.05`` or ``5%``; a number is not re-read, so its warnings are said once, where parsed).

    Raises:
        ValueError: a value that is not a fraction of ``of`` in (0, 1], or none at all.
    """
    from numbers import Real

    items = [value] if isinstance(value, str | Real) else list(value)  # type: ignore[call-overload]
    out = []
    for item in items:
        number = parse_fraction(item, of) if isinstance(item, str) else item
        if isinstance(number, bool) or not isinstance(number, Real) or not 0 < number <= 1:
            raise ValueError(f"budgets must be fractions of {of} in (0, 1], got {item!r}")
        out.append(float(number))
    if not out:
        raise ValueError(f"no budget given: expected a fraction of {of} such as 0.05 or 5%")
    return tuple(sorted(out))
