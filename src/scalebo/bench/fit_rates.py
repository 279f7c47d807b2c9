"""The report's table of how often a law's fit converged, per dataset × variant × budget.

A replay's law fit that hit a parameter bound, ran out of iterations, is not identified by
its points or failed still has numbers in the error and coefficient tables (a bound hit's
``E`` is its bound); this table says how many seeds' fits behind each cell of those tables
converged (``<law>.converged_pct`` of :func:`scalebo.bench.records.load_records`).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["CONVERGED_HEADING", "converged_table"]

CONVERGED_HEADING = ("## Fits that converged (seeds; the others hit a bound, did not converge, "
                     "are not identified or failed, and still count in the tables above)")


def converged_table(summary: pd.DataFrame, law: str = "compute") -> str:
    """Markdown: rows dataset × variant, columns budgets, cells ``converged / seeds`` of the
    law's fits (``summary`` from :func:`scalebo.bench.report.summarize`)."""
    from scalebo.bench.report import _budget_label, _label  # report imports this module

    sub = summary[summary["metric"] == f"{law}.converged_pct"]
    if sub.empty:
        return "_no data_\n"
    budgets = sorted(sub["budget"].unique())
    lines = ["| dataset | method | " + " | ".join(map(_budget_label, budgets)) + " |",
             "|---|---|" + "---|" * len(budgets)]
    for (ds, method, kind), rows in sub.groupby(["dataset", "method", "kind"], sort=False):
        by_b = {r.budget: r for r in rows.itertuples()}
        cells = [f"{round(by_b[b].mean * by_b[b].n / 100)} / {int(by_b[b].n)}" if b in by_b
                 else "–" for b in budgets]
        lines.append(f"| {ds} | {_label(method, kind)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
