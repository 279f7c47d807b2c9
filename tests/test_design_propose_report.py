"""What propose mode (``scalebo design --runs``) reports besides its proposals (a new-user
trial): the fit of the runs done — parameters, status, message — so that a law the runs
cannot identify (five runs at one model size) is visible, and, when the budget is spent
(exit 3), the fit and the target prediction still, in the JSON and on stderr."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scalebo.cli.main import main

FORMULA = "E + A*N**(-a) + B*D**(-b)"
BOUNDS = "E=0:5,A=1:1e5,a=0.05:1,B=1:1e5,b=0.05:1"
TRUTH = {"E": 1.7, "A": 406.4, "a": 0.34, "B": 410.7, "b": 0.28}


def _truth(N, D):
    return TRUTH["E"] + TRUTH["A"] * N ** -TRUTH["a"] + TRUTH["B"] * D ** -TRUTH["b"]


def _pool() -> pd.DataFrame:
    """5 N × 5 D (row order: N outer, D inner), noise-free."""
    N, D = (a.ravel() for a in np.meshgrid(np.geomspace(2e7, 1e9, 5),
                                           np.geomspace(4e8, 2e10, 5), indexing="ij"))
    return pd.DataFrame({"N": N, "D": D, "loss": _truth(N, D)})


def _run(tmp_path, done: pd.DataFrame, budget: str) -> tuple[int, dict]:
    pool = _pool()
    pool.drop(columns="loss").to_csv(tmp_path / "pool.csv", index=False)
    pd.DataFrame({"N": [3e9, 1e10], "D": [6e10, 2e11]}).to_csv(tmp_path / "t.csv",
                                                                index=False)
    done.to_csv(tmp_path / "done.csv", index=False)
    out = tmp_path / "p.json"
    code = main(["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
                 str(tmp_path / "t.csv"), "--formula", FORMULA, "--bounds", BOUNDS,
                 "--cost", "6*N*D", "--runs", str(tmp_path / "done.csv"), "--budget", budget,
                 "--starts", "16", "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_the_fit_of_the_runs_done_is_reported_and_an_unidentified_one_warned(tmp_path,
                                                                            capsys):
    pool = _pool()
    code, result = _run(tmp_path, pool.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14]], "1")
    assert code == 0
    fit = result["fit"]
    assert (fit["status"], fit["identified"], fit["n_runs"]) == ("converged", True, 10)
    assert fit["params"] == pytest.approx(TRUTH, rel=1e-3)  # noise-free: the truth
    err = capsys.readouterr().err
    assert "fit of the 10 runs done: converged (" in err and "E=1.7" in err, err
    code, result = _run(tmp_path, pool.iloc[:5], "1")  # five runs, all at N = 2e7
    assert code == 0
    assert (result["fit"]["status"], result["fit"]["identified"]) == ("unidentified", False)
    assert "N takes one value" in result["fit"]["message"]
    err = capsys.readouterr().err
    assert "warning: the runs done do not identify the law: cannot be identified" in err, err


def test_a_spent_budget_exits_3_with_the_fit_and_the_target_prediction(tmp_path, capsys):
    pool = _pool()
    done = pool.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14]]
    spent = float((done.N * done.D).sum() / (pool.N * pool.D).sum())
    code, result = _run(tmp_path, done, f"{spent / 2:.6g}")
    assert code == 3
    assert result["stop"] is True and result["proposals"] == []
    assert "already spent" in result["message"]
    assert result["fit"]["status"] == "converged"
    preds = result["target_prediction"]
    truth = _truth(np.array([3e9, 1e10]), np.array([6e10, 2e11]))
    assert [p["mean"] for p in preds] == pytest.approx(truth, rel=1e-3)
    err = capsys.readouterr().err
    assert "target region (2 rows): predicted" in err and "stop: the runs done" in err, err


def test_the_proposal_band_is_the_design_posterior_and_says_by_how_much(tmp_path, capsys):
    """A trial: a proposal's lo80/hi80 were 20–40× a Laplace interval of the same fit. They
    are the design posterior's band (ScaleBench's noise, shrunk toward the response's
    spread), so they are labelled with its noise factor; checked against an independent
    fit (scipy's curve_fit, whose s² is SSE/(n − p)) on a pool with a known truth and noise
    sd 0.01, without re-deriving ScaleBench's noise: the design posterior's band without its
    weak prior is exactly noise_factor × curve_fit's delta-method band (so the factor is the
    ratio of the two noise sds), the first proposal's band (prior kept) is narrower, but
    not by half, and the residual-noise posterior's band is curve_fit's."""
    from scipy.optimize import curve_fit
    from scipy.stats import norm

    from scalebo.design import build_posterior, make_pool, make_target, propose_batch
    from scalebo.design.replay import fit_rows
    from scalebo.laws.formula import formula_law, parse_bounds

    rng = np.random.default_rng(7)
    pool_f = _pool()
    pool_f["loss"] += 0.01 * rng.standard_normal(len(pool_f))
    done = pool_f.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14, 1, 5, 8, 16, 22]]
    X, y = done[["N", "D"]].to_numpy(float), done.loss.to_numpy()
    law = formula_law(FORMULA, ("N", "D"), parse_bounds(BOUNDS))
    pool = make_pool(pool_f.drop(columns="loss"), law, "6*N*D")
    target = make_target(pd.DataFrame({"N": [3e9, 1e10], "D": [6e10, 2e11]}), law)
    (prop,) = propose_batch(pool, target, law, X, y, 6 * X[:, 0] * X[:, 1], 1.0, 1,
                            n_starts=16)

    def f(v, E, A, a, B, b):
        return E + A * v[0] ** -a + B * v[1] ** -b

    theta, cov = curve_fit(f, X.T, y, p0=list(TRUTH.values()), maxfev=20_000)
    at = np.array([[prop.inputs["N"]], [prop.inputs["D"]]])
    grad = np.array([(f(at, *(theta + h)) - f(at, *theta))[0] / h[i]
                     for i, h in enumerate(np.diag(1e-6 * np.abs(theta)))])
    half = norm.ppf(0.9) * np.sqrt(grad @ cov @ grad)  # curve_fit: s² = SSE/(n − p)
    fit = fit_rows(law, X, y, n_starts=16, seed=0)
    flat = build_posterior(law, fit, X, y, X_target=target.X, prior_fraction=np.inf)
    assert len(flat.modes) == 1  # one Gaussian: its band scales with the noise sd
    lo, hi = flat.interval(at.T, 0.8)
    assert (hi[0] - lo[0]) / 2 / half == pytest.approx(prop.noise_factor, rel=1e-3)
    ratio = (prop.hi80 - prop.lo80) / 2 / half
    assert 0.5 * prop.noise_factor < ratio < prop.noise_factor, (ratio, prop)
    lo, hi = build_posterior(law, fit, X, y, noise="residual").interval(at.T, 0.8)
    assert (hi[0] - lo[0]) / 2 == pytest.approx(half, rel=0.02)
    # the command labels the band and prints the factor
    code, result = _run(tmp_path, done, "1")
    assert code == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split()[-2:] == ["design_lo80", "design_hi80"]
    factor = result["proposals"][0]["noise_factor"]
    assert f"noise sd is {factor:.3g} x the fit's residual sd" in err, err
    assert "not a calibrated interval" in err


@pytest.mark.parametrize("group_budget", ["per-group", "shared"])
def test_a_grouped_proposal_reports_the_fit_it_was_chosen_by(tmp_path, monkeypatch,
                                                             group_budget):
    """A review of 0.4.20: propose fitted group i with seed + 1000·i, then the report refitted
    every group with the seed, so the fit printed and in the JSON was not the one behind the
    proposals (and each group was fitted twice). Every fit is counted (``fit_rows``) and
    every fit a posterior is built on is kept: one fit per group, and the JSON's fit of each
    group is exactly the one its proposals' posterior came from."""
    import scalebo.design.predictions as predictions
    import scalebo.design.propose as propose

    made, used = [], []
    fit_rows, build = predictions.fit_rows, propose.build_posterior
    monkeypatch.setattr(predictions, "fit_rows",
                        lambda *a, **k: made.append(fit_rows(*a, **k)) or made[-1])
    monkeypatch.setattr(propose, "build_posterior",
                        lambda law, fit, *a, **k: used.append(fit) or build(law, fit, *a, **k))
    rng = np.random.default_rng(3)
    x = np.tile(np.geomspace(1, 1000, 12), 2)
    fam = np.repeat(["g1", "g2"], 12)
    loss = np.where(fam == "g1", 1.5 + 5 * x**-0.4, 2.5 + 12 * x**-0.7)
    pool = pd.DataFrame({"x": x, "family": fam, "loss": loss + 0.01 * rng.standard_normal(24)})
    pool.drop(columns="loss").to_csv(tmp_path / "pool.csv", index=False)
    pool.iloc[[0, 2, 4, 6, 8, 12, 14, 16, 18, 20]].to_csv(tmp_path / "done.csv", index=False)
    pd.DataFrame({"x": [3000.0, 3000.0], "family": ["g2", "g1"]}).to_csv(tmp_path / "t.csv",
                                                                         index=False)
    out = tmp_path / "p.json"
    assert main(["design", "--pool", str(tmp_path / "pool.csv"), "--target-region",
                 str(tmp_path / "t.csv"), "--formula", "a + b*x**(-c)", "--bounds",
                 "a=0:5,b=0.1:100,c=0.05:2", "--cost", "x", "--group", "family",
                 "--group-budget", group_budget, "--runs", str(tmp_path / "done.csv"),
                 "--budget", "0.5", "--batch", "2", "--starts", "6", "--seed", "4",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(made) == 2 and len(used) == 2, (len(made), len(used))  # one fit per group
    assert [u is m for u, m in zip(used, made, strict=True)] == [True, True]
    assert {p["group"] for p in result["proposals"]} == {"g1", "g2"}
    for g, fit in zip(("g1", "g2"), used, strict=True):  # sorted group order
        assert result["fit"][g]["params"] == dict(fit.params)  # exact, not approximate
    assert result["fit"]["g1"]["params"] != result["fit"]["g2"]["params"]


def test_noise_free_runs_say_the_fit_passes_through_them_not_a_huge_factor(tmp_path,
                                                                           capsys):
    """A review of 0.4.20: on noise-free runs the legend printed 'noise sd is 8.75e+10 x the
    fit's residual sd' while --help promised 10–30×. The runs here lie on the law, so the
    residual is rounding: the legend says the fit passes through them, and --help promises
    no range."""
    from types import SimpleNamespace

    from scalebo.cli.design_propose import _log_band_legend

    pool = _pool()
    code, result = _run(tmp_path, pool.iloc[[0, 6, 12, 18, 24, 4, 20, 2, 10, 14]], "1")
    assert code == 0 and result["proposals"][0]["noise_factor"] > 1e4
    err = " ".join(capsys.readouterr().err.split())
    assert ("whose noise sd is ScaleBench's estimate from the response's spread alone, as the "
            "fit passes through the runs done (residual sd ~0") in err, err
    assert "x the fit's residual sd" not in err
    # by group: the fitted groups' factors, and the exact one said
    _log_band_legend(tuple(SimpleNamespace(noise_factor=f) for f in (12.0, 31.0, 9e10, None)))
    err = " ".join(capsys.readouterr().err.split())
    assert ("noise sd is 12 to 31 (by group) x the fit's residual sd (ScaleBench's estimate; "
            "JSON noise_factor; in a group where the fit passes through the runs done") in err
    assert main(["design", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split())
    assert "noise_factor x the fit's residual sd, printed: no fixed range" in helped
    assert "10-30" not in helped
