"""Checks of arguments the Python API shares (resample counts, computes to predict at), with
messages that say what was expected; the command line checks its options before they get
here. Computes are in FLOPs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["computes", "resamples", "whole_number"]


def whole_number(value: object, name: str, at_least: int, what: str = "") -> int:
    """``value`` as a whole number >= ``at_least`` (``what`` it counts, for the message).

    Raises:
        ValueError: a bool, a fraction, text or a number below ``at_least``.
    """
    if (isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer)
            or value < at_least):
        raise ValueError(f"{name} must be a whole number{f' of {what}' if what else ''} >= "
                         f"{at_least}, got {value!r}")
    return int(value)


def resamples(value: object, name: str = "bootstrap") -> int:
    """``value`` as a whole number of resamples >= 0 (0: none; :func:`whole_number`)."""
    return whole_number(value, name, 0, "resamples")


def computes(value: float | Sequence[float], name: str = "predict") -> tuple[float, ...]:
    """One compute or several (FLOPs) as a tuple of finite floats > 0; numeric text such as
    ``"1e24"`` is read.

    Raises:
        ValueError: a value that is not a finite number > 0 (named).
    """
    items = [value] if isinstance(value, str) or np.ndim(value) == 0 else list(value)
    out = []
    for item in items:
        try:
            number = math.nan if isinstance(item, bool | np.bool_) else float(item)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            raise ValueError(f"{name}: computes must be finite FLOPs > 0, got {item!r}")
        out.append(number)
    return tuple(out)
