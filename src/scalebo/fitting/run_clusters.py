"""Which training run each fitted point belongs to, for a bootstrap that resamples whole runs.

Checkpoints of one training run share its noise (its seed, its data order): a bootstrap that
resamples them one by one treats them as independent and gives intervals narrower than the
runs justify. A ``run`` column (``--run COL`` names another) groups them; :func:`run_clusters`
gives the groups when they are usable and :func:`run_cluster_note` says why they are not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from scalebo.data.checkpoints import run_label_problem
from scalebo.data.plausibility import is_run_label

__all__ = ["MIN_RUNS", "run_cluster_note", "run_clusters", "run_label_column",
           "run_label_note"]


#: Fewest training runs a bootstrap resamples whole (:func:`run_clusters`); with fewer, the
#: resamples would be a handful of distinct tables.
MIN_RUNS = 5


def run_clusters(points: pd.DataFrame) -> np.ndarray | None:
    """The training run of each point, for a bootstrap that resamples whole runs, when
    ``points`` are checkpoints of runs: a ``run`` column without blanks whose every run has
    one model size ``N`` and distinct token counts ``D``, some run holding several points, at
    least :data:`MIN_RUNS` runs, and no averaged repeats (``n_repeats`` > 1: the label is
    then one row's). None otherwise (each point resampled on its own; :func:`run_cluster_note`
    says why)."""
    return _run_clusters(points)[0]


def run_cluster_note(points: pd.DataFrame) -> str | None:
    """Why a bootstrap of ``points``, which have a ``run`` column grouping several of them,
    resamples points one by one instead of whole runs (:func:`run_clusters`); None when it
    resamples runs or when no run holds several points (each point is its own run)."""
    reason = _run_clusters(points)[1]
    if reason is None:
        return None
    return (f"the bootstrap resamples the {len(points)} fitted points one by one, not whole "
            f"training runs: {reason}; a run's checkpoints share its noise, so these intervals "
            "are narrower than the runs justify")


def _run_clusters(points: pd.DataFrame) -> tuple[np.ndarray | None, str | None]:
    if "run" not in points.columns:
        return None, None
    if points["run"].isna().any():
        return None, run_label_problem(points)
    runs = points.groupby(points["run"].astype(str), sort=False)
    if runs.ngroups == len(points):
        return None, None
    if "n_repeats" in points.columns and (points["n_repeats"] > 1).any():
        return None, ("repeats were averaged (--duplicates mean), so a row's run label is "
                      "one of its rows'")
    if runs.ngroups < MIN_RUNS:
        return None, (f"they come from {runs.ngroups} runs, fewer than {MIN_RUNS} (resampling "
                      "so few runs makes a handful of distinct tables)")
    if (problem := run_label_problem(points)) is not None:
        return None, problem
    return points["run"].astype(str).to_numpy(), None


def run_label_column(points: pd.DataFrame, skip: tuple[str, ...] = ()) -> str | None:
    """The column of ``points`` that, though not named ``run``, looks like each point's
    training run: named as a run is (:func:`~scalebo.data.plausibility.is_run_label`: ``job``,
    ``run_name``), without blanks, and grouping the points as checkpoints of runs would be
    (:func:`run_clusters`' rules: at least :data:`MIN_RUNS` groups, some with several points,
    each group one model size ``N`` at distinct token counts ``D``). None when ``points`` have
    a ``run`` column or no such column. ``skip``: columns that are not labels (the
    hyperparameters)."""
    if "run" in points.columns or len(points) < 2:
        return None
    canonical = {"N", "D", "C", "loss", "n_repeats", *skip}
    for column in points.columns:
        if (column in canonical or not is_run_label(column, strict=True)
                or points[column].isna().any()):  # a size label or an SVG coordinate
            continue  # groups points as one run per size would too (Epoch's 'y'): by name
        if _run_clusters(points.assign(run=points[column].astype(str)))[0] is not None:
            return str(column)
    return None


def run_label_note(points: pd.DataFrame, skip: tuple[str, ...] = ()) -> str | None:
    """A note when ``points`` have no ``run`` column but another looks like one
    (:func:`run_label_column`), so that a bootstrap resampling points one by one is not
    taken for one over runs (a ``job`` column on checkpoints of 10 runs: 95 % intervals
    covered a known law in about half of 20 replicates, against 18–20 of 20 with ``--run``).
    ``skip``: columns that are not labels (the hyperparameters)."""
    column = run_label_column(points, skip)
    if column is None:
        return None
    runs = points[column].astype(str).nunique()
    return (f"column {column!r} looks like each point's training run ({runs} values, each "
            f"one model size N at several token counts D): checkpoints of one run share "
            f"its noise, and this bootstrap resamples the {len(points)} points one by one, "
            f"so its intervals are too narrow if they are checkpoints; --run {column} "
            "(scalebo.data.checkpoints.with_runs(table, "
            f"{column!r}) in Python) resamples whole runs")
