"""Fragility variants, fits and report on synthetic tables with a known law."""

import io
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from scalebo.analysis.fragility import (
    StartPolicy,
    Variant,
    build_variants,
    fit_variant,
    fragility,
    plot_fragility,
)
from scalebo.fitting.downstream import fit_downstream
from scalebo.fitting.robust import FitStatus
from scalebo.laws import CHINCHILLA

#: A small start grid (72 starts) for the base fits of these tests, to keep them fast.
STARTS = np.array(list(itertools.product((0.0, 1.0), (0.0, 5.0, 10.0), (0.2, 0.5),
                                         (0.0, 5.0, 10.0), (0.2, 0.5))))

TRUE = {"E": 1.9, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.37}


def _law(N, D):
    return TRUE["E"] + TRUE["A"] * N ** -TRUE["alpha"] + TRUE["B"] * D ** -TRUE["beta"]


def _checkpoints(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """6 models × 6 checkpoints (D = 1..6 × 2e9 tokens), loss from the known law."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, N in enumerate([5e7, 1e8, 2e8, 4e8, 8e8, 1.6e9]):
        for j in range(1, 7):
            D = 2e9 * j
            rows.append({"run": f"m{i}", "N": N, "D": D, "loss": _law(N, D)})
    frame = pd.DataFrame(rows)
    frame["loss"] *= np.exp(noise * rng.standard_normal(len(frame)))
    return frame


def test_build_variants_names_and_sizes():
    base = _checkpoints()
    extra = {"shifted": base.assign(loss=base["loss"] * 1.01)}
    variants = build_variants(base, drop_count=2, every_k=(2, 3), huber_deltas=(1e-4, 1e-3),
                              extra=extra)
    names = [v.name for v in variants]
    assert names[0] == "base" and len(base) == len(variants[0].frame) == 36
    loo = [v for v in variants if v.kind == "leave_one_out"]
    assert len(loo) == 6 and all(len(v.frame) == 30 for v in loo)
    assert all(v.frame["N"].nunique() == 5 for v in loo)
    small = next(v for v in variants if v.name == "drop 2 smallest").frame
    large = next(v for v in variants if v.name == "drop 2 largest").frame
    assert small["N"].min() == 2e8 and large["N"].max() == 4e8
    every2 = next(v for v in variants if v.name == "every 2nd checkpoint").frame
    assert sorted(every2["D"].unique()) == [4e9, 8e9, 12e9]
    every3 = next(v for v in variants if v.name == "every 3rd checkpoint").frame
    assert sorted(every3["D"].unique()) == [6e9, 12e9]
    # δ equal to the base δ (1e-3) is not repeated
    assert [v.huber_delta for v in variants if v.kind == "huber"] == [1e-4]
    assert variants[-1].name == "shifted" and variants[-1].kind == "extra"
    # without a run column the checkpoint variants are skipped
    no_run = build_variants(base.drop(columns="run"), every_k=(2,))
    assert not any(v.kind == "every_kth" for v in no_run)
    # a run label over two model sizes (data row 9, model m1's, relabelled m0): a trial's
    # "every 2nd checkpoint" thinned the mislabelled run without a word
    wrong = base.copy()
    wrong.loc[8, "run"] = "m0"
    with pytest.warns(UserWarning, match=r"no every-k-th.*run 'm0' holds 2 model sizes N: "
                                         r"5e\+07 on 6 rows, others on data row 9 "):
        mislabelled = build_variants(wrong, every_k=(2,))
    assert not any(v.kind == "every_kth" for v in mislabelled)


def test_noise_free_law_is_not_fragile():
    report = fragility(_checkpoints(), target=1e22, every_k=(2,), huber_deltas=(1e-2,),
                       drop_count=1, base_starts=STARTS)
    table = report.table
    assert len(table) == 1 + 6 + 2 + 1 + 1
    assert (table["status"] == str(FitStatus.CONVERGED)).all()
    # every variant sees points of the same law: all recover it
    np.testing.assert_allclose(table["alpha"], TRUE["alpha"], rtol=1e-5)
    np.testing.assert_allclose(table["beta"], TRUE["beta"], rtol=1e-5)
    np.testing.assert_allclose(table["E"], TRUE["E"], rtol=1e-5)
    assert report.spread["loss_at_target"]["rel_spread"] < 1e-6
    # N*, D* at the target follow the closed form of Hoffmann et al. (approach 3)
    a, b, A, B = TRUE["alpha"], TRUE["beta"], TRUE["A"], TRUE["B"]
    G = (a * A / (b * B)) ** (1 / (a + b))
    n_opt = G * (1e22 / 6) ** (b / (a + b))
    assert table["N_opt"].iloc[0] == pytest.approx(n_opt, rel=1e-4)
    assert table["D_opt"].iloc[0] * 6 * table["N_opt"].iloc[0] == pytest.approx(1e22)


def test_reduced_starts_match_full_grid_and_failures_are_rows():
    noisy = _checkpoints(noise=0.01, seed=3)
    variants = build_variants(noisy, drop_count=0, every_k=(), huber_deltas=())
    full = fit_variant(CHINCHILLA, variants[0], 1e22, policy=StartPolicy(full=True),
                       starts=STARTS)[1]
    optima = np.vstack([full.x[None, :], full.converged_x[:: max(1, len(full.x) // 2)]])[:8]
    for variant in variants[1:2]:
        reduced, _ = fit_variant(CHINCHILLA, variant, 1e22, base_optima=optima)
        complete, _ = fit_variant(CHINCHILLA, variant, 1e22, policy=StartPolicy(full=True))
        assert reduced.objective <= complete.objective * (1 + 1e-9)
        assert reduced.params["alpha"] == pytest.approx(complete.params["alpha"], rel=1e-4)
    tiny = Variant("tiny", "extra", noisy.iloc[:3])
    row, fit = fit_variant(CHINCHILLA, tiny, 1e22, base_optima=optima)
    assert fit is None and row.status == "failed" and "3 points" in row.message
    assert math.isnan(row.N_opt) and row.params == {}


def test_parallel_equals_serial_and_report_outputs(tmp_path):
    noisy = _checkpoints(noise=0.01, seed=1)
    opts = {"target": 1e22, "every_k": (2,), "huber_deltas": (), "drop_count": 0,
            "leave_one_out": False, "extra": {"shifted": noisy.assign(loss=noisy.loss * 1.02)}}
    serial = fragility(noisy, n_jobs=None, base_starts=STARTS, **opts)
    parallel = fragility(noisy, n_jobs=2, base_starts=STARTS, **opts)
    cols = ["alpha", "beta", "E", "N_opt", "loss_at_target"]
    np.testing.assert_allclose(serial.table[cols], parallel.table[cols], rtol=1e-12)
    assert list(serial.table["variant"]) == ["base", "every 2nd checkpoint", "shifted"]
    # a 2 % loss shift changes E (by ~2 %), not the exponents much
    shifted = serial.table.set_index("variant").loc["shifted"]
    assert shifted["loss_at_target"] > serial.table["loss_at_target"].iloc[0]
    spread = serial.spread["loss_at_target"]
    assert spread["min"] <= spread["median"] <= spread["max"]
    assert spread["rel_spread"] == pytest.approx((spread["max"] - spread["min"])
                                                 / spread["median"])
    text = json.dumps(serial.to_dict())
    assert '"variants"' in text
    path = tmp_path / "fragility.png"
    fig = plot_fragility(serial, str(path))
    assert path.stat().st_size > 10_000
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == [
        "exponents", "N* (parameters)", "D*/N* (tokens per parameter)", "loss at target (nats)"]
    from dataclasses import replace

    lost = replace(serial, results=(*serial.results[:2],
                                    replace(serial.results[2], status="unidentified")))
    title = plot_fragility(lost)._suptitle.get_text()
    assert "under 2 of 3 variants" in title and "left out: shifted (unidentified)" in title


def test_bootstrap_summary_brackets_the_base():
    noisy = _checkpoints(noise=0.01, seed=2)
    report = fragility(noisy, target=1e22, leave_one_out=False, drop_count=0, every_k=(),
                       huber_deltas=(), bootstrap=40, rng=5, base_starts=STARTS)
    boot = report.bootstrap
    assert boot["n_resamples"] == 40 and boot["seed"] == 5
    base = report.table.iloc[0]
    for key in ("alpha", "beta", "E", "N_opt", "loss_at_target"):
        assert boot[key]["lower"] <= base[key] <= boot[key]["upper"], key


def test_fragility_rejects_laws_without_n_and_d():
    with pytest.raises(ValueError, match="needs a law of parameters N and tokens D"):
        fragility(_checkpoints(), law="compute")


# --------------------------------------------------------------------------- downstream


def test_fit_downstream_recovers_gadre_and_sigmoid():
    L = np.linspace(2.2, 4.0, 25)
    gadre = pd.DataFrame({"val": L, "err": 0.85 - np.exp(2.0) * np.exp(-1.6 * L)})
    fit = fit_downstream(gadre, "gadre", loss="val", error="err")
    assert fit.params == pytest.approx({"epsilon": 0.85, "k": np.exp(2.0), "gamma": 1.6},
                                       rel=1e-6)
    sig = pd.DataFrame({"loss": L, "error": 0.5 / (1 + np.exp(-3.0 * (L - 3.1))) + 0.25})
    fit = fit_downstream(sig, "sigmoid")
    assert fit.params == pytest.approx({"a": 0.5, "k": 3.0, "L0": 3.1, "b": 0.25}, rel=1e-6)
    with pytest.raises(ValueError, match="1 - accuracy"):
        fit_downstream(sig.assign(error=sig["error"] + 1.0))
    with pytest.raises(ValueError, match="columns"):
        fit_downstream(sig, error="acc")
    with pytest.raises(ValueError, match="gadre"):
        fit_downstream(sig, "chinchilla")


def test_cli_help_is_light():
    import subprocess
    import sys

    code = ("import sys, scalebo.cli.fragility; "
            "print('numpy' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_sizes_read_off_a_figure_get_distinct_names_and_a_warning():
    """N values that agree to 4 digits (sizes read off a plot) get names with the digits that
    tell them apart, and leave-one-out over 30 sizes of 36 points is warned about."""
    base = _checkpoints()
    close = base.assign(N=base["N"] * (1 + 1e-6 * (np.arange(len(base)) % 2)))
    assert close["N"].nunique() == 12  # each size twice, 1e-6 apart
    names = [v.name for v in build_variants(close) if v.kind == "leave_one_out"]
    assert len(names) == len(set(names)) == close["N"].nunique()
    scattered = base.assign(N=base["N"] * np.linspace(1, 1.5, len(base)))  # 36 sizes
    with pytest.warns(UserWarning, match="N takes 36 distinct values over 36 points"):
        build_variants(scattered)


def test_cli_run_column_enables_checkpoint_variants_and_a_bootstrap_over_runs(tmp_path,
                                                                             capsys):
    from scalebo.cli.main import main

    path = tmp_path / "ckpt.csv"
    _checkpoints(noise=0.01, seed=3).rename(columns={"run": "run_name"}).to_csv(path,
                                                                                index=False)
    args = [str(path), "--target", "1e22", "--no-leave-one-out", "--drop-count", "0",
            "--huber-deltas", "1e-4", "--every-k", "2", "--format", "json", "--bootstrap",
            "20", "-q"]
    assert main(["fragility", *args]) == 0
    without = json.loads(capsys.readouterr().out)
    assert "every 2nd checkpoint" not in [v["variant"] for v in without["variants"]]
    assert without["bootstrap"]["n_clusters"] is None
    assert main(["fragility", *args, "--run", "run_name"]) == 0
    with_runs = json.loads(capsys.readouterr().out)
    assert "every 2nd checkpoint" in [v["variant"] for v in with_runs["variants"]]
    assert with_runs["bootstrap"]["n_clusters"] == 6
    assert main(["fragility", *args, "--run", "run_nam"]) == 2
    assert "did you mean 'run_name'" in capsys.readouterr().err
    csv_args = [a if a != "json" else "csv" for a in args]
    assert main(["fragility", *csv_args, "--run", "run_name"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))  # A and B as the JSON has them
    base = with_runs["variants"][0]
    assert table.loc[0, ["A", "B"]].tolist() == pytest.approx([base["A"], base["B"]])


def test_a_sweep_table_is_fitted_on_each_cells_best_run_as_fit_does():
    """A trial: two learning rates per (N, D) cell, and fragility's base fit used all 50
    runs (β 0.245 where fit --law chinchilla, on the 25 cell bests, gave 0.288; truth 0.28):
    a law in N and D describes tuned models."""
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    grid = _checkpoints().drop(columns="run")
    tuned = grid.assign(lr=1e-3)
    off = grid.assign(lr=1e-2, loss=grid["loss"] * 1.08)  # a worse setting in every cell
    table = load_runs(pd.concat([tuned, off], ignore_index=True))
    assert table.hyperparameters == ("lr",)
    base = build_variants(table, leave_one_out=False, drop_count=0)[0].frame
    assert len(base) == len(grid) and (base["lr"] == 1e-3).all()
    points = fit_summary(table, "chinchilla").points
    assert sorted(base["loss"]) == pytest.approx(sorted(points["loss"]))
    plain = build_variants(grid, leave_one_out=False, drop_count=0)[0].frame
    assert len(plain) == len(grid)  # a table without hyperparameters: every row


def test_the_spread_names_the_variants_at_its_ends():
    """A trial: the spread table gave min and max but not which variant (docs/fragility.md
    reads them by name)."""
    report = fragility(_checkpoints(noise=0.01, seed=1), target=1e22, base_starts=STARTS,
                       leave_one_out=False, every_k=(), huber_deltas=(1e-4,))
    table = report.table.set_index("variant")
    for quantity, s in report.spread.items():
        assert table.loc[s["min_variant"], quantity] == pytest.approx(s["min"])
        assert table.loc[s["max_variant"], quantity] == pytest.approx(s["max"])


def test_every_kth_checkpoint_of_a_sweep_thins_each_run_then_takes_cell_bests():
    """A trial: 6 models × 2 learning rates × 6 checkpoints, where one cell's best came from
    the other learning rate's run: thinning the 36 cell bests counted that point as a run of
    its own (always kept) and shifted its run's ranks (13 points at every 5th, not 12)."""
    from scalebo.data.runs import load_runs

    grid = _checkpoints()
    tuned = grid.assign(lr=1e-3, run=grid["run"] + "_a")
    off = grid.assign(lr=1e-2, run=grid["run"] + "_b", loss=grid["loss"] * 1.08)
    off.loc[3, "loss"] = tuned.loc[3, "loss"] * 0.99  # one cell's best is the other run's
    table = load_runs(pd.concat([tuned, off], ignore_index=True), hyperparameters=("lr",))
    variants = {v.name: v.frame for v in build_variants(table, leave_one_out=False,
                                                        drop_count=0, every_k=(2, 3))}
    for k, name in ((2, "every 2nd checkpoint"), (3, "every 3rd checkpoint")):
        kept = variants[name]
        assert len(kept) == 6 * 6 // k  # one point per kept (N, D) cell
        assert set(kept["D"] / 2e9) == set(range(k, 7, k))  # the same D in every model
    assert variants["every 2nd checkpoint"].loc[lambda f: f["D"] == 8e9, "lr"].eq(1e-2).sum() \
        == 1  # the cell whose best is the other learning rate's keeps it


def test_variant_names_are_unique(tmp_path, capsys):
    """A trial: a second --variant-file x=... replaced the first without a word, and
    --variant-file base=... gave two rows named 'base'."""
    from scalebo.cli.main import main

    path = tmp_path / "ckpt.csv"
    _checkpoints(noise=0.01).to_csv(path, index=False)
    args = ["fragility", str(path), "--no-leave-one-out", "--drop-count", "0", "-q"]
    assert main([*args, "--variant-file", f"x={path}", "--variant-file", f"x={path}"]) == 2
    assert "the name 'x' is taken by another --variant-file" in capsys.readouterr().err
    assert main([*args, "--variant-file", f"base={path}"]) == 2
    assert "variant name 'base' is a built-in variant's" in capsys.readouterr().err
    with pytest.raises(ValueError, match="'huber δ=0.01' is a built-in"):
        build_variants(_checkpoints(), extra={"huber δ=0.01": _checkpoints()})


def test_an_unidentified_base_fit_says_why(tmp_path, capsys):
    # A trial: one model size, every variant 'unidentified', exit 1, and no word of why.
    from scalebo.cli.main import main

    path = tmp_path / "one.csv"
    _checkpoints().query("run == 'm2'").to_csv(path, index=False)
    assert main(["fragility", str(path), "-q"]) == 1
    assert "the base fit is unidentified: cannot be identified" in capsys.readouterr().err


def test_a_variant_left_out_of_the_spread_says_why(tmp_path, capsys):
    """A trial: Gemstones' 'every 5th checkpoint' was 'unidentified' with no reason; here
    every 5th of 6 checkpoints keeps D = 10e9 and the last, 12e9: two D values, and a term
    in D needs three to be told from E."""
    from scalebo.cli.main import main

    path = tmp_path / "ck.csv"
    _checkpoints().to_csv(path, index=False)
    assert main(["fragility", str(path), "-q", "--every-k", "5", "--huber-deltas", "1e-3",
                 "--no-leave-one-out", "--drop-count", "0"]) == 0
    err = capsys.readouterr().err
    assert ("left out of the spread: 'every 5th checkpoint': unidentified (cannot be "
            "identified: 12 runs but only 2 distinct values of D") in err, err
