"""Benchmark records: how the JSON record of a cell is written, checked and read back.

A **cell** (:class:`Cell`, defined with its identity in :mod:`scalebo.bench.sweep_config`
and re-exported here) is one ``(dataset, method, seed, budget)`` combination of a sweep; its
record is ``<cell.key>.json``. Records are written atomically (:func:`write_record`: a
temporary file in the same directory, fsync, then :func:`os.replace`), so a killed sweep
never leaves a partial record. The layout is documented in ``docs/records.md``.

Reading is strict (:func:`read_record`): a file that is not valid JSON (e.g. truncated), has
another schema or schema version, or whose key is not the hash of its cell raises
:class:`RecordError` with the reason. :func:`scan_records` sorts a directory into records
and ignored files (:class:`IgnoredRecord`); :func:`iter_records` and :func:`load_records` warn
(:class:`RecordWarning`) naming every ignored file and why, never dropping one silently.

:func:`load_records` reads a directory of records into one **tidy** DataFrame: one row per
cell × data kind × metric (see :data:`ID_COLUMNS`), where ``kind`` is ``"observed"`` (law
fitted on observed runs only), ``"fantasized"`` (observed + surrogate fill-in) or ``"run"``
(quantities of the search itself such as compute spent, which do not depend on the kind).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from scalebo.bench.environment import environments, numerics_environment, warn_environments
from scalebo.bench.sweep_config import (
    RECORD_SCHEMA_VERSION,
    Cell,
    DatasetSpec,
    MethodSpec,
    identity_key,
    package_version,
)
from scalebo.outputs import jsonable, write_json_file

__all__ = [
    "ENVIRONMENTS_ATTR", "ID_COLUMNS", "IGNORED_ATTR", "RECORD_SCHEMA", "RECORD_SCHEMA_VERSION",
    "NOTES_ATTR", "STALE_ATTR", "TIMING_FIELDS",
    "Cell", "DatasetSpec", "IgnoredRecord", "MethodSpec", "RecordError", "RecordWarning",
    "identity_key", "is_finished", "iter_records", "jsonable", "load_records", "make_record",
    "numerics_environment", "package_version", "read_record", "record_path", "record_state",
    "reportable_records", "scan_records", "write_json", "write_record",
]

RECORD_SCHEMA = "scalebo.bench.record"
#: Top-level record fields that vary between identical runs (excluded when comparing).
TIMING_FIELDS = ("timing",)
#: Key of ``load_records(...).attrs`` that holds the ignored files (:class:`IgnoredRecord`).
IGNORED_ATTR = "ignored_records"
#: Key of ``load_records(...).attrs`` that holds {environment: number of records}
#: (:func:`~scalebo.bench.environment.environments`).
ENVIRONMENTS_ATTR = "environments"
#: ``frame.attrs`` key of ``load_records(current_only=True)``: notes on the records left out.
STALE_ATTR = "stale_records"
#: ``frame.attrs`` key: {dataset: its records' notes on the data, each once, in order}.
NOTES_ATTR = "data_notes"
_FIELDS = ("key", "cell", "status", "error", "result")


class RecordWarning(UserWarning):
    """Record files were ignored or recomputed (unreadable, truncated, another schema), or a
    directory holds several records of one cell; the message names the files and why."""


class RecordError(ValueError):
    """A file that should hold a record cannot be used; :attr:`reason` says why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class IgnoredRecord:
    """A ``*.json`` file of a record directory that was not used, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{Path(self.path).name}: {self.reason}"



def record_path(out_dir: str | os.PathLike[str], cell: Cell) -> Path:
    """Where the record of ``cell`` lives: ``out_dir/<cell.key>.json``."""
    return Path(out_dir) / f"{cell.key}.json"


def write_record(out_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Atomically write ``record`` to ``out_dir/<record['key']>.json``.

    The JSON goes to a uniquely named temporary file in ``out_dir`` that is flushed, fsynced
    and then renamed over the target with :func:`os.replace` (atomic on POSIX and Windows
    within one filesystem): a reader sees either no record or a complete one.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return write_json_file(record, out / f"{record['key']}.json", indent=1, sort_keys=True)


def make_record(cell: Cell, status: str, result: Any, error: Mapping[str, str] | None,
                seconds: float, group_size: int, notes: Sequence[str] = ()) -> dict[str, Any]:
    """A record dict (layout in ``docs/records.md``); ``seconds`` is wall time per cell,
    ``notes`` remarks on the cell's inputs (warnings raised while loading its dataset)."""
    return {
        "schema": RECORD_SCHEMA,
        "schema_version": RECORD_SCHEMA_VERSION,
        "key": cell.key,
        "cell": cell.identity(),
        "status": status,
        "error": dict(error) if error else None,
        "result": result,
        "notes": [str(n) for n in notes],
        "scalebo_version": package_version(),
        "environment": dict(numerics_environment()),  # a copy: the function caches its own
        "timing": {"seconds": seconds, "group_size": group_size,
                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "host": socket.gethostname(), "pid": os.getpid()},
    }


def write_json(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Atomically write any JSON payload to ``path`` (:func:`scalebo.outputs.write_json_file`)."""
    return write_json_file(payload, path, indent=1, sort_keys=True)


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One record, checked; raises :class:`RecordError` (a ``ValueError``) saying why not.

    Checks: readable, non-empty, valid JSON (a truncated file is not), ``schema`` and
    ``schema_version`` of this code, the fields of a record, a known ``status``, a ``key``
    equal to the hash of its ``cell`` and to the file name.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(path, f"unreadable ({exc})") from None
    if not text.strip():
        raise RecordError(path, "empty file (truncated write?)")
    try:
        rec = json.loads(text)
    except ValueError as exc:
        raise RecordError(path, f"not valid JSON, truncated or corrupt ({exc})") from None
    if not isinstance(rec, dict):
        raise RecordError(path, f"not a {RECORD_SCHEMA} (a JSON {type(rec).__name__})")
    if rec.get("schema") != RECORD_SCHEMA:
        raise RecordError(path, f"not a {RECORD_SCHEMA} (schema: {rec.get('schema')!r})")
    if rec.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise RecordError(path, f"schema_version {rec.get('schema_version')!r}, this scalebo "
                                f"reads {RECORD_SCHEMA_VERSION} (a stale record: rerun its "
                                "sweep to recompute it)")
    missing = [f for f in _FIELDS if f not in rec]
    if missing:
        raise RecordError(path, f"missing field(s) {missing}")
    if rec["status"] not in ("ok", "error"):
        raise RecordError(path, f"unknown status {rec['status']!r}")
    if rec["key"] != identity_key(rec["cell"]):
        raise RecordError(path, f"key {rec['key']!r} is not the hash of its cell (edited?)")
    if path.stem != rec["key"]:
        raise RecordError(path, f"file name does not match its key {rec['key']!r}")
    if rec["status"] == "ok" and not isinstance(rec["result"], dict):
        raise RecordError(path, "status 'ok' without a result")
    return rec


def record_state(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(state, reason)``: state ``"missing"``, ``"ok"``, ``"error"`` (a failed cell) or
    ``"corrupt"`` (unusable file, ``reason`` says why; empty otherwise)."""
    if not Path(path).exists():
        return "missing", ""
    try:
        return read_record(path)["status"], ""
    except RecordError as exc:
        return "corrupt", exc.reason


def is_finished(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a valid record with ``status == "ok"``."""
    return record_state(path)[0] == "ok"


def scan_records(directory: str | os.PathLike[str]
                 ) -> tuple[list[dict[str, Any]], list[IgnoredRecord]]:
    """The valid records of ``directory`` (``*.json``, sorted by name) and the files ignored,
    with reasons; ``sweep_<name>.json`` manifests are neither. Does not warn."""
    records: list[dict[str, Any]] = []
    ignored: list[IgnoredRecord] = []
    for path in sorted(Path(directory).glob("*.json")):
        if path.name.startswith("sweep_"):
            continue
        try:
            records.append(read_record(path))
        except RecordError as exc:
            ignored.append(IgnoredRecord(str(path), exc.reason))
    return records, ignored


def _warn_ignored(directory: str | os.PathLike[str], ignored: Sequence[IgnoredRecord]) -> None:
    if ignored:
        lines = "".join(f"\n  {i}" for i in ignored)
        warnings.warn(f"{directory}: ignored {len(ignored)} record file(s) that cannot be "
                      f"used:{lines}", RecordWarning, stacklevel=3)


def _warn_duplicates(directory: str | os.PathLike[str], records: Sequence[Mapping]) -> None:
    """Warn when several records share a dataset/method/seed/budget label (written by other
    scalebo versions, method settings or dataset files): a report would mix them; the
    message says which of these differ."""
    by_label: dict[tuple, list[Mapping]] = defaultdict(list)
    for rec in records:
        c = rec["cell"]
        by_label[(c["dataset"]["name"], c["method"]["name"], c["seed"], c["budget"])].append(c)
    dup = [(k, v) for k, v in by_label.items() if len(v) > 1]
    if dup:
        shown = "".join(f"\n  {d}/{m}/seed={s}/budget={b:g}: {len(v)} records ({_differ(v)})"
                        for (d, m, s, b), v in dup[:5])
        more = f"\n  ... and {len(dup) - 5} more" if len(dup) > 5 else ""
        warnings.warn(f"{directory}: {len(dup)} cell label(s) have several records (other "
                      "scalebo versions, method settings or dataset files); all are loaded — "
                      f"delete the stale ones:{shown}{more}", RecordWarning, stacklevel=3)


#: The parts of a cell's identity that records of one label may differ in, as named.
IDENTITY_PARTS = (("method", "method settings"), ("dataset", "dataset file or options"),
                  ("scalebo_version", "scalebo version"))


def differing_parts(cells: Sequence[Mapping]) -> list[str]:
    """Names (:data:`IDENTITY_PARTS`) of the identity parts that differ among ``cells``."""
    return [what for field, what in IDENTITY_PARTS
            if len({json.dumps(c.get(field), sort_keys=True) for c in cells}) > 1]


def _differ(cells: Sequence[Mapping]) -> str:
    """What differs among the identities of ``cells`` that share a label."""
    versions = sorted({str(c.get("scalebo_version")) for c in cells})
    return "; ".join([f"scalebo {', '.join(versions)}",
                      *(f"different {what}" for what in differing_parts(cells)
                        if what != "scalebo version")])


def iter_records(directory: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every valid record of ``directory``, sorted by key; warns (:class:`RecordWarning`)
    naming each ignored file and why (see :func:`scan_records`)."""
    records, ignored = scan_records(directory)
    _warn_ignored(directory, ignored)
    yield from records


#: Identifier columns of :func:`load_records`, before ``kind, metric, value``.
ID_COLUMNS = ("key", "dataset", "method", "seed", "budget", "status")

_KINDS = ("observed", "fantasized")


def _flatten(value: Any, prefix: str, out: dict[str, float]) -> None:
    """Numeric leaves of nested dicts as ``{"a.b.c": float}``; lists and strings are skipped."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, int | float) or value is None:
        out[prefix] = math.nan if value is None else float(value)


def _tidy_rows(rec: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """``(kind, metric, value)`` triples of one ok record's ``result["metrics"]``.

    ``result["metrics"]`` is the replay's metrics at the cell's budget
    (``scalebo.bench.metrics.BudgetMetrics.to_dict()``): its ``observed`` and ``fantasized``
    entries map each law to nested metrics, flattened to dotted names
    (``compute.extrapolation_pct.1e+25``, ``chinchilla.param_error.alpha``) plus
    ``<law>.ok`` (1 when the fit gave an estimate) and ``<law>.converged_pct`` (100 when
    its status is ``converged``, else 0: a bound hit, no convergence, not identified or
    failed); its other numeric leaves (runs, compute
    spent, recoveries) get kind ``"run"``. Strings and the trace are not loaded.
    """
    metrics = (rec.get("result") or {}).get("metrics") or {}
    rows: list[tuple[str, str, float]] = []
    for kind in _KINDS:
        laws = metrics.get(kind) or {}
        flat: dict[str, float] = {}
        for law, values in laws.items():
            if isinstance(values, Mapping) and "params" in values:
                flat[f"{law}.ok"] = float(values.get("params") is not None)
                flat[f"{law}.converged_pct"] = 100.0 * (values.get("status") == "converged")
            _flatten(values, str(law), flat)
        rows += [(kind, m, v) for m, v in flat.items()]
    flat = {}
    _flatten({k: v for k, v in metrics.items() if k not in _KINDS}, "", flat)
    rows += [("run", m, v) for m, v in flat.items()]
    return rows


def load_records(directory: str | os.PathLike[str], *, include_errors: bool = False,
                 current_only: bool = False) -> pd.DataFrame:
    """All records of ``directory`` as one tidy DataFrame.

    Columns: ``key, dataset, method, seed, budget, status`` (:data:`ID_COLUMNS`), then the
    method's settings prefixed ``param.`` (``param.strategy``, ``param.fantasize``, …; the
    resolved settings, or the parameters as written for an unresolved method), then
    ``kind`` (``observed`` / ``fantasized`` / ``run``), ``metric`` (dotted name, see
    ``docs/records.md``) and ``value`` (float; NaN when the metric was undefined).
    ``budget`` is the fraction of C_total. Rows are sorted by dataset, method, seed, budget
    (stable within a cell). Failed cells appear once with ``kind``,
    ``metric``, ``value`` = NaN and an ``error`` column when ``include_errors`` is true.

    Files that cannot be used (:func:`scan_records`) are listed in one :class:`RecordWarning`
    and in ``frame.attrs[IGNORED_ATTR]`` (a tuple of :class:`IgnoredRecord`); several
    records of one dataset/method/seed/budget label also warn. ``frame.attrs[
    ENVIRONMENTS_ATTR]``: the numerical environments the records were computed in
    (:func:`environments`; a warning when there are several). ``current_only``: leave out
    the records of a label written under older settings (:func:`~scalebo.bench.stale.
    split_stale`), described in ``frame.attrs[STALE_ATTR]``.
    """
    records, ignored = scan_records(directory)
    stale: tuple[str, ...] = ()
    if current_only:
        from scalebo.bench.stale import split_stale

        records, stale = split_stale(directory, records)
    _warn_ignored(directory, ignored)
    _warn_duplicates(directory, records)
    warn_environments(directory, records, RecordWarning)
    frames: list[dict[str, Any]] = []
    for rec in records:
        cell = rec["cell"]
        method = cell["method"]
        settings = method.get("settings")
        base = {"key": rec["key"], "dataset": cell["dataset"]["name"],
                "method": method["name"], "seed": int(cell["seed"]),
                "budget": float(cell["budget"]), "status": rec["status"]}
        base.update({f"param.{k}": (json.dumps(v) if isinstance(v, list | dict) else v)
                     for k, v in (method["params"] if settings is None else settings).items()})
        if rec["status"] != "ok":
            if include_errors:
                err = rec.get("error") or {}
                frames.append({**base, "kind": None, "metric": None, "value": math.nan,
                               "error": f"{err.get('type')}: {err.get('message')}"})
            continue
        frames += [{**base, "kind": k, "metric": m, "value": v} for k, m, v in _tidy_rows(rec)]
    cols = list(ID_COLUMNS) + ["kind", "metric", "value"]
    if not frames:
        df = pd.DataFrame(columns=cols)
    else:
        df = pd.DataFrame(frames).sort_values(["dataset", "method", "seed", "budget"],
                                              kind="stable", ignore_index=True)
        params = sorted(c for c in df.columns if c.startswith("param."))
        extra = [c for c in df.columns if c not in cols and c not in params]
        df = df[list(ID_COLUMNS) + params + ["kind", "metric", "value"] + extra]
    df.attrs[IGNORED_ATTR] = tuple(ignored)
    df.attrs[ENVIRONMENTS_ATTR] = environments(records)
    df.attrs[STALE_ATTR] = stale
    notes: dict[str, dict[str, None]] = {}
    for rec in records:  # excluded rows, crashed configurations, ...: once per dataset
        notes.setdefault(rec["cell"]["dataset"]["name"], {}).update(
            dict.fromkeys(rec.get("notes") or ()))
    df.attrs[NOTES_ATTR] = {ds: tuple(n) for ds, n in notes.items() if n}
    return df


def reportable_records(directory: str | os.PathLike[str], *, all_records: bool = False
                       ) -> pd.DataFrame:
    """:func:`load_records` with failed cells included and, unless ``all_records``, only
    each label's current records (``current_only``), for a report; ValueError when the
    folder holds no record, or only records of failed cells (the message quotes their
    errors, most frequent first, instead of a report with nothing in it)."""
    full = load_records(directory, include_errors=True, current_only=not all_records)
    ignored = full.attrs.get(IGNORED_ATTR, ())
    if full.empty:
        why = f" ({len(ignored)} unusable record file(s) ignored)" if ignored else ""
        raise ValueError(f"{directory} holds no scalebo record (*.json){why}.")
    if not (full["status"] == "ok").any():
        errors = full.drop_duplicates("key")["error"].value_counts()
        shown = "; ".join(f"{n} × {e.rstrip('.')}" for e, n in errors.head(3).items())
        more = f" (and {len(errors) - 3} other errors)" if len(errors) > 3 else ""
        stale = full.attrs.get(STALE_ATTR, ())
        left = (f" Left out as written under older settings: {'; '.join(stale)} "
                "(--all-records reports them).") if stale else ""
        raise ValueError(f"every current record in {directory} is of a failed cell "
                         f"({errors.sum()} cells), nothing to report: {shown}{more}. Fix the "
                         "cause and rerun `scalebo bench run`, which recomputes failed "
                         f"cells.{left}")
    return full
