"""replay(): determinism, budget and held-out invariants, recorded budgets, JSON output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.bench.intervals import without_wall_times
from scalebo.bench.replay import MethodConfig, replay
from scalebo.search.models.clipping import ClippedGP


@pytest.fixture(scope="module")
def problem(small_problem):
    return small_problem


def same(a, b) -> bool:
    """Budget metrics equal but for wall-clock fields."""
    return without_wall_times(a.to_dict()) == without_wall_times(b.to_dict())


FAST = MethodConfig(strategy="window", schedule="spent", fantasize=False, refit_every=5,
                    posterior_samples=8)


def _trace(rec):
    return [(t.index, t.cost) for t in rec.trace]


def test_same_seed_same_replay_and_different_seed_differs(problem):
    a = replay(problem, FAST, 0.1, seed=4)
    b = replay(problem, FAST, 0.1, seed=4)
    c = replay(problem, FAST, 0.1, seed=5)
    assert _trace(a) == _trace(b)
    assert same(a.metrics[0], b.metrics[0])
    assert _trace(a) != _trace(c)


@pytest.mark.parametrize("method", [
    FAST, FAST.with_(strategy="full"), FAST.with_(schedule="sweep"),
    FAST.with_(surrogate="random", q=3), FAST.with_(trend=True, fantasize=True),
])
def test_budget_never_exceeded_and_held_out_never_acquired(problem, method):
    # the law posterior never changes the search (test_law_posterior_in_every_recorded_budget)
    # and nothing here reads it
    rec = replay(problem, method.with_(posterior_samples=0), 0.08, seed=1)
    idx = np.array([t.index for t in rec.trace])
    assert np.unique(idx).size == idx.size
    assert not problem.grid.held_out[idx].any()
    spent = problem.grid.cost[idx].sum()
    assert spent <= 0.08 * problem.C_total * (1 + 1e-9)
    m = rec.at(0.08)
    assert m.spent_flops == pytest.approx(spent) and m.n_runs == idx.size
    # nothing left that would still fit: the loop spent what it could
    rest = ~problem.grid.held_out
    rest[idx] = False
    assert (problem.grid.cost[rest] > 0.08 * problem.C_total - spent).all()
    cum = np.array([t.cumulative_cost for t in rec.trace])
    assert np.all(np.diff(cum) > 0) and cum[-1] == pytest.approx(spent)


@pytest.mark.parametrize("surrogate", ["gp", "random", "trees"])
@pytest.mark.parametrize("strategy,schedule", [("window", "spent"), ("window", "coverage"),
                                               ("full", "spent")])
def test_recorded_budget_equals_a_separate_run(problem, surrogate, strategy, schedule):
    small, large = 0.03, 0.10
    if surrogate == "trees":
        pytest.importorskip("xgboost", reason="the trees surrogate needs the [trees] extra")
        small, large = 0.015, 0.03  # bagged boosting is slow: fewer asks
    method = FAST.with_(surrogate=surrogate, strategy=strategy, schedule=schedule)
    both = replay(problem, method, large, seed=2, record_budgets=(small,))
    alone = replay(problem, method, small, seed=2)
    assert not both.separate_runs
    assert same(both.at(small), alone.at(small))
    assert both.at(small).spent_fraction <= small + 1e-12
    assert both.at(large).spent_fraction > both.at(small).spent_fraction


def test_recorded_budget_equals_a_separate_run_when_runs_are_costly():
    """A 2 % budget affords only the cheapest cell's runs (1.2 % of C_total each; the next
    compute level costs 2.4 %). The initial design must not depend on the budget, or the
    2 % row of a longer replay starts from other runs than a separate 2 % replay."""
    from scalebo.bench.problems import problem_from_table

    rng = np.random.default_rng(0)
    rows = [{"N": N, "D": D, "lr": lr,
             "loss": 1.8 + 480 / N**0.34 + 2100 / D**0.36 + 0.03 * np.log2(lr / 1e-3) ** 2
             + rng.normal(0, 0.005)}
            for N in (1e8, 2e8, 3e8) for D in (1e10, 2e10, 3e10)
            for lr in (2.5e-4, 5e-4, 1e-3, 2e-3)]
    flat = problem_from_table(pd.DataFrame(rows), name="flat")
    share = np.unique(flat.grid.cost[~flat.grid.held_out]) / flat.C_total
    assert share[0] == pytest.approx(1 / 84) and share[1] == pytest.approx(2 / 84)
    method = FAST.with_(surrogate="random", fantasize=False, posterior_samples=0)
    for seed in range(3):
        alone = replay(flat, method, 0.02, seed=seed)
        assert alone.at(0.02).n_runs == 1
        both = replay(flat, method, 0.5, seed=seed, record_budgets=(0.02,))
        # one run each: the same run iff the same cell-best recovery and compute spent
        assert same(both.at(0.02), alone.at(0.02)), seed


def test_sweep_records_separate_runs(problem):
    method = FAST.with_(schedule="sweep")
    assert not method.budget_independent
    both = replay(problem, method, 0.10, seed=2, record_budgets=(0.03,))
    alone = replay(problem, method, 0.03, seed=2)
    assert both.separate_runs
    assert same(both.at(0.03), alone.at(0.03))


def test_fantasized_metrics_and_json(problem):
    rec = replay(problem, FAST.with_(fantasize=True, estimator="cell_best"), 0.1, seed=0)
    m = rec.at(0.1)
    assert m.fantasized is not None and m.fantasize_message == ""
    assert set(m.fantasized) == {"compute", "chinchilla"}
    text = json.dumps(rec.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["metrics"][0]["budget"] == 0.1
    assert {"order", "index", "cost", "cumulative_cost", "cap", "config"} <= set(back["trace"][0])
    for t in back["trace"]:  # each entry names its configuration, checkable without the code
        row = problem.grid.configs.iloc[t["index"]]
        assert t["config"] == {"N": row.N, "D": row.D, "C": row.C, "lr": row.lr, "bs": row.bs}
        assert t["cost"] == pytest.approx(6 * row.N * row.D)
    assert set(back["timings"]) == {"search", "fantasize", "posterior", "metrics", "total"}


def test_bad_inputs(problem):
    with pytest.raises(ValueError, match="record_budgets"):
        replay(problem, FAST, 0.05, seed=0, record_budgets=(0.1,))
    with pytest.raises(ValueError, match="schedule"):
        MethodConfig(schedule="bogus")


class _Stub:
    def fit(self, X, y, warm_start=False):
        self.y = y
        return self

    def condition_on(self, X, y):
        new = _Stub()
        new.y = y
        return new


def test_clipped_gp_clips_outliers_at_median_plus_k_iqr():
    y = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 100.0])  # median 2.5, IQR 2.5
    model = ClippedGP(_Stub(), k=2.0).fit(np.zeros((6, 1)), y)
    assert model.threshold_ == pytest.approx(7.5)
    np.testing.assert_allclose(model.inner.y, [0, 1, 2, 3, 4, 7.5])
    cond = model.condition_on(np.zeros((2, 1)), np.array([1.0, 50.0]))
    np.testing.assert_allclose(cond.inner.y, [1.0, 7.5])


def test_fantasy_scope_is_the_final_window_by_default(problem):
    from scalebo.bench.budget_measure import fantasy_scope
    from scalebo.bench.replay import search_state

    loop = search_state(problem, FAST, 0.05, 0)
    scope, cap = fantasy_scope(loop, FAST)
    assert scope == "window" and cap == loop.window_cap()
    assert cap >= problem.grid.cost[loop.observed_indices].max()
    assert cap == pytest.approx(max(loop.spent, problem.grid.cost[loop.observed_indices].max()))
    assert fantasy_scope(loop, FAST.with_(fantasize_scope="observed")) == ("window", None)
    assert fantasy_scope(loop, FAST.with_(fantasize_scope="grid")) == ("grid", None)
    full = FAST.with_(strategy="full")
    full_loop = search_state(problem, full, 0.05, 0)
    assert fantasy_scope(full_loop, full) == ("grid", None)


def test_the_law_posterior_samples_the_whole_grid_by_default(problem):
    from scalebo.bench.budget_measure import fantasy_scope, posterior_scope
    from scalebo.bench.replay import search_state

    loop = search_state(problem, FAST, 0.05, 0)
    assert posterior_scope(loop, FAST) == ("grid", None)
    old = FAST.with_(posterior_scope="fantasize")
    assert posterior_scope(loop, old) == fantasy_scope(loop, old)
    assert "posterior_scope=fantasize" in old.label() and "scope" not in FAST.label()
    with pytest.raises(ValueError, match="posterior_scope"):
        FAST.with_(posterior_scope="window")


def test_law_posterior_in_every_recorded_budget(problem):
    """Each budget's metrics hold the law posterior's quantiles for both laws, ordered, with
    the reference loss (the reference fit's own prediction) and coverage consistent with
    them; the posterior never changes the search."""
    from scalebo.bench.intervals import reference_losses

    rec = replay(problem, FAST.with_(fantasize=True), 0.08, seed=1, record_budgets=(0.03,))
    bare = replay(problem, FAST.with_(fantasize=True, posterior_samples=0), 0.08, seed=1)
    assert _trace(rec) == _trace(bare) and bare.at(0.08).law_posterior is None
    for m in rec.metrics:
        for law in ("compute", "chinchilla"):
            post = m.law_posterior[law]
            assert post["samples"] == 8 and post["reference_loss"] == reference_losses(
                problem, law)
            for key, q in post["predicted_loss"].items():
                values = [q[k] for k in ("q02.5", "q10", "q50", "q90", "q97.5")]
                assert values == sorted(values) and all(np.isfinite(values))
                ref = post["reference_loss"][key]
                assert post["covered"][key]["80"] == (q["q10"] - 1e-6 * ref <= ref
                                                      <= q["q90"] + 1e-6 * ref)
    text = json.dumps(rec.to_dict(), allow_nan=False)
    assert json.loads(text)["metrics"][0]["law_posterior"]["compute"]["predicted_loss"][
        "1e+25"]["q50"] > 0


def test_posterior_estimand_reaches_the_law_posterior(problem):
    """With the envelope's runs trained, the reference posterior of the compute law is the
    reference itself (0 wide); the noise-free one, asked for by the method, is not."""
    method = FAST.with_(fantasize=True, posterior_samples=16)
    ref = replay(problem, method, 0.6, seed=0).at(0.6)
    free = replay(problem, method.with_(posterior_estimand="noise_free"), 0.6, seed=0).at(0.6)
    assert ref.envelope_recovery_pct == 100.0
    q_ref = ref.law_posterior["compute"]["predicted_loss"]["1e+25"]
    q_free = free.law_posterior["compute"]["predicted_loss"]["1e+25"]
    assert q_ref["q97.5"] - q_ref["q02.5"] < 1e-9 * q_ref["q50"]
    assert q_free["q97.5"] - q_free["q02.5"] > 1e-3 * q_free["q50"]
    # tables and the replay command's header name a posterior that is not the default
    assert "posterior=noise_free" in method.with_(posterior_estimand="noise_free").label()
    assert "posterior" not in method.label()
    with pytest.raises(ValueError, match="posterior_estimand"):
        MethodConfig(posterior_estimand="truth")


def test_progress_reports_the_committed_share_of_the_budget(problem):
    """The callback behind the CLI's bar: one call per step, non-decreasing, each the
    trace's committed compute over the budget; a progress callback changes nothing."""
    seen: list[float] = []
    rec = replay(problem, FAST, 0.1, seed=4, progress=seen.append)
    assert 0 < len(seen) <= len(rec.trace)
    assert all(b >= a for a, b in zip(seen, seen[1:], strict=False))
    spent = rec.trace[-1].cumulative_cost
    assert seen[-1] == pytest.approx(spent / (0.1 * problem.C_total), rel=1e-9)
    assert 0 < seen[-1] <= 1 + 1e-9
    assert _trace(rec) == _trace(replay(problem, FAST, 0.1, seed=4))


def test_gp_restart_settings_reach_the_search_gp(problem):
    """MethodConfig.gp_restart_every / gp_restart_below set which of the search GP's refits
    are full ones: by default every fit on fewer than 128 runs (3 starts), with both 0 only
    the first; a negative value is an error."""
    from scalebo.bench.budget_measure import innermost
    from scalebo.bench.replay import _make_loop

    counts = {}
    for every, below in ((10, 128), (0, 0)):
        method = FAST.with_(refit_every=1, gp_restart_every=every, gp_restart_below=below)
        loop = _make_loop(problem, method, 0.02, 0)
        starts = []
        while picks := loop.ask():
            gp = getattr(innermost(loop.surrogate), "gp_", None)
            if gp is not None:
                starts.append(gp.fit_result_.n_starts)
            loop.tell(picks, problem.loss[picks])
        assert loop.observed_indices.size < 128
        counts[below] = starts
    assert MethodConfig().gp_restart_below == 128
    assert len(counts[128]) > 3 and set(counts[128]) == {3}
    assert counts[0][0] == 3 and set(counts[0][1:]) == {1}
    with pytest.raises(ValueError, match="gp_restart_every and gp_restart_below must be >= 0"):
        MethodConfig(gp_restart_below=-1)


def test_refit_interval_grows_with_the_runs_from_a_threshold(problem):
    """Below ``refit_growth_from`` runs the search GP refits every ``refit_every`` asks;
    from there on every ``ceil(refit_growth × n)`` asks (hand-computed), conditioned on the
    new runs in between: in a replay each hyperparameter fit comes exactly that many runs
    after the previous one."""
    from scalebo.bench.budget_measure import innermost
    from scalebo.bench.replay import _make_loop, _step

    default = MethodConfig()
    assert (default.refit_growth, default.refit_growth_from) == (0.05, 128)
    assert [default.refit_interval(n) for n in (0, 127, 128, 140, 141, 400)] == [1, 1, 7, 7, 8, 20]
    assert MethodConfig(refit_every=5).refit_interval(20) == 5
    assert MethodConfig(refit_every=5, refit_growth_from=0).refit_interval(400) == 20
    assert MethodConfig(refit_growth=0.0).refit_interval(400) == 1
    with pytest.raises(ValueError, match="refit_growth_from >= 0"):
        MethodConfig(refit_growth_from=-1)

    method = FAST.with_(refit_every=1, refit_growth=0.25, refit_growth_from=12,
                        posterior_samples=0, anchor=0.0, polish=0.0)
    loop = _make_loop(problem, method, 0.3, 0)
    fitted_at, last = [], None
    while _step(loop, problem, method):
        fit = getattr(getattr(innermost(loop.surrogate), "gp_", None), "fit_result_", None)
        if fit is not None and fit is not last:  # fitted in this ask, on the runs before it
            fitted_at.append(loop.observed_indices.size - 1)
            last = fit
    gaps = [(b - a, method.refit_interval(b))
            for a, b in zip(fitted_at[:-1], fitted_at[1:], strict=True)]
    assert fitted_at[-1] > 40 and sum(g > 1 for g, _ in gaps) >= 4
    assert all(gap == expected for gap, expected in gaps), (fitted_at, gaps)


@pytest.mark.parametrize(("settings", "path"), [
    ({"anchor": 0.7}, "fork"), ({"anchor": 0.0, "polish": 0.0}, "recording"),
    ({"schedule": "sweep"}, "separate")])
def test_search_time_is_counted_on_every_path(problem, settings, path):
    """Forked budgets (an anchor), one recording run, separate runs: the search's own time
    is in the record, a part of the total (the forking path once reported 0 s)."""
    method = FAST.with_(**settings)
    assert path == ("separate" if not method.budget_independent
                    else "fork" if method.forks else "recording")
    rec = replay(problem, method, 0.05, seed=0, record_budgets=(0.02,))
    t = rec.timings
    assert 0 < t["search"] < t["total"]
    assert t["search"] + t["fantasize"] + t["posterior"] + t["metrics"] <= t["total"] * 1.001


def test_budgets_below_an_envelope_configuration_say_no_search_can_train_it():
    """The warning counts the reference envelope's configurations that cost more than each
    recorded budget, computed by hand from the grid's costs."""
    from types import SimpleNamespace

    from test_oracle import tiny_problem

    from scalebo.bench.replay import envelope_out_of_reach

    problem = tiny_problem()
    share = problem.grid.cost[problem.envelope_idx] / problem.C_total
    top = float(share.max())
    budgets = [top / 2, float(np.sort(share)[-2]) * 0.999, top, 1.0]
    rec = SimpleNamespace(metrics=[SimpleNamespace(budget=b) for b in budgets])
    msgs = envelope_out_of_reach(rec, problem)
    want = [int((share > b * (1 + 1e-9)).sum()) for b in budgets[:2]]
    assert len(msgs) == 2 and want[1] >= 2 and want[0] >= 1  # the last two budgets reach all
    for b, n, msg in zip(budgets, want, msgs, strict=False):
        assert msg.startswith(f"budget {b:g} of C_total is below the cost of {n} of the "
                              f"reference envelope's {share.size} configurations")
        assert f"the costliest costs {top:.3g} of C_total" in msg


def test_search_state_holds_the_runs_of_the_replay_at_that_budget():
    from test_oracle import tiny_problem

    from scalebo.bench.replay import MethodConfig, replay, search_state

    problem = tiny_problem()
    method = MethodConfig(posterior_samples=0, bootstrap_samples=0)
    rec = replay(problem, method, 0.05, seed=1)
    loop = search_state(problem, method, 0.05, seed=1)
    trace = [t["index"] if isinstance(t, dict) else t.index for t in rec.trace]
    assert list(loop.observed_indices) == trace and len(trace) > 3
    assert loop.committed <= 0.05 * problem.C_total * (1 + 1e-9)
