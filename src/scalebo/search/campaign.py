"""A real campaign's next runs: grid files, completed and pending runs, budget, suggestions.

What ``scalebo suggest`` does, as library functions: :func:`campaign_grid` reads the
candidate configurations (YAML axes or a table; a campaign holds no cells out unless its
YAML asks), :func:`parse_budget` reads a budget (a fraction of ``C_total``, the summed
compute in FLOPs of every configuration, or FLOPs), :func:`suggest_runs` tells a
:class:`~scalebo.search.loop.SearchLoop` the campaign's runs
(:mod:`scalebo.search.campaign_runs`) and asks it for the next configurations, and
:func:`campaign_posterior` gives the law posterior of the runs so far.

Initial-design policy: a campaign starts with ``n_initial`` (default 5) random
configurations of the cheapest compute level(s) (the loop's seeded initial design); runs
already completed count toward it, so with 5 or more completed runs the surrogate-driven
search starts at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scalebo.data.files import read_table
from scalebo.errors import BudgetExhausted, SearchError
from scalebo.search.campaign_runs import CampaignRuns
from scalebo.search.cost_model import CostModel
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop
from scalebo.search.trace import Suggestion

__all__ = ["DEFAULT_N_INITIAL", "Budget", "campaign_grid", "campaign_posterior", "grid_rows",
           "parse_budget", "SuggestResult", "suggest_runs"]

#: Size of a campaign's initial design, completed runs included.
DEFAULT_N_INITIAL = 5


@dataclass(frozen=True)
class Budget:
    """A campaign budget: ``fraction`` of ``C_total`` or an absolute number of ``flops``."""

    fraction: float | None = None
    flops: float | None = None

    def resolve(self, C_total: float) -> float:
        """The budget in FLOPs for a grid of total compute ``C_total`` (FLOPs)."""
        return self.fraction * C_total if self.fraction is not None else float(self.flops)

    def __str__(self) -> str:
        return (f"{self.fraction:g} of C_total" if self.fraction is not None
                else f"{self.flops:.3g} FLOPs")


def parse_budget(text: str | float) -> Budget:
    """``"0.05"`` or ``"5%"`` (a fraction of C_total in (0, 1]), or ``"2e21FLOPs"``.

    Raises:
        ValueError: anything else, with the accepted forms.
    """
    raw = str(text).strip()
    number, unit = raw, ""
    low = raw.lower()
    if low.endswith("flops"):
        number, unit = raw[: -len("flops")].strip(), "flops"
    elif low.endswith("%"):
        number, unit = raw[:-1].strip(), "%"
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"budget {raw!r}: expected a fraction of C_total such as 0.05 or an "
                         "amount of compute such as 2e21FLOPs") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"budget {raw!r} must be positive and finite")
    if unit == "flops":
        return Budget(flops=value)
    if unit == "%":
        value /= 100
    if value > 1:
        raise ValueError(f"budget {raw!r}: a fraction of C_total is at most 1; for {value:g} % "
                         f"write {value / 100:g} (or {value:g}%), for an amount of compute "
                         "e.g. 2e21FLOPs")
    return Budget(fraction=value)


def _renamed(frame: pd.DataFrame, mapping: Mapping[str, str] | None) -> pd.DataFrame:
    return frame.rename(columns={v: k for k, v in (mapping or {}).items()})


def campaign_grid(path: str | Path, mapping: Mapping[str, str] | None = None) -> Grid:
    """The candidate configurations of a campaign, from YAML axes or a table file.

    A YAML grid keeps the ``held_out_cells`` it states and otherwise holds nothing out (a
    campaign trains whatever the search asks; held-out cells are for benchmarks). A table
    (CSV, Parquet, …) lists one configuration per row; a ``loss`` column is ignored.
    """
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        from scalebo.search.grid_file import read_grid_file

        axes, held = read_grid_file(path)
        try:
            return Grid.from_axes(axes, n_held_out_cells=held or 0)
        except SearchError as err:
            raise SearchError(f"{path}: {err}") from None
    frame = _renamed(read_table(path), mapping)
    return Grid.from_frame(frame.drop(columns=["loss"], errors="ignore"), n_held_out_cells=0)


def grid_rows(grid: Grid, frame: pd.DataFrame, what: str) -> np.ndarray:
    """Grid indices of the configurations in ``frame`` (``what`` names it in errors).

    Raises:
        SearchError: a configuration is not on the grid, or two rows are the same one.
    """
    idx = grid.index_of(frame)
    if np.unique(idx).size != idx.size:
        dup = sorted({int(i) for i in idx if (idx == i).sum() > 1})
        raise SearchError(f"{what}: several rows map to the same grid configuration "
                          f"(grid rows {dup[:5]}); average repeats first.")
    return idx


@dataclass(frozen=True)
class SuggestResult:
    """Suggestions of :func:`suggest_runs` and the campaign's compute (FLOPs).

    Attributes:
        suggestions: the next configurations, in the order picked.
        budget, spent, pending, remaining, C_total: compute in FLOPs (spent: completed and
            failed runs at their actual cost; pending: running ones).
        message: why fewer than ``batch`` configurations were suggested ('' otherwise).
    """

    suggestions: list[Suggestion]
    budget: float
    spent: float
    pending: float
    remaining: float
    C_total: float
    message: str = ""


def suggest_runs(grid: Grid, runs: CampaignRuns, budget: float, *, batch: int = 1,
                 retry_failed: bool = False, schedule: str = "spent",
                 acquisition: str = "ei", incumbent: str = "frontier", clip_iqr: float = 5.0,
                 seed: int = 0, n_initial: int = DEFAULT_N_INITIAL,
                 cost_model: CostModel | None = None) -> SuggestResult:
    """The next ``batch`` configurations to train, and the budget accounting.

    Args:
        grid: candidate configurations (:func:`campaign_grid`).
        runs: the campaign's runs (:func:`~scalebo.search.campaign_runs.read_campaign_runs`):
            completed ones are observations, running ones pending (their compute committed),
            failed ones spent and never proposed again unless ``retry_failed``.
        budget: total budget, FLOPs (:meth:`Budget.resolve`).
        batch: configurations to suggest.
        schedule, acquisition, incumbent: the loop's settings (:class:`SearchLoop`).
        clip_iqr: the GP sees losses clipped at median + K·IQR of the completed runs, so
            diverged runs do not swamp it (0: off).
        seed: seed of the GP restarts and the initial design.
        n_initial: initial design size; completed runs count toward it.
        cost_model: independent runs (default) or WSD checkpoints
            (:mod:`scalebo.search.cost_model`): budgets and admissibility use the marginal
            cost of a configuration given what is trained, failed or running.

    Raises:
        ValueError: a non-positive budget or a batch < 1.
        SearchError: the budget is spent, or nothing fits it.
    """
    from scalebo.search.models.clipping import ClippedGP
    from scalebo.search.models.surrogates import make_surrogate

    if not budget > 0:
        raise ValueError(f"budget must be positive FLOPs, got {budget}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    model = cost_model or CostModel()
    spent, pending = runs.spent(grid, model), runs.pending(grid, model)
    remaining = budget - spent - pending
    account = {"budget": float(budget), "spent": spent, "pending": pending,
               "remaining": remaining, "C_total": float(grid.C_total)}
    if remaining <= 0:
        raise BudgetExhausted(f"the budget is already spent: {spent + pending:.3g} FLOPs of "
                          f"{budget:.3g} are done, failed or running; raise the budget to "
                          "continue.")
    surrogate = make_surrogate("gp", categorical=grid.categorical_columns, rng=seed)
    if clip_iqr > 0:
        surrogate = ClippedGP(surrogate, clip_iqr)
    loop = SearchLoop(grid, min(budget / grid.C_total, 1.0), surrogate,
                      acquisition=acquisition, incumbent=incumbent, schedule=schedule,
                      n_initial=max(0, n_initial - runs.completed.size), cost_model=model,
                      rng=seed)
    if runs.completed.size:
        loop.tell(runs.completed, runs.losses)
    if runs.running.size:
        loop.mark_pending(runs.running)
    if runs.failed.size and not retry_failed:
        loop.mark_failed(runs.failed)
    # The loop counts its cost model's compute of what it knows; the difference to the
    # campaign's (a cost column, retried failures) lowers its budget so ``remaining`` holds.
    loop.budget = budget - (spent + pending - loop.committed)
    suggestions = loop.suggest(batch)
    message = ""
    if len(suggestions) < batch:
        cheapest = _cheapest_left(grid, loop)
        message = (f"only {len(suggestions)} of {batch} configurations fit the remaining "
                   f"budget of {remaining:.3g} FLOPs" + (
                       f" (the cheapest untried configuration costs {cheapest:.3g})"
                       if cheapest is not None else " (every configuration is tried)"))
    if not suggestions:
        raise BudgetExhausted(f"no configuration fits the remaining budget: {message}.")
    return SuggestResult(suggestions=suggestions, message=message, **account)


def _cheapest_left(grid: Grid, loop: SearchLoop) -> float | None:
    free = ~grid.held_out
    for arr in (loop.observed_indices, loop.pending_indices, loop.failed_indices):
        free[arr] = False
    return float(grid.cost[free].min()) if free.any() else None


def campaign_posterior(grid: Grid, runs: CampaignRuns, *,
                       laws: tuple[str, ...] = ("compute",),
                       targets: tuple[float, ...] = (1e25,), n_samples: int = 64,
                       budget: float | None = None, schedule: str = "spent",
                       clip_iqr: float = 5.0, seed: int = 0) -> Any:
    """The law posterior of a campaign from its grid and completed runs.

    :func:`~scalebo.search.law_posterior.law_posterior` with the campaign's GP (the one
    :func:`suggest_runs` uses, seeded by ``seed``) and the search's window: S joint samples
    of the losses of the untrained configurations inside the compute window the search has
    reached (``schedule``, ``budget`` in FLOPs, default ``C_total``; the whole grid once the
    window is open), one fit of each law per fantasized table, as replays measure it. Returns
    ``{law: LawPosterior}`` (``.summary()``: quantiles in nats at each target, FLOPs); the
    laws share the GP fit and the samples.

    Raises:
        SearchError: no completed run, or the posterior cannot be drawn.
    """
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.models.clipping import ClippedGP
    from scalebo.search.models.surrogates import make_surrogate

    if not runs.completed.size:
        raise SearchError("no completed run yet: no law posterior")
    share = 1.0 if budget is None else min(1.0, budget / grid.C_total)
    loop = SearchLoop(grid, share, None, acquisition="random", schedule=schedule, n_initial=0)
    loop.tell(runs.completed, runs.losses)
    cap = loop.window_cap()
    scope, cap = ("grid", None) if np.isinf(cap) else ("window", cap)
    gp = make_surrogate("gp", categorical=grid.categorical_columns, rng=seed)
    gp = ClippedGP(gp, clip_iqr) if clip_iqr > 0 else gp
    return law_posterior(grid, runs.completed, runs.losses, gp, laws=laws, scope=scope,
                         cap=cap, n_samples=n_samples, targets=targets, rng=seed)
