"""ScaleboSampler: Optuna trials driven by scalebo's loop; two worker processes on one
journal-file storage never train a configuration twice nor overrun the budget."""

import subprocess
import sys
import textwrap

import numpy as np
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


def test_one_worker_spends_the_budget_and_stops():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid, frame = _grid()
    truth = frame.set_index(COLS)["loss"]
    sampler = ScaleboSampler(grid, 0.3, seed=0)
    study = optuna.create_study(sampler=sampler)

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
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid, frame = _grid()
    truth = frame.set_index(COLS)["loss"]
    sampler = ScaleboSampler(grid, 0.3, seed=0)
    study = optuna.create_study(sampler=sampler)
    wanted = {"N": 2e8, "D": 4e9, "lr": 2e-3, "bs": 256}
    study.enqueue_trial(wanted)

    def objective(trial):
        return float(truth.loc[_config(trial, sampler)])

    study.optimize(objective, n_trials=3)
    first = study.get_trials()[0]
    assert first.params == wanted
    row = grid.configs.iloc[int(first.system_attrs["scalebo:index"])]
    assert {c: float(row[c]) for c in COLS} == {c: float(v) for c, v in wanted.items()}
