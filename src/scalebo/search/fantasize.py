"""Fantasization: fill the unobserved part of the grid with surrogate predictions.

In scalebo, *fantasization* means: after the search has spent its budget, a surrogate fitted
on **all** observations predicts the loss of the configurations that were not trained; the
observed losses plus these predictions form the table that the frontier and the law fit use.
(This is not BoTorch's ``fantasize``, which samples fake observations at pending points to
condition a model during batch acquisition.)

Two estimators:

* ``"mean"`` — one row per configuration: the observed loss where observed, else the
  posterior mean (as published). The minimum of posterior means over a cell is biased
  upward when the acquisition concentrated its runs: the unobserved configurations' means
  regress toward the average, while the true cell best is a minimum.
* ``"cell_best"`` — one row per (N, D) cell: the expected minimum loss of the cell,
  ``E[min_x f(x)]`` over joint posterior samples of the cell's unobserved configurations
  (``sample_joint``), with observed configurations fixed at their observed values. The row
  carries the hyperparameters of the configuration most often the minimizer (``p_best`` is
  that frequency). Any frontier (per-cell best, envelope, convex hull) applies unchanged.

Scope: ``"window"`` (default) keeps configurations costing ≤ ``cap`` FLOPs (the search's
final window; default the largest cell cost with an observation), ``"grid"`` every
acquirable configuration. Held-out cells are never included. Observed configurations are
always included.

Extrapolation guard (since 0.3.9): an unobserved configuration whose posterior standard
deviation exceeds ``max_std_ratio`` (default :data:`MAX_STD_RATIO` = 5) times that of the most
certain unobserved configuration of its own (N, D) cell is left out (:func:`extrapolated`):
the surrogate is only extrapolating there (a corner of the hyperparameter box no run of a
similar scale bracketed), and its mean can lie far under anything observed. Every cell keeps
its most certain unobserved configuration, so no cell is lost; most of what is left out
is far from every run and far above the cell's best (on StepLaw at 25 % about 60 % of each
cell's unobserved configurations, mostly diverging learning rates), which no frontier uses.
Tried, not kept: also requiring a std above the median over the scope (so that a cell whose
most certain configuration is almost observed flags fewer): on the case below it kept a
corner 0.16 nats too low and the law stayed 10.7 % off. Measured (StepLaw, 25 %,
seed 2): seven corner configurations (high learning rate, batch 1,024-2,048) were filled in
0.09-0.48 nats under their recorded losses with standard deviations 5-25x their cells'
smallest, and took the compute law 22 % off at 1e25 FLOPs; with the guard it is exact.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.models.scaling import standardization
from scalebo.search.window import COST_RTOL

#: Default of ``max_std_ratio`` (:func:`extrapolated`): measured on StepLaw, OELLM-English and
#: three synthetic grids (10 seeds, 1-25 % budgets), 5 changes only the fill-ins it is meant
#: for; 2-3 also move 1 % budgets (both ways), 10 misses some of them.
MAX_STD_RATIO = 5.0


def extrapolated(cells: np.ndarray, std: np.ndarray, ratio: float | None) -> np.ndarray:
    """Which unobserved configurations the surrogate only extrapolates to, ``(m,)`` bool.

    Args:
        cells: (N, D) cell id of each unobserved configuration, ``(m,)``.
        std: Its posterior standard deviation (any units, the same for all), ``(m,)``.
        ratio: A configuration is extrapolated when its ``std`` exceeds ``ratio`` times the
            smallest ``std`` in its cell; ``None`` or ``inf``: none is.

    The most certain configuration of every cell is never flagged.
    """
    cells = np.asarray(cells).ravel()
    std = np.asarray(std, dtype=np.float64).ravel()
    if ratio is None or not np.isfinite(ratio) or std.size == 0:
        return np.zeros(std.size, dtype=bool)
    if ratio < 1:
        raise SearchError(f"max_std_ratio must be >= 1 (or None), got {ratio}.")
    _, inv = np.unique(cells, return_inverse=True)
    smallest = np.full(inv.max() + 1, np.inf)
    np.minimum.at(smallest, inv, std)
    return std > ratio * smallest[inv]


def without_extrapolated(grid: Grid, rows: np.ndarray, new: np.ndarray, std: np.ndarray,
                         ratio: float | None) -> tuple[np.ndarray, int]:
    """``rows`` (grid rows in scope) without those of ``new`` (its unobserved rows, whose
    posterior standard deviations are ``std``) that :func:`extrapolated` flags, and how many
    were left out; the one definition the fill-in and the law posterior's scope share."""
    flag = extrapolated(grid.cell_ids[new], std, ratio)
    return rows[~np.isin(rows, new[flag])], int(flag.sum())


def guard_note(n_left_out: int, ratio: float | None) -> str:
    """What the extrapolation guard left out, for records and logs ('' when nothing)."""
    if not n_left_out:
        return ""
    return (f"{n_left_out} unobserved configuration(s) left out of the fill-in: posterior "
            f"std over {ratio:g}x their cell's most certain one (extrapolated)")


def _check_obs(grid: Grid, observed_idx: Any, y_obs: Any) -> tuple[np.ndarray, np.ndarray]:
    idx = np.asarray(observed_idx, dtype=np.int64).ravel()
    y = np.asarray(y_obs, dtype=np.float64).ravel()
    if idx.shape != y.shape:
        raise SearchError(
            f"observed_idx and y_obs must have one entry each per run, got {idx.size} and "
            f"{y.size}."
        )
    if idx.size == 0:
        raise SearchError("Fantasization needs at least one observation to fit the surrogate.")
    if np.any((idx < 0) | (idx >= grid.n_configs)) or np.unique(idx).size != idx.size:
        raise SearchError(
            f"observed_idx must hold distinct grid rows in 0..{grid.n_configs - 1}; "
            "average repeated runs upstream."
        )
    check_losses(idx, y, positive=False)
    return idx, y


def check_losses(idx: np.ndarray, y: np.ndarray, *, positive: bool = True) -> None:
    """Raise SearchError naming the first observed loss ``y`` (nats) that is not finite (or,
    with ``positive``, not > 0, as a law fitted in log space needs), by its position and
    grid row ``idx``."""
    ok = np.isfinite(y) & (y > 0) if positive else np.isfinite(y)
    if bad := np.flatnonzero(~ok).tolist():
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise SearchError(f"Observed losses must be finite{' and > 0' if positive else ''} "
                          f"(nats): y_obs[{bad[0]}], grid row {int(idx[bad[0]])}, is "
                          f"{float(y[bad[0]])!r}{more}.")


def _scope_mask(
    grid: Grid, observed: np.ndarray, scope: str, cap: float | None,
    failed: np.ndarray | None = None,
) -> np.ndarray:
    """Rows in ``scope`` (cost ≤ ``cap`` for ``"window"``; default cap: the costliest
    observed cell), observed rows always, never a held-out row nor a row of ``failed``
    (grid rows whose run failed or diverged and was not told later: known not to be a
    usable configuration)."""
    if scope == "grid":
        keep = np.ones(grid.n_configs, dtype=bool)
    elif scope == "window":
        if cap is None:
            cap = float(grid.config_cell_cost[observed].max())
        keep = grid.cost <= cap * (1 + COST_RTOL)
    else:
        raise SearchError(f"scope must be 'window' or 'grid', got {scope!r}.")
    keep = (keep | observed) & ~grid.held_out
    if failed is not None and np.size(failed):  # a failed run retried and told stays
        gone = np.asarray(failed, dtype=np.int64)
        keep[gone[~observed[gone]]] = False
    return keep


def fantasize(
    grid: Grid,
    observed_idx: np.ndarray,
    y_obs: np.ndarray,
    surrogate: Any,
    *,
    scope: Literal["window", "grid"] = "window",
    cap: float | None = None,
    estimator: Literal["mean", "cell_best"] = "mean",
    n_samples: int = 256,
    rng: np.random.Generator | int | None = None,
    max_std_ratio: float | None = MAX_STD_RATIO,
    failed: np.ndarray | None = None,
) -> pd.DataFrame:
    """Observed losses plus surrogate predictions for the unobserved configurations.

    The surrogate is fitted here on standardized observed losses (``fit(X, y)`` on
    :meth:`Grid.encode` inputs) and its predictions are mapped back to nats.

    Args:
        grid: The grid.
        observed_idx: Grid rows observed, shape ``(n_obs,)``, distinct.
        y_obs: Their losses in nats, shape ``(n_obs,)``.
        surrogate: ``fit``/``predict``; ``sample_joint(X, n_samples, rng)`` for
            ``"cell_best"`` (without it, independent normal samples from ``predict`` are used,
            which ignore correlations within a cell).
        scope: ``"window"`` (cost ≤ ``cap``) or ``"grid"``.
        cap: Window cap in FLOPs; default the largest cell cost with an observation.
        estimator: ``"mean"`` or ``"cell_best"`` (see the module docstring).
        n_samples: Joint posterior samples per cell for ``"cell_best"``.
        rng: Seed or generator for the samples.
        max_std_ratio: Extrapolation guard (module docstring, :func:`extrapolated`);
            None: every configuration in scope is filled in.
        failed: Grid rows whose run failed or diverged, ``(k,)``: never filled in (the
            surrogate, which never saw them, would predict them like their neighbours).

    Returns:
        ``"mean"``: one row per configuration in scope, columns of :attr:`Grid.configs`
        (N, D, C, axes) plus ``loss`` (nats), ``observed`` (bool) and ``grid_index``.
        ``"cell_best"``: one row per (N, D) cell in scope, the same columns (axes of the most
        frequent minimizer) plus ``p_best``. ``attrs["n_extrapolated"]``: configurations
        the guard left out.
    """
    if estimator not in ("mean", "cell_best"):
        raise SearchError(f"estimator must be 'mean' or 'cell_best', got {estimator!r}.")
    if n_samples < 1:
        raise SearchError(f"n_samples must be >= 1, got {n_samples}.")
    idx, y = _check_obs(grid, observed_idx, y_obs)
    observed = np.zeros(grid.n_configs, dtype=bool)
    observed[idx] = True
    keep = _scope_mask(grid, observed, scope, cap, failed)

    mu, sd = standardization(y)
    X = grid.encode()
    surrogate.fit(X[idx], (y - mu) / sd)

    loss = np.full(grid.n_configs, np.nan)
    loss[idx] = y
    rows = np.flatnonzero(keep)
    todo = rows[~observed[rows]]
    n_out = 0
    if todo.size:
        mean, std = surrogate.predict(X[todo])
        loss[todo] = np.asarray(mean, dtype=np.float64) * sd + mu
        rows, n_out = without_extrapolated(grid, rows, todo, std, max_std_ratio)
    if estimator == "mean":
        _require_finite(loss[rows])
        out = grid.configs.iloc[rows].copy()
        out["loss"] = loss[rows]
        out["observed"] = observed[rows]
        out["grid_index"] = rows
        out = out.reset_index(drop=True)
        out.attrs["n_extrapolated"] = n_out
        return out

    gen = np.random.default_rng(rng)
    records = []
    for cell in np.unique(grid.cell_ids[rows]):
        members = rows[grid.cell_ids[rows] == cell]
        obs_m = members[observed[members]]
        new_m = members[~observed[members]]
        # Columns: observed members (constant), then sampled ones; (n_samples, n_members)
        draws = np.empty((n_samples, members.size))
        draws[:, : obs_m.size] = loss[obs_m]
        if new_m.size:
            draws[:, obs_m.size :] = _sample(surrogate, X[new_m], n_samples, gen) * sd + mu
        _require_finite(draws)
        order = np.concatenate([obs_m, new_m])
        winners = np.bincount(draws.argmin(axis=1), minlength=members.size)
        rep = int(order[winners.argmax()])
        rec = grid.configs.iloc[rep].to_dict()
        rec.update(
            loss=float(draws.min(axis=1).mean()),
            observed=bool(observed[rep]),
            grid_index=rep,
            p_best=float(winners.max() / n_samples),
        )
        records.append(rec)
    out = pd.DataFrame.from_records(records)
    out.attrs["n_extrapolated"] = n_out
    return out


def _sample(surrogate: Any, X: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Posterior samples at ``X`` ``(m, d)`` in standardized units, shape ``(n, m)``."""
    if hasattr(surrogate, "sample_joint"):
        s = np.asarray(surrogate.sample_joint(X, n, rng), dtype=np.float64)
        if s.shape != (n, X.shape[0]):
            raise SearchError(
                f"sample_joint returned shape {s.shape}, expected ({n}, {X.shape[0]})."
            )
        return s
    mean, std = surrogate.predict(X)
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    return mean[None, :] + std[None, :] * rng.standard_normal((n, X.shape[0]))


def _require_finite(values: np.ndarray) -> None:
    if not np.all(np.isfinite(values)):
        raise SearchError(
            "The surrogate predicted non-finite losses; check its fit (it was given "
            "standardized, finite losses)."
        )

