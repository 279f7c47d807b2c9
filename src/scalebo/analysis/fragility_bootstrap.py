"""The bootstrap of a fragility analysis's base fit (:func:`scalebo.analysis.fragility.fragility`
with ``bootstrap``): percentile intervals of the Chinchilla law's exponents, E, N* and the loss
at the target compute, resampling whole runs when the points are checkpoints of runs.
Conventions: C in FLOPs, N parameters, losses in nats.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from scalebo.errors import NumericalWarning
from scalebo.fitting.allocation import compute_optimal

if TYPE_CHECKING:
    from scalebo.analysis.variants import Variant
    from scalebo.fitting.robust import FitResult

__all__ = ["base_bootstrap"]


def base_bootstrap(fit: FitResult, base: Variant, target: float, n_resamples: int,
                   rng: int | None, confidence_level: float,
                   hyperparameters: tuple[str, ...] = ()) -> dict:
    """Bootstrap of the base fit: percentile intervals at ``confidence_level`` (via
    :meth:`~scalebo.fitting.bootstrap.BootstrapResult.percentile`, over finite replicate
    values; NaN bounds when none is finite) of alpha, beta, E, N_opt (parameters) and the
    loss at ``target`` FLOPs (nats). Warns, as ``scalebo fit`` does, when the points'
    run labels cannot group the resamples, or when a column not named ``run`` (not one of
    the ``hyperparameters``) looks like each point's training run."""
    from scalebo.analysis.fragility_fit import chinchilla_param
    from scalebo.fitting.bootstrap import bootstrap_fit
    from scalebo.fitting.run_clusters import run_cluster_note, run_clusters, run_label_note

    X = base.frame[["N", "D"]].to_numpy(dtype=np.float64)
    y = base.frame["loss"].to_numpy(dtype=np.float64)
    boot = bootstrap_fit(fit, X, y, n_resamples=n_resamples, rng=rng,
                         confidence_level=confidence_level, clusters=run_clusters(base.frame))
    if text := boot.failure_note():
        warnings.warn(text, NumericalWarning, stacklevel=3)
    if text := (run_cluster_note(base.frame) or run_label_note(base.frame, hyperparameters)):
        warnings.warn(text, UserWarning, stacklevel=3)
    natural = boot.natural_samples
    values = {k: chinchilla_param(natural, k) for k in ("alpha", "beta", "E")}
    opts = [compute_optimal(replace(fit, x=s), target, warn=False) for s in boot.samples]
    values["N_opt"] = np.array([o.N_opt for o in opts])
    values["loss_at_target"] = np.array([o.loss for o in opts])
    out = {"n_resamples": n_resamples, "n_failed": boot.n_failed, "seed": rng,
           "n_clusters": boot.n_clusters,
           "confidence_level": boot.confidence_level}
    for key, v in values.items():
        lo, hi = boot.percentile(v) or (math.nan, math.nan)
        out[key] = {"lower": lo, "upper": hi}
    return out
