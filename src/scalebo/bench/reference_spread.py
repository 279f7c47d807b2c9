"""How sure the reference law itself is: what a replay's error is measured against.

A replay scores the law it recovers against the reference compute law fitted on the whole
acquirable grid's Pareto envelope (:class:`~scalebo.bench.problems.ReplayProblem`), not
against the truth. That reference rests on a handful of envelope runs (StepLaw: 10,
OELLM-English: 21) and extrapolates decades beyond them, so it is uncertain too:
:func:`reference_spread` bootstraps it over its envelope runs (the same fitter and the
batched starts of ``fit --bootstrap``) and gives the interval of its prediction at a target
compute. A replay's ``|d| %`` below that half-width says the search agrees with the full
grid, not that it is that accurate at the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scalebo.bench.targets import shown_key
from scalebo.errors import ScaleboError
from scalebo.search.law_posterior import target_key

__all__ = ["ReferenceSpread", "reference_frontier_note", "reference_spread"]


@dataclass(frozen=True)
class ReferenceSpread:
    """The reference compute law at ``C`` FLOPs: ``point`` and the ``level`` bootstrap
    interval ``[low, high]`` (nats) over its ``n_points`` envelope runs, ``n_resamples``
    resamples (``n_failed`` of them without a fit)."""

    C: float
    point: float
    low: float
    high: float
    level: float
    n_points: int
    n_resamples: int
    n_failed: int

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width, % of the point prediction."""
        return 50.0 * (self.high - self.low) / self.point

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready (``half_width_pct`` included)."""
        return {**self.__dict__, "half_width_pct": self.half_width_pct}

    def describe(self) -> str:
        """One sentence for a replay's notes or a report."""
        return (f"the reference compute law, which a replay is scored against, predicts "
                f"{self.point:.4g} nats at {shown_key(target_key(self.C))} FLOPs; its "
                f"{100 * self.level:.0f} % "
                f"bootstrap interval over its {self.n_points} envelope runs is "
                f"[{self.low:.4g}, {self.high:.4g}] (±{self.half_width_pct:.1f} %"
                + (f"; {self.n_failed} of {self.n_resamples} resamples failed"
                   if self.n_failed else "") + "): a replay's "
                "|d| % below that says it agrees with the whole grid's law, not that it is "
                "that close to the truth")


def reference_spread(problem: Any, C: float = 1e25, *, n_resamples: int = 200,
                     level: float = 0.8, seed: int = 0) -> ReferenceSpread | None:
    """:class:`ReferenceSpread` of ``problem``'s reference compute law at ``C`` FLOPs, or
    None when it is not determined: the fit did not converge (a bound hit is a law with a
    parameter fixed, whose spread would look smaller than it is), the envelope has at most
    one run more than the law's parameters (resamples repeat runs and cannot be fitted, and
    the rest reproduce the data), or more than :data:`~scalebo.fitting.bootstrap.FAILED_SHARE`
    of the resamples failed. Seeded: reproducible."""
    try:
        return _spread(problem, C, n_resamples, level, seed)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError, ScaleboError):
        return None  # a caveat to print, never a reason for a replay or report to fail


def _spread(problem: Any, C: float, n_resamples: int, level: float, seed: int
            ) -> ReferenceSpread | None:
    from scalebo.fitting.bootstrap import FAILED_SHARE, bootstrap_fit
    from scalebo.fitting.robust import FitStatus

    ref = problem.reference_compute
    env = np.asarray(problem.envelope_idx)
    if ref is None or ref.status is not FitStatus.CONVERGED or env.size <= ref.law.n_params + 1:
        return None
    X = np.asarray(problem.grid.cost, dtype=np.float64)[env][:, None]
    y = np.asarray(problem.loss, dtype=np.float64)[env]
    boot = bootstrap_fit(ref, X, y, n_resamples=n_resamples, confidence_level=level, rng=seed)
    at = np.array([[float(C)]])
    if boot.n_failed > FAILED_SHARE * n_resamples:
        return None
    low, high = (float(v[0]) for v in boot.predict_interval(at))
    point = float(ref.predict(at)[0])
    return ReferenceSpread(float(C), point, low, high, level, int(env.size), n_resamples,
                           int(boot.n_failed))


def reference_frontier_note(problem: Any, C: float = 1e25) -> str | None:
    """:func:`~scalebo.fitting.summary.frontier_note` of ``problem``'s reference compute law:
    a note when the same law fitted on the lower convex hull of the whole acquirable grid
    predicts the loss at ``C`` FLOPs more than 1 % away from the envelope's reference, which
    replays are scored against (a trial's grid made from a known law: the envelope's
    reference 7.7 % above the true compute-optimal loss at 1e25 FLOPs and the hull's 3.1 %
    above that, the Chinchilla reference 0.4 % above the truth: neither frontier is right
    by construction); None otherwise."""
    import pandas as pd

    from scalebo.fitting.robust import DEFAULT_HUBER_DELTA
    from scalebo.fitting.summary import frontier_note

    ref = problem.reference_compute
    if ref is None or not ref.success:
        return None
    keep = ~np.asarray(problem.grid.held_out) & np.isfinite(problem.loss)
    if problem.diverged is not None:  # failed runs: out of the reference's runs too
        keep &= ~np.asarray(problem.diverged)
    table = pd.DataFrame({"C": np.asarray(problem.grid.cost, dtype=np.float64)[keep],
                          "loss": np.asarray(problem.loss, dtype=np.float64)[keep]})
    text = frontier_note(table, ref.law, "loss", ref, (float(C),), DEFAULT_HUBER_DELTA,
                         advice="replays score the envelope's law, so no replay error holds "
                         "this spread; compare the Chinchilla law's compute-optimal loss "
                         "(scalebo fit --law chinchilla --predict C)")
    return None if text is None else f"reference compute law: {text}"
