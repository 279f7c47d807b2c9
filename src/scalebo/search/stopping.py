"""The stop rule of a campaign (DESIGN.md): stop once the law posterior's 80 % interval of
the prediction at the target compute is narrow enough.

``half_width = (q90 − q10) / 2 / q50`` (relative, of the loss in nats at the target FLOPs);
stop when ``half_width ≤ tol`` at every target (default ``tol = 0.005``, ±0.5 %), or when the
budget is spent. Replays measure what the rule spends and how wrong it is when it fires
(:mod:`scalebo.bench.stop_rule`).

With a noise-free interval (``estimand="noise_free"``), which keeps the noise of the trained
runs and so may never reach ``tol`` on a noisy grid, the rule also stops at the grid's noise
floor: when training every untried configuration would narrow the interval at every target
still wider than ``tol`` by less than ``min_shrink`` (default 20 %), i.e. its noise-floor
ratio (:mod:`scalebo.search.noise_floor`) is at least ``1 − min_shrink``.

Whatever the widths, the rule does not stop early (before the budget or the grid is spent)
while the law's point fit is not ``converged``
(e.g. ``bound hit``: on a StepLaw campaign at 6 % of its compute, fantasized losses in the
two costliest, untried cells pushed ``E`` to its lower bound; every posterior sample started
there and stayed, giving a ±0.15 % interval around a prediction 10 % below the full grid's
law): such an interval measures the optimizer's bound, not the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the CLI's help imports this module: no numpy
    import numpy as np

__all__ = ["CUT_SHARE", "DEFAULT_MIN_SHRINK", "DEFAULT_TOLERANCE", "MC_LEVEL", "MC_RESAMPLES",
           "UNTRUSTED_SHARE", "at_floor", "at_limit", "bound_note", "check_min_shrink",
           "half_width", "stop_decision", "width_upper"]

#: Relative half-width of the 80 % interval at which the rule stops (±0.5 %).
DEFAULT_TOLERANCE = 0.005
#: The rule stops at the noise floor when training every untried configuration would narrow
#: the interval by less than this fraction (20 %; docs/reproduction.md).
DEFAULT_MIN_SHRINK = 0.2


#: A law posterior whose sample fits failed or ended at a parameter bound at least this
#: often gets a note (:func:`bound_note`): its spread is then mostly the bounds'.
UNTRUSTED_SHARE = 0.5
#: A law posterior with at least this share of its sample fits at a parameter bound (and
#: under :data:`UNTRUSTED_SHARE` failed or at one) gets a milder note: its intervals are cut
#: at the bound.
CUT_SHARE = 0.1


def bound_note(summary: Mapping, law: str, at_bound: Sequence[str] = ()) -> str | None:
    """A note when at least :data:`UNTRUSTED_SHARE` of a law posterior's S sample fits
    (``summary``: :meth:`~scalebo.search.law_posterior.LawPosterior.summary`) failed or ended
    at a parameter bound while some interval remains (when every fit failed, there is none
    to misread), a milder one when at least :data:`CUT_SHARE` ended at a bound (naming
    ``at_bound``, the parameters they hit, when given); None otherwise. Such an interval
    can be narrow around a wrong value (a replay: ±3 % around a loss 23 % off with 39 of 64
    fits at a bound; a campaign: N* within ±25 % while 9 of 64 Chinchilla fits had A at its
    upper bound and a bootstrap of the runs gave a factor of 7)."""
    S = int(summary.get("samples") or 0)
    failed, bound = int(summary.get("n_failed") or 0), int(summary.get("n_bound_hit") or 0)
    if not S or failed >= S:
        return None
    if failed + bound >= UNTRUSTED_SHARE * S:
        return (f"{failed + bound} of the {law} law posterior's {S} sample fits failed or "
                "ended at a parameter bound; its interval is mostly the bounds' spread, not the "
                "runs': do not read it as how sure the law is (runs at larger scales pin the "
                "law down)")
    if bound < CUT_SHARE * S:
        return None
    names = f" ({', '.join(at_bound)})" if at_bound else ""
    return (f"{bound} of the {law} law posterior's {S} sample fits ended at a parameter "
            f"bound{names}: its intervals are cut at the bound, narrower than the runs alone "
            "would make them")


def half_width(quantiles: Mapping[str, float | None]) -> float | None:
    """Relative half-width of the 80 % interval, ``(q90 − q10)/2/q50``; None if missing."""
    lo, mid, hi = quantiles.get("q10"), quantiles.get("q50"), quantiles.get("q90")
    if lo is None or mid is None or hi is None or mid <= 0:
        return None
    return (hi - lo) / 2 / mid


#: Resamples of the posterior draws, and the percentile of the width over them, behind
#: :func:`width_upper` (a campaign whose draws fell in two clusters was ±0.52 % with one
#: seed and ±3.46 % with another: q10 landed in one cluster or the other).
MC_RESAMPLES, MC_LEVEL = 200, 0.9
_HUGE = 1e300


def width_upper(values: np.ndarray, seed: int = 0) -> float:
    """How wide the 80 % interval's relative half-width (:func:`half_width`) may be, given
    that it comes from S posterior draws (``values``, the predicted losses, ``(S,)``): its
    :data:`MC_LEVEL` percentile over :data:`MC_RESAMPLES` bootstrap resamples of the draws
    (``inf`` with fewer than 2 finite draws, or when resamples have no positive median). The
    rule stops on a width only when this is within the tolerance too."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < 2:  # one draw makes a width of 0 that nothing settles
        return math.inf
    pick = np.random.default_rng(seed).integers(0, values.size, (MC_RESAMPLES, values.size))
    lo, mid, hi = np.quantile(values[pick], [0.1, 0.5, 0.9], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        widths = np.where(mid > 0, (hi - lo) / 2 / mid, _HUGE)  # not inf: inf - inf is NaN
    upper = float(np.quantile(widths, MC_LEVEL))
    return upper if upper < _HUGE else math.inf


def check_min_shrink(min_shrink: float, name: str = "min_shrink") -> None:
    """ValueError unless ``0 < min_shrink < 1`` (``name``: how the caller calls it)."""
    if not 0 < min_shrink < 1:
        raise ValueError(f"{name} must be a fraction in (0, 1), got {min_shrink}")


def at_floor(width: float | None, ratio: float | None, *,
             tolerance: float = DEFAULT_TOLERANCE, min_shrink: float = DEFAULT_MIN_SHRINK,
             upper: float | None = None) -> bool:
    """Whether one target's interval satisfies the rule: its relative half-width is within
    ``tolerance`` (and so is ``upper``, :func:`width_upper`, when given), or its noise-floor
    ratio (None: unknown) is at least ``1 − min_shrink``."""
    if width is None:
        return False
    sure = width <= tolerance and (upper is None or upper <= tolerance)
    return sure or (ratio is not None and ratio >= 1 - min_shrink)


def at_limit(at_bound: Sequence[str]) -> str:
    """``E at its limit``, ``E, alpha at their limits`` (``a parameter at its limit`` when
    none is named): how the rule and ``scalebo status`` name the parameters at a bound."""
    names = ", ".join(at_bound) or "a parameter"
    return f"{names} at {'their limits' if len(at_bound) > 1 else 'its limit'}"


def _unsettled(status: str, message: str, at_bound: Sequence[str]) -> str:
    """Why the rule does not stop on a point fit with this status (not ``converged``);
    ``at_bound``: the parameters at a bound (:attr:`~scalebo.fitting.robust.FitResult
    .at_bound`)."""
    if status == "bound hit":
        return (f"the law's fit hit a bound ({at_limit(at_bound)}): its "
                "interval reflects the bound, not the runs; runs that reach further in "
                "compute may pin the law down")
    if status == "max iterations":
        return "the law's fit did not converge (max iterations): its interval is not trusted"
    return f"the law's fit is {status}" + (f" ({message})" if message else "") + (
        ": its interval is not trusted")


def _unsure(widths: Mapping[float, float | None], tolerance: float,
            uppers: Mapping[float, float | None]) -> str:
    """``"; the interval is wider than the tolerance: ±5.92 % at 1e+22 FLOPs against
    ±0.5 %"``, with ``"not surely within it: ..."`` for the targets whose width is within
    the tolerance but not settled by its resamples, or that have no interval (``none``):
    what a stop on budget leaves unsure, "" when nothing is."""
    unsure = {C: w for C, w in widths.items()
              if w is None or not at_floor(w, None, tolerance=tolerance, upper=uppers.get(C))}
    if not unsure:
        return ""
    wide = [(C, w) for C, w in unsure.items() if w is not None and w > tolerance]
    loose = [(C, w) for C, w in unsure.items() if w is None or w <= tolerance]
    parts = [f"{what}: " + ", ".join(f"{'none' if w is None else f'±{100 * w:.3g} %'} at "
                                     f"{C:.3g} FLOPs" for C, w in group)
             for what, group in (("wider than the tolerance", wide),
                                 ("not surely within " + ("it" if wide else "the tolerance"),
                                  loose)) if group]
    return f"; the interval is {'; '.join(parts)} against ±{100 * tolerance:g} %"


def stop_decision(widths: Mapping[float, float | None], *, remaining: float,
                  cheapest_left: float | None,
                  tolerance: float = DEFAULT_TOLERANCE, unit: str = "FLOPs",
                  floor_ratios: Mapping[float, float | None] | None = None,
                  min_shrink: float = DEFAULT_MIN_SHRINK,
                  law_status: str | None = None, law_message: str = "",
                  law_at_bound: Sequence[str] = (), n_running: int = 0,
                  uppers: Mapping[float, float | None] | None = None) -> tuple[bool, str]:
    """``(stop, reason)`` from the 80 % half-widths at each target (FLOPs → relative width),
    the remaining budget and the cost of the cheapest configuration still untried (None:
    none left), both in ``unit`` (the grid's budget unit), and, for a noise-free interval,
    the noise-floor ratio at each target (:class:`~scalebo.search.noise_floor.NoiseFloor`;
    None: no floor clause). ``law_status`` (and ``law_message``, and ``law_at_bound``, the
    natural names of the parameters at a bound): the point fit's
    :class:`~scalebo.fitting.robust.FitStatus`; anything but ``"converged"`` keeps the
    campaign going while budget is left (None: not checked). ``n_running``: runs in flight;
    when the budget (or the grid) is used up while some are, the reason says to wait for
    them, since the law and its interval change when they finish. ``uppers``: each target's
    :func:`width_upper`; a width within the tolerance whose upper value is not keeps the
    campaign going (its posterior draws are too few to tell). Raises ValueError unless
    ``0 < min_shrink < 1``.
    """
    check_min_shrink(min_shrink)
    wait = "" if not n_running else (
        f"; {n_running} run{'s' if n_running > 1 else ''} still in flight: nothing more to "
        "start, but the law and its interval change when they finish (run status again then)")
    short = _unsure(widths, tolerance, uppers or {})  # a stop on budget is not a sure law
    if cheapest_left is None:
        return True, "every configuration of the grid is trained or in flight" + short + wait
    if remaining < cheapest_left:
        spent = "committed" if n_running else "spent"
        left = (f"{remaining:.4g} {unit} left" if remaining >= 0 else
                f"over it by {-remaining:.4g} {unit}")
        return True, (f"the budget is {spent}: {left}, the cheapest untried configuration "
                      f"costs {cheapest_left:.4g}{short}{wait}")
    missing = [C for C, w in widths.items() if w is None]
    if missing:
        return False, (f"no interval at {', '.join(f'{C:.3g}' for C in missing)} FLOPs yet "
                       "(too few runs, or the law posterior failed: see the notes)")
    if law_status is not None and law_status != "converged":
        return False, _unsettled(law_status, law_message, law_at_bound)
    ups = dict(uppers or {})
    ratios = dict(floor_ratios or {})
    # one predicate per target, as the stop-rule replay's at_floor: a width is settled when
    # it and its resampled upper value are within the tolerance; the floor clause below
    unsettled = {C: w for C, w in widths.items()
                 if not at_floor(w, None, tolerance=tolerance, upper=ups.get(C))}
    if not unsettled:
        return True, (f"the 80 % interval is within ±{100 * tolerance:g} % at every target "
                      f"(widest ±{100 * max(widths.values()):.3g} %)")
    wide = {C: w for C, w in unsettled.items() if w > tolerance}
    C, w = max((wide or unsettled).items(), key=lambda kv: kv[1])
    r = ratios.get(C)
    if wide:
        text = (f"the 80 % interval at {C:.3g} FLOPs is ±{100 * w:.3g} %, wider than "
                f"±{100 * tolerance:g} %")
    else:
        text = (f"the 80 % interval at {C:.3g} FLOPs is ±{100 * w:.3g} %, within "
                f"±{100 * tolerance:g} %, but not surely: over resamples of its posterior "
                f"draws its width reaches ±{100 * ups[C]:.3g} % ({100 * MC_LEVEL:g}th "
                "percentile), so another --seed could say otherwise; more posterior samples "
                "settle it (--samples; n_samples= in Python)")
    if floor_ratios is not None and all(
            at_floor(v, ratios.get(c), tolerance=tolerance, min_shrink=min_shrink,
                     upper=ups.get(c)) for c, v in unsettled.items()):
        return True, (f"{text}, but training every untried configuration would narrow it by "
                      f"only {100 * (1 - r):.2g} % (to ±{100 * r * w:.3g} %): the grid's "
                      "noise floor")
    if r is not None:
        text += (f"; training every untried configuration could narrow it to "
                 f"±{100 * r * w:.3g} %")
    return False, text
