"""The noise floor of a campaign's law: how much could more runs of this grid still narrow it?

Under ``estimand="noise_free"`` (:mod:`scalebo.search.law_samples`) the law posterior's
interval keeps the observation noise of the trained runs, so on a noisy grid it never
reaches a tolerance of ±0.5 %: StepLaw's noise-free 80 % interval at 1e25 FLOPs stays near
±4 % from 10 % to 25 % of ``C_total``. Whether to stop then depends on whether more runs
*can* narrow it. This module answers that for the compute law ``L(C) = E + A·C^−α`` at each
target compute (FLOPs), by linearization:

* draw S joint samples of the latent losses of every configuration of the grid (not held
  out), fit the law on each sample's Pareto envelope (one batched fit) and average the
  sensitivities ``w = E_s[∂ log L̂_s(C*)/∂f]`` (1/nats; Stein's lemma, implicit function
  theorem: :func:`~scalebo.search.target.stein_weights`);
* ``Var_now = wᵀ Σ w`` with ``Σ`` the surrogate's latent posterior covariance (nats²) of
  the rows ``w`` weighs; ``Var_all = wᵀ Σ' w`` with ``Σ'`` the same after conditioning
  (hyperparameters fixed) on one more noisy run of **every untried configuration** of the
  grid — the most any amount of this grid's compute could teach;
* ``ratio = √(Var_all / Var_now)`` in [0, 1]: the factor by which training everything left
  would narrow the interval. ``ratio`` near 1: the interval is at the grid's noise floor,
  ``floor = ratio × half-width``; near 0: untried configurations would still move the law.

The ratio is grid-wide (every configuration in the law's scope, the most any run could teach)
and multiplies the interval's own half-width, whatever its scope, into the floor shown by
``scalebo status``. The linearization keeps the current envelope (rows the law fits now); an
untried cell that would join the envelope enters through its draws, which are on it in the
samples where they are low.

The floor is only as good as the GP's noise estimate. Early on, a GP whose length scales are
too long explains its misfit as noise (synthetic grid, true noise 0.005 nats: 0.021 and
0.036 nats fitted at 10 and 30 % of the configurations, 0.004–0.005 from 60 %), which makes
the floor too high (the fully trained grid's half-width at 1e21 FLOPs was 0.16 %, the floor
read 0.42 and 0.98 % at 10 and 30 %), although the ratio stayed low there (0.27, 0.65), so
the rule did not stop; its ``min_shrink`` was chosen on replays (docs/reproduction.md). A
GP whose noise sits at its lower bound cannot tell noise from signal: then there is no floor
(``ratio`` None and a message). Costs one latent posterior over the grid (S draws and fits;
none when the caller's noise-free posterior already covers the grid, ``prepared``) and one
``O(k³)`` conditioning on the ``k`` untried configurations (StepLaw, 1,911 configurations:
1.5–4 s on 2 busy cores with its own draws, about 0.7 s reusing them). Units: compute in
FLOPs, losses in nats.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalebo.errors import SearchError
from scalebo.search.fantasize import _scope_mask
from scalebo.search.grid import Grid
from scalebo.search.law_posterior import LawPosterior, _one_law
from scalebo.search.law_samples import CELL_COUPLING, draw_with_model
from scalebo.search.target import stein_weights
from scalebo.search.target_draws import recorded_cov, wrapped

__all__ = ["NoiseFloor", "floor_applies", "noise_floor"]


@dataclass(frozen=True)
class NoiseFloor:
    """How far more runs of the grid could narrow the compute law's interval (module doc).

    Attributes:
        targets: Target computes, FLOPs.
        ratio: Per target, ``√(Var_all/Var_now)`` of ``log L̂(C)`` in [0, 1] (1: no untried
            configuration can narrow it), or None when it could not be computed.
        n_untried: Untried configurations conditioned on.
        n_fits: Successful law fits of the S samples that gave the sensitivities.
        n_samples: S.
        seconds: Wall-clock seconds.
        message: Why ``ratio`` is None ('' otherwise).
    """

    targets: tuple[float, ...]
    ratio: tuple[float | None, ...]
    n_untried: int
    n_fits: int
    n_samples: int
    seconds: float
    message: str = ""

    def floor(self, half_widths: Sequence[float | None]) -> tuple[float | None, ...]:
        """The half-widths (any relative unit) training everything left could reach:
        ``ratio × half_width`` per target (None where either is None)."""
        return tuple(None if r is None or w is None else r * w
                     for r, w in zip(self.ratio, half_widths, strict=True))


def floor_applies(post: LawPosterior | None, estimand: str) -> bool:
    """Whether a noise floor is worth computing for ``post``: a noise-free interval of the
    compute law with a converged point fit to scale (the stop rule stops on nothing else,
    so the campaign status and the replayed rule skip the floor otherwise)."""
    return (estimand == "noise_free" and post is not None and post.law == "compute"
            and post.point is not None and str(post.point.status) == "converged"
            and post.predicted_loss.size > 0)


def _none(targets: tuple[float, ...], why: str, **kw: Any) -> NoiseFloor:
    return NoiseFloor(targets, (None,) * len(targets), message=why,
                      **{"n_untried": 0, "n_fits": 0, "n_samples": 0, "seconds": 0.0} | kw)


def _noise_at_bound(model: Any) -> bool:
    """Whether the (innermost) GP's fitted noise variance is at its lower bound."""
    model = wrapped(model, "noise_")
    if model is None or not hasattr(model, "noise_bounds"):
        return False
    return bool(model.noise_ <= float(model.noise_bounds[0]) * (1 + 1e-3))


def _reusable(grid: Grid, post: LawPosterior | None, observed: np.ndarray,
              exclude: np.ndarray) -> bool:
    """Whether ``post`` holds noise-free compute-law draws over every configuration but
    those of ``exclude`` not in ``observed`` (rows never trained: out of every scope)."""
    d = None if post is None else post.samples
    if d is None or post.law != "compute" or d.estimand != "noise_free" or d.model is None:
        return False
    trained = np.zeros(grid.n_configs, dtype=bool)
    trained[observed] = True
    return np.array_equal(d.rows, np.flatnonzero(_scope_mask(grid, trained, "grid", None,
                                                              exclude)))


def noise_floor(grid: Grid, observed_idx: np.ndarray, y_obs: np.ndarray, surrogate: Any, *,
                targets: Sequence[float] = (1e25,), n_samples: int = 64, n_starts: int = 8,
                rng: np.random.Generator | int | None = None,
                exclude: Sequence[int] = (), prepared: LawPosterior | None = None,
                cell_coupling: float = CELL_COUPLING) -> NoiseFloor:
    """The noise-floor ratio of the compute law at each target (see the module docstring).

    Args:
        grid: The grid. observed_idx: Trained grid rows ``(n_obs,)``, distinct.
        y_obs: Their losses, nats, ``(n_obs,)``.
        surrogate: A GP-like surrogate (copied, not modified) with ``fit``, ``predict``,
            ``sample_joint``, ``condition_on`` and a ``posterior_cov`` (itself or inside its
            wrappers); without them the ratio is None and ``message`` says why.
        targets: Target computes, FLOPs. n_samples: S. n_starts: Starts per law fit.
        rng: Seed or generator of the samples.
        exclude: Grid rows that will not be trained (e.g. a campaign's failed runs): not
            conditioned on, and out of the draws' scope (as in the law posterior's
            ``failed``). Rows in flight should be left in: they will be observed.
        prepared: The compute law's posterior from the same observations and surrogate,
            drawn with ``estimand="noise_free"`` over every configuration (scope ``"grid"``)
            and ``keep_samples=True``: its draws, fits and fitted surrogate are reused
            (what ``scalebo status`` does); ignored,
            and everything drawn anew, when it is not such a posterior.
        cell_coupling: ρ of :func:`~scalebo.search.law_samples.couple_cells` for draws made
            here (a ``prepared`` posterior keeps its own).

    Raises:
        SearchError: bad observations; ValueError: a target that is not a positive FLOP count.
    """
    t0 = time.perf_counter()
    C = tuple(float(c) for c in targets)
    if not C or not all(np.isfinite(c) and c > 0 for c in C):
        raise ValueError(f"targets must be positive, finite FLOPs; got {list(targets)}")
    for need in ("condition_on", "sample_joint"):
        if not hasattr(surrogate, need):
            return _none(C, f"the surrogate has no {need}: no noise floor")
    obs = np.asarray(observed_idx, dtype=np.int64).ravel()
    gone = np.asarray(exclude, dtype=np.int64).ravel()
    post = prepared if _reusable(grid, prepared, obs, gone) else None
    d = post.samples if post is not None else draw_with_model(
        grid, observed_idx, y_obs, surrogate, "grid", None, n_samples, False,
        np.random.default_rng(rng), "noise_free", cell_coupling=cell_coupling, failed=gone)
    never = np.concatenate([obs, gone])
    untried = d.rows[~np.isin(d.rows, never)]
    if _noise_at_bound(d.model):
        return _none(C, "the GP's noise variance is at its lower bound: it cannot tell the "
                     "runs' noise from the law, so there is no floor",
                     seconds=time.perf_counter() - t0, n_untried=int(untried.size),
                     n_samples=int(n_samples))
    if post is None:
        post = _one_law("compute", grid, d.rows, d.mean, d.draws, np.asarray(C), n_starts, 0.0)
    n_ok = int(post.sample_index.size)
    kw = {"n_untried": int(untried.size), "n_fits": n_ok, "n_samples": int(d.draws.shape[0])}
    if n_ok < 2:
        return _none(C, f"{n_ok} of {kw['n_samples']} law fits succeeded (need 2)"
                     + (f": {post.message}" if post.message else ""),
                     seconds=time.perf_counter() - t0, **kw)
    F = d.draws[post.sample_index]
    W = np.array([stein_weights(grid.cost[d.rows], F, post.thetas(), c) for c in C])  # (t, m)
    support = np.flatnonzero(np.any(W != 0, axis=0))
    if support.size == 0:
        return _none(C, "the law's prediction does not depend on any configuration's loss "
                     "(every fit at a bound or outside the Huber δ)",
                     seconds=time.perf_counter() - t0, **kw)
    X = grid.encode()
    Xs = X[d.rows[support]]
    now = recorded_cov(d.model, Xs, include_noise=False)
    if now is None:
        return _none(C, "the surrogate exposes no posterior_cov: no noise floor",
                     seconds=time.perf_counter() - t0, **kw)
    after = now
    if untried.size:
        try:  # kriging believer: the values do not change the covariance
            full = d.model.condition_on(X[untried], np.asarray(d.model.predict(X[untried])[0]))
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise SearchError(f"conditioning on the untried configurations failed: {exc}"
                              ) from exc
        after = recorded_cov(full, Xs, include_noise=False)
    ratios: list[float | None] = []
    for w in W[:, support]:
        v_now, v_all = float(w @ now @ w), float(w @ after @ w)
        ratios.append(float(np.sqrt(min(max(v_all, 0.0) / v_now, 1.0))) if v_now > 0
                      else None)
    message = "" if all(r is not None for r in ratios) else (
        "the posterior variance of the rows the law depends on is 0 at some target")
    return NoiseFloor(C, tuple(ratios), seconds=time.perf_counter() - t0, message=message, **kw)
