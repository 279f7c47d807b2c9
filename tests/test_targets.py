"""A replay scored at target computes of the user's choosing (``targets``, ``--target``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import yaml
from test_oracle import tiny_problem
from test_records import budget_metrics

from scalebo.bench.intervals import reference_losses
from scalebo.bench.metrics import c_key, law_metrics, observed_table
from scalebo.bench.problems import load_problem
from scalebo.bench.records import RecordWarning, load_records
from scalebo.bench.replay_datasets import check_replay_datasets
from scalebo.bench.report import write_report
from scalebo.bench.sweep import SweepConfig, run_sweep
from scalebo.bench.synthetic import make_synthetic
from scalebo.bench.targets import (
    DEFAULT_KEYS,
    DEFAULT_TARGETS,
    check_targets,
    headline,
    headline_keys,
    target_keys,
    target_label,
    with_targets,
)


def test_targets_are_ascending_distinct_flops_and_bad_ones_are_named():
    assert check_targets(None) == DEFAULT_TARGETS == (1e25, 1e27, 1e29)
    assert DEFAULT_KEYS == tuple(map(c_key, DEFAULT_TARGETS))  # the records' keys
    assert check_targets([1e22, 1e21, 1e22]) == (1e21, 1e22)
    assert check_targets(3e21) == (3e21,)
    assert check_targets(["1e21", 1e23]) == (1e21, 1e23)  # YAML 1.1 reads 1e21 as text
    assert headline((1e23, 1e21)) == 1e21
    for bad in (0, -1e21, float("inf"), "many", True):
        with pytest.raises(ValueError, match=r"finite and > 0 \(such as 1e22\), got"):
            check_targets([1e21, bad])
    with pytest.raises(ValueError, match="at least one"):
        check_targets([])
    # two values whose record key is one ("1e+21" to 6 digits) would overwrite each other
    with pytest.raises(ValueError, match=r"1e\+21 and 1.0000001e\+21 FLOPs agree to 6"):
        check_targets([1e21, 1.0000001e21])
    assert [c_key(c) for c in check_targets([1.5e21, 1.25e21])] == ["1.25e+21", "1.5e+21"]


@pytest.fixture(scope="module")
def small():
    """The noise-free tiny grid (its largest cell 2.4e19 FLOPs), scored at 1e20 and 1e21."""
    return replace(tiny_problem(), targets=(1e20, 1e21))


def test_the_law_is_scored_at_the_problems_targets(small):
    ref = small.reference_compute.params
    # a law fitted on the cheap half of the envelope: its error at 1e20 and 1e21 by hand
    table = observed_table(small, small.envelope_idx[: small.envelope_idx.size // 2 + 2])
    lm = law_metrics(small, "compute", table)
    assert set(lm.extrapolation_pct) == {"1e+20", "1e+21"}
    for C in (1e20, 1e21):
        mine = lm.params["E"] + lm.params["A"] * C ** -lm.params["alpha"]
        truth = ref["E"] + ref["A"] * C ** -ref["alpha"]
        assert lm.extrapolation_pct[c_key(C)] == pytest.approx(
            100 * (mine - truth) / truth, rel=1e-9)
    losses = reference_losses(small, "compute")
    assert losses == pytest.approx({"1e+20": ref["E"] + ref["A"] * 1e20 ** -ref["alpha"],
                                    "1e+21": ref["E"] + ref["A"] * 1e21 ** -ref["alpha"]})


def test_load_problem_takes_targets_and_keeps_one_cached_reference(tmp_path):
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(3), D=1e9 * 2.0 ** np.arange(3),
                           lr=[1e-3, 2e-3], bs=[128], seed=3)
    path = tmp_path / "runs.csv"
    frame[["N", "D", "lr", "loss"]].to_csv(path, index=False)
    default = load_problem(str(path))
    mine = load_problem(str(path), targets=[1e21, 1e20])
    assert default.targets == DEFAULT_TARGETS and mine.targets == (1e20, 1e21)
    assert mine.reference_compute is default.reference_compute  # loaded once
    assert mine.summary()["targets_flops"] == [1e20, 1e21]
    with pytest.raises(ValueError, match="finite and > 0"):
        load_problem(str(path), targets=[-1.0])


def test_a_target_within_the_grids_compute_is_said(small):
    """The tiny grid's costliest acquirable run, N = 4e8 at 8e9 tokens (the two costliest
    cells held out), costs 1.92e19 FLOPs: a target of 1e19 is interpolation."""
    assert float(small.grid.config_cell_cost[~small.grid.held_out].max()) == 6 * 4e8 * 8e9
    with pytest.warns(UserWarning, match=r"target\(s\) 1e19 FLOPs lie within the grid's "
                      r"compute \(its costliest acquirable run costs 1.92e\+19"):
        inside = with_targets(small, [1e19, 1e21])
    assert inside.targets == (1e19, 1e21) and "interpolation" in inside.notes[-1]
    assert with_targets(small, [1e21]).notes == small.notes  # beyond it: nothing to say


def test_one_target_spelling_is_one_cell_identity():
    """PyYAML reads 1e21 as text and 1.0e+21 as a number: both are one cell, not two."""
    keys = set()
    for spelling in ("[1e21]", "[1.0e+21]", "1e21", '["1e21", 1e21]'):
        config = SweepConfig.from_dict(
            {"name": "t", "seeds": 1, "budgets": [0.1], "methods": {"w": {}},
             "datasets": {"toy": {"targets": yaml.safe_load(spelling)}}})
        keys |= {cell.key for cell in config.cells()}
    assert len(keys) == 1


def test_a_sweep_says_when_a_target_acquisition_aims_off_its_datasets_targets():
    from scalebo.bench.replay_datasets import target_acquisition_notes

    config = SweepConfig.from_dict(
        {"name": "t", "seeds": 1, "budgets": [0.1],
         "datasets": {"small": {"targets": [1e21]}, "big": {}},
         "methods": {"aimed": {"acquisition": "target", "target_compute": 1e21},
                     "default": {"acquisition": "target"}, "ei": {}}})
    assert target_acquisition_notes(config) == [
        "method 'aimed' sharpens the law's prediction at 1e+21 FLOPs (target_compute), which "
        "dataset(s) 'big' are not scored at (their targets): give the method their headline "
        "target_compute to aim it there",
        "method 'default' sharpens the law's prediction at 1e+25 FLOPs (target_compute), which "
        "dataset(s) 'small' are not scored at (their targets): give the method their headline "
        "target_compute to aim it there"]


def test_a_sweep_dataset_refuses_bad_targets_before_any_cell_runs(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("N,D,loss\n1e8,1e9,3.0\n")
    config = SweepConfig.from_dict({"name": "t", "seeds": 1, "budgets": [0.1], "datasets": {
        "mine": {"source": str(path), "targets": ["1e21", 0]}}, "methods": {"w": {}}})
    with pytest.raises(ValueError, match=r"dataset 'mine': targets must be .* got 0"):
        check_replay_datasets(config.datasets)


def _cell(cell):
    """Fake records: the default dataset at 1e25/1e27/1e29, 'small' at 1e20 and 1e21."""
    metrics = budget_metrics(cell.budget, -0.02 / cell.budget)
    if cell.dataset.name == "small":
        for kind in ("observed", "fantasized"):
            lm = metrics[kind]["compute"]
            lm["extrapolation_pct"] = {"1e+20": -0.005 / cell.budget, "1e+21": -0.05}
    return {"metrics": metrics}


def test_report_tables_each_target_and_judges_each_dataset_at_its_headline(tmp_path):
    config = {"name": "r", "seeds": 2, "budgets": [0.01, 0.05], "methods": {"w": {}},
              "datasets": {"toy": {}, "small": {"targets": [1e20, 1e21]}}}
    run_sweep(SweepConfig.from_dict(config), tmp_path / "rec", cell_fn=_cell, progress=False)
    frame = load_records(tmp_path / "rec")
    assert target_keys(frame) == ["1e+20", "1e+21", "1e+25", "1e+27", "1e+29"]
    heads = headline_keys(frame)
    assert heads == {"toy": "1e+25", "small": "1e+20"}  # each one's smallest
    assert target_label(heads).startswith("each dataset's headline target")
    assert target_label({"toy": "1e+25"}) == "1e25 FLOPs"
    md = write_report(tmp_path / "rec", tmp_path / "out", figures=False,
                      oracle=False).read_text()
    at20 = md.split("at 1e20 FLOPs")[1].split("##")[0]
    assert "| small | w | 0.50 ± 0.00 | 0.10 ± 0.00 | 2 |" in at20 and "| toy |" not in at20
    at25 = md.split("at 1e25 FLOPs")[1].split("##")[0]
    assert "| toy | w | 2.00 ± 0.00 | 0.40 ± 0.00 | 2 |" in at25 and "| small |" not in at25
    saved = md.split("## Compute saved")[1].split("## ")[0]
    # small's error at its headline, 0.5 / 0.1 %, is within 1 % from 1 %; toy's from 5 %
    assert "| small | w | ≤ 1 % |" in saved and "| toy | w | 5 % |" in saved
    assert "toy 1e25" in saved.splitlines()[0] and "small 1e20" in saved.splitlines()[0]


def test_methods_of_one_dataset_under_other_targets_are_named_not_dropped(tmp_path):
    """Two sweeps into one folder: method w at the default targets, v at 1e20 and 1e21 on
    the same dataset label. The headline (1e20) leaves w out of calibration and savings: the
    report says so instead of dropping it without a word."""
    def cell(c):
        metrics = budget_metrics(c.budget, -0.02 / c.budget)
        if c.method.name == "v":
            for kind in ("observed", "fantasized"):
                metrics[kind]["compute"]["extrapolation_pct"] = {"1e+20": -0.5, "1e+21": -1.0}
        return {"metrics": metrics}

    for label, options in (("w", {}), ("v", {"targets": [1e20, 1e21]})):
        config = {"name": label, "seeds": 1, "budgets": [0.05], "methods": {label: {}},
                  "datasets": {"toy": options}}
        run_sweep(SweepConfig.from_dict(config), tmp_path / "rec", cell_fn=cell, progress=False)
    with pytest.warns(RecordWarning, match=r"toy: method\(s\) w are not scored at its headline "
                      r"target 1e20 FLOPs"):
        md = write_report(tmp_path / "rec", tmp_path / "out", figures=False,
                          oracle=False).read_text()
    assert "Not at the headline target: toy: method(s) w" in md
    assert "| toy | w | 0.40 | 1 |" in md.split("at 1e25 FLOPs")[1].split("##")[0]


def test_replay_cli_scores_and_prints_at_the_given_targets(tmp_path):
    frame = make_synthetic(N=5e7 * 2.0 ** np.arange(4), D=1e9 * 2.0 ** np.arange(4),
                           lr=[5e-4, 1e-3, 2e-3], bs=[128], seed=2)
    path = tmp_path / "runs.csv"
    frame[["N", "D", "lr", "loss"]].to_csv(path, index=False)
    args = [sys.executable, "-m", "scalebo.cli", "replay", "--dataset", str(path), "--budget",
            "0.2", "--posterior-samples", "16", "--target", "1e21", "--target", "1e20",
            "--json", "rec.json"]
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "|d|%@1e+20" in out.stdout and "|d|%@1e+21" in out.stdout
    assert "|d|%@1e+25" not in out.stdout and "law intervals at 1e20 FLOPs" in out.stdout
    assert "predicts" in out.stderr and "at 1e20 FLOPs" in out.stderr  # reference spread
    rec = json.loads((tmp_path / "rec.json").read_text())
    assert rec["problem"]["targets_flops"] == [1e20, 1e21]
    post = rec["metrics"][0]["law_posterior"]["compute"]
    assert set(post["predicted_loss"]) == set(post["reference_loss"]) == {"1e+20", "1e+21"}
    # --acq target sharpens --target-compute (1e25), as a sweep's cell would: a note says so
    acq = subprocess.run([*args[:7], "0.02", "--target", "1e21", "--acq", "target",
                          "--posterior-samples", "0", "--target-samples", "8", "--format",
                          "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert acq.returncode == 0, acq.stderr
    assert json.loads(acq.stdout)["method"]["target_compute"] == 1e25
    assert "give --target-compute 1e+21 to aim it at the headline target" in acq.stderr
    assert "sharpens the law's prediction at 1e+25 FLOPs" in acq.stderr
    bad = subprocess.run([*args[:-2], "--target", "0"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and "--target" in bad.stderr
