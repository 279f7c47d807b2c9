"""Reading run tables from files (CSV, TSV, Parquet, JSON lines, JSON) and parsing the
command line's column mapping ``"N=params,D=tokens"``."""

from __future__ import annotations

import csv
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scalebo.data.columns import CANONICAL_COLUMNS
from scalebo.errors import RunTableError, with_hints

__all__ = ["SUFFIXES", "check_header", "parse_mapping", "read_table"]

#: File suffixes :func:`read_table` reads.
SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json")


def parse_mapping(text: str) -> dict[str, str]:
    """Parse a CLI column mapping ``"N=params,D=tokens"`` into ``{"N": "params", ...}``.

    Keys are canonical names (``run_id``, ``N``, ``D``, ``C``, ``loss``); values are column
    names of the user's table (spaces inside are kept, surrounding spaces are stripped).

    Raises:
        RunTableError: on an item without ``=``, an empty name, an unknown canonical name, or
            a canonical name given twice.
    """
    mapping: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if ";" in value and "=" in value:  # "N=params;D=tokens": items split by ';'
            raise RunTableError(
                f"column mapping {text!r}: separate its items with commas, not ';': "
                f"{text.replace(';', ',')!r}."
            )
        if not sep or not key or not value:
            raise RunTableError(
                f"column mapping {text!r}: item {item.strip()!r} is not of the form "
                f"CANONICAL=column, e.g. 'N=params,D=tokens'."
            )
        if key not in CANONICAL_COLUMNS:
            raise RunTableError(
                f"column mapping {text!r}: {key!r} is not a canonical column; "
                f"expected one of {list(CANONICAL_COLUMNS)}."
            )
        if key in mapping:
            raise RunTableError(
                f"column mapping {text!r}: {key!r} is mapped twice "
                f"({mapping[key]!r} and {value!r}); keep one."
            )
        mapping[key] = value
    return mapping


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a run table from disk, choosing the format by suffix.

    Supported: ``.csv``, ``.tsv``, ``.parquet`` / ``.pq``, ``.jsonl`` / ``.ndjson`` (JSON
    lines) and ``.json`` (a list of records, or JSON lines). A ``.csv`` whose header line has
    no comma but ``;``, a tab or ``|`` (a spreadsheet's export in some locales) is read with
    that separator; a decimal comma in its values is then reported by the loader as a value
    that is not a number.

    Raises:
        RunTableError: missing file, unknown suffix, or a file the parser rejects.
    """
    path = Path(path)
    if path.is_dir():
        raise RunTableError(f"{path}: is a folder, not a run table file; give the file.")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise RunTableError(
            f"{path}: unsupported file type {suffix or '(no suffix)'!r}; expected one of "
            f"{list(SUFFIXES)}. Convert the file or load it with pandas and pass the DataFrame."
        )
    if not path.is_file():
        raise RunTableError(f"{path}: no such file.")
    size = path.stat().st_size  # blank lines only (a text file of at most 4 kB) count as empty
    if size == 0 or (suffix in (".csv", ".tsv", ".jsonl", ".ndjson", ".json") and size <= 4096
                     and not path.read_bytes().strip()):
        raise RunTableError(f"{path}: the file is empty; expected a header line of column "
                            "names and one row per run.")
    header, sep = _header(path) if suffix in (".csv", ".tsv") else ("", ",")
    try:
        if suffix in (".csv", ".tsv"):
            frame = pd.read_csv(path, sep=sep)
            # a short row leaves its last column empty: only then is the file scanned again
            if frame.shape[1] and frame.iloc[:, -1].isna().any() and (said := _short_rows(path)):
                warnings.warn(f"{path}: {said}", UserWarning, stacklevel=2)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif suffix in (".jsonl", ".ndjson"):
            frame = pd.read_json(path, lines=True, dtype=False)
        else:
            try:
                frame = pd.read_json(path, orient="records", dtype=False)
            except ValueError:
                frame = pd.read_json(path, lines=True, dtype=False)
    except (ValueError, OSError, ImportError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise RunTableError(f"{path}: {_not_utf8(path, exc)}") from None
        if re.search(r"Expected \d+ fields in line \d+, saw \d+", str(exc)) and (
                said := _ragged_row(path)):
            raise RunTableError(f"{path}: {said}") from None
        if suffix in (".jsonl", ".ndjson") and (said := _bad_json_line(path)):
            raise RunTableError(f"{path}: {said}") from None
        raise RunTableError(f"{path}: could not be read as {suffix[1:]}: {exc}") from exc
    if suffix in (".csv", ".tsv") and (said := _repeated_names(header, sep)):
        raise RunTableError(f"{path}: {said}")
    return _stripped_names(frame, path)


def _repeated_names(line: str, sep: str) -> str:
    """What repeats in a CSV header ``line`` (:func:`_header`; the parser renames a second
    ``loss`` to ``loss.1``, and the first one would be read silently), or ``""``."""
    # names as written (ones differing by spaces are said later); empty ones are unnamed
    written = next(csv.reader([line.rstrip("\r\n")], delimiter=sep), [])
    names = [n for n in written if n]
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if not twice:
        return ""
    at = [i + 1 for i, n in enumerate(written) if n == twice[0]]
    return (f"the column name {twice[0]!r} appears {len(at)} times in the header (columns "
            f"{', '.join(map(str, at))}); give each column its own name")


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    """Where a text file stops being UTF-8: its 1-based line and the byte."""
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            return (f"not UTF-8 text: line {number} has the byte 0x{line[bad.start]:02x} "
                    f"(position {bad.start + 1}); save the file as UTF-8 (a spreadsheet's "
                    "'CSV UTF-8'), or read it with pandas and pass the DataFrame")
    return f"not UTF-8 text ({exc.reason})"


def _field_counts(path: Path) -> tuple[int, Iterator[tuple[int, int, int]]]:
    """The header's number of fields and an iterator over the data rows of a ``.csv`` /
    ``.tsv`` (blank lines skipped, as loading counts rows; quoted line breaks kept in their
    row): each row's 1-based data row, last file line and number of fields."""
    sep = _header(path)[1]
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        width = len(next(csv.reader(fh, delimiter=sep), []))

    def rows() -> Iterator[tuple[int, int, int]]:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh, delimiter=sep)
            next(reader, None)
            row = 0
            for fields in reader:
                if any(f.strip() for f in fields):
                    row += 1
                    yield row, reader.line_num, len(fields)

    return width, rows()


def _ragged_row(path: Path) -> str:
    """Where a ``.csv`` / ``.tsv`` row has more fields than its header (pandas names a file
    line that blank lines and quoted line breaks shift): the 1-based data row as loading
    counts them and the file line; "" when none is found."""
    width, rows = _field_counts(path)
    for row, line, n in rows:
        if n > width:
            return (f"data row {row} (line {line} of the file) has {n} fields where the "
                    f"header has {width}: a separator inside a value (quote it), or a value "
                    "too many?")
    return ""


def _short_rows(path: Path) -> str:
    """Rows of a ``.csv`` / ``.tsv`` with fewer fields than the header (pandas reads their
    missing trailing values as empty, e.g. a loss: the run then counts as failed), by 1-based
    data row; "" when every row is whole."""
    width, rows = _field_counts(path)
    short = [(row, n) for row, _, n in rows if n < width]
    if not short:
        return ""
    shown = ", ".join(f"data row {r} ({n} fields)" for r, n in short[:5])
    return (f"{len(short)} row(s) have fewer fields than the header's {width}: {shown}"
            f"{' ...' if len(short) > 5 else ''}; their missing trailing values read as empty "
            "(write the trailing separators, e.g. '1e8,2e9,' for a run without a loss)")


def _bad_json_line(path: Path) -> str:
    """The first line of a JSON-lines file that is not a JSON object (blank lines skipped),
    with its 1-based data row; "" when every line is one."""
    import json

    row = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row += 1
            try:
                ok = isinstance(json.loads(line.strip()), dict)
            except ValueError as exc:
                return (f"line {number} (data row {row}) is not valid JSON ({exc.msg} at "
                        f"column {exc.colno}): {line.strip()[:60]!r}")
            if not ok:
                return f"line {number} (data row {row}) is not a JSON object ({{...}})"
    return ""


def _stripped_names(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``frame`` with spaces around its column names removed (``'lr '`` → ``'lr'``: a header
    written by hand or a spreadsheet; every command, ``--map`` and ``--hyperparameters`` then
    name it alike), with a warning naming them; RunTableError when two names become one."""
    names = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    changed = [c for c, n in zip(frame.columns, names, strict=True) if c != n]
    if not changed:
        return frame
    if len(set(names)) < len(names):
        twins = sorted({n for n in names if names.count(n) > 1}, key=str)
        raise RunTableError(f"{path}: columns differ only by spaces around their names "
                            f"({twins}: {[c for c in frame.columns if str(c).strip() in twins]}); "
                            "rename one of them.")
    warnings.warn(f"{path}: spaces around column name(s) {changed} removed (read as "
                  f"{[c.strip() for c in changed]}).", UserWarning, stacklevel=3)
    frame.columns = names
    return frame


#: Separators a ``.csv`` may use instead of the comma, tried in this order.
OTHER_SEPARATORS = (";", "\t", "|")


def _header(path: Path) -> tuple[str, str]:
    """A ``.csv`` / ``.tsv`` file's header line and its separator: a ``.tsv`` is tab-separated;
    a ``.csv`` is comma-separated unless its header has no comma but one of
    :data:`OTHER_SEPARATORS` (decided on the header, so that decimal commas in the values
    cannot make the comma parse fail first). The header is read as the parser reads it: past
    a byte-order mark and blank lines."""
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        line = next((text for text in fh if text.strip()), "")
    if path.suffix.lower() == ".tsv":
        return line, "\t"
    if "," in line:
        return line, ","
    return line, next((sep for sep in OTHER_SEPARATORS if sep in line), ",")


def _column_names(path: Path) -> list[str] | None:
    """A run table's column names read without its rows: a ``.csv`` / ``.tsv`` header line
    (with the separator the loader uses) or a Parquet schema (file metadata only); None for
    other formats or a schema that cannot be read (the loader then reports it)."""
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        line, sep = _header(path)
        return [c.strip() for c in next(csv.reader([line.strip()], delimiter=sep), [])]
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq

            return [str(c) for c in pq.read_schema(path).names if not str(c).startswith("__")]
        except (OSError, ValueError, ImportError):
            return None
    return None


def check_header(path: str | Path, columns: dict[str, list[str]], name: str) -> None:
    """Raise :class:`RunTableError` when a ``.csv`` / ``.tsv`` file's header line or a
    Parquet file's schema lacks one of ``columns`` (``{what: [column, ...]}``, e.g.
    ``{"mapped column": ["params"]}``), with the closest names it has; JSON files and
    unreadable files are left to the loader (JSON has no header: checking it costs what
    loading does). Lets a sweep refuse a typo in a dataset's ``mapping`` or ``axes`` when its
    config is read rather than in every cell."""
    path = Path(path)
    have = _column_names(path) if path.is_file() else None
    if have is None:
        return
    for what, wanted in columns.items():
        absent = [c for c in wanted if c not in have]
        if absent:
            where = "header" if path.suffix.lower() in (".csv", ".tsv") else "schema"
            raise RunTableError(f"{name}: {what}(s) {with_hints(absent, have)} not in the "
                                f"{where} of {path}; its columns: {have}.")


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
