"""The anchor run: part of the budget held back for one run at the largest scale it affords.

A compute law is extrapolated from its largest points, but the ``spent`` window never starts
a run costing more than everything trained so far, so the largest run a search can reach is
half its budget, and EI per unit cost seldom asks even for that. On a grid whose compute sits
in a few large cells (the reference envelope a third of ``C_total``) the search then never
trains the scales the law depends on. With ``anchor = f`` the search holds back the cost of
one configuration of the **anchor cell** — the (N, D) cell of the costliest acquirable
configuration costing at most ``f × budget`` (budget units: FLOPs, or the grid's price) —
searches as usual with the rest, and once nothing else fits, trains the configuration of the
anchor cell with the lowest posterior mean (informed by every run before it); then whatever
is left is searched as usual. The rule is stateless: the anchor is *placed* (nothing held
back) as soon as any configuration of the anchor cell is trained or running, whoever chose
it, so a campaign that re-plans at every call (``scalebo suggest``) gives the same runs as
one long loop.

The anchor cell is the costliest, not the best: on a grid with over-trained small models
(OELLM-English: N = 983M at 300B tokens costs more than N = 1.7B at 120B, and is 17 mnats
worse) it can lie off the envelope, where its run buys nothing the law uses. So at the
anchor's turn (nothing else fits beside it) the anchor is *dropped* — nothing held back any
more, no anchor run, its budget searched as usual — if the observed runs **dominate** its
cell: a run costing at most the cell's has a lower loss than the cell's lowest posterior
mean minus ``DOMINANCE_SD`` posterior standard deviations (:func:`anchor_dominated`). The
search asks its surrogate, fitted on the observed runs only, so the rule stays stateless.

Measured (docs/reproduction.md, "What changed in 0.3.8"): ``f = 0.7`` against no anchor,
|error| of the compute law at 1e25 FLOPs, 1 / 5 / 10 / 25 % of ``C_total``, seeds 0–9 × 2
noise draws of ``benchmarks/other_grids.py``: envelope-heavy grid 10.7 / 9.75 / 6.22 / 2.40 →
9.23 / 2.43 / 1.67 / 0.62 %, learning-rate-only grid 21.3 / 4.99 / 1.04 / 0 → 15.8 / 3.75 /
1.41 / 0 %; no significant change on grids whose costliest cell is under 1 % of the grid.
Dropping a dominated anchor (0.4.1, "What changed in 0.4.1"; one SD: the gap was 1.1-3.0 SD
on OELLM-English, at most 0.35 SD on the synthetic grids, where a smaller margin misfired):
OELLM-English seeds 0-19 at 5 / 10 % 0.63 / 0.08 -> 0.48 / 0.05 % (8 better, 1 worse at 5 %);
StepLaw and the synthetic grids unchanged.
"""

from __future__ import annotations

import numpy as np

from scalebo.search.grid import Grid
from scalebo.search.window import COST_RTOL

__all__ = ["DOMINANCE_SD", "TIE_TOKENS_PER_PARAMETER", "anchor_candidates", "anchor_dominated",
           "anchor_reserve", "anchor_rows"]

#: Tokens per parameter that break a tie between equally costly anchor cells (the one nearest
#: in log wins): Hoffmann et al.'s (2022) compute-optimal ratio, so that of (1e8, 8e9) and
#: (2e8, 4e9) the anchor is the cell likelier to lie on the envelope. Before 0.4.20 the file's
#: row order decided (a trial's reversed file anchored the other cell; 0.77 → 0.05 % error).
TIE_TOKENS_PER_PARAMETER = 20.0
#: Posterior standard deviations below the anchor cell's lowest posterior mean that an
#: observed, no dearer run must reach to drop the anchor (:func:`anchor_dominated`).
DOMINANCE_SD = 1.0


def anchor_rows(grid: Grid, budget: float, fraction: float) -> np.ndarray:
    """Grid rows of the anchor cell, increasing (empty when ``fraction`` is 0 or nothing fits).
    Of equally costly configurations (to :data:`~scalebo.search.window.COST_RTOL`) the one
    whose tokens per parameter D/N are closest in log to :data:`TIE_TOKENS_PER_PARAMETER`,
    then the larger N, sets the cell, whatever the rows' order.

    Args:
        grid: The grid (held-out cells are never anchors).
        budget: Total budget in the grid's budget unit (:attr:`Grid.budget_cost`).
        fraction: Largest share of ``budget`` one anchor configuration may cost, in [0, 1).
    """
    if fraction <= 0:
        return np.zeros(0, dtype=np.int64)
    cost = grid.budget_cost
    fits = ~grid.held_out & (cost <= fraction * budget * (1 + COST_RTOL))
    if not fits.any():
        return np.zeros(0, dtype=np.int64)
    dearest = float(cost[fits].max())
    N, D = grid.configs["N"].to_numpy(), grid.configs["D"].to_numpy()
    tied = np.flatnonzero(fits & (cost >= dearest * (1 - COST_RTOL)))  # 1e8 x 8e9, 2e8 x 4e9
    off = np.abs(np.log(D[tied] / N[tied] / TIE_TOKENS_PER_PARAMETER))
    top = int(tied[np.lexsort((-N[tied], np.round(off, 9)))[0]])
    return np.flatnonzero(fits & (N == N[top]) & (D == D[top]))


def anchor_candidates(rows: np.ndarray, tried: np.ndarray, unavailable: np.ndarray,
                      marginal: np.ndarray, room: float = np.inf) -> np.ndarray:
    """The anchor cell's ``rows`` that may still be started within ``room`` (the remaining
    budget, budget units, against ``marginal`` costs): none once one of them is ``tried``
    (trained or running, ``(n_cfg,)`` bool, the anchor is placed), else those neither
    ``unavailable`` (observed or failed) nor dearer than ``room``."""
    if rows.size == 0 or tried[rows].any():
        return rows[:0]
    return rows[~unavailable[rows] & (marginal[rows] <= room)]


def anchor_reserve(rows: np.ndarray, tried: np.ndarray, unavailable: np.ndarray,
                   marginal: np.ndarray, room: float = np.inf) -> float:
    """What to hold back for the anchor (budget units): the dearest marginal cost among its
    :func:`anchor_candidates`, 0 when there is none.

    A search that holds the reserve back always keeps room for it; a campaign whose runs
    (chosen elsewhere, or failed and retried) left less than the anchor costs gets no
    reservation, rather than a reservation that blocks every run and is never placed."""
    left = anchor_candidates(rows, tried, unavailable, marginal, room)
    return float(marginal[left].max()) if left.size else 0.0


def anchor_dominated(cost: np.ndarray, rows: np.ndarray, observed_idx: np.ndarray,
                     observed_y: np.ndarray, mean: np.ndarray, std: np.ndarray,
                     n_sd: float = DOMINANCE_SD) -> bool:
    """Whether the observed runs dominate the anchor cell: one of them (grid rows
    ``observed_idx``, losses ``observed_y`` in nats) costs at most the cell's runs (``cost``:
    per grid row, budget units) and has a lower loss than ``min(mean − n_sd·std)`` over the
    cell's ``rows`` (posterior mean and standard deviation there, nats). False when ``rows``
    is empty or the posterior is not finite."""
    if rows.size == 0:
        return False
    low = float(np.min(np.asarray(mean, dtype=np.float64) - n_sd * np.asarray(std, float)))
    if not np.isfinite(low):
        return False
    cheaper = cost[observed_idx] <= cost[rows].max() * (1 + COST_RTOL)
    return bool(np.any(np.asarray(observed_y, dtype=np.float64)[cheaper] < low))
