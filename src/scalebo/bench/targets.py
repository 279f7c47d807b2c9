"""The compute values (FLOPs) at which a replay scores the law it recovers.

A replay compares the law fitted on what a search bought with the reference law at each
target compute: the relative error ``extrapolation_pct``, the law posterior's and the
bootstrap's quantiles and whether they cover the reference (docs/records.md). The default,
1e25, 1e27 and 1e29 FLOPs, suits grids of today's pretraining runs; a grid of small models
(say up to 1e20 FLOPs) is better judged a few decades past its largest run, where its user
will bet next (``scalebo replay --targets 1e21,1e22``; a sweep dataset's ``targets``).

Targets are kept in ascending order, and the smallest is the **headline**: the one whose
intervals ``scalebo replay`` prints and whose error and calibration ``bench report``
summarizes per dataset (its other targets get tables of their own).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

__all__ = ["DEFAULT_TARGETS", "check_targets", "headline"]

#: Target compute values (FLOPs) of a replay unless it is given its own.
DEFAULT_TARGETS: tuple[float, ...] = (1e25, 1e27, 1e29)


def check_targets(values: float | Iterable[float] | None) -> tuple[float, ...]:
    """``values`` as ascending, distinct target compute values (FLOPs); None: the default.

    Raises:
        ValueError: a value that is not a finite number > 0 (naming it), or no value.
    """
    if values is None:
        return DEFAULT_TARGETS
    from scalebo.data.columns import parse_number

    items = [values] if isinstance(values, numbers.Real | str) else list(values)
    out = []
    for v in items:  # YAML 1.1 reads 1e22 as text: a number in text is taken
        if isinstance(v, str) and (number := parse_number(v)) is not None:
            v = number
        ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        if not ok:
            raise ValueError(f"targets must be compute values in FLOPs, finite and > 0 (such "
                             f"as 1e22), got {v!r}")
        out.append(float(v))
    if not out:
        raise ValueError("targets must hold at least one compute value in FLOPs, got none")
    return tuple(sorted(set(out)))


def headline(targets: Iterable[float]) -> float:
    """The headline target of ``targets`` (FLOPs): the smallest."""
    return min(targets)
