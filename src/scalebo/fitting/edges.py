"""Cell bests at the edge of the settings tried: where a cell's optimum may lie beyond them.

A law fitted on each (N, D) cell's best run (the envelope, the hull, the cell bests) takes
that run's loss as the cell's optimum. When the best run of a cell sits at the smallest or
largest value of a hyperparameter tried in that cell (the largest learning rate of three),
the optimum may lie beyond it, and the cell's loss is overstated by an unknown amount, in a
pattern that moves with scale: a trial's grid of a known law had the best learning rate of
every N = 1e9 cell at the grid's largest, and `fit --law chinchilla` put N* at 1e24 FLOPs at
7.5e10 (truth 9.8e10) with a zero-width interval on noise-free data. No bootstrap sees it.
:func:`edge_optimum_note` names such cells when they are common among the fitted points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["MIN_VALUES", "edge_optimum_note"]

#: Values of a hyperparameter a cell must have tried for its best run's place to count.
MIN_VALUES = 3


def edge_optimum_note(frame: pd.DataFrame, points: pd.DataFrame,
                      hyperparameters: Sequence[str], target: str = "loss") -> str:
    """A note when at least two fitted ``points`` (rows of ``frame``, every run tried, with
    ``N``, ``D`` and the ``hyperparameters``; pass the excluded runs too: a setting past the
    edge that was tried and failed is tried), and a quarter of those whose cell tried
    :data:`MIN_VALUES` or more values of a numeric hyperparameter, are their cell's best run
    at the smallest or largest value of it tried there; "" otherwise."""
    numeric = [h for h in hyperparameters if h in frame and h in points
               and pd.api.types.is_numeric_dtype(frame[h])]
    if not numeric or target not in points or len(points) < 2:
        return ""
    groups = frame.groupby(["N", "D"])
    edges, judged = [], 0
    for _, p in points.iterrows():
        try:
            cell = groups.get_group((p["N"], p["D"]))
        except KeyError:
            continue
        seen = False
        for h in numeric:
            values = np.unique(cell[h].to_numpy(dtype=np.float64))
            values = values[np.isfinite(values)]
            if values.size < MIN_VALUES or not np.isfinite(p[h]):
                continue
            seen = True
            if p[h] in (values[0], values[-1]):
                side = "largest" if p[h] == values[-1] else "smallest"
                edges.append(f"N={p['N']:.3g}, D={p['D']:.3g}: {h}={p[h]:g}, the {side} of "
                             f"{values.size}")
                break
        judged += seen
    if len(edges) < 2 or len(edges) < 0.25 * judged:
        return ""
    shown = "; ".join(edges[:3]) + (f"; and {len(edges) - 3} more" if len(edges) > 3 else "")
    return (f"in {len(edges)} of the {judged} fitted cells that tried {MIN_VALUES} or more "
            f"values of {', '.join(numeric)}, the best run is at the edge of those values "
            f"({shown}): a cell's optimum may lie beyond it, so its loss, and the law there, are "
            "overstated by an amount no interval holds; try settings past that edge in those "
            "cells")
