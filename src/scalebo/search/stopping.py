"""The stop rule of a campaign (DESIGN.md): stop once the law posterior's 80 % interval of
the prediction at the target compute is narrow enough.

``half_width = (q90 − q10) / 2 / q50`` (relative, of the loss in nats at the target FLOPs);
stop when ``half_width ≤ tol`` at every target (default ``tol = 0.005``, ±0.5 %), or when the
budget is spent. Replays measure what the rule spends and how wrong it is when it fires
(:mod:`scalebo.bench.stop_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_TOLERANCE", "half_width", "stop_decision"]

#: Relative half-width of the 80 % interval at which the rule stops (±0.5 %).
DEFAULT_TOLERANCE = 0.005


def half_width(quantiles: Mapping[str, float | None]) -> float | None:
    """Relative half-width of the 80 % interval, ``(q90 − q10)/2/q50``; None if missing."""
    lo, mid, hi = quantiles.get("q10"), quantiles.get("q50"), quantiles.get("q90")
    if lo is None or mid is None or hi is None or mid <= 0:
        return None
    return (hi - lo) / 2 / mid


def stop_decision(widths: Mapping[float, float | None], *, remaining: float,
                  cheapest_left: float | None,
                  tolerance: float = DEFAULT_TOLERANCE, unit: str = "FLOPs"
                  ) -> tuple[bool, str]:
    """``(stop, reason)`` from the 80 % half-widths at each target (FLOPs → relative width),
    the remaining budget and the cost of the cheapest configuration still untried (None:
    none left), both in ``unit`` (the grid's budget unit).
    """
    if cheapest_left is None:
        return True, "every configuration of the grid is trained or in flight"
    if remaining < cheapest_left:
        return True, (f"the budget is spent: {remaining:.4g} {unit} left, the cheapest "
                      f"untried configuration costs {cheapest_left:.4g}")
    missing = [C for C, w in widths.items() if w is None]
    if missing:
        return False, (f"no interval at {', '.join(f'{C:.0e}' for C in missing)} FLOPs yet "
                       "(too few runs, or the law posterior failed: see the notes)")
    wide = {C: w for C, w in widths.items() if w > tolerance}
    if wide:
        C, w = max(wide.items(), key=lambda kv: kv[1])
        return False, (f"the 80 % interval at {C:.0e} FLOPs is ±{100 * w:.3g} %, wider than "
                       f"±{100 * tolerance:g} %")
    worst = max(widths.values())
    return True, (f"the 80 % interval is within ±{100 * tolerance:g} % at every target "
                  f"(widest ±{100 * worst:.3g} %)")
