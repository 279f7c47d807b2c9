"""Option values checked while parsing: ``--tolerance`` is a fraction (a percentage-looking
value is warned about, a non-positive one is an error), and counts reject values that make
no sense (``status --next -1``), all with exit 2 and a message naming the option."""

from __future__ import annotations

import argparse
import json

import pytest

from scalebo.bench.method import MethodConfig
from scalebo.cli.main import build_parser, main
from scalebo.search.polish import POLISH

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


@pytest.mark.parametrize("given", ["0", "-0.01", "nan", "inf", "0%", "half", "1", "150%"])
def test_status_tolerance_not_in_0_1_is_exit_2(campaign, capsys, given):
    # ±100 % or more stops at once: 150% was accepted without a word
    assert main(["status", *campaign, f"--tolerance={given}"]) == 2
    assert _usage_error(capsys) == (
        "scalebo status: error: argument --tolerance: expected a positive fraction below 1 "
        f"such as 0.005 (±0.5 %) or a percentage such as 0.5%, got '{given}'")


@pytest.mark.parametrize(("option", "bad", "expected"), [
    ("--clip-iqr", "-1", "a number >= 0"), ("--samples", "7", "an integer >= 8")])
def test_clip_iqr_and_samples_are_checked_while_parsing(campaign, capsys, option, bad, expected):
    assert main(["status", *campaign, option, bad]) == 2
    assert _usage_error(capsys) == (f"scalebo status: error: argument {option}: expected "
                                    f"{expected}, got '{bad}'")


#: (command words and required options, option, smallest value it takes)
DESIGN = ["design", "--pool", "p.csv", "--target-region", "t.csv", "--formula", "a*x",
          "--bounds", "a=0:1", "--cost", "x"]
COUNTS = [
    (["status", "--grid", "g.yaml", "--budget", "0.1"], "--next", 0),
    (["suggest", "--grid", "g.yaml", "--budget", "0.1"], "--batch", 1),
    (["suggest", "--grid", "g.yaml", "--budget", "0.1"], "-n", 1),
    (["fit", "runs.csv"], "--bootstrap", 0),
    (["fit", "runs.csv"], "--starts", 1),
    (["fragility", "runs.csv"], "--bootstrap", 0),
    (["fragility", "runs.csv"], "--drop-count", 0),
    (["fragility", "runs.csv"], "--every-k", 1),
    (["replay", "--dataset", "synthetic"], "--held-out-cells", 0),
    (["replay", "--dataset", "synthetic"], "--batch", 1),
    (["replay", "--dataset", "synthetic"], "--posterior-samples", 0),
    (["replay", "--dataset", "synthetic"], "--bootstrap-samples", 0),
    (["replay", "--dataset", "synthetic"], "--target-samples", 8),
    (["replay", "--dataset", "synthetic"], "--target-every", 1),
    (["bench", "run", "c.yaml", "--out", "o"], "--limit", 1),
    (DESIGN, "--starts", 1),
    (DESIGN, "--batch", 1),
    (DESIGN, "--seed", 0),
    (["status", "--grid", "g.yaml", "--budget", "0.1"], "--seed", 0),
    (["suggest", "--grid", "g.yaml", "--budget", "0.1"], "--seed", 0),
    (["fit", "runs.csv"], "--seed", 0),
    (["fragility", "runs.csv"], "--seed", 0),
    (["replay", "--dataset", "synthetic"], "--seed", 0),
    (["demo"], "--seed", 0),
]


@pytest.mark.parametrize(("words", "option", "minimum"), COUNTS,
                         ids=[f"{w[0]} {o}" for w, o, _ in COUNTS])
def test_counts_below_their_minimum_are_usage_errors(words, option, minimum, capsys):
    from scalebo.cli.main import build_parser

    prog = "scalebo " + " ".join(words[:2] if words[0] == "bench" else words[:1])
    shown = "-n/--batch" if option in ("-n", "--batch") and words[0] == "suggest" else option
    for bad, expected in ((minimum - 1, f"an integer >= {minimum}"), ("1.5", "an integer")):
        assert main([*words, option, str(bad)]) == 2
        assert _usage_error(capsys) == (f"{prog}: error: argument {shown}: expected "
                                        f"{expected}, got '{bad}'")
    args = build_parser().parse_args([*words, option, str(minimum)])  # the minimum is fine
    value = getattr(args, shown.split("/")[-1].lstrip("-").replace("-", "_"))
    assert (value[-1] if isinstance(value, list) else value) == minimum


def test_cli_warnings_leave_out_the_library_pointer(capsys):
    """Every CLI warning (the hook of main(), and fit's collected ones) goes through warn(),
    which drops 'They are listed in RunTable.excluded.' and keeps the rows."""
    import warnings

    from scalebo.cli.main import _show_warning
    from scalebo.errors import EXCLUDED_IN_PYTHON, ExcludedRunsWarning

    message = "runs.csv: excluded 1 of 9 runs: 1 non-finite loss (data row 4)." \
        + EXCLUDED_IN_PYTHON
    _show_warning(ExcludedRunsWarning(message), ExcludedRunsWarning, "f.py", 1)
    err = capsys.readouterr().err
    assert err == "warning: runs.csv: excluded 1 of 9 runs: 1 non-finite loss (data row 4).\n"
    with warnings.catch_warnings(record=True) as caught:  # the library keeps it
        warnings.simplefilter("always")
        warnings.warn(message, ExcludedRunsWarning, stacklevel=1)
    assert str(caught[0].message).endswith("They are listed in RunTable.excluded.")


@pytest.mark.parametrize("option, default, word", [("anchor", 0.7, "most"),
                                                    ("polish", POLISH, "end")])
def test_the_commands_take_a_share_of_the_budget_and_refuse_a_bad_one(capsys, option,
                                                                        default, word):
    """``--anchor SHARE`` and ``--polish SHARE`` in suggest and status (defaults as replays:
    0.7 and 0.2) and replay (unset: the method's default); a share outside [0, 1) is a usage
    error that says what is expected."""
    parser = build_parser()
    flag = f"--{option}"
    for command in ("suggest", "status"):
        base = [command, "--grid", "g.yaml", "--runs", "r.csv", "--budget", "1e20"]
        assert getattr(parser.parse_args(base), option) == default == getattr(MethodConfig(),
                                                                             option)
        assert getattr(parser.parse_args([*base, flag, "0"]), option) == 0.0
        for bad in ("1", "-0.2", word):
            with pytest.raises(SystemExit):
                parser.parse_args([*base, flag, bad])
            assert "expected a share of the budget" in capsys.readouterr().err
    assert getattr(parser.parse_args(["replay", "--dataset", "x.csv"]), option) is None
    assert getattr(parser.parse_args(["replay", "--dataset", "x.csv", flag, "0.5"]),
                   option) == 0.5


@pytest.mark.parametrize("bad", ["-1e24", "-2.5E+3", "-.5", "-inf", "-1_000"])
def test_a_negative_number_in_scientific_notation_is_a_value_not_an_option(bad, capsys):
    """``--predict -1e24`` said 'expected one argument' (argparse reads only -1 and -0.5 as
    numbers), which hides the mistake; the value now reaches its check."""
    assert main(["fit", "runs.csv", "--predict", bad]) == 2
    assert _usage_error(capsys) == ("scalebo fit: error: argument --predict: expected a "
                                    f"positive finite number, got '{bad}'")


@pytest.mark.parametrize(("words", "dest"), [
    (["fit", "runs.csv", "--predict"], "predict"),
    (["allocate", "runs.csv", "--predict"], "predict"),
    (["status", "--grid", "g.yaml", "--runs", "r.csv", "--budget", "0.1", "--target"], "target"),
])
def test_a_compute_takes_the_unit_a_budget_takes(words, dest, capsys):
    """Trials: --budget 2e21FLOPs was accepted, --target / --predict 1e24FLOPs refused."""
    parser = build_parser()
    for text in ("1e24", "1e24FLOPs", "1e24 flops"):
        assert getattr(parser.parse_args([*words, text]), dest) == [1e24]
    with pytest.raises(SystemExit) as err:
        parser.parse_args([*words, "1e24flop"])
    assert err.value.code == 2
    assert "expected a compute in FLOPs such as 1e24 or 1e24FLOPs, got '1e24flop'" in \
        capsys.readouterr().err
    from scalebo.cli.arg_types import flops

    with pytest.raises(argparse.ArgumentTypeError, match=r"expected a positive finite number, "
                                                         r"got '0 FLOPs'$"):
        flops("0 FLOPs")  # as the user wrote it, not the number alone


@pytest.mark.parametrize("command", ["fit", "fragility"])
def test_a_confidence_level_takes_a_percentage(command, capsys):
    parser = build_parser()
    for text, value in (("0.8", 0.8), ("80%", 0.8), ("99.5 %", 0.995)):
        assert parser.parse_args([command, "runs.csv", "--confidence", text]).confidence == \
            pytest.approx(value)
    for bad in ("100%", "1", "0", "high"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "runs.csv", "--confidence", bad])
        assert f"got '{bad}'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a trial read the refusal of 80 as if 80 were allowed
        parser.parse_args([command, "runs.csv", "--confidence", "80"])
    assert "got '80'; for 80 % write 0.8 or 80%" in capsys.readouterr().err


def test_replay_takes_the_trend_suggest_and_status_take():
    """A trial: the README compares the trend in replays, and replay refused --trend."""
    parser = build_parser()
    assert parser.parse_args(["replay", "--dataset", "x.csv", "--trend"]).trend is True
    assert parser.parse_args(["replay", "--dataset", "x.csv"]).trend is None  # the default's
    assert MethodConfig(trend=True).label().endswith(" trend=linear")
    assert "trend" not in MethodConfig().label()
