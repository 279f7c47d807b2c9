"""Bootstrap of formula-law fits: percentile intervals for parameters and predictions.

Conventions (as :mod:`scalebo.fitting.bootstrap` for the built-in laws):

* replicate ``b`` resamples the ``n`` rows with replacement (seeded), which is refitting with
  integer weights drawn from ``Multinomial(n, 1/n)``, on the same residuals and δ as the
  full-data fit (:func:`~scalebo.fitting.formula_fit.fit_formula`): Huber on log residuals,
  or least squares (or Huber) on natural ones;
* starts of each replicate: the full fit's best parameters and up to ``n_optima − 1`` other
  distinct local optima of it, plus ``n_random`` seeded random starts inside the bounds
  (:meth:`~scalebo.laws.formula.FormulaLaw.random_starts`), so a resample whose optimum moved
  to another basin can still find it;
* all replicates' starts are optimized in **one batch** of the vectorized L-BFGS (screening,
  then every finite start polished to tight tolerances, as ``fit_formula`` does for its best
  64); the best start of each replicate is then refined by bounded Gauss–Newton on its
  residuals (log or natural; the bootstrap counts as repeated rows), as in ``fit_formula``;
* a replicate **fails** when none of its starts converges, or when its resample has too few
  distinct points to identify the law (:mod:`scalebo.fitting.identifiability`); failed
  replicates are excluded from the intervals and counted (``n_failed``, of which
  ``n_unidentified``);
* intervals are percentile intervals (Efron): at level 95 % the 2.5th and 97.5th
  percentiles of the replicate values; predictions are in the response's natural units
  (any sign), from :meth:`~scalebo.laws.formula.FormulaLaw.predict_natural`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalebo.fitting.bootstrap import BootstrapResult, distinct_optima
from scalebo.fitting.formula_fit import DEFAULT_MAX_ITER, _refine, natural_objective
from scalebo.fitting.identifiability import identification_problem
from scalebo.fitting.optim import BatchedResult, StartStatus, minimize_batched, with_polish
from scalebo.fitting.robust import (
    POLISH_TOL,
    SCREEN_TOL,
    FitResult,
    make_objective,
    run_starts,
)
from scalebo.laws.base import as_inputs
from scalebo.laws.formula import FormulaLaw

__all__ = ["DEFAULT_N_OPTIMA", "DEFAULT_N_RANDOM", "FormulaBootstrapResult", "bootstrap_formula"]

#: Starts per replicate from the full fit: its best point and other distinct local optima.
DEFAULT_N_OPTIMA = 2
#: Seeded random starts per replicate inside the bounds.
DEFAULT_N_RANDOM = 4


@dataclass(frozen=True)
class FormulaBootstrapResult(BootstrapResult):
    """Replicates of a formula-law bootstrap (a :class:`~scalebo.fitting.bootstrap.
    BootstrapResult`, so everything that takes one takes this).

    Attributes (besides those of ``BootstrapResult``; ``samples`` are internal parameters
    ``(n_ok, p)``, see ``law.param_names``):
        residuals: ``"log"`` or ``"natural"``, as the full fit.
        starts_per_resample: starts optimized for each replicate.
    """

    residuals: str = "log"
    starts_per_resample: int = 0

    def predict_samples(self, X: np.ndarray) -> np.ndarray:
        """Natural-unit predictions of every replicate at ``X`` (n, k), shape ``(n_ok, n)``."""
        Z = self.law.prepare(as_inputs(X, self.law.variables))
        return self.law.predict_natural(self.samples, Z)

    def predict_interval(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Percentile band of the prediction at ``X`` (n, k) over the replicates whose
        prediction is finite there: ``(lower, upper)``, each ``(n,)`` (NaN where none is)."""
        values = self.predict_samples(X)
        pairs = [self.percentile(values[:, j]) or (np.nan, np.nan)
                 for j in range(values.shape[1])]
        lo, hi = np.array(pairs, dtype=np.float64).reshape(-1, 2).T
        return lo, hi

    def to_dict(self) -> dict:
        """JSON-ready summary (as ``BootstrapResult.to_dict``, plus the residuals, the
        starts per replicate and the unidentified count)."""
        out = super().to_dict()
        out.update(method="percentile, resampling the rows", residuals=self.residuals,
                   starts_per_resample=self.starts_per_resample,
                   n_unidentified=self.n_unidentified)
        return out


def _replicate_starts(fit: FitResult, law: FormulaLaw, n_resamples: int, n_optima: int,
                      n_random: int, gen: np.random.Generator) -> np.ndarray:
    """Starts ``(n_resamples, k, p)``: the full fit's optima, then each replicate's random
    starts (one seeded draw for all replicates)."""
    optima = distinct_optima(fit, max(1, n_optima))
    shared = np.broadcast_to(optima, (n_resamples, *optima.shape))
    if n_random <= 0:
        return np.array(shared)
    seed = int(gen.integers(2**63 - 1))
    rand = law.random_starts(n_resamples * n_random, seed).reshape(n_resamples, n_random, -1)
    return np.concatenate([shared, rand], axis=1)


def _natural_batch(law: FormulaLaw, Z: np.ndarray, y: np.ndarray, starts: np.ndarray,
                   weights: np.ndarray, delta: float, max_iter: int) -> BatchedResult:
    """Screen every start, polish every finite one (per-start weights ``(S, n)``)."""
    fg = natural_objective(law, Z, y, delta, weights)
    res = minimize_batched(fg, starts, law.lower, law.upper, max_iter=max_iter, **SCREEN_TOL)
    chosen = np.flatnonzero(np.isfinite(res.fun))
    if chosen.size == 0:
        return res
    fg_pol = natural_objective(law, Z, y, delta, weights[chosen])
    pol = minimize_batched(fg_pol, res.x[chosen], law.lower, law.upper, max_iter=max_iter,
                           **POLISH_TOL)
    return with_polish(res, chosen, pol)


def _rows(res: BatchedResult, part: slice) -> BatchedResult:
    return BatchedResult(x=res.x[part], fun=res.fun[part], status=res.status[part],
                         nit=res.nit[part], nfev=0, pgnorm=res.pgnorm[part])


def bootstrap_formula(
    fit: FitResult,
    X: np.ndarray,
    y: np.ndarray,
    *,
    residuals: str = "log",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = 0,
    n_optima: int = DEFAULT_N_OPTIMA,
    n_random: int = DEFAULT_N_RANDOM,
    max_iter: int = DEFAULT_MAX_ITER,
) -> FormulaBootstrapResult:
    """Bootstrap a formula-law fit over its rows (conventions in the module docstring).

    Args:
        fit: the full-data fit of a :class:`~scalebo.laws.formula.FormulaLaw` by
            :func:`~scalebo.fitting.formula_fit.fit_formula` (its law, δ and local optima
            are reused; it must be unweighted).
        X: inputs ``(n, k)``, columns ``fit.law.variables``; y: response ``(n,)`` — the data
            ``fit`` was made on.
        residuals: ``"log"`` or ``"natural"``, as passed to ``fit_formula``.
        n_resamples: replicates.
        confidence_level: level of the percentile intervals, in (0, 1).
        rng: integer seed (recorded in the result), a ``numpy.random.Generator`` (drawn
            from; the result's ``seed`` is then None) or None (fresh entropy). It draws the
            resamples and then the random starts.
        n_optima: starts from the full fit's distinct optima (≥ 1: its best point).
        n_random: random starts per replicate (0: none).
        max_iter: L-BFGS iteration limit per start (and per polish).

    Returns:
        :class:`FormulaBootstrapResult`.
    """
    law = fit.law
    if not isinstance(law, FormulaLaw):
        raise TypeError(f"bootstrap_formula needs a FormulaLaw fit, got law {law.name!r}; "
                        "use scalebo.fitting.bootstrap.bootstrap_fit for built-in laws")
    if residuals not in ("log", "natural"):
        raise ValueError(f"residuals must be 'log' or 'natural', got {residuals!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    X = as_inputs(X, law.variables)
    y = np.asarray(y, dtype=np.float64).ravel()
    if X.shape[0] != y.shape[0] or y.shape[0] != fit.n_obs:
        raise ValueError(f"X has {X.shape[0]} rows and y {y.shape[0]}, the fit {fit.n_obs}: "
                         "bootstrap the data the fit was made on")
    if residuals == "log" and np.isinf(fit.huber_delta):
        raise ValueError("the fit is least squares in natural units (huber_delta inf): "
                         "bootstrap it with residuals='natural', as it was fitted")
    n = y.size
    gen = np.random.default_rng(rng)
    counts = gen.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)
    starts3 = _replicate_starts(fit, law, n_resamples, n_optima, n_random, gen)
    k = starts3.shape[1]
    starts = starts3.reshape(n_resamples * k, -1)
    weights = np.repeat(counts, k, axis=0)
    delta = float(fit.huber_delta)
    Z = law.prepare(X)
    if residuals == "log":
        log_y = np.log(y)
        res = run_starts(law, X, y, starts, huber_delta=delta, sample_weight=weights,
                         max_iter=max_iter, n_polish=None,
                         groups=np.repeat(np.arange(n_resamples), k))
    else:
        res = _natural_batch(law, Z, y, starts, weights, delta, max_iter)
    xs, good, unidentified = np.empty((n_resamples, law.n_params)), [], 0
    for b in range(n_resamples):
        part = slice(b * k, (b + 1) * k)
        if identification_problem(law, X, counts[b]):
            unidentified += 1
            continue
        if residuals == "natural":
            fg_b = natural_objective(law, Z, y, delta, counts[b])
        else:
            fg_b = make_objective(law, Z, log_y, delta, counts[b])
        sub = _refine(law, Z, y, _rows(res, part), fg_b, delta, counts[b], max_iter,
                      n_refine=1, log_space=residuals == "log")
        ok = (sub.status == StartStatus.CONVERGED) & np.isfinite(sub.fun)
        if ok.any():
            best = np.flatnonzero(ok)[np.argmin(sub.fun[ok])]
            xs[len(good)] = sub.x[best]
            good.append(b)
    return FormulaBootstrapResult(
        law=law,
        estimate=fit,
        samples=xs[: len(good)],
        n_resamples=n_resamples,
        n_failed=n_resamples - len(good),
        confidence_level=confidence_level,
        seed=int(rng) if isinstance(rng, int | np.integer) else None,
        residuals=residuals,
        starts_per_resample=k,
        n_unidentified=unidentified,
    )
