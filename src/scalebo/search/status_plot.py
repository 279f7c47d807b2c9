"""The campaign figure of ``scalebo status``: loss (nats) against compute (FLOPs), log–log.

Completed runs (grey), their Pareto envelope (black), failed runs (red ticks on the top
edge, at their compute: they have no loss), runs in flight (ticks on the bottom edge) and the
next proposed runs (ticks just above it; also as stars at their predicted loss), ``×k`` where
k ticks share a compute, the compute law
fitted on observed + fantasized losses (blue; dashed beyond the costliest run) with the law
posterior's 80 % and 95 % bands, and each target's prediction with its 80 % interval.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scalebo.fitting.frontier import pareto_envelope
from scalebo.outputs import save_figure
from scalebo.search.campaign_runs import CampaignRuns
from scalebo.search.grid import Grid
from scalebo.search.status import CampaignStatus

__all__ = ["plot_status", "status_title"]


def _bands(post: Any, C: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """q2.5, q10, q90, q97.5 of the compute law over the posterior's samples at ``C``."""
    if post is None or not len(post.params.get("E", ())):
        return None
    E, A, a = (np.asarray(post.params[k])[:, None] for k in ("E", "A", "alpha"))
    curves = E + A * C[None, :] ** (-a)
    return tuple(np.quantile(curves, [0.025, 0.10, 0.90, 0.975], axis=0))


def status_title(status: CampaignStatus, width: int = 95) -> str:
    """The figure's title: the runs, the compute spent, and the stop decision with its reason
    wrapped at ``width`` characters (a long reason was cut at the figure's edges)."""
    spent = status.spent / status.C_total
    reason = textwrap.fill(f"{'STOP' if status.stop else 'continue'}: {status.reason}", width)
    return (f"campaign: {status.n_completed} completed, {status.n_failed} failed, "
            f"{status.n_running} running; spent {spent:.2%} of the grid's "
            f"{'C_total' if status.unit == 'FLOPs' else status.unit}\n{reason}")


def _edge_ticks(ax: Any, C: np.ndarray, y: float, color: str, label: str,
                raise_pt: float) -> None:
    """Vertical ticks at computes ``C`` on the edge ``y`` (raised by ``raise_pt`` points),
    with ``×k`` beside a compute that holds k of them (they would hide one another)."""
    if not C.size:
        return
    from matplotlib.transforms import offset_copy

    at = offset_copy(ax.transData, fig=ax.figure, y=raise_pt, units="points")
    ax.scatter(C, np.full(C.size, y), marker="|", color=color, s=200, lw=2, clip_on=False,
               zorder=5, label=label, transform=at)
    _counts(ax, C, np.full(C.size, y), (5, raise_pt - 3), color, clip=False)


def _counts(ax: Any, C: np.ndarray, y: np.ndarray, offset: tuple[float, float], color: str,
            *, clip: bool | None = None) -> None:
    """``×k`` beside each compute in ``C`` that holds k > 1 marks (at the lowest of their
    ``y``), ``offset`` points away: marks of one compute hide one another."""
    costs, counts = np.unique(C, return_counts=True)
    for c, k in zip(costs, counts, strict=True):
        if k > 1:
            ax.annotate(f"×{k}", (c, float(np.min(y[C == c]))), xytext=offset,
                        textcoords="offset points", fontsize=7, color=color,
                        annotation_clip=clip)


def plot_status(grid: Grid, runs: CampaignRuns, status: CampaignStatus, path: str | Path, *,
                posterior: Any = None, proposed: Sequence[Any] = (),
                title: str | None = None) -> Path:
    """Draw the campaign figure (module docstring) to ``path`` (format from its suffix).

    Args:
        grid, runs, status: the campaign and its :func:`~scalebo.search.status.campaign_status`.
        posterior: the compute law's :class:`~scalebo.search.law_posterior.LawPosterior` for
            the bands (None: no band).
        proposed: next suggestions (objects with ``index`` and ``predicted_mean``).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10.0, 5.0))
    C_obs = grid.cost[runs.completed]
    y = runs.losses
    if C_obs.size:
        ax.scatter(C_obs, y, s=12, color="0.6", label=f"completed ({C_obs.size})", zorder=7)
        env = pareto_envelope(C_obs, y)
        order = np.argsort(C_obs[env])
        ax.plot(C_obs[env][order], y[env][order], "o-", color="black", ms=4, lw=1,
                label="envelope", zorder=3)
    targets = [t.C for t in status.targets]
    lo_c = float(grid.cost.min()) / 2
    hi_c = max([float(grid.cost.max()), *targets]) * 2
    C = np.geomspace(lo_c, hi_c, 200)
    params = status.law.get("params")
    ymin, ymax = (float(y.min()), float(y.max())) if y.size else (1.0, 10.0)
    if params:
        curve = params["E"] + params["A"] * C ** (-params["alpha"])
        edge = float(C_obs.max()) if C_obs.size else lo_c
        ax.plot(C[C <= edge], curve[C <= edge], color="tab:blue", lw=1.8,
                label="law (observed + fantasized)", zorder=4)
        ax.plot(C[C >= edge], curve[C >= edge], color="tab:blue", lw=1.8, ls="--", zorder=4,
                label="law, beyond the costliest run")
        ymin = min(ymin, float(curve.min()))
        bands = _bands(posterior, C)
        if bands is not None:
            q025, q10, q90, q975 = bands
            ax.fill_between(C, q025, q975, color="tab:blue", alpha=0.12, lw=0,
                            label="95 % (law posterior)")
            ax.fill_between(C, q10, q90, color="tab:blue", alpha=0.25, lw=0,
                            label="80 % (law posterior)")
            shown = C <= max([edge, *targets]) * 1.5  # the band where the figure reads it
            ymin = min(ymin, float(q025[shown].min()))
    first = barred = False  # one legend entry for every target's marks
    for t in status.targets:
        if t.prediction is not None:
            if t.interval_80:  # drawn on its own: the point fit may lie outside it
                lo, hi = t.interval_80
                ax.errorbar([t.C], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]],
                            fmt="none", color="tab:purple", capsize=4, zorder=5,
                            label=None if barred else "target: 80 % interval (law posterior)")
                barred = True
                ymin = min(ymin, lo)
            ax.plot([t.C], [t.prediction], "D", color="tab:purple", zorder=5,
                    label=None if first else "target: point fit (value beside it)")
            ax.annotate(f"{t.prediction:.4g}", (t.C, t.prediction), xytext=(-8, 8),
                        textcoords="offset points", ha="right", va="bottom", fontsize=8,
                        color="tab:purple")
            first = True
            ymin = min(ymin, t.prediction)
    if proposed and all(s.predicted_mean is not None for s in proposed):
        stars = [float(s.predicted_mean) for s in proposed]
        ymin, ymax = min(ymin, *stars), max(ymax, *stars)
    ylo, yhi = 0.95 * max(ymin, 1e-3), 1.05 * ymax
    _edge_ticks(ax, grid.cost[runs.failed], yhi, "tab:red",
                f"failed ({runs.failed.size}; top edge, at their compute)", 0)
    _edge_ticks(ax, grid.cost[runs.running], ylo, "tab:orange",
                f"running ({runs.running.size}; bottom edge, loss not yet known)", 0)
    if proposed:
        pc = np.array([grid.cost[s.index] for s in proposed])
        pm = [s.predicted_mean for s in proposed]
        shown = all(m is not None for m in pm)
        # raised off the edge by a tick's height, so a run in flight at the same compute
        # stays visible below it
        _edge_ticks(ax, pc, ylo, "tab:green", f"next ({len(proposed)}; just above the bottom "
                    "edge, at their compute" + ("; ★ at predicted loss)" if shown else ")"),
                    14)
        if shown:  # hollow: a completed run at the same loss stays visible
            ax.scatter(pc, pm, marker="*", facecolor="none", edgecolor="tab:green", s=90,
                       lw=1.2, zorder=6)
            _counts(ax, pc, np.asarray(pm, dtype=np.float64), (4, -10), "tab:green")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo_c, hi_c)  # the whole grid and the targets: runs in flight, proposals too
    ax.set_ylim(ylo, yhi)
    from scalebo.plotting import loss_ticks

    loss_ticks(ax)
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel("loss (nats)")
    ax.set_title(title or status_title(status), fontsize=9, pad=14)  # above the top ticks
    ax.grid(True, which="major", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn yet (no runs): no empty legend
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # off the data
    fig.tight_layout()
    out = save_figure(fig, path, dpi=150)
    plt.close(fig)
    return out
