"""What training a set of grid configurations costs: independent runs or WSD checkpoints.

* ``independent`` — every configuration is its own run: ``cost = C`` (``6·N·D`` FLOPs unless
  the grid has a ``C`` column), and a set costs the sum.
* ``wsd`` (warmup-stable-decay, cooldown fraction ``f``, default 0.1) — configurations that
  share ``N`` and every hyperparameter (a *family*: they differ only in ``D``) are one run
  whose stable phase reaches ``(1 − f)·`` its longest ``D``; the checkpoint at ``D`` is a
  cooldown of ``f·D`` tokens branched off the stable phase at ``(1 − f)·D``. For a
  family whose trained token counts are ``D_1 … D_k``, the cost is
  ``c·((1 − f)·max_j D_j + f·Σ_j D_j)`` with ``c = C/D`` the family's FLOPs per token
  (``6·N``): the stable phase is shared and each checkpoint pays its cooldown. Extending a
  family costs only the difference (:meth:`CostModel.marginal`); which runs a batch of
  suggestions makes up: :mod:`scalebo.search.wsd_runs`.

Costs are FLOPs, or with ``priced=True`` the grid's budget unit
(:attr:`~scalebo.search.grid.Grid.budget_cost`, e.g. GPU-hours from a ``cost`` column; under
``wsd`` a family's price per token is the mean of its configurations' price / D).

Replaying recorded independent-run losses under ``wsd`` assumes that a cooldown from the
stable phase reaches the loss the independent run recorded (Hägele et al. 2024 report WSD
cooldowns matching cosine runs; the replay cannot check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scalebo.errors import SearchError
from scalebo.search.grid import Grid

__all__ = ["COST_MODELS", "CostModel", "accounting_note", "cheapest_untried", "families"]

COST_MODELS = ("independent", "wsd")


@lru_cache(maxsize=8)
def _families(grid: Grid) -> np.ndarray:
    keys = grid.configs[["N", *grid.axes]].astype(str).agg("|".join, axis=1)
    return np.unique(keys.to_numpy(), return_inverse=True)[1].astype(np.int64)


def families(grid: Grid) -> np.ndarray:
    """Family of every configuration (same ``N`` and hyperparameters), ``(n_cfg,)`` int."""
    return _families(grid)


@dataclass(frozen=True)
class CostModel:
    """A cost model (see the module docstring); costs in FLOPs."""

    kind: str = "independent"
    cooldown: float = 0.1

    def __post_init__(self) -> None:
        if self.kind not in COST_MODELS:
            raise SearchError(f"unknown cost model {self.kind!r}; expected one of "
                              f"{list(COST_MODELS)}")
        if not 0 <= self.cooldown <= 1:
            raise SearchError(f"cooldown must be a fraction in [0, 1], got {self.cooldown}")

    def label(self) -> str:
        return "independent" if self.kind == "independent" else f"wsd(f={self.cooldown:g})"

    @staticmethod
    def values(grid: Grid, priced: bool) -> np.ndarray:
        """Each configuration's own cost, ``(n_cfg,)``: FLOPs, or (``priced``) the grid's
        budget unit."""
        return grid.budget_cost if priced else grid.cost

    def _family_costs(self, grid: Grid, mask: np.ndarray, priced: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per family: cost per token (the family's mean of cost / D), longest and summed
        trained tokens of ``mask``."""
        fam = families(grid)
        D = grid.configs["D"].to_numpy(np.float64)
        size = np.bincount(fam)
        per_token = np.bincount(fam, weights=self.values(grid, priced) / D) / size
        longest = np.zeros_like(per_token)
        np.maximum.at(longest, fam[mask], D[mask])
        total = np.bincount(fam[mask], weights=D[mask], minlength=per_token.size)
        return per_token, longest, total

    def total(self, grid: Grid, mask: np.ndarray, *, priced: bool = False) -> float:
        """FLOPs of training every configuration in ``mask`` ``(n_cfg,)`` bool (``priced``:
        in the grid's budget unit, :attr:`~scalebo.search.grid.Grid.budget_cost`)."""
        mask = np.asarray(mask, dtype=bool)
        if self.kind == "independent":
            return float(self.values(grid, priced)[mask].sum())
        c, longest, summed = self._family_costs(grid, mask, priced)
        f = self.cooldown
        return float(np.sum(c * ((1 - f) * longest + f * summed)))

    def marginal(self, grid: Grid, mask: np.ndarray, *, priced: bool = False) -> np.ndarray:
        """FLOPs (``priced``: budget units) of adding each configuration to the trained set
        ``mask``, ``(n_cfg,)`` (0 for configurations in ``mask``)."""
        mask = np.asarray(mask, dtype=bool)
        if self.kind == "independent":
            return np.where(mask, 0.0, self.values(grid, priced))
        fam = families(grid)
        D = grid.configs["D"].to_numpy(np.float64)
        c, longest, _ = self._family_costs(grid, mask, priced)
        f = self.cooldown
        extra = c[fam] * ((1 - f) * np.maximum(D - longest[fam], 0.0) + f * D)
        return np.where(mask, 0.0, extra)


def cheapest_untried(grid: Grid, marginal: np.ndarray, taken: np.ndarray) -> float | None:
    """The smallest ``marginal`` cost ``(n_cfg,)`` among acquirable configurations not in
    ``taken`` (trained, running or failed; ``(n_cfg,)`` bool); None when none is left."""
    free = ~grid.held_out & ~np.asarray(taken, dtype=bool)
    return float(marginal[free].min()) if free.any() else None


def accounting_note(model: CostModel | None, wsd_numbered: bool, source: str) -> str:
    """A note when a campaign's runs carry ``wsd_run`` numbers (``suggest --cost-model wsd``
    wrote them, so the campaign was planned as WSD checkpoints) but ``model`` charges every
    run as an independent one: spent, pending and remaining then differ from the plan's with
    no other sign; ``""`` otherwise."""
    if not wsd_numbered or (model is not None and model.kind == "wsd"):
        return ""
    return (f"{source}: its rows carry wsd_run numbers (suggest --cost-model wsd wrote them), "
            "but this accounting charges every run as an independent one: pass --cost-model "
            "wsd (CostModel('wsd') in Python) to count them as the campaign planned them, as "
            "checkpoints of shared training runs")
