"""Compute-optimal allocation from a run table by Chinchilla approaches 1, 2 and 3, side by side.

What ``scalebo allocate`` prints. Conventions: ``C`` in FLOPs (``6·N·D`` unless the table has a
``C`` column), ``N`` parameters, ``D`` tokens, losses in nats. Each approach gives power laws
``N*(C) = G_N·C^a`` and ``D*(C) = G_D·C^b`` (:class:`~scalebo.fitting.allocation.AllocationLaw`);
Hoffmann et al. (2022) found the three to disagree by a few hundredths in ``a`` on their runs,
which is why a user wants to see them together.

* **1** — the best run of each (N, D) cell, then the Pareto envelope of (C, loss) over them;
  ``log N`` and ``log D`` regressed on ``log C`` (:func:`~scalebo.fitting.allocation.approach1`).
  Runs whose C agree within ``ISOFLOP_RTOL`` count as one compute (a table of isoFLOP
  profiles with sizes rounded to whole numbers would otherwise put off-optimal runs a little
  cheaper than their budget's best on the envelope).
* **2** — isoFLOP profiles: the cell bests grouped by compute (a column naming each run's
  budget, or runs whose C agree within ``ISOFLOP_RTOL``); in each group with ≥ 3 sizes a
  parabola of loss in ``log N`` gives ``N*``; ``D* = C/(k N*)`` with ``k`` the budget's C/(N·D)
  (6 unless the table's C says otherwise) (:func:`~scalebo.fitting.allocation.approach2`).
* **3** — ``L(N, D) = E + A/N^α + B/D^β`` fitted to the cell bests and minimized under
  ``C = 6ND`` (:func:`~scalebo.fitting.allocation.approach3`).

An approach the table cannot support is reported with the reason (never silently left out).
The approaches themselves run in :mod:`scalebo.fitting.allocation_approaches`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scalebo import __version__
from scalebo.fitting.allocation_approaches import (
    EXPONENT_LEVEL,
    ISOFLOP_RTOL,
    AllocationEstimate,
    check_budget_column,
    envelope_estimate,
    exponent_interval,
    isoflop_budgets,
    isoflop_estimate,
    law_estimate,
)
from scalebo.fitting.arguments import computes, resamples
from scalebo.fitting.frontier import best_per_cell

__all__ = ["APPROACHES", "DISAGREEMENT_FACTOR", "EXPONENT_LEVEL", "ISOFLOP_RTOL",
           "AllocationEstimate", "AllocationSummary", "allocation_summary",
           "disagreement_notes", "exponent_interval", "isoflop_budgets"]

APPROACHES: tuple[int, ...] = (1, 2, 3)

@dataclass(frozen=True)
class AllocationSummary:
    """The approaches' allocation laws for one table, with predictions at given computes.

    ``n_runs``: rows loaded (runs, or checkpoints of runs); ``n_cells``: their (N, D) cells;
    ``C_range``: the smallest and largest compute of the cells (FLOPs).
    """

    source: str
    n_runs: int
    n_cells: int
    estimates: tuple[AllocationEstimate, ...]
    predict: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()
    C_range: tuple[float, float] = (float("nan"), float("nan"))

    @property
    def ok(self) -> bool:
        """Whether at least one approach gave a law."""
        return any(e.law is not None for e in self.estimates)

    def predictions(self) -> list[dict[str, Any]]:
        """One row per (C, approach with a law): ``C``, ``approach``, ``N_opt``, ``D_opt``,
        ``tokens_per_param`` and, for approach 3 with a bootstrap, ``intervals``: each of
        the three's percentile interval at the exponents' level (else None)."""
        return [{"C": float(c), "approach": e.approach, **e.at(c),
                 "intervals": {k: list(v) for k, v in e.interval_at(c).items()} or None}
                for c in self.predict for e in self.estimates if e.law is not None]

    def to_dict(self) -> dict[str, Any]:
        return {"scalebo_version": __version__, "source": self.source, "n_runs": self.n_runs,
                "n_cells": self.n_cells, "C_range": list(self.C_range),
                "units": {"C": "FLOPs", "N_opt": "parameters", "D_opt": "tokens"},
                "exponent_level": EXPONENT_LEVEL,
                "estimates": [e.to_dict() for e in self.estimates],
                "predictions": self.predictions(), "warnings": list(self.warnings)}


def allocation_summary(table: Any, approaches: Sequence[int] | int = APPROACHES, *,
                       isoflop_column: str | None = None, min_points: int = 3,
                       predict: Sequence[float] = (), bootstrap: int = 0,
                       seed: int = 0) -> AllocationSummary:
    """Compute-optimal allocation of ``table`` by each of ``approaches`` (see the module doc).

    Args:
        table: a :class:`~scalebo.data.runs.RunTable` (completed runs; failed ones excluded).
        approaches: any of 1, 2, 3.
        isoflop_column: a column holding each run's isoFLOP budget in FLOPs (approach 2);
            None groups runs whose C agree within ``ISOFLOP_RTOL``.
        min_points: model sizes an isoFLOP budget needs for its parabola (≥ 3).
        predict: computes (FLOPs) at which to give N*, D* and D*/N* (one or several).
        bootstrap: resamples of the cells for approach 3's exponent interval (0: none;
            whole runs when a ``run`` column groups checkpoints), seeded by ``seed``.

    Raises:
        ValueError: an unknown approach, ``min_points`` < 3, a missing or non-positive
            isoFLOP column.
    """
    from scalebo.data.runs import RunTable

    if not isinstance(table, RunTable):
        raise TypeError(f"allocation_summary takes a RunTable (scalebo.load_runs(path or "
                        f"DataFrame)), got {type(table).__name__}")
    approaches = (approaches,) if isinstance(approaches, int) else tuple(approaches)
    bootstrap, predict = resamples(bootstrap), computes(predict)
    unknown = [a for a in approaches if a not in APPROACHES]
    if unknown or not approaches:
        raise ValueError(f"approaches must be among {list(APPROACHES)}, got {list(approaches)}")
    if min_points < 3:
        raise ValueError(f"an isoFLOP parabola needs ≥ 3 sizes, got min_points={min_points}")
    frame = table.frame
    if isoflop_column is not None:
        check_budget_column(frame, isoflop_column, table.source)
    keys = ["N", "D", *([isoflop_column] if isoflop_column else [])]
    cells = best_per_cell(frame, keys)
    notes = []
    if isoflop_column and cells.groupby(["N", "D"]).ngroups < len(cells):
        notes.append(f"some (N, D) cells appear under several {isoflop_column!r} budgets; "
                     "each (N, D, budget) is one point")
    out = []
    for a in sorted(set(approaches)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = (envelope_estimate(cells, isoflop_column) if a == 1 else
                   isoflop_estimate(cells, isoflop_column, min_points) if a == 2 else
                   law_estimate(cells, bootstrap, seed))
        notes += [f"approach {a}: {w.message}" for w in caught]
        out.append(est)
    from scalebo.fitting.summary import tiny_compute_notes

    notes += tiny_compute_notes(predict, float(cells["C"].min()))
    if bootstrap and 3 not in approaches:
        notes.append(f"bootstrap {bootstrap}: only approach 3 is bootstrapped (approaches 1 and "
                     "2 give t-intervals), and it was not asked for")
    summary = AllocationSummary(source=table.source, n_runs=len(frame), n_cells=len(cells),
                                estimates=tuple(out), predict=tuple(float(c) for c in predict),
                                C_range=(float(cells["C"].min()), float(cells["C"].max())))
    return replace(summary, warnings=(*notes, *disagreement_notes(summary)))


#: Approaches whose N* at a predicted compute differ by more than this factor are named.
DISAGREEMENT_FACTOR = 2.0


def disagreement_notes(summary: AllocationSummary) -> list[str]:
    """A note per ``--predict`` compute where the approaches' N* differ by more than
    :data:`DISAGREEMENT_FACTOR`: the table then does not pin the allocation down there. It
    gives every approach's N* and, with three, names the one farthest from the other two."""
    notes = []
    predictions = summary.predictions()
    for C in summary.predict:
        rows = [r for r in predictions if r["C"] == C]
        if len(rows) < 2:
            continue
        n = {r["approach"]: r["N_opt"] for r in rows}
        if max(n.values()) <= DISAGREEMENT_FACTOR * min(n.values()):
            continue
        shown = ", ".join(f"{v:.3g} ({k})" for k, v in n.items())
        apart = ""
        if len(n) == 3:
            logs = {k: np.log(v) for k, v in n.items()}
            mid = float(np.median(list(logs.values())))
            odd = max(logs, key=lambda k: abs(logs[k] - mid))
            rest = [v for k, v in n.items() if k != odd]
            if max(rest) <= DISAGREEMENT_FACTOR * min(rest):
                apart = f"; approach {odd} stands apart from the other two, which agree"
        notes.append(f"at C = {C:.3g} FLOPs the approaches put N* at {shown} parameters, "
                     f"{max(n.values()) / min(n.values()):.3g}x apart{apart}: the runs do not "
                     "pin the allocation down this far out; trust no one approach alone")
    return notes
