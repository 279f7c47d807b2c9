"""The README's campaign example runs verbatim in an empty folder."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_campaign_example_runs_verbatim(tmp_path):
    text = README.read_text()
    block = re.search(r"<!-- campaign-example -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "the README lost its campaign example"
    if shutil.which("scalebo") is None:
        pytest.skip("the scalebo command is not on PATH (install the package)")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.group(1)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "next.json").is_file() and (tmp_path / "status.png").is_file()
    assert "STOP" in proc.stdout or "continue" in proc.stdout


def test_python_examples_run_verbatim(tmp_path, monkeypatch):
    """The README's runnable Python example, then its campaign continuation, in one
    namespace: every name they show exists and takes the arguments written there."""
    text = README.read_text()
    first = re.search(r"A runnable example .*?```python\n(.*?)```", text, re.S)
    then = re.search(r"<!-- python-campaign-example -->\s*```python\n(.*?)```", text, re.S)
    assert first and then, "the README lost its Python examples"
    monkeypatch.chdir(tmp_path)  # the example writes sweep.csv
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns: dict = {}
    exec(compile(first.group(1), "README: runnable example", "exec"), ns)
    exec(compile(then.group(1), "README: campaign example", "exec"), ns)
    assert len(ns["nxt"].suggestions) == 4 and not ns["status"].stop
    again: dict = {}  # a new user's reruns bought other runs (the GP was unseeded)
    exec(compile(first.group(1), "README: runnable example", "exec"), again)
    assert list(again["loop"].observed_indices) == list(ns["loop"].observed_indices)
    lo, hi = ns["status"].targets[0].interval_80
    assert lo < hi and set(ns["posts"]) == {"compute", "chinchilla"}
