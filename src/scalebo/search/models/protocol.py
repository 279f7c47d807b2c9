"""Optional parts of the surrogate protocol, detected in one place.

The search loop and the wrappers (trend, clipping, optimum shift) accept any surrogate with
``fit(X, y)`` and ``predict(X) -> (mean, std)``. Two optional parts are looked up here:

* ``fit(X, y, warm_start=...)`` — refit from the previous hyperparameters only (the GP).
  :func:`accepts_warm_start` reads ``fit``'s signature; :func:`fit_surrogate` passes the
  keyword only to a ``fit`` that takes it. Nothing retries on a ``TypeError``: an error
  raised inside ``fit`` reaches the caller.
* ``fit_result_`` — how the last hyperparameter fit went
  (:class:`~scalebo.search.models.gp_hyperparameters.HyperparameterFit`), on the model or
  inside its wrappers (``inner``) and adapters (``gp_``); :func:`hyperparameter_fit`.

Notation: ``X`` encoded configurations ``(n, d)``, ``y`` standardized losses ``(n,)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["accepts_keyword", "accepts_warm_start", "fit_surrogate", "hyperparameter_fit"]


def accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (explicitly or via ``**kwargs``);
    False when its signature cannot be read (some builtins)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return True
    p = params.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def accepts_warm_start(model: Any) -> bool:
    """Whether ``model.fit`` takes ``warm_start`` (False when there is no ``fit``)."""
    fit = getattr(model, "fit", None)
    return fit is not None and accepts_keyword(fit, "warm_start")


def fit_surrogate(model: Any, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> Any:
    """``model.fit(X, y, warm_start=warm_start)`` if its ``fit`` takes the keyword, else
    ``model.fit(X, y)`` (a surrogate without warm starts always fits from scratch).
    Returns what ``fit`` returns."""
    if accepts_warm_start(model):
        return model.fit(X, y, warm_start=warm_start)
    return model.fit(X, y)


def hyperparameter_fit(model: Any) -> Any | None:
    """The last hyperparameter fit (``fit_result_``) of ``model`` or of the model inside it
    (followed through ``inner`` and ``gp_``), or None when there is none (not fitted yet,
    or a surrogate without one)."""
    seen: set[int] = set()
    while model is not None and id(model) not in seen:
        seen.add(id(model))
        result = getattr(model, "fit_result_", None)
        if result is not None:
            return result
        model = getattr(model, "inner", None) or getattr(model, "gp_", None)
    return None
