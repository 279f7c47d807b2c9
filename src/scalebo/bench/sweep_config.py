"""The sweep config: a YAML file or mapping → :class:`SweepConfig` (datasets, methods, seeds
and budgets, validated), whose cells :func:`scalebo.bench.sweep.run_sweep` runs.

Budgets are fractions of C_total in (0, 1] (``"5%"`` also accepted), kept sorted ascending;
seeds are a count ``n`` (seeds ``0..n-1``) or a list of ints. An unknown or missing key
raises ``ValueError`` naming it.

Config file (YAML)::

    name: main_comparison
    seeds: 10                      # 0..9; or a list [0, 1, 2]
    budgets: [0.01, 0.05, 0.10, 0.25]   # fractions of C_total ("1%" also accepted)
    datasets:                      # label → options for bench.problems.load_problem
      steplaw: {}
      my_grid: {source: /path/to/runs.csv, heldout_k: 2}
    method_defaults: {surrogate: gp, kernel: matern52, acquisition: ei}
    methods:                       # label → bench.replay.MethodConfig fields
      full: {strategy: full, fantasize: false}
      window+fantasize: {strategy: window, fantasize: true}
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scalebo.bench.records import Cell, DatasetSpec, MethodSpec, _freeze


def _parse_budget(value: Any) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        out = float(value.strip()[:-1]) / 100.0
    else:
        out = float(value)
    if not (math.isfinite(out) and 0 < out <= 1):
        raise ValueError(f"budgets must be fractions of C_total in (0, 1] or 'x%', got {value!r}.")
    return out


def _parse_seeds(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"seeds: a count must be >= 1, got {value}.")
        return tuple(range(value))
    if isinstance(value, list | tuple) and value:
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
    def from_dict(cls, raw: Mapping[str, Any], *, default_name: str = "sweep") -> SweepConfig:
        """Validate a config mapping; raises ``ValueError`` naming the offending key."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"a sweep config must be a mapping, got {type(raw).__name__}.")
        unknown = set(raw) - {"name", "datasets", "methods", "method_defaults", "seeds",
                              "budgets", "description"}
        if unknown:
            raise ValueError(f"unknown sweep config keys: {sorted(unknown)}.")
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
            opts = dict(opts or {})
            source = str(opts.pop("source", name))
            datasets.append(DatasetSpec(str(name), source, _freeze(opts)))
        defaults = dict(raw.get("method_defaults") or {})
        m_raw = raw["methods"]
        if not isinstance(m_raw, Mapping) or not m_raw:
            raise ValueError("'methods' must be a non-empty mapping (label → MethodConfig fields).")
        methods = tuple(
            MethodSpec(str(name), _freeze({**defaults, **dict(params or {})}))
            for name, params in m_raw.items()
        )
        budgets = tuple(sorted({_parse_budget(b) for b in raw["budgets"]}))
        if not budgets:
            raise ValueError("'budgets' must not be empty.")
        return cls(str(raw.get("name", default_name)), tuple(datasets), methods,
                   _parse_seeds(raw["seeds"]), budgets)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> SweepConfig:
        """Read a YAML config file."""
        path = Path(path)
        with path.open() as fh:
            raw = yaml.safe_load(fh)
        try:
            return cls.from_dict(raw, default_name=path.stem)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def with_seeds(self, seeds: Iterable[int]) -> SweepConfig:
        """A copy restricted to other seeds (e.g. a quick subset of a big sweep)."""
        return SweepConfig(self.name, self.datasets, self.methods, tuple(seeds), self.budgets)

    def cells(self) -> list[Cell]:
        """All cells, ordered dataset → method → seed → budget."""
        return [Cell(d, m, s, b) for d in self.datasets for m in self.methods
                for s in self.seeds for b in self.budgets]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (written to ``OUT/sweep_<name>.json``)."""
        return {"name": self.name, "datasets": [d.to_dict() for d in self.datasets],
                "methods": [m.to_dict() for m in self.methods], "seeds": list(self.seeds),
                "budgets": list(self.budgets)}
