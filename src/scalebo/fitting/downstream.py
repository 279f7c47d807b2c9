"""Downstream laws: benchmark error as a function of validation loss.

Input format: one row per evaluated model (or checkpoint) with two columns,

========= ======= =====================================================================
column    unit    meaning
========= ======= =====================================================================
loss      nats    the model's validation loss (the x of the law)
error     (0, 1]  its benchmark error, e.g. 1 − accuracy averaged over tasks (the y)
========= ======= =====================================================================

(other names through ``loss=`` / ``error=``). Laws (:mod:`scalebo.laws`):

* ``gadre`` — Gadre et al. 2024, Eq. 4: ``Err(L) = ε − k·exp(−γ·L)``;
* ``sigmoid`` — Bhagia et al. 2024, step 2: ``Err(L) = a / (1 + exp(−k·(L − L0))) + b``.

Fitted like loss laws: summed Huber loss on natural-log residuals of the error, multi-start
L-BFGS from the law's grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from scalebo.data.columns import to_numbers
from scalebo.fitting.law_inputs import check_law_inputs
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA, FitResult, fit_law
from scalebo.laws import GadreDownstreamLaw, SigmoidDownstreamLaw, get_law

__all__ = ["fit_downstream"]


def fit_downstream(
    frame: pd.DataFrame,
    law: str = "gadre",
    *,
    loss: str = "loss",
    error: str = "error",
    huber_delta: float = DEFAULT_HUBER_DELTA,
) -> FitResult:
    """Fit a downstream law ``Err(L)`` to (loss, error) pairs (format in the module docstring).

    Args:
        frame: ``(n_models, ...)`` with a loss column (nats) and an error column in (0, 1].
        law: ``"gadre"`` or ``"sigmoid"``.
        loss, error: Column names.
        huber_delta: δ of the Huber loss on log residuals.

    Raises:
        ValueError: missing columns, an error outside (0, 1], or a law that is not downstream.
    """
    model = get_law(law)
    if not isinstance(model, (GadreDownstreamLaw, SigmoidDownstreamLaw)):
        raise ValueError(f"fit_downstream needs 'gadre' or 'sigmoid', got {law!r}.")
    missing = [c for c in (loss, error) if c not in frame.columns]
    if missing:
        raise ValueError(f"fit_downstream: columns {missing} not found; available: "
                         f"{list(frame.columns)} (pass loss=..., error=...).")
    rows = frame[[loss, error]].rename(columns={loss: "loss", error: "error"})
    check_law_inputs(rows.reset_index(drop=True), model, "error", "fit_downstream",
                     shown={"loss": loss, "error": error})
    x = to_numbers(rows["loss"]).to_numpy(dtype=np.float64)
    y = to_numbers(rows["error"]).to_numpy(dtype=np.float64)
    return fit_law(model, x[:, None], y, huber_delta=huber_delta)
