"""Notes on an approach's allocation that say where its numbers come from: an envelope that
follows the edge of its isoFLOP profiles, approach 3's optimum outside the runs' tokens per
parameter, a table whose C is not 6·N·D. Conventions: C in FLOPs, N parameters, D tokens.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from scalebo.fitting.allocation import AllocationLaw

__all__ = ["budget_edge_note", "flops_factor", "predicted_ratio_note", "ratio_note",
           "table_compute_note"]

#: C within this relative tolerance of 6·N·D is 6·N·D (C given to a few digits).
SIX_RTOL = 0.01

#: A D*/N* more than this factor outside the runs' tokens per parameter is said.
RATIO_FACTOR = 3.0


def _outside(ratio: pd.Series, at: float) -> bool:
    """Whether ``at`` lies over :data:`RATIO_FACTOR` outside the span of ``ratio``."""
    return not ratio.min() / RATIO_FACTOR <= at <= RATIO_FACTOR * ratio.max()


def budget_edge_note(cells: pd.DataFrame, C: np.ndarray, chosen: pd.Index) -> str | None:
    """A note when most envelope runs that have ≥ 3 sizes at their compute (an isoFLOP
    profile) are its smallest or largest size: the optimum lies beyond the sizes trained
    there, and the envelope only tracks the profiles' edge (a trial: sizes 8x above N*, a
    tight exponent and N* 2.9x too large)."""
    group = pd.Series(C, index=cells.index)
    N = cells["N"]
    edge = profiles = 0
    for i in chosen:
        sizes = N[group == group[i]]
        if sizes.nunique() >= 3:
            profiles += 1
            edge += N[i] in (sizes.min(), sizes.max())
    if profiles < 2 or edge <= profiles / 2:
        return None
    return (f"{edge} of the {profiles} envelope runs on isoFLOP profiles are the smallest or "
            "largest size of their profile: the optimum lies beyond the sizes trained there, "
            "so N*(C) follows the profiles' edge, not the optimum (approach 2's vertices say "
            "where it lies)")


def ratio_note(alloc: AllocationLaw, points: pd.DataFrame) -> str | None:
    """A note when approach 3's D*/N* at the table's largest compute is over 3x outside the
    D/N of every cell: the law's optimum lies where no run was trained (StepLaw: 0.10)."""
    ratio = points["D"] / points["N"]
    at = float(alloc.at(float(points["C"].max()))["tokens_per_param"])
    if not _outside(ratio, at):
        return None
    return (f"at the largest compute of the table ({points['C'].max():.3g} FLOPs) the L(N, D) "
            f"fit puts D*/N* at {at:.3g}, while the runs span {ratio.min():.3g} to "
            f"{ratio.max():.3g} tokens per parameter: its optimum lies where no run was "
            "trained, so its allocation is an extrapolation of the law's shape")


def predicted_ratio_note(points: pd.DataFrame, preds: list[dict]) -> str | None:
    """:func:`ratio_note` for ``fit --law chinchilla --predict``: the predicted computes
    (``preds``, rows of :func:`~scalebo.fitting.summary.predictions` with
    ``tokens_per_param``) whose D*/N* is over 3x outside the D/N of every fitted point (a
    trial: StepLaw's fit put 0.04 tokens per parameter at 1e25 FLOPs with no word, while
    ``allocate`` warned on the same runs); None when every one lies within."""
    if not len(preds) or "tokens_per_param" not in preds[0] or not {"N", "D"} <= set(points):
        return None
    ratio = points["D"] / points["N"]
    far = [(p["C"], p["tokens_per_param"]) for p in preds
           if _outside(ratio, p["tokens_per_param"])]
    if not far:
        return None
    return ("the L(N, D) fit puts D*/N* at " + ", ".join(f"{r:.3g} at {C:.3g} FLOPs"
                                                          for C, r in far)
            + f", while the fitted runs span {ratio.min():.3g} to {ratio.max():.3g} tokens per "
            "parameter: its optimum lies where no run was trained, so N* and D* there are an "
            "extrapolation of the law's shape (scalebo allocate compares other approaches)")


def flops_factor(points: pd.DataFrame) -> float:
    """The table's FLOPs per parameter-token k, its median C/(N·D); 6 when within
    :data:`SIX_RTOL` of it (C given to a few digits)."""
    k = float(np.median(points["C"] / (points["N"] * points["D"])))
    return 6.0 if math.isclose(k, 6.0, rel_tol=SIX_RTOL) else k


def table_compute_note(k: float) -> str | None:
    """A note when the table's C is ``k``·N·D with ``k`` not 6 (:func:`flops_factor`):
    approach 3 then solves k·N·D = C, at the same compute as approaches 1 and 2; None for 6."""
    if k == 6.0:
        return None
    return (f"the table's C is {k:.4g}·N·D (median), not 6·N·D: approach 3 solves {k:.4g}·N·D "
            "= C, so its N*, D* are at the same compute as approaches 1 and 2 (scalebo fit "
            "--law chinchilla --predict solves 6·N·D = C)")
