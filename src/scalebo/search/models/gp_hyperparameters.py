"""The GP's hyperparameters outside the model: the prior of a MAP fit and how a fit went.

``theta`` are GP log hyperparameters ``[log σ², θ_kernel…, log σ_n²]``, shape
``(n_params,)``, as in :mod:`scalebo.search.models.gp`: the signal variance ``σ²`` and the noise
variance ``σ_n²`` in standardized y units (nats² without ``normalize_y``), the kernel's log
length scales and log weights in encoded input units. A log density or log marginal
likelihood is in nats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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

