"""Named variants of a scaling-law fit's data and fitting choices (for :mod:`.fragility`).

A :class:`Variant` is one refit: the points ``(N, D, loss)`` it fits and its Huber δ.
:func:`build_variants` makes the standard set from one table, base first (names as printed):

* ``base`` — the points as given (a run table with hyperparameters: the best run of each
  (N, D) cell), δ = ``huber_delta``;
* ``leave out N=<N>`` — one per distinct model size (every checkpoint of that model removed);
* ``drop <k> smallest`` / ``drop <k> largest`` — the k smallest / largest model sizes removed;
* ``every <k>th checkpoint`` — :func:`scalebo.data.checkpoints.every_kth` on each training
  run: the rows sharing a ``run`` label, every hyperparameter and config column of a
  :class:`~scalebo.data.runs.RunTable` and ``phase`` (needs a ``run`` column; so one label
  shared by several learning rates' runs thins each run on its own; a training run that
  still repeats a token count D gets a warning);
* ``huber δ=<δ>`` — the base points with another Huber δ;
* any *extra* table by name (``extra={"half lr": table}``, CLI ``--variant-file NAME=PATH``):
  for Gemstones (:func:`gemstones_extras`) ``cooldown end``, ``cooldown start``, ``half lr``,
  ``val fineweb_edu``, ``val dclm``, ``checkpoints every 2B``.

Units: ``N`` parameters, ``D`` tokens, ``loss`` nats.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scalebo.data.checkpoints import run_label_problem
from scalebo.data.runs import RunTable
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA

__all__ = ["Skipped", "Variant", "build_variants", "gemstones_extras", "skipped_variants"]


@dataclass(frozen=True)
class Variant:
    """One refit: its points and Huber δ.

    Attributes:
        name: Printed name, e.g. ``"leave out N=1.2e+08"``.
        kind: ``base``, ``leave_one_out``, ``drop_smallest``, ``drop_largest``,
            ``every_kth``, ``huber`` or ``extra``.
        frame: Points to fit, ``(n_points, ...)`` with columns ``N`` (parameters),
            ``D`` (tokens), ``loss`` (nats).
        huber_delta: δ of the Huber loss on log residuals.
    """

    name: str
    kind: str
    frame: pd.DataFrame = field(repr=False)
    huber_delta: float = DEFAULT_HUBER_DELTA


def _points(table: RunTable | pd.DataFrame) -> pd.DataFrame:
    """The points a variant fits: a run table with hyperparameters gives the best run of each
    (N, D) cell (as ``fit`` fits a law in N and D: it describes tuned models; the off-optimal
    runs of a sweep would bend it), any other table every row."""
    frame = table.frame if isinstance(table, RunTable) else table
    missing = [c for c in ("N", "D", "loss") if c not in frame.columns]
    if missing:
        raise ValueError(f"fragility needs columns N, D, loss; missing {missing}.")
    if isinstance(table, RunTable) and table.hyperparameters:
        from scalebo.fitting.frontier import frontier

        return frontier(frame, "cell", loss="loss", cell=("N", "D"))
    return frame


def build_variants(
    table: RunTable | pd.DataFrame,
    *,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    leave_one_out: bool = True,
    drop_count: int = 3,
    every_k: Sequence[int] = (2, 5),
    huber_deltas: Sequence[float] = (1e-4, 1e-2),
    extra: Mapping[str, RunTable | pd.DataFrame] | None = None,
) -> list[Variant]:
    """The named variants of the module docstring, base first.

    Args:
        table: Base points (runs or checkpoints) with ``N``, ``D``, ``loss``.
        huber_delta: δ of the base fit and of every data variant.
        leave_one_out: Add one variant per distinct N.
        drop_count: k of ``drop k smallest / largest`` (0 to skip).
        every_k: Checkpoint spacings, each training run thinned on its own (needs a ``run``
            column; skipped otherwise).
        huber_deltas: Other δ values, fitted on the base points (a value equal to
            ``huber_delta`` is skipped).
        extra: Further named tables (e.g. cooled-down losses), fitted as given.
    """
    base = _points(table)
    variants = [Variant("base", "base", base, huber_delta)]
    sizes = np.unique(base["N"].to_numpy(dtype=np.float64))
    if leave_one_out:
        if sizes.size > MANY_SIZES and 2 * sizes.size > len(base):
            warnings.warn(f"N takes {sizes.size} distinct values over {len(base)} points: "
                          "each 'leave out N=...' variant drops one or two points, not a "
                          "model size (an isoFLOP sweep with a size of its own per run: "
                          "--no-leave-one-out; sizes read off a figure: round N to the "
                          "models' sizes)",
                          UserWarning, stacklevel=2)
        digits = next((d for d in range(4, 17)
                       if len({f"{n:.{d}g}" for n in sizes}) == sizes.size), 17)
        for n in sizes:
            variants.append(Variant(f"leave out N={n:.{digits}g}", "leave_one_out",
                                    base[base["N"] != n], huber_delta))
    if drop_count and drops_possible(sizes.size, drop_count):
        variants.append(Variant(f"drop {drop_count} smallest", "drop_smallest",
                                base[base["N"] > sizes[drop_count - 1]], huber_delta))
        variants.append(Variant(f"drop {drop_count} largest", "drop_largest",
                                base[base["N"] < sizes[-drop_count]], huber_delta))
    frame = table.frame if isinstance(table, RunTable) else table
    mislabelled = run_label_problem(frame, tokens=False) if "run" in base.columns else None
    if mislabelled and any(k > 1 for k in every_k):
        warnings.warn(f"no every-k-th checkpoint variant: {mislabelled}", UserWarning,
                      stacklevel=2)
    elif "run" in base.columns:
        columns = _run_columns(table)
        if any(k > 1 for k in every_k) and (shared := _shared_run_label(frame, columns)):
            warnings.warn(f"every-k-th checkpoint variants: {shared}; each training run "
                          f"(the rows that share their {' and '.join(map(repr, columns))}) "
                          "is thinned by its checkpoints' rank in D, so these rows are "
                          "thinned as one run's mixed checkpoints (every 2nd keeps about "
                          "twice the points): give each run a label of its own",
                          UserWarning, stacklevel=2)
        for k in every_k:
            if k > 1:  # every 1st checkpoint is the base
                # thinned per training run among all its checkpoints, then (with
                # hyperparameters) each cell's best: thinning the cell bests mixed runs
                variants.append(Variant(f"every {_ordinal(k)} checkpoint", "every_kth",
                                        _points(_every_kth_per_run(table, k, columns)),
                                        huber_delta))
    for delta in huber_deltas:
        if not math.isclose(delta, huber_delta):
            variants.append(Variant(f"huber δ={delta:g}", "huber", base, float(delta)))
    taken = {v.name for v in variants}
    for name, other in (extra or {}).items():
        if name in taken:
            raise ValueError(f"variant name {name!r} is a built-in variant's; name the extra "
                             "table otherwise")
        variants.append(Variant(name, "extra", _points(other), huber_delta))
    return variants


def _run_columns(table: RunTable | pd.DataFrame) -> tuple[str, ...]:
    """The columns whose values together name one training run: ``run``, then a
    :class:`~scalebo.data.runs.RunTable`'s hyperparameters and config columns (a run label
    shared by two learning rates' runs names two runs), then ``phase`` when present. A
    column that changes at most checkpoints of a run (a logged step or current learning
    rate: the median (run, value) group holds one row) names checkpoints, not runs, and is
    left out (it would make every checkpoint a run of its own, and every-K the base)."""
    frame = table.frame if isinstance(table, RunTable) else table
    more = ((*table.hyperparameters, *table.config_columns) if isinstance(table, RunTable)
            else ())
    cols = [c for c in dict.fromkeys(("run", *more, "phase")) if c in frame.columns]
    return tuple(c for c in cols if c == "run" or "run" not in frame.columns
                 or frame.groupby(["run", c], sort=False, dropna=False).size().median() > 1)


def _every_kth_per_run(table: RunTable | pd.DataFrame, k: int,
                       columns: Sequence[str]) -> RunTable | pd.DataFrame:
    """:func:`~scalebo.data.checkpoints.every_kth` of each training run (the rows sharing the
    values of ``columns``, :func:`_run_columns`), the kept rows in the input's order."""
    from scalebo.data.checkpoints import every_kth

    frame = table.frame if isinstance(table, RunTable) else table
    runs = frame.groupby(list(columns), sort=False, dropna=False).ngroup().to_numpy()
    kept = every_kth(pd.DataFrame({"run": runs, "D": frame["D"].to_numpy(),
                                   "row": np.arange(len(frame))}), k)["row"].to_numpy()
    keep = np.zeros(len(frame), dtype=bool)
    keep[kept] = True
    return table.with_frame(frame.loc[keep]) if isinstance(table, RunTable) else frame.loc[keep]


def _shared_run_label(frame: pd.DataFrame, columns: Sequence[str] = ("run",)) -> str | None:
    """:func:`~scalebo.data.checkpoints.run_label_problem`'s repeated-D finding when one
    training run (the rows sharing the values of ``columns``, :func:`_run_columns`) repeats a
    token count D (checkpoints of one run are at distinct D), naming the data rows; None
    otherwise."""
    label = frame["run"].astype(str)
    more = [c for c in columns if c != "run"]
    if more:
        said = [", ".join(f"{c}={v}" for c, v in zip(more, values, strict=True))
                for values in frame[more].astype(str).itertuples(index=False)]
        label = label + " (" + pd.Series(said, index=frame.index, dtype=str) + ")"
    return run_label_problem(frame.assign(run=label), tokens=True)


#: More distinct model sizes than this, and than half the points, get a warning from
#: :func:`build_variants`: leave-one-model-out then leaves out single points.
MANY_SIZES = 20


def drops_possible(n_sizes: int, drop_count: int) -> bool:
    """Whether ``drop k smallest / largest`` leaves a fit 3 model sizes (of ``n_sizes``)."""
    return n_sizes > drop_count + 2


@dataclass(frozen=True)
class Skipped:
    """Why variants asked for add nothing (:func:`skipped_variants`).

    Attributes:
        kind: ``drop`` (too few model sizes), ``no_run`` (no ``run`` column),
            ``run_column`` (no ``run`` column, but a column that looks like one: the variants
            are lost to its name), ``every_first`` (``--every-k 1`` is the base).
        severity: ``warning`` for ``run_column`` (the user can get the variants back with
            ``--run COL``), ``note`` otherwise (the points cannot give them).
        text: The sentence to print.
    """

    kind: str
    severity: str
    text: str


def skipped_variants(frame: pd.DataFrame, drop_count: int, every_k: Sequence[int], *,
                     every_k_given: bool = True, skip: Sequence[str] = ()) -> list[Skipped]:
    """Why the drop and every-k-th variants add nothing to these points (empty when they all
    do), by the rules of :func:`build_variants`, each a :class:`Skipped`. ``every_k_given``:
    whether the user asked for ``every_k`` (False: the default spacings, named as such).
    Without a ``run`` column, a column that looks like one
    (:func:`~scalebo.fitting.run_clusters.run_label_column`, not one of the hyperparameters
    ``skip``) is named with the ``--run`` that would use it (severity ``warning``)."""
    from scalebo.fitting.run_clusters import run_label_column

    out = []
    n_sizes = frame["N"].nunique() if "N" in frame.columns else 0
    if drop_count and not drops_possible(n_sizes, drop_count):
        out.append(Skipped("drop", "note", f"--drop-count {drop_count}: {n_sizes} model sizes; "
                           f"dropping the {drop_count} smallest or largest needs at least "
                           f"{drop_count + 3}, so no drop variants"))
    spacing = f"--every-k {','.join(map(str, every_k))}"
    if not every_k_given:
        spacing = f"{spacing} (the default)"
    if every_k and "run" not in frame.columns:
        column = run_label_column(frame, tuple(skip))
        hint = (f"column {column!r} looks like each point's training run: --run {column}"
                if column else "checkpoints of one run share it; --run COL names yours")
        out.append(Skipped("run_column" if column else "no_run",
                           "warning" if column else "note",
                           f"{spacing}: the points have no 'run' column ({hint}), so no "
                           "every-k-th checkpoint variant"))
    elif 1 in every_k:
        out.append(Skipped("every_first", "note",
                           "--every-k 1: every checkpoint is the base itself, so no variant"))
    return out


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def gemstones_extras(data_dir=None, base: Mapping[str, str] | None = None
                     ) -> dict[str, RunTable]:
    """Gemstones tables for the data variants of a base table (``base``: its ``variant`` and
    ``validation`` options, default ``hot`` on ``main``), none of them equal to the base.

    ``cooldown end`` / ``cooldown start``: losses at the end / start of the 10 % cooldown
    (20 models); ``half lr``: the half-learning-rate runs; ``checkpoints every 2B``: the same
    runs with checkpoints every 477 steps (~2B tokens, 1,100 points) — these on the main
    validation set, so only for a base on it; ``val main`` / ``val fineweb_edu`` / ``val
    dclm``: the base's checkpoints on the other validation sets. A variant equal to the base
    is left out (``val dclm`` of a base on ``dclm`` copied it), and so is a validation set
    that lacks the base's checkpoints, with a warning saying so.
    """
    import warnings

    from scalebo.data.datasets import load_dataset
    from scalebo.errors import RunTableError

    variant = (base or {}).get("variant", "hot")
    validation = (base or {}).get("validation", "main")

    def load(**kw):
        return load_dataset("gemstones", data_dir, **kw)

    out: dict[str, RunTable] = {}
    on_main = {"cooldown end": "cool_end", "cooldown start": "cool_begin",
               "half lr": "lr_ablation_hot", "checkpoints every 2B": "hot_477"}
    skipped = []
    for name in ("cooldown end", "cooldown start", "half lr", "val main", "val fineweb_edu",
                 "val dclm", "checkpoints every 2B"):  # the order of the tables
        val = name.removeprefix("val ")
        if name in on_main:
            if validation == "main" and on_main[name] != variant:
                out[name] = load(variant=on_main[name])
        elif val != validation:
            try:
                out[name] = load(variant=variant, validation=val)
            except RunTableError:  # the set lacks some of the base's checkpoints
                skipped.append(val)
    if skipped or validation != "main":
        warnings.warn(f"gemstones variants of a base of variant {variant!r} on validation set "
                      f"{validation!r}: " + "; ".join(
                          ([f"no validation set(s) {skipped} for its checkpoints"] if skipped
                           else []) + (["the cooldown, half-lr and 2B-checkpoint variants "
                                        "exist on the main validation set only, so they are "
                                        "left out"] if validation != "main" else [])),
                      UserWarning, stacklevel=2)
    return out
