"""The keyword options of the registered datasets, read from their loaders' signatures.

:func:`~scalebo.data.datasets.load_dataset` (and so ``scalebo fit dataset:NAME
--dataset-option KEY=VALUE``) checks a dataset's options here before calling its loader: an
unknown key or a value of the wrong type is a ``ValueError`` that names the option, says what
it expects and lists every option of the dataset, instead of a ``TypeError`` from inside the
loader. The options are a loader's keyword-only parameters with their type annotations and
defaults, so this list cannot drift from the code; a loader that takes ``**kwargs`` (e.g. one
registered with a lambda) is not checked.

Types understood: ``int``, ``float`` (an int, or a string such as ``"1e-3"``, which YAML
reads as text, is converted), ``str``, ``bool``, ``Sequence[str]`` (a list of strings) and
``None``; any other annotation accepts every value.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scalebo.errors import closest

__all__ = ["DatasetOption", "check_dataset_options", "dataset_options", "options_help"]

_NoneType = type(None)
#: How an accepted type is named in messages, in the order they are listed.
_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
               list: "a list of strings", _NoneType: "null"}


@dataclass(frozen=True)
class DatasetOption:
    """One keyword option of a dataset loader.

    Attributes:
        name: the keyword.
        kinds: accepted types among ``bool, int, float, str, list`` (of strings) and
            ``NoneType``; empty: any value.
        default: the loader's default.
    """

    name: str
    kinds: tuple[type, ...]
    default: Any

    def expects(self) -> str:
        """What the option takes, e.g. ``"a number or null"``."""
        names = [_KIND_NAMES[k] for k in _KIND_NAMES if k in self.kinds]
        if not names:
            return "any value"
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

    def describe(self) -> str:
        """``"lr_digits (an integer, default 3)"``."""
        return f"{self.name} ({self.expects()}, default {_shown(self.default)})"

    def check(self, value: Any) -> Any:
        """``value`` as the loader takes it (a float option's int or numeric text becomes a
        float); ``ValueError`` saying what was expected when its type is not accepted."""
        kinds, given = self.kinds, value
        if not kinds or (value is None and _NoneType in kinds):
            return value
        if isinstance(value, bool):
            ok = bool in kinds
        elif isinstance(value, int):
            ok = int in kinds or float in kinds
            value = value if int in kinds else float(value)
        elif isinstance(value, float):
            ok = float in kinds
        elif isinstance(value, str):
            ok = str in kinds or (float in kinds and _is_number(value))
            value = value if str in kinds else float(value) if ok else value
        else:
            ok = (list in kinds and isinstance(value, (list, tuple))
                  and all(isinstance(v, str) for v in value))
        if not ok:
            raise ValueError(f"option {self.name} expects {self.expects()}, got "
                             f"{_shown(given)}")
        return value


def _shown(value: Any) -> str:
    """A value as YAML (and so ``--dataset-option``) spells it: ``null``, ``'c4_val'``, 3."""
    return "null" if value is None else repr(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _kinds(annotation: Any) -> tuple[type, ...]:
    """The accepted types of an annotation (empty: unknown, anything goes)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    args = typing.get_args(annotation) if union else (annotation,)
    kinds: list[type] = []
    for arg in args:
        origin = typing.get_origin(arg)
        if arg in (bool, int, float, str, _NoneType):
            kinds.append(arg)
        elif origin in (list, tuple, Sequence) and typing.get_args(arg)[:1] == (str,):
            kinds.append(list)
        else:
            return ()
    return tuple(kinds)


def _signature_options(loader: Callable[..., Any]) -> dict[str, DatasetOption] | None:
    """The keyword-only options of ``loader``; None when it takes ``**kwargs``."""
    params = inspect.signature(loader).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    try:
        hints = typing.get_type_hints(loader)
    except (NameError, TypeError):  # annotations that do not resolve: types unchecked
        hints = {}
    return {p.name: DatasetOption(p.name, _kinds(hints.get(p.name, Any)), p.default)
            for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def dataset_options(name: str) -> dict[str, DatasetOption] | None:
    """The options of the registered dataset ``name`` by keyword (None: its loader takes
    any keyword, so they are not known). ``ValueError`` for an unknown name."""
    from scalebo.data.datasets import DATASETS, list_datasets

    if name not in DATASETS:
        near = closest(name, list_datasets())
        hint = f" (did you mean {near!r}?)" if near else ""
        raise ValueError(f"unknown dataset {name!r}{hint}; registered: {list_datasets()}.")
    return _signature_options(DATASETS[name].loader)


def _listing(name: str, options: Mapping[str, DatasetOption]) -> str:
    if not options:
        return f"dataset {name!r} takes no options"
    return "its options: " + ", ".join(o.describe() for o in options.values())


def check_dataset_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against dataset ``name``'s loader (values converted as
    :meth:`DatasetOption.check` does).

    Raises:
        ValueError: unknown dataset; an option the loader does not take (with the closest
            name, if any); a value of the wrong type. The message lists the dataset's options.
    """
    known = dataset_options(name)
    if known is None:
        return dict(options)
    out = {}
    for key, value in options.items():
        if key not in known:
            close = closest(key, list(known))
            hint = f" (did you mean {close!r}?)" if close else ""
            raise ValueError(f"dataset {name!r} has no option {key!r}{hint}; "
                             f"{_listing(name, known)}")
        try:
            out[key] = known[key].check(value)
        except ValueError as exc:
            raise ValueError(f"dataset {name!r}: {exc}; {_listing(name, known)}") from None
    return out


def options_help(indent: str = "  ") -> str:
    """Every registered dataset's options, one line per option (``name  option  what it
    takes (default)``), for ``--help`` texts."""
    from scalebo.data.datasets import list_datasets

    table = {name: dataset_options(name) for name in list_datasets()}
    width = max(map(len, table)) + 2
    key_width = max((len(k) for opts in table.values() for k in opts or ()), default=0) + 2
    lines = []
    for name, options in table.items():
        rows = ([("", "any keyword (its loader takes **kwargs)")] if options is None else
                [(k, f"{o.expects()} (default {_shown(o.default)})")
                 for k, o in options.items()] or [("", "none")])
        for i, (key, text) in enumerate(rows):
            lines.append(f"{indent}{(name if i == 0 else '').ljust(width)}"
                         f"{key.ljust(key_width)}{text}".rstrip())
    return "\n".join(lines) + "\n"
