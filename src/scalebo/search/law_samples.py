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

__all__ = ["ESTIMANDS", "Draws", "check_estimand", "draw_with_model", "sample_losses"]

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


def draw_with_model(grid: Grid, observed_idx: Any, y_obs: Any, surrogate: Any, scope: str,
                    cap: float | None, n_samples: int, include_noise: bool,
                    gen: np.random.Generator, estimand: str = "reference",
                    max_std_ratio: float | None = MAX_STD_RATIO) -> Draws:
    """Rows in scope, posterior-mean losses and S joint samples (nats) of every
    configuration in scope, with the fitted surrogate (see :class:`Draws` and the module
    docstring; ``estimand``: :data:`ESTIMANDS`). Unobserved rows the surrogate only
    extrapolates to are left out of scope, as by the fill-in
    (:func:`~scalebo.search.fantasize.extrapolated`; ``max_std_ratio=None``: none)."""
    if n_samples < 1:
        raise SearchError(f"n_samples must be >= 1, got {n_samples}.")
    check_estimand(estimand)
    idx, y = _check_obs(grid, observed_idx, y_obs)
    observed = np.isin(np.arange(grid.n_configs), idx)
    rows = np.flatnonzero(_scope_mask(grid, observed, scope, cap))  # no held-out row
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

    Returns:
        ``rows`` — grid rows in scope, increasing, ``(m,)``; ``losses`` — nats, ``(S, m)``.
        Raises SearchError on bad observations or scope, or non-finite samples.
    """
    d = draw_with_model(grid, observed_idx, y_obs, surrogate, scope, cap, n_samples,
                        include_noise, np.random.default_rng(rng), estimand)
    return d.rows, d.draws
