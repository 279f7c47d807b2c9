"""Warnings raised while a command works: printed to stderr as ``warning: ...`` as they come
(:func:`~scalebo.cli.common.warn`) and kept, so the JSON result can list them too."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from scalebo.cli.common import warn

__all__ = ["collect_warnings"]


def collect_warnings(fn: Callable[[], Any], sink: list[str]) -> Any:
    """Call ``fn``, print each warning it raises and append its text to ``sink``; returns
    ``fn``'s result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    sink.extend(warn(w.message) for w in caught)
    return result
