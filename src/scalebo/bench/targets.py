"""The compute values (FLOPs) at which a replay scores the law it recovers.

A replay compares the law fitted on what a search bought with the reference law at each
target compute: the relative error ``extrapolation_pct``, the law posterior's and the
bootstrap's quantiles and whether they cover the reference (docs/records.md). The default,
1e25, 1e27 and 1e29 FLOPs, suits grids of today's pretraining runs; a grid of small models
(say up to 1e20 FLOPs) is better judged a few decades past its largest run, where its user
will bet next (``scalebo replay --target 1e21 --target 1e22``; a sweep dataset's
``targets: [1e21, 1e22]``).

Targets are kept in ascending order, and the smallest is the **headline**: the one whose
intervals ``scalebo replay`` prints and whose error and calibration ``bench report``
summarizes per dataset (its other targets get tables of their own).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_KEYS", "DEFAULT_TARGETS", "canonical_targets", "check_targets", "headline",
           "headline_gaps", "headline_keys", "shown_key", "target_keys", "target_label",
           "with_targets"]

#: Target compute values (FLOPs) of a replay unless it is given its own.
DEFAULT_TARGETS: tuple[float, ...] = (1e25, 1e27, 1e29)
#: Their keys in records (:func:`~scalebo.search.law_posterior.target_key`).
DEFAULT_KEYS: tuple[str, ...] = ("1e+25", "1e+27", "1e+29")
#: A target key at the end of a tidy record's metric name (``compute.extrapolation_pct.1e+25``,
#: ``law_posterior.compute.reference_loss.1e+21``; a key may hold a dot, ``1.5e+21``).
_KEY_AT_END = r"\.(?:extrapolation_pct|reference_loss)\.(.+)$"


def check_targets(values: float | Iterable[float] | None) -> tuple[float, ...]:
    """``values`` as ascending, distinct target compute values (FLOPs); None: the default.

    Raises:
        ValueError: a value that is not a finite number > 0 (naming it), or no value.
    """
    if values is None:
        return DEFAULT_TARGETS
    from scalebo.data.columns import parse_number

    items = [values] if isinstance(values, numbers.Real | str) else list(values)
    out = []
    for v in items:  # YAML 1.1 reads 1e22 as text: a number in text is taken
        if isinstance(v, str) and (number := parse_number(v)) is not None:
            v = number
        ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        if not ok:
            raise ValueError(f"targets must be compute values in FLOPs, finite and > 0 (such "
                             f"as 1e22), got {v!r}")
        out.append(float(v))
    if not out:
        raise ValueError("targets must hold at least one compute value in FLOPs, got none")
    from scalebo.search.law_posterior import target_key

    chosen, keys = tuple(sorted(set(out))), {}
    for c in chosen:  # records key targets by target_key: two values, one key would clash
        if (twin := keys.setdefault(target_key(c), c)) != c:
            raise ValueError(f"targets {twin!r} and {c!r} FLOPs agree to 6 significant digits, "
                             f"the precision of their record key {target_key(c)!r}: give one")
    return chosen


def canonical_targets(value: Any) -> Any:
    """A sweep dataset's ``targets`` as ascending distinct floats (one spelling, one cell
    identity: ``1e21``, ``"1e21"`` and ``[1.0e+21, 1e21]`` alike), or as written when they are
    not valid (the dataset check names them)."""
    try:
        return list(check_targets(value))
    except (ValueError, TypeError):
        return value


def with_targets(problem: Any, targets: float | Iterable[float] | None) -> Any:
    """``problem`` (a :class:`~scalebo.bench.problems.ReplayProblem`) scored at ``targets``
    (:func:`check_targets`), with a note (also warned) naming the targets that do not lie
    beyond its costliest acquirable run: there the law is scored by interpolation."""
    chosen = check_targets(targets)
    if chosen == problem.targets:
        return problem
    grid = problem.grid
    largest = float(grid.config_cell_cost[~grid.held_out].max())
    inside = [c for c in chosen if c <= largest]
    if not inside:
        return replace(problem, targets=chosen)
    from scalebo.search.law_posterior import target_key

    said = ", ".join(shown_key(target_key(c)) for c in inside)
    text = (f"{problem.name}: target(s) {said} FLOPs lie within "
            f"the grid's compute (its costliest acquirable run costs {largest:.4g} FLOPs): "
            "the law is scored there by interpolation, not extrapolation")
    warnings.warn(text, stacklevel=3)
    return replace(problem, targets=chosen, notes=(*problem.notes, text))


def headline(targets: Iterable[float]) -> float:
    """The headline target of ``targets`` (FLOPs): the smallest."""
    return min(targets)


def _keys(frame: pd.DataFrame) -> pd.Series:
    """The target key of each tidy record row that holds one (others dropped), by row."""
    return frame["metric"].astype(str).str.extract(_KEY_AT_END)[0].dropna()


def target_keys(frame: pd.DataFrame) -> list[str]:
    """The target keys tidy records (:func:`~scalebo.bench.records.load_records`) are scored
    at, ascending in compute (:data:`DEFAULT_KEYS` when they hold none)."""
    return sorted(set(_keys(frame)), key=float) or list(DEFAULT_KEYS)


def headline_keys(frame: pd.DataFrame) -> dict[str, str]:
    """Each dataset's headline target key in tidy records: the smallest compute it is scored
    at (``"1e+25"`` for the default targets, and for a dataset with no fit in its records)."""
    keys = _keys(frame)
    found = frame.loc[keys.index].assign(_key=keys)
    smallest = {ds: min(g["_key"].unique(), key=float)
                for ds, g in found.groupby("dataset", sort=False)}
    return {ds: smallest.get(ds, DEFAULT_KEYS[0]) for ds in dict.fromkeys(frame["dataset"])}


def shown_key(key: str) -> str:
    """A target key as headings show it: ``"1e+25"`` → ``"1e25"``, ``"1.5e+21"`` → ``"1.5e21"``."""
    return key.replace("e+", "e")


def headline_gaps(frame: pd.DataFrame, heads: Mapping[str, str]) -> list[str]:
    """One sentence per dataset whose methods are not all scored at its headline target
    (records of one dataset label written with other ``targets``): those methods are missing
    from its calibration, savings and comparison figures."""
    keys = _keys(frame)
    found = frame.loc[keys.index].assign(_key=keys)
    out = []
    for ds, g in found.groupby("dataset", sort=False):
        lacking = [m for m, rows in g.groupby("method", sort=False)
                   if heads.get(ds) not in set(rows["_key"])]
        if lacking:
            out.append(f"{ds}: method(s) {', '.join(lacking)} are not scored at its headline "
                       f"target {shown_key(heads[ds])} FLOPs (their records have other targets): "
                       "they are left out of its calibration, compute saved and figures")
    return out


def target_label(C: str | Mapping[str, str]) -> str:
    """``"1e25 FLOPs"`` for one key (or every dataset at the same one, or none: the default),
    else "each dataset's headline target, its smallest (steplaw 1e25, mine 1e21 FLOPs)"."""
    pairs = [("", C)] if isinstance(C, str) else list(C.items()) or [("", DEFAULT_KEYS[0])]
    if len({k for _, k in pairs}) == 1:
        return f"{shown_key(pairs[0][1])} FLOPs"
    return ("each dataset's headline target, its smallest (" + ", ".join(
        f"{ds} {shown_key(k)}" for ds, k in pairs) + " FLOPs)")
