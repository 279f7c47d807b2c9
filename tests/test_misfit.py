"""A converged fit that contradicts its runs is said: E above the best run's loss, or a
prediction at more compute above a loss already reached (hand-made cases, a clean synthetic
fit that must stay quiet, and Porian et al.'s isoFLOP points where it happens)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from scalebo.data.runs import load_runs
from scalebo.fitting.misfit import misfit_notes
from scalebo.fitting.summary import fit_summary

C = np.array([1e18, 1e19, 1e20])
LOSS = np.array([3.4, 3.1, 2.9])


def test_e_above_the_best_run_is_said():
    (note,) = misfit_notes("compute", {"E": 2.95, "A": 1.0, "alpha": 0.1}, C, LOSS)
    assert "E = 2.95 nats is above the best run's loss (2.9 nats at 1e+20 FLOPs)" in note
    assert misfit_notes("compute", {"E": 2.85}, C, LOSS) == []


def test_a_prediction_above_a_loss_already_reached_is_said():
    rows = [{"C": 1e21, "loss": 2.95}, {"C": 1e21, "loss": 2.8}, {"C": 1e17, "loss": 9.0},
            {"C": 5e19, "loss": 3.0}]
    (note,) = misfit_notes("chinchilla", {"E": 1.7}, C, LOSS, rows)
    assert "predicts 2.95 nats at 1e+21 FLOPs, above the 2.9 nats" in note
    # 1e17 and 5e19 FLOPs are inside the runs' range (3.0 > 2.9 there is a fit through
    # noisy runs, not a contradiction): not checked


def test_a_good_fit_says_nothing():
    rng = np.random.default_rng(0)
    N = np.repeat(np.geomspace(5e7, 1e9, 5), 4)
    D = np.tile(np.geomspace(1e9, 3e10, 4), 5)
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(rng.normal(0, 0.003, N.size))
    table = load_runs(pd.DataFrame({"N": N, "D": D, "loss": loss}))
    for law in ("compute", "chinchilla"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit_summary(table, law, predict=(float(np.median(6 * N * D)), 1e22, 1e24))
        assert not [w for w in caught if "contradict" in str(w.message)
                    or "irreducible" in str(w.message)], law


def test_porian_rw_tuned_isoflop_points_converge_and_contradict_their_runs(data_dir):
    from scalebo.data.datasets import load_dataset

    table = load_dataset("porian_isoflop", data_dir, dataset="rw", hparams="tuned",
                         warmup="short", decay="const", param_count="standard",
                         loss_type="val")
    with pytest.warns(UserWarning) as caught:
        out = fit_summary(table, "chinchilla", predict=(1e21,))
    assert str(out.fit.status) == "converged"
    texts = " ".join(str(w.message) for w in caught)
    assert out.fit.params["E"] > table.frame["loss"].min()  # the contradiction itself
    assert "irreducible loss E" in texts and "contradicts the runs" in texts
    # fragility's base fit of the same points says so too (a trial: it printed only a table)
    from scalebo.analysis.fragility import build_variants, fragility

    base = build_variants(table, leave_one_out=False, drop_count=0, huber_deltas=())[:1]
    with pytest.warns(UserWarning) as caught:
        fragility(table, variants=base, target=1e24)
    texts = " ".join(str(w.message) for w in caught)
    assert "irreducible loss E" in texts and "contradicts the runs" in texts


def test_an_accuracy_given_to_a_downstream_law_is_said():
    """A trial fitted --law sigmoid --response acc: a at its bound 0, no hint that the law
    describes an error. Errors from a known Gadre law rising with the loss stay quiet."""
    from scalebo.fitting.misfit import falling_error_note

    rng = np.random.default_rng(1)
    N = np.repeat(np.geomspace(5e7, 1e9, 4), 3)
    D = np.tile(np.geomspace(1e9, 3e10, 3), 4)
    loss = 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28
    err = (0.9 - 30.0 * np.exp(-1.5 * loss)) * np.exp(rng.normal(0, 0.002, N.size))
    table = load_runs(pd.DataFrame({"N": N, "D": D, "loss": loss, "err": err, "acc": 1 - err}))
    for law, column, said in (("gadre", "acc", True), ("gadre", "err", False),
                              ("sigmoid", "acc", True)):
        summary = fit_summary(table, law, target=column)
        notes = [w for w in summary.warnings if "falls as the loss rises" in w]
        assert bool(notes) == said, (law, column, summary.warnings)
    assert falling_error_note(loss[:4], 1 - err[:4], "acc") == ""  # too few runs to judge


def test_a_fitted_loss_that_looks_diverged_is_named_by_its_data_row(tmp_path):
    """A trial's `fit --law chinchilla --frontier all` fitted a run recorded at 12 nats with
    no word (replay, suggest and status name such rows). The compute law's envelope never
    takes it (unless its cheapest cell diverged whole: then the envelope's point, the lower
    of the two, is named): no note there."""
    rng = np.random.default_rng(1)
    N = np.repeat(np.geomspace(5e7, 1e9, 5), 8)
    D = np.tile(np.repeat(np.geomspace(1e9, 3e10, 4), 2), 5)
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(rng.normal(0, 0.003, N.size))
    loss[13] = 12.0
    path = tmp_path / "runs.csv"
    pd.DataFrame({"N": N, "D": D, "lr": np.tile([1e-3, 2e-3], 20), "loss": loss}).to_csv(
        path, index=False)
    table = load_runs(path)
    with pytest.warns(UserWarning, match=r"data row 14: a loss over 2x its cell's best, or "
                      r"3x a run's that cost no more, or 3x the median cell best when every "
                      r"run that cost no more is \(up to 12 nats; the median cell best is "
                      r".*--diverged-above LOSS"):
        fit_summary(table, "chinchilla", frontier="all")
    # the cheapest cell diverged whole: nothing cheaper, nothing in its cell to compare with,
    # and the envelope takes it (a review); over 3x the median cell best names it, there
    # only (applied to every run, that rule flagged an honest undertrained isoFLOP run)
    cheapest = np.flatnonzero((N == N.min()) & (D == D.min()))
    loss[13], loss[cheapest] = (1.69 + 406.4 / N[13]**0.34 + 410.7 / D[13]**0.28), [12.0, 12.5]
    pd.DataFrame({"N": N, "D": D, "lr": np.tile([1e-3, 2e-3], 20), "loss": loss}).to_csv(
        path, index=False)
    with pytest.warns(UserWarning, match=rf"data row {cheapest[0] + 1}: a loss over 2x"):
        fit_summary(load_runs(path), "compute")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit_summary(table, "compute")
    assert not any("diverged runs?" in str(w.message) for w in seen)


def test_the_median_rule_judges_only_runs_with_nothing_else_to_compare_with():
    """A review's case from Porian et al.'s runs: an undertrained isoFLOP run at 10.01 nats
    beside a run of the same cost at 4.39 is honest (3 x 4.39 > 10.01), although it is over
    3x the median cell best; a lone cheapest cell at 12 nats is not."""
    from scalebo.search.runs_columns import suspect_diverged

    cost = np.array([1.0, 1.0, 10.0, 100.0, 1e3, 1e4])
    loss = np.array([4.39, 10.01, 3.3, 3.2, 3.0, 2.9])
    high, median = suspect_diverged(loss, np.arange(6), cost)
    assert median == pytest.approx(3.25) and 10.01 > 3 * median
    assert not high.any()
    lone = np.array([12.0, 3.5, 3.3, 3.2, 3.0, 2.9])  # the cheapest cell alone at its cost
    assert suspect_diverged(lone, np.arange(6), np.array([1.0, 2, 10, 100, 1e3, 1e4]))[0
                            ].tolist() == [True, False, False, False, False, False]
    assert not suspect_diverged(lone, np.arange(6))[0].any()  # without costs: no such rule
    # a review: two cheapest cells of one cost, or a run of cheap cells, that all diverged
    # are flagged together; a cheapest cell's badly tuned run beside its good one is not
    tied = np.array([12.0, 12.5, 3.5, 3.4, 3.3, 3.2])
    assert suspect_diverged(tied, np.arange(6), np.array([1.0, 1, 2, 3, 4, 5]))[0
                            ].tolist() == [True, True, False, False, False, False]
    chain = np.array([12.0, 11.0, 3.4, 3.3, 3.2])
    assert suspect_diverged(chain, np.arange(5), np.arange(1.0, 6))[0].tolist()[:2] == [
        True, True]
    tuned = np.array([5.0, 9.5, 3.1, 3.0, 2.9, 2.8])  # cell 0 holds the 5.0 and the 9.5
    assert not suspect_diverged(tuned, np.array([0, 0, 1, 2, 3, 4]),
                                np.array([1.0, 1, 2, 3, 4, 5]))[0].any()


@pytest.mark.parametrize("alpha, beta", [(0.34, 0.28), (0.5, 0.25)])
def test_fit_says_when_its_compute_optimal_ratio_lies_outside_the_runs(alpha, beta):
    """A trial: fit --law chinchilla --predict 1e25 put StepLaw's D*/N* at 0.04 tokens per
    parameter (runs: 18.6-466) with no word, while allocate warned. The truth's own optimum
    (minimized here over N along 6·N·D = C) decides whether the note is due."""
    from scipy.optimize import minimize_scalar

    N = np.repeat(np.geomspace(5e7, 1e9, 5), 4)
    D = np.tile(np.geomspace(1e9, 3e10, 4), 5)
    loss = 1.69 + 406.4 / N**alpha + 410.7 / D**beta
    C = 1e25
    best = minimize_scalar(lambda u: 406.4 / np.exp(u)**alpha + 410.7 / (C / 6 / np.exp(u))**beta,
                           bounds=(np.log(1e3), np.log(1e18)), method="bounded")
    truth = C / 6 / np.exp(best.x) ** 2  # D*/N* of the true law
    far = not (D / N).min() / 3 <= truth <= 3 * (D / N).max()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = fit_summary(load_runs(pd.DataFrame({"N": N, "D": D, "loss": loss})),
                              "chinchilla", predict=[C])
    said = [w for w in summary.warnings if "tokens per parameter: its optimum lies" in w]
    assert summary.predictions[0]["tokens_per_param"] == pytest.approx(truth, rel=0.05)
    assert bool(said) == far, (truth, said)
    assert far == (alpha > 0.4)  # the cases are the ones meant: one quiet, one said


def test_too_few_points_suggest_all_runs_only_when_they_add_distinct_points():
    """A trial: 'use more runs or all runs (frontier all, 12 runs)' on 4 N × 3 lr at one D,
    and with --frontier all the law was unidentified (4 distinct (N, D) points): the hint
    now counts distinct points, and suggests all runs only when they are enough."""
    from scalebo.errors import FitError

    N = np.repeat([1e8, 2e8, 4e8, 8e8], 3)
    one_d = pd.DataFrame({"N": N, "D": 1e10, "lr": np.tile([1e-4, 1e-3, 1e-2], 4),
                          "loss": 2.5 + 1e3 / N**0.34 + np.tile([0.02, 0.0, 0.05], 4)})
    with pytest.raises(FitError, match=r"the cell points are only 4 runs; train runs at more "
                                       r"distinct \(N, D\) values first \(the table has 4\)$"):
        fit_summary(load_runs(one_d), "chinchilla")
    # the compute law's envelope drops a run at its compute (above a cheaper one): all runs
    # at 3 distinct computes are enough
    rows = pd.DataFrame({"N": [1e8, 1e8, 2e8, 2e8], "D": [1e9, 2e9, 2e9, 2e9],
                         "lr": [1e-3, 1e-3, 1e-3, 1e-2], "loss": [3.0, 2.9, 2.95, 2.92]})
    with pytest.raises(FitError, match=r"the envelope points are only 2 runs; use more runs or "
                                       r"all runs \(frontier 'all', 4 runs at 3 distinct C "
                                       r"points\)$"):
        fit_summary(load_runs(rows), "compute", frontier="envelope")


def test_a_response_is_checked_as_the_loss_is_and_an_accuracy_is_said():
    """A trial: `--response y` with a y under E got no word (the check read `loss`), and an
    accuracy fitted with the Chinchilla law (exponents at their bound) passed with "nats"."""
    rng = np.random.default_rng(2)
    N = np.repeat(np.geomspace(5e7, 1e9, 5), 4)
    D = np.tile(np.geomspace(1e9, 3e10, 4), 5)
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(rng.normal(0, 0.003, N.size))
    err = 0.9 - 0.4 * np.exp(-1.0 * (loss - 2.0))  # an error that falls with the loss
    frame = pd.DataFrame({"N": N, "D": D, "loss": loss, "y": loss, "err": err, "acc": 1 - err})
    frame.loc[3, "y"] = 1.2  # far under every other run: no law of this form reaches it
    table = load_runs(frame)
    warned = fit_summary(table, "chinchilla", target="y").warnings
    assert any("irreducible 'y' E = " in w and "above the best run's 'y' (1.2 at" in w
               and "nats" not in w for w in warned), warned
    acc = fit_summary(table, "chinchilla", target="acc").warnings
    assert any("'acc' rises with compute (Spearman" in w for w in acc), acc
    for column in ("err", "loss"):  # falling responses: no such note
        assert not [w for w in fit_summary(table, "chinchilla", target=column).warnings
                    if "rises with compute" in w], column


def test_a_laws_own_inputs_are_not_judged_as_settings_at_their_edge():
    """A trial: `--law width_depth --frontier cell` warned that the best run of 24 cells sat at
    the edge of its 'width' values, though width is the law's input (every run is fitted)."""
    # 12·w²·d: (256, 64), (512, 16) and (1024, 4) share one N, so (N, D) cells hold 3 widths
    w, d, D = (a.ravel() for a in np.meshgrid([256.0, 512, 1024, 2048], [4.0, 16, 64],
                                             [1e9, 4e9, 1.6e10]))
    frame = pd.DataFrame({"width": w, "depth": d, "N": 12 * w * w * d, "D": D,
                          "loss": 1.8 + 300 / w**0.5 + 3 / d**0.6 + 400 / D**0.28})
    table = load_runs(frame, hyperparameters=["width", "depth"])
    summary = fit_summary(table, "width_depth", frontier="cell")
    assert len(summary.points) == len(frame)  # each (width, depth, D) is its own point
    assert not [w for w in summary.warnings if "edge of those values" in w], summary.warnings
