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


@pytest.fixture(scope="session")
def small_problem():
    """A replay problem on a synthetic grid: 4 N × 5 D cells × (4 lr × 3 bs) = 240
    configurations, seeded noise, a coarse Chinchilla start grid (every 30th of 4,500)."""
    import numpy as np

    from scalebo.bench.problems import problem_from_table
    from scalebo.bench.synthetic import make_synthetic
    from scalebo.laws import CHINCHILLA

    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(4), D=1e9 * 2.0 ** np.arange(5),
                           lr=2.5e-4 * 2.0 ** np.arange(4), bs=[128, 256, 512], seed=3)
    return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="small",
                              chinchilla_starts=CHINCHILLA.start_grid()[::30])
