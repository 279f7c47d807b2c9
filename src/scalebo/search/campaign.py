"""A real campaign's next runs: grid files, completed and pending runs, budget, suggestions.

What ``scalebo suggest`` does, as library functions: :func:`campaign_grid` reads the
candidate configurations (YAML axes or a table; a campaign holds no cells out unless its
YAML asks), :func:`parse_budget` reads a budget (a fraction of ``C_total``, the summed
compute in FLOPs of every configuration, or FLOPs; or GPU-hours when the grid table has a
``cost`` column, see :meth:`Budget.resolve`), :func:`suggest_runs` tells a
:class:`~scalebo.search.loop.SearchLoop` the campaign's runs
(:mod:`scalebo.search.campaign_runs`) and asks it for the next configurations, and
:func:`campaign_posterior` gives the law posterior of the runs so far.

Initial-design policy: a campaign starts with ``n_initial`` (default 5) random
configurations of the cheapest compute level(s) (the loop's seeded initial design); runs
already completed count toward it, so with 5 or more completed runs the surrogate-driven
search starts at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scalebo.errors import BudgetExhausted, SearchError
from scalebo.search.budget import (
    NOTHING_FITS,
    Budget,
    check_budget_amount,
    parse_budget,
    remaining_budget,
)
from scalebo.search.campaign_runs import CampaignRuns
from scalebo.search.cost_model import CostModel, accounting_note, cheapest_untried
from scalebo.search.failing_values import crashed_note, failing_values_notes
from scalebo.search.grid import Grid
from scalebo.search.law_samples import CELL_COUPLING
from scalebo.search.loop import SearchLoop
from scalebo.search.models.stack import gp_stack
from scalebo.search.polish import POLISH
from scalebo.search.trace import Suggestion
from scalebo.search.wsd_runs import WsdRun, wsd_runs

__all__ = ["DEFAULT_N_INITIAL", "Budget", "campaign_gp", "campaign_grid", "campaign_posterior",
           "grid_rows", "parse_budget", "SuggestResult", "suggest_runs"]

#: Size of a campaign's initial design, completed runs included.
DEFAULT_N_INITIAL = 5


def campaign_grid(path: str | Path, mapping: Mapping[str, str] | None = None) -> Grid:
    """The candidate configurations of a campaign, from YAML axes or a table file (either
    read with ``mapping``: canonical name → the user's column name).

    A YAML grid (:func:`~scalebo.search.grid_file.read_grid_file`) keeps the
    ``held_out_cells`` it states and otherwise holds nothing out (a campaign trains whatever
    the search asks; held-out cells are for benchmarks). A table (CSV, Parquet, …,
    :func:`~scalebo.search.grid_table.read_grid_table`) lists one configuration per row; a
    ``loss`` column is ignored, and a ``cost`` column (GPU-hours, or any unit the budget is
    given in) prices each configuration (:meth:`Grid.with_price`): the campaign then
    budgets in it. Both are checked alike: every mistake is an error naming the file and
    where in it (axis and item, or 1-based data row and column).

    Raises:
        SearchError: a mistake in a YAML grid, or a repeated configuration in a table.
        RunTableError: a bad value in a grid table (file, 1-based data row, column).
    """
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return Grid.from_yaml(path, mapping=mapping, held_out_default=0)
    from scalebo.search.grid_table import read_grid_table

    return read_grid_table(path, mapping)


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
    """Suggestions of :func:`suggest_runs` and the campaign's budget.

    Attributes:
        suggestions: the next configurations, in the order picked.
        budget, spent, pending, remaining: in ``unit`` (spent: completed and failed runs at
            their actual cost; pending: running ones).
        C_total: the grid's total in ``unit`` (:attr:`Grid.budget_total`; FLOPs: C_total).
        message: why fewer than ``batch`` configurations were suggested ('' otherwise).
        unit: ``"FLOPs"``, or the grid's price unit (e.g. ``"GPU-hours"``).
        prices: what each suggestion adds to the spending, in ``unit`` (in order picked).
        held_back: what the search held back for the anchor run before these suggestions,
            in ``unit`` (0: none, the anchor cell has a run, or one among these suggestions
            that another rule chose, or the runs dominate it, also when its turn came within
            this batch).
        anchor_cell: the anchor cell's ``(N, D)`` (parameters, tokens) while held back.
        anchor_dropped: the anchor cell's ``(N, D)`` when the runs dominate it at its turn,
            before these suggestions or among them (what it held back was then spent on
            the later ones).
        wsd_runs: under the ``wsd`` cost model, the training runs the suggestions make up
            (one per family: :func:`~scalebo.search.wsd_runs.wsd_runs`); empty otherwise.
        run_numbers: each suggestion's run number in ``wsd_runs`` (in order picked).
        notes: a campaign planned as WSD checkpoints charged as independent runs
            (:func:`~scalebo.search.cost_model.accounting_note`); settings the suggestions
            use that only ever failed
            (:func:`~scalebo.search.failing_values.failing_values_notes`).
    """

    suggestions: list[Suggestion]
    budget: float
    spent: float
    pending: float
    remaining: float
    C_total: float
    message: str = ""
    unit: str = "FLOPs"
    prices: tuple[float, ...] = ()
    held_back: float = 0.0
    anchor_cell: tuple[float, float] | None = None
    anchor_dropped: tuple[float, float] | None = None
    wsd_runs: tuple[WsdRun, ...] = ()
    run_numbers: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()


def campaign_gp(grid: Grid, seed: int = 0, *, clip_iqr: float = 5.0,
                kernel: str = "matern52", trend: bool = False,
                shift_optimum: bool = True) -> Any:
    """The GP of a campaign (what :func:`suggest_runs` and :func:`campaign_posterior` use).

    The defaults are the replayed default method's (``MethodConfig``: Matérn-5/2 ARD with a
    constant mean), whose prediction far from every run reverts to the runs' mean.
    ``kernel="transfer"`` carries what the runs show about each hyperparameter to scales
    with no run, ``trend=True`` adds a linear mean in encoded ``log N``, ``log D``
    (:class:`~scalebo.search.models.trend.TrendSurrogate`); replays measure both as options
    (docs/reproduction.md). ``clip_iqr``: losses clipped at median + K·IQR (0: off).
    ``shift_optimum`` (the default since 0.3.7, as in replays): the GP sees each
    hyperparameter relative to an optimum that moves with N and D
    (:class:`~scalebo.search.optimum_shift.OptimumShiftSurrogate`).
    """
    return gp_stack(grid.categorical_columns, seed, kernel=kernel, shift_optimum=shift_optimum,
                    trend=trend, clip_iqr=clip_iqr if clip_iqr > 0 else None)


def suggest_runs(grid: Grid, runs: CampaignRuns, budget: float, *, batch: int = 1,
                 retry_failed: bool | str = False, schedule: str = "spent",
                 acquisition: str = "ei", incumbent: str = "envelope", clip_iqr: float = 5.0,
                 seed: int = 0, n_initial: int = DEFAULT_N_INITIAL,
                 cost_model: CostModel | None = None, kernel: str = "matern52",
                 trend: bool = False, shift_optimum: bool = True,
                 anchor: float = 0.7, polish: float = POLISH) -> SuggestResult:
    """The next ``batch`` configurations to train, and the budget accounting.

    Args:
        grid: candidate configurations (:func:`campaign_grid`).
        runs: the campaign's runs (:func:`~scalebo.search.campaign_runs.read_campaign_runs`):
            completed ones are observations, running ones pending (their compute committed),
            failed ones spent and never proposed again unless ``retry_failed``: True or
            ``"all"`` proposes any failed one again, ``"crashed"`` only those without a loss
            (:attr:`CampaignRuns.crashed`; a diverged run stays failed).
        budget: total budget in the grid's budget unit (:meth:`Budget.resolve`: FLOPs, or
            GPU-hours for a grid with a ``cost`` column).
        batch: configurations to suggest.
        schedule, acquisition, incumbent: the loop's settings (:class:`SearchLoop`).
        clip_iqr: the GP sees losses clipped at median + K·IQR of the completed runs, which
            limits a diverged run's pull but does not remove it (``diverged_above`` of
            :func:`~scalebo.search.campaign_runs.read_campaign_runs` does; 0:
            off).
        seed: seed of the GP restarts and the initial design.
        n_initial: initial design size; completed runs count toward it.
        cost_model: independent runs (default) or WSD checkpoints
            (:mod:`scalebo.search.cost_model`): budgets and admissibility use the marginal
            cost of a configuration given what is trained or running; under ``wsd`` the
            result also groups the suggestions into training runs (``wsd_runs``).
        kernel, trend, shift_optimum: the GP (:func:`campaign_gp`).
        anchor: largest share of the budget the anchor run may cost (0: none): one
            configuration of the costliest cell costing at most ``anchor × budget`` is held
            back and suggested once nothing else fits, unless the runs then dominate the
            cell (:mod:`scalebo.search.anchor`; the
            replayed default). It is placed once any run of that cell is done or running.
        polish: share of the budget at whose end untried neighbours of the envelope's best
            runs are suggested first, by compute² / runs (0: none;
            :mod:`scalebo.search.polish`, the replayed default).

    Raises:
        ValueError: a non-positive budget, one of at most 1 FLOP (a fraction passed as an amount:
            :func:`~scalebo.search.budget.check_budget_amount`) or a batch < 1.
        BudgetExhausted: the budget is spent, or nothing fits it (a SearchError; its
            ``account`` holds the budget accounting, as the result's fields).
    """
    unit = grid.price_unit
    check_budget_amount(budget, unit)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    model = cost_model or CostModel()
    spent, pending = runs.spent(grid, model), runs.pending(grid, model)
    remaining = remaining_budget(budget, spent, pending)
    account = {"budget": float(budget), "spent": spent, "pending": pending,
               "remaining": remaining, "C_total": grid.budget_total, "unit": unit}
    accounting = accounting_note(model, runs.wsd_numbered, runs.source)
    also = f" Note: {accounting}." if accounting else ""  # it may be why nothing is left
    if remaining <= 0:
        raise BudgetExhausted(f"the budget is already spent: {spent + pending:.4g} {unit} of "
                              f"{budget:.4g} are done, failed or running; raise the budget to "
                              f"continue.{also}", account)
    surrogate = campaign_gp(grid, seed, clip_iqr=clip_iqr, kernel=kernel, trend=trend,
                            shift_optimum=shift_optimum)
    with warnings.catch_warnings():  # a budget nothing fits is said below, with the account
        warnings.filterwarnings("ignore", message=NOTHING_FITS)
        loop = SearchLoop(grid, min(budget / grid.budget_total, 1.0), surrogate,
                          acquisition=acquisition, incumbent=incumbent, schedule=schedule,
                          n_initial=max(0, n_initial - runs.completed.size), cost_model=model,
                          anchor=anchor, polish=polish, rng=seed)
    if runs.completed.size:
        loop.tell(runs.completed, runs.losses)
    if runs.running.size:
        loop.mark_pending(runs.running)
    if retry_failed not in (False, True, "all", "crashed"):
        raise ValueError(f"retry_failed must be False, True, 'all' or 'crashed', got "
                         f"{retry_failed!r}")
    stay = (runs.failed if not retry_failed else
            runs.failed[~np.isin(runs.failed, runs.crashed)] if retry_failed == "crashed"
            else runs.failed[:0])
    if stay.size:
        loop.mark_failed(stay)
    # The loop counts its cost model's compute of what it knows; the difference to the
    # campaign's (a cost column, retried failures) lowers its budget so ``remaining`` holds.
    loop.budget = budget - (spent + pending - loop.committed_budget)
    held_back, anchor_cell = loop.held_back()
    dropped = loop.dropped_anchor()
    suggestions = loop.suggest(batch)
    if retry_failed and runs.failed.size:  # say which proposals run a failed one again
        again = set(int(i) for i in runs.failed)
        suggestions = [replace(x, reason=f"retry of a failed run; {x.reason}")
                       if x.index in again else x for x in suggestions]
    if dropped is None and (dropped := loop.dropped_in_asks()) is not None:  # mid-batch
        held_back, anchor_cell = 0.0, None
    cells = grid.configs[["N", "D"]].to_numpy()
    if anchor_cell is not None and any(tuple(cells[s.index]) == anchor_cell
                                       and s.rule != "anchor"
                                       for s in suggestions):
        held_back, anchor_cell = 0.0, None  # its cell placed by another rule (initial design)
    message = ""
    if len(suggestions) < batch:
        taken = np.zeros(len(grid), dtype=bool)
        for arr in (loop.observed_indices, loop.pending_indices, loop.failed_indices):
            taken[arr] = True
        taken[[s.index for s in suggestions]] = True  # the cheapest one left after them
        cheapest = cheapest_untried(grid, loop.marginal_cost(priced=True), taken)
        left = remaining - sum(_prices(grid, model, loop, suggestions))
        message = (f"{len(suggestions)} of the {batch} asked for fit the remaining budget of "
                   f"{remaining:.4g} {unit}" + ((
                       f"; after them {left:.4g} is left and the cheapest untried "
                       f"configuration costs {cheapest:.4g}") if cheapest is not None
                       else " (every configuration is tried)"))
    if not suggestions:
        raise BudgetExhausted("no configuration fits the remaining budget of "
                              f"{remaining:.4g} {unit}" + (
                                  f" (the cheapest untried configuration costs {cheapest:.4g})"
                                  if cheapest is not None else
                                  " (every configuration is tried)") + "." + also, account)
    grouped: tuple[tuple[WsdRun, ...], tuple[int, ...]] = ((), ())
    if model.kind == "wsd":
        picked = [s.index for s in suggestions]  # the loop now counts them as pending
        grouped = wsd_runs(grid, picked, loop.observed_indices,
                           np.setdiff1d(loop.pending_indices, picked), model.cooldown)
    return SuggestResult(suggestions=suggestions, message=message,
                         prices=_prices(grid, model, loop, suggestions),
                         held_back=held_back, anchor_cell=anchor_cell,
                         anchor_dropped=dropped, wsd_runs=grouped[0],
                         run_numbers=grouped[1], notes=tuple(n for n in (
                             accounting, "" if retry_failed else crashed_note(runs.crashed,
                                                                              runs.rows),
                             *failing_values_notes(grid, runs.failed, runs.completed,
                                                   [s.index for s in suggestions])) if n),
                         **account)


def _prices(grid: Grid, model: CostModel, loop: SearchLoop,
            suggestions: list[Suggestion]) -> tuple[float, ...]:
    """What each suggestion adds in the budget unit, in the order picked (as the loop
    charged it: under ``wsd`` a later checkpoint of the same run costs only its part)."""
    mask = np.zeros(len(grid), dtype=bool)
    mask[loop.observed_indices] = True
    mask[loop.pending_indices] = True
    picked = [s.index for s in suggestions]
    mask[picked] = False
    out = []
    for i in picked:
        out.append(float(model.marginal(grid, mask, priced=True)[i]))
        mask[i] = True
    return tuple(out)


def campaign_posterior(grid: Grid, runs: CampaignRuns, *,
                       laws: tuple[str, ...] = ("compute",),
                       targets: tuple[float, ...] = (1e25,), n_samples: int = 64,
                       budget: float | None = None, schedule: str = "spent",
                       clip_iqr: float = 5.0, seed: int = 0, kernel: str = "matern52",
                       trend: bool = False, estimand: str = "reference",
                       scope: str = "grid", keep_samples: bool = False,
                       shift_optimum: bool = True, cell_coupling: float = CELL_COUPLING) -> Any:
    """The law posterior of a campaign from its grid and completed runs.

    :func:`~scalebo.search.law_posterior.law_posterior` with the campaign's GP (the one
    :func:`suggest_runs` uses, seeded by ``seed``): S joint samples of the losses of the
    untrained configurations, one fit of each law per fantasized table, as replays measure
    it. ``scope``: ``"grid"`` (default), every configuration of the grid, since the law of
    the whole grid is what a prediction at the target stands for; ``"window"``, only those
    inside the compute window the search has reached (``schedule``, ``budget`` in the
    grid's budget unit, default its total; the default until 0.3.2, which leaves a
    costly configuration that could still move the law out of the interval while the
    window is closed). ``estimand``: the law a full grid of recorded runs would give
    (``"reference"``) or the noise-free law (``"noise_free"``,
    :data:`~scalebo.search.law_posterior.ESTIMANDS`). ``cell_coupling``: as in
    :func:`~scalebo.search.law_posterior.law_posterior`. Returns ``{law: LawPosterior}``
    (``.summary()``: quantiles in nats at each target, FLOPs); the laws share the GP fit and
    the samples (kept in ``.samples`` with ``keep_samples``).

    Raises:
        SearchError: no completed run, or the posterior cannot be drawn.
        ValueError: an unknown ``scope``.
    """
    from scalebo.search.law_posterior import law_posterior

    if not runs.completed.size:
        raise SearchError("no completed run yet: no law posterior")
    if scope not in ("grid", "window"):
        raise ValueError(f"scope must be 'grid' or 'window', got {scope!r}")
    cap = None
    if scope == "window":
        share = 1.0 if budget is None else min(1.0, budget / grid.budget_total)
        with warnings.catch_warnings():  # only its window cap is used
            warnings.filterwarnings("ignore", message=NOTHING_FITS)
            loop = SearchLoop(grid, share, None, acquisition="random", schedule=schedule,
                              n_initial=0)
        loop.tell(runs.completed, runs.losses)
        cap = loop.window_cap()
        scope, cap = ("grid", None) if np.isinf(cap) else ("window", cap)
    gp = campaign_gp(grid, seed, clip_iqr=clip_iqr, kernel=kernel, trend=trend,
                     shift_optimum=shift_optimum)
    return law_posterior(grid, runs.completed, runs.losses, gp, laws=laws, scope=scope,
                         cap=cap, n_samples=n_samples, targets=targets, rng=seed,
                         estimand=estimand, keep_samples=keep_samples,
                         cell_coupling=cell_coupling, failed=runs.failed)
