"""Records: atomic writes, strict JSON, and the tidy frame of load_records."""

from __future__ import annotations

import json
import math

import pytest

from scalebo.bench import records as rec_mod
from scalebo.bench.records import (
    ID_COLUMNS,
    Cell,
    DatasetSpec,
    MethodSpec,
    is_finished,
    load_records,
    make_record,
    read_record,
    record_path,
    write_record,
)


def law_metrics(err25: float, fail: bool = False) -> dict:
    if fail:
        return {"law": "compute", "status": "failed", "message": "no start converged",
                "n_points": 2, "params": None, "param_error": None, "heldout_mse": None,
                "extrapolation_pct": None}
    return {"law": "compute", "status": "converged", "message": "ok", "n_points": 7,
            "params": {"E": 1.8, "A": 3000.0, "alpha": 0.18},
            "param_error": {"E": 0.01, "log10_A": 0.1, "alpha": 0.002},
            "heldout_mse": 1e-4,
            "extrapolation_pct": {"1e+25": err25, "1e+27": 2 * err25, "1e+29": 3 * err25}}


def budget_metrics(budget: float, err25: float, fantasized: bool = True) -> dict:
    """The layout of ``bench.metrics.BudgetMetrics.to_dict()``."""
    return {"budget": budget, "n_runs": 40, "spent_flops": 1e20, "spent_fraction": budget,
            "floor_multiple_cells": budget / 0.0087, "floor_multiple_envelope": budget / 0.0047,
            "envelope_recovery_pct": 50.0, "cell_recovery_pct": 25.0,
            "observed": {"compute": law_metrics(err25),
                         "chinchilla": law_metrics(0.0, fail=True)},
            "fantasized": {"compute": law_metrics(err25 / 2)} if fantasized else None,
            "fantasize_message": ""}


CELL = Cell(DatasetSpec("toy", "toy"), MethodSpec("window", (("strategy", "window"),)), 3, 0.05)


def test_record_round_trip_and_strict_json(tmp_path):
    result = {"metrics": budget_metrics(0.05, -1.5), "nan": float("nan")}
    path = write_record(tmp_path, make_record(CELL, "ok", result, None, 1.0, 1))
    assert path == record_path(tmp_path, CELL) and path.name == f"{CELL.key}.json"
    text = path.read_text()
    assert "NaN" not in text and json.loads(text)["result"]["nan"] is None
    rec = read_record(path)
    assert rec["cell"] == CELL.identity() and is_finished(path)
    assert list(tmp_path.iterdir()) == [path]


def test_failed_write_leaves_no_partial_record(tmp_path, monkeypatch):
    write_record(tmp_path, make_record(CELL, "ok", {"v": 1}, None, 1.0, 1))
    before = record_path(tmp_path, CELL).read_text()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(rec_mod.json, "dump", boom)
    with pytest.raises(OSError, match="disk full"):
        write_record(tmp_path, make_record(CELL, "ok", {"v": 2}, None, 1.0, 1))
    assert record_path(tmp_path, CELL).read_text() == before  # old record intact
    assert [p.name for p in tmp_path.iterdir()] == [f"{CELL.key}.json"]  # no temp left


def test_torn_or_foreign_files_are_not_finished(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"status": "o')
    assert not is_finished(p)
    (tmp_path / "y.json").write_text("{}")
    with pytest.raises(ValueError, match="not a scalebo.bench.record"):
        read_record(tmp_path / "y.json")


def test_load_records_tidy_layout(tmp_path):
    write_record(tmp_path, make_record(CELL, "ok", {"metrics": budget_metrics(0.05, -1.5)},
                                       None, 1.0, 1))
    other = Cell(CELL.dataset, CELL.method, 4, 0.05)
    write_record(tmp_path, make_record(other, "error", None,
                                       {"type": "ValueError", "message": "bad"}, 1.0, 1))
    (tmp_path / "sweep_x.json").write_text("{}")  # manifests are ignored
    df = load_records(tmp_path)
    assert list(df.columns[:6]) == list(ID_COLUMNS)
    assert list(df.columns[-3:]) == ["kind", "metric", "value"] and "param.strategy" in df
    assert set(df["key"]) == {CELL.key} and set(df["kind"]) == {"observed", "fantasized", "run"}

    def value(kind, metric):
        sel = df[(df["kind"] == kind) & (df["metric"] == metric)]["value"]
        assert len(sel) == 1, (kind, metric)
        return float(sel.iloc[0])

    assert value("observed", "compute.extrapolation_pct.1e+25") == -1.5
    assert value("fantasized", "compute.extrapolation_pct.1e+29") == -2.25
    assert value("observed", "compute.params.alpha") == 0.18
    assert value("observed", "compute.ok") == 1.0 and value("observed", "chinchilla.ok") == 0.0
    assert math.isnan(value("observed", "chinchilla.heldout_mse"))
    assert value("run", "envelope_recovery_pct") == 50.0 and value("run", "n_runs") == 40
    assert (df["seed"] == 3).all() and (df["budget"] == 0.05).all()
    with_err = load_records(tmp_path, include_errors=True)
    err = with_err[with_err["status"] == "error"]
    assert len(err) == 1 and err["error"].iloc[0] == "ValueError: bad"
    (tmp_path / "empty").mkdir()
    assert load_records(tmp_path / "empty").empty
