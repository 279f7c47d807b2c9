"""Experiment design (issue 12): the variance design against random on a synthetic pool with a
known law, the acquisition on a hand-made Gaussian, nested checkpoints within budget, and the
``scalebo design`` command (JSON layout, propose mode, bad inputs)."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main
from scalebo.design import (
    Mode,
    Posterior,
    condition_on_mean,
    design_replay,
    evaluate_cost,
    make_pool,
    make_target,
    target_predictions,
    variance_scores,
)
from scalebo.errors import RunTableError
from scalebo.laws.formula import formula_law

FORMULA = "E + A*N**(-a) + B*D**(-b)"
BOUNDS = dict(E=(0.0, 5.0), A=(1.0, 1e5), a=(0.05, 1.0), B=(1.0, 1e5), b=(0.05, 1.0))
TRUTH = dict(E=1.7, A=406.4, a=0.34, B=410.7, b=0.28)  # Hoffmann et al. (2022), natural units


def _truth(N, D):
    return TRUTH["E"] + TRUTH["A"] * N ** -TRUTH["a"] + TRUTH["B"] * D ** -TRUTH["b"]


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pool: 8 × 8 log grid (N 1e6…3e8, D 1e7…3e10), noise-free; target: larger N and D."""
    N, D = np.meshgrid(np.geomspace(1e6, 3e8, 8), np.geomspace(1e7, 3e10, 8))
    pool = pd.DataFrame({"params": N.ravel(), "tokens": D.ravel()})
    pool["loss"] = _truth(pool.params, pool.tokens)
    Nt, Dt = np.meshgrid(np.geomspace(1e9, 1e10, 4), np.geomspace(1e11, 1e12, 4))
    target = pd.DataFrame({"params": Nt.ravel(), "tokens": Dt.ravel()})
    target["loss"] = _truth(target.params, target.tokens)
    return pool, target


VMAP = {"N": "params", "D": "tokens"}


@pytest.fixture(scope="module")
def setup():
    law = formula_law(FORMULA, ("N", "D"), BOUNDS)
    pool_f, target_f = _frames()
    pool = make_pool(pool_f, law, "6*N*D", response="loss", variable_map=VMAP)
    target = make_target(target_f, law, response="loss", variable_map=VMAP)
    return law, pool, target


def test_variance_beats_random_at_small_budget(setup):
    """At 0.2 % of the pool's cost random draws often buy fewer rows than parameters (R² −1)
    while the design's cheap pilot plus variance-per-cost picks recover the truth off the
    pool (noise-free data, so any 5 generic rows identify the law)."""
    law, pool, target = setup
    kw = dict(budgets=(0.002, 0.01), n_starts=16)
    var = [design_replay(pool, target, law, method="variance", seed=s, **kw) for s in range(3)]
    rnd = [design_replay(pool, target, law, method="random", seed=s, **kw) for s in range(3)]
    r_var = np.mean([r.checkpoints[0].r2 for r in var])
    r_rnd = np.mean([r.checkpoints[0].r2 for r in rnd])
    assert r_var > 0.99 and r_var > r_rnd + 0.5, (r_var, r_rnd)
    assert min(r.checkpoints[1].r2 for r in var) > 0.99


def test_checkpoints_nested_and_within_budget(setup):
    law, pool, target = setup
    for method in ("variance", "cost_weighted", "cheapest"):
        rep = design_replay(pool, target, law, budgets=(0.01, 0.05, 0.1), method=method,
                            seed=1, n_starts=8)
        cum = np.array(rep.cum_cost_fraction)
        assert np.all(np.diff(cum) > 0) and cum[-1] <= 0.1 + 1e-12
        assert len(set(rep.order)) == len(rep.order)  # a row is observed once
        n_prev = 0
        for c in rep.checkpoints:
            assert c.n_observed >= n_prev  # one run: the 5 % design extends the 1 % one
            n_prev = c.n_observed
            assert c.spent_fraction <= c.budget + 1e-12
            spent = cum[c.n_observed - 1] if c.n_observed else 0.0
            assert c.spent_fraction == pytest.approx(spent)
            if c.n_observed < len(cum):  # the next row is the one that went past it
                assert cum[c.n_observed] > c.budget * (1 + 1e-12)
            assert -1 <= c.r2 <= 1
    assert rep.n_pilot == 0  # baselines start without a pilot


def test_acquisition_matches_hand_computation():
    """Linear law y = c + s·x, one Gaussian mode, three candidates, two target rows."""
    law = formula_law("c + s*x", ("x",), dict(c=(-10, 10), s=(-10, 10)))
    cov = np.array([[0.5, 0.1], [0.1, 0.2]])
    sigma2 = 0.3
    post = Posterior(law=law, modes=(Mode(theta=np.array([1.0, 2.0]), cov=cov, sse=1.0,
                                          bic=0.0, weight=1.0),), sigma2=sigma2, n_obs=5)
    xc = np.array([[0.0], [1.0], [4.0]])
    cost = np.array([1.0, 2.0, 40.0])
    xt = np.array([[5.0], [6.0]])
    G = np.column_stack([np.ones(2), xt[:, 0]])
    expected = []
    for x, c in zip(xc[:, 0], cost, strict=True):
        j = np.array([1.0, x])
        red = float(np.sum((G @ cov @ j) ** 2) / (sigma2 + j @ cov @ j))
        expected.append(red / (c / 10.0) ** 0.4)
    got = variance_scores(post, xc, cost, xt, total_cost=10.0, gamma=0.4)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert int(np.argmax(got)) == int(np.argmax(expected)) == 1
    # with γ = 0 the costly far candidate (most informative about the target) wins
    assert int(np.argmax(variance_scores(post, xc, cost, xt, 10.0, gamma=0.0))) == 2


def test_cost_expression_is_safe():
    cols = {"N": np.array([1.0, 2.0]), "D": np.array([3.0, 4.0])}
    np.testing.assert_allclose(evaluate_cost("6*N*D", cols), [18.0, 48.0])
    for bad in ("__import__('os')", "N.real", "N if D else 1", "unknown*N"):
        with pytest.raises(ValueError):
            evaluate_cost(bad, cols)


def _write(tmp_path, pool=None, target=None):
    p, t = _frames()
    p = p if pool is None else pool
    t = t if target is None else target
    p.to_csv(tmp_path / "pool.csv", index=False)
    t.to_csv(tmp_path / "target.csv", index=False)
    bounds = ",".join(f"{k}={lo}:{hi}" for k, (lo, hi) in BOUNDS.items())
    return ["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
            str(tmp_path / "target.csv"), "--formula", FORMULA, "--bounds", bounds,
            "--cost", "6*N*D", "--map", "N=params,D=tokens", "--starts", "8", "-q"]


def test_cli_replay_writes_checkpoints(tmp_path, capsys):
    args = _write(tmp_path)
    out = tmp_path / "out.json"
    assert main([*args, "--budgets", "1%,0.05", "--seed", "0", "--json", str(out)]) == 0
    result = json.loads(out.read_text())  # 1% as every other command's budgets (refused)
    assert [c["budget"] for c in result["checkpoints"]] == [0.01, 0.05]
    for c in result["checkpoints"]:
        assert set(c) == {"budget", "spent_fraction", "n_observed", "r2", "params", "status",
                          "interval"}
        assert 0 <= c["interval"]["coverage80"] <= 1
    printed = capsys.readouterr().out
    assert "spent_fraction" in printed and "cover80" in printed


def _propose_cli(tmp_path, pool: pd.DataFrame, n_done: int, batch: int = 3) -> dict:
    """``design --runs`` with the first ``n_done`` pool rows done, budget 5 %: its JSON."""
    args = _write(tmp_path, pool=pool.drop(columns="loss"))
    pool.iloc[:n_done].to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "next.json"
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "0.05", "--batch",
                 str(batch), "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_cli_propose_batch(tmp_path):
    pool, _ = _frames()
    result = _propose_cli(tmp_path, pool, 10)
    rows = [p["row"] for p in result["proposals"]]
    assert [p["data_row"] for p in result["proposals"]] == [r + 1 for r in rows]
    assert len(rows) == 3 == len(set(rows)) and not set(rows) & set(range(10))
    spent = result["spent_fraction"] + sum(p["cost_fraction"] for p in result["proposals"])
    assert spent <= 0.05 + 1e-12
    _, target = _frames()  # the target rows' predictions from the 10 runs done
    preds = result["target_prediction"]
    assert [p["target_row"] for p in preds] == list(range(len(target)))
    assert [p["N"] for p in preds] == pytest.approx(target.params.tolist())
    assert all(p["lo95"] < p["lo80"] < p["hi80"] < p["hi95"] for p in preds)
    law = formula_law(FORMULA, ("N", "D"), BOUNDS)
    done = pool.iloc[:10]
    ref = target_predictions(law, done[["params", "tokens"]].to_numpy(), done.loss.to_numpy(),
                             make_target(target, law, variable_map=VMAP), seed=0, n_starts=8)
    assert [p["mean"] for p in preds] == pytest.approx([r["mean"] for r in ref])


def test_cli_bad_inputs_exit_2(tmp_path, capsys):
    pool, target = _frames()
    args = _write(tmp_path)
    assert main([*args, "--budgets", "0.01,2"]) == 2
    assert "--budgets '0.01,2': expected a fraction of the pool's total cost in (0, 1], got " \
        "'2' (for 2 % write 0.02 or 2%)" in capsys.readouterr().err
    assert main([*args, "--budget", "0.05"]) == 2  # --budget without --runs
    assert main([*args[:-5], "--cost", "6*N*Q", *args[-3:]]) == 2
    bad = pool.copy()
    bad.loc[3, "tokens"] = -1.0  # negative cost at data row 4
    assert main(_write(tmp_path, pool=bad)) == 2
    assert re.search(r"data row 4: cost '6\*N\*D' = -[0-9.]+e\+07 is not", capsys.readouterr().err)
    assert main(_write(tmp_path, pool=pool.drop(columns="tokens"))) == 2
    grouped = pool.assign(g=["a", "b"] * 32)
    assert main([*_write(tmp_path, pool=grouped), "--group", "g"]) == 2
    assert "2 groups" in capsys.readouterr().err
    with pytest.raises(RunTableError, match="column 'loss'"):
        make_pool(pool.assign(loss="x"), formula_law(FORMULA, ("N", "D"), BOUNDS), "6*N*D",
                  response="loss", variable_map=VMAP, require_response=True)


def test_cli_pool_rows_the_formula_cannot_use_are_named_not_fitted_around(tmp_path, capsys):
    """A new-user trial: a negative size (with a cost that stays positive) gave 'failed: no
    finite start' at every checkpoint, r2 -1 and exit 0; a bound on a column's name made the
    column a fitted constant; a text size said only 'could not convert string to float'."""
    pool, _ = _frames()
    args = _write(tmp_path)
    cost = args.index("--cost") + 1
    neg = pool.copy()
    neg.loc[5, "params"] = -2e7
    args = _write(tmp_path, pool=neg)
    args[cost] = "D"
    assert main([*args, "--budgets", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "pool.csv: data row 6 (params=-2e+07, tokens=" in err and "not finite" in err, err
    args = _write(tmp_path)
    args[args.index("--formula") + 1] = "E + A*N**(-a) + B*tokens**(-b)"
    args[args.index("--bounds") + 1] += ",tokens=1:10"
    args[args.index("--map") + 1] = "N=params"
    args[cost] = "6*N*tokens"
    assert main([*args, "--budgets", "0.1"]) == 2
    assert "['tokens'] given bounds but also a column of" in capsys.readouterr().err
    text = pool.astype({"params": object})
    text.loc[10, "params"] = "3e7x"
    assert main([*_write(tmp_path, pool=text), "--budgets", "0.1"]) == 2
    assert "pool.csv: data row 11, column 'params' (variable N): '3e7x' is not a number" in \
        capsys.readouterr().err


def test_cli_messages_name_the_flag_the_file_and_the_fix(tmp_path, capsys):
    """The errors a new user met: no --map, a NaN response, a budget above 1, too few runs,
    and options of the other mode (reported as ignored, not silently dropped)."""
    pool, target = _frames()
    args = _write(tmp_path)
    no_map = [a for a in args if a not in ("--map", "N=params,D=tokens")]
    assert main(no_map) == 2
    err = capsys.readouterr().err
    assert "neither parameters" in err and "--map" in err and "'params'" in err
    nan = pool.copy()
    nan.loc[3, "loss"] = np.nan
    assert main(_write(tmp_path, pool=nan)) == 2
    err = capsys.readouterr().err
    assert "data row 4, column 'loss': nan is not a finite number" in err, err
    args = _write(tmp_path, pool=pool.drop(columns="loss"))
    pool.iloc[:3].to_csv(tmp_path / "few.csv", index=False)
    runs = ["--runs", str(tmp_path / "few.csv")]
    assert main([*args, *runs, "--budget", "1.5"]) == 2
    assert "--budget 1.5" in capsys.readouterr().err
    assert main([*args, *runs, "--budget", "0.05"]) == 0  # too few to fit: the pilot's rows
    assert "3 runs done, fewer than the law's 5 parameters" in capsys.readouterr().err
    done = pool.iloc[:10].copy()
    done.loc[done.index[2], "params"] *= 1.5  # a typo: no pool row has these inputs
    done.to_csv(tmp_path / "done.csv", index=False)
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "0.05",
                 "--budgets", "0.1", "--method", "random"]) == 0
    err = capsys.readouterr().err
    assert "--budgets is for replays" in err and "--method is for replays" in err
    assert "1 of the 10 runs done match no pool row" in err
    assert main([*_write(tmp_path), "--budgets", "0.01", "--batch", "3"]) == 0
    assert "--batch is for proposals" in capsys.readouterr().err
    assert main([*_write(tmp_path, target=target.drop(columns="loss")), "--budgets",
                 "0.01"]) == 0
    assert "not scored" in capsys.readouterr().err


def test_cached_scores_equal_direct_scores(setup):
    """The replay's per-centre Jacobian cache gives the same scores as variance_scores, also
    after rank-one updates (same centres, new covariances and weights)."""
    from scalebo.design import build_posterior, condition_on_mean
    from scalebo.design.acquisition import JacobianCache, cached_variance_scores
    from scalebo.fitting.formula_fit import fit_formula

    law, pool, target = setup
    rows = np.arange(0, pool.n, 5)
    fit = fit_formula(law, pool.X[rows], pool.y[rows], residuals="natural", n_starts=8)
    post = build_posterior(law, fit, pool.X[rows], pool.y[rows], X_target=target.X)
    cp, ct = JacobianCache(law, pool.X), JacobianCache(law, target.X)
    cand = np.setdiff1d(np.arange(pool.n), rows)
    for _ in range(3):
        direct = variance_scores(post, pool.X[cand], pool.cost[cand], target.X,
                                 pool.total_cost)
        cached = cached_variance_scores(post, cp, cand, pool.cost[cand], ct, pool.total_cost)
        np.testing.assert_allclose(cached, direct, rtol=1e-10, atol=0)
        i = int(cand[np.argmax(direct)])
        post = condition_on_mean(post, pool.X[i], float(pool.y[i]))
        cand = cand[cand != i]


def test_cheap_refits_match_full_refits_at_every_step(setup):
    """The default design (warm refits every 10 % growth, 16 fresh starts per full refit,
    rank-one updates in between) against a full 64-start refit at every step: the same
    first picks after the pilot, and the same checkpoint R² (noise-free pool)."""
    law, pool, target = setup
    kw = dict(budgets=(0.01, 0.05), n_starts=16, seed=2)
    cheap = design_replay(pool, target, law, **kw)
    full = design_replay(pool, target, law, design_starts=64, refit_growth=0.0,
                         full_growth=1.0, **kw)
    n = cheap.n_pilot
    assert cheap.order[: n + 3] == full.order[: n + 3]
    for a, b in zip(cheap.checkpoints, full.checkpoints, strict=True):
        assert a.r2 > 0.99 and abs(a.r2 - b.r2) < 0.005, (a.r2, b.r2)


def test_conditioning_keeps_mode_weights_finite_when_a_downdated_variance_rounds_negative():
    """Two modes; the first's covariance has lost positive definiteness the way many rank-one
    downdates can leave it (jᵀΣj = −0.5 < −σ² at the new row). The update must still give
    finite weights that sum to 1: the mode's predictive variance is floored at σ² (its s² at
    0, as in variance_scores), so with y at both centres' mean the weights stay equal."""
    law = formula_law("c + s*x", ("x",), dict(c=(-10, 10), s=(-10, 10)))
    bad = np.array([[0.5, -1.0], [-1.0, 1.0]])  # jᵀΣj at x = 1: 0.5 − 2 + 1 = −0.5
    good = np.array([[0.5, 0.1], [0.1, 0.2]])
    post = Posterior(law=law, modes=(
        Mode(theta=np.array([1.0, 2.0]), cov=bad, sse=1.0, bic=0.0, weight=0.5),
        Mode(theta=np.array([1.0, 2.0]), cov=good, sse=1.0, bic=0.0, weight=0.5)),
        sigma2=0.3, n_obs=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value encountered in log"
        new = condition_on_mean(post, np.array([1.0]), y=3.0)
    w = np.array([m.weight for m in new.modes])
    assert np.all(np.isfinite(w)) and w.sum() == pytest.approx(1.0)
    # both centres predict 3.0 at x = 1, so only the variances differ: N(0; 0, 0.3) vs
    # N(0; 0, 0.3 + 0.9) → weights ∝ 1/√0.3 and 1/√1.2
    np.testing.assert_allclose(w, np.array([1 / np.sqrt(0.3), 1 / np.sqrt(1.2)])
                               / (1 / np.sqrt(0.3) + 1 / np.sqrt(1.2)), rtol=1e-12)


def test_cli_propose_budget_as_percent_cut_batch_and_spent_budget(tmp_path, capsys):
    """A new-user trial: --budget 5% was refused (--budgets took it), a batch cut by the
    budget said nothing, and a spent budget exited 2 (bad input) where suggest exits 3."""
    pool, _ = _frames()
    args = _write(tmp_path, pool=pool.drop(columns="loss"))
    pool.iloc[:10].to_csv(tmp_path / "done.csv", index=False)
    runs = ["--runs", str(tmp_path / "done.csv")]
    spent = float((6 * pool.params * pool.tokens).iloc[:10].sum()
                  / (6 * pool.params * pool.tokens).sum())
    assert main([*args, *runs, "--budget", "5%", "--batch", "2"]) == 0
    capsys.readouterr()
    cheapest = float((6 * pool.params * pool.tokens).iloc[10:].min()
                     / (6 * pool.params * pool.tokens).sum())
    tight = spent + 1.5 * cheapest  # room for one of the cheapest rows, not two
    assert main([*args, *runs, "--budget", f"{tight:.12g}", "--batch", "5"]) == 0
    out, err = capsys.readouterr()
    assert "1 of the 5 rows asked for (--batch) fit what is left of --budget" in err, err
    assert out.splitlines()[0].split()[0] == "data_row"
    assert main([*args, *runs, "--budget", f"{spent / 2:.6g}"]) == 3
    assert "already spent" in capsys.readouterr().err


def test_a_pool_row_copied_by_mistake_is_named(tmp_path, capsys):
    pool, _ = _frames()
    copied = pd.concat([pool, pool.iloc[[2]]], ignore_index=True)
    assert main([*_write(tmp_path, pool=copied), "--budgets", "0.05"]) == 0
    assert (f"pool.csv: data rows 3, {len(copied)} repeat another row in every column (2 "
            "rows): each counts as a row of its own") in capsys.readouterr().err


def test_a_batch_cut_by_an_exhausted_pool_does_not_ask_for_more_budget(tmp_path, capsys):
    """A review: 12 of 15 rows done, --budget 100% --batch 5 gave 3 rows and 'raise it for
    more', which cannot be done."""
    pool, _ = _frames()
    small = pool.iloc[:15]
    args = _write(tmp_path, pool=small.drop(columns="loss"))
    small.iloc[:12].to_csv(tmp_path / "done.csv", index=False)
    assert main([*args, "--runs", str(tmp_path / "done.csv"), "--budget", "100%", "--batch",
                 "5"]) == 0
    assert "3 of the 5 rows asked for (--batch) are proposed: every other pool row is done" \
        in capsys.readouterr().err
