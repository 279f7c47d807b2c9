"""``scalebo fit --formula``: the issue's vocab example recovers a known law; mistakes in the
formula, bounds or mapping exit 2 with a message naming them."""

import json
import shlex

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main

TRUTH = {"c0": -1.0, "A": 500.0, "b": -0.2, "e": -0.1, "g": -0.05}
ARGS = ["--formula", "c0 + A*V**b*P**e*D**g",
        "--bounds", "c0=-100:100,A=-1e4:1e4,b=-5:5,e=-5:5,g=-5:5",
        "--map", "P=non_vocab_parameters,V=vocab_size,D=num_characters",
        "--response", "unigram_normalized_loss"]


@pytest.fixture
def vocab_csv(tmp_path):
    P = np.geomspace(1e7, 1e9, 8)
    rows = [(p, v, c) for p in P for v in (4e3, 1.6e4, 6.4e4) for c in (1e9, 1e10)]
    df = pd.DataFrame(rows, columns=["non_vocab_parameters", "vocab_size", "num_characters"])
    t = TRUTH
    df["unigram_normalized_loss"] = t["c0"] + t["A"] * df["vocab_size"] ** t["b"] * \
        df["non_vocab_parameters"] ** t["e"] * df["num_characters"] ** t["g"]
    path = tmp_path / "vocab.csv"
    df.to_csv(path, index=False)
    return path


def test_vocab_law_recovered_in_natural_units(vocab_csv, capsys):
    assert main(["fit", str(vocab_csv), *ARGS, "--residuals", "natural", "--format", "json",
                 "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)  # negative response: natural residuals
    assert out["fit"]["status"] == "converged" and out["residuals"] == "natural"
    for k, v in TRUTH.items():
        assert out["fit"]["params"][k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
    assert out["law"]["variables"] == {"V": "vocab_size", "P": "non_vocab_parameters",
                                       "D": "num_characters"}


@pytest.mark.parametrize(("change", "match"), [
    ({"--formula": "c0 + A*foo(V)"}, "foo"),
    ({"--bounds": "c0=-100:100,A=-1e4:1e4,b=-5:5,e=-5:5"}, "'g'"),
    ({"--map": "P=non_vocab_parameters,V=vocab,D=num_characters"}, "vocab"),
    ({"--response": "loss"}, "no response column 'loss'"),
    # a name that is neither a column nor a parameter: the table's columns, the closest one
    ({"--formula": "c0 + A*V**b*P**e*vocab_sise**g"},
     "'vocab_sise' (did you mean 'vocab_size'?) in formula 'c0 + A*V**b*P**e*vocab_sise**g' "
     "is neither a column of the table nor a parameter with --bounds (bounds= in Python); "
     "columns: "),
    # bounds on a mapped variable blamed the map ("does not use as inputs")
    ({"--bounds": "c0=-100:100,A=-1e4:1e4,b=-5:5,e=-5:5,g=-5:5,V=1:2"},
     "['V'] given bounds and mapped to a column (--map V=vocab_size)"),
    # bounds on a column's own name made the column a fitted constant (a new-user trial)
    ({"--formula": "c0 + A*V**b*P**e*num_characters**g",
      "--bounds": "c0=-100:100,A=-1e4:1e4,b=-5:5,e=-5:5,g=-5:5,num_characters=1:1e12",
      "--map": "P=non_vocab_parameters,V=vocab_size"},
     "['num_characters'] given bounds but also a column of"),
])
def test_mistakes_exit_2_naming_them(vocab_csv, capsys, change, match):
    args = list(ARGS)
    for k, v in change.items():
        args[args.index(k) + 1] = v
    assert main(["fit", str(vocab_csv), *args, "--residuals", "natural", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_figure_suffix_and_budget_mistakes_fail_before_the_work(vocab_csv, tmp_path, capsys):
    """Found by a newcomer's trial: a bad --plot name lost a finished fit; '5' for 5 %."""
    assert main(["fit", str(vocab_csv), "--plot", str(tmp_path / "fit.jpgx")]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "suffix '.jpgx'" in err and "fitting" not in err
    assert main(["replay", "--dataset", "synthetic", "--budget", "5"]) == 2
    assert "for 5 % write 0.05 or 5%" in capsys.readouterr().err
    assert main(["replay", "--dataset", "stepla", "--budget", "1%"]) == 2
    assert "unknown dataset 'stepla' (did you mean 'steplaw'?)" in capsys.readouterr().err


def test_frontier_all_in_python():
    import scalebo

    frame = pd.DataFrame({"C": [3e18, 1e18, 2e18], "loss": [3.0, 3.5, 3.6]})
    assert scalebo.frontier(frame, "all")["C"].tolist() == [1e18, 2e18, 3e18]


POINT = {"V": 1e5, "P": 1e10, "D": 1e11}
AT = ",".join(f"{k}={v:g}" for k, v in POINT.items())


def _formula(p, point):
    return p["c0"] + p["A"] * point["V"] ** p["b"] * point["P"] ** p["e"] * point["D"] ** p["g"]


def test_predict_at_is_the_formula_at_the_fitted_parameters(vocab_csv, capsys):
    assert main(["fit", str(vocab_csv), *ARGS, "--residuals", "natural", "--predict-at", AT,
                 "--predict-at", "D=1e12, P=1e9, V=4e3", "--format", "json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    params = out["fit"]["params"]
    first, second = out["predictions"]
    assert first["at"] == POINT and second["at"] == {"V": 4e3, "P": 1e9, "D": 1e12}
    for p in (first, second):
        assert p["prediction"] == pytest.approx(_formula(params, p["at"]), rel=1e-12)
        assert p["interval"] is None
    assert first["prediction"] == pytest.approx(_formula(TRUTH, POINT), rel=1e-4)
    assert out["bootstrap"] is None


def test_bootstrap_intervals_for_parameters_and_points(vocab_csv, capsys):
    """Noise-free data: every interval holds the truth and is narrow; table and CSV show them."""
    base = ["fit", str(vocab_csv), *ARGS, "--residuals", "natural", "--predict-at", AT,
            "--bootstrap", "30", "--seed", "4", "--confidence", "0.9", "--quiet"]
    assert main([*base, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    boot = out["bootstrap"]
    assert boot["n_resamples"] == 30 and boot["n_failed"] == 0 and boot["seed"] == 4
    assert boot["confidence_level"] == 0.9 and set(boot["intervals"]) == set(TRUTH)
    for k, v in TRUTH.items():
        lo, hi = boot["intervals"][k]
        assert lo - 1e-4 * abs(v) <= v <= hi + 1e-4 * abs(v) and hi - lo < 1e-3 * abs(v), k
    lo, hi = out["predictions"][0]["interval"]
    truth = _formula(TRUTH, POINT)
    assert lo - 1e-4 <= truth <= hi + 1e-4 and hi - lo < 1e-3
    assert main([*base, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "kind,name,at,estimate,lower,upper,level,status" and len(lines) == 1 + 5 + 1
    assert all(line.endswith(",0.9,converged") for line in lines[1:])  # each row has its level
    assert lines[-1].startswith('prediction,unigram_normalized_loss,"V=100000,P=1e+10,D=1e+11"')
    assert main(base) == 0
    table = capsys.readouterr().out
    assert "30 resamples of the rows (seed 4" in table and "90% percentile" in table
    assert "predictions of unigram_normalized_loss" in table


def test_plot_is_a_png(vocab_csv, tmp_path, capsys):
    path = tmp_path / "formula.png"
    assert main(["fit", str(vocab_csv), *ARGS, "--residuals", "natural", "--predict-at", AT,
                 "--bootstrap", "10", "--plot", str(path), "--quiet"]) == 0
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    import matplotlib.image

    height, width = matplotlib.image.imread(path).shape[:2]
    assert width > 600 and height > 600  # 2 x 2 panels: observed vs predicted, 3 residuals


@pytest.mark.parametrize(("at", "match"), [
    ("V=1e5,P=1e10", "no value for variable(s) D"),
    ("V=1e5,P=1e10,D=1e11,X=2", "'X' is not a variable of the formula; its variables are "
                                "V, P, D"),
    ("vocab_size=1e5,P=1e10,D=1e11", "column 'vocab_size' is variable 'V'"),
    ("V=1e5,P=ten,D=1e11", "value 'ten' of 'P' is not a finite number"),
    ("V=1e5,P=1e10,D", "item 'D' is not of the form NAME=VALUE"),
    ("V=1e5,V=2e5,P=1e10,D=1e11", "'V' is given twice"),
])
def test_bad_predict_at_exits_2_before_fitting(vocab_csv, capsys, at, match):
    assert main(["fit", str(vocab_csv), *ARGS, "--residuals", "natural",
                 "--predict-at", at]) == 2
    err = capsys.readouterr().err
    assert match in err and "--predict-at" in err and "Traceback" not in err
    assert "fitting" not in err


def test_predict_and_predict_at_are_each_for_their_kind_of_law(vocab_csv, capsys):
    assert main(["fit", str(vocab_csv), *ARGS, "--predict", "1e24"]) == 2
    err = capsys.readouterr().err
    assert "use --predict-at" in err and "V=1e10,P=1e10,D=1e10" in err
    assert main(["fit", str(vocab_csv), "--law", "compute", "--predict-at", "C=1e24"]) == 2
    assert "--predict-at needs --formula" in capsys.readouterr().err
    assert main(["fit", str(vocab_csv), *ARGS, "--bootstrap", "-1"]) == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --bootstrap: expected an integer >= 0, got '-1'\n")



def test_a_compute_only_table_is_pointed_to_a_formula_that_fits_it(tmp_path, capsys):
    """README: C is optional, but a table of (C, loss) alone has no N, D: the error gives the
    formula to use, and that command recovers the law the table was made from."""
    C = np.geomspace(1e18, 1e23, 8)
    path = tmp_path / "conly.csv"
    pd.DataFrame({"C": C, "loss": 1.8 + 900.0 * C ** -0.15}).to_csv(path, index=False)
    assert main(["fit", str(path), "--law", "compute", "--quiet"]) == 2
    err = capsys.readouterr().err
    hint = shlex.split(err.split("fit it as a formula: ")[1].strip().rstrip("."))
    assert hint[:3] == ["scalebo", "fit", "FILE"]
    assert main(["fit", str(path), *hint[3:], "--format", "json", "--quiet"]) == 0
    params = json.loads(capsys.readouterr().out)["fit"]["params"]
    assert params["E"] == pytest.approx(1.8, rel=1e-3)
    assert params["alpha"] == pytest.approx(0.15, rel=1e-3)


def test_c_in_a_formula_comes_from_mapped_n_and_d_or_a_mapped_c(tmp_path, capsys):
    """README: C is 6·N·D when the table has N and D. Under --map N=params,D=tokens the
    mapped N and D were refused as unused variables; without any, the error said the formula
    used none of the variables []."""
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 6), np.geomspace(1e9, 1e11, 6)))
    C = 6 * N * D
    path = tmp_path / "runs.csv"
    pd.DataFrame({"params": N, "tokens": D, "flops": C,
                  "loss": 1.8 + 900.0 * C ** -0.15}).to_csv(path, index=False)
    law = ["--formula", "E + A*C**(-alpha)", "--bounds", "E=0:5,A=0:1e6,alpha=0:1",
           "--format", "json", "--quiet"]
    for mapping in ("N=params,D=tokens", "C=flops,N=params,D=tokens", "C=flops"):
        assert main(["fit", str(path), *law, "--map", mapping]) == 0, mapping
        params = json.loads(capsys.readouterr().out)["fit"]["params"]
        assert params["alpha"] == pytest.approx(0.15, rel=1e-3), mapping
    assert main(["fit", str(path), *law]) == 2
    assert ("the formula uses C, the compute in FLOPs: give a C column (--map C=COL) or N and "
            "D columns, C = 6·N·D (--map N=COL,D=COL); the table has ['params', 'tokens', "
            "'flops', 'loss']") in capsys.readouterr().err


@pytest.mark.parametrize(("bad", "message"), [
    ({"tokens": (4, "2e1O")}, "runs.csv: data row 5, column 'tokens' (variable D): '2e1O' is "
                              "not a finite number"),
    ({"loss": (9, -0.5)}, "runs.csv: data row 10, column 'loss': -0.5 is not positive, which "
                          "log residuals need (--residuals natural fits any sign)"),
    ({"params": (3, 0.0)}, "runs.csv: data row 4 (params=0, tokens=1e+09): the formula "
                           "'E + A/N**a + B/D**b' is not finite there at 16 parameter vectors "
                           "drawn inside the bounds; params ≤ 0"),
    # A negative size fitted: its residual was a constant, so the row was silently left
    # out (status 'bound hit', R² 0.54, exit 0; a new-user trial).
    ({"params": (3, -5e7)}, "runs.csv: data row 4 (params=-5e+07, tokens=1e+09): the "
                            "formula 'E + A/N**a + B/D**b' is not finite there"),
])
def test_formula_data_errors_name_file_row_and_column(tmp_path, capsys, bad, message):
    """Formula fits said 'could not convert string to float', 'rows [9] are not' (0-based,
    no column) or 'all 64 starts produced non-finite objectives' for these tables."""
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 4), np.geomspace(1e9, 1e11, 4)))
    frame = pd.DataFrame({"params": N, "tokens": D, "loss": 1.7 + 400 / N**0.34 + 400 / D**0.28})
    frame = frame.astype(object)
    for column, (row, value) in bad.items():
        frame.loc[row, column] = value
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    assert main(["fit", str(path), "--formula", "E + A/N**a + B/D**b", "--bounds",
                 "E=0:5,A=0:1e5,a=0:1,B=0:1e5,b=0:1", "--map", "N=params,D=tokens",
                 "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_a_row_where_the_fitted_formula_is_undefined_is_named_not_dropped(tmp_path, capsys):
    """log of a negative ratio on one row: the fit reported 'converged' with no R² and no
    warning, having fitted the other rows only (a new-user trial)."""
    rng = np.random.default_rng(0)
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 5), np.geomspace(1e9, 1e11, 5)))
    ratio = rng.uniform(16, 128, N.size)
    loss = 1.7 + 400 / N**0.34 + 400 / D**0.28 + 0.02 * np.log(ratio / 64) ** 2
    ratio[7] = -32.0
    path = tmp_path / "runs.csv"
    pd.DataFrame({"N": N, "D": D, "ratio": ratio, "loss": loss}).to_csv(path, index=False)
    assert main(["fit", str(path), "--formula", "E + A/N**a + B/D**b + c*log(ratio/r0)**2",
                 "--bounds", "E=0:5,A=0:1e5,a=0:1,B=0:1e5,b=0:1,c=0:1,r0=1:1000",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "runs.csv: data row 8 (N=" in err and "ratio=-32): the formula" in err, err


def test_a_formula_fit_at_a_bound_warns_in_the_users_names(tmp_path, capsys):
    """A bound that excludes the truth (a ≥ 0.4, truth 0.34): status 'bound hit' said
    'log_a at a bound' and no warning, while the table showed a = 0.4 [0.4, 0.4]."""
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 6), np.geomspace(1e9, 1e11, 6)))
    path = tmp_path / "runs.csv"
    pd.DataFrame({"N": N, "D": D, "loss": 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28}).to_csv(
        path, index=False)
    assert main(["fit", str(path), "--formula", "E + A/N**a + B/D**b", "--bounds",
                 "E=0:5,A=0:1e5,a=0.4:1,B=0:1e5,b=0:1", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    said = "converged with a at a bound (a = 0.4 at its lower bound)"
    assert f"warning: fit status 'bound hit': {said}; that value is the bound's" in err
    result = json.loads(out)
    assert result["fit"]["message"] == said and len(result["warnings"]) == 1


def test_c_from_bad_n_or_d_and_a_one_variable_typo_name_the_file_row_and_column(tmp_path,
                                                                                capsys):
    """Review of the checks above: text or a zero in the N/D columns C is computed from gave
    pandas' words or blamed a column 'C' the file lacks; a typo in a one-variable formula
    said 'uses none of the variables []'."""
    path = tmp_path / "runs.csv"
    path.write_text("params,tokens,loss\n1e8,2e9,3.1\n2e8,0,2.9\n4e8,8e9,2.7\n8e8,1.6e10,2.5\n")
    law = ["--bounds", "E=0:5,A=0:1e5,a=0:1", "--quiet"]
    assert main(["fit", str(path), "--formula", "E + A*C**(-a)", *law,
                 "--map", "N=params,D=tokens"]) == 2
    assert ("runs.csv: data row 2, column 'tokens' (D, for C = 6·N·D): 0.0 is not a positive, "
            "finite number") in capsys.readouterr().err
    assert main(["fit", str(path), "--formula", "E + A*parms**(-a)", *law]) == 2
    assert "'parms' (did you mean 'params'?) in formula" in capsys.readouterr().err


def test_options_a_formula_fit_does_not_use_are_refused_and_huber_delta_is_used(tmp_path,
                                                                                capsys):
    """A new-user trial: --diverged-above, --duplicates, --law ... were accepted and ignored
    by --formula (a diverged run was fitted), an empty --formula fitted the compute law, and
    --bounds / --starts without --formula were dropped without a word."""
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 5), np.geomspace(1e9, 1e11, 5)))
    frame = pd.DataFrame({"N": N, "D": D, "loss": 1.7 + 400 / N**0.34 + 400 / D**0.28})
    path = tmp_path / "runs.csv"
    pd.concat([frame, frame.iloc[[3]]]).to_csv(path, index=False)
    law = ["--formula", "E + A/N**a + B/D**b", "--bounds", "E=0:5,A=0:1e5,a=0:1,B=0:1e5,b=0:1"]
    for extra, said in ((["--diverged-above", "5"], "--diverged-above does not apply"),
                        (["--duplicates", "mean", "--law", "chinchilla"],
                         "--law and --duplicates do not apply")):
        assert main(["fit", str(path), *law, *extra, "-q"]) == 2
        assert said in capsys.readouterr().err
    assert main(["fit", str(path), "--formula", " ", "-q"]) == 2
    assert "--formula is empty" in capsys.readouterr().err
    assert main(["fit", str(path), "--bounds", "E=0:5", "--starts", "8", "-q"]) == 2
    assert "--bounds and --starts are for --formula only" in capsys.readouterr().err
    assert main(["fit", str(path), *law, "--huber-delta", "0.05", "--format", "json",
                 "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fit"]["huber_delta"] == 0.05
    assert out["warnings"] == [f"{path}: data rows 4, 26 repeat another row in every column "
                               "(2 rows): each is fitted as an observation of its own (drop "
                               "copies made by mistake)"]
    assert out["fit"]["params"]["a"] == pytest.approx(0.34, rel=1e-3)
    # natural residuals: least squares unless a delta is given, even 1e-3 (a review: the
    # JSON said null, least squares, for a Huber fit, and an explicit 1e-3 was dropped)
    for extra, delta in (([], None), (["--huber-delta", "0.001"], 0.001)):
        assert main(["fit", str(path), *law, "--residuals", "natural", *extra, "--format",
                     "json", "-q"]) == 0
        assert json.loads(capsys.readouterr().out)["fit"]["huber_delta"] == delta


def test_map_loss_names_the_response_of_a_formula(tmp_path, capsys):
    """--map loss=val_loss works for built-in laws; with --formula it said 'no response
    column loss' (a new-user trial)."""
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(5e7, 2e9, 4), np.geomspace(1e9, 1e11, 4)))
    path = tmp_path / "runs.csv"
    pd.DataFrame({"N": N, "D": D, "val_loss": 1.7 + 400 / N**0.34 + 400 / D**0.28}).to_csv(
        path, index=False)
    law = ["--formula", "E + A/N**a + B/D**b", "--bounds", "E=0:5,A=0:1e5,a=0:1,B=0:1e5,b=0:1"]
    assert main(["fit", str(path), *law, "--map", "loss=val_loss", "--format", "json",
                 "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["fit"]["params"]["a"] == pytest.approx(0.34)
    assert main(["fit", str(path), *law, "--map", "loss=val_loss", "--response", "x",
                 "-q"]) == 2
    assert "name two response columns" in capsys.readouterr().err


def test_a_formula_that_cannot_follow_its_response_says_so():
    """A trial: a sigmoid rising with the loss fitted to an accuracy that falls with it was
    "converged" (R² −0.008) without a word. Such a formula can only be flat here while the
    accuracy follows the loss's rank order exactly; the form that can fall fits and is not
    flagged, and neither is noise without a trend fitted flat."""
    import warnings

    from scalebo.fitting.formula_summary import summarize_formula_fit

    loss = np.linspace(2.0, 4.0, 25)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"loss": loss, "acc": 0.25 + 0.5 / (1 + np.exp(3 * (loss - 3)))
                          + rng.normal(0, 0.005, loss.size)})
    formula = "a/(1 + exp(-k*(loss - L0))) + b"
    with pytest.warns(UserWarning, match=r"'acc' follows loss closely \(Spearman ρ = -1\) but "
                                         r"the fit explains 0% of its variance \(in-sample R² -"):
        rising = summarize_formula_fit(frame, formula, response="acc", bounds={
            "a": (0, 1), "k": (0, 100), "L0": (0, 10), "b": (0, 1)})
    assert rising.r2 < 0 and any("follows loss closely" in n for n in rising.notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        falling = summarize_formula_fit(frame, formula, response="acc", bounds={
            "a": (0, 1), "k": (-100, 0), "L0": (0, 10), "b": (0, 1)})
    assert falling.r2 > 0.99
    # a reviewer: flat data fitted flat scored R² −0.02 (a Huber fit sits near the median)
    flat = pd.DataFrame({"N": np.geomspace(1e7, 1e10, 12), "y": 2 + rng.normal(0, 0.01, 12)})
    none = summarize_formula_fit(flat, "E + A/N**alpha", response="y", bounds={
        "E": (0, 10), "A": (0, 1e4), "alpha": (0, 2)})
    assert not any("closely" in str(w.message) for w in caught)
    assert not any("closely" in n for n in (*falling.notes, *none.notes))
