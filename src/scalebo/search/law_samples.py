"""Joint posterior samples of a grid's losses for the law posterior (DESIGN.md).

:func:`draw_with_model` fits the surrogate (a copy) on the observed losses, standardized as in
:func:`~scalebo.search.fantasize.fantasize`, and draws S joint samples of the losses of every
configuration in scope, in nats: of the unobserved rows only, observed ones keeping their
recorded losses (``estimand="reference"``), or of every row from the latent posterior
(``"noise_free"``). :mod:`scalebo.search.law_posterior` fits the law on each sample.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from scalebo.errors import SearchError
from scalebo.search.fantasize import (
    MAX_STD_RATIO,
    _check_obs,
    _require_finite,
    _scope_mask,
    without_extrapolated,
)
from scalebo.search.grid import Grid
from scalebo.search.models.scaling import standardization
from scalebo.search.posterior_discrepancy import sample_joint

__all__ = ["CELL_COUPLING", "ESTIMANDS", "Draws", "check_estimand", "couple_cells",
           "draw_with_model", "sample_losses"]

#: Share ρ of each untried configuration's sampled deviation that its (N, D) cell's untried
#: configurations hold in common (:func:`couple_cells`). Measured (docs/reproduction.md,
#: "What changed in 0.4.4"): on the main comparison (Window, 10 seeds × 2 grids × 4 budgets)
#: the Chinchilla law's 80 / 95 % coverage at 1e25 FLOPs goes 69 / 81 % → 78 / 89 % (ρ 0.5:
#: 80 / 86 %, 0.7: 78 / 86 %, 1: 71 / 89 %), the compute law's 85 / 96 % → 83 / 95 %.
CELL_COUPLING = 0.85

#: What a posterior is about: ``"reference"``, the law a fit on every configuration in scope,
#: as recorded, would give (observed rows keep their recorded losses, the others are drawn
#: as recorded losses or latent ones, ``include_noise``); ``"noise_free"``, the law of the
#: noise-free losses (every row in scope, observed ones included, drawn from the latent
#: posterior), which is what a run at the target compute would follow.
ESTIMANDS: tuple[str, ...] = ("reference", "noise_free")


def check_estimand(estimand: str) -> None:
    """ValueError unless ``estimand`` is one of :data:`ESTIMANDS`."""
    if estimand not in ESTIMANDS:
        raise ValueError(f"unknown estimand {estimand!r}; expected one of {list(ESTIMANDS)}")


@dataclass(frozen=True, eq=False)
class Draws:
    """What :func:`draw_with_model` drew: ``rows`` in scope ``(m,)``, posterior-mean losses
    ``mean`` ``(m,)`` and samples ``draws`` ``(S, m)`` in nats, and the fitted copy of the
    surrogate with its standardization (``model`` predicts ``(loss − mu)/sd``; None when
    nothing was drawn), and the ``estimand`` they were drawn for."""

    rows: np.ndarray
    mean: np.ndarray
    draws: np.ndarray
    model: Any
    mu: float
    sd: float
    estimand: str = "reference"


def couple_cells(draws: np.ndarray, mean: np.ndarray, cells: np.ndarray, todo: np.ndarray,
                 rho: float = CELL_COUPLING) -> np.ndarray:
    """Samples whose untried configurations of one cell move together, ``(S, m)`` nats.

    A GP posterior draws the untried configurations of an (N, D) cell partly independently,
    so the minimum over a cell's draws — the cell's best, which every frontier and law fit
    reads — lies below the cell's true best more often than not (measured on both shared
    grids: the true best above 90 % of the draws' minima in 9–47 % of untried cells, where
    10 % is nominal), and a law fitted on those minima is biased low. Within each cell, at
    the positions ``todo`` (columns of ``draws``), the configuration with the lowest
    posterior ``mean`` (``j``) keeps its draw and every other one's deviation ``δ`` from its
    mean becomes ``√(1−ρ)·δ + √ρ·δ_j``: the cell's configurations share ρ of their
    deviation, and the correlation across cells (carried by ``δ_j``) is kept. Marginal
    spreads are kept where ``δ`` and ``δ_j`` are uncorrelated and grow where they are
    positively correlated (SD by up to ``√(1 + 2√(ρ(1−ρ)))``, 1.31 at ρ = 0.85); means are
    kept. ``rho`` 0: unchanged; 1: every untried configuration of a cell moves by ``δ_j``.

    Args:
        draws: Samples ``(S, m)``, nats. mean: Posterior means ``(m,)``, nats.
        cells: Cell id of each column ``(m,)``. todo: Columns that were drawn (untried).
        rho: ρ in [0, 1].
    """
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"cell coupling must lie in [0, 1], got {rho}")
    todo = np.asarray(todo, dtype=np.int64)
    out = np.array(draws, dtype=np.float64, copy=True)
    if rho == 0.0 or not todo.size:
        return out
    dev = out - mean
    for c in np.unique(cells[todo]):
        pos = todo[cells[todo] == c]
        j = pos[np.argmin(mean[pos])]
        other = pos[pos != j]
        out[:, other] = (mean[other] + np.sqrt(1.0 - rho) * dev[:, other]
                         + np.sqrt(rho) * dev[:, [j]])
    return out


def draw_with_model(grid: Grid, observed_idx: Any, y_obs: Any, surrogate: Any, scope: str,
                    cap: float | None, n_samples: int, include_noise: bool,
                    gen: np.random.Generator, estimand: str = "reference",
                    max_std_ratio: float | None = MAX_STD_RATIO,
                    cell_coupling: float = CELL_COUPLING,
                    failed: np.ndarray | None = None) -> Draws:
    """Rows in scope, posterior-mean losses and S joint samples (nats) of every
    configuration in scope, with the fitted surrogate (see :class:`Draws` and the module
    docstring; ``estimand``: :data:`ESTIMANDS`). Unobserved rows the surrogate only
    extrapolates to are left out of scope, as by the fill-in
    (:func:`~scalebo.search.fantasize.extrapolated`; ``max_std_ratio=None``: none). The
    untried configurations of a cell share ``cell_coupling`` of their deviation
    (:func:`couple_cells`; 0: the surrogate's joint draws as they are). Rows of ``failed``
    (runs that failed or diverged) are out of scope, as in the fill-in."""
    if n_samples < 1:
        raise SearchError(f"n_samples must be >= 1, got {n_samples}.")
    check_estimand(estimand)
    idx, y = _check_obs(grid, observed_idx, y_obs)
    observed = np.isin(np.arange(grid.n_configs), idx)
    rows = np.flatnonzero(_scope_mask(grid, observed, scope, cap, failed))  # no held-out
    mu, sd = standardization(y)  # as fantasize and the loop
    latent = estimand == "noise_free"
    model, X = None, None
    predicted = np.zeros(grid.n_configs)  # posterior means (nats) where predicted
    if not observed[rows].all() or latent:
        X = grid.encode()
        model = copy.deepcopy(surrogate)  # the caller's surrogate is left as it was
        model.fit(X[idx], (y - mu) / sd)
        # noise_free: the trained rows too, at their latent mean (the point fit's law)
        ask = rows if latent else rows[~observed[rows]]
        if ask.size:
            m_ask, s_ask = model.predict(X[ask])
            predicted[ask] = np.asarray(m_ask, dtype=np.float64) * sd + mu
            new = ~observed[ask]
            rows, _ = without_extrapolated(grid, rows, ask[new],
                                           np.asarray(s_ask)[new], max_std_ratio)
    loss = np.zeros(grid.n_configs)
    loss[idx] = y
    mean = loss[rows]
    draws = np.tile(mean, (n_samples, 1))
    todo = np.flatnonzero(~observed[rows])  # positions in rows
    drawn = np.arange(rows.size) if latent else todo  # observed rows too: their latent loss
    if drawn.size:
        mean[drawn] = predicted[rows[drawn]]
        draws[:, drawn] = sample_joint(model, X[rows[drawn]], n_samples, gen,
                                       include_noise and not latent) * sd + mu
        draws = couple_cells(draws, mean, grid.cell_ids[rows], todo, cell_coupling)
    _require_finite(mean)
    if not np.all(np.isfinite(draws)):
        raise SearchError("The surrogate's posterior samples are not finite; check its fit "
                          "(it was given standardized, finite losses).")
    return Draws(rows, mean, draws, model, float(mu), float(sd), estimand)


def sample_losses(
    grid: Grid,
    observed_idx: np.ndarray,
    y_obs: np.ndarray,
    surrogate: Any,
    *,
    scope: Literal["window", "grid"] = "window",
    cap: float | None = None,
    n_samples: int = 64,
    include_noise: bool = True,
    rng: np.random.Generator | int | None = None,
    estimand: str = "reference",
    cell_coupling: float = CELL_COUPLING,
    failed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Joint posterior samples of the losses of every configuration in scope.

    The surrogate (copied, not modified) is fitted on standardized observed losses as in
    :func:`~scalebo.search.fantasize.fantasize`; the unobserved rows in scope are sampled
    jointly with ``sample_joint`` and mapped back to nats; observed rows keep their observed
    losses in every sample (``estimand="reference"``) or are drawn jointly with the others
    from the latent posterior (``"noise_free"``, :data:`ESTIMANDS`). A surrogate whose
    ``sample_joint`` has no ``include_noise`` parameter is sampled as it is (under
    ``noise_free`` its draws at trained rows are then what it gives there, e.g. a tree
    ensemble's bag predictions, not a latent GP posterior).

    Args:
        grid: The grid. observed_idx: Observed grid rows ``(n_obs,)``, distinct.
        y_obs: Their losses, nats, ``(n_obs,)``.
        surrogate: ``fit``/``predict``/``sample_joint(X, n, rng[, include_noise=])``.
        scope, cap: ``"window"`` (cost ≤ ``cap`` FLOPs, default the costliest observed
            cell) or ``"grid"``; held-out cells are never included.
        n_samples: S. rng: Seed or generator of the samples.
        include_noise: Samples of a recorded loss (latent + observation noise), else latent
            (``"reference"`` only: ``"noise_free"`` samples are latent).
        estimand: ``"reference"`` or ``"noise_free"`` (:data:`ESTIMANDS`).
        cell_coupling: ρ of :func:`couple_cells` (0: the surrogate's joint draws as they are).
        failed: Grid rows whose run failed or diverged: out of scope (never drawn).

    Returns:
        ``rows`` — grid rows in scope, increasing, ``(m,)``; ``losses`` — nats, ``(S, m)``.
        Raises SearchError on bad observations or scope, or non-finite samples.
    """
    d = draw_with_model(grid, observed_idx, y_obs, surrogate, scope, cap, n_samples,
                        include_noise, np.random.default_rng(rng), estimand,
                        cell_coupling=cell_coupling, failed=failed)
    return d.rows, d.draws
