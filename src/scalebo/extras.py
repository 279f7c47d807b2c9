"""The optional extras of ``pyproject.toml`` and the error raised when one is missing.

``pip install 'scalebo[trees]'`` (XGBoost, the tree surrogate), ``'scalebo[dask]'``
(``dask.distributed``, sweeps on a cluster) and ``'scalebo[optuna]'`` (the Optuna sampler).
Code that needs one imports its module through :func:`require_extra`, so a missing extra is
a :class:`~scalebo.errors.MissingExtraError` (an ``ImportError``) whose message says what
needed it and the command that installs it; the CLI prints it as a one-line error and exits
with 2.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from scalebo.errors import MissingExtraError

__all__ = ["EXTRAS", "require_extra"]

#: The module each extra provides (what is imported to check for it).
EXTRAS: dict[str, str] = {"trees": "xgboost", "dask": "dask.distributed", "optuna": "optuna"}


def require_extra(extra: str, what: str) -> ModuleType:
    """Import the module of ``extra`` (a key of :data:`EXTRAS`) and return it.

    Args:
        extra: the extra's name, e.g. ``"trees"``.
        what: what needs it, for the message, e.g. ``"--surrogate trees"``.

    Raises:
        MissingExtraError: the module cannot be imported; the message reads
            ``"<what> needs the optional extra: pip install 'scalebo[<extra>]' (<module>
            could not be imported: <reason>)"``.
    """
    module = EXTRAS[extra]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{what} needs the optional extra: pip install 'scalebo[{extra}]' ({module} could "
            f"not be imported: {exc})") from exc
