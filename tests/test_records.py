"""Records: atomic writes, strict JSON, and the tidy frame of load_records."""

from __future__ import annotations

import hashlib
import json
import math
import warnings

import pytest

from scalebo import outputs
from scalebo.bench.records import (
    ID_COLUMNS,
    IGNORED_ATTR,
    RECORD_SCHEMA_VERSION,
    Cell,
    DatasetSpec,
    IgnoredRecord,
    MethodSpec,
    RecordError,
    RecordWarning,
    is_finished,
    iter_records,
    load_records,
    make_record,
    numerics_environment,
    read_record,
    record_path,
    record_state,
    reportable_records,
    scan_records,
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

    def boom(*a, **k):  # the new content is in the temporary file, not yet renamed
        raise OSError("disk full")

    monkeypatch.setattr(outputs.os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_record(tmp_path, make_record(CELL, "ok", {"v": 2}, None, 1.0, 1))
    assert record_path(tmp_path, CELL).read_text() == before  # old record intact
    assert [p.name for p in tmp_path.iterdir()] == [f"{CELL.key}.json"]  # no temp left


def test_torn_or_foreign_files_are_not_finished(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"status": "o')
    assert not is_finished(p) and record_state(p)[0] == "corrupt"
    assert record_state(tmp_path / "absent.json") == ("missing", "")
    (tmp_path / "y.json").write_text("{}")
    with pytest.raises(ValueError, match="not a scalebo.bench.record"):
        read_record(tmp_path / "y.json")


def test_key_of_a_fixed_cell_is_pinned():
    """A hard-coded key: any change of what the identity holds or how it is hashed fails here
    (then bump RECORD_SCHEMA_VERSION on purpose and update the pin)."""
    cell = Cell(DatasetSpec("toy", "toy", (("scale", 2.0),)),
                MethodSpec("window", (("strategy", "window"),),
                           (("kernel", "matern52"), ("strategy", "window"))),
                seed=3, budget=0.05, version="0.1.0")
    text = json.dumps(cell.identity(), sort_keys=True, separators=(",", ":"))
    assert text == (
        '{"budget":0.05,"dataset":{"name":"toy","options":{"scale":2.0},"source":"toy"},'
        '"method":{"name":"window","params":{"strategy":"window"},'
        '"settings":{"kernel":"matern52","strategy":"window"}},"scalebo_version":"0.1.0",'
        '"schema_version":4,"seed":3}')
    assert cell.key == hashlib.sha256(text.encode()).hexdigest()[:20] == "7505143c4debd9691be2"
    assert RECORD_SCHEMA_VERSION == 4


def test_key_holds_the_package_version_and_the_settings(monkeypatch):
    import scalebo

    base = Cell(CELL.dataset, MethodSpec("w", (("strategy", "window"),),
                                         (("kappa", 2.0), ("strategy", "window"))), 0, 0.1)
    assert base.version == scalebo.__version__
    monkeypatch.setattr(scalebo, "__version__", "99.0.0")
    bumped = Cell(base.dataset, base.method, 0, 0.1)
    assert bumped.version == "99.0.0" and bumped.key != base.key
    assert Cell(base.dataset, base.method, 0, 0.1, base.version).key == base.key
    other = MethodSpec("w", base.method.params, (("kappa", 3.0), ("strategy", "window")))
    assert Cell(base.dataset, other, 0, 0.1, base.version).key != base.key
    assert make_record(bumped, "ok", {}, None, 1.0, 1)["scalebo_version"] == "99.0.0"


def _ok_record(tmp_path, cell=CELL):
    return write_record(tmp_path, make_record(cell, "ok", {"metrics": budget_metrics(0.05, -1.5)},
                                              None, 1.0, 1, notes=["a note"]))


def _edit(path, **changes):
    rec = json.loads(path.read_text())
    rec.update(changes)
    path.write_text(json.dumps(rec))


@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), "not valid JSON"),
    (lambda p: p.write_text(""), "empty file"),
    (lambda p: p.write_text("[1, 2]"), "a JSON list"),
    (lambda p: _edit(p, schema="other.schema"), "schema: 'other.schema'"),
    (lambda p: _edit(p, schema_version=3), "schema_version 3, this scalebo reads 4"),
    (lambda p: _edit(p, status="done"), "unknown status 'done'"),
    (lambda p: _edit(p, key="0" * 20), "is not the hash of its cell"),
    (lambda p: p.rename(p.with_name("f" * 20 + ".json")), "file name does not match"),
])
def test_unusable_records_say_why(tmp_path, damage, reason):
    path = _ok_record(tmp_path)
    assert read_record(path)["notes"] == ["a note"]
    damage(path)
    path = next(tmp_path.glob("*.json"))
    with pytest.raises(RecordError, match=reason) as info:
        read_record(path)
    assert info.value.path == str(path) and reason in info.value.reason
    assert record_state(path) == ("corrupt", info.value.reason) and not is_finished(path)


def test_load_and_iter_records_report_every_ignored_file(tmp_path):
    good = _ok_record(tmp_path)
    torn = tmp_path / ("a" * 20 + ".json")
    torn.write_text(good.read_text()[:100])
    (tmp_path / "foreign.json").write_text('{"schema": "other"}')
    stale = _ok_record(tmp_path, Cell(CELL.dataset, CELL.method, 9, 0.05))
    _edit(stale, schema_version=RECORD_SCHEMA_VERSION - 1)
    (tmp_path / "sweep_x.json").write_text("{}")  # a manifest: neither loaded nor reported
    records, ignored = scan_records(tmp_path)
    assert [r["key"] for r in records] == [CELL.key]
    assert {i.path for i in ignored} == {str(p) for p in (torn, stale, tmp_path / "foreign.json")}
    assert all(isinstance(i, IgnoredRecord) and i.reason for i in ignored)
    with pytest.warns(RecordWarning) as caught:
        df = load_records(tmp_path)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "ignored 3 record file(s)" in msg
    for name, why in ((torn.name, "not valid JSON"), ("foreign.json", "schema: 'other'"),
                      (stale.name, f"schema_version {RECORD_SCHEMA_VERSION - 1}")):
        assert any(name in line and why in line for line in msg.splitlines()), (name, msg)
    assert set(df["key"]) == {CELL.key} and len(df.attrs[IGNORED_ATTR]) == 3
    with pytest.warns(RecordWarning, match="ignored 3 record file"):
        assert [r["key"] for r in iter_records(tmp_path)] == [CELL.key]


def test_several_records_of_one_label_warn(tmp_path):
    _ok_record(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one record per label: no warning at all
        load_records(tmp_path)
    _ok_record(tmp_path, Cell(CELL.dataset, CELL.method, CELL.seed, CELL.budget, "0.0.1"))
    with pytest.warns(RecordWarning, match=r"1 cell label\(s\) have several records") as w:
        df = load_records(tmp_path)
    assert "toy/window/seed=3/budget=0.05: 2 records (scalebo 0.0.1, " in str(w[0].message)
    assert "different" not in str(w[0].message)  # only the version differs
    assert df["key"].nunique() == 2


def test_several_records_of_one_label_say_what_differs(tmp_path):
    _ok_record(tmp_path)
    edited = DatasetSpec(CELL.dataset.name, "runs.csv", CELL.dataset.options, "ab" * 32)
    _ok_record(tmp_path, Cell(edited, CELL.method, CELL.seed, CELL.budget))
    with pytest.warns(RecordWarning, match="delete the stale ones") as w:
        load_records(tmp_path)
    msg = str(w[0].message)
    assert "different dataset file or options" in msg and "method settings)" not in msg


def test_record_carries_its_numerical_environment(tmp_path):
    import platform

    import numpy
    import scipy
    from threadpoolctl import threadpool_info

    env = make_record(CELL, "ok", {}, None, 1.0, 1)["environment"]
    assert env["python"] == platform.python_version()
    assert (env["numpy"], env["scipy"]) == (numpy.__version__, scipy.__version__)
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    assert all(i["internal_api"] in env["blas"] and i["version"] in env["blas"] for i in blas)
    assert env == numerics_environment()
    # NumPy's own SIMD kernels, as numpy.show_runtime() lists them: the same install rounds
    # exp/log and sums differently on a CPU with AVX-512 (found: three tests flipped there)
    import contextlib
    import io
    import os
    import re
    import subprocess
    import sys

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        numpy.show_runtime()
    found = re.search(r"'found': \[([^\]]*)\]", shown.getvalue())
    listed = [] if found is None else re.findall(r"'([^']+)'", found.group(1))
    assert env["numpy_simd"] == (" ".join(listed) or "none")
    if listed:  # turned off, they are gone from the record's environment
        code = ("from scalebo.bench.records import numerics_environment as n; "
                "print(n()['numpy_simd'])")
        off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(
                                 [os.environ.get("NPY_DISABLE_CPU_FEATURES", ""), *listed])})
        assert off.returncode == 0, off.stderr
        assert off.stdout.strip() == "none"
    path = _ok_record(tmp_path)  # the environment is written and read back; not in the key
    assert read_record(path)["environment"] == env and CELL.key == path.stem


def test_records_of_several_environments_warn(tmp_path):
    path = _ok_record(tmp_path)
    other = _ok_record(tmp_path, Cell(CELL.dataset, CELL.method, 4, 0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one environment: no warning
        load_records(tmp_path)
    rec = json.loads(other.read_text())
    rec["environment"] = {**rec["environment"], "numpy": "1.0.0"}
    other.write_text(json.dumps(rec))
    legacy = json.loads(path.read_text())
    del legacy["environment"]  # a record written before 0.4.6 is not counted
    path.write_text(json.dumps(legacy))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_records(tmp_path)
    legacy["environment"] = numerics_environment()
    path.write_text(json.dumps(legacy))
    with pytest.warns(RecordWarning, match="computed in 2 numerical environments") as w:
        df = load_records(tmp_path)
    assert "1 record(s): blas " in str(w[0].message) and "numpy 1.0.0" in str(w[0].message)
    assert df["key"].nunique() == 2
    # the frame says which environments, and a report's header names them
    from scalebo.bench.environment import describe_environments
    from scalebo.bench.records import ENVIRONMENTS_ATTR

    envs = df.attrs[ENVIRONMENTS_ATTR]
    assert sorted(envs.values()) == [1, 1] and sum("numpy 1.0.0" in e for e in envs) == 1
    said = describe_environments(envs)
    assert said.startswith("The records come from 2 numerical environments")
    assert "(1 records)" in said
    mine = next(e for e in envs if "numpy 1.0.0" not in e)
    here = describe_environments({mine: 2})
    assert here == f"Numerical environment of every record: {mine}."
    assert "numpy_simd " in here and describe_environments({}) == ""


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
    assert df.attrs[IGNORED_ATTR] == ()
    with_err = load_records(tmp_path, include_errors=True)
    err = with_err[with_err["status"] == "error"]
    assert len(err) == 1 and err["error"].iloc[0] == "ValueError: bad"
    (tmp_path / "empty").mkdir()
    assert load_records(tmp_path / "empty").empty


def test_a_folder_of_failed_cells_is_refused_with_their_errors(tmp_path):
    """A report of a sweep whose every cell failed says why instead of crashing (it raised
    IndexError on the empty seed list); one ok record is enough to report."""
    for seed, msg in [(0, "bad"), (1, "bad"), (2, "worse.")]:
        write_record(tmp_path, make_record(Cell(CELL.dataset, CELL.method, seed, 0.05), "error",
                                           None, {"type": "ValueError", "message": msg}, 1.0, 1))
    with pytest.raises(ValueError, match=r"every current record .* failed cell \(3 cells\), "
                       r"nothing to report: 2 × ValueError: bad; 1 × ValueError: worse\. Fix "
                       r"the cause"):
        reportable_records(tmp_path)
    write_record(tmp_path, make_record(CELL, "ok", {"metrics": budget_metrics(0.05, -1.5)},
                                       None, 1.0, 1))
    assert set(reportable_records(tmp_path)["status"]) == {"ok", "error"}


def test_param_columns_are_the_resolved_settings(tmp_path):
    method = MethodSpec("w", (("strategy", "window"),),
                        (("clip_iqr", None), ("kernel", "rbf"), ("strategy", "window")))
    _ok_record(tmp_path, Cell(CELL.dataset, method, 0, 0.05))
    df = load_records(tmp_path)
    assert {"param.clip_iqr", "param.kernel", "param.strategy"} <= set(df.columns)
    assert set(df["param.kernel"]) == {"rbf"} and df["param.clip_iqr"].isna().all()
