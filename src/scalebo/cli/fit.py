"""``scalebo fit``: fit a scaling law to a run table, with intervals and predictions.

Pipeline: load runs → choose the points to fit (a frontier, or all runs) → multi-start Huber
fit (:func:`scalebo.fitting.robust.fit_law`) → optional bootstrap over the fitted points
(:func:`scalebo.fitting.bootstrap.bootstrap_fit`, one batched call) → predictions at ``--predict``
compute budgets → table / JSON / CSV on stdout, ``--json`` file, ``--plot`` figure.

Default points (``--frontier``):

* ``compute`` law ``L(C)``: the Pareto **envelope** of (C, loss) — the best loss reached at each
  compute, which is what ``L(C)`` describes;
* laws in ``N`` and ``D`` (``chinchilla``, ``powerlaw:N,D``): the best run of each (N, D)
  **cell**. ``L(N, D)`` describes the loss of a well-tuned model at every (N, D), not only at
  the compute-optimal one, so every cell is informative; keeping only the best run per cell
  drops badly tuned hyperparameters. With one run per cell (e.g. Epoch's Chinchilla points)
  this is the same as ``all`` (Hoffmann et al.'s approach 3);
* other laws: **all** runs.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scalebo import __version__
from scalebo.cli.common import (
    INPUT_HELP,
    add_format_argument,
    add_input_arguments,
    format_number,
    format_table,
    is_quiet,
    load_input,
    log,
    positive_float,
    write_csv,
    write_json,
)
from scalebo.errors import FitError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import pandas as pd

    from scalebo.data.runs import RunTable
    from scalebo.fitting.allocation import ComputeOptimal
    from scalebo.fitting.bootstrap import BootstrapResult
    from scalebo.fitting.robust import FitResult
    from scalebo.laws import Law

# The numerical library (numpy, pandas, scipy) is imported inside the functions that use it,
# so that ``scalebo --help`` does not load it.

NAME = "fit"
HELP = "fit a scaling law (compute, chinchilla, ...) with bootstrap intervals and predictions"
DESCRIPTION = """\
Fit a scaling law to a table of training runs, robustly (Huber loss on natural-log
residuals, summed, L-BFGS from a grid of starts), with percentile intervals from a bootstrap
over the fitted runs and predictions at larger compute.

laws (--law):
  compute       L(C) = E + A/C^alpha                      C in FLOPs
  chinchilla    L(N, D) = E + A/N^alpha + B/D^beta        N parameters, D tokens
  width_depth   L = E + A/width^alpha + B/depth^beta + G/D^gamma
  powerlaw:X,Y  L = E + A_X/X^alpha_X + A_Y/Y^alpha_Y     any numeric columns
  gadre, sigmoid  downstream error as a function of loss (use --target)
  Losses are in nats; C = 6*N*D FLOPs unless the table has a C column.

points fitted (--frontier, default by law):
  compute law: envelope (best loss at each compute); laws in N and D: cell (best run of
  each (N, D) cell, = all runs when each cell has one run); other laws: all runs.
  hull = vertices of the lower convex hull of the envelope in (log C, log loss).

predictions (--predict C, FLOPs, repeatable): loss at C; for laws in N and D the loss
along the compute-optimal path and N* (parameters), D* (tokens), D*/N* at C = 6*N*D.
"""
EPILOG = INPUT_HELP + """
examples:
  scalebo fit runs.csv --law compute --predict 1e24 --plot fit.png --json fit.json
  scalebo fit runs.csv --law chinchilla --bootstrap 200 --predict 1e23 --predict 1e24
  scalebo fit dataset:epoch_chinchilla --dataset-option drop_highest_loss=5 --law chinchilla
  scalebo fit sweep.parquet --map N=params,D=tokens,loss=val_loss --duplicates mean

exit codes: 0 converged (or a parameter at a bound: a warning is printed), 1 the fit
failed or did not converge within the iteration limit, 2 bad input.
"""

FRONTIERS = ("envelope", "hull", "cell", "all")
#: Same value as :data:`scalebo.fitting.robust.DEFAULT_HUBER_DELTA` (a test checks it).
DEFAULT_HUBER_DELTA = 1e-3
UNITS = {"C": "FLOPs", "N": "parameters", "D": "tokens", "loss": "nats"}
CSV_COLUMNS = ("kind", "name", "C", "estimate", "lower", "upper")


def _level(text: str) -> float:
    value = positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"expected a level in (0, 1), got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``scalebo fit``."""
    add_input_arguments(parser)
    group = parser.add_argument_group("fitting")
    group.add_argument("--law", default="compute",
                       help="law to fit: compute, chinchilla, width_depth, gadre, sigmoid or "
                            "powerlaw:VAR1,VAR2 (default compute)")
    group.add_argument("--frontier", choices=FRONTIERS, default=None,
                       help="points to fit: envelope, hull, cell or all runs "
                            "(default: envelope for compute, cell for laws in N and D, "
                            "else all)")
    group.add_argument("--target", default=None,
                       help="column to fit (default loss, in nats)")
    group.add_argument("--huber-delta", type=positive_float, default=DEFAULT_HUBER_DELTA,
                       help=f"Huber delta on natural-log residuals "
                            f"(default {DEFAULT_HUBER_DELTA:g})")
    group.add_argument("--bootstrap", metavar="B", type=int, default=0,
                       help="bootstrap resamples over the fitted runs for percentile "
                            "intervals (0 = none; 1000 is typical)")
    group.add_argument("--confidence", type=_level, default=0.95,
                       help="level of the percentile intervals (default 0.95)")
    group.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    group.add_argument("--predict", metavar="C", type=positive_float, action="append",
                       default=[], help="predict at this compute in FLOPs, e.g. 1e24 "
                                        "(repeatable)")
    out = parser.add_argument_group("output")
    add_format_argument(out)
    out.add_argument("--json", metavar="PATH", default=None,
                     help="also write the full result as JSON to PATH")
    out.add_argument("--plot", metavar="PATH", default=None,
                     help="save a log-log plot of loss vs compute (PNG, PDF, SVG) to PATH")


# --------------------------------------------------------------------------- helpers


def law_formula(law: Law) -> str:
    """The law as a readable formula (ASCII-friendly Unicode)."""
    from scalebo.laws import GadreDownstreamLaw, PowerLawSum, SigmoidDownstreamLaw

    if isinstance(law, PowerLawSum):
        args = ", ".join(t.variable for t in law.terms)
        terms = " + ".join(f"{t.coef}/{t.variable}^{t.exponent}" for t in law.terms)
        return f"L({args}) = E + {terms}"
    if isinstance(law, GadreDownstreamLaw):
        return "Err(L) = epsilon - k*exp(-gamma*L)"
    if isinstance(law, SigmoidDownstreamLaw):
        return "Err(L) = a/(1 + exp(-k*(L - L0))) + b"
    return law.name  # pragma: no cover - every registered law is covered above


def prediction_kind(law: Law) -> str | None:
    """``"compute"`` for L(C), ``"allocation"`` for L(N, D) sums of power laws, else None."""
    from scalebo.laws import PowerLawSum

    if tuple(law.variables) == ("C",):
        return "compute"
    if isinstance(law, PowerLawSum) and tuple(law.variables) == ("N", "D"):
        return "allocation"
    return None


def default_frontier(law: Law) -> str:
    """Default ``--frontier`` for a law (see the module docstring for the reasons)."""
    kind = prediction_kind(law)
    return {"compute": "envelope", "allocation": "cell"}.get(kind, "all")


def select_points(frame: pd.DataFrame, method: str, law: Law, target: str) -> pd.DataFrame:
    """Rows of ``frame`` to fit: a frontier of (C, target) or of cells, or all rows."""
    from scalebo.fitting.frontier import frontier

    needed = [*law.variables, target]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(
            f"law {law.name!r} needs column(s) {missing}; the runs have "
            f"{list(frame.columns)}. Map yours with --map (canonical N, D, C, loss) or "
            "choose another --law/--target"
        )
    if method == "all":
        return frame
    if method == "cell":
        cell = tuple(law.variables)
        if set(cell) & {"C", "loss", target}:
            cell = ("N", "D")
        return frontier(frame, "cell", loss=target, cell=cell)
    return frontier(frame, method, loss=target)


def _collect(fn: Callable[[], Any], sink: list[str]) -> Any:
    """Call ``fn``, print its warnings to stderr as ``warning: ...`` and append them to sink."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr, flush=True)
        sink.append(str(w.message))
    return result


def _percentile(values: np.ndarray, level: float) -> list[float] | None:
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    tail = 100 * (1 - level) / 2
    return [float(v) for v in np.percentile(values, [tail, 100 - tail])]


def _safe_optimal(fit: FitResult, C: float) -> ComputeOptimal | None:
    from scalebo.fitting.allocation import compute_optimal

    try:
        return compute_optimal(fit, C)
    except (FitError, ValueError, FloatingPointError):
        return None


def predictions(
    fit: FitResult, boot: BootstrapResult | None, compute: Sequence[float]
) -> list[dict[str, Any]]:
    """Predicted loss (nats) at each compute (FLOPs), with intervals if ``boot`` is given.

    For laws in N and D: the compute-optimal N* (parameters), D* (tokens), D*/N* and the
    loss along that path (Hoffmann et al. 2022, approach 3), each with its interval.
    """
    import numpy as np

    from scalebo.fitting.allocation import compute_optimal

    kind = prediction_kind(fit.law)
    if kind is None:
        raise ValueError(
            f"--predict needs a law in C or in (N, D); {fit.law.name!r} has variables "
            f"{list(fit.law.variables)}"
        )
    out: list[dict[str, Any]] = []
    if kind == "compute":
        C = np.asarray(compute, dtype=np.float64)
        loss = fit.predict(C[:, None])
        bands = boot.predict_samples(C[:, None]) if boot is not None and len(C) else None
        for i, c in enumerate(C):
            rec: dict[str, Any] = {"C": float(c), "loss": float(loss[i])}
            rec["loss_interval"] = (
                _percentile(bands[:, i], boot.confidence_level) if bands is not None else None
            )
            out.append(rec)
        return out
    fields = ("loss", "N_opt", "D_opt", "tokens_per_param")
    for c in compute:
        best = compute_optimal(fit, c)
        rec = {"C": float(c)} | {f: float(getattr(best, f)) for f in fields}
        if boot is None:
            rec |= {f"{f}_interval": None for f in fields}
        else:
            reps = [_safe_optimal(replace(fit, x=s), c) for s in boot.samples]
            for f in fields:
                vals = np.array([getattr(r, f) if r is not None else np.nan for r in reps])
                rec[f"{f}_interval"] = _percentile(vals, boot.confidence_level)
        out.append(rec)
    return out


def _bootstrap_summary(boot: BootstrapResult) -> dict[str, Any]:
    return {
        "n_resamples": boot.n_resamples,
        "n_failed": boot.n_failed,
        "confidence_level": boot.confidence_level,
        "seed": boot.seed,
        "method": "percentile, resampling the fitted runs",
        "intervals": {k: list(v) for k, v in boot.intervals.items()},
        "standard_error": boot.standard_error if len(boot.samples) > 1 else None,
    }


def build_result(
    *,
    args: argparse.Namespace,
    law: Law,
    method: str,
    target: str,
    table: RunTable,
    points: pd.DataFrame,
    fit: FitResult,
    boot: BootstrapResult | None,
    preds: list[dict[str, Any]],
    warnings_seen: list[str],
) -> dict[str, Any]:
    """The machine-readable result (what ``--json`` writes)."""
    reasons = (
        table.excluded["reason"].astype(str).value_counts().to_dict()
        if table.n_excluded and "reason" in table.excluded.columns else {}
    )
    cols = [c for c in ("run_id", "N", "D", "C", *law.variables, target) if c in points]
    cols = list(dict.fromkeys(cols))
    return {
        "command": NAME,
        "scalebo_version": __version__,
        "source": table.source,
        "law": {"name": law.name, "formula": law_formula(law),
                "variables": list(law.variables), "target": target,
                "units": {v: UNITS.get(v, "") for v in (*law.variables, target)}},
        "frontier": method,
        "runs": {"loaded": len(table), "used": len(points), "excluded": table.n_excluded,
                 "excluded_by_reason": reasons},
        "fit": fit.to_dict(),
        "bootstrap": _bootstrap_summary(boot) if boot is not None else None,
        "predictions": preds,
        "points": points[cols].to_dict(orient="records"),
        "warnings": warnings_seen,
        "plot": args.plot,
    }


def render_table(result: dict[str, Any]) -> str:
    """The readable report printed by ``--format table``."""
    law, runs, fit = result["law"], result["runs"], result["fit"]
    boot = result["bootstrap"]
    units = ", ".join(f"{v} {u}" for v, u in law["units"].items() if u)
    lines = [f"law         {law['name']}: {law['formula']}" + (f"   ({units})" if units else "")]
    excl = ", ".join(f"{n} {r}" for r, n in runs["excluded_by_reason"].items())
    lines.append(
        f"runs        {runs['used']} fitted ({result['frontier']}) of {runs['loaded']} loaded"
        f"; {runs['excluded']} excluded" + (f" ({excl})" if excl else "")
        + f"   [{result['source']}]"
    )
    lines.append(f"status      {fit['status']}: {fit['message']}")
    lines.append(
        f"objective   {fit['objective']:.6g} (summed Huber, delta {fit['huber_delta']:g}, "
        "natural-log residuals)"
    )
    lines.append(
        f"starts      {fit['n_starts']} tried, {fit['n_converged']} converged, "
        f"{fit['n_agree']} agree with the best"
    )
    if boot is not None:
        lines.append(
            f"bootstrap   {boot['n_resamples']} resamples (seed {boot['seed']}), "
            f"{boot['n_failed']} failed; {100 * boot['confidence_level']:g}% percentile "
            "intervals"
        )
    lines.append("")
    rows = []
    for name, value in fit["params"].items():
        lo, hi = boot["intervals"].get(name, (None, None)) if boot else (None, None)
        rows.append({"name": name, "estimate": value, "lower": lo, "upper": hi})
    lines.append("parameters")
    lines.append(format_table(rows, ["name", "estimate", "lower", "upper"]).rstrip("\n"))
    preds = result["predictions"]
    if preds:
        lines.append("")
        lines.append("predictions (C in FLOPs, loss in nats, N* parameters, D* tokens)")
        fields = [f for f in ("loss", "N_opt", "D_opt", "tokens_per_param") if f in preds[0]]
        heads = {"loss": "loss", "N_opt": "N*", "D_opt": "D*", "tokens_per_param": "D*/N*"}
        rows = []
        for p in preds:
            row = {"C": p["C"]}
            for f in fields:
                iv = p.get(f"{f}_interval")
                row[f] = format_number(p[f]) + (
                    f" [{format_number(iv[0], 4)}, {format_number(iv[1], 4)}]" if iv else ""
                )
            rows.append(row)
        lines.append(format_table(rows, ["C", *fields],
                                  ["C", *(heads[f] for f in fields)]).rstrip("\n"))
    return "\n".join(lines) + "\n"


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Long-format rows (kind, name, C, estimate, lower, upper) for ``--format csv``."""
    boot = result["bootstrap"]
    rows = []
    for name, value in result["fit"]["params"].items():
        lo, hi = boot["intervals"].get(name, (None, None)) if boot else (None, None)
        rows.append({"kind": "parameter", "name": name, "estimate": value,
                     "lower": lo, "upper": hi})
    for p in result["predictions"]:
        for f in ("loss", "N_opt", "D_opt", "tokens_per_param"):
            if f in p:
                iv = p.get(f"{f}_interval") or (None, None)
                rows.append({"kind": "prediction", "name": f, "C": p["C"], "estimate": p[f],
                             "lower": iv[0], "upper": iv[1]})
    return rows


# --------------------------------------------------------------------------- command


def _bootstrap(fit: FitResult, X: np.ndarray, y: np.ndarray, args) -> BootstrapResult:
    from tqdm import tqdm

    from scalebo.fitting.bootstrap import bootstrap_fit

    log(f"bootstrap: {args.bootstrap} resamples of {len(y)} runs in one batched fit ...")
    with tqdm(total=args.bootstrap, desc="bootstrap", unit="resample", file=sys.stderr,
              disable=True if is_quiet() else None, leave=False) as bar:
        boot = bootstrap_fit(fit, X, y, n_resamples=args.bootstrap,
                             confidence_level=args.confidence, rng=args.seed)
        bar.update(args.bootstrap)
    return boot


def run(args: argparse.Namespace) -> int:
    """Run ``scalebo fit`` (see the module docstring); returns the exit code."""
    import numpy as np

    from scalebo.fitting.robust import FitStatus, fit_law
    from scalebo.laws import get_law

    law = get_law(args.law)
    kind = prediction_kind(law)
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    if args.predict and kind is None:
        raise ValueError(f"--predict needs a law in C or in (N, D), not {law.name!r}")
    if args.plot and kind is None:
        raise ValueError(f"--plot needs a law in C or in (N, D), not {law.name!r}")
    target = args.target or "loss"
    if target in law.variables:
        raise ValueError(f"law {law.name!r} takes {target!r} as input: give --target COLUMN")
    method = args.frontier or default_frontier(law)
    seen: list[str] = []

    table = _collect(lambda: load_input(args), seen)
    points = select_points(table.frame, method, law, target)
    X = points[list(law.variables)].to_numpy(dtype=np.float64)
    y = points[target].to_numpy(dtype=np.float64)
    if len(y) < law.n_params:
        raise FitError(
            f"law {law.name!r} has {law.n_params} parameters but the {method} frontier "
            f"has only {len(y)} runs; use more runs or --frontier all"
        )
    starts = law.start_grid(law.prepare(X))
    log(f"fitting {law.name} to {len(y)} runs ({method}) from {len(starts)} starts ...")
    fit = _collect(lambda: fit_law(law, X, y, huber_delta=args.huber_delta, starts=starts),
                   seen)
    boot = _collect(lambda: _bootstrap(fit, X, y, args), seen) if args.bootstrap else None
    preds = predictions(fit, boot, args.predict) if args.predict else []
    result = build_result(args=args, law=law, method=method, target=target, table=table,
                          points=points, fit=fit, boot=boot, preds=preds, warnings_seen=seen)
    if fit.status is not FitStatus.CONVERGED:
        note = f"fit status '{fit.status}': {fit.message}"
        print(f"warning: {note}", file=sys.stderr, flush=True)
        seen.append(note)
    if args.plot:
        from scalebo.plotting import plot_fit

        plot_fit(table.frame, points, fit, bootstrap=boot, predict_at=args.predict,
                 path=args.plot, loss=target)
        log(f"plot written to {args.plot}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            write_json(result, fh)
        log(f"JSON written to {args.json}")
    if args.format == "json":
        write_json(result)
    elif args.format == "csv":
        write_csv(csv_rows(result), CSV_COLUMNS)
    else:
        sys.stdout.write(render_table(result))
    return 0 if fit.success else 1
