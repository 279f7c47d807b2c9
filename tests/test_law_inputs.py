"""Values a law cannot fit are errors that name the file, the 1-based data row and the column
(a trial's error rates of 1.3 and in percent were fitted as 'converged' / 'bound hit', a NaN
width gave 'needs positive, finite inputs' with no row)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalebo.analysis.shape import fit_width_depth
from scalebo.cli import main as cli_main
from scalebo.fitting.downstream import fit_downstream
from scalebo.fitting.law_inputs import check_law_inputs
from scalebo.laws import get_law


def _downstream(n=12):
    L = np.linspace(2.2, 3.4, n)
    return pd.DataFrame({"loss": L, "error": 0.9 - 5.0 * np.exp(-1.2 * L)})


@pytest.mark.parametrize(("value", "row", "text"), [
    (1.3, 5, "got 1.3"), (0.0, 5, "got 0.0"), (np.nan, 5, "got nan"), ("n/a", 5, "got 'n/a'"),
])
def test_an_error_rate_outside_0_1_is_named(value, row, text):
    frame = _downstream().astype({"error": object})
    frame.loc[row - 1, "error"] = value
    with pytest.raises(ValueError, match="data row 5: expected an error rate in") as info:
        check_law_inputs(frame, get_law("sigmoid"), "error", "ds.csv")
    assert str(info.value).startswith("ds.csv: column 'error' (response of law 'sigmoid')")
    assert text in str(info.value) and "percent" not in str(info.value)


def test_percentages_get_a_hint_and_a_count():
    frame = _downstream()
    frame["error"] *= 100
    with pytest.raises(ValueError, match=r"data row 1: .*\(12 rows in all\); percentages\?"):
        fit_downstream(frame, "sigmoid")


def test_a_negative_loss_of_a_downstream_law_is_refused():
    frame = _downstream()
    frame.loc[3, "loss"] = -3.0
    with pytest.raises(ValueError, match="column 'loss' .*data row 4: expected a finite "
                                         "number > 0, got -3.0"):
        fit_downstream(frame, "gadre")
    mine = frame.rename(columns={"loss": "val_loss", "error": "mmlu_err"})
    with pytest.raises(ValueError, match="column 'val_loss' .*data row 4"):  # the user's name
        fit_downstream(mine, "gadre", loss="val_loss", error="mmlu_err")
    assert fit_downstream(_downstream(), "gadre").success  # clean data still fits


def test_width_depth_inputs_name_their_row(tmp_path, capsys):
    rows = [{"width": w, "depth": d, "D": D, "loss": 2 + 50 / w**0.3 + 5 / d**0.3 + 400 / D**0.3}
            for w in (256, 512, 1024) for d in (4, 8, 16) for D in (1e9, 4e9)]
    frame = pd.DataFrame(rows)
    frame.loc[3, "width"] = 0
    with pytest.raises(ValueError, match="column 'width' .*data row 4: expected a finite "
                                         "number > 0, got 0"):
        fit_width_depth(frame)
    frame.loc[3, "width"] = 256
    frame["N"] = 12 * frame["depth"] * frame["width"] ** 2 + 32000 * frame["width"]
    frame.loc[3, "width"] = np.nan
    path = tmp_path / "wd.csv"
    frame.to_csv(path, index=False)
    assert cli_main(["-q", "fit", str(path), "--law", "width_depth"]) == 2
    err = capsys.readouterr().err
    assert "wd.csv: column 'width' (input of law 'width_depth'), data row 4" in err


def test_a_downstream_law_points_to_its_formula_for_predictions_and_plots(tmp_path, capsys):
    # A trial: --predict-at said "use --predict C", which --law gadre then refused; without
    # --response the error said "fit another column".
    frame = _downstream().assign(N=1e8, D=np.geomspace(1e9, 1e11, 12))
    path = tmp_path / "ds.csv"
    frame.to_csv(path, index=False)
    for extra in (["--predict-at", "loss=2"], ["--predict", "1e24"], ["--plot", "x.png"]):
        assert cli_main(["-q", "fit", str(path), "--law", "gadre", "--response", "error",
                         *extra]) == 2
        assert "--formula 'epsilon - k*exp(-gamma*loss)'" in capsys.readouterr().err
    assert cli_main(["-q", "fit", str(path), "--law", "gadre"]) == 2
    assert "--response COL" in capsys.readouterr().err


def test_width_and_depth_as_hyperparameters_are_not_called_off_optimal(tmp_path, capsys):
    # A trial: N without embeddings makes two shapes share an (N, D) cell, so width and depth
    # read as hyperparameters, and fit said "off-optimal width, depth included" of the
    # width/depth law's own inputs.
    rows = [{"width": w, "depth": d, "D": D, "loss": 2 + 50 / w**0.3 + 5 / d**0.3 + 400 / D**0.3}
            for w in (256, 512, 1024) for d in (4, 8, 16) for D in (1e9, 4e9, 1.6e10)]
    frame = pd.DataFrame(rows)
    frame["N"] = 12 * frame["depth"] * frame["width"] ** 2  # 256² x 16 = 512² x 4
    path = tmp_path / "wd.csv"
    frame.to_csv(path, index=False)
    assert cli_main(["fit", str(path), "--law", "width_depth", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "27 runs, every one fitted (--frontier all, the law default)" in err
    assert "off-optimal" not in err


def test_a_prediction_far_below_the_runs_asks_whether_1e_was_meant(tmp_path, capsys):
    frame = pd.DataFrame([{"N": N, "D": D, "loss": 1.7 + 400 / N**0.34 + 400 / D**0.28}
                          for N in (1e8, 2e8, 4e8) for D in (2e9, 4e9, 8e9)])
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    assert cli_main(["-q", "fit", str(path), "--law", "chinchilla", "--predict", "24",
                     "--predict", "1e19"]) == 0
    err = capsys.readouterr().err
    assert "the prediction at C = 24 FLOPs is" in err and "(did you mean 1e24?)" in err
    assert "1e+19 FLOPs" not in err  # within range: nothing to say
