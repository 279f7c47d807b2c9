"""Best-loss frontiers: Pareto envelope, lower convex hull, and per-(N, D) best runs.

A scaling law is fitted to the *frontier* of a run table: the lowest loss reached at each
compute scale. Three constructions are offered (:class:`FrontierMethod`):

* ``envelope`` — the Pareto envelope in (compute, loss): every run that beats all cheaper or
  equally expensive runs (:func:`pareto_envelope`);
* ``hull`` — the vertices of the lower convex hull of the envelope in (log C, log L), the
  Gemstones method (McLeish et al. 2025) (:func:`lower_convex_hull`);
* ``cell`` — the best run of every (N, D) cell (:func:`best_per_cell`), for laws in N and D.

The array functions take ``compute`` (FLOPs) and ``loss`` (nats) of shape ``(n_runs,)`` and
return a boolean mask of that shape; the DataFrame wrappers keep the original index and
every column of the selected rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np
import pandas as pd

from scalebo.data.columns import to_numbers
from scalebo.data.runs import RunTable

__all__ = [
    "FrontierMethod",
    "best_per_cell",
    "frontier",
    "lower_convex_hull",
    "pareto_envelope",
]

# Relative tolerance under which three points count as collinear in (log C, log L).
_COLLINEAR_RTOL = 1e-12


class FrontierMethod(StrEnum):
    """How the best-loss frontier is built from a run table."""

    ENVELOPE = "envelope"
    """Pareto envelope: runs strictly better than every cheaper-or-equal run."""
    HULL = "hull"
    """Vertices of the lower convex hull of the envelope in (log C, log L)."""
    CELL = "cell"
    """Best-loss run of each (N, D) cell."""
    ALL = "all"
    """Every run (no frontier), sorted by compute."""


def _check_arrays(compute: np.ndarray, loss: np.ndarray, *, positive: bool) -> tuple[
    np.ndarray, np.ndarray
]:
    compute = np.asarray(compute, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    if compute.ndim != 1 or compute.shape != loss.shape:
        raise ValueError(
            "compute and loss must be 1-D arrays of the same shape (n_runs,), got shapes "
            f"{compute.shape} and {loss.shape}."
        )
    for name, values in (("compute", compute), ("loss", loss)):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(
                f"{name} has non-finite values at positions {bad[:5].tolist()}; exclude those "
                "runs first (load_runs moves NaN/inf losses to RunTable.excluded)."
            )
        if positive and (values <= 0).any():
            raise ValueError(
                f"{name} must be > 0 for a hull in log space; positions "
                f"{np.flatnonzero(values <= 0)[:5].tolist()} are not."
            )
    return compute, loss


#: Computes within this relative distance are one compute level (a tie): ``6·N·D`` of two
#: configurations of "equal" compute can differ in the last bits (e.g. 512 FLOPs at 3e18).
TIE_RTOL = 1e-9


def snap_ties(compute: np.ndarray, rtol: float = TIE_RTOL) -> np.ndarray:
    """``compute`` with every value replaced by the smallest of its tie group, ``(n,)``:
    sorted values closer than ``rtol`` (relative) to their predecessor join its group."""
    compute = np.asarray(compute, dtype=np.float64)
    if compute.size < 2:
        return compute.copy()
    order = np.argsort(compute, kind="stable")
    c = compute[order]
    new = np.r_[True, np.diff(c) > rtol * np.abs(c[1:])]
    snapped = np.empty_like(compute)
    snapped[order] = c[np.flatnonzero(new)][np.cumsum(new) - 1]
    return snapped


def _envelope_order(compute: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Positions of the envelope points, sorted by increasing compute (ties: :data:`TIE_RTOL`)."""
    compute = snap_ties(compute)
    # Sort by compute, then loss, then position: within a tie of compute the first point
    # visited has the lowest loss (and the lowest position among equal losses).
    order = np.lexsort((np.arange(compute.size), loss, compute))
    running_min = np.minimum.accumulate(loss[order])
    keep = np.empty(order.size, dtype=bool)
    keep[:1] = True
    keep[1:] = loss[order][1:] < running_min[:-1]
    return order[keep]


def pareto_envelope(compute: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Mask of the runs on the Pareto envelope of (compute, loss).

    A run is kept iff its loss is strictly lower than the loss of every *other* run with lower
    or equal compute (computes within :data:`TIE_RTOL` relative are equal). Ties: among runs
    of equal compute only the one with the lowest loss can be kept, and among exact
    (compute, loss) duplicates only the first (lowest position). So
    the kept runs, ordered by compute, have strictly increasing compute and strictly
    decreasing loss; the cheapest run with the lowest loss at its compute is always kept,
    and so is the first run reaching the global minimum loss.

    Args:
        compute: Training compute in FLOPs, shape ``(n_runs,)``.
        loss: Final loss in nats, shape ``(n_runs,)``.

    Returns:
        Boolean mask, shape ``(n_runs,)``.

    Raises:
        ValueError: on mismatched shapes or non-finite values.
    """
    compute, loss = _check_arrays(compute, loss, positive=False)
    mask = np.zeros(compute.size, dtype=bool)
    if compute.size:
        mask[_envelope_order(compute, loss)] = True
    return mask


def lower_convex_hull(compute: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Mask of the vertices of the lower convex hull in (log C, log L) (Gemstones method).

    Kept runs: the vertices of the lower convex hull of the Pareto envelope's points in
    (log compute, log loss), from the envelope's cheapest run to its lowest-loss run (the
    descending part of the lower hull of all runs). Both ends are always kept. A point lying
    on a hull edge — collinear with its neighbours within a relative tolerance of 1e-12 — is
    *not* a vertex and is dropped. Every kept run is on the envelope (``hull ⊆ envelope``),
    and the kept runs' slopes ``Δlog L / Δlog C`` strictly increase and stay negative.

    Args:
        compute: Training compute in FLOPs, shape ``(n_runs,)``, > 0.
        loss: Final loss in nats, shape ``(n_runs,)``, > 0.

    Returns:
        Boolean mask, shape ``(n_runs,)``.

    Raises:
        ValueError: on mismatched shapes, non-finite or non-positive values.
    """
    compute, loss = _check_arrays(compute, loss, positive=True)
    mask = np.zeros(compute.size, dtype=bool)
    if compute.size == 0:
        return mask
    points = _envelope_order(compute, loss)
    x, y = np.log(compute[points]), np.log(loss[points])
    chain: list[int] = []  # indices into `points`, Andrew's monotone chain (lower hull)
    for k in range(points.size):
        while len(chain) >= 2 and not _turns_left(x, y, chain[-2], chain[-1], k):
            chain.pop()
        chain.append(k)
    mask[points[chain]] = True
    return mask


def _turns_left(x: np.ndarray, y: np.ndarray, i: int, j: int, k: int) -> bool:
    """True iff i → j → k turns strictly counter-clockwise (j is a lower-hull vertex)."""
    a = (x[j] - x[i]) * (y[k] - y[i])
    b = (y[j] - y[i]) * (x[k] - x[i])
    return a - b > _COLLINEAR_RTOL * (abs(a) + abs(b))


def best_per_cell(
    frame: pd.DataFrame | RunTable, cell: Sequence[str] = ("N", "D"), *, loss: str = "loss"
) -> pd.DataFrame:
    """The lowest-loss row of each cell (default: each (N, D) pair).

    Ties within a cell keep the first row. The result keeps the original index and all
    columns, sorted by the cell columns.

    Args:
        frame: Run table or DataFrame with the ``cell`` columns and ``loss`` (nats).
        cell: Columns whose distinct value combinations define the cells.
        loss: Name of the loss column.

    Raises:
        ValueError: missing columns or a missing/NaN loss.
    """
    df = frame.frame if isinstance(frame, RunTable) else frame
    cell = list(cell)
    _require_columns(df, [*cell, loss])
    values = to_numbers(df[loss]).to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise ValueError(
            f"column {loss!r} has missing or non-numeric values at index labels "
            f"{df.index[np.isnan(values)][:5].tolist()}; exclude those runs first."
        )
    # Positions of the minimum per cell; a stable sort keeps the first of equal losses.
    order = np.argsort(values, kind="stable")
    group = df.groupby(cell, sort=False).ngroup().to_numpy()[order]
    _, first = np.unique(group, return_index=True)
    best = df.iloc[np.sort(order[first])]
    return best.sort_values(cell, kind="stable")


def frontier(
    frame: pd.DataFrame | RunTable,
    method: FrontierMethod | str = FrontierMethod.ENVELOPE,
    *,
    compute: str = "C",
    loss: str = "loss",
    cell: Sequence[str] = ("N", "D"),
) -> pd.DataFrame:
    """Rows of ``frame`` on the frontier chosen by ``method``.

    Args:
        frame: Run table or DataFrame with columns ``compute`` (FLOPs) and ``loss`` (nats)
            (and the ``cell`` columns for ``method="cell"``).
        method: ``"envelope"`` (:func:`pareto_envelope`), ``"hull"``
            (:func:`lower_convex_hull`), ``"cell"`` (:func:`best_per_cell`) or ``"all"``
            (every run).

    Returns:
        The selected rows with their original index and all columns; sorted by compute
        (envelope, hull) or by the cell columns (cell).
    """
    df = frame.frame if isinstance(frame, RunTable) else frame
    try:
        method = FrontierMethod(method)
    except ValueError:
        raise ValueError(
            f"unknown frontier method {method!r}; expected one of "
            f"{[m.value for m in FrontierMethod]}."
        ) from None
    if method is FrontierMethod.CELL:
        return best_per_cell(df, cell, loss=loss)
    _require_columns(df, [compute, loss])
    if method is FrontierMethod.ALL:
        return df.sort_values(compute, kind="stable")
    c = df[compute].to_numpy(dtype=np.float64)
    values = df[loss].to_numpy(dtype=np.float64)
    select = pareto_envelope if method is FrontierMethod.ENVELOPE else lower_convex_hull
    chosen = df.loc[select(c, values)]
    return chosen.sort_values(compute, kind="stable")


def _require_columns(df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [col for col in columns if col not in df.columns]
    if missing:
        raise ValueError(
            f"frontier: missing column(s) {missing}; available: {list(df.columns)}."
        )
