"""Arguments of the Python API's analyses (a second notebook trial): one number where a list is
expected works, text budgets as the CLI reads them, lengths that disagree and counts that are
not whole are errors that say so, and fragility says when its spread means little."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import scalebo
from scalebo.analysis.fragility import fragility
from scalebo.bench.replay import MethodConfig
from scalebo.design import design_replay, make_pool, make_target, propose_batch, target_predictions
from scalebo.fitting.allocation_summary import allocation_summary
from scalebo.fitting.formula_bootstrap import bootstrap_formula
from scalebo.fitting.formula_fit import fit_formula
from scalebo.fitting.formula_summary import summarize_formula_fit
from scalebo.laws.formula import formula_law

T = dict(E=1.69, A=406.4, a=0.34, B=410.7, b=0.28)  # Hoffmann et al. (2022)
FORMULA = "E + A*N**(-a) + B*D**(-b)"
BOUNDS = dict(E=(0.0, 5.0), A=(1.0, 1e5), a=(0.05, 1.0), B=(1.0, 1e5), b=(0.05, 1.0))


def _loss(N, D):
    return T["E"] + T["A"] * N ** -T["a"] + T["B"] * D ** -T["b"]


def _cells(sizes: int = 5, lrs: int = 1, noise: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [(N, D, lr) for N in np.geomspace(5e7, 5e9, sizes) for D in np.geomspace(1e9, 2e11, 5)
            for lr in np.geomspace(1e-3, 4e-3, lrs)]
    frame = pd.DataFrame(rows, columns=["N", "D", "lr"])
    penalty = 0.02 * np.log2(frame["lr"] / 1e-3)
    frame["loss"] = (_loss(frame["N"], frame["D"]) + penalty) * rng.lognormal(0, noise, len(frame))
    return frame


def test_allocation_takes_one_compute_and_whole_resamples():
    runs = scalebo.load_runs(_cells())
    one = allocation_summary(runs, 3, predict=1e24)
    text = allocation_summary(runs, 3, predict=["1e24"])
    assert one.predictions() == text.predictions() and len(one.predictions()) == 1
    a = T["b"] / (T["a"] + T["b"])  # N* ∝ C^a for the true law
    assert one.estimates[0].law.n_opt.exponent == pytest.approx(a, rel=1e-3)
    with pytest.raises(ValueError, match=r"bootstrap must be a whole number of resamples >= 0, "
                                         r"got 10.5"):
        allocation_summary(runs, 3, bootstrap=10.5)
    with pytest.raises(ValueError, match=r"predict: computes must be finite FLOPs > 0, got -1"):
        allocation_summary(runs, 3, predict=[1e24, -1])


def test_fragility_checks_its_arguments_and_says_when_its_spread_means_little():
    frame = _cells(lrs=3)
    with pytest.raises(ValueError, match=r"target: computes must be finite FLOPs > 0"):
        fragility(scalebo.load_runs(frame), target=-1)
    with pytest.raises(ValueError, match=r"bootstrap must be a whole number"):
        fragility(scalebo.load_runs(frame), bootstrap=-3)
    with pytest.warns(UserWarning, match=r"several rows share an \(N, D\) cell and each is "
                                         r"fitted .* scalebo.load_runs\(frame\)"):
        raw = fragility(frame, n_jobs=1)
    cells = fragility(scalebo.load_runs(frame), n_jobs=1)
    assert raw.results[0].n_points == 75 and cells.results[0].n_points == 25
    assert cells.results[0].params["alpha"] == pytest.approx(T["a"], rel=1e-3)
    with pytest.warns(UserWarning, match=r"none of the 3 variants that leave out data could be "
                                         r"fitted .* the Huber δ variants' alone"):
        fragility(scalebo.load_runs(_cells(sizes=3)), n_jobs=1)


@pytest.fixture(scope="module")
def design():
    law = formula_law(FORMULA, ("N", "D"), BOUNDS)
    N, D = np.meshgrid(np.geomspace(1e6, 3e8, 8), np.geomspace(1e7, 3e10, 8))
    pool = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    pool["loss"] = _loss(pool.N, pool.D)
    target = pd.DataFrame({"N": [1e9, 1e10], "D": [1e11, 1e12]})
    return (law, make_pool(pool, law, "6*N*D", response="loss"), make_target(target, law),
            pool)


def test_design_reads_budgets_as_the_cli_does(design):
    law, pool, target, frame = design
    one = design_replay(pool, target, law, budgets="5%", method="random", n_starts=8)
    many = design_replay(pool, target, law, budgets=(0.05,), method="random", n_starts=8)
    assert one.order == many.order and [c.budget for c in one.checkpoints] == [0.05]
    done = frame.iloc[[0, 9, 18, 27, 36, 45, 54, 63]]
    X, y = done[["N", "D"]].to_numpy(), done["loss"].to_numpy()
    cost = 6 * X[:, 0] * X[:, 1]
    kw = dict(k=2, n_starts=8)
    assert ([p.row for p in propose_batch(pool, target, law, X, y, cost, "50%", **kw)]
            == [p.row for p in propose_batch(pool, target, law, X, y, cost, 0.5, **kw)])
    with pytest.raises(ValueError, match=r"one input row, response and cost each, got X_done 8, "
                                         r"y_done 8, cost_done 5"):
        propose_batch(pool, target, law, X, y, cost[:5], 0.5, **kw)
    with pytest.raises(ValueError, match=r"one input row per response, got 8 rows and 5"):
        target_predictions(law, X, y[:5], target)


def test_a_formula_fit_takes_one_point_and_checks_starts_and_its_bootstrap():
    frame = _cells()
    one = summarize_formula_fit(frame, FORMULA, bounds=BOUNDS, predict_at="N=1e10,D=2e11")
    assert one.points == ({"N": 1e10, "D": 2e11},)
    from scalebo.fitting.formula_plot import plot_formula_fit

    parity = plot_formula_fit(one).axes[0]  # the prediction is drawn, with its value
    level = next(ln for ln in parity.get_lines() if "prediction at" in str(ln.get_label()))
    assert level.get_ydata()[0] == pytest.approx(_loss(1e10, 2e11), rel=1e-3)
    assert level.get_label() == f"prediction at N=1e+10, D=2e+11: {level.get_ydata()[0]:.4g}"
    far = summarize_formula_fit(frame, FORMULA, bounds=BOUNDS, predict_at="N=1e3,D=1e4")
    parity = plot_formula_fit(far).axes[0]  # far from the data: named, not stretching the axes
    labels = parity.get_legend_handles_labels()[1]
    assert any(lab.startswith("prediction at N=1e+03, D=1e+04:") and lab.endswith(
        "(off this panel)") for lab in labels)
    assert parity.get_ylim()[1] < 10
    with pytest.raises(ValueError, match=r"n_starts must be a whole number >= 1, got 0"):
        summarize_formula_fit(frame, FORMULA, bounds=BOUNDS, n_starts=0)
    law = formula_law("a + b*x", ["x"], {"a": (-10, 10), "b": (-10, 10)})
    x = np.arange(1.0, 11.0)
    fit = fit_formula(law, x[:, None], 1 + 2 * x, residuals="natural")
    with pytest.raises(ValueError, match=r"least squares in natural units .* residuals="
                                         r"'natural'"):
        bootstrap_formula(fit, x[:, None], 1 + 2 * x, n_resamples=10)
    with pytest.raises(ValueError, match=r"X has 5 rows and y 5, the fit 10"):
        bootstrap_formula(fit, x[:5, None], 1 + 2 * x[:5], residuals="natural", n_resamples=10)


def test_a_method_config_names_the_setting_out_of_range():
    with pytest.raises(ValueError, match=r"^MethodConfig needs posterior_samples >= 0 \(got -1\)$"):
        MethodConfig(posterior_samples=-1)


def test_a_column_named_like_a_parameter_without_bounds_is_named():
    """A mixture-of-experts table with an ``E`` column (experts) and the formula
    ``E + A/N**alpha`` without bounds for E fitted E as an input, 'converged'."""
    frame = _cells().assign(E=lambda f: np.log2(f["N"]).round())  # a column of counts
    with pytest.warns(UserWarning, match=r"'E' \(column 'E'\) enters the formula as a bare "
                                         r"term that no parameter scales"):
        summarize_formula_fit(frame, "E + A/N**a", bounds={"A": (1, 1e5), "a": (0.05, 1)})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # E a parameter, or a scaled input: nothing to say
        summarize_formula_fit(frame.drop(columns="E"), FORMULA, bounds=BOUNDS)
        scaled = summarize_formula_fit(frame, "c*E + A/N**a",
                                       bounds={"c": (0, 1), "A": (1, 1e5), "a": (0.05, 1)})
    assert [str(w.message) for w in said] == [n for n in scaled.notes if "differ in" in n]
    # the law in E and N pools the table's token counts, and says so (0.4.18)
    assert [n for n in scaled.notes if "rows with the same E, N differ in D" in n]


def test_design_budgets_given_as_numbers_are_not_reread(design):
    law, pool, target, frame = design
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1.0 from "100%" was re-read and warned again
        design_replay(pool, target, law, budgets=[0.5, 1.0], method="random", n_starts=8)
    with pytest.raises(ValueError, match=r"budgets must be fractions of the pool's total cost "
                                         r"in \(0, 1\], got 5"):
        design_replay(pool, target, law, budgets=5, method="random", n_starts=8)
    from scalebo.design import grouped_design_replay

    frame2 = frame.assign(g=np.arange(len(frame)) % 2)
    pool2 = make_pool(frame2, law, "6*N*D", response="loss")
    by_text = grouped_design_replay(pool2, target, law, frame2["g"].to_numpy(), [0, 1],
                                    budgets="50%", method="random", n_starts=8)
    assert [c.budget for c in by_text.checkpoints] == [0.5]


def test_fragility_names_missing_columns_and_draws_a_figure_with_nothing_usable(tmp_path):
    from scalebo.analysis.fragility import plot_fragility

    with pytest.raises(ValueError, match=r"fragility needs columns N, D, loss"):
        fragility(_cells().rename(columns={"N": "params"}))
    report = fragility(scalebo.load_runs(_cells(sizes=2)), n_jobs=1)
    assert not report.usable.any()
    fig = plot_fragility(report, str(tmp_path / "f.png"))
    assert "none of the" in fig.axes[0].texts[0].get_text()
    with pytest.raises(ValueError, match=r"target: computes must be finite FLOPs > 0, got True"):
        fragility(scalebo.load_runs(_cells()), target=True)
