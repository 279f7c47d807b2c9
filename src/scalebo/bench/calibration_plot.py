"""The report's calibration figure (:func:`calibration_figure`) and the helpers the report's
other figures share: pyplot on the Agg backend, a budget axis in % of C_total, a legend
below the panels. The numbers behind it are :mod:`scalebo.bench.calibration`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.bench.calibration import (
    LEVELS,
    TARGETS,
    WIDTH_FLOOR_PCT,
    calibration_summary,
)
from scalebo.bench.targets import target_label
from scalebo.outputs import save_figure

__all__ = ["calibration_figure"]


def _plt():
    """``matplotlib.pyplot``, on the Agg backend unless pyplot is already loaded."""
    import matplotlib

    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _budget_axis(ax, budgets) -> None:
    """Log x axis with ticks at the budgets, labelled in % of C_total."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(budgets)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{100 * x:g} %"))
    ax.set_xlabel("budget (% of C_total)")


def _legend(fig, methods, colors, styles, extra=()) -> None:
    """Figure legend below the panels: one entry per method (its colour), one per line style
    ``(label, linestyle, marker, filled)``, then ``extra`` handles; long handles, so that
    dashed and solid lines are told apart."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[i % len(colors)], lw=2.5, label=m)
               for i, m in enumerate(methods)]
    handles += [Line2D([], [], color="0.3", ls=ls, marker=mk, mfc="0.3" if filled else "white",
                       label=label) for label, ls, mk, filled in styles]
    n = len(handles) + len(extra)  # columns: as many as fit the figure's width (~3 in each)
    fig.legend(handles=[*handles, *extra], handlelength=4, fontsize=8,
               loc="outside lower center", ncol=max(1, min(n, int(fig.get_figwidth() // 3))))


def calibration_figure(iv: pd.DataFrame, path: Path, C: str | Mapping[str, str] = "1e+25"
                       ) -> Path | None:
    """Coverage of the 80 % and 95 % intervals and the median 80 % width vs budget.

    One column per dataset; rows: 80 % coverage, 95 % coverage (%, nominal level dashed,
    target range shaded), median 80 % width (% of the reference loss, log y; a width of 0,
    a posterior collapsed onto the point fit, and anything below :data:`WIDTH_FLOOR_PCT` is
    drawn on a dotted floor line at it, as the axis label then says; no line where no width
    is that small). One colour per method, one
    line style and marker per law (legend below the panels); methods are nudged sideways
    (±3 % of the budget) so that equal values stay visible. Returns None without intervals.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    s = calibration_summary(iv)
    s = s[s["n"] > 0]
    if s.empty:
        return None
    plt = _plt()
    datasets = list(dict.fromkeys(s["dataset"]))
    methods = list(dict.fromkeys(s["method"]))
    styles = dict(zip(dict.fromkeys(s["law"]), (("-", "o"), ("--", "s"), (":", "^"),
                                                  ("-.", "v")), strict=False))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    floor = WIDTH_FLOOR_PCT
    fig, axes = plt.subplots(3, len(datasets), figsize=(max(6.5, 5 * len(datasets)), 10),
                             squeeze=False, constrained_layout=True, sharex="col")
    for j, ds in enumerate(datasets):
        for i, method in enumerate(methods):  # each method and law a little apart: equal
            for k, (law, (ls, marker)) in enumerate(styles.items()):  # values stay visible
                nudge = 1 + 0.025 * (i * len(styles) + k - (len(methods) * len(styles) - 1) / 2)
                g = s[(s["dataset"] == ds) & (s["method"] == method) & (s["law"] == law)]
                g = g.sort_values("budget")
                if g.empty:
                    continue
                kw = {"color": colors[i % len(colors)], "ms": 4, "ls": ls, "marker": marker}
                x = g["budget"] * nudge
                for row, col in enumerate(("coverage_80", "coverage_95")):
                    axes[row, j].plot(x, 100 * g[col], **kw)
                axes[2, j].plot(x, np.maximum(g["median_width_80_pct"], floor), **kw)
        for row, level in enumerate(LEVELS):
            ax = axes[row, j]
            lo, hi = TARGETS[level]
            band = ax.axhspan(100 * lo, 100 * hi, color="0.85", alpha=0.5, lw=0,
                              label="target range")
            nominal = ax.axhline(float(level), color="0.3", ls=(0, (2, 2)), lw=1,
                                 label="nominal level")
            ax.set(ylim=(-5, 105), ylabel=f"{level} % interval coverage (%)",
                   title=ds if row == 0 else None)
        ax = axes[2, j]
        widths = s.loc[s["dataset"] == ds, "median_width_80_pct"].to_numpy(dtype=float)
        clipped = bool(np.any(widths < floor))  # the floor line only where a width sits on it
        if clipped:  # (else it stretched the log axis over decades no width reaches)
            ax.axhline(floor, color="0.5", ls=":", lw=1)
        ax.set(yscale="log", ylabel="median 80 % width (% of ref. loss)" + (
            f"\n(below {floor:g} %: drawn at it, dotted)" if clipped else ""))
        shown = np.maximum(widths[np.isfinite(widths)], floor)
        narrow = shown.size and (np.floor(np.log10(shown.max()))  # under two powers of ten
                                 - np.ceil(np.log10(shown.min())) < 1)  # inside: label 1-2-5
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if narrow else (1.0,),
                                              numticks=12))  # (a trial saw one label, "10")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        for row, ax in enumerate(axes[:, j]):
            _budget_axis(ax, s["budget"].unique())
            ax.grid(alpha=0.3, which="both")
            if row < 2:
                ax.set_xlabel("")
    _legend(fig, methods, colors, [(f"law {law}", ls, mk, True)
                                   for law, (ls, mk) in styles.items()], (band, nominal))
    fig.suptitle(f"Law posterior calibration at {target_label(C)}\n(coverage of "
                 "the reference law's loss, interval width; over seeds)")
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- report section
