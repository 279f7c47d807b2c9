"""Figures of fitted scaling laws (matplotlib, imported lazily, Agg backend by default).

:func:`plot_fit` draws loss (nats) against training compute (FLOPs) on log–log axes: every run
(light), the fitted points (highlighted), the fitted law — ``L(C)`` for the compute law, the
compute-optimal path ``L(N*(C), D*(C))`` for laws in ``N`` and ``D`` — solid over the observed
compute range and dashed where it extrapolates, its bootstrap percentile band, and the
predictions at the requested compute budgets with their values; runs far above the rest sit on
the top edge (:data:`FENCE_IQR`), and loss ticks are plain numbers (:func:`loss_ticks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from scalebo.fitting.robust import FitResult
from scalebo.laws import PowerLawSum
from scalebo.outputs import save_figure

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.figure import Figure

    from scalebo.fitting.bootstrap import BootstrapResult

__all__ = ["FENCE_IQR", "law_curve", "loss_ticks", "plot_fit"]

_CURVE_POINTS = 200
#: Runs above Q3 + FENCE_IQR · IQR of all runs' losses (nats) and above every fitted point are
#: drawn on the top edge of :func:`plot_fit` (diverged runs would squash the frontier).
FENCE_IQR = 3.0


def loss_ticks(ax, axis: str = "y") -> None:
    """Plain tick labels on a log axis of losses in nats: within a factor of 3, evenly chosen
    values (1.5, 2, 2.5, …: a narrow range would keep one or two labels, 2 and 3, or none);
    over a wider range, 1, 2 and 5 times each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator

    target = ax.yaxis if axis == "y" else ax.xaxis

    class _Loss(LogLocator):
        def __call__(self):
            lo, hi = sorted(target.get_view_interval())
            if lo > 0 and hi / lo <= 3:
                return MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
            return super().__call__()

    target.set_major_locator(_Loss(subs=(1.0, 2.0, 5.0)))
    target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))


def _pyplot():
    """Import pyplot lazily, selecting the non-interactive Agg backend unless one is set."""
    import matplotlib

    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def law_curve(fit: FitResult, compute: np.ndarray) -> np.ndarray:
    """The fitted loss (nats) as a function of compute (FLOPs), shape ``compute.shape``.

    ``L(C)`` for a law in ``C``; for a sum of power laws in ``(N, D)`` the loss along the
    compute-optimal path with ``C = 6·N·D`` (approach 3).

    Raises:
        ValueError: a law in other variables (no loss-vs-compute curve).
    """
    compute = np.asarray(compute, dtype=np.float64)
    variables = tuple(fit.law.variables)
    if variables == ("C",):
        return fit.predict(compute.reshape(-1, 1)).reshape(compute.shape)
    if isinstance(fit.law, PowerLawSum) and variables == ("N", "D"):
        from scalebo.fitting.allocation import compute_law_from_chinchilla

        return compute_law_from_chinchilla(fit, compute.ravel()).reshape(compute.shape)
    raise ValueError(
        f"no loss-vs-compute curve for law {fit.law.name!r} with variables {list(variables)}; "
        "plot_fit supports laws in C or in (N, D)"
    )


def _band(
    fit: FitResult, boot: BootstrapResult, compute: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile band of :func:`law_curve` over the bootstrap replicates."""
    if tuple(fit.law.variables) == ("C",):
        lo, hi = boot.predict_interval(compute.reshape(-1, 1))
        return np.asarray(lo), np.asarray(hi)
    curves = []
    for sample in boot.samples:
        with np.errstate(all="ignore"):
            try:
                curves.append(law_curve(replace(fit, x=sample), compute))
            except (ValueError, ArithmeticError, RuntimeError):
                continue
    values = np.array(curves) if curves else np.full((1, compute.size), np.nan)
    tail = 100 * (1 - boot.confidence_level) / 2
    lo, hi = np.nanpercentile(values, [tail, 100 - tail], axis=0)
    return lo, hi


def plot_fit(
    runs: pd.DataFrame,
    frontier: pd.DataFrame,
    fit: FitResult,
    *,
    bootstrap: BootstrapResult | None = None,
    predict_at: Sequence[float] = (),
    path: str | Path | None = None,
    compute: str = "C",
    loss: str = "loss",
    title: str | None = None,
) -> Figure:
    """Log–log plot of loss (nats) vs compute (FLOPs) with the fitted law.

    Args:
        runs: every run, columns ``compute`` (FLOPs) and ``loss`` (nats); drawn light, except
            those above Q3 + :data:`FENCE_IQR` · IQR of their losses and above every fitted
            point (diverged?), drawn as triangles on the top edge and counted in the legend.
        frontier: the runs the law was fitted on (same columns); highlighted.
        fit: a fitted law in ``C`` or in ``(N, D)`` (see :func:`law_curve`).
        bootstrap: replicates of ``fit``; their percentile band is shaded.
        predict_at: compute budgets (FLOPs) to mark with the predicted loss (and interval).
        path: if given, the figure is saved there (format from the suffix).
        compute, loss: column names.
        title: figure title (default: the law's name and the number of fitted runs).

    Returns:
        The matplotlib ``Figure`` (not closed when ``path`` is None; closed after saving).

    Raises:
        ValueError: a law without a loss-vs-compute curve, or missing columns.
    """
    for name, df in (("runs", runs), ("frontier", frontier)):
        missing = [c for c in (compute, loss) if c not in df.columns]
        if missing:
            raise ValueError(f"plot_fit: {name} lacks column(s) {missing}")
    # A law in N and D puts its compute-optimal path at 6·N·D: draw the runs there too (a
    # C column that is not 6·N·D would otherwise sit off the curve it was fitted with)
    nd = (tuple(fit.law.variables) != ("C",)
          and all({"N", "D"} <= set(df.columns) for df in (runs, frontier)))

    def flops(df: pd.DataFrame) -> np.ndarray:
        if nd:
            return 6.0 * df["N"].to_numpy(np.float64) * df["D"].to_numpy(np.float64)
        return df[compute].to_numpy(dtype=np.float64)

    c_runs, c_fit = flops(runs), flops(frontier)
    targets = np.asarray(predict_at, dtype=np.float64).ravel()
    lo_c = float(np.min(c_fit)) if c_fit.size else float(np.min(c_runs))
    hi_data = float(np.max(c_fit)) if c_fit.size else float(np.max(c_runs))
    hi_c = max(hi_data, float(np.max(targets))) if targets.size else hi_data
    grid_in = np.geomspace(lo_c, hi_data, _CURVE_POINTS) if hi_data > lo_c else np.array([lo_c])
    grid_out = np.geomspace(hi_data, hi_c, _CURVE_POINTS) if hi_c > hi_data else np.empty(0)
    law_curve(fit, grid_in[:1])  # fail early (ValueError) before any figure is made

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.8), layout="constrained")
    y_runs = runs[loss].to_numpy(dtype=np.float64)
    y_fit = frontier[loss].to_numpy(dtype=np.float64)
    q1, q3 = np.nanpercentile(y_runs, [25, 75]) if y_runs.size else (np.nan, np.nan)
    fence = max(q3 + FENCE_IQR * (q3 - q1), float(np.nanmax(y_fit, initial=-np.inf)))
    above = y_runs > fence
    n_runs = runs["run"].nunique() if "run" in runs.columns else len(runs)
    what = (f"checkpoints ({len(runs)} of {n_runs} runs; a line per run)"
            if n_runs < len(runs) else f"runs ({len(runs)})")
    ax.scatter(c_runs[~above], y_runs[~above], s=10, color="0.6", alpha=0.6, label=what,
               zorder=1)
    if n_runs < len(runs):  # a run's checkpoints joined (a trial: they read as separate runs)
        for _, run in runs.loc[~above].assign(_C=c_runs[~above]).groupby("run", sort=False):
            order = np.argsort(run["_C"].to_numpy())
            ax.plot(run["_C"].to_numpy()[order], run[loss].to_numpy()[order], color="0.6",
                    lw=0.7, alpha=0.8, zorder=1)
    ax.scatter(c_fit, y_fit, s=26, color="tab:blue", edgecolor="black",
               linewidth=0.4, label=f"fitted ({len(frontier)})", zorder=3)
    curve_name = ("fit L(C)" if tuple(fit.law.variables) == ("C",) else
                  "compute-optimal loss of the fitted L(N, D)")
    ax.plot(grid_in, law_curve(fit, grid_in), color="tab:red", lw=1.8, label=curve_name,
            zorder=4)
    if grid_out.size:
        ax.plot(grid_out, law_curve(fit, grid_out), color="tab:red", lw=1.8, ls="--",
                label="extrapolation", zorder=4)
    if bootstrap is not None and len(bootstrap.samples):
        grid = np.concatenate([grid_in, grid_out[1:]]) if grid_out.size else grid_in
        lo, hi = _band(fit, bootstrap, grid)
        ax.fill_between(grid, lo, hi, color="tab:red", alpha=0.18, lw=0,
                        label=f"{100 * bootstrap.confidence_level:g}% bootstrap band", zorder=2)
    if targets.size:
        pred = law_curve(fit, targets)
        if bootstrap is not None and len(bootstrap.samples):
            lo, hi = _band(fit, bootstrap, targets)
            yerr = np.vstack([pred - lo, hi - pred]).clip(min=0)
        else:
            yerr = None
        ax.errorbar(targets, pred, yerr=yerr, fmt="*", ms=12, color="tab:orange",
                    mec="black", mew=0.5, capsize=3, label="prediction", zorder=5)
        for c, value in zip(targets, pred, strict=True):
            ax.annotate(f"{value:.4g}", (c, value), xytext=(-10, 0), textcoords="offset points",
                        fontsize=8, color="tab:orange", ha="right", va="center", zorder=6,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                              "alpha": 0.8})  # beside its error bar, not on it
    ax.set_xscale("log")
    ax.set_yscale("log")
    if above.any():  # the frontier, predictions and band stay in view; diverged runs on top
        drawn = [fence, *(pred + (yerr[1] if yerr is not None else 0) if targets.size else [])]
        bottom, top = ax.get_ylim()
        ax.set_ylim(bottom, float(np.nanmax(drawn)) * 1.03)
        ax.scatter(c_runs[above], np.full(int(above.sum()), ax.get_ylim()[1]), marker="^", s=18,
                   color="0.55", clip_on=False, zorder=2,
                   label=f"{int(above.sum())} run{'s' * (int(above.sum()) != 1)} above "
                   f"{fence:.3g} (diverged?), on the edge")
    ax.set_xlabel("training compute 6·N·D (FLOPs)" if nd else "training compute C (FLOPs)")
    ax.set_ylabel(f"{loss} (nats)" if loss == "loss" else loss)
    ax.set_title(title or f"{fit.law.name} law, {fit.status} ({len(frontier)} points fitted)")
    loss_ticks(ax)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if path is not None:
        save_figure(fig, path, dpi=150)
        plt.close(fig)
    return fig
