"""Calibration of the law posterior on synthetic grids with a known law.

Forty grids (each with its own noise seed) are searched with the default method at 3 % and
10 % of their compute; the compute law's posterior at 1e25 FLOPs is scored against the
reference fit of the full grid. A calibrated posterior covers the reference in about 80 %
(q10–q90) and 95 % (q02.5–q97.5) of the replays; a collapsed one (zero width) in about
none, an uninformative one in all. Measured when this test was written (40 grids × 2
budgets, S = 32): the 80 % interval covered 0.74 of the 80 replays, the 95 % one 0.85
(3 %: 0.95 / 1.00, median width 32 %; 10 %: 0.53 / 0.70, width 6.2 % — honest at small
budgets, overconfident at larger ones, as on the real grids). Measured again with the 0.3.8
defaults (2026-12-05): 3 %: 0.925 / 0.95, width 21 %; 10 %: 0.425 / 0.60, width 2.9 %
(without the anchor run, 0.3.7's search: 0.875 / 1.00 and the same 10 % values). The 10 %
overconfidence is an open defect (issue 9's calibration part); the test holds the small
budget to nominal bands and the larger one to "not collapsed", so that it fails on a
regression of either, rather than pooling a calibrated and a miscalibrated budget.

The same replays score the noise-free posterior (``estimand="noise_free"``) against the law
the grid's noise-free losses give (the synthetic surface without its noise): the reference
posterior cannot cover it once the envelope's runs are trained (its interval is then 0
wide), the noise-free one keeps the trained runs' noise. Measured when written (same 80
replays, S = 32): the noise-free posterior's 80 / 95 % intervals covered the noise-free law
in 0.86 / 0.96 of them (3 %: 0.95 / 1.00, median width 28 %; 10 %: 0.78 / 0.93, width
5.6 %), the reference posterior's in 0.73 / 0.89 (10 %: 0.48 / 0.78, width 4.2 %).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import replace

import numpy as np

from scalebo.bench.budget_measure import method_surrogate, posterior_scope
from scalebo.bench.intervals import reference_losses
from scalebo.bench.method import DEFAULT_METHOD
from scalebo.bench.problems import problem_from_table
from scalebo.bench.replay import search_state
from scalebo.bench.synthetic import DEFAULT_LAW, make_synthetic
from scalebo.fitting.frontier import pareto_envelope
from scalebo.fitting.robust import fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW
from scalebo.search.law_posterior import law_posterior

N_GRIDS = 40
BUDGETS = (0.03, 0.10)


AXES = dict(N=5e7 * 2.0 ** np.arange(5), D=1e9 * 2.0 ** np.arange(5),
            lr=2.5e-4 * 2.0 ** np.arange(4), bs=[128, 256, 512])


@functools.cache
def _problem(seed: int):
    """Replay problem on grid ``seed`` (built once for both budgets)."""
    frame = make_synthetic(seed=seed, **AXES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="syn",
                                  chinchilla_starts=CHINCHILLA.start_grid()[::300])


@functools.cache
def _replay(seed: int, budget: float) -> tuple:
    """Problem, finished default search and its posterior's scope on grid ``seed``."""
    problem = _problem(seed)
    method = DEFAULT_METHOD
    loop = search_state(problem, method, budget, seed)
    return problem, loop, *posterior_scope(loop, method)


@functools.cache
def _quantiles(seed: int, budget: float, estimand: str) -> dict:
    problem, loop, scope, cap = _replay(seed, budget)
    post = law_posterior(problem.grid, loop.observed_indices, loop.observed_losses,
                         method_surrogate(DEFAULT_METHOD, problem, seed, fantasy=True),
                         laws=("compute",), scope=scope, cap=cap, n_samples=32,
                         targets=(1e25,), rng=seed, estimand=estimand)["compute"]
    return post.summary()["predicted_loss"]["1e+25"]


def _noise_free_law(seed: int) -> float:
    """The compute law at 1e25 FLOPs fitted on the envelope of grid ``seed`` without noise."""
    problem = _problem(seed)
    clean = make_synthetic(replace(DEFAULT_LAW, noise=0.0), seed=seed, **AXES)
    key = ["N", "D", "lr", "bs"]
    loss = problem.grid.configs[key].merge(clean[[*key, "loss"]], on=key, how="left")["loss"]
    cost, loss = problem.grid.cost, loss.to_numpy()
    keep = ~problem.grid.held_out
    env = pareto_envelope(cost[keep], loss[keep])
    fit = fit_law(COMPUTE_LAW, cost[keep][env][:, None], loss[keep][env])
    return float(fit.predict(np.array([[1e25]]))[0])


def _covered(seed: int, budget: float) -> tuple[bool, bool, float]:
    problem = _replay(seed, budget)[0]
    q = _quantiles(seed, budget, "reference")
    ref = reference_losses(problem, "compute")["1e+25"]
    return (bool(q["q10"] <= ref <= q["q90"]), bool(q["q02.5"] <= ref <= q["q97.5"]),
            (q["q90"] - q["q10"]) / ref)


def test_posterior_coverage_is_near_nominal_on_known_laws():
    small, large = (np.array([_covered(s, b) for s in range(N_GRIDS)]) for b in BUDGETS)
    # Small budget: binomial bands (about ±3 SD at n = 40) around the nominal levels; fails
    # for a collapsed (cov ≈ 0) or uninformative (cov80 = 1 and width ≫ the error) posterior.
    cov80, cov95 = small[:, 0].mean(), small[:, 1].mean()
    assert 0.61 <= cov80 <= 0.97, (cov80, cov95)
    assert 0.85 <= cov95 <= 1.0, (cov80, cov95)
    assert 0.01 < np.median(small[:, 2]) < 0.5, np.median(small[:, 2])
    # Larger budget: overconfident (measured 0.425 / 0.60), but not collapsed, and the
    # intervals still narrow as runs are added.
    cov80, cov95 = large[:, 0].mean(), large[:, 1].mean()
    assert 0.25 <= cov80 < cov95, (cov80, cov95)
    assert cov95 >= 0.45, (cov80, cov95)
    assert 0.001 < np.median(large[:, 2]) < np.median(small[:, 2])


def test_noise_free_posterior_covers_the_noise_free_law():
    rows = []
    for seed in range(N_GRIDS):
        truth = _noise_free_law(seed)
        for budget in BUDGETS:
            ref_q = _quantiles(seed, budget, "reference")
            q = _quantiles(seed, budget, "noise_free")
            rows.append((q["q10"] <= truth <= q["q90"], q["q02.5"] <= truth <= q["q97.5"],
                         ref_q["q10"] <= truth <= ref_q["q90"], budget))
    a = np.array(rows, dtype=float)
    late = a[:, 3] == BUDGETS[-1]
    cov80, cov95, ref80 = a[:, 0].mean(), a[:, 1].mean(), a[:, 2].mean()
    # Binomial bands (about ±3 SD at n = 80) around the nominal levels; the reference
    # posterior, which only knows the noisy runs' law, covers the noise-free law far less
    # often, most of all at the larger budget, where its interval has collapsed.
    assert 0.62 <= cov80 <= 0.97, (cov80, cov95, ref80)
    assert 0.80 <= cov95 <= 1.0, (cov80, cov95, ref80)
    # Paired at the larger budget: replays only the noise-free interval covers outnumber
    # those only the reference one covers (2026-12-06, 0.4.0: 8 against 1 of 40).
    only_nf = int(((a[:, 0] == 1) & (a[:, 2] == 0) & late).sum())
    only_ref = int(((a[:, 0] == 0) & (a[:, 2] == 1) & late).sum())
    assert only_nf >= only_ref + 6, (only_nf, only_ref)
