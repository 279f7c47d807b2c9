"""The fill-in's extrapolation guard on the recorded case that motivated it (StepLaw)."""

import numpy as np

from scalebo.bench.budget_measure import measure
from scalebo.bench.method import MethodConfig
from scalebo.bench.problems import load_problem
from scalebo.bench.replay import search_state


def test_steplaw_seed_2_at_25_percent(data_dir):
    """StepLaw, the 0.3.9 search (no polish, a refit at every ask), seed 2, 25 % of C_total:
    the runs leave untried corner configurations (high learning rate, batch 1,024-2,048) that
    the GP, extrapolating, fills in 0.09-0.48 nats under their recorded losses; they took the
    compute law 22 % off at 1e25 FLOPs (0.3.8). With the guard the fill-in's law equals the
    reference (the law on the observed runs alone is exact there too), and the record says
    what was left out. The same runs are filled in with and without the guard."""
    problem = load_problem("steplaw", data_dir=data_dir)
    method = MethodConfig(posterior_samples=0, polish=0.0, refit_growth=0.0)
    loop = search_state(problem, method, 0.25, 2)
    timings = dict.fromkeys(("fantasize", "posterior", "metrics"), 0.0)
    m = measure(problem, method, loop, 0.25, 2, timings)
    assert abs(m.observed["compute"].extrapolation_pct["1e+25"]) < 0.01
    assert abs(m.fantasized["compute"].extrapolation_pct["1e+25"]) < 0.5
    assert "left out of the fill-in" in m.fantasize_message
    off = measure(problem, method.with_(extrapolation_guard=0.0), loop, 0.25, 2, timings)
    assert abs(off.fantasized["compute"].extrapolation_pct["1e+25"]) > 10
    assert off.fantasize_message == "" and np.isfinite(
        off.fantasized["compute"].extrapolation_pct["1e+25"])
