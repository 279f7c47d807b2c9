"""Reading and validating a grid file (YAML axes).

Format::

    axes:
      N: [1.0e8, 3.0e8, 1.0e9]      # parameters (required, positive)
      D: [2e9, 6e9, 2e10]           # tokens (required, positive)
      lr: [1e-3, 3e-3]              # any further axis: numbers, or text (categorical)
    held_out_cells: 0               # optional: largest-compute cells held out (default 2)

Every mistake is an error naming the file, the axis, the 1-based item and what was expected:
a YAML syntax error (with its line and column), an axis given as a string (``lr: 1e-3,
3e-3``) rather than a list, a value that is not a number on a numeric axis (``le-3``), a
mix of numbers and text, non-finite or repeated values, non-positive N or D, unknown
top-level keys. Numeric-looking strings (``"1e9"``, which YAML 1.1 reads as text) are
numbers. A single number (``lr: 3e-3``) is a one-value axis.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalebo.data.columns import number_hint, parse_number
from scalebo.errors import SearchError, yaml_problem

__all__ = ["GRID_KEYS", "LEARNING_RATE_NAMES", "check_axis", "is_learning_rate", "read_grid_file",
           "unique_key_loader"]

#: Top-level keys of a grid file.
GRID_KEYS = ("axes", "held_out_cells")


def _axis(path: Path, name: str, values: Any) -> list[Any]:
    return check_axis(f"{path}: axis {name!r}", name, values)


def check_axis(where: str, name: str, values: Any) -> list[Any]:
    """The values of axis ``name`` checked as the module docstring says (numbers as floats,
    or all text for a categorical axis; a lone number is a one-value axis); ``where`` starts
    every error (e.g. ``"grid.yaml: axis 'lr'"``).

    Raises:
        SearchError: naming ``where``, the 1-based item and what was expected.
    """
    if isinstance(values, tuple | range) or hasattr(values, "tolist"):
        values = values.tolist() if hasattr(values, "tolist") else list(values)
    if isinstance(values, str) and parse_number(values) is not None:
        values = [values]  # one number that YAML 1.1 read as text (3e-3)
    if isinstance(values, str):
        raise SearchError(f"{where} is the text {values!r}, not a list; write it as a YAML "
                          f"list, e.g. {name}: [{values}].")
    if isinstance(values, int | float) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, list) or not values:
        eg = {"N": "[1e8, 1e9]", "D": "[2e9, 2e10]"}.get(name, "[1e-3, 3e-3]")
        raise SearchError(f"{where}: expected a non-empty list of values, e.g. "
                          f"{name}: {eg}; got {values!r}.")
    numbers = [parse_number(v) for v in values]
    if any(n is None for n in numbers):
        if name in ("N", "D") or any(n is not None for n in numbers):
            bad = next(i for i, n in enumerate(numbers) if n is None)
            hint = number_hint(values[bad])
            raise SearchError(
                f"{where}, item {bad + 1}: {values[bad]!r} is not a number"
                + (" (N and D are numbers)" if name in ("N", "D") else
                   ", while other values of the axis are; a typo? (a categorical axis is all "
                   "text)") + "." + (f" {hint}" if hint else ""))
        out: list[Any] = [str(v) for v in values]
    else:
        for i, n in enumerate(numbers):
            if not math.isfinite(n):
                raise SearchError(f"{where}, item {i + 1}: {values[i]!r} is not finite.")
            if name in ("N", "D") and n <= 0:
                raise SearchError(f"{where}, item {i + 1}: {values[i]!r} must be positive "
                                  f"({'parameters' if name == 'N' else 'tokens'}).")
            if n <= 0 and is_learning_rate(name):
                raise SearchError(f"{where}, item {i + 1}: {values[i]!r} must be positive (a "
                                  "learning rate; the search reads it on a log scale).")
        out = numbers
    seen: dict[Any, int] = {}
    for i, v in enumerate(out):
        if v in seen:
            raise SearchError(f"{where}: items {seen[v] + 1} and {i + 1} repeat the value "
                              f"{values[i]!r}; list each value once.")
        seen[v] = i
    return out


#: Axis names read as a (peak) learning rate, whose values must be positive. Not ``min_lr``
#: or ``lr_warmup_steps``: a schedule's floor or warmup may well be 0.
LEARNING_RATE_NAMES = frozenset({"lr", "learning_rate", "peak_lr", "max_lr", "lr_max",
                                 "lr_peak", "base_lr", "peak_learning_rate",
                                 "max_learning_rate"})


def is_learning_rate(name: str) -> bool:
    """Whether an axis named ``name`` is a learning rate (:data:`LEARNING_RATE_NAMES`,
    case and ``-``/``_`` aside), whose values must be positive."""
    return str(name).strip().lower().replace("-", "_") in LEARNING_RATE_NAMES


def unique_key_loader() -> type:
    """A ``yaml.SafeLoader`` subclass that refuses a key given twice in one mapping (plain
    YAML keeps the last one silently: a sweep config's second method of one name, a grid's
    axis written twice)."""
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that refuses a key given twice in one mapping (YAML keeps the last)."""

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode,
                          deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base`: merged keys may be overridden, as YAML intends
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def read_grid_file(path: str | Path, mapping: Mapping[str, str] | None = None
                   ) -> tuple[dict[str, list[Any]], int | None]:
    """``(axes, held_out_cells)`` of a grid YAML file, validated (see the module docstring);
    ``held_out_cells`` is None when the file does not say. ``mapping`` (canonical name →
    the user's column name, as ``--map N=params,D=tokens`` gives it) names axes as the run
    tables do: an axis ``params`` is the axis ``N``.

    Raises:
        SearchError: any mistake in the file (names file, axis, item).
        FileNotFoundError: no such file.
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such grid file.")
    _UniqueKeyLoader = unique_key_loader()
    try:
        spec = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise SearchError(f"{path}: not valid YAML{yaml_problem(exc)}.") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("axes"), dict):
        raise SearchError(f"{path}: expected a mapping with an 'axes' mapping, e.g. "
                          "'axes: {N: [1e8, 1e9], D: [1e9, 1e10], lr: [1e-3, 3e-3]}'.")
    unknown = [k for k in spec if k not in GRID_KEYS]
    if unknown:
        raise SearchError(f"{path}: unknown key(s) {unknown}; a grid file has "
                          f"{list(GRID_KEYS)}.")
    axes = {str(k): _axis(path, str(k), v) for k, v in spec["axes"].items()}
    if mapping:
        canonical = {str(col): str(canon) for canon, col in mapping.items()}
        renamed = [canonical.get(k, k) for k in axes]
        twice = sorted({k for k in renamed if renamed.count(k) > 1})
        if twice:
            raise SearchError(f"{path}: with the mapping {dict(mapping)} the axes "
                              f"{[k for k in axes if canonical.get(k, k) in twice]} are all "
                              f"the axis {twice[0]!r}; keep one of them.")
        axes = dict(zip(renamed, axes.values(), strict=True))
    for name in ("N", "D"):
        if name not in axes and name.lower() in axes:
            raise SearchError(f"{path}: axis {name.lower()!r} — did you mean {name!r}? (N "
                              "parameters and D tokens are upper case)")
    held = spec.get("held_out_cells")
    if held is not None and (isinstance(held, bool) or not isinstance(held, int) or held < 0):
        raise SearchError(f"{path}: held_out_cells must be a whole number >= 0, got {held!r}.")
    return axes, held
