"""The search GP and its wrappers, built in one place for replays and campaigns.

The stack, innermost first: a GP (:class:`~scalebo.search.models.gp.GPSurrogate`) →
hyperparameters relative to an optimum that moves with N and D
(:class:`~scalebo.search.optimum_shift.OptimumShiftSurrogate`, ``shift_optimum``) → a mean in
encoded ``log N``, ``log D`` (:class:`~scalebo.search.models.trend.TrendSurrogate`, ``trend``)
→ losses clipped at ``median + clip_iqr × IQR`` (:class:`~scalebo.search.models.clipping.
ClippedGP`). A replay's method (``MethodConfig``) and a campaign (``scalebo suggest``,
``status``) call :func:`gp_stack`, so what a replay measures is what a campaign runs.
Inputs are the grid's encoded columns with ``log N`` and ``log D`` first; losses in nats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scalebo.search.models.clipping import ClippedGP
from scalebo.search.models.surrogates import make_surrogate
from scalebo.search.models.trend import TrendSurrogate
from scalebo.search.optimum_shift import OptimumShiftSurrogate

__all__ = ["gp_stack"]


def gp_stack(categorical: Sequence[int], seed: int = 0, *, kernel: str = "matern52",
             shift_optimum: bool = True, trend: bool = False, trend_form: str = "linear",
             clip_iqr: float | None = 5.0, **gp_kw: Any) -> Any:
    """A fresh search GP wrapped as configured.

    Args:
        categorical: Encoded columns that are categorical (``Grid.categorical_columns``).
        seed: Seed of the GP's hyperparameter restarts.
        kernel: Kernel name (:func:`~scalebo.search.models.composite_kernels.make_kernel`).
        shift_optimum: See :class:`~scalebo.search.optimum_shift.OptimumShiftSurrogate`.
        trend, trend_form: See :class:`~scalebo.search.models.trend.TrendSurrogate`.
        clip_iqr: Clip at ``median + clip_iqr × IQR`` of the fitted losses (0 clips at the
            median); None: no clipping.
        **gp_kw: Passed to the GP (e.g. ``restart_every``, ``restart_below``).
    """
    gp = make_surrogate("gp", kernel=kernel, categorical=list(categorical), rng=seed, **gp_kw)
    if shift_optimum:
        gp = OptimumShiftSurrogate(gp, (0, 1), categorical=list(categorical))
    if trend:
        gp = TrendSurrogate(gp, columns=(0, 1), form=trend_form)  # encoded N, D come first
    return gp if clip_iqr is None else ClippedGP(gp, clip_iqr)
