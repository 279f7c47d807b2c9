"""The law posterior on a grid whose single configurations are a large share of its compute.

A synthetic grid of 3 model sizes × 4 token counts × 4 learning rates (48 configurations;
its Pareto envelope costs 17 % of the acquirable grid's compute) is searched with the default
method to 10 % of its compute. The ``spent`` window then still excludes the costliest
configuration of the reference envelope (12.7 % of C_total), which moves the whole grid's
compute law at 1e25 FLOPs by about 20 %. A posterior that samples only inside the window
cannot know it: measured when written (seeds 0–9, S = 64), its 80 % / 95 % intervals covered
the reference in 0 / 0 of 10 replays; sampling every acquirable configuration (the default
since 0.3.3, ``MethodConfig.posterior_scope="grid"``) covered it in 9 / 10.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from scalebo.bench.budget_measure import method_surrogate, posterior_scope
from scalebo.bench.intervals import reference_losses
from scalebo.bench.method import DEFAULT_METHOD
from scalebo.bench.problems import problem_from_table
from scalebo.bench.replay import search_state
from scalebo.bench.synthetic import make_synthetic
from scalebo.laws import CHINCHILLA
from scalebo.search.law_posterior import law_posterior

SEEDS = range(6)
BUDGET = 0.10
AXES = dict(N=np.array([1e8, 4e8, 1.6e9]), D=np.array([4e9, 1.6e10, 6.4e10, 2.56e11]),
            lr=np.array([5e-4, 1e-3, 2e-3, 4e-3]), bs=np.array([256.0]))


@functools.cache
def _replay(seed: int) -> tuple:
    frame = make_synthetic(seed=seed, **AXES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = problem_from_table(frame[["N", "D", "lr", "loss"]], name="costly",
                                     axes=("lr",),
                                     chinchilla_starts=CHINCHILLA.start_grid()[::300])
    loop = search_state(problem, DEFAULT_METHOD, BUDGET, seed)
    return problem, loop


def _interval(seed: int, method) -> tuple[dict, float]:
    problem, loop = _replay(seed)
    scope, cap = posterior_scope(loop, method)
    post = law_posterior(problem.grid, loop.observed_indices, loop.observed_losses,
                         method_surrogate(method, problem, seed, fantasy=True),
                         laws=("compute",), scope=scope, cap=cap, n_samples=32,
                         targets=(1e25,), rng=seed)["compute"]
    return post.summary()["predicted_loss"]["1e+25"], reference_losses(problem, "compute")["1e+25"]


def test_the_window_leaves_a_costly_envelope_configuration_out():
    # What makes this grid a test: at 10 % the costliest reference envelope configuration
    # costs more than the search's window admits, and it is untrained.
    for seed in SEEDS:
        problem, loop = _replay(seed)
        cap = loop.window_cap()
        env = problem.envelope_idx
        assert problem.grid.cost[env].max() > cap, seed
        assert env[np.argmax(problem.grid.cost[env])] not in set(loop.observed_indices)


def test_the_default_posterior_covers_the_whole_grids_law():
    grid_scope, window_scope = [], []
    for seed in SEEDS:
        for method, out in ((DEFAULT_METHOD, grid_scope),
                            (DEFAULT_METHOD.with_(posterior_scope="fantasize"), window_scope)):
            q, ref = _interval(seed, method)
            out.append((q["q10"] <= ref <= q["q90"], q["q02.5"] <= ref <= q["q97.5"]))
    g, w = np.array(grid_scope, dtype=float), np.array(window_scope, dtype=float)
    # Here (S = 32, seeds 0-5) when written: 80 % / 95 % intervals cover in 4 / 5 of 6
    # replays sampling the grid (seeds 0 and 1 miss at 80 %, by 0.7 and 0.6 %), 0 / 0 of 6
    # sampling the window. Fails if the default goes back to the window.
    assert g[:, 1].sum() - w[:, 1].sum() >= 3, (g, w)
    assert g[:, 0].sum() - w[:, 0].sum() >= 2, (g, w)
    assert g[:, 1].mean() >= 3 / 6, g


def test_a_replay_records_the_whole_grid_posterior():
    # The replay's recorded interval is the whole grid's posterior (not the window's).
    from scalebo.bench.replay import replay

    seed = 0
    problem, _ = _replay(seed)
    method = DEFAULT_METHOD.with_(posterior_samples=32)
    rec = replay(problem, method, BUDGET, seed)
    recorded = rec.metrics[-1].law_posterior["compute"]["predicted_loss"]["1e+25"]
    q, _ = _interval(seed, DEFAULT_METHOD)  # a fresh GP: the replay's is warm-started
    w, _ = _interval(seed, DEFAULT_METHOD.with_(posterior_scope="fantasize"))
    assert all(recorded[k] == pytest.approx(q[k], rel=1e-4) for k in q), (recorded, q)
    assert any(recorded[k] != pytest.approx(w[k], rel=1e-2) for k in w), (recorded, w)
