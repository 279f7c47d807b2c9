"""Shared fixtures. Data-dependent tests read ``SCALEBO_DATA_DIR`` and skip without it."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Directory of the public run tables (``SCALEBO_DATA_DIR``); skips the test if unset."""
    value = os.environ.get("SCALEBO_DATA_DIR")
    if not value:
        pytest.skip("SCALEBO_DATA_DIR is not set: data-dependent test skipped")
    path = Path(value)
    if not path.is_dir():
        pytest.skip(f"SCALEBO_DATA_DIR={value} is not a directory: data-dependent test skipped")
    return path
