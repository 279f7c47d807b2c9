"""The tables ``scalebo replay`` prints below its metrics: the metrics' legend, why a budget
has no estimate, the law intervals at the headline target (the smallest compute the replay
scores at, 1e25 FLOPs by default; law posterior and observed-run bootstrap), and notes on
intervals made mostly by sample fits at a parameter bound. Losses in nats."""

from __future__ import annotations

from typing import Any

from scalebo.search.stopping import bound_note

__all__ = ["failure_rows", "interval_rows", "metric_legend", "metric_notes",
           "untrusted_notes"]


def _at_headline(entry: dict, field: str) -> Any:
    """A law-posterior summary's ``field`` at its headline target, the smallest compute of
    its ``predicted_loss`` (None if absent)."""
    keys = list(entry.get("predicted_loss") or {})
    return (entry.get(field) or {}).get(min(keys, key=float)) if keys else None


def failure_rows(rec: Any) -> list[dict]:
    """One row per budget × source × law without an estimate, with the reason."""
    rows = []
    for m in rec.metrics:
        for source, laws in (("observed", m.observed), ("fantasized", m.fantasized)):
            for name, lm in (laws or {}).items():
                if lm.params is None:
                    rows.append({"budget": m.budget, "source": source, "law": name,
                                 "reason": lm.message or lm.status})
        if m.fantasized is None and m.fantasize_message:
            rows.append({"budget": m.budget, "source": "fantasized", "law": "-",
                         "reason": m.fantasize_message})
        if m.law_posterior is None:
            if m.posterior_message:
                rows.append({"budget": m.budget, "source": "posterior", "law": "-",
                             "reason": m.posterior_message})
            continue
        for name, entry in m.law_posterior.items():
            q = _at_headline(entry, "predicted_loss") or {}
            if q.get("q10") is None:
                rows.append({"budget": m.budget, "source": "posterior", "law": name,
                             "reason": entry.get("message") or "no successful sample"})
    return rows


def _fits(entry: dict) -> str:
    """``"ok"``, or how many of the S sample fits failed or ended at a parameter bound (an
    interval such fits make is the bounds' spread, not the data's)."""
    if "n_bound_hit" not in entry:  # a bootstrap summary: not counted
        return "-"
    parts = [f"{entry[k]}/{entry.get('samples')} {what}"
             for k, what in (("n_failed", "failed"), ("n_bound_hit", "at a bound"))
             if entry.get(k)]
    return ", ".join(parts) or "ok"


def interval_rows(rec: Any) -> list[dict]:
    """One row per budget × law × interval source (law posterior, observed bootstrap)."""
    rows = []
    for m in rec.metrics:
        for source, table in (("posterior", m.law_posterior),
                              ("bootstrap", m.observed_bootstrap)):
            for law, entry in (table or {}).items():
                q = _at_headline(entry, "predicted_loss")
                if not q or q.get("q10") is None:
                    continue
                cov = _at_headline(entry, "covered") or {}
                ref = _at_headline(entry, "reference_loss")
                rows.append({"budget": m.budget, "source": source, "law": law,
                             "q02.5": q["q02.5"], "q10": q["q10"], "q50": q["q50"],
                             "q90": q["q90"], "q97.5": q["q97.5"],
                             "80%_halfwidth_%": 50 * (q["q90"] - q["q10"]) / q["q50"],
                             "reference": ref, "covers_80": cov.get("80"),
                             "covers_95": cov.get("95"), "fits": _fits(entry)})
    return rows


def untrusted_notes(rec: Any) -> list[str]:
    """:func:`~scalebo.search.stopping.bound_note` of each budget × law posterior, and a note
    for each law posterior whose 80 % interval at the headline target has zero width."""
    notes = [f"note at {m.budget:g}: {note}" for m in rec.metrics
             for law, entry in (m.law_posterior or {}).items()
             if (note := bound_note(entry, law))]
    notes += [f"note at {m.budget:g}: the {law} law posterior's interval has zero "
              "width: no draw of the untried configurations in its scope changed the points "
              "the law is fitted on, so it leaves out what the configurations outside that "
              "scope could change (those the extrapolation guard left out, or beyond the "
              "window); read it as the point fit, not as certainty"
              for m in rec.metrics for law, entry in (m.law_posterior or {}).items()
              if (q := _at_headline(entry, "predicted_loss")) and q.get("q10") is not None
              and q["q90"] == q["q10"]
              and int(entry.get("samples") or 0) - int(entry.get("n_failed") or 0) > 1]
    return notes


def metric_notes(rec: Any) -> list[str]:
    """Notes under the metrics table, per recorded budget: what the fill-in said (left out,
    failed), the runs that failed, and the compute targets where the fill-in's point is
    the law posterior's median (:func:`~scalebo.bench.metrics.point_estimate`)."""
    notes = [f"note at {m.budget:g}: {m.fantasize_message}" for m in rec.metrics
             if m.fantasized is not None and m.fantasize_message]
    notes += [f"note at {m.budget:g}: {m.n_failed} of the {m.n_runs + m.n_failed} runs "
              "failed (crashed, or diverged under --diverged-above): compute spent, no loss"
              for m in rec.metrics if m.n_failed]
    for m in rec.metrics:
        for law, lm in (m.fantasized or {}).items():
            moved = [k for k, v in (lm.point_from or {}).items() if v == "posterior median"]
            if moved:
                notes.append(f"note at {m.budget:g}: the {law} law's point at {', '.join(moved)} "
                             "FLOPs is the law posterior's median: the fill-in's fit lies "
                             "outside the posterior's 80 % interval there")
    return notes


_LEGEND = ("source: observed = the law fitted on the runs trained, fantasized = on them plus "
           "the surrogate's predicted losses of the untried configurations in the window (the "
           "default point estimate; where it lies outside the law posterior's 80 % interval "
           "the posterior's median is, as a note says); "
           "runs: configurations trained (diverged ones included); spent: fraction of "
           "C_total; x_floor: spent / the "
           "compute floor (the cost of every cell's best configuration); env_% / cell_%: "
           "share of the reference envelope's configurations / of the (N, D) cells' best "
           "configurations trained; heldout_mse: nats^2 on the held-out cells; |d|%@C: "
           "|law - reference| / reference at C FLOPs, % (docs/records.md)")
_UNCHECKED = ("; status \"shape unchecked\": a term's variable (N or D) takes only 3 values in "
              "the points, and the term and E pass through them, so its exponent is not "
              "tested (the fit's message names it)")
_EXACT = ("; status \"exact\": as many frontier points as the law has parameters, so it "
          "passes through them and nothing tests it")


_LOOSE = ("; status {}: the law's parameters are not pinned down by these points, so its "
          "|d|% is a number, not a measure of the search")


def metric_legend(rows: list[dict[str, Any]]) -> str:
    """The table's legend; what status "exact", "unidentified" or "bound hit" mean only when
    a row has it."""
    said = {str(r.get("status", "")) for r in rows}
    exact = any("exact" in s for s in said)
    unchecked = any("shape unchecked" in s for s in said)
    loose = [f'"{s}"' for s in ("unidentified", "bound hit") if any(x.startswith(s) for x in said)]
    return (_LEGEND + (_EXACT if exact else "") + (_UNCHECKED if unchecked else "")
            + (_LOOSE.format(" / ".join(loose)) if loose else ""))
