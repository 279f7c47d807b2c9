"""The built-in laws by name, and :func:`get_law`."""

from __future__ import annotations

from collections.abc import Sequence

from scalebo.laws.base import Law
from scalebo.laws.downstream import GadreDownstreamLaw, SigmoidDownstreamLaw
from scalebo.laws.power import (
    HOFFMANN_EXPONENT_STARTS,
    HOFFMANN_LOG_COEF_STARTS,
    HOFFMANN_LOG_E_STARTS,
    PowerLawSum,
    PowerTerm,
)

#: ``L(C) = E + A · C^(−alpha)``; C in FLOPs.
COMPUTE_LAW = PowerLawSum("compute", (PowerTerm("C", "A", "alpha"),))

#: Hoffmann et al. (2022) ``L(N, D) = E + A / N^alpha + B / D^beta`` with their 4,500-start grid.
CHINCHILLA = PowerLawSum(
    "chinchilla",
    (PowerTerm("N", "A", "alpha"), PowerTerm("D", "B", "beta")),
    start_values={
        "log_E": HOFFMANN_LOG_E_STARTS,
        "log_A": HOFFMANN_LOG_COEF_STARTS,
        "alpha": HOFFMANN_EXPONENT_STARTS,
        "log_B": HOFFMANN_LOG_COEF_STARTS,
        "beta": HOFFMANN_EXPONENT_STARTS,
    },
)

#: Gemstones-style width/depth/tokens law ``E + A·w^(−alpha) + B·d^(−beta) + G·D^(−gamma)``.
WIDTH_DEPTH = PowerLawSum(
    "width_depth",
    (PowerTerm("width", "A", "alpha"), PowerTerm("depth", "B", "beta"),
     PowerTerm("D", "G", "gamma")),
    start_values={"log_E": (-1.0, 0.0, 1.0), "alpha": (0.0, 0.5, 1.0),
                  "beta": (0.0, 0.5, 1.0), "gamma": (0.0, 0.5, 1.0)},
    term_starts=(0.1, 1.0),
)

GADRE = GadreDownstreamLaw()
SIGMOID = SigmoidDownstreamLaw()

LAWS: dict[str, Law] = {
    law.name: law for law in (COMPUTE_LAW, CHINCHILLA, WIDTH_DEPTH, GADRE, SIGMOID)
}


def power_law_sum(variables: Sequence[str], name: str | None = None) -> PowerLawSum:
    """A sum of power laws in the given variables, coefficients ``A_<var>``, exponents
    ``alpha_<var>``, with the data-aware default start grid."""
    terms = tuple(PowerTerm(v, f"A_{v}", f"alpha_{v}") for v in variables)
    return PowerLawSum(name or "+".join(variables), terms)


def get_law(name: str) -> Law:
    """Law by registry name (``compute``, ``chinchilla``, ``width_depth``, ``gadre``,
    ``sigmoid``) or a sum of power laws spelled ``powerlaw:w,d,D``."""
    if name in LAWS or name.lower() in LAWS:  # 'Compute' is the compute law
        return LAWS[name if name in LAWS else name.lower()]
    if name.startswith("powerlaw:"):
        variables = [v.strip() for v in name.split(":", 1)[1].split(",") if v.strip()]
        if sorted(variables) == ["D", "N"]:
            variables = ["N", "D"]  # one law: a sum's terms commute (predictions need N, D)
        if variables:
            return power_law_sum(variables)
    from scalebo.errors import closest

    near = closest(name.lower(), sorted(LAWS))
    raise ValueError(
        f"unknown law {name!r}" + (f" (did you mean {near!r}?)" if near else "")
        + f"; expected one of {sorted(LAWS)} or 'powerlaw:VAR1,VAR2,...'"
    )
