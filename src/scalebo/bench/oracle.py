"""Floor oracles: planners that already know the answer (DESIGN.md, "The compute floor").

Three oracles buy configurations that only someone who had trained the
whole grid could name, and stop when the next one no longer fits in the budget (the same
admissibility rule as a replay: ``cost ≤ budget − spent``, relative slack
:data:`~scalebo.search.window.COST_RTOL`):

* ``kind="envelope"``: the reference Pareto envelope's configurations
  (``problem.envelope_idx``); with the whole envelope affordable it spends exactly the
  envelope floor ``problem.floor_envelope`` and refits the reference compute law exactly;
* ``kind="cells"``: every acquirable (N, D) cell's best configuration
  (``problem.cell_best_idx``), whose cost is the per-cell floor ``problem.floor_cells``;
* ``kind="anchored"``: the reference envelope's configurations again, but first the
  costliest one that fits the budget (the anchor: a compute law is extrapolated from its
  largest-compute points), then the others cheapest first. It equals ``"envelope"`` once
  the whole envelope fits. Cheapest first is a poor plan when it does not: on
  OELLM-English at 1 % of C_total (the envelope costs 2.24 %) cheapest first is 6.41 % off
  at 1e25 FLOPs, the anchored plan (N = 1.7B at 120B tokens, 0.58 %, and 14 cheap
  configurations) 0.41 %, so a search's distance to the cheapest-first row understates
  what a planner could reach.

Their runs are scored with the replays' own metrics
(:func:`scalebo.bench.metrics.evaluate`, observed runs only: no fantasization, no law
posterior), so an oracle row in a report is the error a method would have if its search
were perfect and its only loss of information were the budget. A budget below the cheapest
such configuration trains nothing, and every law fit is recorded as failed.

:func:`oracle_summary` evaluates every oracle for the datasets and budgets of a report, in
the layout of :func:`scalebo.bench.report.summarize`, and says which datasets could not be
loaded.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scalebo.bench.metrics import LAWS, BudgetMetrics, c_key, evaluate
from scalebo.bench.problems import ReplayProblem
from scalebo.bench.targets import shown_key
from scalebo.errors import DataDirError, ScaleboError
from scalebo.search.window import COST_RTOL

__all__ = ["ORACLE_KINDS", "ORACLE_LABELS", "OracleSummary", "floor_oracle",
           "oracle_indices", "oracle_summary", "report_oracle"]

#: Oracle kinds accepted by :func:`floor_oracle`.
ORACLE_KINDS: tuple[str, ...] = ("envelope", "anchored", "cells")
#: Row label of each oracle kind in the report's tables.
ORACLE_LABELS: Mapping[str, str] = {"envelope": "oracle: envelope",
                                    "anchored": "oracle: envelope, costliest first",
                                    "cells": "oracle: cell bests"}


def oracle_indices(problem: ReplayProblem, budget: float, kind: str = "envelope") -> np.ndarray:
    """Grid rows the ``kind`` oracle trains under ``budget`` (fraction of ``C_total``).

    The oracle's configurations sorted by cost (stable: ties keep the problem's order),
    kept while their cumulative cost is ≤ ``budget · C_total`` (FLOPs, relative slack
    ``COST_RTOL``); for ``"anchored"`` the costliest envelope configuration that fits is
    taken first and the rest of the budget is spent that way. Shape ``(n,)``, increasing
    cost, possibly empty.
    """
    if kind not in ORACLE_KINDS:
        raise ValueError(f"unknown oracle kind {kind!r}; expected one of {list(ORACLE_KINDS)}")
    if not budget >= 0:
        raise ValueError(f"budget must be a fraction >= 0 of C_total, got {budget!r}")
    rows = problem.cell_best_idx if kind == "cells" else problem.envelope_idx
    rows = np.asarray(rows, dtype=np.int64)
    cost = problem.grid.cost
    rows = rows[np.argsort(cost[rows], kind="stable")]
    room = budget * problem.C_total * (1 + COST_RTOL)
    anchor = rows[:0]
    if kind == "anchored":
        fits = np.flatnonzero(cost[rows] <= room)
        if fits.size:
            anchor = rows[fits[-1:]]  # the costliest that fits (the last, on ties)
            room -= float(cost[anchor[0]])
            rows = np.delete(rows, fits[-1])
    n = int(np.searchsorted(np.cumsum(cost[rows]), room, side="right"))
    out = np.concatenate([rows[:n], anchor])
    return out[np.argsort(cost[out], kind="stable")]


def floor_oracle(problem: ReplayProblem, budget: float, kind: str = "envelope", *,
                 laws: Sequence[str] = LAWS) -> BudgetMetrics:
    """Metrics of the ``kind`` oracle (one of :data:`ORACLE_KINDS`) at ``budget``.

    Args:
        problem: The replay problem (its reference envelope and cell bests are the answer).
        budget: Budget, fraction of ``C_total``.
        kind: ``"envelope"`` (the reference envelope's configurations), ``"anchored"``
            (the same, the costliest that fits first) or ``"cells"`` (each acquirable
            cell's best configuration); otherwise bought cheapest first.
        laws: Laws to refit (default both).

    Returns:
        :func:`~scalebo.bench.metrics.evaluate` of the oracle's runs, observed only.
    """
    return evaluate(problem, oracle_indices(problem, budget, kind), budget=budget, laws=laws)


@dataclass(frozen=True)
class OracleSummary:
    """Oracle metrics of a report's datasets and budgets.

    Attributes:
        summary: Rows like :func:`scalebo.bench.report.summarize` — ``dataset``, ``method``
            (an :data:`ORACLE_LABELS` value), ``kind`` (``"oracle"``), ``metric`` (the
            observed law metrics, e.g. ``compute.extrapolation_pct.1e+25``, and the run
            quantities ``n_runs``, ``spent_fraction``), ``budget``, ``mean`` (the value;
            NaN for a failed fit), ``sd`` (0: an oracle is deterministic) and ``n`` (1).
        skipped: ``(dataset, reason)`` of each dataset that could not be loaded.
        data_dir_missing: Some were skipped because the public datasets folder was not
            given or lacks their files (:class:`~scalebo.errors.DataDirError`).
        floors: ``(dataset, floor_envelope, floor_cells, held_out_share)`` of each loaded
            dataset: fractions of ``C_total`` (the spend of each oracle once all its
            configurations fit), and the share of the whole grid's compute that its held-out
            cells hold (``C_total`` leaves them out).
        spreads: ``(dataset, ReferenceSpread or None)``: how sure each reference law is at
            its headline target (:mod:`scalebo.bench.targets`, default 1e25 FLOPs;
            :mod:`scalebo.bench.reference_spread`).
    """

    summary: pd.DataFrame
    skipped: tuple[tuple[str, str], ...] = ()
    floors: tuple[tuple[str, float, float, float], ...] = ()
    data_dir_missing: bool = False
    spreads: tuple[tuple[str, Any], ...] = ()


def _rows(dataset: str, label: str, m: BudgetMetrics, targets: tuple[float, ...]
          ) -> list[dict]:
    values: dict[str, float | None] = {"n_runs": m.n_runs, "spent_fraction": m.spent_fraction}
    for law, lm in m.observed.items():
        values[f"{law}.ok"] = float(lm.ok)
        extra = lm.extrapolation_pct or {}
        for c in map(c_key, targets):  # NaN: no fit (or no compute-optimal path)
            values[f"{law}.extrapolation_pct.{c}"] = abs(extra[c]) if c in extra else None
    return [{"dataset": dataset, "method": label, "kind": "oracle", "metric": k,
             "budget": float(m.budget), "mean": np.nan if v is None else float(v), "sd": 0.0,
             "n": 1} for k, v in values.items()]


def oracle_summary(datasets: Mapping[str, tuple[str, Mapping]], budgets: Sequence[float], *,
                   data_dir: str | os.PathLike[str] | None = None,
                   laws: Sequence[str] = ("compute",)) -> OracleSummary:
    """Every oracle on every dataset at every budget.

    Args:
        datasets: ``{name: (source, options)}`` as in the records' cells (``source`` is what
            :func:`~scalebo.bench.problems.load_problem` loads, ``options`` its keywords).
        budgets: Budgets, fractions of ``C_total``.
        data_dir: Public datasets folder (default ``$SCALEBO_DATA_DIR``).
        laws: Laws to refit (the report's law).

    A dataset that cannot be loaded (e.g. ``SCALEBO_DATA_DIR`` unset, an unknown name) is
    skipped and named in :attr:`OracleSummary.skipped` with the error.
    """
    from scalebo.bench.problems import load_problem
    from scalebo.bench.reference_spread import reference_spread
    from scalebo.bench.targets import headline

    rows: list[dict] = []
    skipped: list[tuple[str, str]] = []
    floors: list[tuple[str, float, float, float]] = []
    spreads: list[tuple[str, Any]] = []
    data_dir_missing = False
    for name, (source, options) in datasets.items():
        kwargs = dict(options or {})
        if data_dir is not None:
            kwargs.setdefault("data_dir", str(data_dir))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                problem = load_problem(source, **kwargs)
        except (OSError, ValueError, TypeError, KeyError, ScaleboError) as exc:
            skipped.append((name, f"{type(exc).__name__}: {exc}"))
            data_dir_missing |= isinstance(exc, DataDirError)
            continue
        floors.append((name, problem.floor_envelope, problem.floor_cells,
                       problem.grid.held_out_share))
        spreads.append((name, reference_spread(problem, headline(problem.targets))))
        for kind in ORACLE_KINDS:
            for b in sorted(set(budgets)):
                rows += _rows(name, ORACLE_LABELS[kind],
                              floor_oracle(problem, b, kind, laws=laws), problem.targets)
    cols = ["dataset", "method", "kind", "metric", "budget", "mean", "sd", "n"]
    return OracleSummary(pd.DataFrame(rows, columns=cols), tuple(skipped), tuple(floors),
                         data_dir_missing, tuple(spreads))


def report_oracle(records_dir: str | os.PathLike[str], frame: pd.DataFrame,
                  data_dir: str | os.PathLike[str] | None = None, law: str = "compute"
                  ) -> tuple[OracleSummary, list[str]]:
    """:func:`oracle_summary` of a record directory and the Markdown caption of its rows.

    Args:
        records_dir: Record directory; each dataset's ``source`` and ``options`` are read
            from its records' cells.
        frame: Its ok rows (:func:`~scalebo.bench.records.load_records`): the datasets and
            budgets to evaluate.
        data_dir: Public datasets folder (default ``$SCALEBO_DATA_DIR``).
        law: The report's law.
    """
    from scalebo.bench.records import scan_records

    names = set(frame["dataset"])
    # from the records the tables use: a failed record of an earlier config in the same
    # folder (e.g. before a column mapping was added) must not decide how to load the data
    keys = set(frame["key"])  # the report's records: not those of an older config
    specs = {c["dataset"]["name"]: (c["dataset"]["source"], c["dataset"].get("options") or {})
             for c in (r["cell"] for r in scan_records(records_dir)[0] if r["key"] in keys)
             if c["dataset"]["name"] in names}
    specs = dict(sorted(specs.items()))  # the report's order, not the record files' order
    orc = oracle_summary(specs, sorted(frame["budget"].unique()), data_dir=data_dir,
                         laws=(law,))
    text = (f"Rows `{ORACLE_LABELS['envelope']}` / `{ORACLE_LABELS['cells']}` (floor "
            "oracles): a planner that already knew the answer trains the reference envelope's "
            "configurations / each cell's best configuration, cheapest first while they fit "
            f"in the budget; `{ORACLE_LABELS['anchored']}` trains the costliest envelope "
            "configuration that fits first, then the others cheapest first (the same runs "
            "once the envelope fits); the law is fitted on these observed runs; one "
            "deterministic value per budget (`no fit`: too few runs for a fit).")
    if orc.floors:
        text += " Their full cost (envelope / cell-best floor, % of C_total): " + "; ".join(
            f"{d} {100 * e:.2f} / {100 * c:.2f}" for d, e, c, _ in orc.floors) + "."
        if held := [(d, h) for d, _, _, h in orc.floors if h > 0]:
            text += (" Budgets and savings are fractions of `C_total`, which leaves out each "
                     "grid's held-out cells (scored by `heldout_mse`): they hold " + "; ".join(
                         f"{100 * h:.3g} % of {d}'s compute" for d, h in held) + ".")
    if known := [(d, s) for d, s in orc.spreads if s is not None]:
        text += (" The reference compute law a replay is scored against is itself uncertain: its "
                 "80 % bootstrap interval over its envelope runs at the headline target is ±"
                 + "; ±".join(f"{s.half_width_pct:.1f} % ({d}, {s.n_points} runs, at "
                              f"{shown_key(c_key(s.C))} FLOPs)" for d, s in known)
                 + " of its prediction, so an error below that is agreement with the whole "
                 "grid's law, not accuracy against the truth.")
        if law != "compute":
            text += (f" That spread is the compute law's; this report's {law} reference is "
                     "not bootstrapped, and its errors are against that one fit.")
    if orc.skipped:
        text += (" No oracle rows for " + "; ".join(f"{d} (cannot load it: {why})"
                                                   for d, why in orc.skipped) + ".")
        if orc.data_dir_missing:
            text += " Set `SCALEBO_DATA_DIR` or pass `data_dir`."
    return orc, [text, ""]
