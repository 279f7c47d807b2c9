"""Scaling-law forms as data: value, analytic gradient, bounds and a default start grid.

* :mod:`scalebo.laws.base` — the :class:`Law` interface and its conventions (natural-log
  predictions, batched over starts);
* :mod:`scalebo.laws.power` — sums of power laws (``compute``, ``chinchilla``, …);
* :mod:`scalebo.laws.downstream` — benchmark error as a function of loss (``gadre``,
  ``sigmoid``);
* :mod:`scalebo.laws.registry` — the built-in laws by name and :func:`get_law`.
"""

from scalebo.laws.base import VJP, BoundLaw, Law, as_inputs
from scalebo.laws.downstream import GadreDownstreamLaw, SigmoidDownstreamLaw
from scalebo.laws.power import (
    HOFFMANN_EXPONENT_STARTS,
    HOFFMANN_LOG_COEF_STARTS,
    HOFFMANN_LOG_E_STARTS,
    PowerLawSum,
    PowerTerm,
)
from scalebo.laws.registry import (
    CHINCHILLA,
    COMPUTE_LAW,
    GADRE,
    LAWS,
    SIGMOID,
    WIDTH_DEPTH,
    get_law,
    power_law_sum,
)

__all__ = [
    "CHINCHILLA", "COMPUTE_LAW", "GADRE", "HOFFMANN_EXPONENT_STARTS", "HOFFMANN_LOG_COEF_STARTS",
    "HOFFMANN_LOG_E_STARTS", "LAWS", "SIGMOID", "VJP", "WIDTH_DEPTH", "BoundLaw",
    "GadreDownstreamLaw", "Law", "PowerLawSum", "PowerTerm", "SigmoidDownstreamLaw",
    "as_inputs", "get_law", "power_law_sum",
]

#: Formula laws (sympy) are imported on first use: ``from scalebo.laws import formula_law``.
_FORMULA = ("FormulaLaw", "formula_law", "formula_names", "parse_bounds", "parse_variable_map")


def __getattr__(name: str):
    if name in _FORMULA:
        from scalebo.laws import formula

        return getattr(formula, name)
    raise AttributeError(f"module 'scalebo.laws' has no attribute {name!r}")
