"""Notes on what a fit was given, beside its result: a table of one model size or one token
count (the compute law is then no compute-optimal frontier), and prediction computes far
below every run's (``--predict 24`` meant 1e24 FLOPs). Both are re-exported by
:mod:`scalebo.fitting.summary`, where ``scalebo fit`` uses them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["one_size_note", "tiny_compute_notes"]


def one_size_note(runs: pd.DataFrame) -> str | None:
    """A note when the run table a compute law comes from (``runs``, every loaded run, not only
    the fitted frontier; columns ``N``, ``D``) holds one model size ``N`` or one token count
    ``D`` and several of the other (values within a relative 1e-9 count as one); None otherwise.

    Then C = 6·N·D varies along one axis only: the envelope is the loss against the other at
    that fixed value, not the compute-optimal frontier, and the law's prediction at another
    C is not the loss of a compute-optimal run there."""
    if "N" not in runs or "D" not in runs:
        return None
    levels = {k: np.unique(np.round(np.log(runs[k].to_numpy(dtype=np.float64)), 9))
              for k in ("N", "D")}
    for axis, other, unit in (("D", "N", "tokens"), ("N", "D", "parameters")):
        if levels[axis].size == 1 and levels[other].size > 1:
            return (f"every run has {axis} = {runs[axis].iloc[0]:.4g} {unit}: C varies with "
                    f"{other} alone, so the compute law is the loss along {other} at that "
                    f"{axis}, not the compute-optimal frontier, and its predictions are not "
                    f"compute-optimal losses; a compute-optimal law needs runs of several {axis}")
    return None


def tiny_compute_notes(predict: Sequence[float], C_min: float) -> list[str]:
    """A note for each prediction compute (FLOPs) more than 1000x below the smallest run's
    (``C_min``): ``--predict 24`` meant 1e24 rather than 24 FLOPs."""
    out = []
    for c in predict:
        if c < C_min / 1e3:
            meant = f" (did you mean 1e{c:g}?)" if float(c).is_integer() and 10 <= c <= 40 \
                else ""
            out.append(f"the prediction at C = {c:g} FLOPs is {C_min / c:.3g}x below the "
                       f"smallest run's compute ({C_min:.3g} FLOPs){meant}")
    return out
