"""A design campaign's start: with fewer runs done than the law has parameters there is no fit
to score rows by, and design refused ('the table has no rows', 'needs at least 5'); it now
proposes the cheapest pool rows, as a replay starts (``pilot_rows``), alone or per group
under either budget, and aims at the target once the law can be fitted."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_design import _frames, _propose_cli, setup  # noqa: F401 - setup is a fixture
from test_design_groups import _cli_args, _done
from test_design_groups import _frames as _group_frames
from test_design_groups import _setup as _group_setup

from scalebo.cli.main import main
from scalebo.design import make_pool, propose_batch, propose_groups
from scalebo.design.replay import pilot_rows


def test_a_campaign_starts_from_no_runs_with_the_replays_pilot(setup, tmp_path):  # noqa: F811
    law, pool, target = setup
    none = np.zeros((0, 2))
    with pytest.warns(UserWarning, match=r"0 runs done, fewer than the law's 5 parameters"):
        first = propose_batch(pool, target, law, none, np.zeros(0), np.zeros(0), 0.05, 3)
    cheapest = np.argsort(pool.cost, kind="stable")
    assert [p.row for p in first] == cheapest[:3].tolist()
    assert all(p.mean is None and p.score is None and p.lo80 is None for p in first)
    pilot = pilot_rows(pool.cost, law.n_params, pool.total_cost)
    done = cheapest[:4]  # 4 of 5: still the pilot, never more rows than it holds in all
    with pytest.warns(UserWarning, match=r"4 runs done"):
        more = propose_batch(pool, target, law, pool.X[done], pool.y[done], pool.cost[done],
                             0.05, 20)
    assert len(more) == len(pilot) - 4 and not {p.row for p in more} & set(done.tolist())
    done = np.asarray(pilot)  # enough to fit: proposals scored for the target region
    fitted = propose_batch(pool, target, law, pool.X[done], pool.y[done], pool.cost[done],
                           0.05, 2, n_starts=8)
    assert all(p.mean is not None and p.score > 0 for p in fitted)
    # the CLI: a runs file of a header alone is a campaign's start; every target row is
    # listed, with no prediction yet and the reason
    result = _propose_cli(tmp_path, _frames()[0], 0)
    assert [p["row"] for p in result["proposals"]] == [p.row for p in first]
    preds = result["target_prediction"]
    assert len(preds) == len(_frames()[1]) and result["spent_fraction"] == 0
    assert all(p["mean"] is None and "needs at least 5" in p["note"] for p in preds)


@pytest.mark.parametrize("group_budget", ["per-group", "shared"])
def test_groups_too_young_to_fit_get_their_pilot_under_either_budget(group_budget):
    law, pool, target, pg, tg = _group_setup()
    pool_f, _ = _group_frames()
    few = make_pool(_done(pool_f, 1), law, "x", response="loss")  # 1 run a group: p = 3
    with pytest.warns(UserWarning, match=r"group 'g\d': 1 run done, fewer than the law's 3"):
        props = propose_groups(pool, target, law, pg, tg, few.X, few.y, few.cost,
                               _done(pool_f, 1).family.to_numpy(), 0.05, 2,
                               group_budget=group_budget, n_starts=6)
    assert props and all(p.mean is None for p in props)
    for p in props:  # each its group's next cheapest row
        mine = np.flatnonzero(pg == p.group)
        order = mine[np.argsort(pool.cost[mine], kind="stable")]
        assert p.row in order[1:3].tolist()


def test_the_cli_proposes_for_young_groups_and_lists_their_targets(tmp_path, capsys):
    """A review: 2 runs in each of two groups (4 ≥ the law's 3 parameters in all) proposed
    pilot rows, then exited 1 on the target predictions with no JSON."""
    pool_f, target_f = _group_frames()
    _done(pool_f, 2).to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    assert main([*_cli_args(tmp_path, pool_f, target_f), "--runs", str(tmp_path / "done.csv"),
                 "--budget", "0.05", "--batch", "4", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {p["group"] for p in result["proposals"]} == {"g1", "g2"}
    assert all(p["mean"] is None and p["note"] for p in result["target_prediction"])
    assert "rows asked for (--batch)" not in capsys.readouterr().err  # the pilot said why
