"""Issue 11: the fragility bootstrap follows a confidence level (library and CLI); variants
that cannot identify the law are reported as such and left out of the spread; the split
modules are re-exported by scalebo.analysis.fragility."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from scalebo.analysis.fragility import fragility
from scalebo.analysis.variants import Skipped
from scalebo.cli.main import main
from scalebo.fitting.bootstrap import bootstrap_fit
from scalebo.fitting.robust import fit_law
from scalebo.laws import CHINCHILLA

STARTS = np.array(list(itertools.product((0.0, 1.0), (0.0, 5.0, 10.0), (0.2, 0.5),
                                         (0.0, 5.0, 10.0), (0.2, 0.5))))
TRUE = {"E": 1.9, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.37}
KEYS = ("alpha", "beta", "E", "N_opt", "loss_at_target")


def _table(sizes=(5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9), noise=0.01, seed=2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [{"N": N, "D": 2e9 * j} for N in sizes for j in range(1, 7)]
    frame = pd.DataFrame(rows)
    law = TRUE["E"] + TRUE["A"] * frame.N ** -TRUE["alpha"] + TRUE["B"] * frame.D ** -TRUE["beta"]
    frame["loss"] = law * np.exp(noise * rng.standard_normal(len(frame)))
    return frame


def _report(level):
    return fragility(_table(), target=1e22, leave_one_out=False, drop_count=0, every_k=(),
                     huber_deltas=(), bootstrap=40, rng=5, base_starts=STARTS,
                     confidence_level=level)


def test_bootstrap_intervals_follow_the_confidence_level():
    wide, narrow = _report(0.95).bootstrap, _report(0.8).bootstrap
    assert wide["confidence_level"] == 0.95 and narrow["confidence_level"] == 0.8
    for key in KEYS:  # same replicates (same seed): the 80 % interval sits inside the 95 %
        assert wide[key]["lower"] <= narrow[key]["lower"] <= narrow[key]["upper"]
        assert narrow[key]["upper"] <= wide[key]["upper"]
    assert any(narrow[k]["upper"] - narrow[k]["lower"] < wide[k]["upper"] - wide[k]["lower"]
               for k in KEYS)


def test_intervals_are_the_bootstrap_percentiles():
    frame = _table()
    X, y = frame[["N", "D"]].to_numpy(), frame["loss"].to_numpy()
    fit = fit_law(CHINCHILLA, X, y, starts=STARTS)
    boot = bootstrap_fit(fit, X, y, n_resamples=40, rng=5, confidence_level=0.8)
    expected = boot.percentile(boot.natural_samples["alpha"])
    got = _report(0.8).bootstrap["alpha"]
    assert (got["lower"], got["upper"]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("level", [0.0, 1.0, 95.0, -0.5])
def test_a_level_outside_zero_one_is_rejected(level):
    with pytest.raises(ValueError, match="confidence_level"):
        fragility(_table(), confidence_level=level)


def test_cli_confidence_option(tmp_path, capsys):
    from scalebo.cli.main import build_parser, main

    parser = build_parser()
    assert parser.parse_args(["fragility", "x.csv"]).confidence == 0.95
    assert parser.parse_args(["fragility", "x.csv", "--confidence", "0.8"]).confidence == 0.8
    for bad in ("1", "0", "1.5", "abc"):
        with pytest.raises(SystemExit):
            parser.parse_args(["fragility", "x.csv", "--confidence", bad])
    path = tmp_path / "points.csv"
    _table(sizes=(5e7, 2e8, 8e8, 1.6e9)).to_csv(path, index=False)
    code = main(["fragility", str(path), "--no-leave-one-out", "--drop-count", "0",
                 "--huber-deltas", "1e-3", "--bootstrap", "10", "--confidence", "0.8",
                 "--format", "json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["bootstrap"]["confidence_level"] == 0.8
    # the table shows the bootstrap too (it was in the JSON only), and options that add no
    # variant to these points say so (they were skipped without a word)
    code = main(["fragility", str(path), "--no-leave-one-out", "--drop-count", "3",
                 "--every-k", "2", "--huber-deltas", "1e-3", "--bootstrap", "10",
                 "--confidence", "0.8"])
    out, err = capsys.readouterr()
    assert code == 0 and "bootstrap of the base points (10 resamples" in out
    lines = out.splitlines()
    first = lines[[i for i, ln in enumerate(lines) if ln.startswith("bootstrap of")][0] + 2]
    name, lo, hi = first.split()  # the first quantity's row, below the header
    assert name == "alpha" and float(lo) < float(hi)
    assert "--every-k 2: the points have no 'run' column" in err
    assert ("--drop-count 3: 4 model sizes; dropping the 3 smallest or largest needs at "
            "least 6") in err
    with pytest.raises(SystemExit):
        parser.parse_args(["fragility", "x.csv", "--target", "0"])  # blamed the data before


def test_unidentified_variants_are_reported_and_left_out_of_the_spread(tmp_path):
    from scalebo.analysis.fragility import plot_fragility

    report = fragility(_table(sizes=(1e8, 4e8, 1.6e9)), target=1e22, drop_count=0,
                       every_k=(), huber_deltas=(), base_starts=STARTS)
    table = report.table
    left_out = table[table["kind"] == "leave_one_out"]
    assert len(left_out) == 3 and set(left_out["status"]) == {"unidentified"}
    assert all("only 2 distinct values of N" in m for m in left_out["message"])
    assert report.usable.tolist() == [True, False, False, False]
    spread = report.spread
    assert spread["alpha"]["min"] == spread["alpha"]["max"] == spread["alpha"]["base"]
    plot_fragility(report, str(tmp_path / "f.png"))


def test_split_modules_are_re_exported():
    import scalebo.analysis.fragility as frag
    import scalebo.analysis.fragility_plot as plot
    import scalebo.analysis.variants as variants

    assert frag.plot_fragility is plot.plot_fragility
    for name in ("Variant", "build_variants", "gemstones_extras"):
        assert getattr(frag, name) is getattr(variants, name)
        assert name in frag.__all__


def test_powerlaw_n_d_keeps_its_exponents():
    """powerlaw:N,D is Chinchilla's law with other names (alpha_N, alpha_D): its exponents
    were shown as missing in the table and JSON, and a bootstrap would have raised KeyError."""
    common = dict(target=1e22, leave_one_out=False, drop_count=0, every_k=(), huber_deltas=(),
                  bootstrap=20, rng=1)
    chin = fragility(_table(), base_starts=STARTS, **common)
    power = fragility(_table(), law="powerlaw:N,D", **common)
    a, b = chin.table.iloc[0], power.table.iloc[0]
    assert b["alpha"] == pytest.approx(a["alpha"], rel=1e-3)
    assert b["beta"] == pytest.approx(a["beta"], rel=1e-3)
    assert b["alpha"] == pytest.approx(TRUE["alpha"], abs=0.05)
    assert set(power.to_dict()["bootstrap"]) >= {"alpha", "beta", "E"}


def test_skipped_variants_follow_build_variants_rules():
    from scalebo.analysis.variants import build_variants, skipped_variants

    frame = _table(sizes=(5e7, 1e8, 2e8, 4e8)).assign(run=lambda f: f["N"].astype(str))
    kinds = {v.kind for v in build_variants(frame, drop_count=2, every_k=(1,),
                                            leave_one_out=False, huber_deltas=())}
    assert kinds == {"base"}  # 4 sizes cannot lose 2 and keep 3; k = 1 is the base
    assert skipped_variants(frame, 2, (1,)) == [
        Skipped("drop", "note", "--drop-count 2: 4 model sizes; dropping the 2 smallest or "
                "largest needs at least 5, so no drop variants"),
        Skipped("every_first", "note",
                "--every-k 1: every checkpoint is the base itself, so no variant")]
    assert skipped_variants(frame, 1, (2,)) == []  # both add variants


def test_skipped_every_k_is_a_warning_only_when_a_column_looks_like_the_run_label():
    """Without a 'run' column the every-K variants are skipped: a note when nothing in the
    table is a run label, a warning (with the --run that keeps them) when a column is one."""
    from scalebo.analysis.variants import skipped_variants

    frame = _table()  # 6 models × 6 checkpoints
    none, = skipped_variants(frame, 0, (2,))
    assert (none.kind, none.severity) == ("no_run", "note")
    # a label per model size, several D each: checkpoints of runs under another name
    labelled = frame.assign(run_name=frame["N"].map(lambda n: f"model-{n:g}"))
    named, = skipped_variants(labelled, 0, (2,))
    assert (named.kind, named.severity) == ("run_column", "warning")
    assert "--run run_name" in named.text


def test_the_cli_says_skipped_variants_by_their_severity(tmp_path, capsys, monkeypatch):
    """The CLI prints a Skipped as a warning or a note by its severity, not by its wording."""
    import scalebo.analysis.variants as variants

    path = tmp_path / "points.csv"
    _table(sizes=(5e7, 2e8, 8e8, 1.6e9)).to_csv(path, index=False)
    monkeypatch.setattr(variants, "skipped_variants", lambda *a, **k: [
        Skipped("run_column", "warning", "lost variants, said without the usual words"),
        Skipped("no_run", "note", "column 'x' looks like each point's training run")])
    assert main(["fragility", str(path), "--no-leave-one-out", "--drop-count", "0",
                 "--every-k", "2", "--huber-deltas", "1e-3", "-q"]) == 0
    err = capsys.readouterr().err
    assert "warning: lost variants, said without the usual words" in err
    assert "note: column 'x' looks like each point's training run" in err


def test_usable_follows_the_statuses_of_rows_without_in_spread():
    """A report of results a caller made, whose rows lack 'in_spread', raised KeyError in
    usable (and so in spread and the figure); it now reads the rows' statuses."""
    from scalebo.analysis.fragility import FragilityReport, VariantResult

    class Row:  # a caller's result: VariantResult's row without 'in_spread'
        def __init__(self, result):
            self.result = result

        def row(self):
            return {k: v for k, v in self.result.row().items() if k != "in_spread"}

    statuses = ["converged", "bound hit", "converged", "unidentified", "max iterations",
                "failed"]
    alphas = [0.30, 9.0, 0.36, 8.0, 7.0, 6.0]  # the unusable ones far off
    results = [Row(VariantResult(f"v{i}", "extra", 1e-3, 36, 6,
                                 {"alpha": a, "beta": 0.3, "E": 1.9, "A": 1.0, "B": 1.0},
                                 0.1, 1e9, 1e10, 10.0, 2.5, status, ""))
               for i, (status, a) in enumerate(zip(statuses, alphas, strict=True))]
    report = FragilityReport(law="chinchilla", target=1e22, results=tuple(results),
                             seconds=0.0)
    assert "in_spread" not in report.table.columns
    assert report.usable.tolist() == [True, False, True, False, False, False]
    spread = report.spread["alpha"]
    assert (spread["min"], spread["max"]) == (0.30, 0.36)
    assert (spread["min_variant"], spread["max_variant"]) == ("v0", "v2")
    # the same results as made by fragility (with 'in_spread') give the same mask
    made = FragilityReport(law="chinchilla", target=1e22,
                           results=tuple(r.result for r in results), seconds=0.0)
    assert made.usable.tolist() == report.usable.tolist()
