"""The per-sample tables a law posterior fits: Pareto envelopes and cell bests of S tables.

:func:`envelope_masks` finds the Pareto envelope of every posterior sample at once;
:func:`sample_frontiers` turns S sampled tables into the shared inputs, targets and weights
of one batched fit (:func:`scalebo.fitting.batch.fit_batch`): for the compute law the union of
the samples' envelopes with 0/1 weights, for Chinchilla every cell's best loss. Units:
compute in FLOPs, losses in nats, N in parameters, D in tokens.
"""

from __future__ import annotations

import numpy as np

from scalebo.fitting.frontier import snap_ties
from scalebo.search.grid import Grid

__all__ = ["envelope_masks", "sample_frontiers", "too_few_points"]


def too_few_points(law_name: str, k: int, n_params: int) -> str:
    """Why ``law_name`` (``"compute"`` or ``"chinchilla"``) cannot be fitted on a table whose
    frontier has ``k < n_params`` points, in the user's terms: the compute law is fitted on
    the Pareto envelope of (compute, loss), Chinchilla on each (N, D) cell's best run — so
    "4 observations" on a table of 10 runs reads as "4 cells"."""
    what = (f"its Pareto envelope of (compute, loss) has {k} point{'s' * (k != 1)}"
            if law_name == "compute" else f"it has {k} (N, D) cell{'s' * (k != 1)}")
    return f"{what}, fewer than the {law_name} law's {n_params} parameters"


def envelope_masks(cost: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Pareto envelope of ``(cost, losses[s])`` for every sample at once, mask ``(S, m)``.

    Row ``s`` equals :func:`scalebo.fitting.frontier.pareto_envelope` ``(cost, losses[s])``:
    a row is kept iff its loss is below the minimum of every cheaper cost level and it is
    the first (lowest position) lowest loss of its own cost level. ``cost`` in FLOPs
    ``(m,)``, losses in nats ``(S, m)``, finite.
    """
    cost = snap_ties(np.asarray(cost, dtype=np.float64))  # ties as pareto_envelope's
    L = np.atleast_2d(np.asarray(losses, dtype=np.float64))
    m = cost.size
    if m == 0:
        return np.zeros(L.shape, dtype=bool)
    order = np.argsort(cost, kind="stable")  # within a cost level: by position
    c, L = cost[order], L[:, order]
    new = np.r_[True, c[1:] != c[:-1]]
    level, first_pos = np.cumsum(new) - 1, np.flatnonzero(new)
    lmin = np.minimum.reduceat(L, first_pos, axis=1)  # (S, n_levels)
    below = np.full_like(lmin, np.inf)
    below[:, 1:] = np.minimum.accumulate(lmin, axis=1)[:, :-1]
    pos = np.arange(m)
    first = np.minimum.reduceat(np.where(L == lmin[:, level], pos, m), first_pos, axis=1)
    keep = (pos == first[:, level]) & (lmin < below)[:, level]
    mask = np.empty_like(keep)
    mask[:, order] = keep
    return mask


def sample_frontiers(name: str, grid: Grid, rows: np.ndarray, losses: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Shared inputs ``X`` (n, k), targets ``(S, n)`` and 0/1 weights ``(S, n)`` or None
    (Chinchilla: every sample fits every cell) for law ``name`` on ``losses`` ``(S, m)`` of
    grid ``rows`` ``(m,)``."""
    if name == "compute":
        cost = grid.cost[rows]
        masks = envelope_masks(cost, losses)
        union = np.flatnonzero(masks.any(axis=0))
        return cost[union][:, None], losses[:, union], masks[:, union].astype(np.float64)
    cells = grid.cell_ids[rows]
    order = np.argsort(cells, kind="stable")
    first_pos = np.flatnonzero(np.r_[True, cells[order][1:] != cells[order][:-1]])
    best = np.minimum.reduceat(losses[:, order], first_pos, axis=1)
    rep = rows[order[first_pos]]  # one member of each cell: its N and D
    X = np.column_stack([grid.configs["N"].to_numpy(np.float64)[rep],
                         grid.configs["D"].to_numpy(np.float64)[rep]])
    return X, best, None
