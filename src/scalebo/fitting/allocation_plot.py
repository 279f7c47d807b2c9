"""The ``scalebo allocate --plot`` figure: N*(C) and D*(C) of each approach, on log-log axes.

With an approach-2 law, a first panel shows its isoFLOP profiles: each budget's runs (loss in
nats against N), the parabola in ln N fitted to them and its vertex (a star, hollow when it
lies outside the sizes trained), one colour per budget, as in Hoffmann et al. (2022), Fig. 3.
Then: parameters against compute (FLOPs) and tokens against compute. Each
approach with a law draws its points (approach 1: envelope runs; 2: isoFLOP vertices, hollow
when the vertex lies outside the sizes of its budget) and its power law over the computes of
the cells (solid) and out to ``--predict`` (dashed; dotted vertical lines, each approach's
N*, D* marked there), so where approaches part shows; the legend gives each exponent with its
95 % interval.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scalebo.fitting.allocation import isoflop_parabola
from scalebo.outputs import save_figure

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from scalebo.fitting.allocation_summary import AllocationEstimate, AllocationSummary

__all__ = ["plot_allocation"]

_STYLE = {1: ("tab:blue", "o", "1: envelope"), 2: ("tab:orange", "s", "2: isoFLOP"),
          3: ("tab:green", "^", "3: L(N, D)")}


def _points(est: AllocationEstimate) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(C, N*, D*, inside) of the points an approach's law was fitted on (none for 3)."""
    pts = est.points
    if est.approach == 1:
        C, N, D = (pts[k].to_numpy(float) for k in ("C", "N", "D"))
        return C, N, D, np.ones(C.size, bool)
    if est.approach == 2:
        used = pts[pts["used"].astype(bool)]
        return (used["C"].to_numpy(float), used["N_opt"].to_numpy(float),
                used["D_opt"].to_numpy(float), used["vertex_inside"].astype(bool).to_numpy())
    empty = np.empty(0)
    return empty, empty, empty, np.empty(0, bool)


def _profiles(ax: Axes, est: AllocationEstimate) -> None:
    """Approach 2's isoFLOP profiles: runs, parabolas (dashed beyond the sizes trained) and
    vertices, coloured by budget."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm

    runs, used = est.law.profiles, est.points[est.points["used"].astype(bool)]
    lo_c, hi_c = float(runs["C"].min()), float(runs["C"].max())
    scale = ScalarMappable(LogNorm(lo_c, hi_c if hi_c > lo_c else lo_c * 10),
                           colormaps["viridis"])
    for _, row in used.iterrows():
        mine, color = runs[runs["C"] == row["C"]], scale.to_rgba(row["C"])
        coef = isoflop_parabola(mine["N"], mine["loss"])
        lo, hi = np.log(mine["N"].min()), np.log(mine["N"].max())
        x_vertex = np.log(row["N_opt"])
        inner = np.linspace(lo, hi, 80)
        ax.plot(np.exp(inner), np.polyval(coef, inner), color=color, lw=1.2)
        for a, b in ((x_vertex, lo), (hi, x_vertex)):  # out to a vertex beyond the sizes
            if b > a:
                beyond = np.linspace(a, b, 20)
                ax.plot(np.exp(beyond), np.polyval(coef, beyond), color=color, lw=1.0, ls="--")
        ax.scatter(mine["N"], mine["loss"], color=color, s=16, edgecolor="black",
                   linewidth=0.3, zorder=3)
        hollow = not bool(row["vertex_inside"])
        ax.plot([row["N_opt"]], [row["loss_opt"]], marker="*", ms=11, zorder=4,
                mfc="white" if hollow else color, mec="black" if not hollow else color,
                mew=1.2 if hollow else 0.5)
    ax.set_xscale("log")
    ax.set_xlabel("N (parameters)")
    ax.set_ylabel("loss (nats)")
    ax.set_title("2: isoFLOP profiles (star: vertex = N*; hollow: outside the sizes)",
                 fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.figure.colorbar(scale, ax=ax, label="isoFLOP budget C (FLOPs)", pad=0.01)


def plot_allocation(summary: AllocationSummary, path: str | Path | None = None) -> Figure:
    """Draw the figure (see the module docstring); saved to ``path`` and closed when given."""
    from scalebo.plotting import _pyplot

    plt = _pyplot()
    with_law = [e for e in summary.estimates if e.law is not None]
    isoflop = next((e for e in with_law if e.approach == 2 and not e.law.profiles.empty), None)
    if isoflop is not None:
        fig, (ax_p, ax_n, ax_d) = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
        _profiles(ax_p, isoflop)
    else:
        fig, (ax_n, ax_d) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    every_c = [*summary.C_range, *summary.predict]
    every_c = [c for c in every_c if np.isfinite(c) and c > 0]
    lo, hi = (min(every_c), max(every_c)) if every_c else (1e18, 1e24)
    low, top = (summary.C_range if np.all(np.isfinite(summary.C_range))
                else (lo / 1.5, hi * 1.5))
    inner = np.geomspace(low, top, 100)  # the runs' computes: solid; beyond them: dashed
    outer = [np.geomspace(a, b, 50) for a, b in ((lo / 1.5, low), (top, hi * 1.5)) if b > a]
    what = {1: "envelope runs", 2: "isoFLOP vertices (hollow: outside the sizes trained)"}
    for est in with_law:
        color, marker, label = _STYLE[est.approach]
        C, N, D, inside = _points(est)
        for ax, y, fit, key in ((ax_n, N, est.law.n_opt, "N_opt"),
                                (ax_d, D, est.law.d_opt, "D_opt")):
            iv = est.intervals.get(key)
            shown = f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv and np.all(np.isfinite(iv)) else ""
            ax.plot(inner, fit(inner), color=color, label=f"{label}: C^{fit.exponent:.3f}{shown}")
            for part in outer:
                ax.plot(part, fit(part), color=color, ls="--")
            ax.scatter(C[inside], y[inside], color=color, marker=marker, s=24,
                       edgecolor="black", linewidth=0.3, zorder=3,
                       label=what.get(est.approach) if C.size else None)
            ax.scatter(C[~inside], y[~inside], facecolor="white", edgecolor=color,
                       marker=marker, s=30, linewidth=1.2, zorder=3)
            for c in summary.predict:  # the predicted N*, D*: where the approaches part
                ax.plot([c], [fit(np.array([c]))[0]], marker=marker, color=color, ms=7,
                        mec="black", mew=0.5, zorder=4)
    for ax, what in ((ax_n, "N* (parameters)"), (ax_d, "D* (tokens)")):
        for i, c in enumerate(summary.predict):
            ax.axvline(c, color="grey", ls=":", lw=1.2,
                       label="predicted at (dashed: beyond the runs' computes)" if i == 0
                       else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute C (FLOPs)")
        ax.set_ylabel(what)
        ax.grid(True, which="major", alpha=0.3)
        if with_law:
            ax.legend(fontsize=8, loc="best")
    missing = [textwrap.shorten(f"{e.approach}: {e.reason}", 110, placeholder=" (see the notes)")
               for e in summary.estimates if e.law is None]
    fig.suptitle(f"compute-optimal allocation, {summary.n_cells} (N, D) cells"
                 + "".join(f"\nno law from approach {m}" for m in missing), fontsize=10)
    if path is not None:
        save_figure(fig, path, dpi=150)
        plt.close(fig)
    return fig
