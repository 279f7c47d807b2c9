"""N* and D* of the runs alone, beside the law posterior's: where the fill-in moves them.

``scalebo status`` gives N* and D* from the Chinchilla law's posterior over the whole grid:
each sample fits the completed runs together with the GP's draws for every untrained
configuration. ``scalebo fit --law chinchilla`` fits the same runs alone. Where the two
disagree, the GP-filled cells are what moves the allocation, and the user should know it
(a campaign trial on a grid of its own made from a known law: the posterior's 80 % interval
of N* at the grid's largest compute, [3.3e8, 3.9e8], excluded both the truth, 4.02e8, and the
runs' own fit, 3.99e8). :func:`runs_only_note` fits the runs alone as ``fit`` does (the best
run of each (N, D) cell, the law's default start grid) and names every target where its N*
lies outside the posterior's 80 % interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["runs_only_note"]


def runs_only_note(N: np.ndarray, D: np.ndarray, loss: np.ndarray, summary: dict | None,
                   targets: tuple[float, ...]) -> str:
    """A note naming the targets (FLOPs) where N* of the Chinchilla law fitted on the
    completed runs alone (parameters ``N``, tokens ``D``, losses in nats, ``(n,)`` each)
    lies outside the 80 % interval (q10–q90) of the posterior's N* in ``summary`` (the
    Chinchilla posterior's ``summary()``); "" when they agree, when there is no interval,
    or when the runs alone do not give a converged fit."""
    if not summary or not summary.get("N_opt"):
        return ""
    fit = _runs_fit(np.asarray(N, float), np.asarray(D, float), np.asarray(loss, float))
    if fit is None:
        return ""
    from scalebo.fitting.allocation import compute_optimal
    from scalebo.search.law_posterior import target_key

    said = []
    for C in targets:
        q = summary["N_opt"].get(target_key(C)) or {}
        low, high = q.get("q10"), q.get("q90")
        if low is None or high is None:
            continue
        best = compute_optimal(fit, float(C), warn=False)
        if not low <= best.N_opt <= high:
            said.append(f"N* {best.N_opt:.3g}, D* {best.D_opt:.3g} at {C:.3g} FLOPs (the "
                        f"posterior's 80 % interval of N*: [{low:.3g}, {high:.3g}])")
    if not said:
        return ""
    return ("the Chinchilla law fitted on the completed runs alone (as scalebo fit --law "
            "chinchilla does) gives " + "; ".join(said) + ": the configurations the GP fills "
            "in move the allocation; until more runs agree, neither is sure")


def _runs_fit(N: np.ndarray, D: np.ndarray, loss: np.ndarray) -> Any:
    """The Chinchilla fit on each (N, D) cell's best finite loss, as ``scalebo fit --law
    chinchilla`` makes it (:func:`~scalebo.fitting.frontier.best_per_cell`, the law's start
    grid), or None (no more cells than parameters, or a fit that did not converge)."""
    import warnings

    import pandas as pd

    from scalebo.fitting.frontier import best_per_cell
    from scalebo.fitting.robust import FitStatus, fit_law
    from scalebo.laws import get_law

    law = get_law("chinchilla")
    ok = np.isfinite(loss) & (N > 0) & (D > 0)
    best = best_per_cell(pd.DataFrame({"N": N[ok], "D": D[ok], "loss": loss[ok]}))
    if len(best) <= law.n_params:  # an exactly determined fit tests nothing
        return None
    X = best[["N", "D"]].to_numpy(dtype=np.float64)
    with warnings.catch_warnings():  # the status says what it finds in its own words
        warnings.simplefilter("ignore")
        fit = fit_law(law, X, best["loss"].to_numpy(), starts=law.start_grid(law.prepare(X)))
    return fit if fit.status is FitStatus.CONVERGED else None
