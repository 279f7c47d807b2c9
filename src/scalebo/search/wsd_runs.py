"""Which training runs a batch of suggestions asks for under ``--cost-model wsd``.

Under the ``wsd`` cost model (:mod:`scalebo.search.cost_model`) the configurations that share
``N`` and every hyperparameter (a *family*) are one warmup-stable-decay run: its stable phase
is trained to the family's longest ``D`` (tokens) and a cooldown is branched off at every
``D`` of the family that is asked for. A batch of suggestions is therefore a set of runs, not
of independent trainings: two suggestions of one family are one run with two cooldowns, and
a suggestion whose family already has checkpoints (completed or in flight) continues that
run, paying only the stable tokens beyond its longest checkpoint and the new cooldown — which
is what the campaign's budget charged. :func:`wsd_runs` groups a batch by family and says,
per run, how far to train the stable phase and where to cool down, so that a user launches
one run per family instead of one per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalebo.search.cost_model import families
from scalebo.search.grid import Grid

__all__ = ["WsdRun", "wsd_runs"]


@dataclass(frozen=True)
class WsdRun:
    """One WSD run that a batch of suggestions starts or continues.

    Attributes:
        number: 1-based, in the order the batch first picks the family.
        N: Parameters.
        hyperparameters: ``(axis, value)`` of every hyperparameter axis of the family.
        cooldowns: Tokens ``D`` of the checkpoints this batch asks for, ascending.
        earlier: Tokens ``D`` of the family's checkpoints already completed or running,
            ascending (empty: a new run).
        train_to: Tokens the stable phase must reach: the largest ``D`` of both.
    """

    number: int
    N: float
    hyperparameters: tuple[tuple[str, Any], ...]
    cooldowns: tuple[float, ...]
    earlier: tuple[float, ...]
    train_to: float

    def describe(self, names: Mapping[str, str] | None = None) -> str:
        """One line for a person, in the user's column names (``names``: canonical → file)."""
        names = names or {}
        n, d = names.get("N", "N"), names.get("D", "D")
        hyper = "".join(f", {names.get(k, k)} {_value(v)}" for k, v in self.hyperparameters)
        head = f"wsd run {self.number} ({n} {self.N:.4g}{hyper}): "
        at = f"cool down at {d} " + ", ".join(f"{x:.4g}" for x in self.cooldowns)
        if not self.earlier:
            return head + f"a new run; train the stable phase to {d} {self.train_to:.4g}, {at}"
        had = (f"the run with checkpoints at {d} "
               + ", ".join(f"{x:.4g}" for x in self.earlier) + " (completed or running)")
        last = max(self.earlier)
        if self.train_to > last:
            return (head + f"continues {had}: resume its stable phase at {d} {last:.4g}, "
                    f"train it to {d} {self.train_to:.4g}, {at}")
        return head + f"{had} passed these token counts already: {at} from its stable phase"

    def to_dict(self, names: Mapping[str, str] | None = None) -> dict[str, Any]:
        """JSON-ready, in the user's column names (``names``: canonical → file)."""
        names = names or {}
        out: dict[str, Any] = {"run": self.number, names.get("N", "N"): self.N}
        out |= {names.get(k, k): v for k, v in self.hyperparameters}
        return out | {"train_to": self.train_to, "cooldowns": list(self.cooldowns),
                      "earlier": list(self.earlier)}


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def wsd_runs(grid: Grid, picked: Sequence[int], earlier: np.ndarray
             ) -> tuple[tuple[WsdRun, ...], tuple[int, ...]]:
    """The WSD runs of a batch and the run number of each pick.

    Args:
        grid: The campaign's grid.
        picked: Grid rows suggested, in the order picked.
        earlier: Grid rows already completed or running (any order; repeats allowed).

    Returns:
        ``(runs, numbers)``: one :class:`WsdRun` per family among ``picked``, numbered in the
        order the batch first picks it, and the run number of each pick (same order as
        ``picked``).
    """
    fam = families(grid)
    D = grid.configs["D"].to_numpy(np.float64)
    earlier = np.asarray(earlier, dtype=np.int64).ravel()
    order: list[int] = []
    numbers = []
    for i in picked:
        f = int(fam[int(i)])
        if f not in order:
            order.append(f)
        numbers.append(order.index(f) + 1)
    runs = []
    for k, f in enumerate(order, start=1):
        mine = sorted({float(D[int(i)]) for i in picked if fam[int(i)] == f})
        before = sorted({float(x) for x in D[earlier[fam[earlier] == f]]})
        first = grid.config(next(int(i) for i in picked if fam[int(i)] == f))
        runs.append(WsdRun(number=k, N=float(first["N"]),
                           hyperparameters=tuple((a, first[a]) for a in grid.axes),
                           cooldowns=tuple(mine), earlier=tuple(before),
                           train_to=max(mine + before)))
    return tuple(runs), tuple(numbers)
