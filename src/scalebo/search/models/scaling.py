"""Standardization of observed losses, one rule for every surrogate and the loop.

``z = (y − ȳ)/s_y`` with ``ȳ`` the mean and ``s_y`` the population standard deviation of the
observed losses (nats), as scikit-learn's ``normalize_y=True``. When ``s_y`` is 0, not finite
or there is at most one observation, ``s_y = 1`` (the data carry no scale; z is then the
deviation in nats).
"""

from __future__ import annotations

import numpy as np

__all__ = ["standardization"]


def standardization(y: np.ndarray) -> tuple[float, float]:
    """``(ȳ, s_y)`` of losses ``y`` (nats, shape ``(n,)``), see the module docstring.

    ``(0.0, 1.0)`` for an empty ``y``.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.size == 0:
        return 0.0, 1.0
    mean = float(np.mean(y))
    scale = float(np.std(y)) if y.size > 1 else 1.0
    return mean, scale if np.isfinite(scale) and scale > 0 else 1.0
