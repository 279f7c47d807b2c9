"""The report's recovery and comparison figures (:func:`~scalebo.bench.report.write_report`):
methods' mean ± 1 SD over seeds against the budget fraction, per dataset.

Log panels draw the ±1 SD band of the lognormal with that mean and SD (``exp(μ ± σ)``) and
values below a floor at it (dotted); percentage panels are clipped to 0–100 %. With one budget
the band has no width, so the spread is drawn as an error bar. matplotlib is imported lazily,
on the Agg backend unless pyplot is already loaded (:func:`scalebo.bench.calibration_plot._plt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.bench import calibration_plot as cal
from scalebo.bench.calibration import WIDTH_FLOOR_PCT
from scalebo.bench.targets import shown_key
from scalebo.outputs import save_figure

__all__ = ["ERROR_FLOOR_PCT", "FIGURE_NOTE", "PANELS", "STYLES", "comparison_figure",
           "recovery_figure"]

#: Floor (%) of the extrapolation errors in the figures (the calibration's width floor).
ERROR_FLOOR_PCT = WIDTH_FLOOR_PCT
#: Recovery panels: (metric, kind filter, y label, floor of the log axis in the metric's
#: unit; None: a linear percentage axis).
PANELS = (
    ("{law}.extrapolation_pct.{C}", "fit", "|extrapolation| at {at} FLOPs (%)",
     ERROR_FLOOR_PCT),
    ("{law}.param_error.alpha", "fit", "|α − α_ref|", 1e-5),
    ("{law}.param_error.E", "fit", "|E − E_ref| (nats)", 1e-5),
    ("{law}.heldout_mse", "fit", "held-out MSE (nats²)", 1e-7),
    ("envelope_recovery_pct", "run", "envelope recovered (%)", None),
    ("cell_recovery_pct", "run", "cells' best recovered (%)", None),
)
#: Line style, marker and marker face (None: filled) per kind of data behind the fit.
STYLES = {"observed": ("--", "o", "white"), "fantasized": ("-", "s", None),
          "run": ("-", "o", None)}


def _series(summary, ds, method, kind, metric):
    s = summary[(summary["dataset"] == ds) & (summary["method"] == method)
                & (summary["kind"] == kind) & (summary["metric"] == metric)].sort_values("budget")
    return s["budget"].to_numpy(), s["mean"].to_numpy(), s["sd"].to_numpy()


def _line(ax, x, m, sd, color, kind, floor):
    """Mean line and ±1 SD band: linear, clipped to 0–100 % (``floor`` None), or in log space
    (the lognormal with that mean and SD, ``exp(μ ± σ)``), drawn at ``floor`` below it."""
    if not len(x):
        return
    sd = np.nan_to_num(np.asarray(sd, dtype=np.float64))  # one seed: no spread, not a floor
    lo, hi = np.clip(m - sd, 0, 100), np.clip(m + sd, 0, 100)
    if floor is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            s2 = np.log1p((sd / m) ** 2)
            lo, hi = (np.exp(np.log(m) - s2 / 2 + k * np.sqrt(s2)) for k in (-1, 1))
        m, lo, hi = (np.fmax(np.nan_to_num(v, nan=floor), floor) for v in (m, lo, hi))
    style, marker, face = STYLES[kind]
    ax.plot(x, m, style, color=color, marker=marker, mfc=face or color, ms=4)
    if len(x) > 1:
        ax.fill_between(x, lo, hi, color=color, alpha=0.12, lw=0)
    elif hi[0] > lo[0]:  # one budget: a band has no width and would hide the spread
        ax.vlines(x, lo, hi, color=color, lw=1.5, alpha=0.6)


def _panel(ax, summary, ds, methods, metric, ylabel, floor, kinds, colors) -> None:
    """Methods' mean ± 1 SD vs budget; log y with a dotted line at ``floor``, or linear %."""
    for i, method in enumerate(methods):
        for kind in kinds:
            _line(ax, *_series(summary, ds, method, kind, metric), colors[i % len(colors)],
                  kind, floor)
    cal._budget_axis(ax, summary["budget"].unique())
    ax.grid(alpha=0.3, which="both")
    if floor is None:
        ax.set(ylabel=ylabel, ylim=(-3, 103))
        return
    ax.set_yscale("log")
    if ax.dataLim.y0 <= floor * 1.01:  # something is drawn at the floor: say so
        ax.axhline(floor, color="0.5", ls=":", lw=1)
        ylabel = f"{ylabel}\n(below {floor:g}{' %' * ('%' in ylabel)}: drawn at it, dotted)"
    ax.set_ylabel(ylabel)


def _finish(fig, plt, methods, colors, title: str, path: Path) -> Path:
    """Legend (a colour per method; the kinds of fit by line style and marker), title, save."""
    cal._legend(fig, methods, colors, (("law on observed runs", "--", "o", False),
                                   ("law on observed + fantasized losses", "-", "s", True)))
    fig.suptitle(title)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def recovery_figure(summary: pd.DataFrame, dataset: str, methods: Sequence[str], path: Path,
                    law: str = "compute", C: str = "1e+25") -> Path:
    """Recovery panels vs budget fraction for ``methods`` on ``dataset`` (mean ± 1 SD); the
    error panel at target key ``C`` (the dataset's headline target)."""
    plt = cal._plt()
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (metric, which, ylabel, floor) in zip(axes.flat, PANELS, strict=True):
        kinds = ("run",) if which == "run" else ("observed", "fantasized")
        at = shown_key(C)
        _panel(ax, summary, dataset, methods, metric.format(law=law, C=C),
               ylabel.format(at=at), floor, kinds, colors)
    return _finish(fig, plt, methods, colors, f"{dataset}: recovery vs budget ({law} law; "
                   "mean ± 1 SD over seeds, log panels: SD band in log space)", path)


def comparison_figure(summary: pd.DataFrame, methods: Sequence[str], param: str, path: Path,
                      law: str = "compute", keys: Mapping[str, str] | None = None) -> Path:
    """|Extrapolation| vs budget per dataset for methods differing in ``param``, at each
    dataset's target key ``keys[dataset]`` (default ``"1e+25"``, its headline target)."""
    plt = cal._plt()
    datasets = list(dict.fromkeys(summary["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(max(6, 5 * len(datasets)), 4.4),
                             squeeze=False, constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, ds in zip(axes[0], datasets, strict=True):
        key = (keys or {}).get(ds, "1e+25")
        _panel(ax, summary, ds, methods, f"{law}.extrapolation_pct.{key}",
               f"|extrapolation| at {shown_key(key)} FLOPs (%)", ERROR_FLOOR_PCT,
               ("observed", "fantasized"), colors)
        ax.set_title(ds)
    return _finish(fig, plt, methods, colors,
                   f"{param} comparison (mean ± 1 SD over seeds)", path)


#: Caption under the recovery and comparison figures of the report.
FIGURE_NOTE = ("_Mean and ±1 SD over seeds (log panels: the lognormal with that mean and SD; "
               "recovery panels: clipped to 0–100 %). Dashed, open circles: law fitted on observed "
               "runs; solid, filled squares: on observed + fantasized losses. Values below the "
               f"floor ({ERROR_FLOOR_PCT:g} % for errors; |Δα|, |ΔE| 1e-05, MSE 1e-07 nats²) "
               "are drawn at it (dotted)._")
