"""Which (N, D) cells a replay holds out of the search, when equally costly cells make the
choice arbitrary (:meth:`~scalebo.search.grid.Grid.from_frame` holds out the costliest cells,
ties ordered by N, then D)."""

from __future__ import annotations

import numpy as np

from scalebo.search.grid import Grid

__all__ = ["held_out_tie"]


def held_out_tie(grid: Grid) -> str | None:
    """Which of equally costly (N, D) cells are held out, when the held-out cells' cost is
    shared by a cell that stays in the search; None otherwise. Cells of equal cost are ordered
    by N, then D, and the last ones are held out (:meth:`Grid.from_frame`)."""
    n_cell = int(grid.cell_cost.size)
    k = int(np.unique(grid.cell_ids[grid.held_out]).size)
    if k == 0 or grid.cell_cost[n_cell - k - 1] != grid.cell_cost[n_cell - k]:
        return None
    first = np.unique(grid.cell_ids, return_index=True)[1]  # one configuration per cell
    N = grid.configs["N"].to_numpy()[first]
    D = grid.configs["D"].to_numpy()[first]
    tied = np.flatnonzero(grid.cell_cost == grid.cell_cost[n_cell - k])

    def cells(ids: np.ndarray) -> str:
        return ", ".join(f"(N={N[i]:.4g}, D={D[i]:.4g})" for i in ids)

    return (f"cells {cells(tied)} cost the same ({grid.cell_cost[n_cell - k]:.4g} FLOPs); of "
            f"these, {cells(tied[tied >= n_cell - k])} held out (the larger N, then D), "
            f"{cells(tied[tied < n_cell - k])} stay in the search")
