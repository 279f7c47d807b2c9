"""Writing results: strict JSON conversion and atomic output files.

One home for what every command and the bench write:

* :func:`jsonable` — numpy scalars/arrays, tuples, paths and enums to plain JSON types; NaN
  and ±inf become None (strict JSON has no NaN, and a missing number is not a number);
* :func:`atomic_path` — a context manager yielding a temporary path beside the target that is
  renamed over it (:func:`os.replace`, atomic within one filesystem) only if the block
  succeeds, so a reader sees either the old file or a complete new one, never half of it;
* :func:`write_json_file`, :func:`write_text_file` — built on it;
* :func:`check_output_path` — fails *before* long work when an output's folder is missing.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

__all__ = ["FIGURE_SUFFIXES", "atomic_path", "check_figure_path", "check_output_path", "jsonable",
           "save_figure", "write_json_file", "write_text_file"]


def jsonable(value: Any) -> Any:
    """Plain JSON types; NaN/inf become None; numpy → Python; paths and enums → str."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy scalar or array
        return jsonable(value.tolist())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value) if not isinstance(value, str) else str(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def check_output_path(path: str | os.PathLike[str], option: str = "output") -> Path:
    """The path, after checking that its folder exists and is a folder (no work is lost to
    a typo in a path given on the command line).

    Raises:
        FileNotFoundError: the parent folder does not exist (names the option and folder).
        IsADirectoryError: ``path`` is an existing folder.
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise FileNotFoundError(f"{option} {path}: folder {parent} does not exist; create it "
                                "first or choose another path")
    if path.is_dir():
        raise IsADirectoryError(f"{option} {path} is a folder; give a file name")
    return path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix); on success it replaces ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_file(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write ``text`` (UTF-8, flushed and fsynced) to ``path``."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return path


def write_json_file(payload: Any, path: str | os.PathLike[str], *, indent: int = 2,
                    sort_keys: bool = False) -> Path:
    """Atomically write ``payload`` as strict JSON (through :func:`jsonable`) to ``path``."""
    text = json.dumps(jsonable(payload), indent=indent, sort_keys=sort_keys, allow_nan=False)
    return write_text_file(path, text + "\n")


def save_figure(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Atomically save a matplotlib figure; the format follows ``path``'s suffix."""
    path = Path(path)
    fmt = kwargs.pop("format", None) or (path.suffix[1:] or None)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, **kwargs)
    return path


#: File formats matplotlib writes (the figure's format is its path's suffix).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif",
                   ".tiff", ".webp", ".pgf", ".raw", ".rgba")


def check_figure_path(path: str | os.PathLike[str], option: str = "--plot") -> Path:
    """:func:`check_output_path`, and a suffix matplotlib can write (checked before work).

    Raises:
        ValueError: no suffix or an unsupported one (names the option and the formats).
    """
    path = check_output_path(path, option)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        what = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise ValueError(f"{option} {path}: {what}; the figure's format comes from the "
                         f"suffix, one of {', '.join(s[1:] for s in FIGURE_SUFFIXES)}")
    return path
