"""A missing optional extra ([trees], [dask], [optuna]) is an error that says how to install
it: exit 2 with one line from the CLI, where it was an ImportError traceback (exit 1). The
extras are installed for the tests, so their import is blocked here."""

from __future__ import annotations

import importlib
import sys

import pytest

from scalebo.cli.main import main
from scalebo.errors import MissingExtraError
from scalebo.extras import EXTRAS, require_extra

BLOCKED = "could not be imported: import of {} halted; None in sys.modules)"


def _block(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_require_extra_names_what_needed_it_and_the_install_command(extra, monkeypatch):
    module = EXTRAS[extra]
    assert require_extra(extra, "x") is importlib.import_module(module)
    _block(monkeypatch, module)
    with pytest.raises(MissingExtraError) as info:
        require_extra(extra, "this feature")
    assert str(info.value) == (f"this feature needs the optional extra: pip install "
                               f"'scalebo[{extra}]' ({module} "
                               + BLOCKED.format(module))
    assert isinstance(info.value, ImportError)


def test_replay_with_trees_and_no_xgboost_exits_2_before_loading(monkeypatch, capsys):
    _block(monkeypatch, "xgboost")
    # steplaw without a data directory: the extra is checked before the dataset is read
    monkeypatch.delenv("SCALEBO_DATA_DIR", raising=False)
    assert main(["replay", "--dataset", "steplaw", "--surrogate", "trees"]) == 2
    assert capsys.readouterr().err == (
        "error: --surrogate trees needs the optional extra: pip install 'scalebo[trees]' "
        f"(xgboost {BLOCKED.format('xgboost')}\n")


def test_bench_run_checks_trees_and_dask_before_any_cell(monkeypatch, capsys, tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("name: t\nseeds: 1\nbudgets: ['1%']\ndatasets: {synthetic: {}}\n"
                      "methods: {gp: {}, boosted: {surrogate: trees}}\n")
    _block(monkeypatch, "xgboost")
    _block(monkeypatch, "dask.distributed")
    out = tmp_path / "out"
    assert main(["bench", "run", str(config), "--out", str(out), "-q"]) == 2
    assert capsys.readouterr().err == (
        "error: method 'boosted' (surrogate: trees) needs the optional extra: pip install "
        f"'scalebo[trees]' (xgboost {BLOCKED.format('xgboost')}\n")
    config.write_text(config.read_text().replace(", boosted: {surrogate: trees}", ""))
    assert main(["bench", "run", str(config), "--out", str(out), "-q", "--dask-scheduler",
                 "tcp://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        "error: --dask-scheduler needs the optional extra: pip install 'scalebo[dask]' "
        f"(dask.distributed {BLOCKED.format('dask.distributed')}\n")
    assert not out.exists()


def test_the_optuna_integration_says_how_to_install_optuna(monkeypatch):
    monkeypatch.delitem(sys.modules, "scalebo.integrations.optuna", raising=False)
    _block(monkeypatch, "optuna")
    with pytest.raises(MissingExtraError, match=r"^scalebo.integrations.optuna "
                                                r"\(ScaleboSampler\) needs the optional extra: "
                                                r"pip install 'scalebo\[optuna\]' "):
        importlib.import_module("scalebo.integrations.optuna")
