"""The fragility figure: each variant's exponents, N* and loss at the target compute.

:func:`plot_fragility` draws a :class:`~scalebo.analysis.fragility.FragilityReport` (re-exported
by :mod:`scalebo.analysis.fragility`); matplotlib is imported only when it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scalebo.outputs import save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from scalebo.analysis.fragility import FragilityReport

__all__ = ["plot_fragility"]


def plot_fragility(report: FragilityReport, path: str | None = None) -> Figure:
    """Four panels across variants — exponents (α, β), N*(target), D*/N*, loss at target — with
    the median (solid) and base (dashed) lines and the min–max band; relative spread in the
    panel titles; variants without a usable fit (failed, unidentified, bound hit, max
    iterations) are left out and named in the title. Returns the figure (saved to ``path``
    if given)."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    table = report.table
    ok = table[report.usable].reset_index(drop=True)
    if ok.empty:  # nothing to compare: say so on the figure rather than fail
        fig, ax = plt.subplots(figsize=(8, 2.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{report.law}: none of the {len(table)} variants has a usable fit\n"
                + ", ".join(f"{v} ({st})" for v, st in table[["variant", "status"]]
                            .itertuples(index=False)), ha="center", va="center", wrap=True)
        if path is not None:
            save_figure(fig, path, dpi=150)
        return fig
    spread = report.spread
    y = np.arange(len(ok))[::-1]
    fig, axes = plt.subplots(1, 4, figsize=(16, 0.22 * len(ok) + 2.4), sharey=True)
    panels = [("alpha", "beta", "exponents"), ("N_opt", None, "N* (parameters)"),
              ("tokens_per_param", None, "D*/N* (tokens per parameter)"),
              ("loss_at_target", None, "loss at target (nats)")]
    for ax, (col, col2, label) in zip(axes, panels, strict=True):
        ax.scatter(ok[col], y, s=14, color="C0", label=col if col2 else None, zorder=3)
        cols = [col]
        if col2:
            ax.scatter(ok[col2], y, s=14, color="C1", marker="s", label=col2, zorder=3)
            cols.append(col2)
            ax.legend(loc="upper center", ncol=2, fontsize=7)  # between the two columns
        for c, colour in zip(cols, ("C0", "C1"), strict=False):
            s = spread[c]
            ax.axvspan(s["min"], s["max"], color=colour, alpha=0.08)
            ax.axvline(s["median"], color=colour, lw=1)
            ax.axvline(s["base"], color=colour, lw=1, ls="--")
        values = ok[col].to_numpy(dtype=float)
        if col in ("N_opt", "tokens_per_param") and np.nanmax(values) > 10 * np.nanmin(values):
            ax.set_xscale("log")
        else:  # a narrow spread: 4 plain ticks (a log axis within a decade, or 5-digit
            # losses, labelled a crowd that overlapped)
            from matplotlib.ticker import FuncFormatter, MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(4))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.4g}"))
        title = ", ".join(f"{c}: spread {100 * spread[c]['rel_spread']:.0f}%" for c in cols)
        ax.set_title(f"{label}\n{title}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(ok["variant"], fontsize=7)
    left = table.loc[~report.usable, ["variant", "status"]]
    out = ("; left out: " + ", ".join(f"{v} ({st})" for v, st in left.itertuples(index=False))
           ) if len(left) else ""
    fig.suptitle(f"{report.law} fit under {len(ok)} of {len(table)} variants, target C = "
                 f"{report.target:.0e} FLOPs (solid: median, dashed: base, band: min–max; "
                 f"spread = (max − min) / median){out}", fontsize=10, wrap=True)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=150)
    return fig
