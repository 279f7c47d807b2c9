"""Floor oracles on a small noise-free grid: known spends, exact refits, recorded failures."""

from __future__ import annotations

import numpy as np
import pytest

from scalebo.bench import problems as problems_mod
from scalebo.bench.oracle import (
    ORACLE_LABELS,
    floor_oracle,
    oracle_indices,
    oracle_summary,
)
from scalebo.bench.problems import problem_from_table
from scalebo.bench.synthetic import SyntheticLaw, make_synthetic
from scalebo.laws import CHINCHILLA

#: Every 30th of Hoffmann's 4,500 starts: enough for noise-free data, and fast.
COARSE = CHINCHILLA.start_grid()[::30]


def tiny_problem():
    """Noise-free synthetic grid: 5 N × 4 D cells × (3 lr × 2 bs) = 120 configurations."""
    frame = make_synthetic(SyntheticLaw(noise=0.0), N=5e7 * 2.0 ** np.arange(5),
                           D=1e9 * 2.0 ** np.arange(4), lr=[5e-4, 1e-3, 2e-3], bs=[128, 256])
    return problem_from_table(frame[["N", "D", "lr", "bs", "loss"]], name="tiny",
                              chinchilla_starts=COARSE)


@pytest.fixture(scope="module")
def problem():
    return tiny_problem()


def test_whole_envelope_affordable_refits_the_reference_exactly(problem):
    m = floor_oracle(problem, 1.0, "envelope")
    assert m.n_runs == problem.envelope_idx.size
    assert m.spent_fraction == pytest.approx(problem.floor_envelope, rel=1e-12)
    assert m.floor_multiple_envelope == pytest.approx(1.0)
    assert m.envelope_recovery_pct == 100.0
    lm = m.observed["compute"]
    assert lm.ok and lm.abs_extrapolation(1e25) < 1e-6
    assert max(lm.param_error.values()) < 1e-6
    assert m.fantasized is None and m.law_posterior is None  # observed runs only


def test_budget_equal_to_the_floor_buys_the_whole_envelope(problem):
    """The admissibility slack (COST_RTOL) keeps a budget of exactly the floor affordable."""
    n = problem.envelope_idx.size
    assert oracle_indices(problem, problem.floor_envelope).size == n
    assert oracle_indices(problem, problem.floor_envelope * (1 - 1e-11)).size == n  # rounding
    assert oracle_indices(problem, problem.floor_envelope * (1 - 1e-6)).size == n - 1


def test_budget_below_the_cheapest_configuration_trains_nothing(problem):
    cheapest = problem.grid.cost[problem.envelope_idx].min() / problem.C_total
    m = floor_oracle(problem, 0.5 * cheapest, "envelope")
    assert m.n_runs == 0 and m.spent_flops == 0.0 and m.envelope_recovery_pct == 0.0
    for law in ("compute", "chinchilla"):
        lm = m.observed[law]
        assert lm.status == "failed" and not lm.ok
        assert lm.params is None and lm.extrapolation_pct is None


def test_partial_budget_buys_the_cheapest_prefix(problem):
    cost = problem.grid.cost
    rows = problem.envelope_idx[np.argsort(cost[problem.envelope_idx], kind="stable")]
    spent = np.cumsum(cost[rows])
    k = 3  # a budget halfway between 3 and 4 envelope configurations
    budget = 0.5 * (spent[k - 1] + spent[k]) / problem.C_total
    idx = oracle_indices(problem, budget, "envelope")
    np.testing.assert_array_equal(idx, rows[:k])
    m = floor_oracle(problem, budget, "envelope")
    assert m.n_runs == k and m.spent_flops == pytest.approx(spent[k - 1])
    assert m.spent_flops <= budget * problem.C_total
    assert m.envelope_recovery_pct == pytest.approx(100 * k / problem.envelope_idx.size)


def test_anchored_oracle_buys_the_costliest_affordable_envelope_run_first(problem):
    cost = problem.grid.cost
    rows = problem.envelope_idx[np.argsort(cost[problem.envelope_idx], kind="stable")]
    c = cost[rows]
    # A budget that affords the 4th-cheapest envelope run but not the 4 cheapest together:
    # the anchor is then the 4th, and the rest buys the cheapest prefix that still fits.
    budget_flops = 0.5 * (c[3] + c[:4].sum())
    assert c[:4].sum() > budget_flops and c[4] > budget_flops
    idx = oracle_indices(problem, budget_flops / problem.C_total, "anchored")
    room = budget_flops - c[3]
    k = int(np.searchsorted(np.cumsum(c[:3]), room, side="right"))
    np.testing.assert_array_equal(idx, np.r_[rows[:k], rows[3]])
    assert cost[idx].sum() <= budget_flops
    cheap = oracle_indices(problem, budget_flops / problem.C_total, "envelope")
    assert rows[3] not in cheap and cost[idx].max() > cost[cheap].max()
    # Once the whole envelope fits, both plans buy the same runs.
    np.testing.assert_array_equal(oracle_indices(problem, 1.0, "anchored"),
                                  oracle_indices(problem, 1.0, "envelope"))
    assert oracle_indices(problem, 0.5 * c[0] / problem.C_total, "anchored").size == 0


def test_cell_bests_oracle_spends_the_cell_floor_and_recovers_both_laws(problem):
    m = floor_oracle(problem, 1.0, "cells")
    assert m.n_runs == problem.cell_best_idx.size == 18
    assert m.spent_fraction == pytest.approx(problem.floor_cells) == pytest.approx(1 / 6)
    assert m.cell_recovery_pct == 100.0
    # Every envelope configuration is its cell's best, so the envelope is bought too.
    assert m.envelope_recovery_pct == 100.0
    for law in ("compute", "chinchilla"):
        assert m.observed[law].abs_extrapolation(1e25) < 1e-6, law
    # Cheapest first: the first configurations are the cheapest cells' bests.
    idx = oracle_indices(problem, 1.0, "cells")
    assert np.all(np.diff(problem.grid.cost[idx]) >= 0)


def test_laws_and_kind_arguments(problem):
    m = floor_oracle(problem, 1.0, "envelope", laws=("compute",))
    assert set(m.observed) == {"compute"}
    with pytest.raises(ValueError, match="oracle kind"):
        floor_oracle(problem, 0.1, "hull")
    with pytest.raises(ValueError, match="budget"):
        oracle_indices(problem, float("nan"))


def test_oracle_summary_rows_and_unloadable_datasets(problem, monkeypatch):
    def fake_load(source, **kwargs):
        if source == "tiny":
            return problem
        raise FileNotFoundError(f"no data directory for {source}")

    monkeypatch.setattr(problems_mod, "load_problem", fake_load)
    orc = oracle_summary({"tiny": ("tiny", {}), "gone": ("steplaw", {})}, [1.0, 1e-9])
    assert orc.skipped == (("gone", "FileNotFoundError: no data directory for steplaw"),)
    held = problem.grid.cost[problem.grid.held_out].sum()  # by hand: the held-out share
    assert orc.floors == (("tiny", problem.floor_envelope, problem.floor_cells,
                           pytest.approx(held / problem.grid.cost.sum())),)
    s = orc.summary
    assert set(s["method"]) == set(ORACLE_LABELS.values()) and set(s["kind"]) == {"oracle"}
    env = s[(s["method"] == "oracle: envelope") & (s["budget"] == 1.0)].set_index("metric")
    assert env.loc["compute.extrapolation_pct.1e+25", "mean"] < 1e-6
    assert env.loc["spent_fraction", "mean"] == pytest.approx(problem.floor_envelope)
    assert env.loc["compute.ok", "mean"] == 1.0
    poor = s[(s["method"] == "oracle: cell bests") & (s["budget"] == 1e-9)].set_index("metric")
    assert poor.loc["n_runs", "mean"] == 0 and poor.loc["compute.ok", "mean"] == 0.0
    assert np.isnan(poor.loc["compute.extrapolation_pct.1e+25", "mean"])  # failed fit
