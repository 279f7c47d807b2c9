"""Calibration of the law posterior over a sweep's records (DESIGN.md, "Law posterior").

Each record's ``result.metrics.law_posterior[law]`` holds the quantiles of the predicted
loss (nats) at every extrapolation compute and the reference law's loss there
(``reference_loss``). Read back by :func:`scalebo.bench.records.load_records` they are the
``run`` rows ``law_posterior.<law>.predicted_loss.<C>.<q>`` and
``law_posterior.<law>.reference_loss.<C>``. For one compute ``C`` (default 1e25 FLOPs):

* **coverage**: the fraction of replays whose interval contains the reference loss — the
  80 % interval is q10–q90, the 95 % one q02.5–q97.5. An interval *covers* when
  ``|ref − interval| ≤ rtol · ref`` with ``rtol =`` :data:`COVER_RTOL` (1e-6), i.e. the
  reference lies inside it or within a relative 1e-6 of an end: at large budgets the
  posterior can collapse onto the point fit, which then equals the reference to 1e-6, and
  such a zero-width interval is right, not wrong. Coverage is recomputed here from the
  quantiles; the records' own ``covered`` flags are not used (older records compared
  strictly);
* **sharpness**: the median relative width of the 80 % interval, ``100·(q90 − q10)/ref``,
  in % of the reference loss;
* ``n``: replays (seeds) with an interval and a reference; ``missing``: cells of the group
  without one (posterior not computed, every sample fit failed, or no reference), counted in
  the tables (``+k without``) for methods that have a law posterior at all.

The project's target (:data:`TARGETS`): pooled over datasets × seeds × budgets, the 80 %
interval covers in 70–90 % of replays and the 95 % interval in 88–99 %. Pooled coverages
come with a 95 % Wilson score interval of the binomial proportion, so that a handful of
seeds is not read as a verdict.

Not computed here: the bootstrap over observed runs (``scalebo fit --bootstrap``); the hook
:func:`bootstrap_calibration` reads one only if the records carry one (else None)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from scalebo.bench.targets import target_label
from scalebo.search.law_posterior import COVER_RTOL, covers  # COVER_RTOL, covers: public here

__all__ = ["BOOTSTRAP_SOURCE", "COVER_RTOL", "LEVELS", "TARGETS", "bootstrap_calibration",
           "calibration_section", "calibration_summary", "calibration_table", "covers",
           "intervals", "pooled_table", "wilson_interval"]

#: Widths (%) below this are drawn at it in the figure (a log axis over 12 decades of
#: rounding-level widths would hide the ones that matter) and print as 0.00 in the tables;
#: the report's error figures use the same floor (``bench.report.ERROR_FLOOR_PCT``).
WIDTH_FLOOR_PCT = 1e-3
#: Nominal level (%) → (lower, upper) quantile keys of the law posterior summary.
LEVELS: Mapping[str, tuple[str, str]] = {"80": ("q10", "q90"), "95": ("q02.5", "q97.5")}
#: Nominal level (%) → target range of the pooled coverage (fractions).
TARGETS: Mapping[str, tuple[float, float]] = {"80": (0.70, 0.90), "95": (0.88, 0.99)}
#: ``result.metrics`` entry that :func:`bootstrap_calibration` reads when a sweep records it.
BOOTSTRAP_SOURCE = "observed_bootstrap"
_GROUP = ["dataset", "method", "law", "budget"]


def _law_order(law: str) -> tuple[int, str]:
    """Sort key of law names: ``compute``, ``chinchilla``, then the others."""
    return ({"compute": 0, "chinchilla": 1}.get(law, 2), law)


def intervals(frame: pd.DataFrame, C: str | Mapping[str, str] = "1e+25",
              rtol: float = COVER_RTOL, *, source: str = "law_posterior") -> pd.DataFrame:
    """One row per ok cell × law of the records' intervals at compute key ``C``.

    Args:
        frame: Tidy records (:func:`~scalebo.bench.records.load_records`).
        C: Extrapolation key (``"1e+25"``, ``"1e+27"``, ``"1e+29"``), or one per dataset
            (``{dataset: key}``, e.g. each one's headline target,
            :func:`~scalebo.bench.targets.headline_keys`;
            datasets not in it are left out).
        rtol: Coverage tolerance (see :func:`covers`).
        source: Entry of ``result.metrics`` holding ``{law: {"predicted_loss": …,
            "reference_loss": …}}`` (default the law posterior).

    Returns:
        Columns ``key, dataset, method, seed, budget, law``, the quantiles ``q02.5, q10,
        q90, q97.5`` and ``reference`` (nats; NaN when missing), ``ok`` (interval and
        reference finite), ``covered_80``, ``covered_95`` (bool, with tolerance),
        ``strict_80``, ``strict_95`` (without it) and ``width_80_pct``
        (``100·(q90 − q10)/reference``, %).
    """
    cols = ["key", "dataset", "method", "seed", "budget", "law", "q02.5", "q10", "q90",
            "q97.5", "reference", "ok", "covered_80", "covered_95", "strict_80", "strict_95",
            "width_80_pct"]
    if not isinstance(C, str):  # each dataset at its own key, in the frame's order
        parts = [intervals(frame[frame["dataset"] == ds], C[ds], rtol, source=source)
                 for ds in dict.fromkeys(frame["dataset"]) if ds in C]
        parts = [p for p in parts if len(p)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
    prefix = f"{source}."
    sub = frame[(frame["status"] == "ok") & (frame["kind"] == "run")
                & frame["metric"].astype(str).str.startswith(prefix)]
    rest = sub["metric"].str.slice(len(prefix))
    law = rest.str.split(".", n=1).str[0]
    field = rest.str.split(".", n=1).str[1]
    names = {f"predicted_loss.{C}.{q}": q for q in ("q02.5", "q10", "q90", "q97.5")}
    names[f"reference_loss.{C}"] = "reference"
    what = field.map(names)
    sub = sub.assign(law=law, what=what)[what.notna()]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    ident = ["key", "dataset", "method", "seed", "budget"]
    wide = sub.groupby(["key", "law", "what"], sort=False)["value"].first().unstack("what")
    # Every ok cell × every law seen: a cell without a posterior counts as missing.
    cells = frame.loc[frame["status"] == "ok", ident].drop_duplicates("key")
    laws = pd.DataFrame({"law": sorted(wide.index.get_level_values("law").unique(),
                                       key=_law_order)})
    wide = cells.merge(laws, how="cross").merge(wide.reset_index(), on=["key", "law"],
                                                how="left")
    for q in ("q02.5", "q10", "q90", "q97.5", "reference"):
        if q not in wide:
            wide[q] = np.nan
    ref = wide["reference"].to_numpy(dtype=np.float64)
    quant = wide[["q02.5", "q10", "q90", "q97.5"]].to_numpy(dtype=np.float64)
    wide["ok"] = np.isfinite(quant).all(axis=1) & np.isfinite(ref) & (ref > 0)
    for level, (lo, hi) in LEVELS.items():
        a, b = wide[lo].to_numpy(np.float64), wide[hi].to_numpy(np.float64)
        wide[f"covered_{level}"] = covers(a, b, ref, rtol) & wide["ok"]
        wide[f"strict_{level}"] = covers(a, b, ref, 0.0) & wide["ok"]
    with np.errstate(invalid="ignore", divide="ignore"):
        wide["width_80_pct"] = np.where(wide["ok"], 100.0 * (wide["q90"] - wide["q10"]) / ref,
                                        np.nan)
    rank = {"dataset": {d: i for i, d in enumerate(dict.fromkeys(frame["dataset"]))},
            "method": {m: i for i, m in enumerate(dict.fromkeys(frame["method"]))},
            "law": {w: i for i, w in enumerate(laws["law"])}}

    def key(col: pd.Series) -> pd.Series:
        return col.map(rank[str(col.name)]) if col.name in rank else col

    wide = wide.sort_values(["dataset", "method", "law", "budget", "seed"], key=key,
                            kind="stable", ignore_index=True)
    return wide[cols]


def _agg(rows: pd.DataFrame) -> dict[str, float]:
    ok = rows[rows["ok"].astype(bool)]
    n = len(ok)
    return {"coverage_80": float(ok["covered_80"].mean()) if n else math.nan,
            "coverage_95": float(ok["covered_95"].mean()) if n else math.nan,
            "median_width_80_pct": float(ok["width_80_pct"].median()) if n else math.nan,
            "n": n, "missing": int(len(rows) - n),
            "tolerance_only": int((ok["covered_80"] & ~ok["strict_80"]).sum()
                                  + (ok["covered_95"] & ~ok["strict_95"]).sum())}


def calibration_summary(iv: pd.DataFrame, pooled: bool = False) -> pd.DataFrame:
    """Coverage (fractions), median 80 % width (%) and counts per group of :func:`intervals`.

    Groups: ``dataset, method, law, budget``; with ``pooled`` per ``method, law`` over every
    dataset, seed and budget. Columns ``coverage_80, coverage_95, median_width_80_pct``
    (NaN without an interval), ``n`` (replays with an interval), ``missing`` (without) and
    ``tolerance_only`` (80 % and 95 % intervals that cover only within :data:`COVER_RTOL`).
    """
    keys = ["method", "law"] if pooled else _GROUP
    if iv.empty:
        return pd.DataFrame(columns=[*keys, "coverage_80", "coverage_95",
                                     "median_width_80_pct", "n", "missing", "tolerance_only"])
    out = [{**dict(zip(keys, k, strict=True)), **_agg(g)}
           for k, g in iv.groupby(keys, sort=False)]
    return pd.DataFrame(out)


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion ``k/n`` (fractions); NaNs if n = 0."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def _pct(x: float, digits: int = 0) -> str:
    return "–" if not math.isfinite(x) else f"{100 * x:.{digits}f} %"


def _width(x: float) -> str:
    """Table text of a width in %: ``0.00`` below :data:`WIDTH_FLOOR_PCT`, 3 digits below 0.01."""
    if not math.isfinite(x):
        return "–"
    return "0.00" if x < WIDTH_FLOOR_PCT else (f"{x:.3g}" if x < 0.01 else f"{x:.2f}")


def calibration_table(iv: pd.DataFrame) -> str:
    """Markdown: rows dataset × method × law × budget; 80 %/95 % coverage, median 80 % width
    (% of the reference loss), n (and missing replays, when any)."""
    # a budget whose every replay lacks an interval stays, for a method × law drawn at all
    drawn = iv.loc[iv["ok"].astype(bool), ["method", "law"]].drop_duplicates()
    s = calibration_summary(iv).merge(drawn, on=["method", "law"])
    if s.empty:
        return "_no law posterior in the records_\n"
    lines = ["| dataset | method | law | budget | 80 % coverage | 95 % coverage | "
             "median 80 % width (% of ref) | n |", "|---|---|---|---|---|---|---|---|"]
    for r in s.itertuples():
        n = f"{r.n}" + (f" (+{r.missing} without)" if r.missing else "")
        lines.append(f"| {r.dataset} | {r.method} | {r.law} | {100 * r.budget:g} % | "
                     f"{_pct(r.coverage_80)} | {_pct(r.coverage_95)} | "
                     f"{_width(r.median_width_80_pct)} | {n} |")
    return "\n".join(lines) + "\n"


def _verdict(k: int, n: int, level: str) -> str:
    lo, hi = TARGETS[level]  # outside the band, but the Wilson interval may still reach it
    p, (c_lo, c_hi) = k / n, wilson_interval(k, n)
    reach = ", but its 95 % CI reaches the target: too few replays to tell"  # not a verdict
    return "in target" if lo <= p <= hi else (
        ("below" if p < lo else "above") + (reach if c_hi >= lo and c_lo <= hi else ""))


def pooled_table(iv: pd.DataFrame) -> str:
    """Markdown: per method × law, coverage pooled over datasets × seeds × budgets, with its
    95 % Wilson interval, the target range and whether it is met."""
    if iv.empty or not iv["ok"].astype(bool).any():
        return "_no law posterior in the records_\n"
    t80, t95 = (f"{100 * a:g}–{100 * b:g} %" for a, b in (TARGETS["80"], TARGETS["95"]))
    lines = [f"| method | law | 80 % coverage [95 % CI] | target {t80} | "
             f"95 % coverage [95 % CI] | target {t95} | median 80 % width (% of ref) | n |",
             "|---|---|---|---|---|---|---|---|"]
    for (method, law), every in iv.groupby(["method", "law"], sort=False):
        g = every[every["ok"].astype(bool)]
        n, cells, missing = len(g), [], len(every) - len(g)
        if not n:
            continue  # a method × law never drawn (as in calibration_table)
        for level in LEVELS:
            k = int(g[f"covered_{level}"].sum())
            lo, hi = wilson_interval(k, n)
            cells += [f"{_pct(k / n)} [{_pct(lo)}, {_pct(hi)}]", _verdict(k, n, level)]
        lines.append(f"| {method} | {law} | " + " | ".join(cells)
                     + f" | {_width(float(g['width_80_pct'].median()))} | {n}"
                     + (f" (+{missing} without) |" if missing else " |"))
    return "\n".join(lines) + "\n"


def bootstrap_calibration(frame: pd.DataFrame, C: str | Mapping[str, str] = "1e+25",
                          rtol: float = COVER_RTOL) -> pd.DataFrame | None:
    """Hook: calibration of the bootstrap over observed runs (``scalebo fit --bootstrap``,
    :func:`scalebo.fitting.bootstrap.bootstrap_fit`) beside the law posterior's.

    The report never refits a bootstrap (it would rerun every cell's fits). When the
    records carry one as ``result.metrics.<BOOTSTRAP_SOURCE>`` (laid out like the law
    posterior: ``{law: {"predicted_loss": …, "reference_loss": …}}``) this returns its
    :func:`intervals`; otherwise None, and the report says that it is not compared.
    """
    iv = intervals(frame, C, rtol, source=BOOTSTRAP_SOURCE)
    return iv if len(iv) and bool(iv["ok"].any()) else None


def calibration_section(frame: pd.DataFrame, C: str | Mapping[str, str] = "1e+25",
                        rtol: float = COVER_RTOL) -> tuple[list[str], pd.DataFrame]:
    """Markdown lines of the report's calibration section and the :func:`intervals` behind
    them (for :func:`~scalebo.bench.calibration_plot.calibration_figure`); ``C`` as in
    :func:`intervals`."""
    iv = intervals(frame, C, rtol)
    at = target_label(C)
    t80, t95 = (f"{100 * a:g}–{100 * b:g} %" for a, b in (TARGETS["80"], TARGETS["95"]))
    ok = iv[iv["ok"].astype(bool)] if not iv.empty else iv
    no_post = sorted(set(iv["method"]) - set(ok["method"])) if not iv.empty else []
    tol_only = int(calibration_summary(iv, pooled=True)["tolerance_only"].sum()) if len(iv) else 0
    tol_note = f" ({tol_only} intervals here cover only within it)" if tol_only else ""
    md = [f"## Calibration of the law posterior at {at}", "",
          f"Fraction of replays (seeds) whose law-posterior interval for the loss at {at} "
          "covers the reference law's loss there: the 80 % interval is q10–q90, the 95 % one "
          "q02.5–q97.5. An interval counts as covering when the reference lies inside it or "
          f"within a relative {rtol:g} of an end (`|ref − interval| ≤ {rtol:g}·ref`): at "
          "large budgets the posterior can collapse onto the point fit, which then equals the "
          f"reference{tol_note}. Width: median over seeds of 100·(q90 − q10)/ref, % of the "
          "reference loss. `n`: replays with an interval (`+k without`: posterior missing or "
          "every sample failed). Coverage is of the whole grid's law, not of a true one: a "
          "grid whose reference is far from the truth (its envelope beyond its largest runs) "
          "can be covered here and missed there."
          + (f" Methods without a law posterior: {', '.join(no_post)}." if no_post else ""), "",
          calibration_table(iv),
          f"### Pooled over datasets × seeds × budgets (target: 80 % coverage in {t80}, "
          f"95 % coverage in {t95})", "",
          "Coverage with its 95 % Wilson score interval over the pooled replays.", "",
          pooled_table(iv)]
    boot = bootstrap_calibration(frame, C, rtol)
    if boot is None:
        md += ["_The bootstrap over observed runs (`scalebo fit --bootstrap`) is not in the "
               "records and is not compared here (hook: "
               "`scalebo.bench.calibration.bootstrap_calibration`)._", ""]
    else:
        md += ["### Beside it: bootstrap over observed runs (as recorded), pooled", "",
               pooled_table(boot)]
    return md, iv
