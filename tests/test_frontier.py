"""Frontiers: hand-made cases with known answers, invariants, and a Qhull cross-check."""

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import ConvexHull

from scalebo.data.runs import load_runs
from scalebo.fitting.frontier import (
    FrontierMethod,
    best_per_cell,
    frontier,
    lower_convex_hull,
    pareto_envelope,
)


def test_envelope_hand_case_with_ties():
    compute = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 5.0])
    loss = np.array([5.0, 4.0, 3.0, 3.5, 2.0, 2.0, 1.5])
    # 0 first; 2 beats 1 at equal compute; 3 is worse than 2; 4 improves; 5 only ties 4;
    # 6 improves at the same compute as 5.
    assert np.flatnonzero(pareto_envelope(compute, loss)).tolist() == [0, 2, 4, 6]


def test_envelope_exact_duplicates_keep_first_position():
    assert np.flatnonzero(pareto_envelope([1.0, 1.0, 2.0], [3.0, 3.0, 2.0])).tolist() == [0, 2]
    assert np.flatnonzero(pareto_envelope([2.0, 1.0, 1.0], [2.0, 3.0, 3.0])).tolist() == [0, 1]


def test_envelope_edge_cases_and_errors():
    assert pareto_envelope(np.array([]), np.array([])).shape == (0,)
    assert pareto_envelope([7.0], [1.0]).tolist() == [True]
    # loss rising with compute: only the cheapest run is on the envelope
    assert pareto_envelope([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="non-finite"):
        pareto_envelope([1.0, 2.0], [1.0, np.nan])
    with pytest.raises(ValueError, match="same shape"):
        pareto_envelope([1.0, 2.0], [1.0])


def _log_points(xy):
    """Runs whose (log C, log L) are exactly the given (x, y) up to rounding."""
    xy = np.asarray(xy, dtype=np.float64)
    return np.exp(xy[:, 0]), np.exp(xy[:, 1])


def test_hull_hand_case():
    # (log C, log L). Index 2 lies above the chord 1→3 (at x=2 the chord is at 1.0 < 1.2);
    # index 6 is dominated (higher compute, higher loss than 5); index 7 is not on the
    # envelope (loss above index 0's at higher compute).
    xy = [(0, 3), (1, 1.5), (2, 1.2), (3, 0.5), (4, 0.4), (5, 0.35), (6, 0.5), (0.5, 3.1)]
    compute, loss = _log_points(xy)
    assert np.flatnonzero(lower_convex_hull(compute, loss)).tolist() == [0, 1, 3, 4, 5]
    assert np.flatnonzero(pareto_envelope(compute, loss)).tolist() == [0, 1, 2, 3, 4, 5]


def test_hull_drops_collinear_points():
    # log-collinear: C = 10^k, L = 2^-k; the middle points are on the edge, not vertices
    k = np.arange(4.0)
    mask = lower_convex_hull(10.0**k, 2.0**-k)
    assert mask.tolist() == [True, False, False, True]


def test_hull_rejects_nonpositive():
    with pytest.raises(ValueError, match="> 0"):
        lower_convex_hull([1.0, 2.0], [1.0, 0.0])


def _random_runs(seed, n=200):
    rng = np.random.default_rng(seed)
    compute = 10 ** rng.uniform(17, 22, n)
    loss = 1.8 + 300 * compute**-0.15 * np.exp(rng.normal(0, 0.05, n))
    return compute, loss


@pytest.mark.parametrize("seed", range(5))
def test_envelope_invariants(seed):
    compute, loss = _random_runs(seed)
    mask = pareto_envelope(compute, loss)
    order = np.argsort(compute[mask])
    c_env, l_env = compute[mask][order], loss[mask][order]
    assert np.all(np.diff(c_env) > 0) and np.all(np.diff(l_env) < 0)
    # every excluded run is dominated by an envelope run (cheaper-or-equal and not worse)
    for c, l in zip(compute[~mask], loss[~mask], strict=True):
        assert np.any((c_env <= c) & (l_env <= l))
    assert mask[np.argmin(loss)] and mask[np.argmin(compute)]


@pytest.mark.parametrize("seed", range(5))
def test_hull_matches_qhull_and_is_inside_envelope(seed):
    compute, loss = _random_runs(seed)
    hull, env = lower_convex_hull(compute, loss), pareto_envelope(compute, loss)
    assert np.all(env[hull])
    # independent: Qhull vertices of the envelope points in log space that lie on or below
    # the chord from the cheapest to the lowest-loss envelope point
    idx = np.flatnonzero(env)
    x, y = np.log(compute[idx]), np.log(loss[idx])
    assert idx.size >= 3
    vertices = ConvexHull(np.column_stack([x, y])).vertices
    first, last = np.argmin(x), np.argmax(x)
    chord = y[first] + (y[last] - y[first]) * (x - x[first]) / (x[last] - x[first])
    expected = sorted(idx[v] for v in vertices if y[v] <= chord[v] + 1e-12)
    assert np.flatnonzero(hull).tolist() == expected
    # slopes between consecutive vertices increase strictly (convex) and stay negative
    h = np.flatnonzero(hull)
    h = h[np.argsort(compute[h])]
    slopes = np.diff(np.log(loss[h])) / np.diff(np.log(compute[h]))
    assert np.all(np.diff(slopes) > 0) and np.all(slopes < 0)


def _cell_frame():
    return pd.DataFrame(
        {
            "N": [1.0, 1.0, 1.0, 2.0, 2.0, 1.0],
            "D": [10.0, 10.0, 20.0, 10.0, 10.0, 20.0],
            "loss": [3.0, 2.5, 2.0, 2.2, 2.2, 2.1],
            "lr": [0.1, 0.2, 0.1, 0.1, 0.2, 0.2],
        },
        index=[10, 11, 12, 13, 14, 15],
    )


def test_best_per_cell_hand_case():
    best = best_per_cell(_cell_frame())
    # cells (1,10): 11; (1,20): 12 (2.0 < 2.1); (2,10): tie 2.2 → first, 13
    assert best.index.tolist() == [11, 12, 13]
    assert best.columns.tolist() == ["N", "D", "loss", "lr"]
    assert best["lr"].tolist() == [0.2, 0.1, 0.1]


def test_best_per_cell_custom_cell_and_nan():
    by_n = best_per_cell(_cell_frame(), cell=("N",))
    assert by_n.index.tolist() == [12, 13]
    frame = _cell_frame()
    frame.loc[11, "loss"] = np.nan
    with pytest.raises(ValueError, match="missing"):
        best_per_cell(frame)


def test_frontier_dispatch_on_run_table():
    frame = pd.DataFrame(
        {
            "N": [1e6, 1e6, 2e6, 4e6, 4e6, 8e6],
            "D": [1e8, 1e8, 2e8, 4e8, 4e8, 8e8],
            "lr": [1e-3, 2e-3, 1e-3, 1e-3, 2e-3, 1e-3],
            "loss": [4.0, 3.9, 3.0, 2.95, 3.5, 2.85],
        }
    )
    table = load_runs(frame, hyperparameters=["lr"])
    # compute grows 4x per (N, D) step: 6e14, 2.4e15, 9.6e15, 3.84e16 FLOPs
    assert frontier(table, "envelope").index.tolist() == [1, 2, 3, 5]
    # in (log C, log L), run 3 lies above the chord 2 → 5: log(2.95) > (log 3 + log 2.85) / 2
    assert np.log(2.95) > (np.log(3.0) + np.log(2.85)) / 2
    assert frontier(table, FrontierMethod.HULL).index.tolist() == [1, 2, 5]
    assert frontier(table, "cell").index.tolist() == [1, 2, 3, 5]
    assert frontier(table.frame, "hull").columns.tolist() == table.frame.columns.tolist()
    with pytest.raises(ValueError, match="unknown frontier method"):
        frontier(table, "best")


def test_envelope_treats_rounding_ties_as_equal_compute():
    """6·N·D of two configurations of the same compute can differ in the last bits (here 512
    FLOPs at 3e18): the worse run is not on the envelope (the newcomer's README case)."""
    from scalebo.fitting.frontier import pareto_envelope, snap_ties
    from scalebo.search.law_posterior import envelope_masks

    N = np.geomspace(1e8, 1e9, 6)[3]
    a, b = 3e18, 6 * N * (3e18 / 6 / N)  # the same compute, computed two ways
    assert a != b and abs(a - b) / a < 1e-12
    compute = np.array([1e18, a, b, 1e19])
    loss = np.array([3.6, 3.376, 3.214, 3.0])
    assert pareto_envelope(compute, loss).tolist() == [True, False, True, True]
    assert envelope_masks(compute, loss[None, :]).tolist() == [[True, False, True, True]]
    assert snap_ties(compute)[1] == snap_ties(compute)[2] == min(a, b)
    far = np.array([1e18, 3e18, 3.01e18, 1e19])  # 0.3 % apart: distinct levels
    assert pareto_envelope(far, loss).tolist() == [True, True, True, True]
