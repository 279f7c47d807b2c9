"""Registry of the public run tables; the loaders of the built-in ones are in
:mod:`scalebo.data.loaders` (StepLaw, OELLM-English, Epoch, Porian, Gemstones, Gadre et al.).

Each loader reads one file of a *data directory* laid out as ``<data_dir>/<folder>/<file>``
(the folder's ``SOURCE.md`` documents provenance, columns and counts) and returns a validated
:class:`~scalebo.data.runs.RunTable`. Loaders only read CSV: nothing is unpickled.

The data directory is an explicit argument or the ``SCALEBO_DATA_DIR`` environment variable.
Register more loaders with :func:`register_dataset`::

    register_dataset("mine", lambda root, **kw: load_runs(root / "mine" / "runs.csv"), "...")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np

from scalebo.data.runs import RunTable
from scalebo.errors import DataDirError

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetSpec",
    "data_dir",
    "list_datasets",
    "load_dataset",
    "register_dataset",
    "round_significant",
]

DATA_DIR_ENV = "SCALEBO_DATA_DIR"

#: A loader takes the resolved data directory and keyword options and returns a RunTable.
Loader = Callable[..., RunTable]


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset.

    Attributes:
        name: Registry key (e.g. ``"steplaw"``).
        loader: ``loader(data_dir: Path, **kwargs) -> RunTable``.
        description: One line for listings (what the runs are, counts).
    """

    name: str
    loader: Loader
    description: str


#: Registered datasets by name. Add entries with :func:`register_dataset`.
DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(
    name: str, loader: Loader, description: str, *, overwrite: bool = False
) -> DatasetSpec:
    """Register ``loader`` under ``name`` and return its spec.

    Raises:
        ValueError: if ``name`` is taken and ``overwrite`` is false.
    """
    if name in DATASETS and not overwrite:
        raise ValueError(
            f"dataset {name!r} is already registered; pass overwrite=True to replace it."
        )
    spec = DatasetSpec(name=name, loader=loader, description=description)
    DATASETS[name] = spec
    return spec


def list_datasets() -> list[str]:
    """Names of the registered datasets, sorted."""
    return sorted(DATASETS)


def data_dir(path: str | Path | None = None) -> Path:
    """Resolve the data directory: ``path`` if given, else ``$SCALEBO_DATA_DIR``.

    Raises:
        DataDirError: if neither is set, or the directory does not exist (a
            ``FileNotFoundError``).
    """
    if path is None:
        value = os.environ.get(DATA_DIR_ENV)
        if not value:
            raise DataDirError(
                "no data directory given: pass data_dir=... (CLI: --data-dir) or set "
                f"{DATA_DIR_ENV} to the folder holding steplaw/, oellm_english/, ..."
            )
        path, origin = value, f"{DATA_DIR_ENV}={value}"
    else:
        origin = f"data_dir={path}"
    resolved = Path(path).expanduser()
    if not resolved.is_dir():
        raise DataDirError(f"{origin}: not a directory.")
    return resolved


def load_dataset(name: str, data_dir: str | Path | None = None, **kwargs: object) -> RunTable:
    """Load the registered dataset ``name`` from ``data_dir`` (or ``$SCALEBO_DATA_DIR``).

    Keyword arguments go to the dataset's loader (see each ``load_*`` function), checked
    first against its signature (:mod:`scalebo.data.dataset_options`).

    Raises:
        ValueError: unknown name (the message lists the registered ones); an option the
            loader does not take, or of the wrong type (the message lists its options).
        DataDirError: no data directory, or the dataset's file is missing (a
            ``FileNotFoundError``).
    """
    from scalebo.data.dataset_options import check_dataset_options

    kwargs = check_dataset_options(name, kwargs)  # also rejects an unknown name
    root = _resolve_dir(data_dir)
    return DATASETS[name].loader(root, **kwargs)


def _resolve_dir(path: str | Path | None) -> Path:
    return data_dir(path)


def _file(root: Path, folder: str, filename: str) -> Path:
    path = Path(root) / folder / filename
    if not path.is_file():
        raise DataDirError(
            f"{path}: not found; expected the public data directory layout "
            f"<data_dir>/{folder}/{filename} (see {folder}/SOURCE.md)."
        )
    return path


def round_significant(values: np.ndarray | Sequence[float], digits: int = 3) -> np.ndarray:
    """Round to ``digits`` significant digits, half away from zero, on the decimal spelling.

    Rounds the shortest decimal representation (``repr``) rather than the binary value, so
    ``0.01105`` becomes ``0.0111`` exactly as a person reading the file would round it.

    Args:
        values: Finite numbers, any shape.
        digits: Significant digits kept (≥ 1).

    Returns:
        float64 array of the same shape.
    """
    array = np.asarray(values, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError("round_significant: values must be finite.")
    rounded = {}
    for value in np.unique(array):
        if value == 0:
            rounded[value] = 0.0
            continue
        exact = Decimal(repr(float(value)))
        quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
        rounded[value] = float(exact.quantize(quantum, rounding=ROUND_HALF_UP))
    return np.vectorize(rounded.__getitem__, otypes=[np.float64])(array) if array.size else array


# --------------------------------------------------------------------------- loaders


# The built-in datasets register themselves on import (loaders import this module).
from scalebo.data import loaders as _loaders  # noqa: E402, F401
