"""Width/depth law fit and compute-optimal shape on a synthetic known law."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from scalebo.analysis.shape import ShapeSpec, fit_width_depth, optimal_shape
from scalebo.fitting.robust import FitStatus
from scalebo.laws import WIDTH_DEPTH

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


# At 1e21 FLOPs the known law's optimum is 5056 × 26 (multiples of 64; 5069 × 26 with
# continuous widths): interior to depth 1–64 and width 64–65536, outside the boxes below.
C_EDGE = 1e21


@pytest.mark.parametrize("width_multiple", [64, None])
def test_interior_optimum_has_no_bound_and_no_warning(width_multiple):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = optimal_shape(_Known(), C_EDGE, depth_range=(1, 64), width_multiple=width_multiple)
    assert got.at_bound == ()
    assert 1 < got.depth < 64 and 64 < got.width < 65536
    assert got.to_dict()["at_bound"] == []


@pytest.mark.parametrize("width_multiple", [64, None])
@pytest.mark.parametrize(("depth_range", "edge", "text"), [
    ((1, 16), "depth_max", r"depth_max: depth = 16 at the upper end of depth_range = \(1, 16\);"
                           r" widen depth_range \(raise depth_range\[1\]\)"),
    ((40, 64), "depth_min", r"depth_min: depth = 40 at the lower end of depth_range = "
                            r"\(40, 64\); widen depth_range \(lower depth_range\[0\]\)"),
])
def test_optimum_on_a_depth_bound_is_flagged_and_warned(depth_range, edge, text,
                                                        width_multiple):
    with pytest.warns(UserWarning, match=text):
        got = optimal_shape(_Known(), C_EDGE, depth_range=depth_range,
                            width_multiple=width_multiple)
    assert got.at_bound == (edge,)
    assert got.depth == depth_range[0 if edge == "depth_min" else 1]
    # the law's own optimum is beyond the edge: widening the range lowers the loss
    wide = optimal_shape(_Known(), C_EDGE, depth_range=(1, 64), width_multiple=width_multiple)
    assert wide.loss < got.loss and wide.at_bound == ()
    assert json.loads(json.dumps(got.to_dict()))["at_bound"] == [edge]


@pytest.mark.parametrize("width_multiple", [64, None])
@pytest.mark.parametrize(("width_range", "edge", "text"), [
    ((64, 2048), "width_max", r"width_max: width = 2048 at the upper end of width_range = "
                              r"\(64, 2048\); widen width_range \(raise width_range\[1\]\)"),
    ((8192, 65536), "width_min", r"width_min: width = 8192 at the lower end of width_range = "
                                 r"\(8192, 65536\); widen width_range \(lower width_range\[0\]\)"),
])
def test_optimum_on_a_width_bound_is_flagged_and_warned(width_range, edge, text,
                                                        width_multiple):
    with pytest.warns(UserWarning, match=text):
        got = optimal_shape(_Known(), C_EDGE, depth_range=(1, 64), width_range=width_range,
                            width_multiple=width_multiple)
    assert got.at_bound == (edge,)
    assert got.width == pytest.approx(width_range[0 if edge == "width_min" else 1], rel=1e-6)
    assert 1 < got.depth < 64


def test_both_bounds_are_named_and_a_fixed_dimension_is_not_searched():
    with pytest.warns(UserWarning, match="depth_max: depth = 16.*width_max: width = 2048"):
        got = optimal_shape(_Known(), C_EDGE, depth_range=(1, 16), width_range=(64, 2048))
    assert got.at_bound == ("depth_max", "width_max")
    with warnings.catch_warnings():  # depth fixed by the caller: only width is searched
        warnings.simplefilter("error")
        fixed = optimal_shape(_Known(), C_EDGE, depth_range=(16, 16))
    assert fixed.at_bound == () and fixed.depth == 16
