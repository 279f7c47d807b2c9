"""Per-group design replays: one formula law, fitted separately in every group of a pool.

Benchmark tasks with several groups (datasets, model families, …) fit the same formula with
its own parameters in each group, and the score is one R² over all target rows pooled, each
predicted by its own group's fit. ScaleBench runs every group as its own episode with
budgets of that group's cost (:func:`separate_group_replays`, the default of
``scalebo design --group``). :func:`grouped_design_replay` instead shares one budget over the
whole pool, so a design may move compute between groups (``--group-budget shared``),
reusing the single-group pieces of :mod:`scalebo.design.replay`:

* **groups.** The pool and the target region are split by a group label per row. A target
  group without pool rows is an error; pool groups without target rows are allowed (the
  ``variance`` method never buys them, the baselines may).
* **budget.** Fractions ``b`` of ``C = Σ cost`` over the *whole* pool; one sequential run to
  the largest budget; every bought row (any group) counts against it.
* **pilot** (``variance`` only). Each group holding target rows gets the single-group pilot
  (:func:`~scalebo.design.replay.pilot_rows`: its cheapest rows, at most ``⌊2.5·p⌋``) within
  its share of the protocol's 2 % of C, the share proportional to the group's pool cost
  among the groups with target rows: ``0.02·C·C_g / Σ_h C_h``. The total pilot thus stays
  ≤ 2 % of C; with one group it is the single-group pilot. The pilot rows of all groups are
  bought cheapest first (stable).
* **acquisition.** One row at a time among the rows that still fit the final budget. For
  ``variance``, each group keeps its own fit and posterior (refits and rank-one updates as
  :func:`~scalebo.design.replay.refit_step`, only for the group that got the newest row); a
  candidate scores the expected reduction of *its* group's target-region predictive
  variance (summed over that group's target rows) per ``(cost/C)^γ``
  (:func:`~scalebo.design.acquisition.variance_scores`, C the whole pool's cost), and the
  best over all groups wins. While a target group has no usable fit yet, its cheapest
  affordable row is bought first. Baselines draw from the whole pool
  (:func:`~scalebo.design.acquisition.baseline_pick`).
* **checkpoints.** As the single-group replay: the rows bought before the spend first
  reached ``b·C``; each group is fitted on its rows (full ``n_starts`` fit, without the
  single-group replay's warm starts from the design's own fit: a shared budget's checkpoints
  are the protocol's cold fits); the pooled R² over all target rows is clipped to [−1, 1]
  and is −1 when the fit of any group holding target rows fails (the benchmark scores a
  failed fit −1); each group's target intervals as the single-group checkpoint's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from scalebo.design.acquisition import DEFAULT_GAMMA, baseline_pick, variance_scores
from scalebo.design.pool import Pool, TargetRegion
from scalebo.design.replay import (
    BUDGET_RTOL,
    DESIGN_STARTS,
    FULL_GROWTH,
    METHODS,
    REFIT_GROWTH,
    RefitState,
    checkpoint_rows,
    clipped_r2,
    design_replay,
    fit_rows,
    fit_summary,
    pilot_rows,
    refit_step,
    target_interval,
)
from scalebo.fitting.robust import FitResult
from scalebo.laws.formula import FormulaLaw
from scalebo.search.budget import as_fractions

__all__ = ["GROUP_BUDGETS", "GroupRows", "GroupedCheckpoint", "GroupedReplay", "group_seed",
           "grouped_design_replay", "grouped_pilot", "pooled_r2", "separate_group_replays",
           "split_groups"]

#: How a multi-group design spends: ``per-group`` (ScaleBench's protocol: each group its own
#: episode with budgets of its own cost, :func:`separate_group_replays`) or ``shared`` (one
#: budget over the whole pool, :func:`grouped_design_replay`).
GROUP_BUDGETS = ("per-group", "shared")


@dataclass(frozen=True)
class GroupRows:
    """The rows of one group.

    Attributes:
        name: the group label (as text).
        pool: positions ``(n_g,)`` of its rows in the whole pool, increasing.
        target: positions ``(m_g,)`` of its rows in the whole target region (may be empty).
    """

    name: str
    pool: np.ndarray
    target: np.ndarray


def group_seed(seed: int, i: int) -> int:
    """The seed of the ``i``-th group (sorted order): one rule for replays, proposals, fits."""
    return int(seed) + 1_000 * int(i)


def _labels(values: Any, n: int, what: str) -> np.ndarray:
    labels = pd.Series(np.asarray(values, dtype=object))
    if labels.shape[0] != n:
        raise ValueError(f"{what}: {labels.shape[0]} group labels for {n} rows")
    missing = np.flatnonzero(labels.isna().to_numpy())
    if missing.size:
        raise ValueError(f"{what}: data row {missing[0] + 1} has no group value")
    return labels.astype(str).to_numpy()


def split_groups(pool_groups: Any, target_groups: Any, n_pool: int | None = None,
                 n_target: int | None = None) -> tuple[GroupRows, ...]:
    """Split pool and target rows by their group labels (compared as text), groups sorted by
    label: each group's seed follows from its place, so a pool's row order must not move it
    (a trial's shuffled pool gave pooled R² 0.976 against 0.992).

    Raises:
        ValueError: a missing label, a label count that does not match ``n_pool`` /
            ``n_target``, or target groups without pool rows (named).
    """
    pg = _labels(pool_groups, len(pool_groups) if n_pool is None else n_pool, "pool")
    tg = _labels(target_groups, len(target_groups) if n_target is None else n_target,
                 "target region")
    names = sorted(dict.fromkeys(pg.tolist()))
    orphans = [g for g in dict.fromkeys(tg.tolist()) if g not in set(names)]
    if orphans:
        raise ValueError(f"target region group(s) {orphans} have no pool rows; pool groups: "
                         f"{names[:10]}")
    return tuple(GroupRows(g, np.flatnonzero(pg == g), np.flatnonzero(tg == g)) for g in names)


@dataclass(frozen=True)
class GroupedCheckpoint:
    """The per-group fits reported at one budget.

    Attributes:
        budget: the budget fraction ``b`` of the whole pool's total cost.
        spent_fraction: cost of the observed rows (all groups) / C (≤ ``b``).
        n_observed: rows observed, all groups.
        r2: pooled target-region R² (each target row predicted by its group's fit), clipped
            to [−1, 1], −1 when a fit of a group with target rows failed; ``None`` without
            target responses.
        params: ``{group: {name: value}}`` (``{}`` for a failed fit).
        status: ``{group: status}`` (``converged``, …, or ``failed: <reason>``).
        interval: ``{group: intervals}`` on the target rows of every group that has some
            (:func:`~scalebo.design.replay.target_interval`; ``{}`` for a failed fit).
    """

    budget: float
    spent_fraction: float
    n_observed: int
    r2: float | None
    params: dict[str, dict[str, float]]
    status: dict[str, str]
    interval: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the keys of a single-group checkpoint)."""
        return {"budget": self.budget, "spent_fraction": self.spent_fraction,
                "n_observed": self.n_observed, "r2": self.r2, "params": self.params,
                "status": self.status, "interval": self.interval}


@dataclass(frozen=True)
class GroupedReplay:
    """One sequential per-group design run and its checkpoints.

    Attributes:
        method: ``variance`` or a baseline.
        seed: seed of the fits' starts and of the baselines' draws.
        groups: group names, in the pool's order.
        order: whole-pool row positions in acquisition order.
        order_groups: the group of each acquired row.
        cum_cost_fraction: spent fraction (of the whole pool's C) after each acquisition.
        checkpoints: one per budget, in increasing budget order.
        n_pilot: pilot rows per group (all 0 for baselines).
        seconds: wall time of the replay.
    """

    method: str
    seed: int
    groups: tuple[str, ...]
    order: tuple[int, ...]
    order_groups: tuple[str, ...]
    cum_cost_fraction: tuple[float, ...]
    checkpoints: tuple[GroupedCheckpoint, ...]
    n_pilot: dict[str, int]
    seconds: float = field(compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``{"checkpoints": [...], ...}``)."""
        return {"method": self.method, "seed": self.seed, "groups": list(self.groups),
                "n_pilot": dict(self.n_pilot), "order": list(self.order),
                "order_groups": list(self.order_groups),
                "cum_cost_fraction": list(self.cum_cost_fraction),
                "checkpoints": [c.to_dict() for c in self.checkpoints], "seconds": self.seconds}


def grouped_pilot(cost: np.ndarray, groups: tuple[GroupRows, ...], n_params: int,
                  fraction: float = 0.02) -> dict[str, list[int]]:
    """Pilot rows (whole-pool positions) per group holding target rows: the single-group
    pilot within ``fraction·C·C_g / Σ_h C_h`` (module docstring); ``{}`` entries are absent
    for groups without target rows."""
    C = float(cost.sum())
    live = [g for g in groups if g.target.size]
    share_total = sum(float(cost[g.pool].sum()) for g in live)
    out = {}
    for g in live:
        share = fraction * float(cost[g.pool].sum()) / share_total
        out[g.name] = [int(g.pool[i]) for i in pilot_rows(cost[g.pool], n_params, C, share)]
    return out


def pooled_r2(law: FormulaLaw, fits: dict[str, FitResult | None],
              groups: tuple[GroupRows, ...], target: TargetRegion) -> float | None:
    """R² over all target rows, each predicted by its group's fit (clipped to [−1, 1]);
    −1 when a group with target rows has no fit; ``None`` without target responses."""
    if target.y is None:
        return None
    pred = np.full(target.y.shape[0], np.nan)
    for g in groups:
        if not g.target.size:
            continue
        fit = fits.get(g.name)
        if fit is None:
            return -1.0
        pred[g.target] = law.predict(fit.x, target.X[g.target])
    return clipped_r2(target.y, pred)


def _checkpoint(law: FormulaLaw, pool: Pool, target: TargetRegion,
                groups: tuple[GroupRows, ...], group_of: np.ndarray, rows: list[int],
                budget: float, n_starts: int, seed: int) -> GroupedCheckpoint:
    fits, params, status, interval = {}, {}, {}, {}
    for gi, g in enumerate(groups):
        mine = [r for r in rows if group_of[r] == gi]  # acquisition order, as a single group
        fit = fit_rows(law, pool.X[mine], pool.y[mine], n_starts=n_starts, seed=seed)
        fits[g.name] = fit
        params[g.name], status[g.name] = fit_summary(law, fit, len(mine))
        if g.target.size:
            region = TargetRegion(target.X[g.target],
                                  None if target.y is None else target.y[g.target])
            interval[g.name] = target_interval(law, fit, pool.X[mine], pool.y[mine], region)
    spent = float(pool.cost[rows].sum()) / pool.total_cost
    return GroupedCheckpoint(budget, spent, len(rows), pooled_r2(law, fits, groups, target),
                             params, status, interval)


def grouped_design_replay(pool: Pool, target: TargetRegion, law: FormulaLaw,
                          pool_groups: Any, target_groups: Any,
                          budgets: tuple[float, ...] = (0.01, 0.05, 0.1),
                          method: str = "variance", seed: int = 0, *, n_starts: int = 64,
                          design_starts: int = DESIGN_STARTS, step_starts: int = 4,
                          n_warm: int = 4, full_growth: float = FULL_GROWTH,
                          refit_growth: float = REFIT_GROWTH, gamma: float = DEFAULT_GAMMA,
                          step_max_iter: int = 200) -> GroupedReplay:
    """Replay ``method`` over the groups of ``pool`` and score it on ``target`` (module
    docstring).

    Args:
        pool: all candidate rows with responses (:func:`~scalebo.design.pool.make_pool`).
        target: the whole target region; its inputs guide ``variance``, responses score.
        law: the formula law fitted in every group.
        pool_groups, target_groups: a group label per pool / target row (compared as text).
        budgets, method, seed, n_starts, design_starts, step_starts, n_warm, full_growth,
            refit_growth, gamma, step_max_iter: as :func:`~scalebo.design.replay.design_replay`.

    Raises:
        ValueError: unknown method, budgets outside (0, 1], no pool responses, or bad
            group labels (:func:`split_groups`).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if pool.y is None:
        raise ValueError("grouped_design_replay needs a pool with responses (see --response)")
    budgets = as_fractions(budgets, "the pool's total cost")  # 0.05, "5%" or several
    groups = split_groups(pool_groups, target_groups, pool.n, target.X.shape[0])
    t0 = time.perf_counter()
    C, cap = pool.total_cost, budgets[-1] * pool.total_cost
    group_of = np.empty(pool.n, dtype=np.int64)
    for gi, g in enumerate(groups):
        group_of[g.pool] = gi
    rng = np.random.default_rng(seed)
    pilots = grouped_pilot(pool.cost, groups, law.n_params) if method == "variance" else {}
    order = sorted((r for rows in pilots.values() for r in rows),
                   key=lambda r: (pool.cost[r], r))
    observed = np.zeros(pool.n, dtype=bool)
    observed[order] = True
    spent = float(pool.cost[order].sum())
    live = [gi for gi, g in enumerate(groups) if g.target.size]
    buyable = np.isin(group_of, live) if method == "variance" else np.ones(pool.n, bool)
    states = {gi: RefitState() for gi in live}
    newest: dict[int, int] = {}
    for r in order:
        newest[int(group_of[r])] = r
    stale, step = set(live), 0
    while True:
        cand = np.flatnonzero(buyable & ~observed & (spent + pool.cost <= cap * (1 + BUDGET_RTOL)))
        if cand.size == 0:
            break
        if method != "variance":
            pick = baseline_pick(method, pool.cost, cand, rng)
        else:
            for gi in sorted(stale):
                g = groups[gi]
                rows = g.pool[observed[g.pool]]
                last = int(np.searchsorted(rows, newest[gi])) if gi in newest else 0
                states[gi] = refit_step(
                    states[gi], law, pool.X[rows], pool.y[rows], target.X[g.target], last,
                    seed=seed * 100_003 + step + 7_919 * gi, n_starts=design_starts,
                    step_starts=step_starts, n_warm=n_warm, full_growth=full_growth,
                    refit_growth=refit_growth, step_max_iter=step_max_iter)
            stale.clear()
            unfitted = np.isin(group_of[cand], [gi for gi in live if states[gi].post is None])
            if unfitted.any():  # a group without a usable fit yet: its cheapest row
                c = cand[unfitted]
                pick = int(c[np.argmin(pool.cost[c])])
            else:
                best, pick = -np.inf, int(cand[0])
                for gi in live:
                    c = cand[group_of[cand] == gi]
                    if not c.size:
                        continue
                    s = variance_scores(states[gi].post, pool.X[c], pool.cost[c],
                                        target.X[groups[gi].target], C, gamma)
                    if s.max() > best:
                        best, pick = float(s.max()), int(c[np.argmax(s)])
        order.append(pick)
        observed[pick] = True
        spent += float(pool.cost[pick])
        newest[int(group_of[pick])] = pick
        stale.add(int(group_of[pick]))
        step += 1
    cum = np.cumsum(pool.cost[order]) / C if order else np.zeros(0)
    checkpoints = tuple(
        _checkpoint(law, pool, target, groups, group_of, order[:checkpoint_rows(cum, b)], b,
                    n_starts, seed) for b in budgets)
    return GroupedReplay(method=method, seed=seed, groups=tuple(g.name for g in groups),
                         order=tuple(order),
                         order_groups=tuple(groups[group_of[r]].name for r in order),
                         cum_cost_fraction=tuple(map(float, cum)), checkpoints=checkpoints,
                         n_pilot={g.name: len(pilots.get(g.name, [])) for g in groups},
                         seconds=time.perf_counter() - t0)


def separate_group_replays(pool: Pool, target: TargetRegion, law: FormulaLaw,
                           pool_groups: Any, target_groups: Any,
                           budgets: tuple[float, ...] = (0.01, 0.05, 0.1),
                           method: str = "variance", seed: int = 0,
                           **kwargs: Any) -> GroupedReplay:
    """ScaleBench's own multi-group protocol (``benchmark/runner.py`` of PlanarG/active-sl):
    every group holding target rows is its own episode — the single-group replay
    (:func:`~scalebo.design.replay.design_replay`, pilot included) on the group's rows with
    budgets ``b·C_g`` of *its* pool cost ``C_g`` — and the checkpoint's R² pools the target
    rows of the groups whose fit succeeded (−1 when none did). Pool groups without target
    rows are not run. ``spent_fraction`` is of the whole pool's C; ``order`` concatenates the
    groups' orders. ``kwargs`` go to ``design_replay``.
    """
    if pool.y is None:
        raise ValueError("separate_group_replays needs a pool with responses (see --response)")
    groups = [g for g in split_groups(pool_groups, target_groups, pool.n, target.X.shape[0])
              if g.target.size]
    t0 = time.perf_counter()
    budgets = as_fractions(budgets, "the pool's total cost")  # once: a generator is read once
    reps = []
    for gi, g in enumerate(groups):
        sub = replace(pool, X=pool.X[g.pool], cost=pool.cost[g.pool], y=pool.y[g.pool],
                      row_ids=tuple(pool.row_ids[i] for i in g.pool) if pool.row_ids else ())
        region = TargetRegion(target.X[g.target],
                              None if target.y is None else target.y[g.target])
        reps.append(design_replay(sub, region, law, budgets, method, group_seed(seed, gi),
                                  **kwargs))
    checkpoints = []
    for k, b in enumerate(budgets):
        cps = [r.checkpoints[k] for r in reps]
        spent = sum(c.spent_fraction * float(pool.cost[g.pool].sum())
                    for c, g in zip(cps, groups, strict=True)) / pool.total_cost
        r2 = None
        if target.y is not None:
            preds = {g.name: law.predict(law.from_natural(c.params), target.X[g.target])
                     for c, g in zip(cps, groups, strict=True) if c.params}
            ok = [g for g in groups if g.name in preds and np.all(np.isfinite(preds[g.name]))]
            r2 = clipped_r2(np.concatenate([target.y[g.target] for g in ok]),
                            np.concatenate([preds[g.name] for g in ok])) if ok else -1.0
        checkpoints.append(GroupedCheckpoint(
            b, spent, sum(c.n_observed for c in cps), r2,
            {g.name: c.params for c, g in zip(cps, groups, strict=True)},
            {g.name: c.status for c, g in zip(cps, groups, strict=True)},
            {g.name: c.interval for c, g in zip(cps, groups, strict=True)}))
    order = [int(g.pool[i]) for r, g in zip(reps, groups, strict=True) for i in r.order]
    return GroupedReplay(method=method, seed=seed, groups=tuple(g.name for g in groups),
                         order=tuple(order),
                         order_groups=tuple(g.name for r, g in zip(reps, groups, strict=True)
                                            for _ in r.order),
                         cum_cost_fraction=tuple(map(float, np.cumsum(pool.cost[order])
                                                     / pool.total_cost)),
                         checkpoints=tuple(checkpoints),
                         n_pilot={g.name: r.n_pilot for r, g in zip(reps, groups, strict=True)},
                         seconds=time.perf_counter() - t0)
