"""``scalebo fit --formula``: the issue's vocab example recovers a known law; mistakes in the
formula, bounds or mapping exit 2 with a message naming them."""

import json

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
