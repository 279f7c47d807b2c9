"""Propose mode of ``scalebo design`` (``--runs``, ``--budget``): fit the runs done, pick
the next pool rows, report the fit and the target region's prediction. The options and the
replay mode are in :mod:`scalebo.cli.design`."""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING, Any

from scalebo.cli.common import log

if TYPE_CHECKING:
    import pandas as pd

    from scalebo.design import DoneFit, TargetRegion
    from scalebo.errors import BudgetExhausted
    from scalebo.laws.formula import FormulaLaw

__all__ = ["EXACT_FIT_FACTOR", "TABLE_KEYS", "group_labels", "propose", "table_names"]

#: the proposal table's own columns (``group`` with groups), around the pool's
TABLE_KEYS = ("data_row", "group", "cost_fraction", "mean", "design_lo80", "design_hi80")

#: a design noise sd this many times the fit's residual sd or more: the residual is
#: rounding (the fit passes through the runs done), and the legend says so, not the factor
EXACT_FIT_FACTOR = 1e4


def group_labels(frame: pd.DataFrame, column: str, source: str,
                 pool_note: str = "") -> list[str]:
    """The group label (as text) of every row of ``frame``, or a ValueError naming the file,
    the column and the data row."""
    if column not in frame.columns:
        raise ValueError(f"{source}: no group column {column!r}{pool_note}; columns: "
                         f"{list(frame.columns)}")
    missing = frame[column].isna().to_numpy().nonzero()[0]
    if missing.size:
        raise ValueError(f"{source}: data row {missing[0] + 1}, column {column!r}: no group "
                         "value")
    return frame[column].astype(str).tolist()


def table_names(shown: list[str], grouped: bool, source: str) -> dict[str, str]:
    """``{pool column: its name in the proposal table}``: its own name, but ``pool_<name>``
    (``pool_pool_<name>``, … when that is taken too) for a column named as one of the
    table's own (:data:`TABLE_KEYS`, ``group`` with groups), which it would overwrite; a
    warning names the renamed columns (the JSON's ``columns`` keep the pool's names)."""
    own = {k for k in TABLE_KEYS if grouped or k != "group"}
    taken = own | set(shown)
    out: dict[str, str] = {}
    for c in shown:
        name = c
        while name in own or (name != c and name in taken):
            name = f"pool_{name}"
        taken.add(name)
        out[c] = name
    if moved := {c: n for c, n in out.items() if c != n}:
        warnings.warn(f"{source}: column{'s' if len(moved) > 1 else ''} "
                      f"{', '.join(map(repr, moved))} share{'' if len(moved) > 1 else 's'} a "
                      "name with the proposal table's own columns; shown as "
                      f"{', '.join(map(repr, moved.values()))} (the JSON's columns keep the "
                      "pool's names)", UserWarning, stacklevel=3)
    return out


def _log_target(preds: list[dict]) -> None:
    """One line on the target region: predicted range and the median 80 % width."""
    widths = [p["hi80"] - p["lo80"] for p in preds if p["lo80"] is not None]
    means = [p["mean"] for p in preds if p["mean"] is not None]
    if means:
        width = (f", median 80 % interval width {sorted(widths)[len(widths) // 2]:.4g}"
                 if widths else ", no interval (no more runs than parameters)")
        log(f"target region ({len(means)} rows): predicted {min(means):.4g} to "
            f"{max(means):.4g}{width} (JSON: target_prediction)")


def _report_fits(fits: tuple[DoneFit, ...]) -> None:
    """One line per fit of the runs done (status, message, parameters), as a replay reports
    its checkpoints' fits; a warning for a fit the runs done do not identify."""
    for f in fits:
        of = "" if f.group is None else f" of group {f.group!r}"
        runs = f"{f.n_runs} run{'' if f.n_runs == 1 else 's'} done{of}"
        if not f.params:
            log(f"fit of the {runs}: {f.status} ({f.message})")
            continue
        shown = ", ".join(f"{k}={v:.6g}" for k, v in f.params.items())
        log(f"fit of the {runs}: {f.status} ({f.message}): {shown} (JSON: fit)")
        if not f.identified:
            warnings.warn(f"the runs done{of} do not identify the law: {f.message}; the "
                          "proposals and target predictions rest on parameters these runs "
                          "cannot tell apart (run rows that vary what it names)",
                          UserWarning, stacklevel=3)


def _log_band_legend(props: tuple) -> None:
    """What the table's ``design_lo80``/``design_hi80`` are, with the noise factor of the
    design's posterior (a trial read them as a Laplace interval 20–40× too wide); when the
    fit passes through the runs done (residual sd ~0, a factor of 1e10 on noise-free runs),
    that is said in place of the factor."""
    factors = sorted({round(p.noise_factor, 3) for p in props if p.noise_factor is not None})
    if not factors:
        return
    fitted = [f for f in factors if f < EXACT_FIT_FACTOR]
    exact = ("the fit passes through the runs done (residual sd ~0, under 1/"
             f"{EXACT_FIT_FACTOR:.0f} of the band's noise sd: JSON noise_factor is no useful "
             "ratio)")
    if not fitted:
        sd = f"ScaleBench's estimate from the response's spread alone, as {exact}"
    else:
        f = (f"{fitted[0]:.3g}" if len(fitted) == 1
             else f"{fitted[0]:.3g} to {fitted[-1]:.3g} (by group)")
        sd = (f"{f} x the fit's residual sd (ScaleBench's estimate; JSON noise_factor"
              + (f"; in a group where {exact}" if len(fitted) < len(factors) else "") + ")")
    log(f"design_lo80/design_hi80 (JSON lo80/hi80): 80 % band of the law's mean under the "
        f"design's posterior, whose noise sd is {sd}, cautious on purpose when choosing rows, "
        "and which is conditioned on the rows proposed before it: not a calibrated interval "
        "(target_prediction's are)")


def propose(args: argparse.Namespace, law: FormulaLaw, pool_frame: pd.DataFrame,
            target: TargetRegion, grouped: tuple | None, law_info: dict[str, Any],
            vmap: dict[str, str]
            ) -> tuple[dict[str, Any], list[dict], list[str], BudgetExhausted | None]:
    """``(result, rows, columns, stop)``: the JSON result, the table's rows and columns,
    and the BudgetExhausted to exit 3 with (after the JSON is written) when nothing is left
    of the budget or no pool row fits it; the fit and the target prediction are reported
    either way."""
    from scalebo.data.files import read_table
    from scalebo.design import make_pool, propose_batch, propose_groups
    from scalebo.design.predictions import fit_and_predict, fit_runs
    from scalebo.design.runs_done import column_matches, done_rows, match_columns, row_values
    from scalebo.errors import BudgetExhausted, FitError

    pool = make_pool(pool_frame, law, args.cost, variable_map=vmap, source=args.pool)
    runs_frame = read_table(args.runs)
    done = make_pool(runs_frame, law, args.cost, response=args.response,
                     variable_map=vmap, require_response=True, source=args.runs,
                     allow_empty=True)  # a header alone: a campaign's start
    law_columns = [vmap.get(v, v) for v in law.variables]
    settings = match_columns(pool_frame, law_columns, args.response, args.group)
    matches = column_matches(pool, pool_frame, done.X, runs_frame, settings)
    runs_g = None if grouped is None else group_labels(runs_frame, args.group, args.runs)
    # one fit per group, behind both the proposals and the fit and prediction reported
    fitted = fit_runs(law, done.X, done.y, seed=args.seed, n_starts=args.starts,
                      target_groups=grouped[1] if grouped else None, done_groups=runs_g)
    stop: BudgetExhausted | None = None
    try:
        if grouped is None:
            log(f"fitting {len(done.cost)} runs done, proposing {args.batch} of {pool.n} rows")
            props = propose_batch(pool, target, law, done.X, done.y, done.cost, args.budget,
                                  args.batch, seed=args.seed, n_starts=args.starts,
                                  matches=matches, fit=fitted[None])
        else:
            each = "per group" if args.group_budget == "per-group" else "in all"
            log(f"fitting {len(done.cost)} runs done, each group of {args.group!r} on its own; "
                f"proposing {args.batch} rows {each} ({args.group_budget} budget) ...")
            props = propose_groups(pool, target, law, *grouped, done.X, done.y, done.cost,
                                   runs_g, args.budget, args.batch,
                                   group_budget=args.group_budget, seed=args.seed,
                                   n_starts=args.starts, matches=matches, fits=fitted)
    except BudgetExhausted as exc:  # exit 3, but the fit and the prediction still matter
        props, stop = (), exc
    try:
        fits, predicted = fit_and_predict(law, done.X, done.y, target, seed=args.seed,
                                          n_starts=args.starts,
                                          target_groups=grouped[1] if grouped else None,
                                          done_groups=runs_g, fits=fitted)
    except FitError:
        if stop is None:
            raise
        fits, predicted = (), []  # a spent budget is the news; the JSON says no fit
    _report_fits(fits)
    shown = [c for c in map(str, pool_frame.columns) if c not in (args.response, args.group)]
    proposals = [{**p.to_dict(), "columns": row_values(pool_frame, p.row, [args.response])}
                 for p in props]
    result = {"mode": "propose", "law": law_info, "budget": args.budget,
              "spent_fraction": float(done.cost.sum() / pool.total_cost),
              "fit": (fits[0].to_dict() if grouped is None and fits
                      else {f.group: f.to_dict() for f in fits}),
              "proposals": proposals, "target_prediction": predicted}
    if grouped is not None:
        result.update(group=args.group, group_budget=args.group_budget)
    if stop is not None:
        result.update(stop=True, message=str(stop))
    _log_target(result["target_prediction"])
    pilot = all(p.mean is None for p in props)  # too young to fit: the pilot says why
    if len(props) < args.batch and not pilot and (grouped is None
                                                  or args.group_budget == "shared"):
        untried = ~(done_rows(pool, done.X, matches=matches) if grouped is None
                    else done_rows(pool, done.X, grouped[0], runs_g, matches))
        untried[[p.row for p in props]] = False
        warnings.warn(f"{len(props)} of the {args.batch} rows asked for (--batch) " + (
            f"fit what is left of --budget {args.budget:g}; raise it for more"
            if untried.any() else "are proposed: every other pool row is done"),
            stacklevel=3)
    names = table_names(shown, grouped is not None, args.pool)
    rows = [{"data_row": p["data_row"], **({"group": p["group"]} if grouped else {}),
             **{names[c]: p["columns"][c] for c in shown}, "cost_fraction": p["cost_fraction"],
             "mean": p["mean"], "design_lo80": p["lo80"], "design_hi80": p["hi80"]}
            for p in proposals]
    columns = ["data_row", *(["group"] if grouped else []), *names.values(), "cost_fraction",
               "mean", "design_lo80", "design_hi80"]
    _log_band_legend(props)
    return result, rows, columns, stop
