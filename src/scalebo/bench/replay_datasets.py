"""The datasets of a replay sweep, checked before any cell runs: options that
:func:`scalebo.bench.problems.load_problem` takes, a source that is a registered dataset (with
its data folder) or a file, and for a csv or Parquet run table the mapped columns and axes its
header or schema holds — so that a typo fails the command (exit 2) instead of every cell.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any

from scalebo.bench.sweep_config import DatasetSpec, _thaw
from scalebo.errors import closest, with_hints

__all__ = ["check_dataset_name", "check_replay_datasets", "target_acquisition_notes"]


def _dataset_options() -> tuple[str, ...]:
    """Options a replay dataset takes besides ``source``: the keyword arguments of
    :func:`scalebo.bench.problems.load_problem` (read from its signature, imported here
    rather than at module import, which stays light)."""
    import inspect

    from scalebo.bench.problems import load_problem

    return tuple(list(inspect.signature(load_problem).parameters)[1:])


def check_replay_datasets(datasets: Iterable[DatasetSpec], data_dir: str | None = None
                          ) -> None:
    """ValueError naming a dataset option the replay's ``load_problem`` does not take, a
    source that is neither a registered dataset nor a file, a registered dataset without its
    folder (no ``data_dir`` option, argument or ``$SCALEBO_DATA_DIR``), or a mapped column
    or axis missing from a csv's header: each would fail in every cell (a custom cell
    function may take other options and names, so only the replay's runner checks them)."""
    from scalebo.data.files import check_header

    for spec in datasets:
        opts = _thaw(spec.options) or {}
        _check_dataset_options(spec.name, opts)
        _check_source(spec.source, opts.get("data_dir") or data_dir)
        check_header(spec.source, {"mapped column": list((opts.get("mapping") or {}).values()),
                                   "axis": list(opts.get("axes") or [])}, f"dataset {spec.name!r}")
        if spec.content_sha256 is not None:  # a run-table file: its rows, before any cell
            _check_rows(spec, opts)


def target_acquisition_notes(config: Any) -> list[str]:
    """One note per method with ``acquisition: target`` whose ``target_compute`` is not a
    compute a dataset of the sweep ``config`` is scored at (its ``targets``; default 1e25,
    1e27, 1e29): the search then sharpens a prediction its replay does not score."""
    from scalebo.bench.targets import check_targets

    out = []
    for method in config.methods:
        settings = method.resolved_kwargs()
        if settings.get("acquisition") != "target":
            continue
        at = float(settings.get("target_compute", 1e25))
        off = [d.name for d in config.datasets
               if at not in check_targets((_thaw(d.options) or {}).get("targets"))]
        if off:
            out.append(f"method {method.name!r} sharpens the law's prediction at {at:g} FLOPs "
                       f"(target_compute), which dataset(s) {', '.join(map(repr, off))} are "
                       "not scored at (their targets): give the method their headline "
                       "target_compute to aim it there")
    return out


def _check_rows(spec: DatasetSpec, opts: Mapping[str, Any]) -> None:
    """ValueError naming the dataset, file, data row and column of a run table the replay
    cannot load (a trial: a typo'd learning rate failed each cell in turn, exit 1)."""
    import warnings
    from pathlib import Path

    from scalebo.data.runs import load_runs
    from scalebo.errors import RunTableError

    try:
        with warnings.catch_warnings():  # the cells' notes say them, once
            warnings.simplefilter("ignore")
            load_runs(Path(spec.location), mapping=opts.get("mapping") or None,
                      hyperparameters=opts.get("axes"),
                      duplicates=opts.get("duplicates", "error"),
                      diverged_above=opts.get("diverged_above"))
    except RunTableError as exc:
        raise ValueError(f"dataset {spec.name!r}: {exc}") from None


def _check_source(source: str, data_dir: str | None) -> None:
    """ValueError for an unknown dataset name (:func:`check_dataset_name`) or a dataset of
    the public folder whose folder is not given."""
    from scalebo.data.datasets import DATA_DIR_ENV, DATASETS

    check_dataset_name(source)
    name = source.removeprefix("dataset:")
    if name in DATASETS and not data_dir and not os.environ.get(DATA_DIR_ENV):
        raise ValueError(f"dataset {name!r} is read from the public datasets folder: set "
                         f"{DATA_DIR_ENV}, pass --data-dir, or give its data_dir option.")


def _check_dataset_options(name: str, opts: Mapping[str, Any]) -> None:
    """ValueError naming an option of dataset ``name`` that the replay does not take."""
    known = _dataset_options()
    unknown = [k for k in opts if k not in known]
    if unknown:
        raise ValueError(f"dataset {name!r}: unknown option(s) "
                         f"{with_hints(unknown, known, cutoff=0.5)}; a dataset takes "
                         f"'source' and {list(known)}")
    if "mapping" in opts and not isinstance(opts["mapping"], Mapping):
        raise ValueError(f"dataset {name!r}: 'mapping' must be a mapping such as "
                         f"{{N: params, D: tokens}}, got {opts['mapping']!r}")
    for key, ok, expected in (
            ("diverged_above", lambda v: v is None or (isinstance(v, numbers.Real)
                                                       and not isinstance(v, bool)
                                                       and math.isfinite(v)),
             "a loss in nats (a number) or null"),
            ("duplicates", lambda v: v in ("error", "mean"), "'error' or 'mean'"),
            ("n_held_out_cells", lambda v: isinstance(v, numbers.Integral)
             and not isinstance(v, bool)
             and v >= 0, "a whole number of cells >= 0"),
            ("seed", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
             "an integer"),
            ("axes", lambda v: v is None or (isinstance(v, list | tuple)
                                             and all(isinstance(a, str) for a in v)),
             "a list of column names"),
            ("data_dir", lambda v: v is None or isinstance(v, str), "a folder path")):
        if key in opts and not ok(opts[key]):
            raise ValueError(f"dataset {name!r}: '{key}' must be {expected}, got "
                             f"{opts[key]!r}")
    if "targets" in opts:
        from scalebo.bench.targets import check_targets

        try:
            check_targets(opts["targets"])
        except ValueError as exc:
            raise ValueError(f"dataset {name!r}: {exc}") from None


def check_dataset_name(name: str) -> None:
    """ValueError for a replay dataset ``name`` that is neither registered
    (:data:`~scalebo.bench.problems.REGISTERED`, with or without ``dataset:``) nor a path
    with a suffix or that exists, with the closest registered name."""
    from pathlib import Path

    from scalebo.bench.problems import REGISTERED

    bare = name.removeprefix("dataset:")
    if bare in REGISTERED or Path(name).suffix or Path(name).exists():
        return
    close = closest(bare, list(REGISTERED))
    raise ValueError(f"unknown dataset {bare!r}" + (f" (did you mean {close!r}?)" if close
                     else "") + f"; replays take {list(REGISTERED)} or a run-table file "
                     "(.csv, .parquet, .jsonl, ...)")
