"""Option values checked while parsing: ``--tolerance`` is a fraction (a percentage-looking
value is warned about, a non-positive one is an error), and counts reject values that make
no sense (``status --next -1``), all with exit 2 and a message naming the option."""

from __future__ import annotations

import json

import pytest

from scalebo.cli.main import main

GRID = """\
axes:
  N: [1.0e8, 3.0e8, 1.0e9]
  D: [2.0e9, 6.0e9, 2.0e10]
  lr: [1.0e-4, 3.0e-4, 1.0e-3, 3.0e-3]
"""
RUNS = """\
N,D,lr,loss,status
1e8,2e9,1e-4,3.912,completed
1e8,2e9,3e-4,3.655,completed
1e8,2e9,1e-3,3.598,completed
1e8,6e9,1e-3,3.301,completed
3e8,2e9,1e-3,3.402,completed
"""


@pytest.fixture()
def campaign(tmp_path, monkeypatch):
    (tmp_path / "grid.yaml").write_text(GRID)
    (tmp_path / "runs.csv").write_text(RUNS)
    monkeypatch.chdir(tmp_path)
    return ["--grid", "grid.yaml", "--runs", "runs.csv", "--budget", "0.3"]


def _usage_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The last line of an argparse usage error (after the usage block)."""
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(("given", "value", "warning"), [
    ("0.5", 0.5, "warning: --tolerance 0.5 is ±50 %; for 0.5 % write 0.005\n"),
    ("0.2", 0.2, "warning: --tolerance 0.2 is ±20 %; for 0.2 % write 0.002\n"),
    ("0.5%", 0.005, ""),
    ("0.01", 0.01, ""),
])
def test_status_tolerance_is_a_fraction_and_a_large_one_is_warned_about(
        campaign, capsys, given, value, warning):
    assert main(["status", *campaign, "--tolerance", given, "--next", "0", "--samples", "8",
                 "--format", "json", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == warning
    assert json.loads(captured.out)["tolerance"] == pytest.approx(value)


@pytest.mark.parametrize("given", ["0", "-0.01", "nan", "inf", "0%", "half"])
def test_status_tolerance_not_positive_and_finite_is_exit_2(campaign, capsys, given):
    assert main(["status", *campaign, f"--tolerance={given}"]) == 2
    assert _usage_error(capsys) == (
        "scalebo status: error: argument --tolerance: expected a positive fraction such as "
        f"0.005 (±0.5 %) or a percentage such as 0.5%, got '{given}'")
