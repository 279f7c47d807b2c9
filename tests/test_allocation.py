"""Approaches 1/2/3 against closed forms, brute force, and Porian et al.'s isoFLOP data."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from scalebo.errors import FitError
from scalebo.fitting.allocation import (
    approach1,
    approach2,
    approach3,
    compute_law_from_chinchilla,
    compute_optimal,
    fit_power,
    isoflop_minimum,
)
from scalebo.fitting.robust import FitResult, FitStatus
from scalebo.laws import CHINCHILLA

HOFFMANN = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}


def _fit_of(params) -> FitResult:
    x = CHINCHILLA.from_natural(params)
    return FitResult(law=CHINCHILLA, x=x, fun=0.0, status=FitStatus.CONVERGED, message="",
                     nit=0, n_starts=1, n_converged=1, n_agree=1, huber_delta=1e-3, n_obs=0,
                     converged_x=x[None], converged_fun=np.zeros(1))


@pytest.mark.parametrize("C", [1e21, 5.76e23, 1e26])
def test_approach3_closed_form_equals_brute_force(C):
    fit = _fit_of(HOFFMANN)
    opt = compute_optimal(fit, C)

    def loss_at(logN):
        N = np.exp(logN)
        return fit.predict(np.array([[N, C / (6 * N)]]))[0]

    ref = minimize_scalar(loss_at, bounds=(np.log(1e6), np.log(1e15)), method="bounded",
                          options={"xatol": 1e-10})
    assert opt.N_opt == pytest.approx(np.exp(ref.x), rel=1e-6)
    assert opt.D_opt * opt.N_opt * 6 == pytest.approx(C, rel=1e-12)
    assert opt.loss == pytest.approx(ref.fun, rel=1e-12)
    # Hoffmann's exponents: a = beta/(alpha+beta) = 0.4516
    assert approach3(fit).n_opt.exponent == pytest.approx(0.28 / 0.62)
    assert compute_law_from_chinchilla(fit, np.array([C]))[0] == pytest.approx(opt.loss)


def test_approach1_recovers_planted_allocation():
    C = np.geomspace(1e18, 1e22, 9)
    N = 0.1 * C**0.5
    frontier = pd.DataFrame({"C": C, "N": N, "D": C / (6 * N)})
    law = approach1(frontier)
    assert law.n_opt.exponent == pytest.approx(0.5, abs=1e-12)
    assert law.d_opt.exponent == pytest.approx(0.5, abs=1e-12)
    assert law.at(1e24)["tokens_per_param"] == pytest.approx(1e24 / (6 * 0.01 * 1e24))


def test_isoflop_vertex_and_approach2_on_parabolas():
    rows = []
    for C in np.geomspace(1e17, 1e20, 6):
        n_star = 0.05 * C**0.5
        for N in n_star * np.geomspace(0.2, 5, 7):
            rows.append({"flops_budget": C, "N": N, "loss": 3 + 0.1 * np.log(N / n_star) ** 2})
    law = approach2(pd.DataFrame(rows))
    assert law.n_opt.exponent == pytest.approx(0.5, abs=1e-9)
    assert law.n_opt.coef == pytest.approx(0.05, rel=1e-6)
    n_star, l_star, inside = isoflop_minimum(np.array([1.0, 10.0, 100.0]),
                                             np.array([2.0, 1.0, 2.0]))
    assert (n_star, l_star, inside) == (pytest.approx(10.0), pytest.approx(1.0), True)


def test_approach2_reports_skipped_budgets_and_errors():
    df = pd.DataFrame({"flops_budget": [1.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0],
                       "N": [1, 2, 1, 2, 4, 1, 2, 4], "loss": [3, 2, 3, 2, 3, 3, 2.5, 3]})
    law = approach2(df)
    skipped = law.points[~law.points["used"]]
    assert skipped["C"].tolist() == [1.0] and "distinct N" in skipped["reason"].iloc[0]
    with pytest.raises(FitError):
        fit_power([1.0, 1.0], [2.0, 3.0])


def test_approach2_on_porian_tuned_isoflops(data_dir):
    """Porian et al. (2024): with tuned hyperparameters and no warmup/decay artefacts, the
    compute-optimal N grows as C^a with a ≈ 0.5 (Chinchilla-like)."""
    from scalebo.data.datasets import load_dataset

    table = load_dataset("porian_isoflop", data_dir=data_dir, dataset="rw", hparams="tuned",
                         warmup="short", decay="const", param_count="standard",
                         loss_type="val")
    law = approach2(table.frame)
    assert law.points["used"].all()
    assert 0.45 < law.n_opt.exponent < 0.58
    assert law.n_opt.exponent + law.d_opt.exponent == pytest.approx(1.0)


def test_approach3_out_of_float_range_is_a_fit_error_not_a_crash():
    """Tiny exponents and A << B put G = (αA/(βB))^(1/(α+β)) = 1e-600 below float range:
    approach 3 divided by zero (ZeroDivisionError), which killed a whole replay when one
    law-posterior sample of a 24-run grid fitted such a law. Now a FitError (which the law
    posterior counts as a failed sample); near the edge the path is still computed."""
    odd = {"E": 1.8, "A": 1e-3, "alpha": 0.005, "B": 1e3, "beta": 0.005}
    with pytest.raises(FitError, match="no finite compute-optimal path"):
        approach3(_fit_of(odd))
    with pytest.raises(FitError, match="no finite compute-optimal path"):
        approach3(_fit_of({**odd, "A": 1e3, "B": 1e-3}))  # G = 1e+600
    with pytest.raises(FitError):
        compute_optimal(_fit_of(odd), 1e24)
    # G = 1e-200: tiny but finite, the same closed form as before.
    edge = {**odd, "alpha": 0.015, "beta": 0.015}
    alloc = approach3(_fit_of(edge))
    G = (0.015 * 1e-3 / (0.015 * 1e3)) ** (1 / 0.03)
    assert alloc.n_opt.coef == pytest.approx(G * 6.0 ** -0.5, rel=1e-9)
    assert alloc.d_opt.coef == pytest.approx(6.0 ** -0.5 / G, rel=1e-9)
