"""The sweep on a real local Dask cluster gives the same records as a serial run."""

from __future__ import annotations

import json

import pytest

from scalebo.bench.records import TIMING_FIELDS
from scalebo.bench.sweep import SweepConfig, run_sweep

distributed = pytest.importorskip(
    "dask.distributed", reason="dask[distributed] is not installed (pip install 'scalebo[dask]')")

CONFIG = {"name": "d", "seeds": 2, "budgets": [0.01, 0.1], "datasets": ["toy"],
          "methods": {"full": {"strategy": "full"}, "window": {"strategy": "window"}}}


def stub_cell(cell) -> dict:
    return {"run": {"value": cell.seed + cell.budget, "method": cell.method.name}}


def failing_cell(cell) -> dict:
    if cell.seed == 1 and cell.method.name == "full":
        raise RuntimeError("boom")
    return stub_cell(cell)


def _contents(out):
    return {p.name: {k: v for k, v in json.loads(p.read_text()).items() if k not in TIMING_FIELDS}
            for p in sorted(out.glob("*.json")) if not p.name.startswith("sweep_")}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as lc:
        yield lc


def test_dask_address_matches_serial(tmp_path, cluster):
    cfg = SweepConfig.from_dict(CONFIG)
    run_sweep(cfg, tmp_path / "serial", cell_fn=stub_cell, progress=False)
    summary = run_sweep(cfg, tmp_path / "dask", cell_fn=stub_cell,
                        dask_scheduler=cluster.scheduler_address, progress=False)
    assert summary.ran == len(cfg.cells()) and summary.failed == 0
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "dask")


def test_dask_failures_are_recorded(tmp_path, cluster):
    cfg = SweepConfig.from_dict(CONFIG)
    summary = run_sweep(cfg, tmp_path, cell_fn=failing_cell,
                        dask_scheduler=cluster.scheduler_address, progress=False)
    assert summary.failed == 2 and dict(summary.failures) == {"RuntimeError: boom": 2}


def test_missing_distributed_gives_install_hint(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    cfg = SweepConfig.from_dict(CONFIG)
    with pytest.raises(ImportError, match=r"pip install 'scalebo\[dask\]'"):
        run_sweep(cfg, tmp_path, cell_fn=stub_cell, dask_scheduler="tcp://127.0.0.1:1",
                  progress=False)


def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path):
    import dask

    cfg = SweepConfig.from_dict(CONFIG)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(ValueError, match="--dask-scheduler tcp://127.0.0.1:9: cannot "
                                            "connect .*start the scheduler"):
        run_sweep(cfg, tmp_path / "out", cell_fn=stub_cell, dask_scheduler="tcp://127.0.0.1:9",
                  progress=False)
    # connected before anything is written: no record folder, no manifest (a trial found a
    # sweep_d.json left behind by a scheduler that was never reached)
    assert not (tmp_path / "out").exists()


def test_a_scheduler_without_workers_says_so():
    # A trial: the sweep waited without a word on a scheduler that had no worker.
    from scalebo.bench.executors import _iter_dask, dask_client

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as lc, \
            pytest.warns(UserWarning, match="has no workers: the cells wait until one joins"):
        client, own = dask_client(lc.scheduler_address)
        assert own and list(_iter_dask([], stub_cell, client)) == []
        client.close()


def test_a_client_passed_in_is_used_and_left_open(tmp_path, cluster):
    # run_sweep closes only the client it opened from an address, not the caller's own
    with distributed.Client(cluster.scheduler_address) as client:
        summary = run_sweep(SweepConfig.from_dict(CONFIG), tmp_path, cell_fn=stub_cell,
                            dask_scheduler=client, progress=False)
        assert summary.ran == 8 and summary.failed == 0
        assert client.status == "running"
