"""Defects a new-user trial of ``scalebo fragility`` found (each test names its trial)."""

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main

TRUE = {"E": 1.9, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.37}


def _law(N, D):
    return TRUE["E"] + TRUE["A"] * N ** -TRUE["alpha"] + TRUE["B"] * D ** -TRUE["beta"]


def _checkpoints(noise: float = 0.01, seed: int = 3, run: str = "run") -> pd.DataFrame:
    """6 models × 6 checkpoints (D = 1..6 × 2e9 tokens), loss from the known law."""
    rng = np.random.default_rng(seed)
    rows = [{run: f"m{i}", "N": N, "D": 2e9 * j, "loss": _law(N, 2e9 * j)}
            for i, N in enumerate([5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9]) for j in range(1, 7)]
    frame = pd.DataFrame(rows)
    frame["loss"] *= np.exp(noise * rng.standard_normal(len(frame)))
    return frame


FAST = ["--target", "1e22", "--no-leave-one-out", "--drop-count", "0", "--huber-deltas",
        "1e-4", "--format", "json"]


def test_a_run_column_under_another_name_is_named_as_fit_names_it(tmp_path, capsys):
    """Trial: hot.jsonl's run column is 'run_name'; fragility's bootstrap resampled its 220
    checkpoints one by one and dropped the default every-K variants, both without a word,
    where ``scalebo fit`` warned 'column 'run_name' looks like each point's training run'."""
    from scalebo.fitting.run_clusters import run_label_note

    frame = _checkpoints(run="run_name")
    path = tmp_path / "ckpt.csv"
    frame.to_csv(path, index=False)
    assert main(["fragility", str(path), *FAST, "--bootstrap", "20"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["bootstrap"]["n_clusters"] is None  # points one by one
    # the bootstrap: fit's own warning, word for word
    assert f"warning: {run_label_note(frame)}" in captured.err
    assert "--run run_name" in run_label_note(frame)
    # the default --every-k 2,5 dropped: said, with the column that would keep them
    assert ("warning: --every-k 2,5 (the default): the points have no 'run' column (column "
            "'run_name' looks like each point's training run: --run run_name), so no "
            "every-k-th checkpoint variant") in captured.err
    assert main(["fragility", str(path), *FAST, "--bootstrap", "20", "--run", "run_name",
                 "-q"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["bootstrap"]["n_clusters"] == 6
    assert {"every 2nd checkpoint", "every 5th checkpoint"} <= {
        v["variant"] for v in result["variants"]}
    assert "looks like" not in captured.err and "every-k" not in captured.err


def test_default_every_k_without_any_run_column_is_a_note(tmp_path, capsys):
    frame = _checkpoints().drop(columns="run")
    path = tmp_path / "points.csv"
    frame.to_csv(path, index=False)
    assert main(["fragility", str(path), *FAST]) == 0
    err = capsys.readouterr().err
    assert ("note: --every-k 2,5 (the default): the points have no 'run' column (checkpoints "
            "of one run share it; --run COL names yours)") in err
    assert "warning" not in err


def test_a_variant_at_a_parameter_bound_is_named_and_left_out_of_the_spread(tmp_path,
                                                                             capsys):
    """Trial: on dataset:gadre_overtraining, 'drop 3 largest' ended with E = 4.5e-5 at E's
    lower bound (status 'bound hit') and alone made the N* spread 3560 %, without a word.
    Here a table 0.3 nats below the law's floor E = 1.9 cannot be fitted with E > 0: E goes
    to its bound, and the spread must be that of the other variants."""
    from scalebo.analysis.fragility import Variant, build_variants, fragility

    base = _checkpoints().drop(columns="run")
    below = base.assign(loss=base["loss"] - 2.2)
    variants = [*build_variants(base, leave_one_out=False, drop_count=0, every_k=(),
                                huber_deltas=(1e-4,)), Variant("below the floor", "extra", below)]
    report = fragility(base, target=1e22, variants=variants)
    table = report.table.set_index("variant")
    assert table.loc["below the floor", "status"] == "bound hit"
    assert table.loc["below the floor", "E"] == pytest.approx(np.exp(-10))  # log E's bound
    assert table["in_spread"].tolist() == [True, True, False]
    kept = table.loc[["base", "huber δ=0.0001"]]
    for quantity in ("E", "N_opt", "alpha"):
        assert report.spread[quantity]["min"] == kept[quantity].min()
        assert report.spread[quantity]["max"] == kept[quantity].max()

    path, other = tmp_path / "base.csv", tmp_path / "below.csv"
    base.to_csv(path, index=False)
    below.to_csv(other, index=False)
    args = ["fragility", str(path), "--target", "1e22", "--no-leave-one-out", "--drop-count",
            "0", "--huber-deltas", "1e-4", "--every-k", "2", "--variant-file",
            f"below the floor={other}", "-q"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert ("warning: 1 variant fit(s) without a usable estimate (failed, unidentified by "
            "their points, at a parameter bound or out of iterations), left out of the "
            "spread: 'below the floor': bound hit (converged with E at a bound") in captured.err
    assert "spread across variants (left out: below the floor (bound hit))" in captured.out
    assert main([*args, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["variants"]
    assert [r["in_spread"] for r in rows] == [True, True, False]


def test_a_lone_reduced_start_optimum_is_refitted_on_the_full_grid():
    """Trial: with the reduced starts, Gemstones cool_end's 'every 5th checkpoint' settled in
    a worse optimum labelled 'converged' (objective 3.52496e-4, β 0.304; '1 of the 7 best
    converged starts agree') where the full grid finds 3.52238e-4 (β 0.046). Here the reduced
    starts are one start that converges to a worse local optimum of a known law's points."""
    from scalebo.analysis.fragility_fit import StartPolicy, _reduced_fit, fit_variant
    from scalebo.analysis.variants import Variant
    from scalebo.fitting.robust import fit_law
    from scalebo.laws import CHINCHILLA

    frame = _checkpoints()
    X, y = frame[["N", "D"]].to_numpy(dtype=float), frame["loss"].to_numpy()
    full = fit_law(CHINCHILLA, X, y, huber_delta=1e-3)
    trap = np.array([[-5.0, 3.0, 0.2, 3.0, 0.2]])  # log E, log A, alpha, log B, beta
    policy = StartPolicy(n_grid=0)
    alone = _reduced_fit(CHINCHILLA, X, y, 1e-3, trap, policy)
    assert str(alone.status) == "converged" and alone.n_agree == 1
    assert alone.fun > 1.05 * full.fun  # the trap is a worse optimum
    variant = Variant("all", "extra", frame, 1e-3)
    row, fit = fit_variant(CHINCHILLA, variant, 1e22, base_optima=trap, policy=policy)
    assert row.objective == pytest.approx(full.fun, rel=1e-9)
    assert row.params["beta"] == pytest.approx(full.params["beta"], rel=1e-4)
    assert row.starts == "reduced, refit on the full grid"
    assert f"(objective {alone.fun:.6e}, status converged, 1 of 1 compared" in row.message
    assert "the full grid's optimum is kept" in row.message
    # starts that agree on the optimum are not refitted
    agreed, _ = fit_variant(CHINCHILLA, variant, 1e22, base_optima=full.x[None, :])
    assert agreed.starts == "reduced"
    assert agreed.objective == pytest.approx(full.fun, rel=1e-9)


def test_gemstones_cool_end_every_5th_checkpoint_reaches_the_full_grid_optimum(data_dir,
                                                                               capsys):
    args = ["fragility", "dataset:gemstones", "--data-dir", str(data_dir), "--dataset-option",
            "variant=cool_end", "--no-leave-one-out", "--no-dataset-variants", "--drop-count",
            "0", "--huber-deltas", "", "--every-k", "5", "--format", "json", "-q"]
    rows = {}
    for starts in ("reduced", "full"):
        assert main([*args, "--starts", starts]) == 0
        rows[starts] = json.loads(capsys.readouterr().out)["variants"][1]
    reduced, full = rows["reduced"], rows["full"]
    assert reduced["variant"] == "every 5th checkpoint"
    assert reduced["starts"] == "reduced, refit on the full grid" and full["starts"] == "full"
    assert reduced["objective"] == pytest.approx(3.52238e-4, rel=1e-5)  # the trial's full grid
    assert reduced["objective"] <= full["objective"] * (1 + 1e-12)
    assert reduced["beta"] == pytest.approx(full["beta"], abs=1e-3)


def test_a_target_far_below_the_runs_gets_fits_warnings(tmp_path, capsys):
    """Trial: --target 1e10 on Gemstones printed N* = 65 parameters and a loss of 90.8 nats
    without a word, where ``fit --predict 1e10`` warned that 1e10 is 2.9e+08x below the
    smallest run's compute and that D*/N* lies outside the runs'. The same warnings, word for
    word, from the same functions."""
    from scalebo.fitting.allocation_notes import predicted_ratio_note
    from scalebo.fitting.input_notes import tiny_compute_notes

    frame = _checkpoints()
    path = tmp_path / "ckpt.csv"
    frame.to_csv(path, index=False)
    C_min = float((6 * frame["N"] * frame["D"]).min())  # 6 × 5e7 × 2e9 = 6e17 FLOPs
    assert C_min == 6e17
    args = ["fragility", str(path), "--no-leave-one-out", "--drop-count", "0",
            "--huber-deltas", "1e-4", "--every-k", "2", "--format", "json", "-q"]
    assert main([*args, "--target", "1e10"]) == 0
    captured = capsys.readouterr()
    base = json.loads(captured.out)["variants"][0]
    tiny = tiny_compute_notes([1e10], C_min)
    assert tiny == ["the prediction at C = 1e+10 FLOPs is 6e+07x below the smallest run's "
                    "compute (6e+17 FLOPs)"]
    assert f"warning: {tiny[0]}" in captured.err
    # this law's D*/N* moves as C^((alpha - beta)/(alpha + beta)) = C^-0.04: still inside
    # the runs' 1.25 to 240 tokens per parameter at 1e10 FLOPs, so no D*/N* warning
    assert 1.25 / 3 < base["tokens_per_param"] < 240 * 3
    assert "tokens per parameter" not in captured.err
    # alpha 0.2, beta 0.6: D*/N* = 0.069 at 1e10 FLOPs (hand-solved: N* = (alpha A /
    # (beta B))^(1/(alpha+beta)) (C/6)^(beta/(alpha+beta)))
    skewed = frame.assign(loss=1.9 + 50 * frame["N"] ** -0.2 + 400 * frame["D"] ** -0.6)
    skewed.to_csv(path, index=False)
    assert main([*args, "--target", "1e10"]) == 0
    captured = capsys.readouterr()
    base = json.loads(captured.out)["variants"][0]
    assert base["tokens_per_param"] == pytest.approx(0.06912, rel=1e-3)
    ratio = predicted_ratio_note(skewed, [{"C": 1e10,
                                           "tokens_per_param": base["tokens_per_param"]}])
    assert ratio and "while the fitted runs span 1.25 to 240 tokens per parameter" in ratio
    assert f"warning: {ratio}" in captured.err
    frame.to_csv(path, index=False)
    # a target among the runs (D/N of the law's optimum there within the runs'): no warning
    assert main([*args, "--target", "1e20"]) == 0
    captured = capsys.readouterr()
    ok = json.loads(captured.out)["variants"][0]["tokens_per_param"]
    assert 1.25 / 3 < ok < 240 * 3
    assert "warning" not in captured.err


def test_small_trial_defects(tmp_path, capsys):
    """Trial: --n-jobs 0 gave joblib's raw 'n_jobs == 0 in Parallel has no meaning' after the
    base fit; --law powerlaw:C said "got 'C' in ('C',)"; a negative loss under --map named
    column 'loss' (nats) but not the file's column, as other row errors do."""
    from scalebo.analysis.fragility import fragility

    missing = str(tmp_path / "absent.csv")  # the options are judged before the data are read
    assert main(["fragility", missing, "--n-jobs", "0"]) == 2
    assert ("argument --n-jobs: expected a number of parallel workers >= 1, or -1 for all "
            "cores (-2 all but one), got '0'") in capsys.readouterr().err
    with pytest.raises(ValueError, match="n_jobs: a number of joblib workers >= 1"):
        fragility(_checkpoints(), n_jobs=0)
    assert main(["fragility", missing, "--law", "powerlaw:C"]) == 2
    err = capsys.readouterr().err
    assert ("fragility needs a law of parameters N and tokens D, to find N* and D* at the "
            "target compute: 'chinchilla' (E + A/N^alpha + B/D^beta) or 'powerlaw:N,D' (the "
            "same law); got 'powerlaw:C', a law of C.") in err
    assert "absent.csv" not in err

    frame = _checkpoints().rename(columns={"N": "params", "D": "toks", "loss": "val_loss"})
    frame.loc[4, "val_loss"] = -2.5  # the file's 5th data row
    path = tmp_path / "neg.csv"
    frame.to_csv(path, index=False)
    assert main(["fragility", str(path), "--map", "N=params,D=toks,loss=val_loss"]) == 2
    assert (f"{path}: column 'loss' (nats; file column 'val_loss'), data row 5: expected a "
            "loss > 0, got -2.5") in capsys.readouterr().err
    frame.rename(columns={"params": "N", "toks": "D", "val_loss": "loss"}).to_csv(path,
                                                                                  index=False)
    assert main(["fragility", str(path)]) == 2  # no mapping: no file column to name
    assert "column 'loss' (nats), data row 5: expected a loss > 0" in capsys.readouterr().err


def test_docs_spread_table_is_the_commands_output(data_dir, capsys):
    """Trial: docs/fragility.md quoted D*/N*'s spread as 337 % where the command printed
    3.3334 (a ratio); the docs table now gives the printed ratio: it must match the output."""
    import re
    from pathlib import Path

    assert main(["fragility", "dataset:gemstones", "--data-dir", str(data_dir), "--format",
                 "json", "-q"]) == 0
    spread = json.loads(capsys.readouterr().out)["spread"]
    text = (Path(__file__).parents[1] / "docs" / "fragility.md").read_text()
    rows = {"α": "alpha", "β": "beta", "E (nats)": "E", "N\\*(1e24) (parameters)": "N_opt",
            "D\\*(1e24) (tokens)": "D_opt", "D\\*/N\\* (tokens per parameter)":
            "tokens_per_param", "loss at 1e24 (nats)": "loss_at_target"}
    for label, key in rows.items():
        line = next(x for x in text.splitlines() if x.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        ratio, percent = re.fullmatch(r"([\d.]+) \((\d+) %\)", cells[5]).groups()
        assert float(ratio) == pytest.approx(spread[key]["rel_spread"], abs=6e-4), label
        assert int(percent) == round(100 * spread[key]["rel_spread"]), label
        for cell, stat in zip(cells[1:5], ("base", "median", "min", "max"), strict=True):
            value = cell.split(" (")[0]
            digits = len(value.replace(".", "").split("e")[0].lstrip("0"))
            assert float(value) == pytest.approx(spread[key][stat],
                                                 rel=10 ** (1 - digits)), (label, stat)


def test_a_run_label_shared_by_two_learning_rates_thins_each_run_on_its_own():
    """Trial: one run label over two learning rates' runs (hyperparameter lr): every-K
    thinned each label's mixed checkpoints before taking each cell's best, so 'every 2nd
    checkpoint' kept twice the points of a table with a label per run. Each (run, lr) is a
    training run of its own now, thinned on its own, and gets no warning."""
    import warnings

    from scalebo.analysis.variants import build_variants
    from scalebo.data.runs import load_runs

    grid = _checkpoints(noise=0.0)  # 6 models × checkpoints D = 1..6 × 2e9, labels m0..m5
    tuned = grid.assign(lr=1e-3)
    off = grid.assign(lr=1e-2, loss=grid["loss"] * 1.08)
    # by hand: each of the 12 training runs (6 labels × 2 lr) keeps its checkpoints 2, 4, 6
    # (ranks k, 2k and the last), and each (N, D) cell's best of the two lr is fitted
    sizes = [5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9]
    cells = {(N, 2e9 * j) for N in sizes for j in (2, 4, 6)}
    assert len(cells) == 18
    shared = load_runs(pd.concat([tuned, off], ignore_index=True), hyperparameters=("lr",))
    own = load_runs(pd.concat([tuned.assign(run=tuned["run"] + "a"),
                               off.assign(run=off["run"] + "b")], ignore_index=True),
                    hyperparameters=("lr",))
    for table in (shared, own):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            variants = {v.name: v.frame for v in build_variants(table, leave_one_out=False,
                                                                drop_count=0, every_k=(2,))}
        kept = variants["every 2nd checkpoint"]
        assert len(kept) == len(cells)  # the defect kept 36
        assert set(zip(kept["N"], kept["D"], strict=True)) == cells
        assert (kept["lr"] == 1e-3).all()  # every cell's best is the tuned run's


def test_a_column_that_changes_at_every_checkpoint_does_not_name_runs():
    """A logged step taken as a hyperparameter changes at every checkpoint: keyed on it, each
    checkpoint was a run of its own and 'every 2nd checkpoint' kept every point (a review).
    It names checkpoints, not runs, and is left out of the run's key."""
    from scalebo.analysis.variants import build_variants
    from scalebo.data.runs import load_runs

    grid = _checkpoints(noise=0.0)  # 6 models × 6 checkpoints, labels m0..m5
    table = load_runs(grid.assign(step=np.arange(len(grid)) * 1000), hyperparameters=("step",))
    variants = {v.name: v.frame for v in build_variants(table, leave_one_out=False,
                                                        drop_count=0, every_k=(2,))}
    assert len(variants["every 2nd checkpoint"]) == 6 * 3  # checkpoints 2, 4 and 6 of each run


def test_a_training_run_that_still_repeats_a_token_count_is_warned_about():
    """Without hyperparameters to tell them apart (a DataFrame is fitted as given), two rows
    of one run label at one D are one run's repeated checkpoints: every-K thins them as one
    run's, and a warning names the label and its data rows."""
    from scalebo.analysis.variants import build_variants

    grid = _checkpoints(noise=0.0)
    twice = pd.concat([grid, grid.assign(loss=grid["loss"] * 1.08)], ignore_index=True)
    with pytest.warns(UserWarning, match=r"every-k-th checkpoint variants: run 'm0' \(data "
                      r"rows 1, 2, 3, 4, 5 \(and 7 more\)\) repeats a token count D .* "
                      r"\(the rows that share their 'run'\) .* give each run a label of its own"):
        variants = {v.name: v.frame for v in build_variants(twice, leave_one_out=False,
                                                            drop_count=0, every_k=(2,))}
    # m0's 12 rows ranked by D (ties in file order): ranks 2, 4, ..., 12 are the second row
    # at each D: 6 rows per label, all from the second copy
    kept = variants["every 2nd checkpoint"]
    assert len(kept) == 6 * 6
    assert (kept.index >= len(grid)).all()


def test_a_base_fit_at_a_parameter_bound_is_warned_about_and_exits_as_fit_does(tmp_path,
                                                                              capsys):
    """Review: a base fit at a parameter bound had every variant compared with it, exit 0,
    and only a line among the variants' to say so. ``scalebo fit`` on such a table exits 0
    with a warning naming the parameter and its bound; fragility now does too. The points sit
    0.3 nats below the law's floor E = 1.9, so E > 0 goes to its lower bound, exp(-10)."""
    from scalebo.analysis.fragility import fragility

    base = _checkpoints().drop(columns="run")
    below = base.assign(loss=base["loss"] - 2.2)
    path = tmp_path / "below.csv"
    below.to_csv(path, index=False)
    bound = f"E = {np.exp(-10):.3g} at its lower bound"  # chinchilla's log E >= -10
    assert main(["fit", str(path), "--law", "chinchilla", "--frontier", "all", "-q"]) == 0
    assert f"warning: fit status 'bound hit': converged with E at a bound ({bound})" in (
        capsys.readouterr().err)
    args = ["fragility", str(path), "--target", "1e22", "--no-leave-one-out", "--drop-count",
            "0", "--huber-deltas", "1e-4", "--every-k", "2", "-q"]
    assert main(args) == 0  # as fit
    err = capsys.readouterr().err
    assert (f"warning: the base fit's status is 'bound hit': converged with E at a bound "
            f"({bound}); that value is the bound's") in err
    assert "'base': bound hit" not in err  # said once, as the base, not as a variant
    assert "'huber δ=0.0001': bound hit" in err  # the variant at the bound, as before
    with pytest.warns(UserWarning, match=r"the base fit's status is 'bound hit': converged "
                                         r"with E at a bound"):
        report = fragility(below, target=1e22, leave_one_out=False, drop_count=0,
                           every_k=(), huber_deltas=())
    assert report.table["status"].tolist() == ["bound hit"]


def test_a_base_fit_out_of_iterations_exits_1_as_fit_does(tmp_path, capsys, monkeypatch):
    """``scalebo fit`` exits 1 when its fit did not converge within the iteration limit (and
    README says fragility does for its base fit); fragility exited 0."""
    import dataclasses

    import scalebo.analysis.fragility as frag

    real = frag.fragility

    def out_of_iterations(*args, **kwargs):
        report = real(*args, **kwargs)
        base = dataclasses.replace(report.results[0], status="max iterations",
                                   message="no start converged")
        return dataclasses.replace(report, results=(base, *report.results[1:]))

    path = tmp_path / "ckpt.csv"
    _checkpoints().to_csv(path, index=False)
    args = ["fragility", str(path), "--target", "1e22", "--no-leave-one-out", "--drop-count",
            "0", "--huber-deltas", "1e-4", "--every-k", "2", "-q"]
    assert main(args) == 0
    capsys.readouterr()
    monkeypatch.setattr(frag, "fragility", out_of_iterations)
    assert main(args) == 1
    assert ("error: the base fit is out of iterations: no start converged"
            in capsys.readouterr().err)


def test_the_library_warns_of_a_base_fit_out_of_iterations(monkeypatch):
    """The CLI exits 1 on it; fragility() in Python said nothing (a review)."""
    import dataclasses

    import scalebo.analysis.fragility as frag

    real, calls = frag.fit_variant, []

    def first_out_of_iterations(*args, **kwargs):
        result, fit = real(*args, **kwargs)
        calls.append(result)
        if len(calls) == 1:  # the base
            result = dataclasses.replace(result, status="max iterations",
                                         message="no start converged")
        return result, fit

    monkeypatch.setattr(frag, "fit_variant", first_out_of_iterations)
    with pytest.warns(UserWarning, match=r"the base fit did not converge \(no start converged\)"):
        frag.fragility(_checkpoints(), target=1e22, leave_one_out=False, drop_count=0,
                       huber_deltas=(), every_k=())
