"""What ``scalebo fit`` prints: the readable tables and the long-format CSV rows.

Units as in the fit's JSON: losses in nats, C in FLOPs, N* in parameters, D* in tokens.
"""

from __future__ import annotations

import math
from typing import Any

from scalebo.cli.common import format_number, format_table, write_csv

#: Long-format CSV columns; ``status`` is the fit's on every row (e.g. ``not identified``),
#: so that a row read alone does not pass for a converged estimate.
#: ``level``: the interval's confidence level (``--confidence``), empty on a row without one.
CSV_COLUMNS = ("kind", "name", "C", "estimate", "lower", "upper", "level", "status")
FORMULA_CSV_COLUMNS = ("kind", "name", "at", "estimate", "lower", "upper", "level", "status")


def starts_line(fit: dict[str, Any]) -> str:
    """``starts  4500 tried, 4500 converged, 64 of the 64 best (polished) agree with the
    best``: agreement counted among the starts it is judged on (``n_compared``)."""
    among = "" if fit["n_compared"] >= fit["n_converged"] else \
        f"of the {fit['n_compared']} best (polished) "
    return (f"starts      {fit['n_starts']} tried, {fit['n_converged']} converged, "
            f"{fit['n_agree']} {among}agree with the best")


def render_table(result: dict[str, Any]) -> str:
    """The readable report printed by ``--format table``."""
    law, runs, fit = result["law"], result["runs"], result["fit"]
    boot = result["bootstrap"]
    units = ", ".join(f"{v} {u}" for v, u in law["units"].items() if u)
    lines = [f"law         {law['name']}: {law['formula']}" + (f"   ({units})" if units else "")]
    excl = ", ".join(f"{n} {r}" for r, n in runs["excluded_by_reason"].items())
    lines.append(
        f"runs        {runs['used']} fitted ({result['frontier']}) of {runs['loaded']} valid"
        f"; {runs['excluded']} excluded" + (f" ({excl})" if excl else "")
        + f"   [{result['source']}]"
    )
    lines.append(f"status      {_status_line(fit)}")
    lines.append(
        f"objective   {fit['objective']:.6g} (summed Huber, delta {fit['huber_delta']:g}, "
        "natural-log residuals)"
    )
    lines.append(starts_line(fit))
    if boot is not None:
        lines.append(
            f"bootstrap   {boot['n_resamples']} resamples"
            + (f" of the {boot['n_clusters']} training runs, checkpoints kept together"
               if boot.get("n_clusters") else "") + f" (seed {boot['seed']}), "
            f"{boot['n_failed']} failed{_unidentified(boot)}; "
            f"{100 * boot['confidence_level']:g}% percentile intervals"
        )
    lines.append("")
    lines.append("parameters")
    lines.append(format_table(_param_rows(fit["params"], boot),
                              ["name", "estimate", "lower", "upper"]).rstrip("\n"))
    preds = result["predictions"]
    if preds:
        lines.append("")
        fields = [f for f in ("loss", "N_opt", "D_opt", "tokens_per_param") if f in preds[0]]
        target = result["law"].get("target", "loss")  # --response: its unit is the user's
        lines.append("predictions (C in FLOPs, " + ("loss in nats" if target == "loss" else
                                                    f"{target} in the file's unit")
                     + (", N* parameters, D* tokens)" if "N_opt" in fields else ")"))
        heads = {"loss": "loss" if target == "loss" else target, "N_opt": "N*", "D_opt": "D*",
                 "tokens_per_param": "D*/N*"}
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
    rows = [{"kind": "parameter", **r}
            for r in _param_rows(result["fit"]["params"], result["bootstrap"])]
    for p in result["predictions"]:
        for f in ("loss", "N_opt", "D_opt", "tokens_per_param"):
            if f in p:
                iv = p.get(f"{f}_interval") or (None, None)
                rows.append({"kind": "prediction", "name": f, "C": p["C"], "estimate": p[f],
                             "lower": iv[0], "upper": iv[1]})
    return rows


def write_fit_csv(rows: list[dict[str, Any]], status: str, level: float | None,
                  columns: tuple[str, ...]) -> None:
    """``rows`` as CSV, each with the fit's status and, where it has an interval (both ends
    finite), its confidence ``level`` (a fraction, e.g. 0.95)."""
    write_csv([{**r, "status": status, "level": level if _finite(r["lower"])
                and _finite(r["upper"]) else None} for r in rows], columns)


def _param_rows(params: dict[str, float], boot: dict | None) -> list[dict[str, Any]]:
    """One row per fitted parameter: ``name``, ``estimate`` and the bootstrap's interval
    (``lower``, ``upper``; None without a bootstrap or an interval for it)."""
    iv = boot["intervals"] if boot else {}
    return [{"name": k, "estimate": v, "lower": iv.get(k, (None, None))[0],
             "upper": iv.get(k, (None, None))[1]} for k, v in params.items()]


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))


def render_formula_table(result: dict[str, Any]) -> str:
    """The readable report of ``scalebo fit --formula --format table``."""
    fit, boot, law = result["fit"], result["bootstrap"], result["law"]
    lines = [f"law         {law['formula']}   (variables {law['variables']})",
             f"rows        {result['n_rows']}; response {law['response']}; "
             f"{result['residuals']} residuals",
             f"status      {_status_line(fit)}",
             starts_line(fit),
             f"R^2         {format_number(result['r2_in_sample'])} (in sample)"]
    if boot is not None:
        lines.append(f"bootstrap   {boot['n_resamples']} resamples of the rows (seed "
                     f"{boot['seed']}, {boot['starts_per_resample']} starts each), "
                     f"{boot['n_failed']} failed{_unidentified(boot)}; "
                     f"{100 * boot['confidence_level']:g}% percentile intervals")
    lines += ["", "parameters", format_table(_param_rows(fit["params"], boot),
                                             ["name", "estimate", "lower", "upper"]
                                             ).rstrip("\n")]
    if result["predictions"]:
        names = list(law["variables"])
        rows = []
        for p in result["predictions"]:
            band = p["interval"]
            rows.append({**p["at"], "prediction": format_number(p["prediction"]) + (
                f" [{format_number(band[0], 4)}, {format_number(band[1], 4)}]" if band else "")})
        lines += ["", f"predictions of {law['response']}",
                  format_table(rows, [*names, "prediction"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


def _unidentified(boot: dict) -> str:
    """`` (k of them could not identify the law)`` when some resamples could not."""
    k = int(boot.get("n_unidentified") or 0)
    return f" ({k} of them could not identify the law)" if k else ""


def _status_line(fit: dict) -> str:
    """``status: message``, without saying the status twice (``converged: converged; ...``)."""
    status, message = str(fit["status"]), str(fit["message"])
    return message if message.startswith(status) else f"{status}: {message}"
