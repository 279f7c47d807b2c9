"""Intervals of a replay's law, scored against the reference after the fact.

A summary holds quantiles ``{"q02.5", "q10", "q50", "q90", "q97.5"}`` of the law's loss
(nats) at each of the problem's targets (FLOPs, :mod:`scalebo.bench.targets`) — from the law
posterior (:mod:`scalebo.search.law_posterior`: samples of the unobserved grid) or from a
bootstrap over the observed runs (:func:`bootstrap_summary`, what ``scalebo fit
--bootstrap`` gives, blind to the unobserved grid). :func:`score_intervals` adds the
reference law's loss and whether the 80 % (q10–q90) and 95 % (q02.5–q97.5) intervals cover
it (calibration, DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from scalebo.bench.metrics import (
    _points,
    _reference,
    c_key,
    fit_table,
    predict_compute,
)
from scalebo.bench.problems import ReplayProblem
from scalebo.errors import FitError
from scalebo.fitting.bootstrap import bootstrap_fit
from scalebo.fitting.robust import FitResult
from scalebo.search.law_posterior import COVER_RTOL, QUANTILES, covers

__all__ = ["COVERAGE_RTOL", "bootstrap_summary", "reference_losses", "score_intervals",
           "without_wall_times"]

#: Relative slack of the coverage check: the fitter's precision on a prediction
#: (:func:`~scalebo.search.law_posterior.covers`).
COVERAGE_RTOL = COVER_RTOL


def reference_losses(problem: ReplayProblem, law: str) -> dict[str, float] | None:
    """The reference law's loss (nats) at each of the problem's targets, keyed by
    :func:`c_key`; None without a reference or a compute-optimal path."""
    ref = _reference(problem, law)
    if ref is None:
        return None
    try:
        values = predict_compute(law, ref, np.asarray(problem.targets))
    except FitError:
        return None
    return {c_key(c): float(v) for c, v in zip(problem.targets, values, strict=True)}


def score_intervals(problem: ReplayProblem, summaries: Mapping[str, Mapping]
                    ) -> dict[str, dict]:
    """Each law's posterior summary with the reference's loss and whether each interval
    (80 %: q10–q90, 95 %: q02.5–q97.5) covers it, at every target of ``problem``, within
    :data:`COVERAGE_RTOL` (a posterior collapsed onto a point fit that equals the reference
    to the fitter's precision covers it)."""
    out = {}
    for law, summary in summaries.items():
        entry = dict(summary)
        ref = reference_losses(problem, law)
        entry["reference_loss"] = ref
        covered = {}
        for key, q in (summary.get("predicted_loss") or {}).items():
            if ref is None or key not in ref or q.get("q10") is None:
                covered[key] = None
                continue
            covered[key] = {"80": bool(covers(q["q10"], q["q90"], ref[key])),
                            "95": bool(covers(q["q02.5"], q["q97.5"], ref[key]))}
        entry["covered"] = covered
        out[law] = entry
    return out


def without_wall_times(value: object) -> object:
    """``value`` (nested dicts and lists) without its wall-clock fields (every ``seconds``
    key, e.g. of a law posterior), for comparing the results of identical runs."""
    if isinstance(value, Mapping):
        return {k: without_wall_times(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list | tuple):
        return [without_wall_times(v) for v in value]
    return value


def bootstrap_summary(problem: ReplayProblem, law: str, table: pd.DataFrame, *,
                      n_resamples: int = 200, seed: int = 0,
                      fit: FitResult | None = None) -> dict:
    """Quantiles of ``law``'s loss at each C from a bootstrap over the frontier points of
    ``table`` (observed runs; :func:`~scalebo.fitting.bootstrap.bootstrap_fit`, resampling the
    points with replacement, as ``scalebo fit --bootstrap``). Same layout as a law
    posterior's summary; ``message`` says why it is empty. ``fit``: the law already fitted
    on ``table`` by :func:`~scalebo.bench.metrics.fit_table`, used instead of refitting.

    Raises:
        FitError: the point fit failed (too few frontier points).
    """
    fit = fit_table(problem, law, table) if fit is None else fit
    X, y = _points(law, table)
    boot = bootstrap_fit(fit, X, y, n_resamples=n_resamples, rng=seed)
    values = []
    for x in boot.samples:
        try:
            values.append(predict_compute(law, _with_x(fit, x), np.asarray(problem.targets)))
        except FitError:  # a replicate without a compute-optimal path
            continue
    # why replicates are missing: resamples that cannot identify the law, identified ones
    # without a converged start, and fits without a compute-optimal path (the rest)
    out: dict = {"samples": int(n_resamples), "n_failed": int(n_resamples - len(values)),
                 "n_unidentified": int(boot.n_unidentified),
                 "n_unconverged": int(boot.n_failed - boot.n_unidentified),
                 "n_no_prediction": int(len(boot.samples) - len(values))}
    if not values:
        out["predicted_loss"] = None
        out["message"] = "no bootstrap replicate has a prediction"
        return out
    V = np.asarray(values)
    probs = list(QUANTILES.values())
    out["predicted_loss"] = {
        c_key(C): {k: float(v) for k, v in zip(QUANTILES, np.quantile(V[:, j], probs),
                                               strict=True)}
        for j, C in enumerate(problem.targets)}
    return out


def _with_x(fit, x):
    from dataclasses import replace

    return replace(fit, x=np.asarray(x, dtype=np.float64))
