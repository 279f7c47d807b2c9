"""Observed and pending grid rows of a search, and the compute they commit (the tell side).

:class:`ObservationLedger` is the base of :class:`~scalebo.search.loop.SearchLoop`: it holds
which rows of a :class:`~scalebo.search.grid.Grid` were observed (with their losses, nats,
in the order told) or are pending (asked or declared running, not yet told), validates the
indices it is given, and sums their cost (FLOPs). It asks nothing itself.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scalebo.errors import SearchError
from scalebo.search.cost_model import CostModel
from scalebo.search.grid import Grid

__all__ = ["ObservationLedger"]


class ObservationLedger:
    """Observed rows (losses in nats) and pending rows of ``grid``.

    Args:
        grid: Candidate configurations; rows are indices into it.
        cost_model: How a set of configurations costs (default independent runs).
    """

    def __init__(self, grid: Grid, cost_model: CostModel | None = None) -> None:
        self.grid = grid
        self.cost_model = cost_model or CostModel()
        self._obs_idx: list[int] = []
        self._obs_y: list[float] = []
        self._observed = np.zeros(grid.n_configs, dtype=bool)
        self._pending = np.zeros(grid.n_configs, dtype=bool)
        self._failed = np.zeros(grid.n_configs, dtype=bool)

    def _total(self, mask: np.ndarray, priced: bool) -> float:
        own = CostModel.values(self.grid, priced)[self._failed]
        return self.cost_model.total(self.grid, mask, priced=priced) + float(own.sum())

    @property
    def spent(self) -> float:
        """Compute of the observed (told) and failed runs, FLOPs: the cost model's total for
        the observed ones, plus each failed run's own cost (a crashed or diverged run leaves
        no stable phase for others to branch from)."""
        return self._total(self._observed, False)

    @property
    def committed(self) -> float:
        """Compute of observed, pending and failed runs, FLOPs (as :attr:`spent`)."""
        return self._total(self._observed | self._pending, False)

    @property
    def committed_budget(self) -> float:
        """:attr:`committed` in the grid's budget unit (:attr:`Grid.budget_cost`; FLOPs
        without a price)."""
        return self._total(self._observed | self._pending, True)

    def marginal_cost(self, *, priced: bool = False) -> np.ndarray:
        """FLOPs (``priced``: budget units) of starting each configuration now, given what is
        trained or pending (0 for those; failed runs share nothing), ``(n_cfg,)``."""
        return self.cost_model.marginal(self.grid, self._observed | self._pending,
                                        priced=priced)

    @property
    def failed_indices(self) -> np.ndarray:
        """Grid rows of failed runs (cost spent, no loss; never proposed again)."""
        return np.flatnonzero(self._failed)

    @property
    def _unavailable(self) -> np.ndarray:
        """Rows that are never proposed again: observed or failed, ``(n_cfg,)`` bool."""
        return self._observed | self._failed

    @property
    def observed_indices(self) -> np.ndarray:
        """Grid rows of the observations in the order told, shape ``(n_obs,)``."""
        return np.array(self._obs_idx, dtype=np.int64)

    @property
    def observed_losses(self) -> np.ndarray:
        """Observed losses (nats) aligned with :attr:`observed_indices`, ``(n_obs,)``."""
        return np.array(self._obs_y, dtype=np.float64)

    @property
    def pending_indices(self) -> np.ndarray:
        """Grid rows asked or marked pending and not yet told, ``(n_pending,)``."""
        return np.flatnonzero(self._pending)

    def _indices(self, idx: int | Iterable[int]) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(idx))
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise SearchError(f"Expected grid row indices (integers), got {idx!r}.")
        if (bad := arr[(arr < 0) | (arr >= self.grid.n_configs)]).size:
            raise SearchError(f"Indices {bad[:5].tolist()} are outside the grid "
                              f"(0..{self.grid.n_configs - 1}).")
        if np.unique(arr).size != arr.size:
            raise SearchError(f"Indices repeat within one call: {arr.tolist()}.")
        if (held := arr[self.grid.held_out[arr]]).size:
            raise SearchError(f"Indices {held[:5].tolist()} are in held-out cells, which are "
                              "never acquired.")
        return arr.astype(np.int64)

    def tell(self, idx: int | Iterable[int], loss: float | Iterable[float]) -> None:
        """Record observed losses (nats) at grid rows; clears them from pending.

        Raises:
            SearchError: an index is off-grid, held out, repeated or already observed, or a
                loss is not finite and > 0 (record a crashed or diverged run with
                :meth:`mark_failed`).
        """
        arr = self._indices(idx)
        y = np.atleast_1d(np.asarray(loss, dtype=np.float64))
        if y.shape != arr.shape:
            raise SearchError(f"Got {arr.size} indices but {y.size} losses; pass one per index.")
        if not np.all(np.isfinite(y) & (y > 0)):
            raise SearchError(f"Losses must be finite and > 0 (nats), got {y.tolist()} for rows "
                              f"{arr.tolist()}; "
                              "record a crashed or diverged run with mark_failed (its compute "
                              "stays spent, and it is not proposed again).")
        dup = arr[self._observed[arr]]
        if dup.size:
            raise SearchError(f"Rows {dup.tolist()} are already observed; average repeats first.")
        if (failed := arr[self._failed[arr]]).size:
            raise SearchError(f"Rows {failed.tolist()} are recorded as failed; a retried run "
                              "that finished is told after clearing it (clear_failed).")
        self._observed[arr] = True
        self._pending[arr] = False
        self._obs_idx.extend(arr.tolist())
        self._obs_y.extend(y.tolist())

    def mark_failed(self, idx: int | Iterable[int]) -> None:
        """Record failed runs (crashed, NaN or diverged): their compute counts as spent, they
        are never proposed again and carry no loss (the surrogate does not see them). A
        pending row that fails stops being pending.

        Raises:
            SearchError: an index is off-grid, held out, repeated, observed or failed already.
        """
        arr = self._indices(idx)
        taken = arr[self._observed[arr] | self._failed[arr]]
        if taken.size:
            raise SearchError(f"Rows {taken.tolist()} are already observed or failed.")
        self._pending[arr] = False
        self._failed[arr] = True

    def mark_pending(self, idx: int | Iterable[int]) -> None:
        """Declare configurations as running (cost committed, believed at the mean)."""
        arr = self._indices(idx)
        taken = arr[self._observed[arr] | self._pending[arr] | self._failed[arr]]
        if taken.size:
            raise SearchError(f"Rows {taken.tolist()} are already observed, pending or failed.")
        self._pending[arr] = True

    def clear_failed(self, idx: int | Iterable[int]) -> None:
        """Make failed rows proposable again (a retry). The ledger then no longer counts the
        failed attempt's compute: a caller that retries accounts for it (a campaign lowers
        the loop's budget by it, :func:`scalebo.search.campaign.suggest_runs`)."""
        arr = self._indices(idx)
        self._failed[arr] = False
