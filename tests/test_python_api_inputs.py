"""The Python API refuses what the CLI would refuse, with errors that say what was expected
(a new user's notebook trial: swapped DataFrame columns fitted silently, a Huber δ of −1
"fitted", a negative loss told to the search, repeated grid values, a budget of "5%")."""

import warnings

import numpy as np
import pandas as pd
import pytest

import scalebo
from scalebo.errors import SearchError
from scalebo.fitting.allocation import compute_optimal
from scalebo.fitting.bootstrap import BootstrapResult
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop

TRUTH = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}


def _chinchilla_points(noise: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    N, D = np.meshgrid(np.geomspace(5e7, 5e9, 5), np.geomspace(1e9, 2e11, 5))
    X = np.column_stack([N.ravel(), D.ravel()])
    t = TRUTH
    y = t["E"] + t["A"] / X[:, 0] ** t["alpha"] + t["B"] / X[:, 1] ** t["beta"]
    return X, y * rng.lognormal(0, noise, y.size)


def test_a_dataframe_is_read_by_column_name_not_position():
    law = scalebo.get_law("chinchilla")
    X, y = _chinchilla_points()
    swapped = pd.DataFrame({"D": X[:, 1], "N": X[:, 0]})
    fit = scalebo.fit_law(law, swapped, y)
    assert fit.params["alpha"] == pytest.approx(TRUTH["alpha"], rel=1e-3)  # not beta's 0.28
    assert fit.params["beta"] == pytest.approx(TRUTH["beta"], rel=1e-3)
    t = TRUTH
    truth = t["E"] + t["A"] / 1e9 ** t["alpha"] + t["B"] / 2e10 ** t["beta"]
    got = fit.predict(pd.DataFrame({"D": [2e10], "N": [1e9], "lr": [1e-3]}))
    assert got[0] == pytest.approx(truth, rel=1e-4)
    with pytest.raises(ValueError, match=r"matched to the law's inputs \['N', 'D'\] by name: "
                                         r"\['N'\] missing"):
        fit.predict(pd.DataFrame({"params": [1e9], "D": [2e10]}))


@pytest.mark.parametrize("delta", [0.0, -1.0, float("nan"), float("inf")])
def test_a_huber_delta_that_is_not_positive_is_refused(delta):
    X, y = _chinchilla_points()
    with pytest.raises(ValueError, match=r"huber_delta must be a finite number > 0"):
        scalebo.fit_law(scalebo.get_law("chinchilla"), X, y, huber_delta=delta)


def test_a_bad_input_names_its_position_and_variable():
    X, y = _chinchilla_points()
    X[3, 1] = -1.0
    with pytest.raises(ValueError, match=r"D at 0-based position 3 is -1.0"):
        scalebo.fit_law(scalebo.get_law("chinchilla"), X, y)


def _grid(**kw) -> Grid:
    return Grid.from_axes({"N": [1e8, 2e8, 4e8], "D": [2e9, 4e9, 8e9],
                           "lr": [1e-3, 3e-3]}, n_held_out_cells=0, **kw)


def test_the_search_takes_only_positive_finite_losses():
    loop = SearchLoop(_grid(), 0.5, None, acquisition="random", rng=0)
    i = loop.ask(1)[0]
    for bad in (-2.0, 0.0, float("nan")):
        with pytest.raises(SearchError, match=r"finite and > 0 \(nats\).*mark_failed"):
            loop.tell(i, bad)
    loop.tell(i, 3.0)
    assert loop.observed_losses.tolist() == [3.0]


def test_the_law_posterior_names_the_loss_it_cannot_take():
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.models.surrogates import GPSurrogate

    grid = _grid()
    idx = np.arange(0, 18, 2)
    y = 3.0 - 0.01 * np.arange(idx.size)
    y[5] = -0.1
    with pytest.raises(SearchError, match=r"y_obs\[5\], grid row 10, is -0.1"):
        law_posterior(grid, idx, y, GPSurrogate(rng=0), laws="compute", n_samples=4, rng=0)


def test_grid_axes_are_checked_as_a_grid_file_is():
    with pytest.raises(SearchError, match=r"axis 'N': items 1 and 2 repeat the value 100000000.0"):
        Grid.from_axes({"N": [1e8, 1e8, 1e9], "D": [2e9, 6e9]}, n_held_out_cells=0)
    with pytest.raises(SearchError, match=r"axis 'lr', item 2: 'le-3' is not a number"):
        Grid.from_axes({"N": [1e8], "D": [2e9], "lr": ["3e-3", "le-3"]}, n_held_out_cells=0)
    text = Grid.from_axes({"N": np.array([1e8, 1e9]), "D": 2e9, "lr": ["1e-3", "3e-3"]},
                          n_held_out_cells=0)
    assert text.n_configs == 4 and "lr" not in text.categorical_axes
    # a run's lr given as a number is on the grid whose axis was written as text
    runs = pd.DataFrame({"N": [1e9], "D": [2e9], "lr": [0.001]})
    assert text.index_of(runs).tolist() == [2]
    assert Grid.from_axes({"N": [1e8], "D": [2e9], "opt": ["adam", "sgd"]},
                          n_held_out_cells=0).categorical_axes == ("opt",)


def test_a_budget_fraction_is_a_number_and_one_that_fits_nothing_warns():
    grid = _grid()
    with pytest.raises(SearchError, match=r"got '5%' \(parse_budget\('5%'\).fraction"):
        SearchLoop(grid, "5%", None, acquisition="random")
    with pytest.raises(SearchError, match=r"for 5 % write 0.05"):
        SearchLoop(grid, 5, None, acquisition="random")
    cheapest = grid.cost.min() / grid.budget_total
    with pytest.warns(UserWarning, match=r"fits no configuration: the cheapest costs 1.2e\+18"):
        loop = SearchLoop(grid, cheapest / 2, None, acquisition="random")
    assert loop.ask(1) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SearchLoop(grid, cheapest, None, acquisition="random")  # exactly the cheapest fits


def test_compute_optimal_checks_its_compute_and_the_fit():
    law = scalebo.get_law("chinchilla")
    X, y = _chinchilla_points()
    fit = scalebo.fit_law(law, X, y)
    for bad in (0.0, -1e24, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"C must be one compute in FLOPs"):
            compute_optimal(fit, bad)
    # the analytic optimum of the true law (Hoffmann et al. 2022, eq. 4)
    t = TRUTH
    G = (t["alpha"] * t["A"] / (t["beta"] * t["B"])) ** (1 / (t["alpha"] + t["beta"]))
    a = t["beta"] / (t["alpha"] + t["beta"])
    assert compute_optimal(fit, 1e24).N_opt == pytest.approx(G * (1e24 / 6) ** a, rel=1e-3)
    Xd = np.column_stack([np.geomspace(1e8, 1e10, 6), 20 * np.geomspace(1e8, 1e10, 6)])
    yd = t["E"] + t["A"] / Xd[:, 0] ** t["alpha"] + t["B"] / Xd[:, 1] ** t["beta"]
    weak = scalebo.fit_law(law, Xd, yd)
    assert not weak.success  # D = 20 N on every run: N and D cannot be told apart
    with pytest.warns(UserWarning, match=r"the fit is unidentified: its compute-optimal"):
        compute_optimal(weak, 1e24)
    with pytest.raises(ValueError, match=r"needs a fit of L\(N, D\)"):
        compute_optimal(scalebo.fit_law(scalebo.get_law("compute"), X[:, :1] * 6e9, y), 1e24)


def test_fit_summary_takes_a_run_table_one_compute_and_whole_resamples():
    X, y = _chinchilla_points(noise=0.003)
    frame = pd.DataFrame({"N": X[:, 0], "D": X[:, 1], "loss": y})
    with pytest.raises(TypeError, match=r"takes a RunTable \(scalebo.load_runs"):
        scalebo.fit_summary(frame, "chinchilla")
    runs = scalebo.load_runs(frame)
    with pytest.raises(ValueError, match=r"whole number of resamples >= 0, got 10.5"):
        scalebo.fit_summary(runs, "chinchilla", bootstrap=10.5)
    one = scalebo.fit_summary(runs, "chinchilla", predict=1e24)
    many = scalebo.fit_summary(runs, "chinchilla", predict=[1e24])
    assert one.predictions == many.predictions and len(one.predictions) == 1
    shown = repr(one)
    assert shown.startswith("FitSummary(FitResult(law='chinchilla', status='converged', E=")
    assert "points=25 of 25 runs" in shown and len(shown) < 400


def test_a_bootstrap_without_one_fitted_resample_says_it_has_no_interval():
    X, y = _chinchilla_points()
    fit = scalebo.fit_law(scalebo.get_law("chinchilla"), X, y)
    boot = BootstrapResult(law=fit.law, estimate=fit, samples=np.empty((0, 5)),
                           confidence_level=0.95, n_resamples=20, n_failed=20, seed=0)
    assert boot.failure_note().startswith("all 20 bootstrap resamples failed: the chinchilla "
                                          "law has no intervals")


def test_an_off_grid_value_is_shown_to_the_digit_that_differs():
    grid = Grid.from_axes({"N": [125594000.0, 5e8], "D": [2e9, 4e9]}, n_held_out_cells=0)
    runs = pd.DataFrame({"N": [125590000.0], "D": [2e9]})
    with pytest.raises(SearchError, match=r"N 125590000 is not a grid value \(nearest "
                                          r"125594000, 0.0032 % away; values match within "
                                          r"1e-06 relative\)"):
        grid.index_of(runs)


def test_grid_axes_keep_the_types_given():
    grid = Grid.from_axes({"N": [1e8, 2e8], "D": np.array([1e9, 2e9]), "layers": [12, 24],
                           "bias": [True, False], "lr": ["1e-3", "3e-3"]}, n_held_out_cells=0)
    assert grid.configs["layers"].dtype == np.int64 and grid.configs["bias"].dtype == bool
    assert grid.configs["lr"].tolist()[:2] == [1e-3, 3e-3] and grid.categorical_axes == ("bias",)
    loop = SearchLoop(grid, np.float32(0.5), None, acquisition="random")  # numpy numbers
    assert SearchLoop(grid, np.int64(1), None, acquisition="random").budget == grid.budget_total
    assert loop.budget == pytest.approx(0.5 * grid.budget_total)


def test_a_formula_fit_in_natural_units_refuses_a_delta_that_is_not_positive():
    from scalebo.fitting.formula_fit import fit_formula
    from scalebo.laws.formula import formula_law

    law = formula_law("a + b*x", ["x"], {"a": (-10, 10), "b": (-10, 10)})
    x = np.arange(1.0, 9.0)
    for delta in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"huber_delta must be > 0"):
            fit_formula(law, x[:, None], 1 + 2 * x, residuals="natural", huber_delta=delta)
    fit = fit_formula(law, x[:, None], 1 + 2 * x, residuals="natural")
    assert fit.params["b"] == pytest.approx(2.0, rel=1e-6)
