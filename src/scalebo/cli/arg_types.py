"""Value types of the command line's options (argparse ``type=``) and the warnings they give:
numbers, fractions of C_total, integer counts, the stop rule's tolerance. A bad value is a
usage error naming the option (exit 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["MIN_RESAMPLES", "TOLERANCE_WARN", "flops", "fraction", "fractions", "int_at_least",
           "level", "n_jobs", "non_negative_float", "positive_float", "tolerance",
           "warn_few_resamples"]


#: Fewer bootstrap resamples than this get a warning: 95 % percentile ends need tails.
MIN_RESAMPLES = 100


def warn_few_resamples(n: int, option: str = "--bootstrap", confidence: float = 0.95) -> None:
    """Warn (on stderr, as every warning) when ``0 < n < MIN_RESAMPLES``; ``confidence``:
    the interval's level, whose ends the message names."""
    if 0 < n < MIN_RESAMPLES:
        import warnings

        tail = 50 * (1 - confidence)
        warnings.warn(f"{option} {n}: percentile intervals from so few resamples are rough "
                      f"(the {tail:g} % and {100 - tail:g} % ends need tails); use at least "
                      f"{MIN_RESAMPLES}, 1000 is typical", UserWarning, stacklevel=2)


def positive_float(text: str) -> float:
    """argparse type: one positive, finite number (e.g. a Huber δ or a compute in FLOPs)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """argparse type: a fraction of C_total in (0, 1], as ``0.05`` or ``5%``
    (:func:`~scalebo.search.budget.parse_fraction`)."""
    from scalebo.search.budget import parse_fraction

    try:
        return parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _checked_float(text: str, ok: Callable[[float], bool], example: str,
                   expected: str) -> float:
    """``float(text)`` if ``ok`` of it, else an argparse error: ``example`` when it is not a
    number, ``expected`` when it is out of range."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {example}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def flops(text: str) -> float:
    """argparse type: a compute in FLOPs, a positive number with or without the unit
    (``1e24`` or ``1e24FLOPs``, as a ``--budget`` is written)."""
    raw = text.strip()
    number = raw[:-5].strip() if raw.lower().endswith("flops") else raw
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a compute in FLOPs such as 1e24 or "
                                         f"1e24FLOPs, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def level(text: str) -> float:
    """argparse type: a confidence level in (0, 1), as ``0.8`` or ``80%``."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw) / (100 if percent else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a level such as 0.8 or 80%, got "
                                         f"{text!r}") from None
    if not 0 < value < 1:
        hint = (f"; for {value:g} % write {value / 100:g} or {value:g}%"
                if not percent and 1 < value < 100 else "")  # a percentage without its sign
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1) or (0 %, 100 %), got "
                                         f"{text!r}{hint}")
    return value


def anchor_share(text: str) -> float:
    """argparse type: the anchor run's largest share of the budget, in [0, 1) (0: none)."""
    return _checked_float(text, lambda v: 0 <= v < 1,
                          "a share of the budget such as 0.7 (0: no anchor run)",
                          "a share of the budget in [0, 1) (0: no anchor run)")


def polish_share(text: str) -> float:
    """argparse type: the share of the budget polished at its end, in [0, 1) (0: none)."""
    return _checked_float(text, lambda v: 0 <= v < 1,
                          "a share of the budget such as 0.2 (0: no polish)",
                          "a share of the budget in [0, 1) (0: no polish)")


def coupling_share(text: str) -> float:
    """argparse type: the law posterior's cell coupling ρ, in [0, 1] (0: none)."""
    return _checked_float(text, lambda v: 0 <= v <= 1,
                          "a share such as 0.85 (0: independent draws)",
                          "a share in [0, 1] (0: independent draws)")


def int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse type factory: an integer ``>= minimum``, e.g. ``type=int_at_least(1)`` for a
    batch size, ``int_at_least(0)`` for a count where 0 means none. A float or a smaller value
    is a usage error naming the option (exit 2): ``argument --next: expected an integer >=
    0, got '-1'``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def n_jobs(text: str) -> int:
    """argparse type of ``--n-jobs``: joblib's worker count, an integer >= 1, or negative for
    all cores but ``-1 - n`` (-1 all, -2 all but one); 0 has no meaning to joblib (its raw
    "n_jobs == 0 in Parallel has no meaning" surfaced after the base fit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer (workers >= 1, or -1 for all "
                                         f"cores), got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number of parallel workers >= 1, or -1 "
                                         "for all cores (-2 all but one), got '0'")
    return value


#: A ``--tolerance`` at or above this is probably a percentage written as a fraction.
TOLERANCE_WARN = 0.2


def tolerance(text: str) -> float:
    """argparse type of ``--tolerance``: a relative tolerance as a fraction (``0.005`` is
    ±0.5 %) or a percentage (``0.5%``); in (0, 1): ±100 % or more would stop at once. A
    fraction of :data:`TOLERANCE_WARN` or more is accepted with a warning saying what it means
    (``--tolerance 0.5 is ±50 %; for 0.5 % write 0.005``)."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1]) / 100 if percent else float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(
            f"expected a positive fraction below 1 such as 0.005 (±0.5 %) or a percentage "
            f"such as 0.5%, got {text!r}")
    if value >= TOLERANCE_WARN and not percent:
        import warnings

        warnings.warn(f"--tolerance {raw} is ±{100 * value:g} %; for {value:g} % write "
                      f"{value / 100:g}", UserWarning, stacklevel=2)
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (e.g. ``--clip-iqr``, where 0 means off)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def fractions(text: str) -> list[float]:
    """argparse type: comma-separated fractions (:func:`fraction` each), e.g. ``1%,5%``."""
    return [fraction(item) for item in str(text).split(",") if item.strip()]


def guard_ratio(text: str) -> float:
    """argparse type: the fill-in's extrapolation guard, a ratio >= 1 (0: off)."""
    return _checked_float(text, lambda v: v == 0 or 1 <= v < float("inf"),
                          "a ratio of standard deviations such as 5 (0: off)",
                          "a ratio >= 1 (0: off)")
