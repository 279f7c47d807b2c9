"""What ``scalebo status`` says about the campaign's law beside its intervals.

* :func:`frontier_law_note`: the compute law on the Pareto envelope against the lower convex
  hull of the posterior-mean table (:func:`~scalebo.fitting.summary.frontier_note`);
* :func:`law_form_note`: the Chinchilla law's compute-optimal loss outside the compute law's
  80 % interval (the law's form matters more than the runs left);
* :func:`envelope_share_note`: most of the envelope the compute law is fitted on is the GP's
  fill-in, not runs.

Losses in nats, compute in FLOPs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from scalebo.search.grid import Grid
from scalebo.search.law_posterior import target_key

__all__ = ["envelope_share_note", "fitted_draws", "frontier_law_note", "law_form_note"]


def fitted_draws(compute: Any) -> Any:
    """The posterior-mean table (:class:`~scalebo.search.law_samples.Draws`) of the compute
    law's posterior ``compute`` when its point fit succeeded on it, else None: what the notes
    on that fit read."""
    if compute is None or compute.samples is None or compute.point is None \
            or not compute.point.success:
        return None
    return compute.samples


def frontier_law_note(grid: Grid, compute: Any, targets: tuple[float, ...]) -> str | None:
    """:func:`~scalebo.fitting.summary.frontier_note` of the point fit, on the posterior-mean
    table of the whole grid (the campaign's own runs where trained)."""
    if (d := fitted_draws(compute)) is None:
        return None
    from scalebo.fitting.robust import DEFAULT_HUBER_DELTA
    from scalebo.fitting.summary import frontier_note

    table = pd.DataFrame({"C": grid.cost[d.rows], "loss": d.mean})
    return frontier_note(table, compute.point.law, "loss", compute.point, targets,
                         DEFAULT_HUBER_DELTA, advice="the intervals are about the envelope's "
                         "law, which the replays score, and do not hold this spread")


def law_form_note(compute: dict | None, chinchilla: dict | None,
                  targets: tuple[float, ...]) -> str | None:
    """A note where the Chinchilla law's compute-optimal loss (posterior ``chinchilla``
    summary, shown only when its point fit converged and the runs identify it) and the compute
    law's (``compute``) have disjoint 80 % intervals: the law's form, which neither interval
    holds, then matters more than the runs left to train."""
    said = []
    for C in targets:
        key = target_key(C)
        q = (compute or {}).get("predicted_loss", {}).get(key) or {}
        c = (chinchilla or {}).get("predicted_loss", {}).get(key) or {}
        if None in (q.get("q10"), q.get("q90"), c.get("q10"), c.get("q90")):
            continue  # every sample of a law failed: no interval to compare
        if c["q90"] < q["q10"] or c["q10"] > q["q90"]:
            said.append(f"{c['q50']:.4f} nats at {C:.3g} FLOPs (80 %: {c['q10']:.4f}–"
                        f"{c['q90']:.4f}), {100 * (c['q50'] / q['q50'] - 1):+.2g} % from the "
                        f"compute law's {q['q50']:.4f} ({q['q10']:.4f}–{q['q90']:.4f})")
    if not said:
        return None
    return ("the Chinchilla law L(N, D) predicts a compute-optimal loss of " + "; ".join(said)
            + ": the two laws' 80 % intervals do not overlap, so the compute law's interval "
            "does not say how sure the loss is, only how sure that law is (the compute law "
            "follows the grid's envelope, which at the grid's edge can lie above the "
            "compute-optimal frontier; the Chinchilla law assumes its form beyond the grid); "
            "compare `scalebo fit --law chinchilla --predict C`")


def envelope_share_note(compute: np.ndarray, loss: np.ndarray, is_run: np.ndarray) -> str:
    """A note when fewer than half the points of the Pareto envelope of the posterior-mean
    table (``compute`` FLOPs, ``loss`` nats, ``(m,)`` each) are completed runs (``is_run``,
    a mask ``(m,)``; the others are the GP's posterior means, at configurations untried or
    still running); "" when half or more are. The compute law and its interval then say
    what the GP believes about configurations no completed run has tried (a campaign of 8
    runs in 6 of 16 cells: 4 of the envelope's 7 points filled in)."""
    from scalebo.fitting.frontier import pareto_envelope

    on = pareto_envelope(np.asarray(compute, float), np.asarray(loss, float))
    k, m = int(on.sum()), int(np.asarray(is_run, bool)[on].sum())
    if k == 0 or 2 * m >= k:
        return ""
    return (f"{k - m} of the {k} points of the Pareto envelope the compute law is fitted on are "
            f"the GP's predictions at configurations no completed run has tried ({m} "
            f"{'is a run' if m == 1 else 'are runs'}): the law and its intervals say what the GP "
            "believes there, which only runs there can check")
