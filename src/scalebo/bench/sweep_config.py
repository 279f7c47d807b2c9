"""The sweep config and the identity of its cells: a YAML file or mapping → :class:`SweepConfig`
(validated) → cells (:class:`Cell`), which :func:`scalebo.bench.sweep.run_sweep` runs.

A cell's identity (:meth:`Cell.identity`, hashed into :attr:`Cell.key`) holds everything its
result depends on: the dataset label, source and options; the method label, its parameters
as written and its **resolved settings** (from a **resolver**, ``params → every setting after
defaults``, given to :meth:`SweepConfig.from_dict`; by default :func:`replay_method_settings`,
the replay's ``MethodConfig``, which rejects an unknown field or value); the seed; the budget
fraction; ``scalebo.__version__`` and :data:`RECORD_SCHEMA_VERSION`. So resuming a sweep after
a code or default change recomputes the cells instead of reusing stale records.

Budgets are fractions of C_total in (0, 1] (``"5%"`` also; one may be alone, ``budgets: 5%``),
sorted; seeds are a count ``n`` (``0..n-1``) or a list of ints; each dataset's options are a
mapping (``{}`` for none). An unknown or missing key, or a file that is not valid YAML (with
its line and column), raises ``ValueError`` naming it.

Config file (YAML)::

    name: main_comparison
    seeds: 10                      # 0..9; or a list [0, 1, 2]
    budgets: [0.01, 0.05, 0.10, 0.25]   # fractions of C_total ("1%" also accepted)
    datasets:                      # label → options for bench.problems.load_problem
      steplaw: {}
      my_grid: {source: /path/to/runs.csv, n_held_out_cells: 2, duplicates: mean,
                mapping: {N: params, D: tokens, loss: val_loss}, axes: [lr, bs],
                diverged_above: 9.0,   # losses at or above: diverged (failed when bought)
                targets: [1e21, 1e22]}  # FLOPs the law is scored at (default 1e25, 1e27, 1e29)
    method_defaults: {surrogate: gp, kernel: matern52, acquisition: ei}
    methods:                       # label → bench.replay.MethodConfig fields
      full: {strategy: full, fantasize: false}
      window+fantasize: {strategy: window, fantasize: true}
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scalebo.bench.targets import canonical_targets
from scalebo.errors import with_hints, yaml_problem
from scalebo.search.budget import parse_fraction

__all__ = ["RECORD_SCHEMA_VERSION", "Cell", "DatasetSpec", "MethodResolver", "MethodSpec",
           "SweepConfig", "identity_key", "package_version",
           "replay_method_settings", "resolve_method"]

#: Bumped when the record layout or the meaning of a cell's inputs changes (it is hashed
#: into :attr:`Cell.key`, so old records are then recomputed rather than reused).
#: 2: fantasize_scope 'window' = the final window (was 'observed'); 3: hyperparameters
#: refitted at every ask by default (was every max(10, n/4)); 4: the identity holds the
#: package version and the resolved method settings (every MethodConfig field after
#: defaults), so a changed default or a new ``scalebo.__version__`` recomputes without a
#: bump here; records carry ``notes`` (warnings raised while loading the dataset). A change
#: of behaviour under an unchanged version and defaults still needs a bump of one of them.
RECORD_SCHEMA_VERSION = 4


def package_version() -> str:
    """The running ``scalebo.__version__`` (read at call time)."""
    import scalebo

    return str(scalebo.__version__)


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
        content_sha256: SHA-256 of the run-table file when ``source`` is one (None for a
            registered dataset), set by :meth:`SweepConfig.from_dict`.
        path: that file's absolute path, resolved when the config is read (not part of the
            identity: a sweep moved with its files keeps its records).
    """

    name: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()
    content_sha256: str | None = None
    path: str | None = field(default=None, compare=False)

    @property
    def location(self) -> str:
        """Where the cells load the dataset: a run-table file's absolute path (resolved
        where the config was read: a Dask worker's current folder is another), else
        ``source``."""
        return self.path or self.source

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also the hashed identity); a run-table file's content digest is
        part of it, so editing the file recomputes its cells instead of reusing them."""
        out = {"name": self.name, "source": self.source, "options": _thaw(self.options) or {}}
        if self.content_sha256 is not None:
            out["content_sha256"] = self.content_sha256
        return out


@dataclass(frozen=True)
class MethodSpec:
    """A search method of the sweep.

    Attributes:
        name: Label used in records and reports (e.g. ``"window+fantasize"``).
        params: Keyword arguments of ``bench.replay.MethodConfig`` as written in the config,
            as sorted pairs (``method_defaults`` already merged in).
        settings: Every setting the method runs with (for the replay: each
            ``MethodConfig`` field after defaults are filled in), as sorted pairs; None when
            the config was parsed without a resolver. Part of the identity.
    """

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    settings: tuple[tuple[str, Any], ...] | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The parameters as written, as a dict (lists for sequences)."""
        return _thaw(self.params) or {}

    def resolved_kwargs(self) -> dict[str, Any]:
        """The resolved settings as a dict, or the written parameters when unresolved."""
        return self.as_kwargs() if self.settings is None else (_thaw(self.settings) or {})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also the hashed identity)."""
        settings = None if self.settings is None else (_thaw(self.settings) or {})
        return {"name": self.name, "params": self.as_kwargs(), "settings": settings}


def identity_key(identity: Mapping[str, Any]) -> str:
    """20-hex-digit SHA-256 prefix of the canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Cell:
    """One ``(dataset, method, seed, budget)`` combination; ``budget`` is a fraction of C_total.

    ``version`` is the package version the cell is computed with (default: the running
    ``scalebo.__version__``, taken when the cell is made, so workers agree with the sweep).
    """

    dataset: DatasetSpec
    method: MethodSpec
    seed: int
    budget: float
    version: str = field(default_factory=package_version)

    def identity(self) -> dict[str, Any]:
        """The inputs that determine the result (JSON-ready); :attr:`key` hashes them."""
        return {
            "schema_version": RECORD_SCHEMA_VERSION,
            "scalebo_version": self.version,
            "dataset": self.dataset.to_dict(),
            "method": self.method.to_dict(),
            "seed": int(self.seed),
            "budget": float(self.budget),
        }

    @property
    def key(self) -> str:
        """Stable 20-hex-digit SHA-256 prefix of the canonical JSON of :meth:`identity`."""
        return identity_key(self.identity())

    @property
    def label(self) -> str:
        """Human-readable ``dataset/method/seed/budget`` (for messages)."""
        return f"{self.dataset.name}/{self.method.name}/seed={self.seed}/budget={self.budget:g}"


#: ``resolver(params) -> settings``: every setting a method runs with, from its parameters as
#: written (raises ``ValueError`` / ``TypeError`` for an unknown field or value).
MethodResolver = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def replay_method_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The replay task's resolver: ``MethodConfig(**params).to_dict()``, every field of
    :class:`scalebo.bench.replay.MethodConfig` after defaults are filled in."""
    import dataclasses

    from scalebo.bench.replay import MethodConfig
    from scalebo.errors import with_hints

    fields = [f.name for f in dataclasses.fields(MethodConfig)]
    unknown = [k for k in params if k not in fields]
    if unknown:
        raise ValueError(f"unknown method field(s) {with_hints(unknown, fields)}; "
                         f"MethodConfig fields: {fields}")
    return MethodConfig(**params).to_dict()


def resolve_method(spec: MethodSpec, resolver: MethodResolver | None) -> MethodSpec:
    """``spec`` with ``settings = resolver(params)`` (unchanged when ``resolver`` is None);
    raises ``ValueError`` naming the method when the resolver rejects its parameters."""
    if resolver is None:
        return spec
    try:
        settings = _freeze(resolver(spec.as_kwargs()))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"method {spec.name!r}: {exc}") from None
    return MethodSpec(spec.name, spec.params, settings)


def _file_digest(source: str) -> str | None:
    """SHA-256 (hex) of ``source`` when it names a run-table file, else None; raises
    ValueError for a run-table path (a known suffix) that is no file."""
    from scalebo.bench.problems import REGISTERED
    from scalebo.data.files import SUFFIXES, file_sha256

    path = Path(source)
    if source in REGISTERED or source.startswith("dataset:"):
        return None
    if not path.is_file() and path.suffix.lower() in SUFFIXES:  # every cell would fail
        raise ValueError(f"dataset source {source!r}: no such file (a relative path is "
                         f"taken from the current folder, {Path.cwd()}).")
    return file_sha256(path) if path.is_file() else None


def _parse_budget(value: Any) -> float:
    try:
        return parse_fraction(value)
    except ValueError as exc:
        raise ValueError(f"budgets: {exc}.") from None


def _parse_seeds(value: Any) -> tuple[int, ...]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
        if value < 1:
            raise ValueError(f"seeds: a count must be >= 1, got {value}.")
        return tuple(range(value))
    if isinstance(value, list | tuple) and value:
        bad = [s for s in value
               if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0]
        if bad:
            raise ValueError(f"seeds: {bad[0]!r} is not a seed; seeds are integers >= 0, "
                             f"got {list(value)!r}.")
        if len(set(value)) < len(value):
            twice = sorted({s for s in value if list(value).count(s) > 1})
            raise ValueError(f"seeds: {twice} listed more than once in {list(value)!r}.")
        return tuple(int(s) for s in value)
    raise ValueError(f"seeds must be a count (int) or a non-empty list of ints, got {value!r}.")


@dataclass(frozen=True)
class SweepConfig:
    """A parsed sweep configuration (see the module docstring for the YAML layout).

    Attributes:
        name: Sweep name.
        datasets: Datasets, in config order.
        methods: Methods, in config order.
        seeds: Seeds (ints).
        budgets: Budget fractions of C_total, ascending.
    """

    name: str
    datasets: tuple[DatasetSpec, ...]
    methods: tuple[MethodSpec, ...]
    seeds: tuple[int, ...]
    budgets: tuple[float, ...]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, default_name: str = "sweep",
                  resolver: MethodResolver | None = replay_method_settings) -> SweepConfig:
        """Validate a config mapping; raises ``ValueError`` naming the offending key.

        ``resolver`` fills in each method's :attr:`MethodSpec.settings` (default: the
        replay's ``MethodConfig``, which also rejects an unknown field or value); None keeps
        only the parameters as written (for a cell function that is not the replay).
        """
        if not isinstance(raw, Mapping):
            raise ValueError(f"a sweep config must be a mapping, got {type(raw).__name__}.")
        keys = ("name", "datasets", "methods", "method_defaults", "seeds", "budgets",
                "description")
        if unknown := set(raw) - set(keys):
            raise ValueError(f"unknown sweep config keys: {with_hints(sorted(unknown), keys)}; "
                             f"a sweep config has {list(keys)}.")
        for key in ("datasets", "methods", "seeds", "budgets"):
            if key not in raw:
                raise ValueError(f"sweep config is missing '{key}'.")
        ds_raw = raw["datasets"]
        if isinstance(ds_raw, list):
            ds_raw = {str(n): {} for n in ds_raw}
        if not isinstance(ds_raw, Mapping) or not ds_raw:
            raise ValueError("'datasets' must be a non-empty mapping (label → options) or list.")
        datasets = []
        for name, opts in ds_raw.items():
            if opts is not None and not isinstance(opts, Mapping):
                raise ValueError(f"datasets: {name!r} takes a mapping of options (e.g. "
                                 f"{{source: runs.csv}}, or {{}}), got {opts!r}.")
            opts = dict(opts or {})
            source = str(opts.pop("source", name))
            if isinstance(cut := opts.get("diverged_above"), int) and not isinstance(cut, bool):
                opts["diverged_above"] = float(cut)  # 9 and 9.0: one cell, not two
            if "targets" in opts:  # 1e21, "1e21", [1.0e+21, 1e21]: one cell identity
                opts["targets"] = canonical_targets(opts["targets"])
            digest = _file_digest(source)
            datasets.append(DatasetSpec(str(name), source, _freeze(opts), digest,
                                        str(Path(source).resolve()) if digest else None))
        defaults = dict(raw.get("method_defaults") or {})
        m_raw = raw["methods"]
        if not isinstance(m_raw, Mapping) or not m_raw:
            raise ValueError("'methods' must be a non-empty mapping (label → MethodConfig fields).")
        methods = tuple(
            resolve_method(MethodSpec(str(name), _freeze({**defaults, **dict(params or {})})),
                           resolver)
            for name, params in m_raw.items()
        )
        b_raw = raw["budgets"]  # one budget may be written alone: budgets: 5%
        b_raw = [b_raw] if isinstance(b_raw, str | numbers.Real) else b_raw
        if not isinstance(b_raw, list | tuple):
            raise ValueError(f"budgets: expected a list of fractions of C_total such as "
                             f"[0.01, '5%'], got {b_raw!r}.")
        parsed = [_parse_budget(b) for b in b_raw]
        if twice := sorted({b for b in parsed if parsed.count(b) > 1}):
            raise ValueError(f"budgets: {', '.join(f'{b:g}' for b in twice)} given twice "
                             f"(as {[b for b in b_raw if _parse_budget(b) in twice]}); "
                             "list each budget once")
        budgets = tuple(sorted(set(parsed)))
        if not budgets:
            raise ValueError("'budgets' must not be empty.")
        return cls(str(raw.get("name", default_name)), tuple(datasets), methods,
                   _parse_seeds(raw["seeds"]), budgets)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], *,
                  resolver: MethodResolver | None = replay_method_settings) -> SweepConfig:
        """Read a YAML config file (``resolver`` as in :meth:`from_dict`)."""
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"{path}: is a folder; give the sweep config (YAML) file")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such sweep config")
        from scalebo.search.grid_file import unique_key_loader

        try:
            with path.open() as fh:
                raw = yaml.load(fh, Loader=unique_key_loader())  # noqa: S506 (a SafeLoader)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML{yaml_problem(exc)}.") from None
        try:
            return cls.from_dict(raw, default_name=path.stem, resolver=resolver)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def with_seeds(self, seeds: Iterable[int]) -> SweepConfig:
        """A copy restricted to other seeds (e.g. a quick subset of a big sweep)."""
        return SweepConfig(self.name, self.datasets, self.methods, tuple(seeds), self.budgets)

    def resolved(self, resolver: MethodResolver) -> SweepConfig:
        """A copy whose methods' settings are ``resolver(params)`` (see :meth:`from_dict`)."""
        methods = tuple(resolve_method(m, resolver) for m in self.methods)
        return SweepConfig(self.name, self.datasets, methods, self.seeds, self.budgets)

    def cells(self) -> list[Cell]:
        """All cells, ordered dataset → method → seed → budget (version: the running one)."""
        version = package_version()
        return [Cell(d, m, s, b, version) for d in self.datasets for m in self.methods
                for s in self.seeds for b in self.budgets]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (written to ``OUT/sweep_<name>.json``)."""
        return {"name": self.name, "datasets": [d.to_dict() for d in self.datasets],
                "methods": [m.to_dict() for m in self.methods], "seeds": list(self.seeds),
                "budgets": list(self.budgets)}
