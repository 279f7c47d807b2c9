"""An Optuna sampler that proposes grid configurations through scalebo's search loop.

``ScaleboSampler(grid, budget=0.05)`` (extra ``scalebo[optuna]``) lets a campaign use Optuna's
storages (RDB, journal files), its dashboard and several workers. The objective asks for
every grid column with ``trial.suggest_categorical(column, values)`` (the grid's values of
that column: ``sampler.values(column)``) and returns the final loss in nats::

    sampler = ScaleboSampler(grid, budget=0.05, seed=0)
    study = optuna.create_study(sampler=sampler, storage=storage, study_name="campaign")
    study.optimize(objective)        # stops by itself when the budget is spent

How trials map to a campaign (:mod:`scalebo.search.campaign_runs`): COMPLETE trials are
observations (a NaN or infinite value is a failed run); RUNNING trials of other workers are
pending (their compute is committed); FAIL trials and trials pruned by the objective count
their compute as spent and are never proposed again. Finished trials the sampler did not
propose (``study.add_trial``, an earlier sampler) count the same way, placed on the grid by
their parameters (one that cannot be placed is left out with a warning), and several trials
of one configuration are one observation (the mean value; every attempt's cost counts). A
study must minimize one objective; a trial whose claim fails is marked FAIL. A trial whose
objective asks for a parameter that is not a grid column releases its configuration
(``scalebo:released``): it fails, uncharged, and the configuration can be proposed again. The
cost of a trial is the grid's
``6·N·D`` FLOPs (for a grid with a price, :meth:`~scalebo.search.grid.Grid.with_price`, its
price, e.g. GPU-hours), or its user attribute ``cost`` (in that unit, a finite number > 0;
another value is warned about and the grid's cost used) when set.

Workers claim a configuration by writing it to the trial's system attributes
(``scalebo:index``) while holding a lock (``lock_path``, a lock file all workers see; Optuna's
``JournalFileOpenLock``): the state read, the suggestion and the claim happen as one step,
so no configuration is claimed twice and the budget is never overrun. When nothing
admissible is left, the trial is pruned before the objective trains
anything (the sampler raises ``TrialPruned`` from ``suggest_categorical``; attribute
``scalebo:skipped``) and ``study.stop()`` is called, as Optuna's ``GridSampler`` stops a study.
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from scalebo.errors import BudgetExhausted, SearchError
from scalebo.extras import require_extra
from scalebo.search.campaign import parse_budget, suggest_runs
from scalebo.search.campaign_runs import CampaignRuns
from scalebo.search.grid import INDEX_RTOL, Grid

__all__ = ["ScaleboSampler"]

_INDEX = "scalebo:index"
_SKIPPED = "scalebo:skipped"
_RELEASED = "scalebo:released"
_MAX_ROUNDS = 20


optuna = require_extra("optuna", "scalebo.integrations.optuna (ScaleboSampler)")

TrialState = optuna.trial.TrialState


class ScaleboSampler(optuna.samplers.BaseSampler):
    """Propose grid configurations with scalebo's loop (see the module docstring).

    Args:
        grid: the candidate configurations (:class:`~scalebo.search.grid.Grid`).
        budget: a fraction of the grid's total (e.g. 0.05), FLOPs as ``"2e21FLOPs"``,
            GPU-hours as ``"500GPUh"`` for a priced grid, or a
            :class:`~scalebo.search.campaign.Budget`.
        seed: seed of the initial design and of the GP.
        schedule, acquisition, incumbent, clip_iqr, kernel, trend: as for
            :func:`~scalebo.search.campaign.suggest_runs`.
    """

    def __init__(self, grid: Grid, budget: Any, *, seed: int = 0, schedule: str = "spent",
                 acquisition: str = "ei", incumbent: str = "envelope", clip_iqr: float = 5.0,
                 lock_path: str | Path | None = None, kernel: str = "matern52",
                 trend: bool = False) -> None:
        self.grid = grid
        self.lock_path = None if lock_path is None else Path(lock_path)
        self._thread_lock = threading.Lock()
        parsed = budget if hasattr(budget, "resolve") else parse_budget(budget)
        self.budget = parsed.resolve(grid)
        self.seed, self.schedule = seed, schedule
        self.acquisition, self.incumbent, self.clip_iqr = acquisition, incumbent, clip_iqr
        self.kernel, self.trend = kernel, trend

    def values(self, column: str) -> list[Any]:
        """The grid's distinct values of ``column`` (the choices to suggest), in order."""
        if column not in self.grid.input_columns:
            raise ValueError(f"{column!r} is not a grid column {list(self.grid.input_columns)}")
        return [v.item() if hasattr(v, "item") else v
                for v in dict.fromkeys(self.grid.configs[column].tolist())]

    # --------------------------------------------------------------- Optuna hooks
    def infer_relative_search_space(self, study: Any, trial: Any) -> dict:
        return {}

    def sample_relative(self, study: Any, trial: Any, search_space: dict) -> dict:
        return {}

    def before_trial(self, study: Any, trial: Any) -> None:
        try:
            if len(study.directions) != 1:
                raise ValueError("ScaleboSampler needs a single-objective study (the loss in "
                                 f"nats); this one has {len(study.directions)} objectives")
            if study.direction != optuna.study.StudyDirection.MINIMIZE:
                raise ValueError("ScaleboSampler minimizes the loss: create the study with "
                                 "direction='minimize' (an accuracy: return 1 - accuracy)")
            index = self._claim(study, trial)
        except BaseException:  # an interrupt while waiting for the claim lock, too
            # Optuna made the trial RUNNING before this hook: it will never run, so FAIL it
            # rather than leave it RUNNING (a pending run to every later claim) forever
            with contextlib.suppress(Exception):  # the original error is the one to see
                study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
            raise
        if index is None:
            study._storage.set_trial_system_attr(trial._trial_id, _SKIPPED, True)
            study.stop()

    def sample_independent(self, study: Any, trial: Any, param_name: str,
                           param_distribution: Any) -> Any:
        if trial.system_attrs.get(_SKIPPED):
            raise optuna.TrialPruned("scalebo: no configuration fits the remaining budget")
        index = trial.system_attrs.get(_INDEX)
        if index is None:
            raise RuntimeError("ScaleboSampler: the trial has no claimed configuration")
        try:
            if param_name not in self.grid.input_columns:
                raise ValueError(f"{param_name!r} is not a grid column "
                                 f"{list(self.grid.input_columns)}")
            value = self.grid.configs[param_name].iloc[int(index)]
            return _choice(param_distribution, value, param_name)
        except ValueError:
            # a mistake of the objective, found before it trained anything: the claimed
            # configuration goes back to the pool, uncharged
            study._storage.set_trial_system_attr(trial._trial_id, _RELEASED, True)
            raise

    # --------------------------------------------------------------- claims
    def _campaign(self, study: Any, me: Any) -> CampaignRuns:
        """The campaign of every other trial that holds a claim or can be placed on the grid.

        Several trials of one configuration (repeats added with ``add_trial``, an earlier
        sampler's) are one observation, the mean of their finite values (completed wins over
        failed and running), and every attempt's cost counts."""
        by_index: dict[int, list[Any]] = {}
        for t in study.get_trials(deepcopy=False):
            if t.number == me.number or t.system_attrs.get(_SKIPPED) \
                    or t.system_attrs.get(_RELEASED):
                continue
            idx = t.system_attrs.get(_INDEX)
            if idx is None:  # a trial this sampler did not propose (added, earlier sampler)
                idx = self._unclaimed_index(t)
                if idx is None:
                    continue
            by_index.setdefault(int(idx), []).append(t)
        completed, losses, failed, running, cost = [], [], [], [], {}
        for idx, trials in by_index.items():
            cost[idx] = sum(_cost(t, float(self.grid.budget_cost[idx])) for t in trials)
            done = [float(t.value) for t in trials if t.state == TrialState.COMPLETE
                    and t.value is not None and math.isfinite(t.value)]
            if done:
                completed.append(idx)
                losses.append(float(np.mean(done)))
            elif any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials):
                running.append(idx)
            else:  # FAIL, pruned by the objective, or a non-finite value
                failed.append(idx)
        arr = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
        return CampaignRuns(completed=arr(completed), losses=np.asarray(losses),
                            failed=arr(failed), running=arr(running), cost=cost,
                            source="optuna")

    def _unclaimed_index(self, t: Any) -> int | None:
        """The grid row of a finished trial that holds no claim (added with
        ``study.add_trial``, or run by another sampler) from its parameters; None for a trial
        still waiting or running, or one without parameters. One with grid columns missing or
        off the grid is left out with a warning: its compute and loss cannot be placed (and
        Optuna cannot delete a trial)."""
        import pandas as pd

        if t.state in (TrialState.RUNNING, TrialState.WAITING) or not t.params:
            return None  # in flight, or failed before it set anything: nothing to place
        missing = [c for c in self.grid.input_columns if c not in t.params]
        try:
            if missing:
                raise SearchError(f"it lacks grid column(s) {missing}")
            row = pd.DataFrame([{c: t.params[c] for c in self.grid.input_columns}])
            return int(self.grid.index_of(row, source=f"optuna trial {t.number}")[0])
        except (SearchError, ValueError) as exc:
            warnings.warn(f"trial {t.number} ({t.state.name}) was not proposed by "
                          f"ScaleboSampler and cannot be placed on the grid ({exc}): left out "
                          "of the campaign, its compute and loss not counted", UserWarning,
                          stacklevel=2)
            return None

    def _claim(self, study: Any, trial: Any) -> int | None:
        """Under the claim lock: the campaign as the storage has it, one suggestion, and its
        claim written to the trial (None: nothing admissible is left)."""
        with self._thread_lock:
            lock = (optuna.storages.journal.JournalFileOpenLock(str(self.lock_path),
                                                                grace_period=120)
                    if self.lock_path is not None else None)
            if lock is not None:
                lock.acquire()
            try:
                runs = self._campaign(study, trial)
                fixed = trial.system_attrs.get("fixed_params")
                if fixed:  # an enqueued trial: claim the configuration it will train
                    index = _fixed_index_of(self.grid, fixed, runs)
                else:
                    try:
                        res = suggest_runs(self.grid, runs, self.budget, batch=1,
                                           schedule=self.schedule,
                                           acquisition=self.acquisition,
                                           incumbent=self.incumbent, clip_iqr=self.clip_iqr,
                                           seed=self.seed + trial.number,
                                           kernel=self.kernel, trend=self.trend)
                    except BudgetExhausted:  # only this ends the study; other errors raise
                        return None
                    index = int(res.suggestions[0].index)
                study._storage.set_trial_system_attr(trial._trial_id, _INDEX, index)
                return index
            finally:
                if lock is not None:
                    lock.release()


def _cost(t: Any, default: float) -> float:
    """A trial's cost: its user attribute ``cost`` (a finite number > 0, in the grid's unit)
    or ``default``; a bad value (a finished trial's attributes cannot be mended) is warned
    about and replaced by ``default``."""
    if "cost" not in t.user_attrs:
        return default
    raw = t.user_attrs["cost"]
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(raw, bool) or not (math.isfinite(value) and value > 0):
        warnings.warn(f"trial {t.number}: user attribute 'cost' must be a finite number > 0 "
                      f"(FLOPs, or the grid's price unit), got {raw!r}; the grid's cost "
                      f"{default:.4g} is used", UserWarning, stacklevel=2)
        return default
    return value


def _fixed_index_of(grid: Grid, fixed: dict, runs: CampaignRuns) -> int:
    """Grid row of an enqueued trial's fixed parameters; SearchError if it is off the grid,
    incomplete or already trained, failed or running."""
    import pandas as pd

    missing = [c for c in grid.input_columns if c not in fixed]
    if missing:
        raise SearchError(f"an enqueued trial fixes {sorted(fixed)} but not {missing}; fix "
                          "every grid column")
    index = int(grid.index_of(pd.DataFrame([{c: fixed[c] for c in grid.input_columns}]),
                              source="enqueued trial")[0])
    if index in {int(i) for i in (*runs.completed, *runs.failed, *runs.running)}:
        raise SearchError(f"an enqueued trial asks for {grid.config(index)}, which is already "
                          "trained, failed or running")
    return index


def _choice(distribution: Any, value: Any, name: str) -> Any:
    """The choice of a categorical ``distribution`` equal to the grid ``value`` (numbers
    within :data:`~scalebo.search.grid.INDEX_RTOL`)."""
    choices = getattr(distribution, "choices", None)
    if choices is None:
        raise ValueError(f"ask for {name!r} with trial.suggest_categorical({name!r}, values)")
    for c in choices:
        if isinstance(c, int | float) and isinstance(value, int | float | np.number):
            if abs(float(c) - float(value)) <= INDEX_RTOL * max(abs(float(c)), abs(float(value))):
                return c
        elif str(c) == str(value):
            return c
    raise ValueError(f"the grid's value {value!r} of {name!r} is not among the choices "
                     f"{list(choices)}; pass the grid's values")

