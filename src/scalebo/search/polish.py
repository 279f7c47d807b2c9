"""Polish: the end of a budget tries the neighbours of the best runs in the envelope's cells.

A compute law is fitted on the Pareto envelope of (compute, loss), and its extrapolation
leans on the envelope's costliest points. EI per unit cost spends little in those cells: a run
there costs 10-100x a run in a cheap cell, so the search trains few configurations in each
and keeps the best as the envelope point. Where a costly cell's optimum is not where the
surrogate expects it (the best learning rate and batch of a scale interact in ways the cheap
cells do not show), the envelope point is then a few millinats above the cell's best, and
the law's extrapolation moves by as much as its own spread.

With ``polish = f`` (a share of the budget), once ``1 − f`` of the budget is committed every
pick goes to a cell of the observed envelope whose best run has an untried, affordable
neighbour — the same configuration one step away along one hyperparameter axis
(:func:`axis_neighbours`) — the one with the largest ``C² / runs`` (:func:`polish_order`: the
costliest first, until it holds more than (C / C')² times the runs of a cheaper cell C';
runs in flight count), and trains
the neighbour with the lowest posterior mean, however
sure the surrogate is that it is worse, since that is where it can be wrong (tried, not
kept: skipping neighbours whose mean minus one standard deviation lies above the cell's best
undid the gain). When no envelope cell has a neighbour left, the search goes on as usual. The rule
reads only the observed runs and the budget committed, so a campaign that re-plans at every
call makes the same picks as one long loop.

Measured (docs/reproduction.md, "What changed in 0.4.0"; seeds 0-9, |error| of the compute
law at 1e25 FLOPs at 1 / 5 / 10 % of C_total, no polish -> 0.2): OELLM-English 2.06 / 0.84 /
0.22 -> 2.06 / 0.82 / 0.07 %, StepLaw 15.16 / 1.79 / 0.00 -> 8.70 / 1.84 / 0.00 %. Until
0.4.10 the costliest cell went first until its best run had no untried neighbour left, and on
StepLaw at 5 % a cheaper envelope cell with 3 runs kept a best run 7.7 mnats above its
optimum (the law 9.6 % off) while the two costliest took 11 and 15 (docs/reproduction.md,
"What changed in 0.4.10": seeds 0-19, StepLaw at 5 % 1.71 -> 0.87 %).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scalebo.fitting.frontier import pareto_envelope
from scalebo.search.grid import Grid

#: Default share of the budget polished (``MethodConfig.polish``, ``scalebo suggest --polish``).
POLISH = 0.2

__all__ = ["POLISH", "axis_neighbours", "nats_predictor", "polish_order", "polish_phase",
           "polish_pick"]


def polish_phase(committed: float, budget: float, share: float) -> bool:
    """True once ``committed`` (budget units) reaches ``(1 − share) × budget`` (``share`` 0:
    never)."""
    return share > 0 and committed >= (1.0 - share) * budget


def axis_neighbours(grid: Grid, row: int) -> np.ndarray:
    """Grid rows one step from ``row`` along one hyperparameter axis, increasing.

    A neighbour lies in the same (N, D) cell, agrees with ``row`` on every other axis, and on
    a numeric axis holds the next lower or higher value among the rows that agree on the
    others; on a categorical axis any other value. Held-out rows are never neighbours; a
    grid without hyperparameter axes has none.
    """
    cfg = grid.configs
    cells = grid.cell_ids
    members = np.flatnonzero((cells == cells[row]) & ~grid.held_out)
    axes = list(grid.axes)
    out: list[np.ndarray] = []
    for a in axes:
        others = [b for b in axes if b != a]
        same = members
        if others:
            vals = cfg[others].to_numpy()
            same = members[(vals[members] == vals[row]).all(axis=1)]
        col = cfg[a].to_numpy()
        if a in grid.categorical_axes:
            out.append(same[col[same] != col[row]])
            continue
        levels = np.unique(col[same].astype(np.float64))
        k = int(np.searchsorted(levels, float(col[row])))
        near = [levels[j] for j in (k - 1, k + 1) if 0 <= j < levels.size]
        out.append(same[np.isin(col[same].astype(np.float64), near)])
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def polish_order(cost: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """Order in which envelope cells are polished: by ``cost² / runs`` decreasing, the
    costlier first among equals.

    A cell's leverage on the law's extrapolation grows with its compute ``cost`` (FLOPs), and
    the chance that its best run is still off the cell's optimum falls with the ``runs`` it
    holds (≥ 1). Measured against the costliest first (0.4.0-0.4.9) and against ``cost^a /
    runs`` with a = 0 (the fewest runs first), 0.5 and 1 (docs/reproduction.md, 0.4.10):
    smaller powers spread the polish over more cells and left OELLM-English's costliest cells,
    whose best learning rate moves with scale, untried at 10 % of C_total (0.07 -> 0.22 %
    with a = 0.5).
    """
    cost = np.asarray(cost, dtype=np.float64)
    score = 2.0 * np.log(cost) - np.log(np.maximum(np.asarray(runs, dtype=np.float64), 1.0))
    return np.lexsort((-cost, -np.round(score, 9)))  # ties exact, not up to rounding


def nats_predictor(model: Any, X: np.ndarray, mu: float, sd: float
                   ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``predict`` for :func:`polish_pick`: posterior mean and std in nats at grid rows, from a
    surrogate fitted on standardized losses ``(y − mu) / sd`` at encoded inputs ``X``."""
    def predict(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, s = (np.asarray(a, dtype=np.float64) for a in model.predict(X[rows]))
        return m * sd + mu, s * sd
    return predict


def polish_pick(grid: Grid, observed_idx: np.ndarray, observed_y: np.ndarray,
                admissible: np.ndarray,
                predict: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                pending_idx: np.ndarray | None = None) -> tuple[int, float, float, str] | None:
    """The next polish run, or None when no envelope cell has a neighbour left to try.

    Args:
        grid: The grid.
        observed_idx, observed_y: Trained rows ``(n,)`` and their losses ``(n,)``, nats.
        admissible: Rows that may be started now ``(n_cfg,)`` bool (untried, affordable).
        predict: Posterior mean and standard deviation in nats at grid rows ``(m,)``.
        pending_idx: Rows in flight (running, or picked earlier in the same batch): they
            count among their cell's runs in :func:`polish_order`.

    Returns:
        ``(row, mean, std, reason)``: the neighbour with the lowest posterior mean (nats) in
        the first envelope cell of :func:`polish_order` that has one, and a sentence for the
        trace.
    """
    idx = np.asarray(observed_idx, dtype=np.int64)
    y = np.asarray(observed_y, dtype=np.float64)
    if idx.size == 0:
        return None
    env = idx[pareto_envelope(grid.cost[idx], y)]  # a cell's envelope run is its best
    held = idx if pending_idx is None else np.concatenate([idx, np.asarray(pending_idx)])
    runs = np.bincount(grid.cell_ids[held.astype(np.int64)],
                       minlength=int(grid.cell_ids.max()) + 1)[grid.cell_ids[env]]
    order = polish_order(grid.cost[env], runs)
    for e, n in zip(env[order], runs[order], strict=True):
        cand = axis_neighbours(grid, int(e))
        cand = cand[admissible[cand]]
        if not cand.size:
            continue
        mean, std = (np.asarray(a, dtype=np.float64) for a in predict(cand))
        ok = np.flatnonzero(np.isfinite(mean))
        if not ok.size:
            continue
        j = int(ok[np.argmin(mean[ok])])
        cfg = grid.config(int(e))
        return (int(cand[j]), float(mean[j]), float(std[j]),
                f"polish: lowest predicted loss among {cand.size} untried neighbour(s) of the "
                f"best run ({y[idx == e][0]:.5g} nats) of the cell N={cfg['N']:.3g}, "
                f"D={cfg['D']:.3g} ({n} run(s)), the first of the observed envelope by "
                "compute² / runs with one left")
    return None
