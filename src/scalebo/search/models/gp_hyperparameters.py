"""The GP's hyperparameters outside the model: the prior of a MAP fit, the multi-start
L-BFGS-B fit itself (screened restarts, loose-then-polish) and how a fit went.

``theta`` are GP log hyperparameters ``[log σ², θ_kernel…, log σ_n²]``, shape
``(n_params,)``, as in :mod:`scalebo.search.models.gp`: the signal variance ``σ²`` and the noise
variance ``σ_n²`` in standardized y units (nats² without ``normalize_y``), the kernel's log
length scales and log weights in encoded input units. A log density or log marginal
likelihood is in nats.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from scalebo.errors import NumericalWarning


@dataclass(frozen=True)
class GPPrior:
    """Independent Gaussian priors on log hyperparameters, ``(mean, sd)`` for each group.

    ``kernel`` applies to every kernel hyperparameter (log length scales, log weights). The
    defaults are weak: they only keep hyperparameters sane when there are few observations.
    """

    log_amplitude: tuple[float, float] = (0.0, 2.0)
    kernel: tuple[float, float] = (float(np.log(0.5)), 2.0)
    log_noise: tuple[float, float] = (float(np.log(1e-2)), 3.0)

    def _mean_sd(self, n_kernel: int) -> tuple[np.ndarray, np.ndarray]:
        groups = [self.log_amplitude] + [self.kernel] * n_kernel + [self.log_noise]
        arr = np.asarray(groups, dtype=np.float64)
        return arr[:, 0], arr[:, 1]

    def log_pdf_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Log density (up to a constant) and its gradient at GP ``theta``."""
        mu, sd = self._mean_sd(theta.shape[0] - 2)
        z = (theta - mu) / sd
        return float(-0.5 * z @ z), -z / sd


@dataclass(frozen=True)
class HyperparameterFit:
    """How the hyperparameter fit went (SciPy's field names, summed over starts).

    ``status``: 0 converged, 1 iteration or evaluation limit, 2 abnormal (of the best start,
    as L-BFGS-B reports it), 3 every start failed and the initial hyperparameters were used.
    """

    theta: np.ndarray
    log_marginal_likelihood: float
    nit: int
    nfev: int
    n_starts: int
    success: bool
    status: int
    message: str
    warm_start: bool



_LOOSE_FTOL = 1e-7  # relative reduction of −lml at which a non-final start stops


def restart_candidates(bounds: np.ndarray, n: int, gen: np.random.Generator) -> np.ndarray:
    """``n`` uniform draws in the central 60 % of the log ``bounds`` ``(n_params, 2)``."""
    lo = bounds[:, 0] + 0.2 * (bounds[:, 1] - bounds[:, 0])
    hi = bounds[:, 0] + 0.8 * (bounds[:, 1] - bounds[:, 0])
    return gen.uniform(lo, hi, size=(n, len(lo)))


def best_restarts(score: Callable[[np.ndarray], float], candidates: np.ndarray,
                  n_restarts: int) -> list[np.ndarray]:
    """The ``n_restarts`` candidates of highest ``score`` (e.g. the LML on a subset of rows;
    a failed Cholesky or a non-finite value ranks last), stable order.

    NOTE: screening is what keeps restarts cheap: an unscreened uniform start (e.g. high
    noise, short length scales) can take 3× the L-BFGS-B evaluations of a good one.
    """
    scores = np.full(len(candidates), -np.inf)
    for i, c in enumerate(candidates):
        try:
            val = score(c)
        except np.linalg.LinAlgError:
            continue
        scores[i] = val if np.isfinite(val) else -np.inf
    order = np.argsort(-scores, kind="stable")[:n_restarts]
    return [candidates[i] for i in order]


def optimize_hyperparameters(objective: Callable[[np.ndarray], tuple[float, np.ndarray]],
                             lml: Callable[[np.ndarray], float], starts: list[np.ndarray],
                             bounds: np.ndarray, *, max_iter: int,
                             warm: bool) -> tuple[np.ndarray, HyperparameterFit]:
    """Minimize ``objective`` (−log posterior and its gradient) with L-BFGS-B from each start.

    With several starts each runs to a loose tolerance and only the winner is polished at
    L-BFGS-B's default one (the tail of a run that loses is wasted work). If every start
    fails, the first start is returned with status 3 and a :class:`NumericalWarning`.
    ``lml`` gives the log marginal likelihood reported for the winner.
    """
    nit = nfev = 0

    def run(x0: np.ndarray, options: dict) -> Any:
        nonlocal nit, nfev
        try:
            res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                           options={"maxiter": max_iter, **options})
        except (np.linalg.LinAlgError, ValueError, FloatingPointError):
            return None
        nit, nfev = nit + int(res.nit), nfev + int(res.nfev)
        return res if np.isfinite(res.fun) and np.all(np.isfinite(res.x)) else None

    loose = {"ftol": _LOOSE_FTOL} if len(starts) > 1 else {}
    best = None
    for x0 in starts:
        res = run(x0, loose)
        if res is not None and (best is None or res.fun < best.fun):
            best = res
    if best is not None and loose:
        polished = run(best.x, {})
        if polished is not None and polished.fun <= best.fun:
            best = polished
    if best is None:
        theta0 = starts[0]
        warnings.warn(f"GP hyperparameter fit failed from all {len(starts)} starts: using "
                      "the initial hyperparameters", NumericalWarning, stacklevel=4)
        return theta0, HyperparameterFit(theta0, np.nan, nit, nfev, len(starts), False, 3,
                                         "all starts failed; initial values used", warm)
    value = lml(best.x)
    fit = HyperparameterFit(np.array(best.x), float(value), nit, nfev, len(starts),
                            bool(best.success), int(best.status), str(best.message), warm)
    return np.array(best.x), fit
