"""How sure a replay's reference law is: a bootstrap over its envelope runs (hand-made
envelopes with a known compute law: exact points give a zero-width interval, noisy ones an
interval that holds the point prediction and the truth; seeded, so reproducible)."""

from types import SimpleNamespace

import numpy as np
import pytest

from scalebo.bench.reference_spread import reference_spread
from scalebo.fitting.robust import fit_law
from scalebo.laws import get_law

E, A, ALPHA = 1.7, 900.0, 0.15  # L(C) = E + A·C^−α, C in FLOPs


def _problem(noise: float, n: int = 12, seed: int = 0) -> SimpleNamespace:
    law = get_law("compute")
    C = np.geomspace(1e18, 1e21, n)
    loss = (E + A * C**-ALPHA) * np.exp(np.random.default_rng(seed).normal(0, noise, n))
    ref = fit_law(law, C[:, None], loss, starts=law.start_grid(law.prepare(C[:, None])))
    return SimpleNamespace(reference_compute=ref, envelope_idx=np.arange(n),
                           grid=SimpleNamespace(cost=C), loss=loss)


def test_exact_envelope_runs_leave_no_doubt_and_noisy_ones_do():
    exact = reference_spread(_problem(0.0), 1e25)
    truth = E + A * 1e25**-ALPHA
    assert exact.point == pytest.approx(truth, rel=1e-4)
    assert exact.half_width_pct < 0.05 and exact.n_points == 12
    noisy = reference_spread(_problem(0.01), 1e25)
    assert noisy.low < noisy.point < noisy.high and noisy.half_width_pct > 0.5
    assert reference_spread(_problem(0.01), 1e25) == noisy  # seeded
    assert "its 80 % bootstrap interval over its 12 envelope runs" in noisy.describe()


def test_the_interval_covers_the_true_law_about_as_often_as_it_says():
    """40 envelopes of 12 runs with 1 % noise: the 80 % interval at 1e25 FLOPs (four decades
    past the runs) holds the true law's loss in 36 / 40 (measured); a true 80 % passes
    [0.65, 0.95] with probability 0.98."""
    truth = E + A * 1e25**-ALPHA
    spreads = [reference_spread(_problem(0.01, seed=s), 1e25, n_resamples=100)
               for s in range(40)]
    covered = np.mean([s.low < truth < s.high for s in spreads])
    assert 0.65 <= covered <= 0.95, covered


def test_an_undetermined_reference_gives_no_spread_rather_than_a_false_one():
    """A review: 3 envelope runs printed ±0.0 % (164 of 200 resamples failed, the rest
    reproduced the data), and a fit with E at its bound quoted a spread that holds only with
    E fixed there."""
    assert reference_spread(_problem(0.01, n=3), 1e25) is None
    assert reference_spread(_problem(0.01, n=4), 1e25) is None  # n_params + 1
    assert reference_spread(_problem(0.01, n=5), 1e25) is not None
    bound = _problem(0.01)
    bound.reference_compute = SimpleNamespace(status="bound hit", law=get_law("compute"))
    assert reference_spread(bound, 1e25) is None


def test_the_reference_law_says_when_its_grids_hull_extrapolates_elsewhere():
    """A trial's grid from a known law (5 N × 4 D × 7 learning rates): the envelope's
    reference compute law, which replays score, was 7.7 % above the true compute-optimal loss
    at 1e25 FLOPs with no word in `replay`. The note gives the hull fit's prediction, checked
    against `fit_summary(frontier="hull")` on the same runs; the built-in synthetic grid,
    whose hull and envelope agree within 1 %, gets none."""
    import warnings

    import pandas as pd

    from scalebo.bench.problems import load_problem, problem_from_table
    from scalebo.bench.reference_spread import reference_frontier_note
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    N, D, lr = (x.ravel() for x in np.meshgrid(np.geomspace(2e7, 5e8, 5),
                                                np.geomspace(4e9, 2.56e11, 4),
                                                [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]))
    loss = (1.9 + 400 / N**0.33 + 1800 / D**0.30
            + 0.04 * np.log2(lr / (3e-3 * (N / 1e8) ** -0.5)) ** 2)
    frame = pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": loss})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = problem_from_table(frame, name="trial", n_held_out_cells=0)
        hull = fit_summary(load_runs(frame), "compute", frontier="hull").fit
        quiet = reference_frontier_note(load_problem("synthetic"))
    note = reference_frontier_note(problem)
    at = np.array([[1e25]])
    ref, other = float(problem.reference_compute.predict(at)[0]), float(hull.predict(at)[0])
    assert abs(other / ref - 1) > 0.01
    assert note.startswith("reference compute law: fitted on the lower convex hull of (C, loss)")
    assert f"predicts {other:.4g} at 1e+25 FLOPs" in note and f"fit's {ref:.4g}" in note
    assert "no replay error holds this spread" in note
    assert quiet is None


def test_the_hull_note_leaves_out_the_runs_the_reference_counts_as_failed():
    """With diverged_above, runs above it are failed runs, out of the reference's envelope:
    the hull it is compared with leaves them out too (a review's case: the cheapest cell at
    10 nats made the hull's first vertex and a "+69.8 %" note)."""
    import warnings

    import pandas as pd

    from scalebo.bench.problems import problem_from_table
    from scalebo.bench.reference_spread import reference_frontier_note
    from scalebo.data.runs import load_runs
    from scalebo.fitting.summary import fit_summary

    N, D, lr = (x.ravel() for x in np.meshgrid(np.geomspace(2e7, 5e8, 5),
                                                np.geomspace(4e9, 2.56e11, 5), [1e-3, 2e-3]))
    loss = 1.9 + 400 / N**0.33 + 1800 / D**0.30 + 0.01 * (lr == 2e-3)
    cheapest = N * D == (N * D).min()
    frame = pd.DataFrame({"N": N, "D": D, "lr": lr, "loss": np.where(cheapest, 10.0, loss)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = problem_from_table(frame, name="t", n_held_out_cells=0, diverged_above=9.0)
        hull = fit_summary(load_runs(frame[~cheapest]), "compute", frontier="hull").fit
    note = reference_frontier_note(problem)
    assert f"predicts {float(hull.predict(np.array([[1e25]]))[0]):.4g} at 1e+25" in note
    assert "(C, loss) (7 runs)" in note
