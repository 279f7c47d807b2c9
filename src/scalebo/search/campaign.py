"""A real campaign's next runs: grid files, completed and pending runs, budget, suggestions.

What ``scalebo suggest`` does, as library functions: :func:`campaign_grid` reads the
candidate configurations (YAML axes or a table; a campaign holds no cells out unless its
YAML asks), :func:`suggest_runs` places the completed runs on the grid, checks the budget
(a fraction of ``C_total``, the summed compute in FLOPs of every configuration) and asks a
:class:`~scalebo.search.loop.SearchLoop` for the next configurations.

Initial-design policy: a campaign starts with ``n_initial`` (default 5) configurations drawn
by the loop's space-filling design; runs already completed count toward it, so with 5 or
more completed runs the surrogate-driven search starts at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.data.files import read_table
from scalebo.data.runs import RunTable
from scalebo.errors import SearchError
from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop
from scalebo.search.trace import Suggestion

__all__ = ["DEFAULT_N_INITIAL", "Budget", "campaign_grid", "campaign_posterior", "grid_rows",
           "parse_budget", "suggest_runs"]

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
    """``"0.05"`` (a fraction of C_total in (0, 1]) or ``"2e21FLOPs"`` / ``"2e21 flops"``.

    Raises:
        ValueError: anything else, with the accepted forms.
    """
    raw = str(text).strip()
    number, unit = raw, ""
    low = raw.lower()
    if low.endswith("flops"):
        number, unit = raw[: -len("flops")].strip(), "flops"
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"budget {raw!r}: expected a fraction of C_total such as 0.05 or an "
                         "amount of compute such as 2e21FLOPs") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"budget {raw!r} must be positive and finite")
    if unit:
        return Budget(flops=value)
    if value > 1:
        raise ValueError(f"budget {raw!r}: a fraction of C_total is at most 1; for an amount "
                         f"of compute write {raw}FLOPs")
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
        return Grid.from_axes(axes, n_held_out_cells=held or 0)
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


def suggest_runs(grid: Grid, runs: RunTable | None, budget_fraction: float, *,
                 pending: pd.DataFrame | None = None, batch: int = 1,
                 schedule: str = "spent", acquisition: str = "ei",
                 incumbent: str = "frontier", clip_iqr: float = 5.0, seed: int = 0,
                 n_initial: int = DEFAULT_N_INITIAL,
                 runs_name: str = "runs") -> tuple[list[Suggestion], dict[str, float]]:
    """The next ``batch`` configurations to train, and the budget accounting.

    Args:
        grid: candidate configurations (:func:`campaign_grid`).
        runs: completed runs (N, D, the grid's axes, loss in nats), or None before any.
        budget_fraction: total budget as a fraction of ``grid.C_total`` in (0, 1].
        pending: configurations in flight (their cost counts as committed).
        batch: configurations to suggest.
        schedule, acquisition, incumbent: the loop's settings (:class:`SearchLoop`).
        clip_iqr: the GP sees losses clipped at median + K·IQR of the completed runs, so
            diverged runs do not swamp it (0: off).
        seed: seed of the GP restarts and the initial design.
        n_initial: initial design size; completed runs count toward it.
        runs_name: name of the runs' source in error messages.

    Returns:
        ``(suggestions, accounting)`` with accounting in FLOPs: ``budget``, ``spent``
        (completed), ``pending``, ``remaining``, and ``C_total``.

    Raises:
        ValueError: a budget outside (0, 1] or a batch < 1.
        SearchError: off-grid or repeated runs, a budget already spent, nothing fits.
    """
    from scalebo.search.models.clipping import ClippedGP
    from scalebo.search.models.surrogates import make_surrogate

    if not 0 < budget_fraction <= 1:
        raise ValueError(f"budget must be a fraction of C_total in (0, 1], got "
                         f"{budget_fraction}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    idx = (grid_rows(grid, runs.frame, runs_name) if runs is not None
           else np.zeros(0, dtype=np.int64))
    waiting = (grid_rows(grid, pending, "pending") if pending is not None
               else np.zeros(0, dtype=np.int64))
    budget = budget_fraction * grid.C_total
    spent = float(grid.cost[idx].sum())
    committed = spent + float(grid.cost[waiting].sum())
    accounting = {"budget": budget, "spent": spent, "pending": committed - spent,
                  "remaining": budget - committed, "C_total": float(grid.C_total)}
    if committed >= budget:
        raise SearchError(f"the budget is already spent: {committed:.3g} FLOPs of "
                          f"{budget:.3g} ({budget_fraction:g} of C_total {grid.C_total:.3g}) "
                          "are done or pending; raise the budget to continue.")
    surrogate = make_surrogate("gp", categorical=grid.categorical_columns, rng=seed)
    if clip_iqr > 0:
        surrogate = ClippedGP(surrogate, clip_iqr)
    loop = SearchLoop(grid, budget_fraction, surrogate, acquisition=acquisition,
                      incumbent=incumbent, schedule=schedule,
                      n_initial=max(0, n_initial - idx.size), rng=seed)
    if idx.size:
        loop.tell(idx, runs.loss)
    if waiting.size:
        loop.mark_pending(waiting)
    suggestions = loop.suggest(batch)
    if not suggestions:
        raise SearchError("no configuration fits the remaining budget "
                          f"({budget - committed:.3g} FLOPs).")
    return suggestions, accounting


def campaign_posterior(grid: Grid, runs: RunTable, *, laws: tuple[str, ...] = ("compute",),
                       targets: tuple[float, ...] = (1e25,), n_samples: int = 64,
                       scope: str = "grid", seed: int = 0,
                       runs_name: str = "runs") -> dict:
    """The law posterior of a campaign from its grid and completed runs.

    :func:`~scalebo.search.law_posterior.law_posterior` with the campaign's GP (the one
    :func:`suggest_runs` uses, seeded by ``seed``): S joint samples of the unobserved
    configurations' losses (``scope="grid"``: all of them; ``"window"``: those the compute
    window admits), one law fit per fantasized table. Returns ``{law: LawPosterior}``;
    ``LawPosterior.summary()`` gives the quantiles (nats) at each target (FLOPs).
    """
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.models.surrogates import make_surrogate

    idx = grid_rows(grid, runs.frame, runs_name)
    surrogate = make_surrogate("gp", categorical=grid.categorical_columns, rng=seed)
    return law_posterior(grid, idx, runs.loss, surrogate, laws=laws, scope=scope,
                         n_samples=n_samples, targets=targets, rng=seed)
