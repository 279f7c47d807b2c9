"""Bootstrap over runs: percentile intervals for law parameters and predictions.

Each replicate resamples the ``n`` observations with replacement (seeded), which is the same
as refitting with integer weights drawn from ``Multinomial(n, 1/n)``. All replicates are fitted
in **one batch** of the vectorized optimizer: replicate ``b`` starts from the full-data optimum
and the next best distinct local optima of the full-data fit (``n_starts`` in all), with its
own weight vector. With ``clusters`` (e.g. the training run of each checkpoint) whole groups
are resampled instead, each group's observations weighted by the group's count: a run's
checkpoints share its noise, so resampling them one by one would understate the spread.
Intervals are percentile intervals (Efron): for a level of 95 %, the 2.5th
and 97.5th percentiles of the replicate estimates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scalebo.fitting.identifiability import identification_problem
from scalebo.fitting.optim import StartStatus
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA, FitResult, run_starts
from scalebo.laws import Law, as_inputs

#: Share of failed replicates from which :meth:`BootstrapResult.failure_note` warns.
FAILED_SHARE = 0.1


@dataclass(frozen=True)
class BootstrapResult:
    """Replicate estimates of a bootstrap (field names after ``scipy.stats.bootstrap``).

    Attributes:
        law: the law.
        estimate: the full-data fit.
        samples: internal parameters of each successful replicate, shape ``(n_ok, p)``.
        n_resamples: replicates drawn.
        n_failed: replicates excluded (counted here): their starts all failed to converge,
            or their resample could not identify the law.
        confidence_level: e.g. 0.95.
        seed: integer seed of the resampling (reproducible), or None when a Generator or
            fresh entropy was used.
        n_unidentified: failed replicates whose resample could not identify the law (too
            few distinct points drawn, :mod:`scalebo.fitting.identifiability`): any fit of
            theirs is one of many exact optima, not a sample of the estimate.
        n_clusters: groups resampled whole (e.g. training runs of checkpoints); None when
            the observations were resampled one by one.
    """

    law: Law
    estimate: FitResult
    samples: np.ndarray = field(repr=False)
    n_resamples: int
    n_failed: int
    confidence_level: float
    seed: int | None
    n_unidentified: int = 0
    n_clusters: int | None = None

    def failure_note(self) -> str | None:
        """A warning's text when at least :data:`FAILED_SHARE` of the replicates failed (the
        intervals then come from the resamples that could be fitted, which leave out the
        ones most unlike the data: too narrow), else None."""
        if self.n_failed < FAILED_SHARE * self.n_resamples or self.n_failed == 0:
            return None
        why = (f", {self.n_unidentified} of them because the resample could not identify "
               "the law (too few distinct points drawn)" if self.n_unidentified else "")
        if self.n_failed >= self.n_resamples:
            return (f"all {self.n_resamples} bootstrap resamples failed{why}: the "
                    f"{self.law.name} law has no intervals; fit on more runs, or a law with "
                    "fewer parameters")
        return (f"{self.n_failed} of {self.n_resamples} bootstrap resamples failed{why}; "
                f"the {self.law.name} law's intervals come from the "
                f"{self.n_resamples - self.n_failed} that did and are likely narrower than "
                "the data warrant: fit on more runs, or a law with fewer parameters")

    @property
    def natural_samples(self) -> dict[str, np.ndarray]:
        """Replicate values of each natural parameter, shape ``(n_ok,)`` each."""
        rows = [self.law.natural(s) for s in self.samples]
        return {k: np.array([r[k] for r in rows]) for k in self.law.natural_names}

    def _bounds(self, values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Percentile bounds along ``axis``; NaN (not an IndexError) when no replicate is
        usable (every resample failed or could not identify the law)."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape[axis] == 0:
            empty = np.full(np.delete(values.shape, axis), np.nan)
            return empty, empty.copy()
        tail = 100 * (1 - self.confidence_level) / 2
        lo, hi = np.percentile(values, [tail, 100 - tail], axis=axis)
        return lo, hi

    def percentile(self, values: np.ndarray) -> tuple[float, float] | None:
        """Percentile interval at :attr:`confidence_level` of the finite entries of a vector
        of replicate values (e.g. a derived quantity per replicate); None if none is finite."""
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size == 0:
            return None
        lo, hi = self._bounds(values)
        return float(lo), float(hi)

    def to_dict(self) -> dict:
        """JSON-ready summary: counts, level, seed and the parameters' percentile intervals."""
        return {
            "n_resamples": self.n_resamples,
            "n_failed": self.n_failed,
            "n_unidentified": self.n_unidentified,
            "confidence_level": self.confidence_level,
            "seed": self.seed,
            "method": ("percentile, resampling the fitted runs" if self.n_clusters is None
                       else "percentile, resampling whole training runs (their checkpoints "
                            "together)"),
            "n_clusters": self.n_clusters,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "standard_error": self.standard_error or None,
        }

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        """Percentile interval of every natural parameter; empty when no replicate is
        usable."""
        if len(self.samples) == 0:
            return {}
        return {
            k: tuple(float(v) for v in self._bounds(s))
            for k, s in self.natural_samples.items()
        }

    @property
    def standard_error(self) -> dict[str, float]:
        """Standard deviation of each natural parameter over the replicates; empty with
        fewer than two usable replicates."""
        if len(self.samples) < 2:
            return {}
        return {k: float(np.std(s, ddof=1)) for k, s in self.natural_samples.items()}

    def predict_samples(self, X: np.ndarray) -> np.ndarray:
        """Predictions of every replicate at ``X`` (n, k), shape ``(n_ok, n)``."""
        X = as_inputs(X, self.law.variables)
        if len(self.samples) == 0:
            return np.empty((0, X.shape[0]))
        Z = self.law.prepare(X)
        return np.exp(self.law.log_predict(self.samples, Z))

    def predict_interval(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Percentile band of the prediction at ``X`` (n, k): ``(lower, upper)``, each (n,)."""
        return self._bounds(self.predict_samples(X))

    def statistic_interval(
        self, statistic: Callable[[FitResult], float]
    ) -> tuple[float, float, np.ndarray]:
        """Percentile interval of any scalar function of a fit (e.g. N*(C) at a compute).

        ``statistic`` receives a :class:`FitResult` whose ``x`` is one replicate's estimate.
        Returns ``(lower, upper, values)``.
        """
        from dataclasses import replace

        values = np.array([statistic(replace(self.estimate, x=s)) for s in self.samples])
        lo, hi = self._bounds(values)
        return float(lo), float(hi), values


def distinct_optima(fit: FitResult, k: int) -> np.ndarray:
    """The best converged solutions of a fit that differ by > 1e-3 (abs + rel), (≤ k, p);
    the fit's own ``x`` first (the best converged start when one converged)."""
    chosen = [fit.x]
    for x in fit.converged_x:
        if len(chosen) >= k:
            break
        if all(np.any(np.abs(x - c) > 1e-3 * (1 + np.abs(c))) for c in chosen):
            chosen.append(x)
    return np.array(chosen)


def bootstrap_fit(
    fit: FitResult,
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = 0,
    n_starts: int = 4,
    huber_delta: float | None = None,
    clusters: np.ndarray | None = None,
) -> BootstrapResult:
    """Bootstrap a fitted law over its observations (see module docstring).

    Args:
        fit: the full-data fit (its law, δ and local optima are reused).
        X: inputs, shape ``(n, k)``; y: targets, shape ``(n,)`` — the data ``fit`` was made on.
        n_resamples: replicates.
        confidence_level: level of the percentile intervals.
        rng: integer seed (recorded in the result), a ``numpy.random.Generator`` (drawn
            from; the result's ``seed`` is then None) or None (fresh entropy).
        n_starts: starts per replicate (the full-data optimum and other distinct optima).
        huber_delta: defaults to the fit's δ.
        clusters: label of each observation's group, shape ``(n,)`` (e.g. the training run
            of each checkpoint): whole groups are resampled, each drawn group's
            observations entering with the group's count (the checkpoints of one run are
            not independent draws). Default: every observation is its own group.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    law = fit.law
    X = as_inputs(X, law.variables)
    y = np.asarray(y, dtype=np.float64).ravel()
    n = y.size
    gen = np.random.default_rng(rng)
    # each observation's group: itself unless clusters say otherwise (the same draws then)
    member = (np.arange(n) if clusters is None
              else np.unique(np.asarray(clusters).astype(str), return_inverse=True)[1])
    if member.size != n:
        raise ValueError(f"clusters must label each of the {n} observations, got "
                         f"{member.size} labels")
    m = int(member.max(initial=-1)) + 1
    counts = gen.multinomial(m, np.full(m, 1.0 / m), size=n_resamples).astype(
        np.float64)[:, member]
    seed = int(rng) if isinstance(rng, int | np.integer) else None
    if identification_problem(law, X):  # no resample (a subset of the points) can either
        return BootstrapResult(law=law, estimate=fit, samples=np.empty((0, law.n_params)),
                               n_resamples=n_resamples, n_failed=n_resamples,
                               confidence_level=confidence_level, seed=seed,
                               n_unidentified=n_resamples,
                               n_clusters=None if clusters is None else int(m))
    starts_one = distinct_optima(fit, n_starts)
    k = starts_one.shape[0]
    starts = np.tile(starts_one, (n_resamples, 1))
    weights = np.repeat(counts, k, axis=0)
    delta = fit.huber_delta if huber_delta is None else huber_delta
    res = run_starts(law, X, y, starts, huber_delta=delta or DEFAULT_HUBER_DELTA,
                     sample_weight=weights, n_polish=None,
                     groups=np.repeat(np.arange(n_resamples), k))
    fun = res.fun.reshape(n_resamples, k)
    ok = (res.status == StartStatus.CONVERGED).reshape(n_resamples, k) & np.isfinite(fun)
    fun = np.where(ok, fun, np.inf)
    best = np.argmin(fun, axis=1)
    good = np.isfinite(fun[np.arange(n_resamples), best])
    identified = np.array([not identification_problem(law, X, c) for c in counts], dtype=bool)
    good &= identified
    xs = res.x.reshape(n_resamples, k, -1)[np.arange(n_resamples), best]
    return BootstrapResult(
        law=law,
        estimate=fit,
        samples=xs[good],
        n_resamples=n_resamples,
        n_failed=int(np.sum(~good)),
        confidence_level=confidence_level,
        seed=seed,
        n_unidentified=int(np.sum(~identified)),
        n_clusters=None if clusters is None else int(m),
    )
