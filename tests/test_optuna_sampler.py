"""ScaleboSampler: Optuna trials driven by scalebo's loop; two worker processes on one
journal-file storage never train a configuration twice nor overrun the budget."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

optuna = pytest.importorskip("optuna", reason="the [optuna] extra is not installed")

from scalebo.bench.synthetic import make_synthetic  # noqa: E402
from scalebo.integrations.optuna import ScaleboSampler  # noqa: E402
from scalebo.search.grid import Grid  # noqa: E402

AXES = {"N": [5e7, 1e8, 2e8], "D": [1e9, 2e9, 4e9], "lr": [5e-4, 1e-3, 2e-3], "bs": [128, 256]}
COLS = list(AXES)


def _grid():
    frame = make_synthetic(**AXES)
    return Grid.from_frame(frame[COLS], n_held_out_cells=0), frame


def _config(trial, sampler):
    """The trial's grid configuration, asked column by column as a user's objective does."""
    return tuple(trial.suggest_categorical(c, sampler.values(c)) for c in COLS)


def _study(budget: float):
    """A fresh single-worker study on the test grid: (grid, true losses, sampler, study)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid, frame = _grid()
    sampler = ScaleboSampler(grid, budget, seed=0)
    return grid, frame.set_index(COLS)["loss"], sampler, optuna.create_study(sampler=sampler)


def test_one_worker_spends_the_budget_and_stops():
    grid, truth, sampler, study = _study(0.3)

    def objective(trial):
        if trial.number in (2, 6):
            _config(trial, sampler)
            raise RuntimeError("crash")  # FAIL trials: their compute counts as spent
        return float(truth.loc[_config(trial, sampler)])

    study.optimize(objective, n_trials=500, catch=(RuntimeError,))
    trials = study.get_trials()
    used = [t for t in trials if not t.system_attrs.get("scalebo:skipped")]
    idx = [int(t.system_attrs["scalebo:index"]) for t in used]
    assert len(idx) == len(set(idx))
    spent = float(grid.cost[idx].sum())
    assert spent <= 0.3 * grid.C_total * (1 + 1e-12)
    untried = np.setdiff1d(np.arange(len(grid)), idx)
    assert spent + grid.cost[untried].min() > 0.3 * grid.C_total  # stopped only when full
    assert trials[-1].state == optuna.trial.TrialState.PRUNED and len(trials) < 500
    assert sum(t.state == optuna.trial.TrialState.FAIL for t in trials) == 2
    # COMPLETE values are what the objective returned for the proposed configuration
    for t in used:
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert t.value == pytest.approx(float(truth.loc[tuple(t.params[c] for c in COLS)]))


WORKER = textwrap.dedent("""
    import sys, optuna
    from scalebo.bench.synthetic import make_synthetic
    from scalebo.search.grid import Grid
    from scalebo.integrations.optuna import ScaleboSampler
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    path, seed = sys.argv[1], int(sys.argv[2])
    axes = {AXES!r}
    frame = make_synthetic(**axes)
    cols = list(axes)
    grid = Grid.from_frame(frame[cols], n_held_out_cells=0)
    truth = frame.set_index(cols)["loss"]
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(path))
    sampler = ScaleboSampler(grid, 0.3, seed=seed, lock_path=path + ".lock")
    study = optuna.load_study(study_name="campaign", storage=storage, sampler=sampler)
    def objective(trial):
        cfg = tuple(trial.suggest_categorical(c, sampler.values(c)) for c in cols)
        return float(truth.loc[cfg])
    study.optimize(objective, n_trials=500)
""").replace("{AXES!r}", repr(AXES))


def test_two_workers_on_one_journal(tmp_path):
    grid, _ = _grid()
    path = str(tmp_path / "journal.log")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
    optuna.create_study(study_name="campaign", storage=storage)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = [subprocess.Popen([sys.executable, str(script), path, str(s)],
                              stderr=subprocess.PIPE, text=True) for s in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    trials = optuna.load_study(study_name="campaign", storage=storage).get_trials()
    idx = [int(t.system_attrs["scalebo:index"]) for t in trials
           if not t.system_attrs.get("scalebo:skipped")]
    assert len(idx) == len(set(idx)) > 10  # no configuration trained twice
    assert float(grid.cost[idx].sum()) <= 0.3 * grid.C_total * (1 + 1e-12)
    assert {t.state for t in trials} <= {optuna.trial.TrialState.COMPLETE,
                                         optuna.trial.TrialState.PRUNED}


def test_an_enqueued_trial_claims_its_own_configuration():
    """Optuna does not sample fixed parameters: the claim must be the enqueued row (review)."""
    grid, truth, sampler, study = _study(0.3)
    wanted = {"N": 2e8, "D": 4e9, "lr": 2e-3, "bs": 256}
    study.enqueue_trial(wanted)

    def objective(trial):
        return float(truth.loc[_config(trial, sampler)])

    study.optimize(objective, n_trials=3)
    first = study.get_trials()[0]
    assert first.params == wanted
    row = grid.configs.iloc[int(first.system_attrs["scalebo:index"])]
    assert {c: float(row[c]) for c in COLS} == {c: float(v) for c, v in wanted.items()}


def test_trials_it_did_not_propose_count_as_runs():
    """A trial: finished trials added with study.add_trial were proposed and trained again,
    their losses unused and their compute uncounted."""
    grid, truth, sampler, study = _study(0.3)
    dists = {c: optuna.distributions.CategoricalDistribution(sampler.values(c)) for c in COLS}
    done = [int(i) for i in np.argsort(grid.cost, kind="stable")[:3]]  # what it picks first
    for i in done:
        params = {c: sampler.values(c)[sampler.values(c).index(
            grid.configs[c].iloc[i].item())] for c in COLS}
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, value=float(truth.loc[tuple(params.values())])))
    study.optimize(lambda t: float(truth.loc[_config(t, sampler)]), n_trials=8)
    claimed = [int(t.system_attrs["scalebo:index"]) for t in study.get_trials()
               if "scalebo:index" in t.system_attrs]
    assert len(claimed) == 8 and not set(claimed) & set(done)
    from types import SimpleNamespace

    runs = sampler._campaign(study, SimpleNamespace(number=-1))
    assert set(done) <= set(runs.completed.tolist())  # their losses are used ...
    assert runs.spent() == pytest.approx(float(grid.cost[[*done, *claimed]].sum()))  # ... paid
    # a loss that cannot be placed on the grid is left out with a warning (Optuna cannot
    # delete a trial, so an error would stop the study for good)
    study.add_trial(optuna.trial.create_trial(params={"N": 5e7}, distributions={
        "N": dists["N"]}, value=3.0))
    with pytest.warns(UserWarning, match="cannot be placed on the grid .*lacks grid column"):
        study.optimize(lambda t: float(truth.loc[_config(t, sampler)]), n_trials=1)
    assert study.get_trials()[-1].state == optuna.trial.TrialState.COMPLETE


def test_repeated_configurations_of_another_sampler_are_one_observation():
    """A review: six random trials (two of one configuration), then ScaleboSampler: every
    claim raised 'Indices repeat within one call', and the repeat was charged once."""
    grid, truth, sampler, study = _study(0.3)
    dists = {c: optuna.distributions.CategoricalDistribution(sampler.values(c)) for c in COLS}
    params = {c: sampler.values(c)[0] for c in COLS}
    for value in (3.0, 3.2):
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists,
                                                  value=value))
    study.optimize(lambda t: float(truth.loc[_config(t, sampler)]), n_trials=2)
    from types import SimpleNamespace

    runs = sampler._campaign(study, SimpleNamespace(number=-1))
    i = int(grid.index_of(pd.DataFrame([params]))[0])
    assert runs.losses[runs.completed.tolist().index(i)] == pytest.approx(3.1)
    assert runs.cost[i] == pytest.approx(2 * grid.budget_cost[i])  # both attempts paid


@pytest.mark.parametrize(("cost", "text"), [(-1e30, "-1e+30"), (float("nan"), "nan"),
                                            ("abc", "'abc'"), (0, "0")])
def test_a_bad_cost_attribute_is_named_and_the_grids_cost_used(cost, text):
    """A trial: cost = -1e30 switched the budget off (101 trials, the whole grid). A finished
    trial's attributes cannot be mended, so an error would stop the study for good."""
    grid, truth, sampler, study = _study(0.05)

    def objective(trial):
        if trial.number == 0:
            trial.set_user_attr("cost", cost)
        return float(truth.loc[_config(trial, sampler)])

    with pytest.warns(UserWarning, match=f"trial 0: user attribute 'cost' must be a finite "
                                         f"number > 0 .*got {re.escape(text)}; the grid's"):
        study.optimize(objective, n_trials=200)
    idx = [int(t.system_attrs["scalebo:index"]) for t in study.get_trials()
           if "scalebo:index" in t.system_attrs]
    assert float(grid.cost[idx].sum()) <= 0.05 * grid.C_total * (1 + 1e-12)


def test_a_maximizing_or_multi_objective_study_is_refused():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid, _ = _grid()
    for kw in ({"direction": "maximize"}, {"directions": ["minimize", "minimize"]}):
        study = optuna.create_study(sampler=ScaleboSampler(grid, 0.3), **kw)
        with pytest.raises(ValueError, match="minimizes the loss|single-objective"):
            study.optimize(lambda t: 0.0, n_trials=1)
        # FAIL, not RUNNING forever (a pending run to every later claim)
        assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL]


def test_an_objective_asking_for_a_non_grid_parameter_releases_its_claim():
    """A trial: each attempt of an objective with a typo burned a configuration (claimed,
    charged, never proposed again)."""
    grid, truth, sampler, study = _study(0.3)

    def typo(trial):
        trial.suggest_categorical("learning_rate", [1e-3, 2e-3])
        return 0.0

    study.optimize(typo, n_trials=3, catch=(ValueError,))
    first = [int(t.system_attrs["scalebo:index"]) for t in study.get_trials()]
    assert all(t.system_attrs.get("scalebo:released") for t in study.get_trials())
    from types import SimpleNamespace

    runs = sampler._campaign(study, SimpleNamespace(number=-1))  # as the next claim sees it
    assert len(first) == 3 and runs.failed.size == 0 and runs.spent() == 0
    study.optimize(lambda t: float(truth.loc[_config(t, sampler)]), n_trials=1)
    assert study.get_trials()[-1].state == optuna.trial.TrialState.COMPLETE


def test_an_enqueued_trial_off_the_grid_fails_instead_of_running_forever():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid, _ = _grid()
    study = optuna.create_study(sampler=ScaleboSampler(grid, 0.3, seed=0))
    study.enqueue_trial({"N": 3e8, "D": 4e9, "lr": 2e-3, "bs": 256})  # N is not on the grid
    with pytest.raises(Exception, match="enqueued trial"):
        study.optimize(lambda t: 0.0, n_trials=1)
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL]
