"""``scalebo fit`` run as a subprocess on synthetic tables drawn from known laws.

Each test writes a CSV to ``tmp_path`` from a noise-free law, runs ``python -m scalebo.cli``
and parses its JSON (or CSV) output, as Optuna's ``tests/test_cli.py`` does.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalebo.cli import main as cli_main

# L(C) = E + A·C^(−alpha), C in FLOPs.
COMPUTE_TRUTH = {"E": 1.8, "A": 600.0, "alpha": 0.15}
# L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al.'s published values).
CHINCHILLA_TRUTH = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "MPLBACKEND": "Agg", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "scalebo.cli", *args],
        capture_output=True, text=True, env=full_env, timeout=120,
    )


def compute_law(C: np.ndarray) -> np.ndarray:
    t = COMPUTE_TRUTH
    return t["E"] + t["A"] * C ** (-t["alpha"])


def chinchilla_law(N: np.ndarray, D: np.ndarray) -> np.ndarray:
    t = CHINCHILLA_TRUTH
    return t["E"] + t["A"] / N ** t["alpha"] + t["B"] / D ** t["beta"]


def chinchilla_optimum(C: float) -> tuple[float, float]:
    """Closed-form N*, D* of the true law under C = 6ND (Hoffmann et al. 2022, eq. 4)."""
    t = CHINCHILLA_TRUTH
    a, b = t["alpha"], t["beta"]
    G = (a * t["A"] / (b * t["B"])) ** (1 / (a + b))
    return G * (C / 6) ** (b / (a + b)), (C / 6) ** (a / (a + b)) / G


@pytest.fixture
def compute_csv(tmp_path: Path) -> Path:
    """12 compute levels × 5 model sizes; at each level one run lies on L(C), the others
    above it (a detuned size), so the envelope is exactly the 12 on-law runs. C is given
    explicitly: 6·N·(C/(6N)) would differ from C in the last bit and break the ties."""
    rows = []
    for k, C in enumerate(np.geomspace(1e18, 1e22, 12)):
        for j, offset in enumerate((0.0, -1.0, -0.5, 0.5, 1.0)):
            N = 1e8 * 10 ** (k / 4 + offset)
            loss = compute_law(C) + 0.02 * offset**2
            rows.append({"run_id": f"c{k}n{j}", "params": N, "D": C / (6 * N), "C": C,
                         "loss": loss})
    path = tmp_path / "compute.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def chinchilla_csv(tmp_path: Path) -> Path:
    """5 × 5 (N, D) cells, two learning rates each; the tuned one lies on L(N, D)."""
    rows = []
    for N in np.geomspace(5e7, 5e9, 5):
        for D in np.geomspace(1e9, 1e11, 5):
            for lr, penalty in ((1e-3, 0.0), (1e-2, 0.07)):
                rows.append({"N": N, "D": D, "lr": lr, "loss": chinchilla_law(N, D) + penalty})
    path = tmp_path / "chinchilla.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def assert_params_close(params: dict[str, float], truth: dict[str, float], rel: float) -> None:
    for name, value in truth.items():
        assert params[name] == pytest.approx(value, rel=rel), name


def test_help_explains_units_and_formats() -> None:
    root = run_cli("--help")
    assert root.returncode == 0
    for word in ("FLOPs", "parameters", "tokens", "nats", "fit", "--map"):
        assert word in root.stdout
    sub = run_cli("fit", "--help")
    assert sub.returncode == 0
    for word in ("FLOPs", "nats", "Parquet", "JSON lines", "--map", "6*N*D", "dataset:NAME"):
        assert word in sub.stdout


def test_registry_modules_expose_the_command_interface() -> None:
    from scalebo.cli.main import COMMAND_MODULES, COMMANDS, build_parser

    names = [m.NAME for m in COMMANDS]
    assert names == list(COMMAND_MODULES)
    for module in COMMANDS:
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.add_arguments) and callable(module.run)
    parser = build_parser()
    assert parser.parse_args(["fit", "x.csv"]).command == "fit"
    assert cli_main(["--version"]) == 0
    assert cli_main([]) == 2


def test_help_does_not_load_the_numerical_stack() -> None:
    code = ("import sys; from scalebo.cli.main import build_parser; build_parser().format_help();"
            " print(sorted(m for m in ('numpy', 'pandas', 'scipy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_compute_law_recovered_on_envelope(compute_csv: Path) -> None:
    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--bootstrap", "40",
                   "--predict", "1e24", "--predict", "1e26", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["law"]["name"] == "compute"
    assert out["frontier"] == "envelope"
    assert out["runs"] == {"read": 60, "loaded": 60, "used": 12, "excluded": 0,
                           "excluded_by_reason": {}}
    assert sorted(p["run_id"] for p in out["points"]) == sorted(f"c{k}n0" for k in range(12))
    assert out["fit"]["status"] == "converged"
    assert_params_close(out["fit"]["params"], COMPUTE_TRUTH, rel=1e-5)
    boot = out["bootstrap"]
    assert boot["n_resamples"] == 40 and boot["seed"] == 0
    for name, value in COMPUTE_TRUTH.items():
        lo, hi = boot["intervals"][name]
        assert lo <= hi
        assert lo == pytest.approx(value, rel=1e-4) and hi == pytest.approx(value, rel=1e-4)
    preds = out["predictions"]
    assert [p["C"] for p in preds] == [1e24, 1e26]
    for p in preds:
        assert p["loss"] == pytest.approx(compute_law(p["C"]), rel=1e-6)
        assert p["loss_interval"][0] == pytest.approx(p["loss"], rel=1e-4)
        assert "N_opt" not in p
    assert "fitting compute" in proc.stderr  # progress goes to stderr, data to stdout


def test_all_runs_frontier_is_biased_upwards(compute_csv: Path) -> None:
    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--frontier", "all",
                   "--format", "json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"]["used"] == 60
    assert proc.stderr == ""
    # Detuned runs lie above the law, so fitting all of them cannot recover it exactly.
    assert abs(out["fit"]["params"]["E"] - COMPUTE_TRUTH["E"]) > 1e-3


def test_frontier_all_says_it_fits_off_optimal_settings(tmp_path: Path) -> None:
    # A trial: with --frontier all the log still said "a cell's best run is the lowest loss".
    rows = [{"N": n, "D": d, "lr": lr, "loss": float(chinchilla_law(n, d)) + 0.03 * k ** 2}
            for n in (1e8, 3e8, 1e9) for d in (2e9, 6e9, 2e10) for k, lr in enumerate((1e-3, 3e-3))]
    path = tmp_path / "lr.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    proc = run_cli("fit", str(path), "--law", "chinchilla", "--frontier", "all")
    assert "every run is fitted (--frontier all), off-optimal lr included" in proc.stderr
    assert "lowest loss" not in proc.stderr
    proc = run_cli("fit", str(path), "--law", "chinchilla")
    assert "hyperparameters: lr (a cell's best run is the lowest loss over them" in proc.stderr


def test_chinchilla_recovered_with_plot_json_and_allocation(
    chinchilla_csv: Path, tmp_path: Path
) -> None:
    plot, report = tmp_path / "fit.png", tmp_path / "fit.json"
    proc = run_cli("fit", str(chinchilla_csv), "--law", "chinchilla", "--bootstrap", "10",
                   "--predict", "1e23", "--plot", str(plot), "--json", str(report),
                   "--hyperparameters", "lr")
    assert proc.returncode == 0, proc.stderr
    assert "L(N, D) = E + A/N^alpha + B/D^beta" in proc.stdout
    assert "N*" in proc.stdout and "D*/N*" in proc.stdout
    assert "predictions (C in FLOPs, loss in nats, N* parameters, D* tokens)" in proc.stdout
    # the compute law has no N*, D* column, and its header no longer names them
    compute = run_cli("fit", str(chinchilla_csv), "--predict", "1e23")
    assert compute.returncode == 0, compute.stderr
    assert "predictions (C in FLOPs, loss in nats)\n" in compute.stdout
    assert "N*" not in compute.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = json.loads(report.read_text())
    assert out["frontier"] == "cell"
    assert out["runs"]["used"] == 25
    assert_params_close(out["fit"]["params"], CHINCHILLA_TRUTH, rel=1e-4)
    (pred,) = out["predictions"]
    n_opt, d_opt = chinchilla_optimum(1e23)
    assert pred["N_opt"] == pytest.approx(n_opt, rel=1e-3)
    assert pred["D_opt"] == pytest.approx(d_opt, rel=1e-3)
    assert pred["tokens_per_param"] == pytest.approx(d_opt / n_opt, rel=2e-3)
    assert pred["loss"] == pytest.approx(chinchilla_law(n_opt, d_opt), rel=1e-6)
    lo, hi = pred["N_opt_interval"]
    assert lo == pytest.approx(n_opt, rel=1e-2) and hi == pytest.approx(n_opt, rel=1e-2)


def test_missing_column_is_named_and_map_fixes_it(compute_csv: Path) -> None:
    proc = run_cli("fit", str(compute_csv))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: ") and "['N']" in proc.stderr
    assert "--map" in proc.stderr and "Traceback" not in proc.stderr
    fixed = run_cli("fit", str(compute_csv), "--map", "N=params", "--format", "csv")
    assert fixed.returncode == 0, fixed.stderr
    rows = list(csv.DictReader(io.StringIO(fixed.stdout)))
    assert [r["name"] for r in rows] == ["E", "A", "alpha"]
    assert {r["status"] for r in rows} == {"converged"}
    assert float(rows[2]["estimate"]) == pytest.approx(COMPUTE_TRUTH["alpha"], rel=1e-5)
    assert rows[0]["lower"] == rows[0]["level"] == ""  # no bootstrap, no interval, no level


def test_bad_inputs_exit_2_in_process(
    tmp_path: Path, compute_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Same code path as the subprocess, without paying the interpreter start-up three times.
    assert cli_main(["fit", str(compute_csv), "--map", "N=params", "--law", "kaplan"]) == 2
    assert "error: unknown law 'kaplan'" in capsys.readouterr().err
    assert cli_main(["fit", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli_main(["fit", str(compute_csv), "--predict", "-1"]) == 2
    assert "positive" in capsys.readouterr().err
    assert cli_main(["fit", str(compute_csv), "--map", "N=params", "--law", "gadre",
                     "--predict", "1e24"]) == 2
    assert "--predict needs a law in C or in (N, D)" in capsys.readouterr().err
    assert cli_main(["fit", "dataset:nope", "--data-dir", str(tmp_path)]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err


def test_diverged_and_repeated_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    C = np.geomspace(1e18, 1e21, 8)
    frame = pd.DataFrame({"N": 1e8 * np.arange(1, 9), "loss": compute_law(C)})
    frame["D"] = C / (6 * frame["N"])
    extra = pd.DataFrame({"N": [1e8, 2e8, 3e8], "D": frame["D"][:3].to_numpy(),
                          "loss": [frame["loss"][0], np.nan, 9.0]})
    path = tmp_path / "runs.csv"
    pd.concat([frame, extra]).to_csv(path, index=False)
    assert cli_main(["fit", str(path), "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err
    proc = run_cli("fit", str(path), "--duplicates", "mean", "--diverged-above", "4",
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"]["excluded_by_reason"] == {"non_finite": 1, "diverged": 1}
    assert out["runs"]["loaded"] == 8
    assert out["warnings"] and "warning:" in proc.stderr
    # the rows are named; the library's pointer to RunTable.excluded is not for CLI users
    assert "excluded 2 of 11 runs: 1 non-finite loss (data row 10); 1 diverged" in proc.stderr
    assert "RunTable" not in proc.stderr and not any("RunTable" in w for w in out["warnings"])
    assert_params_close(out["fit"]["params"], COMPUTE_TRUTH, rel=1e-4)


def test_too_few_runs_is_a_fit_error(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    pd.DataFrame({"N": [1e8, 2e8], "D": [1e9, 2e9], "loss": [3.0, 2.9]}).to_csv(path, index=False)
    proc = run_cli("fit", str(path))
    assert proc.returncode == 1
    assert "3 parameters" in proc.stderr and "2 runs" in proc.stderr


def test_epoch_chinchilla_reference_fit(data_dir: Path) -> None:
    proc = run_cli("fit", "dataset:epoch_chinchilla", "--dataset-option", "drop_highest_loss=5",
                   "--law", "chinchilla", "--format", "json", "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"]["used"] == 240
    assert out["runs"]["excluded_by_reason"] == {"dropped": 5}
    # the file's 245 rows: 240 valid ("loaded") and the 5 dropped (a trial read 240 as read)
    assert (out["runs"]["read"], out["runs"]["loaded"], out["runs"]["excluded"]) == (245, 240, 5)
    reference = {"A": 477.84, "B": 2143.86, "E": 1.8172, "alpha": 0.34731, "beta": 0.36718}
    assert_params_close(out["fit"]["params"], reference, rel=1e-3)
    assert out["fit"]["objective"] == pytest.approx(1.0183e-3, rel=1e-3)
    assert out["fit"]["n_starts"] == 4500


def test_epoch_agreement_counts_the_same_starts_above_and_below(data_dir: Path) -> None:
    # it read "321 of the 64 best converged starts, polished, agree" (and "899 of 64" on
    # porian_isoflop): the numerator counted unpolished starts too
    proc = run_cli("fit", "dataset:epoch_chinchilla", "--dataset-option", "drop_highest_loss=5",
                   "--law", "chinchilla", "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr
    status = re.search(r"^status      converged; (\d+) of the 64 best converged "
                       r"starts, polished, agree \(4500 converged\)$", proc.stdout, re.M)
    starts = re.search(r"^starts      4500 tried, 4500 converged, (\d+) of the 64 best "
                       r"\(polished\) agree with the best$", proc.stdout, re.M)
    assert status and starts, proc.stdout
    assert 1 <= int(status[1]) == int(starts[1]) <= 64


def test_json_equals_library_fit_summary(compute_csv: Path) -> None:
    """What ``fit --format json`` prints is the library's fit summary, serialized."""
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary
    from scalebo.outputs import jsonable

    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--bootstrap", "30",
                   "--seed", "4", "--predict", "1e24", "--predict", "1e25", "--format",
                   "json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    summary = fit_summary(load_runs(compute_csv, mapping={"N": "params"}), "compute",
                          bootstrap=30, seed=4, predict=[1e24, 1e25])
    assert json.loads(proc.stdout) == json.loads(json.dumps(jsonable(summary.to_dict())))
    assert summary.bootstrap is not None and summary.predictions[1]["loss_interval"]


def test_csv_rows_carry_their_interval_level(compute_csv: Path) -> None:
    """A CSV row read alone says which interval its lower/upper are (--confidence)."""
    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--bootstrap", "30",
                   "--confidence", "0.8", "--predict", "1e24", "--format", "csv", "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["kind"], r["name"]) for r in rows] == [
        ("parameter", "E"), ("parameter", "A"), ("parameter", "alpha"), ("prediction", "loss")]
    for r in rows:
        assert r["level"] == "0.8" and float(r["lower"]) <= float(r["upper"]), r


def test_output_in_missing_folder_fails_before_fitting(compute_csv: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    missing = tmp_path / "no" / "such" / "fit.json"
    assert cli_main(["fit", str(compute_csv), "--map", "N=params", "--bootstrap", "50",
                     "--json", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "--json" in err and "does not exist" in err
    assert "fitting" not in err  # no work was done
    assert not missing.parent.exists()


def test_public_face_names_the_library_objects() -> None:
    """``scalebo.<name>`` is the object of the module that defines it, loaded lazily."""
    import importlib

    import scalebo

    assert sorted(scalebo.__all__) == sorted([*scalebo._PUBLIC, "__version__"])
    for name, module in scalebo._PUBLIC.items():
        assert getattr(scalebo, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        scalebo.nope  # noqa: B018
    proc = subprocess.run([sys.executable, "-c", "import scalebo, sys; print('numpy' in "
                           "sys.modules)"], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False"  # import scalebo stays light


def test_a_law_needing_non_canonical_columns_says_map_cannot_make_them(compute_csv: Path,
                                                                        tmp_path: Path) -> None:
    """width_depth needs 'width' and 'depth': --map renames only canonical columns, so the
    hint once sent users to a flag that could not help."""
    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--law", "width_depth")
    assert proc.returncode == 2
    assert ("law 'width_depth' needs column(s) ['width', 'depth']" in proc.stderr
            and "give the file columns named ['width', 'depth'] (--map renames only run_id, N, "
            "D, C and loss)" in proc.stderr)
    assert "--map width=" not in proc.stderr


def test_response_names_the_fitted_column_and_target_is_its_old_name(tmp_path: Path) -> None:
    """fit's column option is --response, as for --formula (--target is a compute in status
    and fragility); --target still works. Gadre's law, epsilon - k·exp(-gamma·L), recovered."""
    L = np.linspace(2.2, 3.6, 12)
    frame = pd.DataFrame({"N": np.geomspace(1e8, 1e10, 12), "D": np.geomspace(2e9, 2e11, 12),
                          "loss": L, "err": 0.85 - np.exp(2.0) * np.exp(-1.6 * L)})
    path = tmp_path / "downstream.csv"
    frame.to_csv(path, index=False)
    outs = []
    for flag in ("--response", "--target"):
        proc = run_cli("fit", str(path), "--law", "gadre", flag, "err", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout)["fit"]["params"])
    assert outs[0] == outs[1]
    assert outs[0]["epsilon"] == pytest.approx(0.85, rel=1e-4)
    assert outs[0]["k"] == pytest.approx(np.exp(2.0), rel=1e-3)
    assert outs[0]["gamma"] == pytest.approx(1.6, rel=1e-4)


def test_bootstrap_of_an_unidentified_fit_prints_no_interval(tmp_path: Path) -> None:
    """Six runs at two computes: exit 1 (unidentified), the bootstrap line says why there is
    no interval; it crashed with an IndexError when every resample was excluded."""
    path = tmp_path / "two_computes.csv"
    pd.DataFrame({"N": [1e8] * 3 + [2e8] * 3, "D": [2e9] * 3 + [4e9] * 3, "seed": [1, 2, 3] * 2,
                  "loss": [3.5, 3.52, 3.49, 3.2, 3.22, 3.19]}).to_csv(path, index=False)
    proc = run_cli("fit", str(path), "--hyperparameters", "seed", "--frontier", "all",
                   "--bootstrap", "30", "--predict", "1e22")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "bootstrap   30 resamples (seed 0), 30 failed (30 of them could not identify the law)" \
        in proc.stdout
    assert "unidentified: cannot be identified: 6 runs but only 2 distinct values of C" \
        in proc.stdout
    as_csv = run_cli("fit", str(path), "--hyperparameters", "seed", "--frontier", "all",
                     "--format", "csv")  # a row read alone must not pass for an estimate
    assert as_csv.returncode == 1
    assert {r["status"] for r in csv.DictReader(io.StringIO(as_csv.stdout))} == {"unidentified"}


def test_a_bootstrap_of_few_resamples_is_warned_about(compute_csv: Path) -> None:
    """--bootstrap 1 printed zero-width '95 % intervals' that excluded the estimate."""
    proc = run_cli("fit", str(compute_csv), "--map", "N=params", "--bootstrap", "5")
    assert proc.returncode == 0, proc.stderr
    assert ("warning: --bootstrap 5: percentile intervals from so few resamples are rough"
            in proc.stderr)
    quiet = run_cli("fit", str(compute_csv), "--map", "N=params", "--bootstrap", "100")
    assert "so few resamples" not in quiet.stderr


def test_a_named_column_of_names_is_a_categorical_hyperparameter(tmp_path: Path) -> None:
    """An optimizer column (adam is 0.05 nats better at every configuration): unnamed, the
    runs look repeated and the error says to name it; named, it is a hyperparameter and the
    envelope (best per compute) holds adam's runs only, so the law is adam's."""
    C = np.logspace(17, 20, 8)
    adam = pd.DataFrame({"N": 1e7 * np.arange(1, 9), "loss": compute_law(C)})
    adam["D"] = C / (6 * adam["N"])
    frame = pd.concat([adam.assign(optimizer="adam"),
                       adam.assign(optimizer="sgd", loss=adam["loss"] + 0.05)])
    path = tmp_path / "opt.csv"
    frame.to_csv(path, index=False)
    proc = run_cli("fit", str(path), "--format", "json")
    assert proc.returncode == 2
    assert "They differ in the text column 'optimizer'" in proc.stderr
    proc = run_cli("fit", str(path), "--hyperparameters", "optimizer", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"]["loaded"] == 16 and out["runs"]["used"] == 8
    assert_params_close(out["fit"]["params"], COMPUTE_TRUTH, rel=1e-4)


def test_fit_says_which_columns_it_takes_as_hyperparameters(tmp_path, capsys):
    path = tmp_path / "runs.csv"
    rows = [(1e8, 1e9, lr, bs, 3.0 + lr + bs / 1e4) for lr in (1e-3, 2e-3) for bs in (64, 128)]
    rows += [(2e8, 2e9, 1e-3, 64, 2.7), (4e8, 4e9, 1e-3, 64, 2.5)]
    path.write_text("params,tokens,learning_rate,batch,final_loss\n"
                    + "".join(",".join(map(str, r)) + "\n" for r in rows))
    args = ["fit", str(path), "--map", "N=params,D=tokens,loss=final_loss", "--law", "compute"]
    cli_main(args)
    assert "6 runs; hyperparameters: learning_rate, batch (a cell's best run" in (
        capsys.readouterr().err)
    cli_main([*args, "--hyperparameters", "learning_rate", "--duplicates", "mean"])
    assert "4 runs; hyperparameters: learning_rate (a cell's" in capsys.readouterr().err


def test_a_compute_law_that_depends_on_its_frontier_says_so(tmp_path: Path) -> None:
    """A coarse noise-free grid of a known Chinchilla law (5 N × 4 D): the envelope keeps
    cells above the compute-optimal frontier and its law lands 8.5 % below the hull's at
    1e25 FLOPs, which lies within 1 % of the true compute-optimal loss; a law fitted on points
    of the frontier itself (envelope = hull) gets no note."""
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    E, A, a, B, b = 1.80, 400.0, 0.34, 410.0, 0.28
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(2e7, 1e9, 5), np.geomspace(4e8, 4e10, 4)))
    path = tmp_path / "coarse.csv"
    pd.DataFrame({"N": N, "D": D, "loss": E + A / N**a + B / D**b}).to_csv(path, index=False)
    Ns = np.geomspace(1e6, 1e16, 400_001)
    truth = float(np.min(E + A / Ns**a + B / (1e25 / (6 * Ns))**b))
    with pytest.warns(UserWarning, match=r"lower convex hull of \(C, loss\) \(7 runs\)") as got:
        s = fit_summary(load_runs(path), "compute", predict=(1e25,))
    said = re.search(r"predicts ([0-9.]+) at 1e\+25 FLOPs, \+([0-9.]+) %", str(got[0].message))
    hull, gap = float(said[1]), float(said[2])
    assert 7 < gap < 10  # 8.5 % when written
    assert abs(hull - truth) / truth < 0.01 < abs(s.predictions[0]["loss"] - truth) / truth
    assert any("lower convex hull" in w for w in s.to_dict()["warnings"])
    on_frontier = tmp_path / "frontier.csv"  # every run on L(C): envelope and hull agree
    C = np.geomspace(1e18, 1e22, 12)
    pd.DataFrame({"N": C / 6e10, "D": 1e10, "loss": compute_law(C)}).to_csv(on_frontier,
                                                                          index=False)
    assert not [w for w in fit_summary(load_runs(on_frontier), "compute",
                                       predict=(1e25,)).warnings if "hull" in w]


def test_a_compute_law_on_runs_of_one_token_count_says_it_is_not_compute_optimal(
        tmp_path: Path) -> None:
    """Runs of a known Chinchilla law that all train on D = 2e10 tokens: C = 6ND varies with N
    alone, the fitted L(C) tends to L(∞, 2e10) = E + B/D^β (a floor no compute-optimal run
    has), so its prediction at 1e25 FLOPs lies 21 % above the compute-optimal loss; the fit
    says so. The same law on a grid of several N and D gets no such note."""
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    E, A, a, B, b = 1.69, 406.4, 0.34, 410.7, 0.28
    N = np.geomspace(2e7, 2e9, 8)
    path = tmp_path / "one_d.csv"
    pd.DataFrame({"N": N, "D": 2e10, "loss": E + A / N**a + B / 2e10**b}).to_csv(path,
                                                                                index=False)
    with pytest.warns(UserWarning, match=r"every run has D = 2e\+10 tokens: C varies with N"):
        s = fit_summary(load_runs(path), "compute", predict=(1e25,))
    Ns = np.geomspace(1e6, 1e16, 400_001)
    optimal = float(np.min(E + A / Ns**a + B / (1e25 / (6 * Ns))**b))
    assert s.predictions[0]["loss"] > 1.15 * optimal
    assert any("not compute-optimal losses" in w for w in s.warnings)
    grid = tmp_path / "grid.csv"
    Ng, Dg = (g.ravel() for g in np.meshgrid(N, np.geomspace(1e9, 1e11, 5)))
    pd.DataFrame({"N": Ng, "D": Dg, "loss": E + A / Ng**a + B / Dg**b}).to_csv(grid, index=False)
    assert not [w for w in fit_summary(load_runs(grid), "compute").warnings if "every run" in w]


def test_one_model_size_is_noted_and_one_cell_is_not() -> None:
    """The other axis: runs of one N at several D get the note (N this time); runs of one cell
    (one N, one D, several learning rates) have no C to vary along and get none; D values
    equal but for rounding count as one."""
    from scalebo.fitting.summary import one_size_note

    D = np.geomspace(1e9, 1e11, 6)
    note = one_size_note(pd.DataFrame({"N": 3e8, "D": D * (1 + 1e-13 * np.arange(6))}))
    assert note is not None and note.startswith("every run has N = 3e+08 parameters: C varies "
                                                "with D alone")
    assert one_size_note(pd.DataFrame({"N": [1e8] * 4, "D": [2e10] * 4})) is None
    assert one_size_note(pd.DataFrame({"N": 1e8, "D": 2e10 * (1 + 1e-13 * np.arange(3))})) \
        is None
    assert one_size_note(pd.DataFrame({"C": [1e18, 1e19], "loss": [3.0, 2.8]})) is None


@pytest.mark.parametrize("law", ["gadre", "sigmoid"])
def test_a_downstream_table_without_n_and_d_is_pointed_to_a_formula_that_fits_it(tmp_path,
                                                                                 capsys, law):
    """gadre / sigmoid take the loss alone, yet the run-table loader asked for N and D; the
    error now gives the formula, and that command recovers the law the table was made from."""
    import shlex

    L = np.linspace(2.0, 4.2, 30)
    err = (0.9 - 5.0 * np.exp(-1.2 * L) if law == "gadre"
           else 0.6 / (1 + np.exp(-3.0 * (L - 3.0))) + 0.2)
    path = tmp_path / "down.csv"
    pd.DataFrame({"val_loss": L, "err": err}).to_csv(path, index=False)
    assert cli_main(["fit", str(path), "--law", law, "--response", "err", "--quiet"]) == 2
    said = capsys.readouterr().err
    command = shlex.split(said.split(", e.g. ")[1].split(" (--map")[0])
    command = [str(path) if a == "FILE" else "err" if a == "ERROR_COLUMN" else a
               for a in command[2:]]
    assert cli_main(["fit", *command, "--map", "loss=val_loss", "--format", "json",
                     "--quiet"]) == 0
    params = json.loads(capsys.readouterr().out)["fit"]["params"]
    truth = {"epsilon": 0.9, "k": 5.0, "gamma": 1.2} if law == "gadre" else {
        "a": 0.6, "k": 3.0, "L0": 3.0, "b": 0.2}
    for name, value in truth.items():
        assert params[name] == pytest.approx(value, rel=1e-3), name


def test_width_depth_predict_routes_to_the_same_law_as_a_formula(tmp_path: Path, capsys) -> None:
    """`--law width_depth --predict C` cannot allocate C over width, depth and D; its error
    gives the same law as a formula, which predicts at a point: that command, run as given,
    recovers the known law (noise-free, 4 values of every variable) and predicts its value."""
    w, d, D = (a.ravel() for a in np.meshgrid([256.0, 512, 1024, 2048], [4.0, 8, 16, 32],
                                             [1e9, 4e9, 1.6e10, 6.4e10]))
    truth = lambda w, d, D: 1.8 + 300 / w**0.5 + 3 / d**0.6 + 400 / D**0.28  # noqa: E731
    runs = tmp_path / "wd.csv"
    pd.DataFrame({"width": w, "depth": d, "N": 12 * w * w * d, "D": D,
                  "loss": truth(w, d, D)}).to_csv(runs, index=False)
    pd.read_csv(runs).drop(columns="N").to_csv(tmp_path / "noN.csv", index=False)
    assert cli_main(["fit", str(tmp_path / "noN.csv"), "--law", "width_depth"]) == 2
    assert ("Law 'width_depth' does not use N, but each run's compute C = 6·N·D (frontiers, "
            "predictions) needs its parameter count: add a column N") in capsys.readouterr().err
    assert cli_main(["fit", str(runs), "--law", "width_depth", "--predict", "1e22"]) == 2
    err = capsys.readouterr().err
    hint = re.search(r"--formula '([^']+)' --bounds '([^']+)' --predict-at (\S+) --plot PATH",
                     err)
    assert hint and hint.group(3) == "width=VALUE,depth=VALUE,D=VALUE", err
    out = tmp_path / "wd.json"
    assert cli_main(["fit", str(runs), "--formula", hint.group(1), "--bounds", hint.group(2),
                     "--predict-at", "width=4096,depth=48,D=1e12", "--format", "json",
                     "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    params = result["fit"]["params"]
    for name, value in {"E": 1.8, "A": 300, "alpha": 0.5, "B": 3, "beta": 0.6, "G": 400,
                        "gamma": 0.28}.items():
        assert params[name] == pytest.approx(value, rel=1e-3), name
    (pred,) = result["predictions"]
    assert pred["prediction"] == pytest.approx(truth(4096, 48, 1e12), rel=1e-5)


def test_formula_plot_labels_a_narrow_log_axis_at_its_values(tmp_path: Path) -> None:
    """A trial: on residual panels spanning under two decades matplotlib labelled minor log
    ticks, which overlapped ("3×10²4×10²6×10²"). Such an axis is labelled at the data's
    values and the prediction point, minor ticks unlabelled; a wide axis keeps its decades."""
    import matplotlib.ticker as mticker

    from scalebo.fitting.formula_plot import plot_formula_fit
    from scalebo.fitting.formula_summary import summarize_formula_fit

    w, D = (a.ravel() for a in np.meshgrid([256.0, 512, 1024, 2048], [1e9, 1e10, 1e11]))
    frame = pd.DataFrame({"w": w, "D": D, "loss": 1.8 + 300 / w**0.5 + 400 / D**0.28})
    summary = summarize_formula_fit(frame, "E + A*w**(-a) + B*D**(-b)",
                                    bounds={"E": (0.1, 5), "A": (1, 1e4), "a": (0, 2),
                                            "B": (1, 1e4), "b": (0, 2)},
                                    predict_at=["w=8192,D=1e12"])
    fig = plot_formula_fit(summary)
    width_ax, d_ax = fig.axes[1], fig.axes[2]
    assert width_ax.get_xticks().tolist() == [256, 512, 1024, 2048, 8192]
    fig.canvas.draw()
    assert [t.get_text() for t in width_ax.get_xticklabels()] == ["256", "512", "1024", "2048",
                                                                 "8192"]
    assert isinstance(width_ax.xaxis.get_minor_formatter(), mticker.NullFormatter)
    assert not isinstance(d_ax.xaxis.get_major_locator(), mticker.FixedLocator)  # 3 decades
