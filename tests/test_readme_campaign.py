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
