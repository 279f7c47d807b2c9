"""Sweep runner: config parsing, stable cell keys, atomic records, resume, grouping, failures.

The runner is exercised with stub cell functions (pure functions of the cell) so that these
tests are fast and independent of the replay implementation.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from scalebo.bench import replay as replay_mod
from scalebo.bench.intervals import without_wall_times
from scalebo.bench.records import (
    TIMING_FIELDS,
    Cell,
    RecordWarning,
    is_finished,
    load_records,
    record_path,
)
from scalebo.bench.sweep import SweepConfig, Task, execute_task, make_tasks, run_sweep

CONFIG = {
    "name": "t",
    "seeds": 3,
    "budgets": ["1%", 0.05, 0.25],
    "datasets": {"toy": {}, "toy2": {"source": "toy", "scale": 2.0}},
    "method_defaults": {"acquisition": "ei"},
    "methods": {"full": {"strategy": "full"}, "window": {"strategy": "window"}},
}


def stub_cell(cell: Cell) -> dict:
    """A pure, deterministic result from the cell's inputs only."""
    scale = dict(cell.dataset.options).get("scale", 1.0)
    err = scale * (1 + cell.seed) / (cell.budget * 100) * (0.5 if "window" in cell.method.name
                                                           else 1.0)
    return {"metrics": {"observed": {"compute": {"extrapolation_pct": {"1e+25": 2 * err}}},
                        "fantasized": {"compute": {"extrapolation_pct": {"1e+25": -err}}},
                        "spent_fraction": cell.budget * 0.99, "n_runs": int(cell.budget * 1000)}}


def stub_group(cells) -> list[dict]:
    return [stub_cell(c) for c in cells]


def failing_cell(cell: Cell) -> dict:
    if cell.seed == 1:
        raise RuntimeError("oracle exploded")
    if cell.budget == 0.25:
        raise ValueError(f"no candidate at budget {cell.budget}")
    return stub_cell(cell)


def _contents(out: Path) -> dict[str, dict]:
    recs = {}
    for p in sorted(out.glob("*.json")):
        rec = json.loads(p.read_text())
        if rec.get("schema") == "scalebo.bench.record":
            recs[p.name] = without_wall_times(
                {k: v for k, v in rec.items() if k not in TIMING_FIELDS})
    return recs


def test_config_parsing_and_cells(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""\
        seeds: [0, 7]
        budgets: [0.25, "5%"]
        datasets: [steplaw]
        method_defaults: {surrogate: gp, kernel: matern52}
        methods:
          window: {strategy: window, kernel: rbf}
    """))
    cfg = SweepConfig.from_yaml(path)
    assert cfg.name == "c" and cfg.seeds == (0, 7) and cfg.budgets == (0.05, 0.25)
    assert cfg.datasets[0].source == "steplaw"
    assert cfg.methods[0].as_kwargs() == {"strategy": "window", "surrogate": "gp",
                                          "kernel": "rbf"}
    # Resolved settings: every MethodConfig field, defaults filled in.
    expected = replay_mod.MethodConfig(strategy="window", surrogate="gp", kernel="rbf").to_dict()
    assert cfg.methods[0].resolved_kwargs() == expected
    assert cfg.cells()[0].identity()["method"]["settings"] == expected
    unresolved = SweepConfig.from_yaml(path, resolver=None)
    assert unresolved.methods[0].settings is None
    assert unresolved.cells()[0].key != cfg.cells()[0].key
    assert unresolved.resolved(lambda p: expected).cells()[0].key == cfg.cells()[0].key
    with pytest.raises(ValueError, match="method 'm'.*kernal"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"kernal": "rbf"}}})
    with pytest.raises(ValueError, match="method 'm'.*acquisition must be one of"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"acquisition": "ucb"}}})
    assert len(cfg.cells()) == 4
    with pytest.raises(ValueError, match="missing 'budgets'"):
        SweepConfig.from_dict({"seeds": 1, "datasets": ["a"], "methods": {"m": {}}})
    with pytest.raises(ValueError, match=r"budgets: .*fraction of C_total in \(0, 1\], got 5 "
                                         r"\(for 5 % write 0.05 or 5%\)"):
        SweepConfig.from_dict({**CONFIG, "budgets": [5]})
    with pytest.raises(ValueError, match=r"fraction of C_total such as 0.05 or 5%, got "
                                         r"'5 percent'"):
        SweepConfig.from_dict({**CONFIG, "budgets": ["5 percent"]})  # a float() error before
    with pytest.raises(ValueError, match=r"method 'm'.*posterior_samples must be an integer, "
                                         r"got 'lots'"):  # it failed in every worker
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"posterior_samples": "lots"}}})
    with pytest.raises(ValueError, match=r"kernel must be one of \['matern52'"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"kernel": "matern25"}}})
    with pytest.raises(ValueError, match=r"target_compute must be a number, got '1e25' \(YAML "
                                         r"reads 1e25 as text: write 1.0e\+25\)"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"target_compute": "1e25"}}})
    with pytest.raises(ValueError, match=r"posterior_samples must be an integer, got '64' "
                                         r"\(write 64: a whole number"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"posterior_samples": "64"}}})
    with pytest.raises(ValueError, match=r"got '1e3' \(write 1000: a whole number"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"posterior_samples": "1e3"}}})
    with pytest.raises(ValueError, match=r"got '1.0e\+25' \(a number in quotes is text: "
                                         r"write 1.0e\+25 without them\)"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"target_compute": "1.0e+25"}}})
    with pytest.raises(ValueError, match=r"got '6.4e1' \(YAML reads 6.4e1 as text: write "
                                         r"6.4e\+01\)"):  # which YAML then reads as 64.0
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"target_compute": "6.4e1"}}})
    with pytest.raises(ValueError, match=r"posterior_samples must be an integer, got 2.5"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"posterior_samples": 2.5}}})
    with pytest.raises(ValueError, match=r"fantasize must be true or false, got 'yes'"):
        SweepConfig.from_dict({**CONFIG, "methods": {"m": {"fantasize": "yes"}}})
    with pytest.raises(ValueError, match=r"unknown sweep config keys: 'seed' \(did you mean "
                                         r"'seeds'\?\); a sweep config has \['name', "):
        SweepConfig.from_dict({**CONFIG, "seed": 1})
    with pytest.raises(ValueError, match=r"'budgtes' \(did you mean 'budgets'\?\)"):
        SweepConfig.from_dict({**CONFIG, "budgtes": ["5%"]})


def test_a_dataset_file_that_does_not_exist_is_refused_before_any_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = {**CONFIG, "datasets": {"mine": {"source": "runs/grid.csv"}}}
    with pytest.raises(ValueError, match=r"dataset source 'runs/grid.csv': no such file \(a "
                                         rf"relative path is taken from the current folder, "
                                         rf"{tmp_path}\)"):
        SweepConfig.from_dict(missing)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "grid.csv").write_text("N,D,loss\n1e8,2e9,3.1\n")
    cfg = SweepConfig.from_dict(missing)  # once it exists: its content is in the key
    assert len(cfg.datasets[0].content_sha256) == 64
    assert SweepConfig.from_dict({**CONFIG, "datasets": ["not_a_file"]})  # a name: checked later


def test_an_unknown_dataset_or_a_missing_data_folder_is_refused_before_any_cell(tmp_path,
                                                                              monkeypatch):
    """A typo in a dataset's name, or a registered dataset without SCALEBO_DATA_DIR, wrote
    an error record for every cell; the replay's runner now refuses them, writing nothing."""
    monkeypatch.delenv("SCALEBO_DATA_DIR", raising=False)
    typo = SweepConfig.from_dict({**CONFIG, "datasets": ["oellm_englsh"]})
    with pytest.raises(ValueError, match=r"unknown dataset 'oellm_englsh' \(did you mean "
                                         r"'oellm_english'\?\)"):
        run_sweep(typo, tmp_path / "typo", progress=False)
    registered = SweepConfig.from_dict({**CONFIG, "datasets": ["steplaw"]})
    with pytest.raises(ValueError, match=r"dataset 'steplaw' is read from the public datasets "
                                         r"folder: set SCALEBO_DATA_DIR, pass --data-dir"):
        run_sweep(registered, tmp_path / "nodir", progress=False)
    assert not (tmp_path / "typo").exists() and not (tmp_path / "nodir").exists()


def test_cell_key_is_stable_and_sensitive():
    cfg = SweepConfig.from_dict(CONFIG)
    again = SweepConfig.from_dict(dict(reversed(list(CONFIG.items()))))
    assert [c.key for c in cfg.cells()] == [c.key for c in again.cells()]
    keys = {c.key for c in cfg.cells()}
    assert len(keys) == 2 * 2 * 3 * 3
    other = SweepConfig.from_dict({**CONFIG, "method_defaults": {"acquisition": "pi"}})
    assert keys.isdisjoint({c.key for c in other.cells()})
    first = cfg.cells()[0]
    assert (first.dataset.name, first.method.name, first.seed, first.budget) == (
        "toy", "full", 0, 0.01)
    # A deliberate regression pin, computed once from the code (scalebo 0.1.0, record schema
    # 4): the key of this sweep cell hashes its identity, which holds every resolved
    # MethodConfig setting with its default. If this value changes, every record an existing
    # sweep folder holds no longer matches its cell and is recomputed on resume; change the
    # pin only on purpose (a changed default, identity or hash, or RECORD_SCHEMA_VERSION).
    # The version is fixed here so that a release alone does not move the pin.
    # Changed on purpose: MethodConfig gained cost_model, cooldown (WSD) and
    # posterior_discrepancy (2026-12-01); ei_cost_power, and the incumbent's default became
    # "envelope" (2026-12-02, scalebo 0.3); posterior_estimand (2026-12-03); posterior_scope
    # (2026-12-03, scalebo 0.3.3); gp_restart_every and gp_restart_below (2026-12-04,
    # scalebo 0.3.6); shift_optimum's default became True (2026-12-05, scalebo 0.3.7);
    # anchor, default 0.7 (2026-12-05, scalebo 0.3.8); extrapolation_guard, default 5
    # (2026-12-06, scalebo 0.3.9); polish, default 0.2 (2026-12-06, scalebo 0.4.0);
    # refit_growth_from, and refit_growth's default became 0.05 (2026-12-06, scalebo 0.4.3);
    # posterior_coupling, default 0.85 (2026-12-06, scalebo 0.4.5).
    assert dataclasses.replace(first, version="0.1.0").key == "09f249de39fab9266a01"
    # (The identity's JSON text and its hash are pinned in
    # test_records.test_key_of_a_fixed_cell_is_pinned.)


def test_a_whole_number_diverged_above_is_the_same_cell_as_its_float():
    def keys(cut):
        cfg = SweepConfig.from_dict({**CONFIG, "datasets": {"toy": {"diverged_above": cut}}})
        return [c.key for c in cfg.cells()]

    assert keys(9) == keys(9.0)
    assert keys(9) != keys(9.5)


@dataclasses.dataclass(frozen=True)
class ChangedDefault(replay_mod.MethodConfig):
    """MethodConfig with one default changed, as a code change would."""

    kappa: float = 3.0


def test_changed_default_or_version_changes_keys_and_resume_recomputes(tmp_path, monkeypatch):
    import scalebo

    cfg = SweepConfig.from_dict(CONFIG)
    keys = [c.key for c in cfg.cells()]
    run_sweep(cfg, tmp_path, cell_fn=stub_cell, progress=False)
    monkeypatch.setattr(replay_mod, "MethodConfig", ChangedDefault)
    changed = SweepConfig.from_dict(CONFIG)  # same YAML, the default of kappa changed
    assert dict(changed.methods[0].settings)["kappa"] == 3.0
    assert set(keys).isdisjoint(c.key for c in changed.cells())
    again = run_sweep(changed, tmp_path, cell_fn=stub_cell, progress=False)
    assert again.skipped == 0 and again.ran == 36  # recomputed, not reused
    with pytest.warns(RecordWarning, match="36 cell label"):  # old and new records: flagged
        load_records(tmp_path)
    monkeypatch.undo()
    assert [c.key for c in SweepConfig.from_dict(CONFIG).cells()] == keys
    monkeypatch.setattr(scalebo, "__version__", "99.0.0")
    assert set(keys).isdisjoint(c.key for c in SweepConfig.from_dict(CONFIG).cells())


def test_a_worker_of_another_version_writes_error_records():
    cfg = SweepConfig.from_dict(CONFIG)
    stale = dataclasses.replace(cfg.cells()[0], version="0.0.1")
    (rec,) = execute_task(Task((stale,)), stub_cell)
    assert rec["status"] == "error" and rec["key"] == stale.key
    assert "cells were made with scalebo 0.0.1" in rec["error"]["message"]


def test_corrupt_records_are_reported_and_recomputed(tmp_path):
    cfg = SweepConfig.from_dict(CONFIG)
    full, out = tmp_path / "full", tmp_path / "out"
    run_sweep(cfg, full, cell_fn=stub_cell, progress=False)
    run_sweep(cfg, out, cell_fn=stub_cell, progress=False)
    cells = cfg.cells()
    torn, garbage, foreign = (record_path(out, c) for c in cells[:3])
    torn.write_text(torn.read_text()[:150])  # a truncated file
    garbage.write_text("\x00\x01 not json")
    foreign.write_text('{"schema": "something.else", "status": "ok"}')
    with pytest.warns(RecordWarning) as caught:
        summary = run_sweep(cfg, out, cell_fn=stub_cell, progress=False)
    assert summary.ran == 3 and summary.skipped == 33
    msg = str(caught[0].message)
    assert "3 record file(s) cannot be used; their cells are computed again" in msg
    for path, why, cell in ((torn, "not valid JSON", cells[0]), (garbage, "not valid JSON",
                                                                 cells[1]),
                            (foreign, "schema: 'something.else'", cells[2])):
        line = next(ln for ln in msg.splitlines() if path.name in ln)
        assert why in line and cell.label in line
    assert [c.path for c in summary.corrupt] == [str(torn), str(garbage), str(foreign)]
    assert "3 unusable record file(s) not reused" in summary.describe()
    assert _contents(out) == _contents(full)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all repaired: nothing to report any more
        assert run_sweep(cfg, out, cell_fn=stub_cell, progress=False).ran == 0


def test_run_writes_one_atomic_record_per_cell(tmp_path):
    cfg = SweepConfig.from_dict(CONFIG)
    summary = run_sweep(cfg, tmp_path, cell_fn=stub_cell, progress=False)
    assert summary.total == summary.ran == 36 and summary.failed == 0 and summary.skipped == 0
    assert not list(tmp_path.glob(".*.tmp"))
    for cell in cfg.cells():
        rec = json.loads(record_path(tmp_path, cell).read_text())
        assert rec["status"] == "ok" and rec["key"] == cell.key
        assert rec["cell"]["seed"] == cell.seed and rec["cell"]["budget"] == cell.budget
        assert rec["result"] == stub_cell(cell)
    assert (tmp_path / "sweep_t.json").exists()
    # A rerun does nothing.
    again = run_sweep(cfg, tmp_path, cell_fn=stub_cell, progress=False)
    assert again.ran == 0 and again.skipped == 36


def test_interrupted_sweep_resumes_to_identical_records(tmp_path):
    cfg = SweepConfig.from_dict(CONFIG)
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    run_sweep(cfg, full, cell_fn=stub_cell, progress=False)
    # "Killed" sweeps: a subset config, then a limit on tasks, then the whole config.
    run_sweep(cfg.with_seeds([1]), resumed, cell_fn=stub_cell, progress=False)
    part = run_sweep(cfg, resumed, cell_fn=stub_cell, progress=False, limit=5)
    assert part.skipped == 12 and part.ran == 5
    # A torn temporary file left by a killed writer is ignored.
    (resumed / ".deadbeef.123.abcd.tmp").write_text('{"schema": "scalebo.bench.rec')
    rest = run_sweep(cfg, resumed, cell_fn=stub_cell, progress=False)
    assert rest.skipped == 17 and rest.ran == 19
    assert _contents(full) == _contents(resumed)


def test_grouped_budgets_write_one_record_per_cell(tmp_path):
    cfg = SweepConfig.from_dict(CONFIG)
    calls = []

    def group(cells):
        calls.append(len(cells))
        return stub_group(cells)

    free = lambda m: m.name == "full"  # noqa: E731
    tasks = make_tasks(cfg.cells(), budget_free=free)
    assert sorted(len(t.cells) for t in tasks) == [1] * 18 + [3] * 6
    assert [t.cost_hint for t in tasks] == sorted((t.cost_hint for t in tasks), reverse=True)
    summary = run_sweep(cfg, tmp_path / "g", cell_fn=stub_cell, group_fn=group, budget_free=free,
                        progress=False)
    assert summary.n_tasks == 24 and summary.ran == 36 and calls == [3] * 6
    run_sweep(cfg, tmp_path / "s", cell_fn=stub_cell, progress=False)
    assert _contents(tmp_path / "g") == _contents(tmp_path / "s")


def test_failures_are_recorded_summarized_and_retried(tmp_path):
    cfg = SweepConfig.from_dict(CONFIG)
    summary = run_sweep(cfg, tmp_path, cell_fn=failing_cell, progress=False)
    assert summary.ran == 36 and summary.failed == 12 + 8
    assert dict(summary.failures) == {"RuntimeError: oracle exploded": 12,
                                      "ValueError: no candidate at budget 0.25": 8}
    assert "20 cells failed out of 36" in summary.describe()
    bad = next(c for c in cfg.cells() if c.seed == 1)
    rec = json.loads(record_path(tmp_path, bad).read_text())
    assert rec["status"] == "error" and rec["result"] is None
    assert rec["error"]["type"] == "RuntimeError" and "oracle exploded" in rec["error"]["traceback"]
    assert not is_finished(record_path(tmp_path, bad))
    # Failed cells are retried on the next run; finished ones are not.
    again = run_sweep(cfg, tmp_path, cell_fn=stub_cell, progress=False)
    assert again.skipped == 16 and again.ran == 20 and again.failed == 0
    frame = load_records(tmp_path)
    assert set(frame["status"]) == {"ok"} and frame["key"].nunique() == 36


def test_joblib_workers_match_serial(tmp_path):
    cfg = SweepConfig.from_dict({**CONFIG, "seeds": 2})
    run_sweep(cfg, tmp_path / "serial", cell_fn=stub_cell, progress=False)
    summary = run_sweep(cfg, tmp_path / "par", cell_fn=partial(stub_cell), n_jobs=2,
                        progress=False)
    assert summary.ran == 24 and summary.failed == 0
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "par")


def test_blas_is_limited_to_one_thread_inside_a_cell(tmp_path):
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(p.get("user_api") == "blas" for p in threadpool_info()):
        pytest.skip("threadpoolctl sees no BLAS library in this process: nothing to limit")
    cfg = SweepConfig.from_dict({**CONFIG, "seeds": 1, "budgets": [0.1],
                                 "datasets": ["toy"], "methods": {"m": {}}})
    # Two threads outside the cell (not BLAS's default, which may already be 1 on a 1-core
    # machine or under OMP_NUM_THREADS=1), so that only the runner's own limit makes it 1.
    with threadpool_limits(limits=2, user_api="blas"):
        outside = blas_threads(cfg.cells()[0])["metrics"]["blas_threads"]
        if max(outside) < 2:
            pytest.skip(f"BLAS cannot be raised above one thread here ({outside}): a missing "
                        "limit would not show")
        run_sweep(cfg, tmp_path, cell_fn=blas_threads, progress=False)
    rec = json.loads(record_path(tmp_path, cfg.cells()[0]).read_text())
    inside = rec["result"]["metrics"]["blas_threads"]
    assert len(inside) == len(outside) and set(inside) == {1}  # every pool seen, each at 1


def blas_threads(cell: Cell) -> dict:
    import numpy  # noqa: F401  (loads the BLAS library)
    from threadpoolctl import threadpool_info

    info = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    return {"metrics": {"blas_threads": info}}


def test_grouped_replay_equals_separate_replays(tmp_path):
    """The real replay: one run to the largest budget records the smaller ones exactly."""
    import numpy as np

    from scalebo.bench.synthetic import make_synthetic

    axes = {"N": 5e7 * 2.0 ** np.arange(4), "D": 1e9 * 2.0 ** np.arange(4),
            "lr": 2.5e-4 * 2.0 ** np.arange(4), "bs": np.array([128.0, 256.0])}
    csv = tmp_path / "grid.csv"
    make_synthetic(seed=1, **axes).drop(columns=["loss_noise_free", "is_optimum"]).to_csv(
        csv, index=False)
    cfg = SweepConfig.from_dict({
        "name": "real", "seeds": [0], "budgets": [0.02, 0.05, 0.1],
        "datasets": {"tiny": {"source": str(csv), "axes": ["lr", "bs"]}},
        # 8 law-posterior samples (default 64): the records still hold a posterior to compare
        "method_defaults": {"fantasize": False, "refit_every": 5, "posterior_samples": 8},
        "methods": {"full": {"strategy": "full"}}})
    grouped = run_sweep(cfg, tmp_path / "g", progress=False)
    assert grouped.n_tasks == 1 and grouped.failed == 0, grouped.describe()
    separate = run_sweep(cfg, tmp_path / "s", progress=False, budget_free=lambda m: False)
    assert separate.n_tasks == 3 and separate.failed == 0, separate.describe()
    g, s = _contents(tmp_path / "g"), _contents(tmp_path / "s")
    assert g == s
    metrics = [json.loads(record_path(tmp_path / "g", c).read_text())["result"]["metrics"]
               for c in cfg.cells()]
    spent = [m["spent_fraction"] for m in metrics]
    # each budget's end phase (polish, anchor) forks from the shared search, so a larger
    # budget need not hold more runs (13 at 2 %, 12 at 5 % on an AVX-512 CPU), but it spends
    # within its own budget and the 10 % record more than all of 2 %
    assert all(f <= c.budget * (1 + 1e-9) for f, c in zip(spent, cfg.cells(), strict=True))
    assert spent[-1] > cfg.cells()[0].budget


def _grid_csv(tmp_path: Path, nan_row: int) -> Path:
    """A 3 × 3 × 3 × 2 synthetic grid (54 runs) whose run ``nan_row`` (0-based) has a NaN loss."""
    from scalebo.bench.synthetic import make_synthetic

    axes = {"N": 5e7 * 2.0 ** np.arange(3), "D": 1e9 * 2.0 ** np.arange(3),
            "lr": 2.5e-4 * 2.0 ** np.arange(3), "bs": np.array([128.0, 256.0])}
    frame = make_synthetic(seed=1, **axes).drop(columns=["loss_noise_free", "is_optimum"])
    frame.loc[nan_row, "loss"] = float("nan")
    csv = tmp_path / "grid.csv"
    frame.to_csv(csv, index=False)
    return csv


def _notes_config(csv: Path, seeds: list[int], budgets: list[float]) -> dict:
    return {"name": "notes", "seeds": seeds, "budgets": budgets,
            "datasets": {"tiny": {"source": str(csv), "axes": ["lr", "bs"]}},
            # no law posterior: these tests are about loading notes, not about intervals
            "method_defaults": {"fantasize": False, "refit_every": 5, "posterior_samples": 0},
            "methods": {"full": {"strategy": "full"}}}


def test_loading_warnings_reach_every_record_and_are_shown_once(tmp_path):
    csv = _grid_csv(tmp_path, nan_row=4)
    cfg = SweepConfig.from_dict(_notes_config(csv, [0, 1], [0.05, 0.1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = run_sweep(cfg, tmp_path / "rec", progress=False)
    assert summary.failed == 0 and summary.ran == 4, summary.describe()
    note = f"{csv}: excluded 1 of 54 runs: 1 non-finite loss (data row 5)"
    shown = [str(w.message) for w in caught if note in str(w.message)]
    assert len(shown) == 1 and shown[0].startswith(f"tiny: {note}")  # once for 4 cells
    crashed = "1 of 54 configurations have no finite loss"  # kept as a failed run, said
    assert summary.notes[0] == shown[0] and len(summary.notes) == 2
    assert crashed in summary.notes[1]
    for cell in cfg.cells():
        rec = json.loads(record_path(tmp_path / "rec", cell).read_text())
        assert [n for n in rec["notes"] if note in n] == [shown[0][len("tiny: "):]]
        assert rec["result"]["metrics"]["n_runs"] > 0 and "notes" not in rec["result"]


def test_cli_run_shows_notes_and_names_corrupt_records(tmp_path):
    csv = _grid_csv(tmp_path, nan_row=10)
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(_notes_config(csv, [0], [0.05])))  # JSON is YAML
    out = tmp_path / "rec"
    cmd = [sys.executable, "-m", "scalebo.cli", "bench", "run", str(config), "--out", str(out),
           "--format", "json"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert f"warning: tiny: {csv}: excluded 1 of 54 runs: 1 non-finite loss (data row 11)" \
        in first.stderr
    (record,) = [p for p in out.glob("*.json") if not p.name.startswith("sweep_")]
    record.write_text(record.read_text()[:80])  # truncated
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    line = next(ln for ln in second.stderr.splitlines() if record.name in ln)
    assert "not valid JSON, truncated or corrupt" in line and "tiny/full/seed=0" in line
    assert "warning:" in second.stderr and "cannot be used" in second.stderr
    result = json.loads(second.stdout)
    assert result["ran"] == 1 and result["recomputed_corrupt"] == 1
    assert result["corrupt_records"][0]["file"] == str(record)
    assert is_finished(record)


def test_quiet_keeps_why_cells_failed(tmp_path, capsys):
    """A trial: `bench run -q` on a grid with a typo in a learning rate exited 1 with
    'failed 1' and an empty stderr; why a cell failed is not progress. (Such a typo is now
    found when the config is read.)"""
    from scalebo.cli.main import main as cli_main

    csv = _grid_csv(tmp_path, nan_row=4)
    cfg = _notes_config(csv, [0], [0.05])
    cfg["datasets"]["tiny"]["n_held_out_cells"] = 8  # 1 of 9 cells left: no reference law
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps(cfg))
    assert cli_main(["-q", "bench", "run", str(config), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "FitError" in err and "no reference compute law" in err, err
    # a typo in the file's rows is found when the config is read, before any cell (exit 2)
    frame = pd.read_csv(csv)
    frame["lr"] = frame["lr"].astype(object)
    frame.loc[9, "lr"] = "le-3"
    frame.to_csv(csv, index=False)
    config.write_text(json.dumps(_notes_config(csv, [0], [0.05])))
    assert cli_main(["-q", "bench", "run", str(config), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "dataset 'tiny'" in err and "data row 10, column 'lr'" in err, err
    assert not (tmp_path / "s").exists()


def test_config_mistakes_are_named(tmp_path, capsys):
    """A misspelled method field says which and suggests the right one; a folder or a
    missing record folder says so (found by a newcomer's trial)."""
    from scalebo.cli.main import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndatasets: [synthetic]\nmethods:\n  a: {schedul: spent}\n"
                   "seeds: [0]\nbudgets: [0.01]\n")
    assert main(["bench", "run", str(bad), "--out", str(tmp_path / "o"), "-q"]) == 2
    assert "'schedul' (did you mean 'schedule'?)" in capsys.readouterr().err
    assert main(["bench", "run", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["bench", "report", str(tmp_path / "none"), "--out", str(tmp_path / "r")]) == 2
    assert "no such record folder" in capsys.readouterr().err
    # a second trial: a YAML syntax error and a budget written alone were tracebacks (exit 1),
    # "5%" alone was read letter by letter, and dataset errors did not name the file
    base = "name: x\nseeds: [0]\nmethods: {a: {}}\n"
    cases = {
        "datasets: [synthetic]\nbudgets: [0.01\n": r"bad.yaml: not valid YAML at line 6, "
                                                     r"column 1: expected ',' or ']'",
        "datasets: [synthetic]\nbudgets: {a: 1}\n": r"bad.yaml: budgets: expected a list of "
                                                     r"fractions of C_total",
        "datasets: {synthetic: 3}\nbudgets: [0.01]\n": r"bad.yaml: datasets: 'synthetic' takes"
                                                        r" a mapping of options",
        "datasets: [synthtic]\nbudgets: [0.01]\n": r"bad.yaml: datasets: unknown dataset "
                                                    r"'synthtic' \(did you mean 'synthetic'\?\)",
        "datasets: {synthetic: {n_held_out_cels: 2}}\nbudgets: [0.01]\n":
            r"bad.yaml: datasets: dataset 'synthetic': unknown option\(s\) 'n_held_out_cels'",
    }
    for text, said in cases.items():
        bad.write_text(base + text)
        assert main(["bench", "run", str(bad), "--out", str(tmp_path / "o"), "-q"]) == 2, text
        err = capsys.readouterr().err
        assert re.search(said, err), err
        assert not (tmp_path / "o").exists()  # refused before any cell
    for alone in ("0.05", "'5%'"):  # one budget written alone is one budget
        cfg = SweepConfig.from_dict({**CONFIG, "budgets": yaml.safe_load(alone)})
        assert cfg.budgets == (0.05,)
    # "0.7%" was 0.006999999999999999: two budgets beside 0.007, and keys with extra digits;
    # it is 0.007 itself, so writing both is one budget given twice
    assert SweepConfig.from_dict({**CONFIG, "budgets": ["0.7%", "1.1%"]}).budgets == (
        0.007, 0.011)
    with pytest.raises(ValueError, match=r"budgets: 0.007 given twice \(as \[0.007, '0.7%'\]"):
        SweepConfig.from_dict({**CONFIG, "budgets": [0.007, "0.7%", "1.1%"]})


def test_file_dataset_options_are_checked_and_its_content_is_in_the_key(tmp_path, capsys):
    """A run-table file of a sweep: an option the replay does not take (the docstring once
    said ``heldout_k``) is an error when the sweep starts, not one error record per cell; and
    editing the file changes its cells' keys, so a rerun recomputes instead of reusing
    records of the old data (found by a user regenerating a grid CSV)."""
    from scalebo.bench.replay_datasets import check_replay_datasets
    from scalebo.bench.sweep_config import DatasetSpec
    from scalebo.cli.main import main

    runs = tmp_path / "grid.csv"
    runs.write_text("params,D,lr,loss\n1e8,1e9,1e-3,3.0\n")
    raw = {"name": "f", "seeds": 1, "budgets": [0.05], "methods": {"w": {}},
           "datasets": {"g": {"source": str(runs), "mapping": {"N": "params"}}}}
    first = SweepConfig.from_dict(raw)
    spec = first.datasets[0]
    assert len(spec.content_sha256) == 64
    assert first.cells()[0].identity()["dataset"]["content_sha256"] == spec.content_sha256
    assert SweepConfig.from_dict(raw).cells()[0].key == first.cells()[0].key
    runs.write_text("params,D,lr,loss\n1e8,1e9,1e-3,3.1\n")
    assert SweepConfig.from_dict(raw).cells()[0].key != first.cells()[0].key
    # Registered datasets have no digest: their identity (and key) is as before.
    assert "content_sha256" not in DatasetSpec("steplaw", "steplaw").to_dict()
    assert SweepConfig.from_dict(CONFIG).datasets[0].content_sha256 is None

    check_replay_datasets(first.datasets)
    bad = {**raw, "datasets": {"g": {"source": str(runs), "heldout_k": 2}}}
    with pytest.raises(ValueError, match=r"dataset 'g': unknown option\(s\) 'heldout_k' "
                                         r"\(did you mean 'n_held_out_cells'\?\)"):
        check_replay_datasets(SweepConfig.from_dict(bad).datasets)
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"name: b\nseeds: 1\nbudgets: [0.05]\nmethods: {{w: {{}}}}\n"
                   f"datasets: {{g: {{source: {runs}, heldout_k: 2}}}}\n")
    out = tmp_path / "out"
    assert main(["bench", "run", str(cfg), "--out", str(out), "-q"]) == 2
    assert "unknown option(s) 'heldout_k'" in capsys.readouterr().err
    assert not [p for p in out.glob("*.json") if not p.name.startswith("sweep_")]
    with pytest.raises(ValueError, match="'mapping' must be a mapping"):
        check_replay_datasets(SweepConfig.from_dict(
            {**raw, "datasets": {"g": {"source": str(runs), "mapping": "N=params"}}}).datasets)
    # a mapped column or an axis the csv's header lacks: refused before any cell, with a hint
    typo = {**raw, "datasets": {"g": {"source": str(runs), "mapping": {"N": "parmas"}}}}
    with pytest.raises(ValueError, match=r"dataset 'g': mapped column\(s\) 'parmas' \(did you "
                                         r"mean 'params'\?\) not in the header of .*grid\.csv; "
                                         r"its columns: \['params', 'D', 'lr', 'loss'\]"):
        check_replay_datasets(SweepConfig.from_dict(typo).datasets)
    no_axis = {**raw, "datasets": {"g": {"source": str(runs), "mapping": {"N": "params"},
                                         "axes": ["lr", "batch"]}}}
    with pytest.raises(ValueError, match=r"axis\(s\) 'batch' not in the header"):
        check_replay_datasets(SweepConfig.from_dict(no_axis).datasets)
    semi = tmp_path / "semi.csv"  # the loader's other separators are read the same way
    semi.write_text("params;D;lr;loss\n1e8;1e9;1e-3;3.0\n")
    check_replay_datasets(SweepConfig.from_dict(
        {**raw, "datasets": {"g": {"source": str(semi), "mapping": {"N": "params"}}}}).datasets)
    pq = tmp_path / "grid.parquet"  # a Parquet schema is checked without reading its rows
    pd.read_csv(runs).to_parquet(pq)
    with pytest.raises(ValueError, match=r"mapped column\(s\) 'parmas' \(did you mean "
                                         r"'params'\?\) not in the schema of .*grid\.parquet; "
                                         r"its columns: \['params', 'D', 'lr', 'loss'\]"):
        check_replay_datasets(SweepConfig.from_dict(
            {**raw, "datasets": {"g": {"source": str(pq), "mapping": {"N": "parmas"}}}}).datasets)
    check_replay_datasets(SweepConfig.from_dict(
        {**raw, "datasets": {"g": {"source": str(pq), "mapping": {"N": "params"}}}}).datasets)
    cfg.write_text(f"name: b\nseeds: 1\nbudgets: [0.05]\nmethods: {{w: {{}}}}\n"
                   f"datasets: {{g: {{source: {runs}, mapping: {{N: parmas}}}}}}\n")
    assert main(["bench", "run", str(cfg), "--out", str(out), "-q"]) == 2
    assert "mapped column(s) 'parmas' (did you mean 'params'?)" in capsys.readouterr().err
    assert not [p for p in out.glob("*.json") if not p.name.startswith("sweep_")]


def test_a_file_edited_after_the_config_is_read_is_refused_and_reloaded(tmp_path):
    """A trial edited its grid while a sweep ran: a cell's record named the old file's digest
    but held the new file's fit; after restoring the file the stale record was reused. In
    one process load_problem served the old file from its cache after the edit."""
    from scalebo.bench import sweep as sweep_mod
    from scalebo.bench.problems import load_problem

    csv = _grid_csv(tmp_path, nan_row=0)
    cfg = SweepConfig.from_dict(_notes_config(csv, [0], [0.05]))
    spec = cfg.datasets[0]
    before = load_problem(str(csv), axes=["lr", "bs"])
    frame = pd.read_csv(csv)
    frame["loss"] *= 1.1
    frame.to_csv(csv, index=False)
    with pytest.raises(ValueError, match=r"dataset 'tiny': .*grid.csv changed since the sweep "
                                         r"config was read"):
        sweep_mod._problem(spec, None)
    after = load_problem(str(csv), axes=["lr", "bs"])  # reloaded, not the cached one
    assert after.loss == pytest.approx(1.1 * before.loss)


@pytest.mark.parametrize(("text", "said"), [
    ("methods: {w: {strategy: window}, w: {strategy: full}}",
     "not valid YAML at line 5, column 34: the key 'w' is given twice"),
    ("seeds: [0, 0.7]", "seeds: 0.7 is not a seed; seeds are integers >= 0"),
    ("seeds: [1, 0, 1]", "seeds: [1] listed more than once"),
    ("seeds: [-1]", "seeds: -1 is not a seed"),
    ("datasets: {g: {source: synthetic, diverged_above: 9 nats}}",
     "dataset 'g': 'diverged_above' must be a loss in nats (a number) or null, got '9 nats'"),
    ("datasets: {g: {source: synthetic, duplicates: avg}}",
     "dataset 'g': 'duplicates' must be 'error' or 'mean', got 'avg'"),
    ("datasets: {g: {source: synthetic, n_held_out_cells: 2.5}}",
     "'n_held_out_cells' must be a whole number of cells >= 0"),
])
def test_config_values_that_would_fail_or_vanish_are_refused_when_read(tmp_path, capsys,
                                                                      text, said):
    """A trial's configs: a method given twice kept the last one silently, seed 0.7 became
    seed 0, and a bad dataset option value failed in every cell instead of at the start."""
    from scalebo.cli.main import main

    lines = {"name": "name: c", "seeds": "seeds: 1", "budgets": "budgets: [0.05]",
             "datasets": "datasets: [synthetic]", "methods": "methods: {w: {}}"}
    lines[text.split(":")[0]] = text
    cfg = tmp_path / "c.yaml"
    cfg.write_text("\n".join(lines.values()) + "\n")
    assert main(["bench", "run", str(cfg), "--out", str(tmp_path / "o"), "-q"]) == 2
    assert said in capsys.readouterr().err
    assert not list((tmp_path / "o").glob("[0-9a-f]*.json"))  # no cell ran


def test_a_merge_key_overriding_a_base_method_is_not_a_key_given_twice(tmp_path):
    """A review: the duplicate-key check refused YAML's `<<: *base` merge."""
    cfg = tmp_path / "m.yaml"
    cfg.write_text("name: m\nseeds: 1\nbudgets: [0.05]\ndatasets: [synthetic]\nmethods:\n"
                   "  a: &base {strategy: window, kappa: 3.0}\n"
                   "  b: {<<: *base, strategy: full}\n")
    methods = {m.name: m.as_kwargs() for m in SweepConfig.from_yaml(cfg).methods}
    assert methods["a"] == {"strategy": "window", "kappa": 3.0}
    assert methods["b"] == {"strategy": "full", "kappa": 3.0}


def test_a_relative_source_is_loaded_from_where_the_config_was_read(tmp_path, monkeypatch):
    """A trial: a Dask worker started in another folder looked the relative path up in its
    own folder, and every cell failed with 'run the sweep again' (which failed the same way)."""
    from scalebo.bench.sweep import _problem

    csv = _grid_csv(tmp_path, nan_row=4)
    monkeypatch.chdir(tmp_path)
    cfg = SweepConfig.from_dict({**_notes_config(Path(csv.name), [0], [0.05])})
    spec = cfg.datasets[0]
    assert spec.source == "grid.csv" and spec.location == str(csv.resolve())
    assert spec.to_dict()["source"] == "grid.csv"  # the identity keeps what the user wrote
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loss = _problem(spec, None).loss  # the 54 runs, the NaN one a failed configuration
    assert len(loss) == 54 and np.isinf(loss).sum() == 1
    csv.unlink()
    with pytest.raises(ValueError, match="every Dask worker needs the file at this absolute"):
        _problem(spec, None)


def test_a_budget_given_twice_and_bad_jobs_are_refused(tmp_path, capsys):
    from scalebo.cli import main as cli_main

    with pytest.raises(ValueError, match=r"budgets: 0.01 given twice \(as \['1%', 0.01\]\)"):
        SweepConfig.from_dict({**CONFIG, "budgets": ["1%", 0.01, 0.05]})
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nseeds: 1\nbudgets: [0.05]\ndatasets: [synthetic]\n"
                    "methods: {w: {}}\n")
    assert cli_main(["bench", "run", str(path), "--out", str(tmp_path / "o"), "--jobs",
                     "0"]) == 2
    assert "expected a number of worker processes >= 1, or -1" in capsys.readouterr().err
    assert cli_main(["bench", "run", str(path), "--out", str(tmp_path / "o"), "--jobs", "2",
                     "--dask-scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--jobs 2 and --dask-scheduler" in capsys.readouterr().err
