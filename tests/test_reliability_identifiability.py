"""Issue 11: a law the inputs cannot identify is reported as such, by fit_law and fit_batch
alike (hand-made data with known distinct points)."""

import itertools

import numpy as np
import pandas as pd
import pytest

from scalebo.fitting.batch import fit_batch
from scalebo.fitting.identifiability import distinct_points, identification_problem
from scalebo.fitting.robust import FitStatus, fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW

#: A small Chinchilla start grid (72 starts) to keep the fits fast.
STARTS = np.array(list(itertools.product((0.0, 1.0), (0.0, 5.0, 10.0), (0.2, 0.5),
                                         (0.0, 5.0, 10.0), (0.2, 0.5))))
TRUE = {"E": 1.9, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.37}


def _chinchilla(N, D):
    return TRUE["E"] + TRUE["A"] * N ** -TRUE["alpha"] + TRUE["B"] * D ** -TRUE["beta"]


def _compute(C):
    return 1.7 + 30.0 * C ** -0.05


def _grid(Ns, Ds):
    X = np.array([(n, d) for n in Ns for d in Ds], dtype=np.float64)
    return X, _chinchilla(X[:, 0], X[:, 1])


def test_six_runs_at_one_compute_are_unidentified_not_converged():
    C = np.full(6, 1e20)
    y = _compute(C) * np.exp(0.01 * np.random.default_rng(0).standard_normal(6))
    fit = fit_law(COMPUTE_LAW, C[:, None], y)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert not fit.success
    assert "6 runs but only 1 distinct value of C; the law has 3 parameters" in fit.message
    assert fit.to_dict()["status"] == "unidentified"
    assert np.all(np.isfinite(fit.x))  # an estimate is still returned (one of many)


def test_two_computes_are_still_too_few_and_three_are_enough():
    C = np.repeat([1e19, 1e20], 3)
    fit = fit_law(COMPUTE_LAW, C[:, None], _compute(C))
    assert fit.status is FitStatus.UNIDENTIFIED
    assert "only 2 distinct values of C" in fit.message
    C3 = np.geomspace(1e18, 1e22, 6)
    assert fit_law(COMPUTE_LAW, C3[:, None], _compute(C3)).status is FitStatus.CONVERGED


def test_chinchilla_with_four_distinct_points_is_unidentified():
    X, y = _grid([1e8, 4e8], [2e9, 8e9])
    X, y = np.vstack([X, X]), np.concatenate([y, y * 1.001])  # 8 runs, 4 distinct points
    fit = fit_law(CHINCHILLA, X, y, starts=STARTS)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert "8 runs but only 4 distinct (N, D) points; the law has 5 parameters" in fit.message


def test_chinchilla_with_two_model_sizes_cannot_separate_e_from_the_n_term():
    X, y = _grid([1e8, 4e8], [1e9, 2e9, 4e9, 8e9])  # 8 distinct points, 2 values of N
    fit = fit_law(CHINCHILLA, X, y, starts=STARTS)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert "only 2 distinct values of N" in fit.message
    X3, y3 = _grid([1e8, 4e8, 1.6e9], [1e9, 2e9, 4e9])
    assert identification_problem(CHINCHILLA, X3) == ""
    assert fit_law(CHINCHILLA, X3, y3, starts=STARTS).success


@pytest.mark.parametrize("b, shown", [(1.0, "D ∝ N^1 at every point"),
                                      (0.8, "D ∝ N^0.8 at every point")])
def test_chinchilla_on_a_diagonal_grid_is_not_identified(b, shown):
    # D = c·N^b: B/D^β is a second power of N and the two terms can swap roles.
    N = np.geomspace(5e7, 3e9, 8)
    X = np.column_stack([N, 20 * 1e8 ** (1 - b) * N**b])
    y = 1.69 + 406.4 / X[:, 0] ** 0.34 + 410.7 / X[:, 1] ** 0.28
    fit = fit_law(CHINCHILLA, X, y, starts=STARTS)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert shown in fit.message and "can trade roles" in fit.message
    # the swap the message names: the same losses from other parameters
    E, A, alpha, B, beta = 1.69, 406.4, 0.34, 410.7, 0.28
    c = X[0, 1] / X[0, 0] ** b
    A2, alpha2 = B * c**-beta, b * beta
    B2, beta2 = A * c ** (alpha / b), alpha / b
    np.testing.assert_allclose(E + A2 / X[:, 0] ** alpha2 + B2 / X[:, 1] ** beta2, y, rtol=1e-12)


def test_a_term_whose_variable_barely_varies_is_not_identified():
    # Three "sizes" 0.3 % apart (a mixture-of-experts table's total parameters): the fit
    # converged with E and A at their bounds and called it a law; the N term over such a
    # range is a straight line whose exponent trades with A and E.
    X, y = _grid([2.1506e9, 2.1552e9, 2.1562e9], [2e9, 4e9, 8e9, 2e10])
    fit = fit_law(CHINCHILLA, X, y, starts=STARTS)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert ("12 runs but N spans only 0.26 % (2.151e+09 to 2.156e+09); its term A·N^-alpha "
            "needs a factor of at least 1.2") in fit.message
    # the same for the compute law on computes 15 % apart; a factor 1.3 passes
    assert "C spans only 15 %" in identification_problem(COMPUTE_LAW, [[1e20], [1.1e20],
                                                                       [1.15e20]])
    assert identification_problem(COMPUTE_LAW, [[1e20], [1.1e20], [1.3e20]]) == ""
    X3, _ = _grid([1e8, 1.25e8, 1.6e8], [1e9, 2e9, 4e9])  # a factor 1.6 of N: enough
    assert identification_problem(CHINCHILLA, X3) == ""


def test_two_token_counts_per_model_size_identify_chinchilla():
    N = np.repeat(np.geomspace(5e7, 3e9, 6), 2)
    D = N * np.tile([20.0, 80.0], 6)
    assert identification_problem(CHINCHILLA, np.column_stack([N, D])) == ""
    # ... unless the weights leave only one of them per size
    w = np.tile([1.0, 0.0], 6)
    assert "D ∝ N^1" in identification_problem(CHINCHILLA, np.column_stack([N, D]), w)


def test_rows_of_zero_weight_are_not_distinct_points():
    C = np.array([1e18, 1e19, 1e20, 1e21, 1e21, 1e21])
    w = np.array([0.0, 0.0, 1.0, 1.0, 2.0, 1.0])
    fit = fit_law(COMPUTE_LAW, C[:, None], _compute(C), sample_weight=w)
    assert fit.status is FitStatus.UNIDENTIFIED
    assert "4 runs but only 2 distinct values of C" in fit.message
    assert distinct_points(C[w > 0, None]) == 2


def test_fit_batch_agrees_with_fit_law_on_identifiability():
    C = np.array([1e18, 1e19, 1e20, 1e21, 1e21, 1e21, 1e21])
    y = _compute(C)
    X = C[:, None]
    w = np.array([
        [1, 1, 1, 1, 1, 1, 1],   # identified: 4 distinct computes
        [0, 0, 0, 1, 1, 1, 1],   # 4 runs at one compute
        [0, 1, 0, 1, 1, 0, 0],   # 3 runs, 2 distinct computes
        [0, 0, 0, 0, 0, 1, 1],   # 2 runs: fewer rows than parameters, no estimate
    ], dtype=np.float64)
    starts = COMPUTE_LAW.start_grid(COMPUTE_LAW.prepare(X))
    batch = fit_batch(COMPUTE_LAW, X, np.tile(y, (4, 1)), starts, sample_weight=w)
    assert batch.success.tolist() == [True, False, False, False]
    assert batch.n_failed == 3
    assert batch[3] is None and "only 2 observations" in batch.errors[3]
    for s in range(3):
        rows = w[s] > 0
        single = fit_law(COMPUTE_LAW, X[rows], y[rows], starts=starts)
        assert batch[s].status is single.status, s
        assert batch[s].message.split(" (optimizer")[0] == single.message.split(" (optimizer")[0]
        assert batch.errors[s] == ""
    assert batch[1].status is FitStatus.UNIDENTIFIED
    assert "4 runs but only 1 distinct value of C" in batch[1].message


def test_fit_summary_warns_with_the_reason(tmp_path):
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    # Six learning rates of one model at one token count: six runs, one compute.
    frame = pd.DataFrame({"N": [1e8] * 6, "D": [2e9] * 6, "lr": np.geomspace(1e-4, 3e-3, 6),
                          "loss": 3.0 + 0.01 * np.arange(6)})
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    table = load_runs(path)
    with pytest.warns(RuntimeWarning, match="6 runs but only 1 distinct value of C"):
        summary = fit_summary(table, law="compute", frontier="all")
    assert summary.fit.status is FitStatus.UNIDENTIFIED
    assert not summary.fit.success


@pytest.mark.parametrize("law", [COMPUTE_LAW, CHINCHILLA])
def test_identified_inputs_have_no_problem(law):
    X = np.geomspace(1e18, 1e22, 9)[:, None] if law is COMPUTE_LAW else _grid(
        [1e8, 2e8, 4e8], [1e9, 2e9, 4e9])[0]
    assert identification_problem(law, X) == ""


def test_as_many_points_as_parameters_is_exact_and_says_so():
    """Three computes for L(C) = E + A/C^alpha: the fit interpolates the truth (objective
    ~0), which is not a tested law; the status stays converged (it is identified) but the
    message says it, and the bootstrap keeps only resamples holding all three points."""
    from scalebo.fitting.bootstrap import bootstrap_fit
    from scalebo.fitting.identifiability import exact_fit_note

    C = np.array([1e18, 1e20, 1e22])
    y = _compute(C)
    fit = fit_law(COMPUTE_LAW, C[:, None], y)
    assert fit.status is FitStatus.CONVERGED
    assert ("exactly determined: 3 distinct values of C for 3 parameters, so the law passes "
            "through every point") in fit.message
    assert fit.params["E"] == pytest.approx(1.7, rel=1e-4)
    assert fit.params["alpha"] == pytest.approx(0.05, rel=1e-3)
    assert exact_fit_note(COMPUTE_LAW, np.geomspace(1e18, 1e22, 4)[:, None]) == ""
    assert "exactly" not in fit_law(COMPUTE_LAW, np.geomspace(1e18, 1e22, 4)[:, None],
                                    _compute(np.geomspace(1e18, 1e22, 4))).message
    boot = bootstrap_fit(fit, C[:, None], y, n_resamples=60, rng=3)
    counts = np.random.default_rng(3).multinomial(3, np.full(3, 1 / 3), size=60)
    missing = int(np.sum((counts == 0).any(axis=1)))  # resamples that miss a point
    assert boot.n_unidentified == missing and 0 < missing < 60
    assert boot.n_failed >= missing and len(boot.samples) == 60 - boot.n_failed
    lo, hi = boot.intervals["E"]
    assert hi - lo < 1e-3 * fit.params["E"]  # every identified resample is the whole data


def test_bootstrap_of_an_unidentified_law_has_no_interval_and_no_crash():
    """Two computes for a 3-parameter law: no resample can identify it; the bootstrap says
    so (every replicate unidentified) instead of an IndexError from an empty percentile."""
    from scalebo.fitting.bootstrap import bootstrap_fit

    C = np.repeat([1e19, 1e20], 3)
    y = _compute(C) * np.exp(0.002 * np.random.default_rng(1).standard_normal(6))
    fit = fit_law(COMPUTE_LAW, C[:, None], y)
    boot = bootstrap_fit(fit, C[:, None], y, n_resamples=40, rng=0)
    assert boot.n_unidentified == boot.n_failed == 40 and len(boot.samples) == 0
    assert boot.intervals == {} and boot.standard_error == {}
    lo, hi = boot.predict_interval(np.array([[1e22], [1e23]]))
    assert lo.shape == hi.shape == (2,) and np.isnan(lo).all() and np.isnan(hi).all()
    assert boot.to_dict()["intervals"] == {} and boot.to_dict()["n_unidentified"] == 40


def test_exact_fit_with_repeats_and_formula_fits_say_it_too():
    """Six runs at three computes: the law passes through each compute's centre, not every
    point (the note once claimed so); a formula law gets the same note as a built-in one."""
    from scalebo.fitting.formula_fit import fit_formula
    from scalebo.laws.formula import formula_law

    C = np.repeat([1e18, 1e20, 1e22], 2)
    y = _compute(C) * np.exp(np.tile([0.01, -0.01], 3))
    fit = fit_law(COMPUTE_LAW, C[:, None], y)
    assert "passes through each point's centre and its residuals measure only the scatter " \
           "among the 6 runs' repeats" in fit.message
    assert "every point" not in fit.message
    C3 = C[::2]
    law = formula_law("E + A*C**(-alpha)", ["C"], {"E": (0.0, 10.0), "A": (1.0, 1e3),
                                                    "alpha": (0.0, 1.0)})
    formula = fit_formula(law, C3[:, None], _compute(C3))
    assert formula.status is FitStatus.CONVERGED
    assert "exactly determined: 3 distinct values of C for 3 parameters, so the law passes " \
           "through every point" in formula.message


def test_a_formula_whose_parameters_the_points_cannot_tell_apart_is_unidentified():
    """A README trial: c0 + A·V^b·P^e·D^g on runs at one V and one P was 'converged' (1 of
    41 starts agreeing, R² 0.996) and predicted 153.9 for a response between -5 and -0.5."""
    import pandas as pd

    from scalebo.fitting.formula_summary import summarize_formula_fit

    rng = np.random.default_rng(0)
    D = np.geomspace(1e9, 1e11, 20)
    bounds = {"c0": (-100, 100), "A": (-1e4, 1e4), "b": (-5, 5), "e": (-5, 5), "g": (-5, 5)}
    formula = "c0 + A*V**b*P**e*D**g"

    def frame(V, P):
        out = pd.DataFrame({"V": V, "P": P, "D": np.tile(D, 2)})
        out["y"] = -1 + 2e3 * out.V ** -0.3 * out.P ** -0.1 * out.D ** -0.2 + rng.normal(
            0, 1e-3, len(out))
        return out

    one = summarize_formula_fit(frame(32000.0, 1e8), formula, bounds=bounds, response="y",
                                residuals="natural")
    assert str(one.fit.status) == "unidentified"
    assert "(V, P take one value)" in one.fit.message
    varied = frame(np.repeat([32000.0, 64000.0], 20), np.repeat([1e8, 3e8], 20))  # V ∝ P
    assert str(summarize_formula_fit(varied, formula, bounds=bounds, response="y",
                                     residuals="natural").fit.status) == "unidentified"
    grid = frame(np.tile(np.repeat([32000.0, 64000.0], 10), 2), np.tile([1e8, 3e8], 20))
    ok = summarize_formula_fit(grid, formula, bounds=bounds, response="y", residuals="natural")
    assert str(ok.fit.status) in ("converged", "bound hit")


def test_the_formula_check_skips_draws_that_say_nothing_and_reads_every_row():
    """A review: draws where a parameter has no effect (a saturated sigmoid, a maximum whose
    switch lies outside the data) counted as singular, a non-finite draw ended the check, and
    400 sampled rows of 5,000 lost the 5 rows that identify an indicator's coefficient."""
    import pandas as pd

    from scalebo.fitting.formula_summary import summarize_formula_fit

    C = np.geomspace(1e15, 1e24, 30)
    kink = summarize_formula_fit(pd.DataFrame({"C": C, "loss": np.maximum(1.7, 1e3 * C**-0.13)}),
                                 "maximum(E, A*C**(-alpha))", residuals="natural",
                                 bounds={"E": (0.1, 10), "A": (1e-3, 1e8), "alpha": (0, 2)})
    assert str(kink.fit.status) == "converged"
    assert kink.fit.params["alpha"] == pytest.approx(0.13, rel=1e-4)
    L = np.linspace(2.0, 4.2, 30)
    sig = summarize_formula_fit(pd.DataFrame({"loss": L, "err": 0.6 / (1 + np.exp(-3 * (L - 3)))
                                              + 0.2}), "a/(1 + exp(-k*(loss - L0))) + b",
                                bounds={"a": (0, 1), "k": (0, 100), "L0": (0, 10), "b": (0, 1)},
                                response="err")
    assert str(sig.fit.status) == "converged"
    x = np.linspace(1, 10, 30)
    product = summarize_formula_fit(pd.DataFrame({"x": x, "y": 6 * x + np.sqrt(x + 2)}),
                                    "A*B*x + sqrt(x - c)", response="y", residuals="natural",
                                    bounds={"A": (1, 10), "B": (1, 10), "c": (-5, 5)})
    assert str(product.fit.status) == "unidentified" and "A, B" in product.fit.message
    rng = np.random.default_rng(0)
    N = np.geomspace(1e7, 1e10, 5000)
    f = np.zeros(N.size)
    f[rng.choice(N.size, 5, replace=False)] = 1.0
    few = summarize_formula_fit(pd.DataFrame({"N": N, "f": f, "y": 1.7 + 400 * N**-0.3 + 0.1 * f}),
                                "E + A*N**(-a) + d*f", response="y", residuals="natural",
                                bounds={"E": (0, 5), "A": (1, 1e4), "a": (0.05, 1), "d": (-1, 1)})
    assert str(few.fit.status) == "converged"


def test_a_term_whose_variable_takes_three_values_is_exactly_determined_and_says_so():
    """3 N × 5 D with an N-profile that is no power law (a sum of two): Chinchilla's N-term and E
    still pass through the three N values exactly (objective ~0 beside the D-term's exact
    fit), so the fit says the term's shape is untested; a fourth N leaves a residual and no
    note."""
    Ds = np.geomspace(2e9, 3e10, 5)

    def loss(N, D):
        return 1.9 + 30.0 / N ** 0.15 + 3e4 / N ** 0.6 + TRUE["B"] * D ** -TRUE["beta"]

    notes = {}
    for Ns in ((1e8, 3e8, 1e9), (1e8, 3e8, 1e9, 3e9)):
        X, _ = _grid(Ns, Ds)
        fit = fit_law(CHINCHILLA, X, loss(X[:, 0], X[:, 1]), starts=STARTS)
        notes[len(Ns)] = ("N takes only 3 values: its term A·N^-alpha and E pass through "
                          "them exactly" in fit.message, fit.fun)
    assert notes[3][0] and notes[3][1] < 1e-12
    assert not notes[4][0] and notes[4][1] > 1e-6
    # 3 × 3: both terms pass through their levels, and both are named
    X, _ = _grid((1e8, 3e8, 1e9), Ds[[0, 2, 4]])
    both = fit_law(CHINCHILLA, X, loss(X[:, 0], X[:, 1]), starts=STARTS)
    assert "N takes only 3 values" in both.message and "and D takes only 3 values" in both.message
    # levels no power term passes through (equal steps in log N: a log) end the fit at a
    # bound, which says the runs did test the shape: no note
    X, _ = _grid((1e8, 1e9, 1e10), Ds)
    log_n = fit_law(CHINCHILLA, X, 1.9 + 0.2 * np.log(1e11 / X[:, 0])
                    + TRUE["B"] * X[:, 1] ** -TRUE["beta"], starts=STARTS)
    assert log_n.status is not FitStatus.CONVERGED and "takes only 3" not in log_n.message
