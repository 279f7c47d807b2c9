"""The acquisition-trace figure of one replay (``scalebo replay --plot``).

Two panels, titled with the dataset, the method, the budget and the seed:

* left: the cumulative compute spent and the window cap (FLOPs, log) against the
  acquisition order, with the budget as a dotted line;
* right: every acquirable configuration of the grid in (C, loss) (C in FLOPs, loss in nats,
  grey), the reference envelope as hollow red rings, the reference compute law, and the
  acquired configurations drawn on top, coloured by acquisition order (colourbar).

The loss axis spans the reference envelope and every acquired run up to a robust upper fence
(:func:`loss_range`: the third quartile of the acquirable losses plus
:data:`FENCE_IQR` × their interquartile range), so the cheap, high-loss end of the envelope is
never cut off while diverged runs (StepLaw holds losses up to 10 nats) do not flatten the
rest. Acquired runs above the fence are drawn as triangles on the top edge and counted in the
legend.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from scalebo.outputs import save_figure

__all__ = ["FENCE_IQR", "loss_range", "plot_trace", "trace_figure"]

#: Upper fence of the loss axis: Q3 + FENCE_IQR · IQR of the acquirable losses (nats).
FENCE_IQR = 3.0


def loss_range(problem: Any, acquired: np.ndarray) -> tuple[float, float]:
    """``(bottom, top)`` of the loss axis in nats (before padding).

    ``bottom`` is the lowest loss of the grid, held-out cells included (their runs are
    drawn too); ``top`` the highest loss among the reference
    envelope and the acquired rows that lie below the fence ``Q3 + FENCE_IQR · IQR`` of the
    acquirable losses. Grid rows above ``top`` are clipped (they are neither on the envelope
    nor acquired); acquired rows above the fence are diverged runs, drawn on the top edge.

    Args:
        problem: A :class:`~scalebo.bench.problems.ReplayProblem`.
        acquired: Grid rows bought by the search, shape ``(n,)``.
    """
    loss = np.asarray(problem.loss, dtype=np.float64)
    pool = loss[~problem.grid.held_out]
    pool = pool[np.isfinite(pool)]
    q1, q3 = np.percentile(pool, [25, 75])
    fence = q3 + FENCE_IQR * (q3 - q1)
    shown = np.concatenate([loss[np.asarray(problem.envelope_idx, dtype=np.int64)],
                            loss[np.asarray(acquired, dtype=np.int64)]])
    shown = shown[np.isfinite(shown) & (shown <= fence)]
    top = float(shown.max()) if shown.size else float(min(pool.max(), fence))
    held = loss[problem.grid.held_out]
    held = held[np.isfinite(held)]  # the held-out cells' best runs: the grid's lowest losses
    return float(min(pool.min(), held.min(initial=np.inf))), top


def _title(rec: Any) -> str:
    dataset = str(rec.dataset)
    if os.sep in dataset or "/" in dataset:  # a run-table file: its name is enough
        dataset = Path(dataset).name
    spent = rec.trace[-1].cumulative_cost if rec.trace else 0.0
    return (f"{dataset}: {rec.method.label()}; budget {100 * rec.budget:g} % of C_total, "
            f"seed {rec.seed} ({len(rec.trace)} runs, {spent:.3g} FLOPs)")


def trace_figure(rec: Any, problem: Any) -> Any:
    """The trace figure of ``rec`` (a :class:`~scalebo.bench.replay.ReplayRecord`) replayed
    on ``problem`` (its :class:`~scalebo.bench.problems.ReplayProblem`); returns the
    matplotlib ``Figure`` (close it when done)."""
    import matplotlib

    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.array([t.order for t in rec.trace], dtype=np.float64)
    cum = np.array([t.cumulative_cost for t in rec.trace], dtype=np.float64)
    cap = np.array([t.cap for t in rec.trace], dtype=np.float64)
    idx = np.array([t.index for t in rec.trace], dtype=np.int64)
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True,
                               gridspec_kw={"width_ratios": (1, 1.2)})
    a.plot(order, cum, label="cumulative compute")
    finite = np.isfinite(cap)
    a.step(order[finite], cap[finite], where="post", label="window cap")
    a.axhline(rec.budget * problem.C_total, color="k", ls=":",
              label=f"budget ({100 * rec.budget:g} % of C_total)")
    recorded = sorted({m.budget for m in rec.metrics} - {rec.budget})
    for k, f in enumerate(recorded):  # the smaller budgets recorded on the way
        a.axhline(f * problem.C_total, color="0.5", ls=":", lw=0.8,
                  label="recorded on the way: " + ", ".join(f"{100 * x:g} %" for x in recorded)
                  if k == 0 else None)
    a.set(yscale="log", xlabel="acquisition order", ylabel="compute (FLOPs)",
          title="compute spent and window cap")
    a.legend(fontsize=8)
    a.grid(alpha=0.3, which="both")

    g = problem.grid
    loss = np.asarray(problem.loss, dtype=np.float64)
    acq = ~g.held_out
    bottom, top = loss_range(problem, idx)
    pad = 0.03 * (top - bottom) if top > bottom else 0.01 * abs(top)
    off = int((acq & ~(loss <= top + pad)).sum())  # high or no loss: beyond the axis
    b.scatter(g.cost[acq], loss[acq], s=6, c="0.8", zorder=1,
              label="grid" + (f" ({off} above the axis or without a loss)" if off else ""))
    held = g.held_out & (loss >= bottom - pad) & (loss <= top + pad)
    if g.held_out.any():
        cells = np.unique(g.cell_ids[g.held_out]).size
        b.scatter(g.cost[held], loss[held], s=10, marker="x", c="0.55", linewidths=0.6,
                  label=f"held out ({cells} cell{'s' if cells > 1 else ''}; never acquired)",
                  zorder=1)
    Cs = np.geomspace(g.cost[acq].min(), g.cost.max(), 100)
    b.plot(Cs, problem.reference_compute.predict(Cs[:, None]), "r-", lw=1,
           label="reference compute law", zorder=2)
    final = max(rec.metrics, key=lambda m: m.budget) if rec.metrics else None
    law = final.law("compute") if final is not None else None
    if law is not None and law.params:  # what the replay is scored by, beside the answer
        from scalebo.laws import COMPUTE_LAW

        err = (law.extrapolation_pct or {}).get("1e+25")
        curve = COMPUTE_LAW.predict(COMPUTE_LAW.from_natural(law.params), Cs[:, None])
        b.plot(Cs, curve, color="tab:blue", ls="--", lw=1.2,
               label=f"the replay's compute law at {100 * final.budget:g} % ("
               + ("runs + fill-in" if final.fantasized else "runs trained") + ")"
               + (f" ({err:+.2f} % at 1e25 FLOPs)" if err is not None else ""), zorder=2)
    env = np.asarray(problem.envelope_idx, dtype=np.int64)
    b.scatter(g.cost[env], loss[env], s=55, facecolors="none", edgecolors="r", linewidths=1.1,
              label="reference envelope", zorder=3)
    diverged = getattr(problem, "diverged", None)
    failed = np.zeros(idx.size, bool) if diverged is None else diverged[idx]
    inside = (loss[idx] <= top) & ~failed
    above = ~inside & ~failed
    points = b.scatter(g.cost[idx][inside], loss[idx][inside], s=16, c=order[inside],
                       cmap="viridis", vmin=0, vmax=max(order.max(initial=0), 1),
                       edgecolors="k", linewidths=0.3, label="acquired", zorder=4)
    if above.any():
        b.scatter(g.cost[idx][above], np.full(above.sum(), top + 0.6 * pad), marker="^",
                  s=28, c=order[above], cmap="viridis", vmin=0,
                  vmax=max(order.max(initial=0), 1), edgecolors="k", linewidths=0.3,
                  label=f"acquired above the axis ({above.sum()}, "
                        f"loss up to {loss[idx][above].max():.3g} nats)", zorder=4,
                  clip_on=False)
    if failed.any():
        b.scatter(g.cost[idx][failed], np.full(failed.sum(), top + 0.6 * pad), marker="x",
                  s=30, c="r", linewidths=1.0, zorder=4, clip_on=False,
                  label=f"acquired, diverged ({failed.sum()}: compute spent, no loss)")
    fig.colorbar(points, ax=b, label="acquisition order (0 = first run)", pad=0.01)
    b.set(xscale="log", xlabel="training compute C (FLOPs)", ylabel="loss (nats)",
          ylim=(bottom - pad, top + pad), title="acquired configurations")
    b.legend(fontsize=8, framealpha=0.6)  # the points it covers stay visible
    b.grid(alpha=0.3, which="major")
    fig.suptitle(_title(rec))
    return fig


def plot_trace(rec: Any, problem: Any, path: str | os.PathLike[str], *, dpi: int = 150
               ) -> Path:
    """Draw :func:`trace_figure` and save it (atomically) to ``path``; returns the path."""
    import matplotlib.pyplot as plt

    fig = trace_figure(rec, problem)
    try:
        return save_figure(fig, path, dpi=dpi)
    finally:
        plt.close(fig)
