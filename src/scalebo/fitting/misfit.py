"""Checks of a fitted law against the runs it claims to describe, beyond the optimizer's status.

A fit can converge (the optimizer found the best parameters of this form) and still
contradict its own data. Two contradictions need no noise model, because losses of trained
runs fall with compute and the irreducible loss ``E`` is a floor no run goes under:

* ``E`` above the best loss of the runs (nats): the law says no model reaches a loss some run
  already reached;
* a predicted compute-optimal loss at a compute ``C`` beyond every run's above the best run's
  loss: more compute, optimally spent, would do worse than a run already did. (Inside the
  runs' range a fit passes through their noise, so a prediction there is not checked.)

Either one means the law's form does not follow these runs (or the fit went to a poor
optimum), whatever its status says. Measured case: Porian et al.'s ``rw``/tuned/short/const
isoFLOP points give a "converged" Chinchilla fit with E = 3.13 nats and 3.17 at 1e21 FLOPs,
while a run at 2.6e19 FLOPs reached 3.097.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["diverged_points_note", "falling_error_note", "misfit_notes",
           "rising_response_note"]


def misfit_notes(law_name: str, params: Mapping[str, float], C: np.ndarray, loss: np.ndarray,
                 predictions: Sequence[Mapping[str, Any]] = (), response: str = "loss"
                 ) -> list[str]:
    """Warning texts for the contradictions of the module docstring, or an empty list.

    Args:
        law_name: The law's name, for the messages.
        params: The fitted natural parameters (``E`` checked when present, in the
            response's unit).
        C: Compute of every valid run, FLOPs, ``(n,)``.
        loss: Their fitted response (the loss, nats, or ``response``), ``(n,)``.
        predictions: Rows with ``C`` (FLOPs) and ``loss`` (nats), as ``scalebo fit`` prints;
            those at a compute beyond the largest run's are checked.
        response: The fitted column's name: the messages say "loss" and nats only for
            ``"loss"`` (any response a sum of power laws fits falls to ``E`` alike).
    """
    C = np.asarray(C, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    ok = np.isfinite(C) & np.isfinite(loss)
    C, loss = C[ok], loss[ok]
    if not loss.size:
        return []
    notes = []
    best = int(np.argmin(loss))
    E = params.get("E")
    what, unit = ("loss", " nats") if response == "loss" else (repr(response), "")
    if E is not None and np.isfinite(E) and E > loss[best]:
        notes.append(f"the {law_name} law's irreducible {what} E = {E:.4g}{unit} is above the "
                     f"best run's {what} ({loss[best]:.4g}{unit} at {C[best]:.3g} FLOPs): the "
                     "law says no model gets there, so it does not describe these runs "
                     "whatever its status says (another law, or the frontier's runs only?)")
    for row in predictions:
        c, value = float(row["C"]), float(row["loss"])
        if c <= C.max() or not np.isfinite(value):  # inside the runs, a fit runs through
            continue                                   # their noise: no contradiction
        if value > loss[best]:
            notes.append(f"the {law_name} law predicts {value:.4g}{unit} at {c:.3g} FLOPs, "
                         f"above the {loss[best]:.4g}{unit} a run already reached with "
                         f"{C[best]:.3g} FLOPs: "
                         "the prediction contradicts the runs it is fitted on")
    return notes


def _trend(x: np.ndarray, y: np.ndarray, falling: bool) -> float | None:
    """Spearman ρ of ``y`` against ``x`` when it clearly trends the asked way (|ρ| > 0.5,
    one-sided p < 0.01, over ≥ 5 finite pairs; at n = 5 pure noise passes ρ > 0.5 alone
    17.5 % of the time, hence the p-value too), else None."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 5 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return None
    res = spearmanr(x[ok], y[ok], alternative="less" if falling else "greater")
    rho = float(res.statistic)
    strong = rho < -0.5 if falling else rho > 0.5
    return rho if strong and float(res.pvalue) < 0.01 else None


def falling_error_note(loss: np.ndarray, y: np.ndarray, target: str) -> str:
    """A note when a downstream law's response (an error, which rises with the loss) falls
    as the loss rises (:func:`_trend`): an accuracy given where the law expects an error;
    "" otherwise."""
    if (rho := _trend(loss, y, falling=True)) is None:
        return ""
    return (f"{target!r} falls as the loss rises (Spearman {rho:.2f}): an accuracy? The "
            f"downstream laws describe an error, which rises with the loss: fit 1 − accuracy")


def rising_response_note(C: np.ndarray, y: np.ndarray, target: str) -> str:
    """A note when the response ``target`` of a law that falls with scale (a sum of power
    laws) rises with the runs' compute ``C`` (FLOPs; :func:`_trend`): an accuracy fitted as
    a loss, whose exponents then sit at a bound; "" otherwise."""
    if (rho := _trend(C, y, falling=False)) is None:
        return ""
    return (f"{target!r} rises with compute (Spearman {rho:.2f}) where this law falls with "
            "scale toward E: an accuracy? Fit a quantity that falls, e.g. 1 − accuracy")


def diverged_points_note(points: Any, target: str = "loss") -> str:
    """A note when fitted points (a run table's rows with ``N``, ``D``, ``C`` and the loss
    ``target``, nats; index: file rows) hold losses that look like diverged runs
    (:func:`~scalebo.search.runs_columns.suspect_diverged`, as a replay and a campaign judge
    them), naming their data rows; "" otherwise (a response other than the loss is not
    judged). Such a loss is still fitted, where it pulls the law up."""
    from scalebo.errors import data_rows, file_rows
    from scalebo.search.runs_columns import diverged_rule, suspect_diverged

    if target != "loss" or not {"N", "D", "C", target} <= set(points.columns):
        return ""
    cells = points.groupby(["N", "D"], sort=False).ngroup().to_numpy()
    loss = points[target].to_numpy(dtype=np.float64)
    high, median = suspect_diverged(loss, cells, points["C"].to_numpy(float))
    if not high.any():
        return ""
    return (f"{data_rows(file_rows(points.index, high))}: a loss {diverged_rule()} (up to "
            f"{loss[high].max():.4g} nats; the median cell best is {median:.4g}) is fitted: "
            "diverged runs? Leave their loss empty (NaN), or --diverged-above LOSS "
            "(diverged_above= in Python) leaves them out")
