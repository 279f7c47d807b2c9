"""The ``scalebo fit --formula --plot`` figure: how well a formula law fits, at a glance.

Panels: observed against predicted response with the line ``y = x`` (bootstrap percentile
intervals of the predictions as vertical bars when bootstrapped), then the residual against
each variable of the formula (log x-axis for a variable whose values are all positive), with
the prediction points (``--predict-at``) as dotted vertical lines (and their predicted
response as a dotted level in the first panel, with its value), so a trend left in the
residuals or an extrapolation far from the data shows. Residuals follow the fit:
``log(observed / predicted)`` for log residuals, ``observed − predicted`` for natural ones.
The title gives the formula, the status, the rows and the in-sample R².
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scalebo.outputs import save_figure

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.figure import Figure

    from scalebo.fitting.formula_summary import FormulaFitSummary

__all__ = ["formula_residuals", "plot_formula_fit"]


def formula_residuals(observed: np.ndarray, predicted: np.ndarray, residuals: str) -> np.ndarray:
    """``log(observed / predicted)`` (NaN where either is ≤ 0) for ``residuals="log"``,
    ``observed − predicted`` for ``"natural"``."""
    obs, pred = np.asarray(observed, np.float64), np.asarray(predicted, np.float64)
    if residuals == "natural":
        return obs - pred
    with np.errstate(all="ignore"):
        return np.where((obs > 0) & (pred > 0), np.log(obs / pred), np.nan)


def _log_scale(values: np.ndarray) -> bool:
    values = values[np.isfinite(values)]
    return bool(values.size) and bool(np.all(values > 0)) and values.max() > values.min()


def _log_ticks(ax: object, values: np.ndarray) -> None:
    """Readable ticks on a log x-axis: minor ticks unlabelled and, on an axis spanning under
    two decades (where matplotlib labels minor ticks, which overlapped: ``3×10²4×10²``), major
    ticks at the distinct ``values`` (data and prediction points), at most 6 of them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax.get_xlim()
    if hi / lo >= 100:
        return
    at = np.unique(values[np.isfinite(values) & (values > 0)])
    if at.size > 6:  # evenly in log among them, ends kept
        at = at[np.unique(np.round(np.linspace(0, at.size - 1, 6)).astype(int))]
    ax.xaxis.set_major_locator(FixedLocator(at))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))


def plot_formula_fit(summary: FormulaFitSummary, path: str | Path | None = None, *,
                     title: str | None = None) -> Figure:
    """Draw the figure of a formula fit (see the module docstring).

    Args:
        summary: from :func:`~scalebo.fitting.formula_summary.summarize_formula_fit`.
        path: if given, the figure is saved there (format from the suffix) and closed.
        title: figure title (default: formula, status, rows and R²).

    Returns:
        The matplotlib ``Figure``.
    """
    from scalebo.plotting import _pyplot

    law, y, X = summary.law, summary.y, summary.X
    pred = summary.fitted
    resid = formula_residuals(y, pred, summary.residuals)
    points: Sequence[Mapping[str, float]] = summary.points
    k = len(law.variables)
    ncols = 2 if k + 1 == 4 else min(3, k + 1)
    nrows = math.ceil((k + 1) / ncols)
    plt = _pyplot()
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows + 0.5),
                             layout="constrained", squeeze=False)
    flat = axes.ravel()
    for ax in flat[k + 1:]:
        ax.set_visible(False)

    ax = flat[0]
    boot = summary.bootstrap
    yerr = None
    if boot is not None and len(boot.samples):
        lo, hi = boot.predict_interval(X)
        yerr = np.vstack([pred - lo, hi - pred]).clip(min=0)
        yerr = np.where(np.isfinite(yerr), yerr, 0.0)
    ax.errorbar(y, pred, yerr=yerr, fmt="o", ms=4, color="tab:blue", mec="black", mew=0.3,
                ecolor="tab:blue", elinewidth=0.8, alpha=0.8, capsize=0,
                label=f"rows ({y.size})" + (f", {100 * boot.confidence_level:g}% bootstrap"
                                             if yerr is not None else ""))
    both = np.concatenate([y, pred])
    both = both[np.isfinite(both)]
    if _log_scale(both) and both.max() / both.min() >= 10:
        ax.set_xscale("log")
        ax.set_yscale("log")
    span = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    ax.plot(span, span, color="tab:red", lw=1.2, label="y = x", zorder=0)
    lo_y, hi_y = span
    room = 0.25 * (hi_y - lo_y)
    for point in points:  # a prediction has no observation: a level, named (off the panel
        Xp = np.array([[point[v] for v in law.variables]])  # when far from the data)
        value = float(law.predict(summary.fit.x, Xp)[0])
        shown = ", ".join(f"{v}={point[v]:.3g}" for v in law.variables)
        label = f"prediction at {shown}: {value:.4g}"
        if lo_y - room <= value <= hi_y + room:
            ax.axhline(value, color="tab:orange", ls=":", lw=1.4, label=label)
        else:
            ax.plot([], [], " ", label=f"{label} (off this panel)")
    ax.set_xlabel(f"observed {summary.response}")
    ax.set_ylabel(f"predicted {summary.response}")
    # below the panel: inside, its long prediction entry covered points and ticks (a trial)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax.grid(True, which="both", alpha=0.25)

    r_label = ("log(observed / predicted)" if summary.residuals == "log"
               else "observed − predicted")
    for j, v in enumerate(law.variables):
        ax = flat[j + 1]
        x = X[:, j]
        ax.scatter(x, resid, s=14, color="tab:blue", edgecolor="black", linewidth=0.3)
        ax.axhline(0.0, color="tab:red", lw=1.0)
        at = [p[v] for p in points]
        for i, value in enumerate(at):
            ax.axvline(value, color="tab:orange", ls=":", lw=1.4,
                       label="prediction point" if i == 0 else None)
        every = np.concatenate([x, np.asarray(at, dtype=np.float64)])
        if _log_scale(every):
            ax.set_xscale("log")
        if at:  # keep the prediction lines off the frame's edge
            log_x = ax.get_xscale() == "log"
            ends = np.log10(every) if log_x else every
            lo, hi = float(ends.min()), float(ends.max())
            pad = 0.05 * (hi - lo) if hi > lo else 0.5
            lo, hi = lo - pad, hi + pad
            ax.set_xlim(*(10.0 ** np.array([lo, hi]) if log_x else (lo, hi)))
        if ax.get_xscale() == "log":
            _log_ticks(ax, every)
        column = summary.variable_map.get(v, v)
        ax.set_xlabel(v if column == v else f"{v} ({column})")
        ax.set_ylabel(r_label)
        ax.grid(True, which="both", alpha=0.25)
        if at:
            ax.legend(fontsize=8, loc="best")
    r2 = summary.r2
    head = textwrap.fill(law.formula, 90)
    fig.suptitle(title or f"{head}\n{summary.fit.status}, {y.size} rows, {summary.residuals} "
                 f"residuals, R² {'n/a' if r2 is None else f'{r2:.6g}'}", fontsize=10)
    if path is not None:
        save_figure(fig, path, dpi=150)
        plt.close(fig)
    return fig
