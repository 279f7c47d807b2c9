"""``scalebo allocate``: compute-optimal N*(C) and D*(C) by Chinchilla approaches 1, 2 and 3.

Parses, calls :func:`scalebo.fitting.allocation_summary.allocation_summary`, prints.
"""

from __future__ import annotations

import argparse
from typing import Any

from scalebo.cli.collect import collect_warnings
from scalebo.cli.common import (
    add_format_argument,
    add_input_arguments,
    check_outputs,
    emit_result,
    flops,
    format_number,
    format_table,
    input_epilog,
    int_at_least,
    load_input,
    log,
    warn,
    warn_few_resamples,
    write_csv,
)

NAME = "allocate"
HELP = "compute-optimal model size and tokens, N*(C) and D*(C), by Chinchilla approaches 1-3"
DESCRIPTION = """\
Compute-optimal allocation N*(C) = G_N*C^a (parameters) and D*(C) = G_D*C^b (tokens), C in
FLOPs, by the three approaches of Hoffmann et al. (2022), side by side:

  1  envelope   the best run of each (N, D) cell, then the runs on the envelope of (C, loss)
                (the best loss reached at each compute); log N and log D regressed on log C
  2  isoFLOP    runs grouped by compute (--isoflop-column, in FLOPs; else C within 1 %, and
                then at least half the cells must lie on profiles); in each budget with >= 3
                model sizes a parabola of loss in log N gives N*; D* = C/(k N*)
  3  L(N, D)    E + A/N^alpha + B/D^beta fitted to the cell bests, minimized under C = kND
                (also: scalebo fit --law chinchilla --predict C)
  k is the table's C/(N*D): 6 unless the table has a C column that says otherwise.

An approach the table cannot support is listed with the reason. Approaches 1 and 2 give
95 % t-intervals of their exponents (least squares in log-log space), approach 3 with
--bootstrap B 95 % bootstrap intervals of its exponents and of its N*, D* and D*/N* at each
--predict C.
"""
EPILOG = input_epilog("""
examples:
  scalebo allocate dataset:epoch_chinchilla --dataset-option drop_highest_loss=5 \\
      --predict 1e24 --bootstrap 200
  scalebo allocate isoflops.csv --approach 2 --isoflop-column budget --plot alloc.png
  scalebo allocate runs.csv --format json

exit codes: 0 at least one approach gave an allocation, 1 none did, 2 bad input.
""")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``scalebo allocate``."""
    add_input_arguments(parser)
    group = parser.add_argument_group("allocation")
    group.add_argument("--approach", type=int, choices=(1, 2, 3), action="append",
                       default=None,
                       help="approach to run (repeatable; default all three)")
    group.add_argument("--isoflop-column", metavar="COL", default=None,
                       help="column holding each run's isoFLOP budget in FLOPs (approach 2; "
                            "default: runs whose C agree within 1 %%)")
    group.add_argument("--bootstrap", metavar="B", type=int_at_least(0), default=0,
                       help="bootstrap resamples of the cells for approach 3's exponent "
                            "interval (0 = none, default; 1000 is typical)")
    group.add_argument("--seed", type=int_at_least(0), default=0,
                       help="seed of the bootstrap (default 0)")
    group.add_argument("--predict", metavar="C", type=flops, action="append",
                       default=[], help="give N*, D* and D*/N* at this compute in FLOPs "
                                        "(repeatable)")
    out = parser.add_argument_group("output")
    add_format_argument(out)
    out.add_argument("--json", metavar="PATH", default=None,
                     help="also write the full result as JSON to PATH")
    out.add_argument("--plot", metavar="PATH", default=None,
                     help="save log-log plots of N* and D* against C, every approach's "
                          "points and law (PNG, PDF, SVG) to PATH")


def run(args: argparse.Namespace) -> int:
    """Run ``scalebo allocate``; returns the exit code."""
    from scalebo.fitting.allocation_summary import APPROACHES, allocation_summary

    check_outputs(args)
    warn_few_resamples(args.bootstrap, confidence=0.95)
    notes: list[str] = []
    table = collect_warnings(lambda: load_input(args), notes)
    log(f"{len(table)} runs; approaches {', '.join(map(str, args.approach or APPROACHES))} ...")
    summary = allocation_summary(table, args.approach or APPROACHES,
                                 isoflop_column=args.isoflop_column, predict=args.predict,
                                 bootstrap=args.bootstrap, seed=args.seed)
    for text in summary.warnings:
        warn(text)
    result = summary.to_dict()
    result["warnings"] = notes + result["warnings"]
    if args.plot:
        from scalebo.fitting.allocation_plot import plot_allocation

        plot_allocation(summary, args.plot)
        log(f"plot written to {args.plot}")
    emit_result(args, result, render, lambda: write_csv(csv_rows(result), CSV_COLUMNS))
    return 0 if summary.ok else 1


LABELS = {1: "1 envelope", 2: "2 isoFLOP", 3: "3 L(N, D)"}
CSV_COLUMNS = ("approach", "kind", "name", "C", "estimate", "lower", "upper", "level")


def _exponent(law: dict[str, Any] | None) -> str:
    if law is None:
        return "-"
    iv = law["exponent_interval"]
    return format_number(law["exponent"], 4) + (
        f" [{format_number(iv[0], 3)}, {format_number(iv[1], 3)}]" if iv else "")


def render(result: dict[str, Any]) -> str:
    """The readable report of ``--format table``."""
    lines = [f"runs        {result['n_runs']} rows in {result['n_cells']} (N, D) cells, the "
             f"best row of each used   [{result['source']}]",
             "allocation  N* = G_N*C^a parameters, D* = G_D*C^b tokens, C in FLOPs; "
             f"[{100 * result['exponent_level']:g} % interval]", ""]
    rows = []
    for est in result["estimates"]:
        n, d = est["N_opt"], est["D_opt"]
        status = "no law (below)" if est["reason"] else (
            f"fit {est['fit_status']}" if est["fit_status"] else
                                   f"r2 {format_number(n['r2'], 3)} / "
                                   f"{format_number(d['r2'], 3)}")
        rows.append({"approach": LABELS[est["approach"]],
                     "points": len(est["points"]) if est["approach"] != 2 else
                     sum(bool(p.get("used")) for p in est["points"]),
                     "a": _exponent(n), "b": _exponent(d),
                     "G_N": n and n["coef"], "G_D": d and d["coef"], "status": status})
    lines.append(format_table(rows, ["approach", "points", "a", "b", "G_N", "G_D", "status"],
                              ["approach", "points", "a (N*)", "b (D*)", "G_N", "G_D",
                               "fit"]).rstrip("\n"))
    lines += [f"  no law from approach {LABELS[e['approach']]}: {e['reason']}"
              for e in result["estimates"] if e["reason"]]
    iso = next((e for e in result["estimates"] if e["approach"] == 2 and e["points"]), None)
    if iso is not None:
        # budgets of one or two sizes (a grid's coincidences) are counted, not listed
        shown = [p for p in iso["points"] if p.get("used") or (p.get("n_models") or 0) >= 3]
        few = len(iso["points"]) - len(shown)
        lines += ["", "isoFLOP budgets (approach 2; loss* in nats)",
                  format_table([{**p, "used": p.get("reason") or "yes"} for p in shown],
                               ["C", "n_models", "N_opt", "D_opt", "loss_opt", "vertex_inside",
                                "used"],
                               ["C", "sizes", "N*", "D*", "loss*", "vertex inside range",
                                "used"]).rstrip("\n")]
        if few:
            lines.append(f"  and {few} compute(s) of fewer than 3 sizes (all in --format json)")
    if result["predictions"]:
        rows = [{**p, **{k: _with_interval(p[k], (p["intervals"] or {}).get(k))
                         for k in ("N_opt", "D_opt", "tokens_per_param")}}
                for p in result["predictions"]]
        level = (f"; [{100 * result['exponent_level']:g} % bootstrap interval]"
                 if any(p["intervals"] for p in result["predictions"]) else "")
        lines += ["", f"predictions (C in FLOPs, N* parameters, D* tokens{level})",
                  format_table(rows, ["C", "approach", "N_opt", "D_opt", "tokens_per_param"],
                               ["C", "approach", "N*", "D*", "D*/N*"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


def _with_interval(value: float, interval: list[float] | None) -> str:
    """``4.1e+10 [2.9e+10, 5.6e+10]``: a predicted value with its interval, when it has one."""
    if not interval:
        return format_number(value)
    return f"{format_number(value)} [{format_number(interval[0], 3)}, " \
           f"{format_number(interval[1], 3)}]"


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Long-format rows: each approach's exponents (with their interval and its ``level``, a
    fraction, when there is one) and coefficients, then predictions."""
    rows: list[dict[str, Any]] = []
    for est in result["estimates"]:
        for key in ("N_opt", "D_opt"):
            law = est[key]
            if law is None:
                continue
            iv = law["exponent_interval"] or (None, None)
            rows += [{"approach": est["approach"], "kind": "exponent", "name": key,
                      "estimate": law["exponent"], "lower": iv[0], "upper": iv[1],
                      "level": result["exponent_level"] if iv[0] is not None else None},
                     {"approach": est["approach"], "kind": "coef", "name": key,
                      "estimate": law["coef"]}]
    for p in result["predictions"]:
        ivs = p.get("intervals") or {}
        rows += [{"approach": p["approach"], "kind": "prediction", "name": f, "C": p["C"],
                  "estimate": p[f], **({"lower": ivs[f][0], "upper": ivs[f][1],
                                        "level": result["exponent_level"]} if f in ivs else {})}
                 for f in ("N_opt", "D_opt", "tokens_per_param")]
    return rows
