"""The benchmark report: mean ± SD tables and figures from a directory of sweep records.

Input is the tidy frame of :func:`scalebo.bench.records.load_records` (one row per cell ×
data kind × metric). A **variant** is a method with one kind of data behind its law fit:
``observed`` (observed runs only, written ``method``) or ``fantasized`` (observed +
surrogate fill-in, written ``method + fantasize``). Every statistic is over seeds: the mean
and the sample SD (``ddof=1``; 0 with one seed), and ``n`` the number of seeds.

Tables (Markdown, :func:`write_report`):

* relative extrapolation error ``|L̂(C) − L_ref(C)| / L_ref(C)`` in % at each target C the
  records are scored at (default 1e25, 1e27 and 1e29 FLOPs; a dataset's ``targets``,
  :mod:`scalebo.bench.targets`), one table per C — rows dataset × variant, columns budget
  fractions (the original study's Table 1 layout); at a dataset's headline target (its
  smallest; 1e25 by default) also the floor oracles' rows (:mod:`scalebo.bench.oracle`: the
  reference envelope's / the cells' best configurations bought cheapest first) for every
  dataset that can be loaded;
* calibration of the law posterior at each dataset's headline target
  (:mod:`scalebo.bench.calibration`): coverage of the 80 % / 95 % intervals and their median
  width per dataset × method × law × budget, and pooled per method × law against the
  project's target;
* the fitted (incumbent) law's coefficients per budget — rows dataset × variant × parameter,
  columns budgets (Table 5 layout) — and how many fits converged (:mod:`.fit_rates`);
* compute saved: the smallest budget fraction ``f`` at which the mean error at the headline
  target is ≤ a threshold (default 1 %), the saving factor ``1/f``, and the compute actually
  spent there as a fraction of ``C_total`` and as a multiple of the per-cell compute floor;
* runs and recoveries (envelope %, cell %) per budget; the header names the records'
  numerical environments. Numbers below a display floor print as ``0.00`` (:func:`format_pm`).
Figures (matplotlib, lazily, Agg; only for the methods in the records): per dataset a grid
of recovery panels vs budget with ±1 SD bands (a colour per method; observed: dashed, open
circles; fantasized: solid, filled squares), comparisons of methods that differ only in
surrogate, kernel or acquisition (:mod:`scalebo.bench.report_figures`), and the calibration
(``figures/calibration.png``). Log panels band in log space and draw values below their floor
(:data:`~scalebo.bench.report_figures.PANELS`; errors: :data:`ERROR_FLOOR_PCT` = 1e-3 %) on a
dotted line at it, so that 1e-7 % errors do not stretch the axis over 8 decades; recovery
bands are clipped to 0–100 %; with one budget the spread is an error bar.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.bench.calibration import calibration_section
from scalebo.bench.calibration_plot import calibration_figure
from scalebo.bench.environment import describe_environments
from scalebo.bench.fit_rates import CONVERGED_HEADING, converged_table
from scalebo.bench.oracle import report_oracle
from scalebo.bench.records import (
    ENVIRONMENTS_ATTR,
    IGNORED_ATTR,
    NOTES_ATTR,
    STALE_ATTR,
    RecordWarning,
    reportable_records,
)
from scalebo.bench.report_figures import (
    ERROR_FLOOR_PCT,
    FIGURE_NOTE,
    comparison_figure,
    recovery_figure,
)
from scalebo.bench.targets import (
    DEFAULT_KEYS,
    headline_gaps,
    headline_keys,
    shown_key,
    target_keys,
    target_label,
)
from scalebo.outputs import write_text_file

__all__ = ["ERROR_FLOOR_PCT", "EXTRAPOLATION_KEYS", "coefficient_table", "comparison_groups",
           "extrapolation_table", "format_pm", "savings_table", "summarize", "write_report"]

#: Metric-name suffixes of the default extrapolation points (see ``bench.metrics.c_key``).
EXTRAPOLATION_KEYS = DEFAULT_KEYS
COMPARED = ("surrogate", "kernel", "acquisition", "incumbent", "schedule")


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, SD and n over seeds per ``(dataset, method, kind, metric, budget)``; extrapolation
    metrics (signed in the records) are summarized as absolute values."""
    ok = frame[frame["status"] == "ok"].copy()
    ext = ok["metric"].str.contains("extrapolation_pct", regex=False)
    ok.loc[ext, "value"] = ok.loc[ext, "value"].abs()
    g = ok.groupby(["dataset", "method", "kind", "metric", "budget"], sort=False)["value"]
    return g.agg(mean="mean", sd=lambda v: float(v.std(ddof=1)) if v.count() > 1 else math.nan,
                 n="count").reset_index()


def format_pm(mean: float, sd: float, digits: int = 2) -> str:
    """Cell ``mean ± sd``, ``digits`` decimals (``–``: mean not finite; no ``± sd``: sd NaN).

    A number of magnitude below the display floor ``0.5·10^-digits`` prints as ``0.00``; a
    mean of 1,000 or more (and its SD, unless below the floor) in exponent notation:
    ``1.71e-10 ± 0`` → ``0.00 ± 0.00``, ``2.79e+03 ± 6e-06`` → ``2.79e+03 ± 0.00``.
    """
    if not math.isfinite(mean):
        return "–"

    def one(x: float, big: str) -> str:
        x = 0.0 if math.isfinite(x) and abs(x) < 0.5 * 10.0 ** -digits else x
        return f"{x:{big}}" if abs(mean) >= 1e3 and x else f"{x:.{digits}f}"

    return one(mean, ".2e") + (f" ± {one(sd, '.1e')}" if math.isfinite(sd) else "")


def _budget_label(b: float) -> str:
    return f"{100 * b:g} %"


def _variants(summary: pd.DataFrame, metric: str) -> list[tuple[str, str, str]]:
    """``(dataset, method, kind)`` with data for ``metric``, in first-seen order."""
    sub = summary[summary["metric"] == metric]
    return list(dict.fromkeys(zip(sub["dataset"], sub["method"], sub["kind"], strict=True)))


def _label(method: str, kind: str) -> str:
    return f"{method} + fantasize" if kind == "fantasized" else method


def _pivot(summary: pd.DataFrame, metric: str, digits: int = 2,
           variants: Sequence[tuple[str, str, str]] | None = None) -> str:
    """Markdown table: rows dataset × variant, columns budgets, cells mean ± SD."""
    sub = summary[summary["metric"] == metric]
    if sub.empty:
        return "_no data_\n"
    budgets = sorted(sub["budget"].unique())
    lines = ["| dataset | method | " + " | ".join(_budget_label(b) for b in budgets) + " | n |",
             "|---|---|" + "---|" * (len(budgets) + 1)]
    for ds, method, kind in variants or _variants(summary, metric):
        rows = sub[(sub["dataset"] == ds) & (sub["method"] == method) & (sub["kind"] == kind)]
        by_b = {r.budget: r for r in rows.itertuples()}
        if kind == "oracle":  # deterministic: one value, "no fit" when the fit failed
            cells = [("–" if b not in by_b else f"{by_b[b].mean:.{digits}f}"
                      if math.isfinite(by_b[b].mean) else "no fit") for b in budgets]
            lines.append(f"| {ds} | {method} | " + " | ".join(cells) + " | – |")
            continue
        cells = [format_pm(by_b[b].mean, by_b[b].sd, digits) if b in by_b else "–" for b in budgets]
        n = int(rows["n"].min()) if len(rows) else 0
        lines.append(f"| {ds} | {_label(method, kind)} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(lines) + "\n"


def extrapolation_table(summary: pd.DataFrame, C: str = "1e+25", law: str = "compute",
                        oracle: pd.DataFrame | None = None) -> str:
    """Table 1 layout: |relative extrapolation error| (%) at ``C`` FLOPs, mean ± SD.

    ``oracle`` (:attr:`scalebo.bench.oracle.OracleSummary.summary`) adds its rows after each
    dataset's methods, one value per budget ("no fit" when the oracle's fit failed).
    """
    metric = f"{law}.extrapolation_pct.{C}"
    if oracle is None or oracle.empty:
        return _pivot(summary, metric)
    variants, extra = _variants(summary, metric), _variants(oracle, metric)
    ordered = [v for ds in dict.fromkeys(v[0] for v in variants + extra)
               for v in (*[v for v in variants if v[0] == ds], *[v for v in extra if v[0] == ds])]
    return _pivot(pd.concat([summary, oracle], ignore_index=True), metric, variants=ordered)


def coefficient_table(summary: pd.DataFrame, law: str = "compute") -> str:
    """Table 5 layout: fitted coefficients per budget (rows dataset × variant × parameter)."""
    prefix = f"{law}.params."
    sub = summary[summary["metric"].str.startswith(prefix)]
    if sub.empty:
        return "_no data_\n"
    budgets = sorted(sub["budget"].unique())
    lines = ["| dataset | method | parameter | " + " | ".join(map(_budget_label, budgets))
             + " |", "|---|---|---|" + "---|" * len(budgets)]
    for (ds, method, kind, metric), rows in sub.groupby(
            ["dataset", "method", "kind", "metric"], sort=False):
        by_b = {r.budget: r for r in rows.itertuples()}
        cells = [format_pm(by_b[b].mean, by_b[b].sd, 4) if b in by_b else "–" for b in budgets]
        lines.append(f"| {ds} | {_label(method, kind)} | {metric[len(prefix):]} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def savings_table(summary: pd.DataFrame, threshold_pct: float = 1.0,
                  C: str | Mapping[str, str] = "1e+25", law: str = "compute") -> str:
    """Smallest budget f from which the mean |error| at ``C`` stays ≤ ``threshold_pct`` at
    every larger budget recorded (not one within it, then 4 % at the next), saving 1/f.
    ``C``: a target key, or one per dataset (``{dataset: key}``, its headline target)."""
    keys = {ds: C for ds in summary["dataset"]} if isinstance(C, str) else dict(C)
    variants = [v for key in dict.fromkeys(keys.values())
                for v in _variants(summary, f"{law}.extrapolation_pct.{key}")
                if keys.get(v[0]) == key]
    runs = summary[summary["kind"] == "run"]
    lines = [f"| dataset | method | smallest budget f from which mean error stays ≤ "
             f"{threshold_pct:g} % (≤: the smallest recorded) | saving 1/f | compute spent "
             "(% of C_total) | × per-cell floor |", "|---|---|---|---|---|---|"]
    for ds, method, kind in variants:
        metric = f"{law}.extrapolation_pct.{keys[ds]}"
        rows = summary[(summary["dataset"] == ds) & (summary["method"] == method) & (
            summary["kind"] == kind) & (summary["metric"] == metric)].sort_values("budget")
        out = ~(rows["mean"] <= threshold_pct).to_numpy()  # NaN (no fit) counts as out
        hit = rows[~np.maximum.accumulate(out[::-1])[::-1]]
        if hit.empty:
            lines.append(f"| {ds} | {_label(method, kind)} | not reached | – | – | – |")
            continue
        f, first = float(hit["budget"].iloc[0]), len(hit) == len(rows)  # first: a bound
        r = runs[(runs["dataset"] == ds) & (runs["method"] == method) & (runs["budget"] == f)]
        spent = r[r["metric"] == "spent_fraction"]["mean"]
        floor = r[r["metric"] == "floor_multiple_cells"]["mean"]
        sp = f"{100 * spent.iloc[0]:.2f}" if len(spent) else "–"
        fl = f"{floor.iloc[0]:.1f}" if len(floor) else "–"
        lines.append(f"| {ds} | {_label(method, kind)} | {'≤ ' * first}{_budget_label(f)} | "
                     f"{'≥ ' * first}{1 / f:.0f}× | {sp} | {fl} |")
    return "\n".join(lines) + "\n"


def _run_table(summary: pd.DataFrame, metric: str, digits: int = 1) -> str:
    sub = summary[(summary["kind"] == "run")]
    return _pivot(sub, metric, digits, [(d, m, "run") for d, m, _ in _variants(sub, metric)])


def comparison_groups(frame: pd.DataFrame, param: str) -> list[list[str]]:
    """Groups of methods that differ only in ``param.<param>`` (≥ 2 distinct values)."""
    cols = [c for c in frame.columns if c.startswith("param.")]
    if f"param.{param}" not in cols:
        return []
    methods = frame.drop_duplicates("method")[["method", *cols]].set_index("method")
    others = [c for c in cols if c not in (f"param.{param}", "param.fantasize")]
    groups: dict[str, list[str]] = {}
    for method, row in methods.iterrows():
        key = json.dumps([str(row[c]) for c in others])
        groups.setdefault(key, []).append(str(method))
    return [sorted(g) for g in groups.values()
            if methods.loc[g, f"param.{param}"].astype(str).nunique() >= 2]


# --------------------------------------------------------------------------- figures

# --------------------------------------------------------------------------- report

def write_report(records_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 title: str | None = None, figures: bool = True, law: str = "compute",
                 threshold_pct: float = 1.0, oracle: bool = True,
                 data_dir: str | os.PathLike[str] | None = None,
                 all_records: bool = False) -> Path:
    """Write ``out_dir/report.md`` (and ``out_dir/figures/*.png``) from sweep records.

    Args:
        records_dir: Directory of records (``scalebo bench run --out``).
        out_dir: Report directory (created).
        title: First heading (default: "Benchmark report").
        figures: Draw the figures.
        law: Law whose metrics fill the tables: ``"compute"`` (L(C) on the envelope) or
            ``"chinchilla"`` (L(N, D) on per-cell bests, its compute-optimal path for C).
        threshold_pct: Accuracy target of the compute-saved table, % at each dataset's
            headline target (1e25 FLOPs by default).
        oracle: Add the floor oracles' rows (:mod:`scalebo.bench.oracle`) to the table at
            each dataset's headline target; needs each dataset loadable (a dataset that is
            not is named in the report and left out).
        data_dir: Public datasets folder for the oracles (default ``$SCALEBO_DATA_DIR``).
        all_records: Also report records of a dataset/method label written under older
            settings, version or data (by default left out, and said:
            :mod:`scalebo.bench.stale`).

    Returns:
        Path of the Markdown file. Raises ``ValueError`` when the directory holds no record
        or only failed cells;
        unusable record files are named in a warning (``load_records``), counted in it.
    """
    full = reportable_records(records_dir, all_records=all_records)
    ignored, stale = full.attrs.get(IGNORED_ATTR, ()), full.attrs.get(STALE_ATTR, ())
    frame = full[full["status"] == "ok"]
    summary = summarize(frame)
    out = Path(out_dir)
    fig_dir = out / "figures"
    n_err = int(full.loc[full["status"] != "ok", "key"].nunique())
    seeds = sorted(frame["seed"].unique())
    md = [f"# {title or 'Benchmark report'}", "",
          f"{frame['key'].nunique()} cells: datasets {', '.join(dict.fromkeys(frame['dataset']))}"
          f"; methods {', '.join(dict.fromkeys(frame['method']))}; seeds {len(seeds)} "
          f"({seeds[0]}–{seeds[-1]}); budgets "
          f"{', '.join(_budget_label(b) for b in sorted(frame['budget'].unique()))} of C_total."
          + (f" {n_err} cells failed (not included)." if n_err else "")
          + (f" {len(ignored)} record file(s) were ignored as unusable (unparsable, truncated "
             "or of another schema): " + ", ".join(f"`{i}`" for i in ignored) + "."
             if ignored else "")
          + (" Left out as stale (a label's records under other settings than its newest, "
             "e.g. before a config edit; `--all-records` keeps them): " + "; ".join(stale)
             + "." if stale else ""),
          f"Law in the tables: `{law}`. Cells are mean ± SD over seeds; `n` is the number of "
          "seeds. `method + fantasize` = the same runs with the law fitted on observed + "
          "surrogate-filled losses. " + describe_environments(full.attrs[ENVIRONMENTS_ATTR]), ""]
    data_notes = full.attrs.get(NOTES_ATTR, {})
    if data_notes:  # excluded rows, crashed configurations: they qualify every number below
        md += ["## Notes on the data (from the records)", ""]
        md += [f"- {ds}: {note}" for ds, notes in data_notes.items() for note in notes]
        md += [""]
    orc, caption = None, ["Floor-oracle rows not computed (`--no-oracle`).", ""]
    if oracle:
        orc, caption = report_oracle(records_dir, frame, data_dir, law)
    heads = headline_keys(frame)  # each dataset's smallest target: its oracle rows, calibration
    if gaps := headline_gaps(frame, heads):  # one label's records under other targets
        warnings.warn("; ".join(gaps), RecordWarning, stacklevel=2)
        md += [f"Not at the headline target: {'; '.join(gaps)}.", ""]
    keys = target_keys(frame)
    first = next((k for k in keys if k in set(heads.values())), keys[0])  # caption's table
    for C in keys:
        rows = None if orc is None else orc.summary[orc.summary["dataset"].map(heads) == C]
        md += [f"## |Relative extrapolation error| (%) at {shown_key(C)} FLOPs", "",
               extrapolation_table(summary, C, law, rows), *(caption if C == first else [])]
    calibration_md, iv = calibration_section(frame, heads)
    md += calibration_md
    md += [f"## Compute saved to reach ≤ {threshold_pct:g} % error at {target_label(heads)}", "",
           savings_table(summary, threshold_pct, heads, law=law),
           "## Fitted law coefficients (mean ± SD)", "", coefficient_table(summary, law),
           CONVERGED_HEADING, "", converged_table(summary, law),
           "## Envelope recovery (% of reference envelope configs observed)", "",
           _run_table(summary, "envelope_recovery_pct"),
           "## Per-cell recovery (% of cells whose best config was observed)", "",
           _run_table(summary, "cell_recovery_pct"),
           "## Compute spent (fraction of C_total)", "",
           _run_table(summary, "spent_fraction", 4)]
    failed = summary[(summary["kind"] == "run") & (summary["metric"] == "n_failed")]
    if (failed["mean"] > 0).any():  # datasets with diverged_above: what they bought in vain
        md += ["## Failed runs bought (diverged configurations; compute spent, no loss)", "",
               _run_table(summary, "n_failed")]
    if figures:
        fig_dir.mkdir(parents=True, exist_ok=True)
        md += ["## Figures", ""]
        for ds in dict.fromkeys(frame["dataset"]):
            methods = list(dict.fromkeys(frame.loc[frame["dataset"] == ds, "method"]))
            p = recovery_figure(summary, ds, methods, fig_dir / f"recovery_{ds}.png", law,
                                heads[ds])
            md += [f"![{ds} recovery]({p.relative_to(out).as_posix()})", "", FIGURE_NOTE, ""]
        p = calibration_figure(iv, fig_dir / "calibration.png", heads)
        if p is not None:
            md += [f"![law posterior calibration]({p.relative_to(out).as_posix()})", ""]
        for param in COMPARED:
            for i, group in enumerate(comparison_groups(frame, param)):
                p = comparison_figure(summary, group, param,
                                      fig_dir / f"compare_{param}_{i}.png", law, heads)
                md += [f"![{param} comparison]({p.relative_to(out).as_posix()})", "",
                       FIGURE_NOTE, ""]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.md"
    write_text_file(path, "\n".join(md))
    return path
