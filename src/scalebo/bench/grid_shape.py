"""Notes on a replayed grid's shape that hint at a typo or at runs missing from its file.

Two things go unnoticed in a recorded grid and change what a replay can buy:

* an axis value that sits much closer to another value than the axis's spacing and appears
  in few (N, D) cells (a learning rate of 0.0011 beside 0.001 on an axis spaced 2.5x, in one
  cell: a typo that adds a value of its own to the axis);
* holes in a grid that is otherwise the full product of its (N, D) cells and its axes' values
  (a run missing from the file, or excluded, e.g. still ``running``: no replay can buy it,
  and ``C_total`` leaves it out; a crashed run belongs in the file with a NaN loss).

Both are notes, not errors: grids need not be products (StepLaw's batch sizes differ by cell).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from scalebo.errors import data_rows, file_rows

__all__ = ["CLOSE_SHARE", "HOLE_SHARE", "grid_shape_notes"]

#: An axis value closer to its neighbour than this share of the axis's median log-spacing,
#: in at most a quarter of the cells, is named.
CLOSE_SHARE = 0.2
#: Holes are named when the grid holds at least ``1 - HOLE_SHARE`` of its product.
HOLE_SHARE = 0.05


def _close_values(frame: pd.DataFrame, axis: str, cells: pd.Series, name: str) -> list[str]:
    values = pd.to_numeric(frame[axis], errors="coerce")
    distinct = np.unique(values[values > 0])
    if distinct.size < 3:
        return []
    gaps = np.diff(np.log(distinct))
    typical = float(np.median(gaps))
    spread = cells.groupby(values).nunique()
    n_cells = cells.nunique()
    out = []
    for i in np.flatnonzero(gaps < CLOSE_SHARE * typical):
        pair = distinct[i], distinct[i + 1]
        rare, other = sorted(pair, key=lambda v: spread[v])
        if spread[rare] > max(1, n_cells // 4):
            continue
        pct = 100 * abs(rare / other - 1)
        d = next((d for d in range(6, 17) if f"{rare:.{d}g}" != f"{other:.{d}g}"), 17)
        rows = data_rows(file_rows(frame.index, (values == rare).to_numpy()))
        out.append(f"{name}: {axis} = {rare:.{d}g} ({rows}) is "
                   f"{pct:.2g} % from {other:.{d}g}, where the axis's values are otherwise a "
                   f"factor {math.exp(typical):.3g} apart, and it appears in {spread[rare]} of "
                   f"{n_cells} (N, D) cells: a typo? It is a value of the axis of its own")
    return out


def _holes(frame: pd.DataFrame, axes: Sequence[str], name: str) -> list[str]:
    cells = frame[["N", "D"]].drop_duplicates()
    product = len(cells) * math.prod(frame[a].nunique() for a in axes)
    present = frame[["N", "D", *axes]].drop_duplicates()
    missing = product - len(present)
    if not axes or missing <= 0 or missing > HOLE_SHARE * product:
        return []
    full = cells
    for a in axes:
        full = full.merge(pd.DataFrame({a: pd.unique(frame[a])}), how="cross")
    gone = full.merge(present, how="left", indicator=True)
    gone = gone[gone["_merge"] == "left_only"].drop(columns="_merge")
    shown = "; ".join(", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                for k, v in row.items())
                      for row in gone.head(3).to_dict(orient="records"))
    return [f"{name}: {missing} of the {product} configurations of its (N, D) cells × "
            f"{' × '.join(axes)} have no run ({shown}{', ...' if missing > 3 else ''}): "
            "missing from the file, or excluded (see the other notes); no replay can buy them "
            "and C_total leaves them out; a run that crashed belongs in the file with a NaN "
            "loss (a failed run)"]


def grid_shape_notes(frame: pd.DataFrame, axes: Sequence[str], name: str) -> list[str]:
    """Notes on ``frame``'s grid (one row per run: ``N``, ``D`` and the ``axes``; its index
    the 0-based file rows): close axis values in few cells, and holes in a near-product
    grid (module docstring); empty when there is nothing to say."""
    cells = frame.groupby(["N", "D"], sort=False).ngroup()
    notes = [n for a in axes if pd.api.types.is_numeric_dtype(frame[a])
             for n in _close_values(frame, a, cells, name)]
    return notes + _holes(frame, list(axes), name)
