"""Records a report should not mix: older runs of a dataset/method label under other settings.

A sweep folder keeps every record it ever wrote. After a config edit (a method setting, a
budget), a new scalebo version or an edited dataset file, a resumed sweep computes new cells
beside the old ones, and a report grouping by label would average both or show old cells
under the label's new meaning. :func:`split_stale` keeps, for each (dataset, method) label,
the records of its current identity — the method's resolved settings, the dataset's source,
options and file digest, and the scalebo version — and returns the others as stale,
described for the report (how many, and what differs). The current identity is the one the
newest sweep manifest (``sweep_<name>.json``, rewritten by every ``bench run``, even one that
recomputes nothing) lists for the label; a label no manifest lists (or whose listed identity
no record has) takes that of its newest record file. Records of one identity at other seeds
or budgets (a ``--seeds`` subset, a budget dropped from the config) are not stale.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scalebo.bench.records import IDENTITY_PARTS, differing_parts

__all__ = ["split_stale"]


def _identity(cell: Mapping[str, Any]) -> str:
    return json.dumps([cell.get(field) for field, _ in IDENTITY_PARTS], sort_keys=True)


def split_stale(directory: str | os.PathLike[str], records: Sequence[Mapping[str, Any]]
                ) -> tuple[list[Mapping[str, Any]], tuple[str, ...]]:
    """``(current records, notes on the stale ones)``; the newest record file (modification
    time) of each (dataset, method) label sets its current identity."""
    by_label: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        c = rec["cell"]
        by_label[(c["dataset"]["name"], c["method"]["name"])].append(rec)
    listed = _listed_identities(directory)
    current: list[Mapping[str, Any]] = []
    notes = []
    for (ds, method), recs in by_label.items():
        def written(rec: Mapping[str, Any]) -> float:
            path = Path(directory) / f"{rec['key']}.json"
            return path.stat().st_mtime if path.exists() else 0.0

        newest = listed.get((ds, method))
        if newest is None or not any(_identity(r["cell"]) == newest for r in recs):
            newest = _identity(max(recs, key=written)["cell"])
        keep = [r for r in recs if _identity(r["cell"]) == newest]
        current += keep
        if stale := [r for r in recs if _identity(r["cell"]) != newest]:
            notes.append(f"{ds}/{method}: {len(stale)} older record(s) of other "
                         f"{_what_differs([keep[0]['cell'], *(r['cell'] for r in stale)])}")
    keys = {r["key"] for r in current}
    return [r for r in records if r["key"] in keys], tuple(notes)


def _listed_identities(directory: str | os.PathLike[str]) -> dict[tuple[str, str], str]:
    """(dataset, method) label → the identity the newest manifest listing it gives it."""
    out: dict[tuple[str, str], str] = {}
    paths = sorted(Path(directory).glob("sweep_*.json"), key=lambda p: p.stat().st_mtime)
    for path in paths:  # oldest first: a newer manifest overrides
        try:
            m = json.loads(path.read_text())
            for d in m["datasets"]:
                for meth in m["methods"]:
                    out[(d["name"], meth["name"])] = _identity(  # as a cell of it
                        {"method": meth, "dataset": d,
                         "scalebo_version": m.get("scalebo_version")})
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a manifest this reads: the record files decide
    return out


def _what_differs(cells: Sequence[Mapping[str, Any]]) -> str:
    return " or ".join(differing_parts(cells)) or "identity"
