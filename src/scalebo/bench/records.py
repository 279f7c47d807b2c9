"""Benchmark records: what identifies a cell, how its JSON record is written and read back.

A **cell** (:class:`Cell`) is one ``(dataset, method, seed, budget)`` combination of a sweep.
Its result is a pure function of those inputs, so :attr:`Cell.key` — a SHA-256 prefix of
their canonical JSON (dataset source and options, method label and parameters, seed, budget
fraction, schema version) — names its record file ``<key>.json``. Records are written
atomically (:func:`write_record`: a temporary file in the same directory, fsync, then
:func:`os.replace`), so a killed sweep never leaves a partial record. The layout of a record
is documented in ``docs/records.md``.

:func:`load_records` reads a directory of records into one **tidy** DataFrame: one row per
cell × data kind × metric (see :data:`ID_COLUMNS`), where ``kind`` is ``"observed"`` (law
fitted on observed runs only), ``"fantasized"`` (observed + surrogate fill-in) or ``"run"``
(quantities of the search itself such as compute spent, which do not depend on the kind).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from scalebo import __version__

__all__ = [
    "ID_COLUMNS",
    "RECORD_SCHEMA",
    "RECORD_SCHEMA_VERSION",
    "TIMING_FIELDS",
    "Cell",
    "DatasetSpec",
    "MethodSpec",
    "is_finished",
    "jsonable",
    "load_records",
    "make_record",
    "read_record",
    "record_path",
    "write_json",
    "write_record",
]

RECORD_SCHEMA = "scalebo.bench.record"
#: Bumped when the record layout or the meaning of a cell's inputs changes (it is hashed
#: into :attr:`Cell.key`, so old records are then recomputed rather than reused).
#: A cell's identity holds the method parameters as written in the config, so a change of a
#: MethodConfig default also needs a bump. 2: fantasize_scope 'window' = the final window (was
#: 'observed'); 3: hyperparameters refitted at every ask by default (was every max(10, n/4)).
RECORD_SCHEMA_VERSION = 3
#: Top-level record fields that vary between identical runs (excluded when comparing).
TIMING_FIELDS = ("timing",)


def _freeze(mapping: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """Sorted ``(key, value)`` pairs; lists become tuples so the result is hashable."""

    def conv(v: Any) -> Any:
        if isinstance(v, Mapping):
            return tuple((str(k), conv(x)) for k, x in sorted(v.items()))
        if isinstance(v, list | tuple):
            return tuple(conv(x) for x in v)
        return v

    return tuple((str(k), conv(v)) for k, v in sorted((mapping or {}).items()))


def _thaw(value: Any) -> Any:
    """Inverse of :func:`_freeze` for JSON: pair tuples → dicts, other tuples → lists."""
    if isinstance(value, tuple):
        if value and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                         for p in value):
            return {k: _thaw(v) for k, v in value}
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset of the sweep.

    Attributes:
        name: Label used in records and reports (e.g. ``"steplaw"``).
        source: Registered problem name or path passed to ``load_problem`` (default: name).
        options: Extra keyword arguments for ``load_problem``, as sorted pairs.
    """

    name: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also the hashed identity)."""
        return {"name": self.name, "source": self.source, "options": _thaw(self.options) or {}}


@dataclass(frozen=True)
class MethodSpec:
    """A search method of the sweep.

    Attributes:
        name: Label used in records and reports (e.g. ``"window+fantasize"``).
        params: Keyword arguments of ``bench.replay.MethodConfig``, as sorted pairs
            (``method_defaults`` already merged in).
    """

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def as_kwargs(self) -> dict[str, Any]:
        """The parameters as a dict (lists for sequences)."""
        return _thaw(self.params) or {}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also the hashed identity)."""
        return {"name": self.name, "params": self.as_kwargs()}


@dataclass(frozen=True)
class Cell:
    """One ``(dataset, method, seed, budget)`` combination; ``budget`` is a fraction of C_total."""

    dataset: DatasetSpec
    method: MethodSpec
    seed: int
    budget: float

    def identity(self) -> dict[str, Any]:
        """The inputs that determine the result (JSON-ready); :attr:`key` hashes them."""
        return {
            "schema_version": RECORD_SCHEMA_VERSION,
            "dataset": self.dataset.to_dict(),
            "method": self.method.to_dict(),
            "seed": int(self.seed),
            "budget": float(self.budget),
        }

    @property
    def key(self) -> str:
        """Stable 20-hex-digit SHA-256 prefix of the canonical JSON of :meth:`identity`."""
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def label(self) -> str:
        """Human-readable ``dataset/method/seed/budget`` (for messages)."""
        return f"{self.dataset.name}/{self.method.name}/seed={self.seed}/budget={self.budget:g}"


def record_path(out_dir: str | os.PathLike[str], cell: Cell) -> Path:
    """Where the record of ``cell`` lives: ``out_dir/<cell.key>.json``."""
    return Path(out_dir) / f"{cell.key}.json"


def jsonable(value: Any) -> Any:
    """Plain JSON types; NaN/inf become None (strict JSON has no NaN), numpy → Python."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_record(out_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Atomically write ``record`` to ``out_dir/<record['key']>.json``.

    The JSON goes to a uniquely named temporary file in ``out_dir`` that is flushed, fsynced
    and then renamed over the target with :func:`os.replace` (atomic on POSIX and Windows
    within one filesystem): a reader sees either no record or a complete one.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{record['key']}.json"
    tmp = out / f".{record['key']}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with tmp.open("w") as fh:
            json.dump(jsonable(record), fh, indent=1, sort_keys=True, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def is_finished(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a readable record with ``status == "ok"``."""
    try:
        with Path(path).open() as fh:
            return json.load(fh).get("status") == "ok"
    except (OSError, ValueError):
        return False


def make_record(cell: Cell, status: str, result: Any, error: Mapping[str, str] | None,
                seconds: float, group_size: int) -> dict[str, Any]:
    """A record dict (layout in ``docs/records.md``); ``seconds`` is wall time per cell."""
    return {
        "schema": RECORD_SCHEMA,
        "schema_version": RECORD_SCHEMA_VERSION,
        "key": cell.key,
        "cell": cell.identity(),
        "status": status,
        "error": dict(error) if error else None,
        "result": result,
        "scalebo_version": __version__,
        "timing": {"seconds": seconds, "group_size": group_size,
                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "host": socket.gethostname(), "pid": os.getpid()},
    }



def write_json(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Atomically write any JSON payload to ``path`` (temporary file + :func:`os.replace`)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(jsonable(payload), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One record; raises ``ValueError`` naming the file if it is not a scalebo record."""
    path = Path(path)
    with path.open() as fh:
        rec = json.load(fh)
    if not isinstance(rec, dict) or rec.get("schema") != RECORD_SCHEMA:
        raise ValueError(f"{path} is not a {RECORD_SCHEMA} record (schema field missing).")
    return rec


def iter_records(directory: str | os.PathLike[str]) -> Iterable[dict[str, Any]]:
    """Every record of ``directory`` (``*.json`` files with the record schema), sorted by key."""
    for path in sorted(Path(directory).glob("*.json")):
        try:
            yield read_record(path)
        except ValueError:
            continue  # sweep_<name>.json manifests and foreign files


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
    ``<law>.ok`` (1 when the fit gave an estimate); its other numeric leaves (runs, compute
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
            _flatten(values, str(law), flat)
        rows += [(kind, m, v) for m, v in flat.items()]
    flat = {}
    _flatten({k: v for k, v in metrics.items() if k not in _KINDS}, "", flat)
    rows += [("run", m, v) for m, v in flat.items()]
    return rows


def load_records(directory: str | os.PathLike[str], *, include_errors: bool = False
                 ) -> pd.DataFrame:
    """All records of ``directory`` as one tidy DataFrame.

    Columns: ``key, dataset, method, seed, budget, status`` (:data:`ID_COLUMNS`), then the
    method's parameters prefixed ``param.`` (``param.strategy``, ``param.fantasize``, …),
    then ``kind`` (``observed`` / ``fantasized`` / ``run``), ``metric`` (dotted name, see
    ``docs/records.md``) and ``value`` (float; NaN when the metric was undefined).
    ``budget`` is the fraction of C_total. Rows are sorted by dataset, method, seed, budget
    (stable within a cell). Failed cells appear once with ``kind``,
    ``metric``, ``value`` = NaN and an ``error`` column when ``include_errors`` is true.
    """
    frames: list[dict[str, Any]] = []
    for rec in iter_records(directory):
        cell = rec["cell"]
        base = {"key": rec["key"], "dataset": cell["dataset"]["name"],
                "method": cell["method"]["name"], "seed": int(cell["seed"]),
                "budget": float(cell["budget"]), "status": rec["status"]}
        base.update({f"param.{k}": (json.dumps(v) if isinstance(v, list | dict) else v)
                     for k, v in cell["method"]["params"].items()})
        if rec["status"] != "ok":
            if include_errors:
                err = rec.get("error") or {}
                frames.append({**base, "kind": None, "metric": None, "value": math.nan,
                               "error": f"{err.get('type')}: {err.get('message')}"})
            continue
        frames += [{**base, "kind": k, "metric": m, "value": v} for k, m, v in _tidy_rows(rec)]
    cols = list(ID_COLUMNS) + ["kind", "metric", "value"]
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(frames).sort_values(["dataset", "method", "seed", "budget"], kind="stable",
                                          ignore_index=True)
    params = sorted(c for c in df.columns if c.startswith("param."))
    extra = [c for c in df.columns if c not in cols and c not in params]
    return df[list(ID_COLUMNS) + params + ["kind", "metric", "value"] + extra]
