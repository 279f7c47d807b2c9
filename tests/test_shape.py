"""Width/depth law fit and compute-optimal shape on a synthetic known law."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from scalebo.fit import FitStatus
from scalebo.laws import WIDTH_DEPTH
from scalebo.shape import ShapeSpec, fit_width_depth, optimal_shape

TRUE = {"E": 1.8, "A": 40.0, "alpha": 0.6, "B": 1.5, "beta": 0.9, "G": 300.0, "gamma": 0.3}


def _truth(w, d, D):
    return (TRUE["E"] + TRUE["A"] * w ** -TRUE["alpha"] + TRUE["B"] * d ** -TRUE["beta"]
            + TRUE["G"] * D ** -TRUE["gamma"])


class _Known:
    """A FitResult stand-in with the true parameters (optimal_shape only calls predict)."""

    law = WIDTH_DEPTH
    x = WIDTH_DEPTH.from_natural(TRUE)

    def predict(self, X):
        return WIDTH_DEPTH.predict(self.x, X)


def test_shape_spec_counts():
    spec = ShapeSpec(vocab=1000)
    assert spec.n_params(64, 2) == 12 * 2 * 64 * 64 + 1000 * 64
    assert ShapeSpec(vocab=1000, embeddings=False).n_params(64, 2) == 12 * 2 * 64 * 64
    assert spec.flops_per_token(64, 2) == 6 * spec.n_params(64, 2)
    no_embed = ShapeSpec(vocab=1000, embeddings=False, convention="6N_no_embed")
    assert no_embed.flops_per_token(64, 2) == 6 * 12 * 2 * 64 * 64


def test_fit_width_depth_recovers_a_noise_free_law():
    w, d, D = np.meshgrid([256.0, 512, 1024, 2048, 4096], [2.0, 6, 12, 24, 48],
                          [1e9, 1e10, 1e11, 1e12], indexing="ij")
    frame = pd.DataFrame({"width": w.ravel(), "depth": d.ravel(), "D": D.ravel()})
    frame["loss"] = _truth(frame["width"], frame["depth"], frame["D"])
    fit = fit_width_depth(frame)
    assert fit.status == FitStatus.CONVERGED
    for name, value in TRUE.items():
        assert fit.params[name] == pytest.approx(value, rel=1e-4), name


def test_optimal_shape_multiple_of_64_matches_brute_force():
    C, spec = 1e21, ShapeSpec()
    got = optimal_shape(_Known(), C, spec=spec, depth_range=(1, 64), width_range=(64, 8192))
    best = (np.inf, None, None)
    for width in range(64, 8192 + 1, 64):  # independent loop with the explicit formula
        for depth in range(1, 65):
            N = 12 * depth * width**2 + 50304 * width
            loss = _truth(width, depth, C / (6 * N))
            if loss < best[0]:
                best = (loss, width, depth)
    assert (got.width, got.depth) == (best[1], best[2])
    assert got.loss == pytest.approx(best[0], rel=1e-12)
    assert got.N == 12 * got.depth * got.width**2 + 50304 * got.width
    assert got.D * 6 * got.N == pytest.approx(C, rel=1e-12)
    assert got.tokens_per_param == pytest.approx(got.D / got.N)
    assert got.n_candidates == 128 * 64


def test_optimal_shape_continuous_width_matches_scipy():
    C = 1e22
    got = optimal_shape(_Known(), C, width_multiple=None, depth_range=(1, 64))
    best = (np.inf, None, None)
    for depth in range(1, 65):
        def f(logw, depth=depth):
            w = np.exp(logw)
            return _truth(w, depth, C / (6 * (12 * depth * w * w + 50304 * w)))
        res = minimize_scalar(f, bounds=(np.log(64), np.log(65536)), method="bounded",
                              options={"xatol": 1e-12})
        if res.fun < best[0]:
            best = (res.fun, np.exp(res.x), depth)
    assert got.depth == best[2]
    assert got.width == pytest.approx(best[1], rel=1e-5)
    assert got.loss == pytest.approx(best[0], rel=1e-12, abs=1e-12)


def test_bigger_budget_gives_bigger_model_and_more_tokens():
    small = optimal_shape(_Known(), 1e20, depth_range=(1, 64))
    large = optimal_shape(_Known(), 1e23, depth_range=(1, 64))
    assert large.N > small.N and large.D > small.D and large.loss < small.loss
    with pytest.raises(ValueError, match="≥ 1 token"):
        optimal_shape(_Known(), 1.0, depth_range=(1, 2))
