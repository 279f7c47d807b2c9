"""Output files: strict JSON conversion and atomic writes (old file intact on failure)."""

import json
import math

import numpy as np
import pytest

from scalebo.outputs import (
    atomic_path,
    check_output_path,
    jsonable,
    save_figure,
    write_json_file,
)


def test_jsonable_converts_numpy_and_drops_non_finite():
    out = jsonable({"a": np.float64(1.5), "b": np.array([1, 2]), "c": (math.nan, np.inf),
                    "d": np.bool_(True), 3: np.int64(7)})
    assert out == {"a": 1.5, "b": [1, 2], "c": [None, None], "d": True, "3": 7}
    json.dumps(out, allow_nan=False)  # strict JSON


def test_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.json"
    write_json_file({"v": 1}, path)
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text('{"v": 2')  # half written, then the work fails
        raise RuntimeError("interrupted")
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_figure_is_written_in_its_suffix_format(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png, svg = save_figure(fig, tmp_path / "f.png"), save_figure(fig, tmp_path / "f.svg")
    plt.close(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:500]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]


def test_output_path_checks(tmp_path):
    with pytest.raises(FileNotFoundError, match="--json .*does not exist"):
        check_output_path(tmp_path / "missing" / "x.json", "--json")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        check_output_path(tmp_path, "--plot")
    assert check_output_path(tmp_path / "x.json") == tmp_path / "x.json"
