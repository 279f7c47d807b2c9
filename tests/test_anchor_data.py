"""The anchor's dominance rule on the recorded case that motivated it (OELLM-English)."""

import numpy as np

import scalebo.search.admission as admission
from scalebo.bench.method import MethodConfig
from scalebo.bench.problems import load_problem
from scalebo.bench.replay import _finish, _make_loop


def test_oellm_seed_0_at_5_percent_drops_an_off_envelope_anchor(data_dir, monkeypatch):
    """OELLM-English, seed 0, 5 % of C_total: the anchor cell (the costliest under 70 % of
    the budget) is N = 983M at 300B tokens, 17 mnats worse than the cheaper N = 1.7B at 120B
    tokens, so off the reference envelope. Without the rule the search ends by training it
    (0.83 % of C_total, a sixth of the budget); with it, the search's own runs (the 1.7B,
    120B run among them) dominate the cell and the budget goes to the envelope's cells:
    the best configuration of the costliest reference-envelope cell is trained."""
    problem = load_problem("oellm_english", data_dir=data_dir)
    cfg = problem.grid.configs
    anchor_cell = np.flatnonzero((cfg["N"] < 1e9) & (cfg["N"] > 9e8) & (cfg["D"] == 3e11))
    assert anchor_cell.size and not np.isin(anchor_cell, problem.envelope_idx).any()
    top = problem.envelope_idx[np.argmax(problem.grid.cost[problem.envelope_idx])]
    method = MethodConfig(posterior_samples=0, bootstrap_samples=0)
    trained = {}
    for rule in (True, False):
        if not rule:
            monkeypatch.setattr(admission, "anchor_dominated", lambda *a, **k: False)
        loop = _make_loop(problem, method, 0.05, 0)
        _finish(loop, problem, method)
        trained[rule] = loop.observed_indices
    assert np.isin(anchor_cell, trained[False]).any()
    assert not np.isin(anchor_cell, trained[True]).any()
    assert top in trained[True] and top not in trained[False]
