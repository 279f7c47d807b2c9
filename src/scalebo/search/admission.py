"""What a search may start now: the budget, the compute window and the anchor's reservation.

:class:`Admission` is the base of :class:`~scalebo.search.loop.SearchLoop` (on top of the
tell side, :class:`~scalebo.search.ledger.ObservationLedger`): from the budget (in the grid's
budget unit, FLOPs or its price), the window schedule (caps in FLOPs) and what is observed or
pending it says which configurations are admissible
(:func:`~scalebo.search.window.admissible_mask`), holding back the anchor run's cost
(:mod:`scalebo.search.anchor`) until the anchor cell has a run or the observed runs dominate
it (the one question it puts to the search's surrogate). It asks nothing itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalebo.search.anchor import (
    anchor_candidates,
    anchor_dominated,
    anchor_reserve,
    anchor_rows,
)
from scalebo.search.ledger import ObservationLedger
from scalebo.search.polish import nats_predictor, polish_phase
from scalebo.search.window import COST_RTOL, WindowSchedule, admissible_mask

__all__ = ["Admission"]


class Admission(ObservationLedger):
    """Admissibility for a search with ``budget`` (budget units), ``schedule`` and
    ``anchor`` (share of the budget the anchor run may cost, 0: none), set by the subclass."""

    budget: float
    schedule: WindowSchedule
    anchor: float = 0.0
    polish: float = 0.0
    _X: np.ndarray  # the grid, encoded for the surrogate
    _random_order: bool = False
    _dominated: tuple[tuple[int, int], bool] | None = None  # (n_obs, anchor row), verdict

    @property
    def remaining(self) -> float:
        """Budget not yet committed (``budget − committed``; negative if overrun), in the
        grid's budget unit (FLOPs unless the grid has a price, :meth:`Grid.with_price`)."""
        return self.budget - self.committed_budget

    @property
    def done(self) -> bool:
        """True when no configuration is admissible within the remaining budget."""
        return not self._affordable().any() and not self._anchor_candidates().size

    def _affordable(self) -> np.ndarray:
        """Admissible configurations ignoring the window cap, ``(n_cfg,)`` bool (the budget
        less what the anchor holds back)."""
        return self._affordable_within(self._search_budget())

    def _affordable_within(self, search_budget: float) -> np.ndarray:
        """Admissible configurations ignoring the window cap when ``search_budget`` (budget
        units) is what the search may commit in all, ``(n_cfg,)`` bool."""
        return admissible_mask(self.grid, self._unavailable, self._pending,
                               self.committed_budget, search_budget, np.inf,
                               self.marginal_cost(priced=True))[0]

    def _search_budget(self) -> float:
        """The budget less what is held back for the anchor run (budget units)."""
        return self.budget - anchor_reserve(*self._anchor_state())

    def _anchor_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        """The arguments of :func:`anchor_candidates` / :func:`anchor_reserve` now: the
        anchor cell's rows, tried, unavailable, marginal costs and the room left."""
        rows = anchor_rows(self.grid, self.budget, self.anchor)
        state = (rows, self._observed | self._pending, self._unavailable,
                 self.marginal_cost(priced=True), self.remaining + COST_RTOL * self.budget)
        if rows.size and self._anchor_dominated(state):
            return (rows[:0], *state[1:])  # dropped: the observed runs dominate its cell
        return state

    def _anchor_dominated(self, state: tuple) -> bool:
        """At the anchor's turn (it is held back and nothing else fits beside it), whether
        the observed runs dominate its cell (:func:`~scalebo.search.anchor.anchor_dominated`,
        by the surrogate fitted on them; never for a random order); remembered per state."""
        rows = state[0]
        reserve = anchor_reserve(*state)
        if (self._random_order or not self._obs_y or reserve <= 0
                or self._affordable_within(self.budget - reserve).any()):
            return False
        key = (len(self._obs_y), int(rows[0]))
        if self._dominated is None or self._dominated[0] != key:
            model, _, mu, sd = self._posterior()
            mean, std = nats_predictor(model, self._X, mu, sd)(rows)
            self._dominated = key, anchor_dominated(self.grid.budget_cost, rows,
                                                    self.observed_indices,
                                                    self.observed_losses, mean, std)
        return self._dominated[1]

    def _posterior(self) -> tuple[Any, np.ndarray, float, float]:
        """The surrogate on the observed runs (the search's; see ``SearchLoop``)."""
        raise NotImplementedError

    def dropped_anchor(self) -> tuple[float, float] | None:
        """The anchor cell's ``(N, D)`` (parameters, tokens) when it is dropped now (its turn
        has come and the observed runs dominate it), else None."""
        rows = anchor_rows(self.grid, self.budget, self.anchor)
        if not rows.size or self._anchor_state()[0].size:
            return None
        return self._cell(int(rows[0]))

    def dropped_in_asks(self) -> tuple[float, float] | None:
        """The anchor cell's ``(N, D)`` when an ask on the current observed runs dropped it
        at its turn (a batch that went on to spend what it held back), else None. Reads the
        remembered verdict only: asks nothing of the surrogate."""
        rows = anchor_rows(self.grid, self.budget, self.anchor)
        if rows.size and self._dominated == ((len(self._obs_y), int(rows[0])), True):
            return self._cell(int(rows[0]))
        return None

    def _cell(self, row: int) -> tuple[float, float]:
        cfg = self.grid.configs.iloc[row]
        return float(cfg["N"]), float(cfg["D"])

    def held_back(self) -> tuple[float, tuple[float, float] | None]:
        """What the search holds back now for the anchor run (budget units, 0 when nothing),
        and the anchor cell's ``(N, D)`` (parameters, tokens) while it is held back."""
        reserve = self.budget - self._search_budget()
        if reserve <= 0:
            return 0.0, None
        row = anchor_rows(self.grid, self.budget, self.anchor)[0]
        cfg = self.grid.configs.iloc[row]
        return float(reserve), (float(cfg["N"]), float(cfg["D"]))

    def _anchor_candidates(self) -> np.ndarray:
        """The anchor cell's rows that may be started now: none once it is placed."""
        return anchor_candidates(*self._anchor_state())

    def polishing(self) -> bool:
        """True once runs are observed and ``1 − polish`` of the budget is committed
        (:mod:`scalebo.search.polish`)."""
        return bool(self._obs_y) and polish_phase(self.committed_budget, self.budget,
                                                   self.polish)

    def choice_set(self, budget: float | None = None
                   ) -> tuple[bytes, bytes, tuple[int, ...], bool]:
        """What the next ask chooses among under ``budget`` (budget units; default the
        loop's): the affordable and window masks, the anchor candidates once nothing else
        fits, and whether the polish phase has begun. In one state, equal choice sets mean
        the same next pick, so a replay can follow one long run until a smaller budget's
        choices first differ."""
        saved = self.budget
        self.budget = saved if budget is None else float(budget)
        try:
            aff = self._affordable()
            if aff.any():
                return (aff.tobytes(), self._window(self.committed)[1].tobytes(), (),
                        self.polishing())
            return aff.tobytes(), b"", tuple(self._anchor_candidates().tolist()), False
        finally:
            self.budget = saved

    def window_cap(self) -> float:
        """The search's window in FLOPs for the compute committed so far (``inf``: none).

        The schedule's cap (not risen), and at least the costliest observed configuration,
        since a cap that rose to admit a run includes it. After the search this is the
        "final window" that fantasization fills (DESIGN.md).
        """
        committed = self.committed
        cap = self.schedule.cap(committed, max(self._flops_budget(committed), committed),
                                self.grid, self._observed | self._pending)
        costliest = float(self.grid.cost[self._observed].max()) if self._observed.any() else 0.0
        return max(float(cap), costliest)

    def current_cap(self) -> float:
        """The effective window cap (FLOPs) for the current state (risen if need be)."""
        return self._window(self.committed)[0]

    def _flops_budget(self, committed: float) -> float:
        """The budget as the schedules see it, FLOPs: itself, or for a priced grid the FLOPs
        whose share of it is the committed share of the priced budget."""
        if self.grid.price is None:
            return self.budget
        priced = self.committed_budget
        rate = committed / priced if priced > 0 else self.grid.C_total / self.grid.budget_total
        return self.budget * rate

    def _window(self, committed: float) -> tuple[float, np.ndarray]:
        """Cap (FLOPs) and admissible mask for ``committed`` FLOPs."""
        cap = self.schedule.cap(committed, self._flops_budget(committed), self.grid,
                                self._observed | self._pending)
        adm = admissible_mask(self.grid, self._unavailable, self._pending,
                              self.committed_budget, self._search_budget(), cap,
                              self.marginal_cost(priced=True))
        return adm.cap, adm.mask
