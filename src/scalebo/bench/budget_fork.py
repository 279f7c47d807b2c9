"""Smaller budgets recorded on the way of one long replay, by forking where they differ.

A search whose picks depend on its budget only through what it may choose among (the
affordable configurations, the window, the anchor run's candidates;
:meth:`~scalebo.search.admission.Admission.choice_set`) makes, under a smaller budget ``b``,
the same picks as under the largest one for as long as the two choice sets are equal in the
shared state. :func:`fork_budgets` runs the long search one pick at a time (``q = 1``) and,
at the first state where a recorded budget's choice set differs, copies the loop, gives the
copy budget ``b`` and finishes it: each recorded budget equals a separate replay, exactly,
while the long run is replayed once. Used for methods with an anchor run, whose held-back
cost depends on the budget (:mod:`scalebo.search.anchor`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TypeVar

from scalebo.search.loop import SearchLoop

__all__ = ["fork_budgets"]

M = TypeVar("M")


def fork_budgets(loop: SearchLoop, budgets: Sequence[float],
                 step: Callable[[SearchLoop], list[int]],
                 measure: Callable[[SearchLoop, float], M],
                 progress: Callable[[float], None] | None = None) -> list[M]:
    """Run ``loop`` (set up for the largest budget) to its end, measuring every budget.

    Args:
        loop: The search for ``max(budgets)``, one pick per step.
        budgets: Fractions of the grid's :attr:`~scalebo.search.grid.Grid.budget_total`,
            increasing; the last is the loop's.
        step: One ask-and-tell (returns the picks; none once the loop is done).
        measure: Metrics of a finished loop at a budget fraction.
        progress: Called with the long run's committed share of its budget after a step.

    Returns:
        ``measure``'s result per budget, in the order of ``budgets``.
    """
    total = loop.grid.budget_total
    pending = list(budgets[:-1])
    out: dict[float, M] = {}
    while True:
        mine = loop.choice_set()
        for b in list(pending):
            if loop.choice_set(b * total) != mine:  # the b-run picks differently from here
                sub = copy.deepcopy(loop, memo={id(loop.grid): loop.grid})
                sub.budget = b * total
                while step(sub):
                    pass
                out[b] = measure(sub, b)
                pending.remove(b)
        if not step(loop):
            break
        if progress is not None:
            progress(loop.committed_budget / loop.budget)
    for b in pending:  # never differed: the b-run ended where the long run did
        out[b] = measure(loop, b)
    out[budgets[-1]] = measure(loop, budgets[-1])
    return [out[b] for b in budgets]
