"""Which training run each fitted point belongs to, for a bootstrap that resamples whole runs.

Checkpoints of one training run share its noise (its seed, its data order): a bootstrap that
resamples them one by one treats them as independent and gives intervals narrower than the
runs justify. A ``run`` column (``--run COL`` names another) groups them; :func:`run_clusters`
gives the groups when they are usable and :func:`run_cluster_note` says why they are not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["MIN_RUNS", "run_cluster_note", "run_clusters"]


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
    if (blank := int(points["run"].isna().sum())):
        return None, f"the run column is blank on {blank} of them"
    runs = points.groupby(points["run"].astype(str), sort=False)
    if runs.ngroups == len(points):
        return None, None
    if "n_repeats" in points.columns and (points["n_repeats"] > 1).any():
        return None, ("repeats were averaged (--duplicates mean), so a row's run label is "
                      "one of its rows'")
    if runs.ngroups < MIN_RUNS:
        return None, (f"they come from {runs.ngroups} runs, fewer than {MIN_RUNS} (resampling "
                      "so few runs makes a handful of distinct tables)")
    sizes = runs["N"].nunique()
    if (sizes > 1).any():
        name = str(sizes.index[np.argmax(sizes.to_numpy() > 1)])
        return None, (f"run {name!r} holds {int(sizes[name])} model sizes N (a run's "
                      "checkpoints share one N: check the run column)")
    tokens = runs["D"].nunique()
    if (tokens < runs.size()).any():
        name = str(tokens.index[np.argmax((tokens < runs.size()).to_numpy())])
        return None, (f"run {name!r} repeats a token count D (a run's checkpoints are at "
                      "distinct D: check the run column)")
    return points["run"].astype(str).to_numpy(), None
