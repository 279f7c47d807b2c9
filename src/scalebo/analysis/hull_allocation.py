"""Approach 1 on the lower convex hull of (resource, loss), for any resource axis.

The Gemstones study (McLeish et al. 2025) fits the compute-optimal allocation on the lower
convex hull of its checkpoints, with FLOPs or GPU-hours as the resource
(:func:`scalebo.data.resources.resource_values`): ``N*(R)``, ``D*(R)`` as power laws of ``R``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scalebo.data.resources import resource_values
from scalebo.data.runs import RunTable
from scalebo.fitting.allocation import AllocationLaw, approach1, edge_note
from scalebo.fitting.frontier import lower_convex_hull

__all__ = ["HullAllocation", "approach1_on_hull"]


@dataclass(frozen=True)
class HullAllocation:
    """Approach 1 on the lower convex hull of (resource, loss).

    Attributes:
        resource: ``"flops"`` (FLOPs) or ``"gpu_hours"`` (GPU-hours).
        law: ``N*(R) = coef·R^a`` and ``D*(R)`` power fits (:class:`AllocationLaw`, whose
            ``C`` means the resource ``R`` here).
        hull: The hull rows of the table (every column) plus ``R``, sorted by ``R``.
    """

    resource: str
    law: AllocationLaw
    hull: pd.DataFrame

    def at(self, R: float | np.ndarray) -> dict[str, np.ndarray | float]:
        """``N*`` (parameters), ``D*`` (tokens) and tokens per parameter at resource ``R``."""
        out = self.law.at(R)
        return {"R": R, "N_opt": out["N_opt"], "D_opt": out["D_opt"],
                "tokens_per_param": out["tokens_per_param"]}

    def to_dict(self) -> dict:
        return {
            "resource": self.resource,
            "n_hull_points": len(self.hull),
            "N_opt": {"coef": self.law.n_opt.coef, "exponent": self.law.n_opt.exponent,
                      "r2": self.law.n_opt.r2},
            "D_opt": {"coef": self.law.d_opt.coef, "exponent": self.law.d_opt.exponent,
                      "r2": self.law.d_opt.r2},
        }


def approach1_on_hull(
    table: RunTable | pd.DataFrame,
    resource: str = "flops",
    **kwargs,
) -> HullAllocation:
    """Approach 1 (Hoffmann et al. 2022, §3.1) on the Gemstones frontier (McLeish et al. 2025).

    Every row (a run or a checkpoint) is a point ``(R, loss)``; the points kept are the
    vertices of the lower convex hull in (log R, log loss) (:func:`lower_convex_hull`);
    ``log N`` and ``log D`` are then regressed on ``log R`` over the hull points.

    Args:
        table: Runs or checkpoints with ``N``, ``D``, ``loss`` (and what ``resource`` needs).
        resource: ``"flops"`` or ``"gpu_hours"``; kwargs go to :func:`resource_values`.

    Raises:
        FitError: fewer than 2 hull points with distinct R.
    """
    frame = table.frame if isinstance(table, RunTable) else table
    R = resource_values(frame, resource, **kwargs)
    loss = frame["loss"].to_numpy(dtype=np.float64)
    mask = lower_convex_hull(R, loss)
    hull = frame.loc[mask].assign(R=R[mask]).sort_values("R")
    points = pd.DataFrame({"C": hull["R"], "N": hull["N"], "D": hull["D"]})
    law = approach1(points)
    if text := edge_note(points, float(frame["N"].min()), float(frame["N"].max()), "hull",
                         "C" if resource == "flops" else "R"):
        warnings.warn(text, UserWarning, stacklevel=2)
    return HullAllocation(resource=resource, law=law, hull=hull)
