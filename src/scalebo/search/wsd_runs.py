"""Which training runs a batch of suggestions asks for under ``--cost-model wsd``.

Under the ``wsd`` cost model (:mod:`scalebo.search.cost_model`, cooldown fraction ``f``) the
configurations that share ``N`` and every hyperparameter (a *family*) are one
warmup-stable-decay run: its stable phase runs to ``(1 − f)·D_max`` tokens, and the
checkpoint at ``D`` tokens is a cooldown of ``f·D`` tokens branched off the stable phase at
``(1 − f)·D`` — the family costs ``c·((1 − f)·D_max + f·ΣD)``. A batch of suggestions is
therefore a set of runs, not of independent trainings: two suggestions of one family are one
run with two cooldowns, and a suggestion whose family already has checkpoints (completed or
running) continues that run: its cooldown branches off the existing stable phase, or the
stable phase resumes where it ended. That is what the campaign's budget charged.
:func:`wsd_runs` groups a batch by family and says, per run, how far to train the stable
phase and where to branch each cooldown, so that a user launches one job per family instead
of one per row. Token counts are tokens (``D``'s unit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scalebo.search.cost_model import families
from scalebo.search.grid import Grid

__all__ = ["WsdRun", "wsd_cost_notes", "wsd_runs"]


@dataclass(frozen=True)
class WsdRun:
    """One WSD run that a batch of suggestions starts or continues (token counts in tokens).

    Attributes:
        number: 1-based, in the order the batch first picks the family.
        N: Parameters.
        hyperparameters: ``(axis, value)`` of every hyperparameter axis of the family.
        cooldowns: ``D`` of the checkpoints this batch asks for, ascending.
        completed: ``D`` of the family's completed checkpoints, ascending.
        running: ``D`` of its checkpoints in flight, ascending.
        cooldown: The cooldown fraction ``f`` of the cost model.
    """

    number: int
    N: float
    hyperparameters: tuple[tuple[str, Any], ...]
    cooldowns: tuple[float, ...]
    completed: tuple[float, ...]
    running: tuple[float, ...]
    cooldown: float

    @property
    def earlier(self) -> tuple[float, ...]:
        """``D`` of every checkpoint the family already has, completed or running."""
        return tuple(sorted(self.completed + self.running))

    @property
    def stable_from(self) -> float:
        """Tokens the existing stable phase reaches (0 for a new run)."""
        return (1 - self.cooldown) * max(self.earlier, default=0.0)

    @property
    def stable_to(self) -> float:
        """Tokens the stable phase must reach for this batch (at least :attr:`stable_from`)."""
        return (1 - self.cooldown) * max(self.cooldowns + self.earlier)

    def describe(self, names: Mapping[str, str] | None = None) -> str:
        """One line for a person, in the user's column names (``names``: canonical → file)."""
        names = names or {}
        d = names.get("D", "D")
        hyper = "".join(f", {names.get(k, k)} {_value(v)}" for k, v in self.hyperparameters)
        head = f"wsd run {self.number} ({names.get('N', 'N')} {self.N:.4g}{hyper}): "

        def branch(ds: Sequence[float]) -> str:
            return ", ".join(f"from {(1 - self.cooldown) * x:.4g} to {x:.4g} tokens"
                             for x in ds)

        if not self.earlier:
            return (head + f"a new run; train the stable phase to {self.stable_to:.4g} "
                    f"tokens and cool down {branch(self.cooldowns)}")
        had = ", ".join(f"{x:.4g} ({'running' if x in self.running else 'completed'})"
                        for x in self.earlier)
        inside = [x for x in self.cooldowns if (1 - self.cooldown) * x <= self.stable_from]
        beyond = [x for x in self.cooldowns if (1 - self.cooldown) * x > self.stable_from]
        parts = []
        if inside:
            wait = (" (once the run in flight has passed the branch point)"
                    if max(self.earlier) in self.running else "")
            parts.append(f"branch off its stable phase and cool down {branch(inside)}{wait}")
        if beyond:
            parts.append(f"continue its stable phase from {self.stable_from:.4g} to "
                         f"{self.stable_to:.4g} tokens and cool down {branch(beyond)}")
        return head + f"the run with checkpoints at {d} {had}: " + "; ".join(parts)

    def to_dict(self, names: Mapping[str, str] | None = None) -> dict[str, Any]:
        """JSON-ready, in the user's column names (``names``: canonical → file); the family's
        configuration under ``config`` (so that no axis name can clash with a key)."""
        names = names or {}
        config = {names.get("N", "N"): self.N}
        config |= {names.get(k, k): v for k, v in self.hyperparameters}
        return {"run": self.number, "config": config, "stable_from": self.stable_from,
                "stable_to": self.stable_to, "cooldowns": list(self.cooldowns),
                "completed": list(self.completed), "running": list(self.running),
                "cooldown_fraction": self.cooldown}


def _value(v: Any) -> str:
    """A hyperparameter value for a sentence (floats to 4 significant digits)."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def wsd_runs(grid: Grid, picked: Sequence[int], completed: np.ndarray, running: np.ndarray,
             cooldown: float) -> tuple[tuple[WsdRun, ...], tuple[int, ...]]:
    """The WSD runs of a batch and the run number of each pick.

    Args:
        grid: The campaign's grid.
        picked: Grid rows suggested, in the order picked.
        completed, running: Grid rows already completed, and in flight (failed runs share
            nothing with a family, as in the cost model, and are not passed).
        cooldown: The cost model's cooldown fraction ``f``.

    Returns:
        ``(runs, numbers)``: one :class:`WsdRun` per family among ``picked``, numbered in the
        order the batch first picks it, and the run number of each pick (same order as
        ``picked``).
    """
    fam = families(grid)
    D = grid.configs["D"].to_numpy(np.float64)
    order: list[int] = []
    numbers: list[int] = []
    for i in picked:
        if int(fam[int(i)]) not in order:
            order.append(int(fam[int(i)]))
        numbers.append(order.index(int(fam[int(i)])) + 1)

    def tokens(rows: Any, family: int) -> tuple[float, ...]:
        rows = np.asarray(rows, dtype=np.int64).ravel()
        return tuple(sorted({float(x) for x in D[rows[fam[rows] == family]]}))

    runs: list[WsdRun] = []
    for number, family in enumerate(order, start=1):
        first = grid.config(next(int(i) for i in picked if fam[int(i)] == family))
        runs.append(WsdRun(number=number, N=float(first["N"]),
                           hyperparameters=tuple((a, first[a]) for a in grid.axes),
                           cooldowns=tokens(picked, family),
                           completed=tokens(completed, family),
                           running=tokens(running, family), cooldown=float(cooldown)))
    return tuple(runs), tuple(numbers)


def wsd_cost_notes(runs: Any, grid: Grid, cooldown: float) -> tuple[str, ...]:
    """Notes on how a campaign's runs are charged under the ``wsd`` cost model (cooldown
    fraction ``cooldown``), for ``runs`` (:class:`~scalebo.search.campaign_runs.CampaignRuns`):

    * a failed checkpoint without a cost of its own (the runs file's ``cost`` column) is
      charged a whole run, since a failed run shares no stable phase; when a longer
      checkpoint of its family completed, it may instead have been a cooldown branched off
      that run's stable phase (as ``suggest`` plans a family), which costs ``f·c·D`` only,
      and only the user knows which: the note says what to write;
    * a completed run's cost column is not used (families are charged by the model).
    """
    fam = families(grid)
    D = grid.configs["D"].to_numpy(np.float64)
    own = np.asarray(grid.budget_cost, dtype=np.float64)
    done = np.asarray(runs.completed, dtype=np.int64)
    notes = []
    for g in (int(i) for i in runs.failed):
        longer = done[(fam[done] == fam[g]) & (D[done] > D[g])]
        if not longer.size or not np.isclose(runs.cost.get(g, own[g]), own[g]):
            continue
        where = runs.rows.get(g, (runs.source, None))
        there = runs.rows.get(int(longer[0]), (runs.source, None))
        notes.append(f"{where[0]}: data row {where[1]} (D={D[g]:g}) failed and is charged a "
                     f"whole run, {own[g]:.4g} {grid.price_unit}: if it was a cooldown branched "
                     f"off the run of data row {there[1]} (D={D[longer[0]]:g}, completed), it "
                     f"cost {cooldown * own[g]:.4g}: write that in its cost column")
    ignored = [int(g) for g in done
               if g in runs.cost and not np.isclose(runs.cost[int(g)], own[int(g)])]
    if ignored:
        where = runs.rows.get(ignored[0], (runs.source, None))
        said, planned = sum(runs.cost[g] for g in ignored), float(own[ignored].sum())
        notes.append(f"{where[0]}: the cost column of {len(ignored)} completed run(s) (first: "
                     f"data row {where[1]}) is not used under --cost-model wsd: each family "
                     "is charged its stable phase and cooldowns by the model; they record "
                     f"{said:.4g} {grid.price_unit} against the grid's {planned:.4g} for them "
                     f"({said - planned:+.4g}, not in the spending: lower the budget by as much "
                     "to hold it)")
    ratio = _per_token_spread(grid, fam, D, own)
    if ratio > PER_TOKEN_SPREAD:
        notes.append(f"the grid's cost is not proportional to D within a family (its cost per "
                     f"token varies up to {ratio:.3g}x, e.g. a fixed start-up cost per run): "
                     "--cost-model wsd charges each family its mean cost per token times D, so "
                     "its short runs are charged less than the grid says and its long ones "
                     "more")
    return tuple(notes)


#: Largest ratio of cost per token within a family before :func:`wsd_cost_notes` says the
#: ``wsd`` model's price per token misprices it.
PER_TOKEN_SPREAD = 1.5


def _per_token_spread(grid: Grid, fam: np.ndarray, D: np.ndarray, own: np.ndarray) -> float:
    """The largest max/min ratio of cost / D within a family of the grid (1 when uniform)."""
    rate = pd.Series(own / D).groupby(fam)
    low = rate.min().to_numpy()
    return float(np.max(rate.max().to_numpy() / np.where(low > 0, low, np.inf), initial=1.0))
