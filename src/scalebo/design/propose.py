"""The next experiments of a real campaign: fit the runs done so far, build the multi-mode
posterior (:mod:`scalebo.design.posterior`) and pick, greedily, the ``k`` pool rows with the
best variance-reduction-per-cost score (:mod:`scalebo.design.acquisition`) that still fit the
budget; after each pick the posterior is conditioned on that row as observed at its
predicted mean, so the batch does not repeat itself.

With several groups (datasets, model families; :func:`propose_groups`) the law has its own
parameters per group, as in the grouped replays (:mod:`scalebo.design.groups`): by default
(``per-group``) each group holding target rows gets its own batch of ``k`` under its own
budget, a fraction of the group's pool cost ``C_g``; with ``shared`` one batch of ``k`` is
picked over the whole pool under one budget, a fraction of the whole pool's cost ``C``, every
group's candidates scored by its own posterior per ``(cost/C)^γ``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scalebo.design.acquisition import DEFAULT_GAMMA, condition_on_mean, variance_scores
from scalebo.design.pool import Pool, TargetRegion
from scalebo.design.posterior import Posterior, build_posterior
from scalebo.design.predictions import fit_done as _fit_done
from scalebo.design.predictions import target_predictions
from scalebo.design.replay import BUDGET_RTOL, pilot_rows
from scalebo.design.runs_done import RunMatches, done_rows, input_matches, part_of, warn_unmatched
from scalebo.errors import BudgetExhausted, FitError, SearchError
from scalebo.fitting.robust import FitResult
from scalebo.laws.formula import FormulaLaw
from scalebo.search.budget import as_fractions

__all__ = ["Proposal", "done_rows", "propose_batch", "propose_groups", "target_predictions",
           "warn_unmatched"]


@dataclass(frozen=True)
class Proposal:
    """One proposed experiment.

    Attributes:
        row: position in the pool (0-based; the JSON adds ``data_row``, 1-based as error
            messages count the file's rows); ``row_id``: the table's label of that row.
        inputs: ``{variable: value}`` in natural units.
        cost: cost of the row (pool units); ``cost_fraction``: cost / C.
        score: variance reduction per ``(cost/C)^γ`` when picked (response units squared).
        mean, lo80, hi80: predicted response and the 80 % band of the law's mean there
            under the *design's* posterior (response units): the one that chooses rows,
            with ScaleBench's noise estimate (shrunk toward the response's spread, so
            ``noise_factor`` times the fit's residual sd) and conditioned on the rows
            proposed before it, so wide on purpose (about ``noise_factor`` times a Laplace
            interval of the fit) and not a calibrated interval; the calibrated ones are
            :func:`~scalebo.design.predictions.target_predictions`'. ``score``, ``mean``,
            ``lo80``, ``hi80`` and ``noise_factor`` are None for a pilot row, proposed
            before the runs done can be fitted (:func:`propose_batch`).
        group: the row's group label with several groups (:func:`propose_groups`), else
            ``None``.
        noise_factor: the design posterior's noise sd over the fit's residual sd
            ``sqrt(SSE/(n − p))`` (:attr:`~scalebo.design.posterior.Posterior.
            noise_factor`); None without a residual (no more runs than parameters).
    """

    row: int
    row_id: Any
    inputs: dict[str, float]
    cost: float
    cost_fraction: float
    score: float | None
    mean: float | None
    lo80: float | None
    hi80: float | None
    group: str | None = None
    noise_factor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**self.__dict__, "data_row": self.row + 1}


def _check_done(X_done: np.ndarray, y_done: np.ndarray, cost_done: np.ndarray) -> None:
    """ValueError unless the runs done have one input row, response and cost each."""
    n = {"X_done": np.shape(X_done)[0] if np.ndim(X_done) else 1, "y_done": np.size(y_done),
         "cost_done": np.size(cost_done)}
    if len(set(n.values())) > 1:
        raise ValueError(f"the runs done need one input row, response and cost each, got "
                         f"{', '.join(f'{k} {v}' for k, v in n.items())}")


def propose_batch(pool: Pool, target: TargetRegion, law: FormulaLaw, X_done: np.ndarray,
                  y_done: np.ndarray, cost_done: np.ndarray, budget: float, k: int = 1, *,
                  seed: int = 0, n_starts: int = 64, gamma: float = DEFAULT_GAMMA,
                  matches: np.ndarray | RunMatches | None = None,
                  run_rows: np.ndarray | None = None,
                  fit: FitResult | FitError | None = None) -> tuple[Proposal, ...]:
    """Propose up to ``k`` pool rows (fewer when the budget runs out).

    Args:
        pool: candidate rows (responses unused); C = its total cost.
        target: target region inputs.
        X_done, y_done, cost_done: runs done so far (inputs, responses, costs in pool units);
            the pool rows they are (``matches``) are not proposed again.
        budget: campaign budget as a fraction of C (``0.05`` or ``"5%"``); proposals fit
            what is left of it.
        k: batch size.
        matches: ``(n_done, n)``, which pool rows each run done is
            (:func:`~scalebo.design.runs_done.column_matches`: equal inputs and equal values
            in the pool's settings the runs file has too); default: equal inputs.
        run_rows: each run's 0-based row in its file, for warnings (default its position).
        fit: the fit of the runs done to choose by (:func:`~scalebo.design.predictions.
            fit_runs`'s, so that the fit reported is this one), or the FitError it gave;
            default: fitted here with ``seed``.

    With fewer runs done than the law has parameters (none at all, at a campaign's start)
    there is no fit to score rows by: the proposals are then the cheapest pool rows not done,
    as a replay starts, up to as many rows in all as its pilot holds
    (:func:`~scalebo.design.replay.pilot_rows`: at most ``⌊2.5·p⌋`` rows within 2 % of C,
    and at least ``p``), with a warning; with groups, each group too young to fit.

    Raises:
        BudgetExhausted (a SearchError): nothing is left of the budget, or no pool row fits it.
        FitError: the runs done cannot be fitted (too few distinct inputs, …).
    """
    if k < 1:
        raise ValueError(f"batch size must be >= 1, got {k}")
    (budget,) = as_fractions(budget, "the pool's total cost")  # 0.05 or "5%"
    _check_done(X_done, y_done, cost_done)
    C = pool.total_cost
    left = budget * C - float(np.sum(cost_done))
    if left <= 0:
        raise BudgetExhausted(f"the runs done already spent {np.sum(cost_done) / C:.4f} of the "
                          f"pool's total cost, at or over the budget {budget}")
    warn_unmatched(pool, X_done, matches=matches, rows=run_rows)
    if len(y_done) < law.n_params:
        return _pilot(pool, law, X_done, left, k, matches)
    post = _posterior(law, X_done, y_done, target.X, seed, n_starts, fit)
    free = ~done_rows(pool, X_done, matches=matches)
    out: list[Proposal] = []
    while len(out) < k:
        cand = np.flatnonzero(free & (pool.cost <= left + BUDGET_RTOL * C))
        if cand.size == 0:
            break
        s = variance_scores(post, pool.X[cand], pool.cost[cand], target.X, C, gamma)
        i = int(cand[np.argmax(s)])
        out.append(_proposal(post, pool, i, float(s.max()), C))
        post = condition_on_mean(post, pool.X[i])
        free[i] = False
        left -= float(pool.cost[i])
    if not out:
        raise BudgetExhausted(f"no pool row fits the {left / C:.4g} of C left of the budget")
    return tuple(out)


def _pilot(pool: Pool, law: FormulaLaw, X_done: np.ndarray, left: float, k: int,
           matches: np.ndarray | RunMatches | None = None) -> tuple[Proposal, ...]:
    """Up to ``k`` of the cheapest pool rows not done that fit ``left`` (pool units), as long
    as the runs done and these are no more rows than a replay's pilot design holds (see
    :func:`propose_batch`): the proposals of a campaign too young to fit."""
    C, p = pool.total_cost, law.n_params
    slack = BUDGET_RTOL * C  # a row that fits the budget exactly, to rounding, fits it
    size = max(len(pilot_rows(pool.cost, p, C)), p)
    free = ~done_rows(pool, X_done, matches=matches)
    out: list[Proposal] = []
    for i in np.argsort(pool.cost, kind="stable").tolist():
        if len(out) >= min(k, max(size - len(X_done), 1)):
            break
        if free[i] and pool.cost[i] <= left + slack:
            out.append(_proposal(None, pool, i, None, C))
            left -= float(pool.cost[i])
    if not out:
        raise BudgetExhausted(f"no pool row fits the {left / C:.4g} of C left of the budget")
    warnings.warn(f"{len(X_done)} run{'' if len(X_done) == 1 else 's'} done, fewer than the "
                  f"law's {p} parameters: no fit to choose by, so the cheapest pool rows are "
                  f"proposed, as a replay starts (its pilot: {size} runs); once {p} are done, "
                  "proposals aim at the target region", UserWarning, stacklevel=3)
    return tuple(out)


def _posterior(law: FormulaLaw, X_done: np.ndarray, y_done: np.ndarray, X_target: np.ndarray,
               seed: int, n_starts: int, fit: FitResult | FitError | None = None
               ) -> Posterior:
    """The design posterior of ``fit`` (fitted here with ``seed`` when None)."""
    if isinstance(fit, FitError):
        raise FitError(str(fit))
    if fit is None:
        fit = _fit_done(law, X_done, y_done, seed, n_starts)
    return build_posterior(law, fit, X_done, y_done, X_target=X_target)


def _proposal(post: Posterior | None, pool: Pool, i: int, score: float | None, C: float,
              group: str | None = None, row: int | None = None) -> Proposal:
    """Row ``i`` of ``pool`` as a :class:`Proposal` (``row``: its position in the whole pool
    when ``pool`` is one group's part of it; ``post`` None: a pilot row, nothing predicted)."""
    band: tuple[float | None, ...] = (None, None, None)
    if post is not None:
        mean, _ = post.predict(pool.X[i : i + 1])
        lo, hi = post.interval(pool.X[i : i + 1], 0.8)
        band = (float(mean[0]), float(lo[0]), float(hi[0]))
    return Proposal(row=i if row is None else row, row_id=pool.row_ids[i] if pool.row_ids else
                    (i if row is None else row),
                    inputs=dict(zip(pool.variables, map(float, pool.X[i]), strict=True)),
                    cost=float(pool.cost[i]), cost_fraction=float(pool.cost[i] / C),
                    score=score, mean=band[0], lo80=band[1], hi80=band[2], group=group,
                    noise_factor=None if post is None else post.noise_factor)


def propose_groups(pool: Pool, target: TargetRegion, law: FormulaLaw, pool_groups: Any,
                   target_groups: Any, X_done: np.ndarray, y_done: np.ndarray,
                   cost_done: np.ndarray, done_groups: Any, budget: float, k: int = 1, *,
                   group_budget: str = "per-group", seed: int = 0, n_starts: int = 64,
                   gamma: float = DEFAULT_GAMMA,
                   matches: np.ndarray | RunMatches | None = None,
                   fits: Mapping[Any, FitResult | FitError] | None = None
                   ) -> tuple[Proposal, ...]:
    """Proposals for a pool of several groups (module docstring), each with its ``group``.

    Args:
        pool_groups, target_groups, done_groups: group label of every pool row, target row
            and run done (compared as text); groups without target rows get no proposals.
        budget: fraction of each group's pool cost (``per-group``) or of the whole pool's
            cost (``shared``); cost in pool units.
        k: batch size per group (``per-group``) or in all (``shared``).
        matches: ``(n_done, n)`` over the whole pool, as :func:`propose_batch`'s.
        fits: ``{group: fit}`` (:func:`~scalebo.design.predictions.fit_runs`'s: the ``i``-th
            group with target rows, in sorted order, fitted with seed ``seed + 1000·i``), so
            that the fits reported are the ones the proposals were chosen by; default:
            fitted here by that rule.
        Other arguments as :func:`propose_batch`.

    Raises:
        BudgetExhausted (a SearchError): no group has a row that fits its budget;
        FitError: a group with target rows whose runs done cannot be fitted (named).
    """
    from scalebo.design.groups import GROUP_BUDGETS, group_seed, split_groups

    if group_budget not in GROUP_BUDGETS:
        raise ValueError(f"group_budget must be one of {GROUP_BUDGETS}, got {group_budget!r}")
    (budget,) = as_fractions(budget, "the pool's total cost")  # 0.05 or "5%"
    _check_done(X_done, y_done, cost_done)
    groups = [g for g in split_groups(pool_groups, target_groups, pool.n, target.X.shape[0])
              if g.target.size]
    dg = np.asarray(done_groups, dtype=object).astype(str)
    if dg.shape[0] != len(y_done):
        raise ValueError(f"{dg.shape[0]} group labels for {len(y_done)} runs done")
    if matches is None:
        matches = input_matches(pool, X_done)
    parts = []
    for gi, g in enumerate(groups):
        sub = replace(pool, X=pool.X[g.pool], cost=pool.cost[g.pool], y=None,
                      row_ids=tuple(pool.row_ids[i] for i in g.pool) if pool.row_ids else ())
        mine = dg == g.name
        parts.append((g, sub, TargetRegion(target.X[g.target], None), mine, group_seed(seed, gi)))
    out: list[Proposal] = []
    if group_budget == "per-group":
        skipped: dict[str, Exception] = {}  # each group said, not dropped (a trial)
        for g, sub, region, mine, s in parts:
            try:
                out += _for_group(g, pool, propose_batch, sub, region, law, X_done[mine],
                                  y_done[mine], cost_done[mine], budget, k, seed=s,
                                  n_starts=n_starts, gamma=gamma,
                                  matches=part_of(matches, mine, g.pool),
                                  run_rows=np.flatnonzero(mine),
                                  fit=None if fits is None else fits.get(g.name))
            except (SearchError, FitError) as exc:  # its budget is spent, or too few runs
                skipped[g.name] = exc
        why = "; ".join(f"group {name!r}: {exc}" for name, exc in skipped.items())
        if not out:
            failed = [e for e in skipped.values() if isinstance(e, FitError)]
            raise (FitError(why) if failed else BudgetExhausted(
                f"no group has a pool row that fits its budget {budget}: {why}"))
        if skipped:
            warnings.warn(f"no proposal for {len(skipped)} of the {len(parts)} groups: {why}",
                          UserWarning, stacklevel=2)
        return tuple(out)
    C = pool.total_cost
    left = budget * C - float(np.sum(cost_done))
    if left <= 0:
        raise BudgetExhausted(f"the runs done already spent {np.sum(cost_done) / C:.4f} of the "
                              f"pool's total cost, at or over the shared budget {budget}")
    if cold := [(g, sub, mine) for g, sub, _r, mine, _s in parts if mine.sum() < law.n_params]:
        for g, sub, mine in cold:  # too few runs to fit: its pilot rows first, as alone
            if len(out) >= k:
                break
            try:
                rows = _for_group(g, pool, _pilot, sub, law, X_done[mine], left, k - len(out),
                                  part_of(matches, mine, g.pool))
            except BudgetExhausted:
                continue
            out += rows
            left -= sum(r.cost for r in rows)
        if not out:
            raise BudgetExhausted(f"no pool row fits the {max(left, 0) / C:.4g} of C left of "
                                  "the budget")
        return tuple(out)
    posts, free = [], []
    for g, sub, region, mine, s in parts:
        try:
            posts.append(_posterior(law, X_done[mine], y_done[mine], region.X, s, n_starts,
                                    None if fits is None else fits.get(g.name)))
        except FitError as exc:
            raise FitError(f"group {g.name!r}: {exc}") from exc
        mg = part_of(matches, mine, g.pool)
        warn_unmatched(sub, X_done[mine], f" of group {g.name!r}", mg, np.flatnonzero(mine))
        free.append(~done_rows(sub, X_done[mine], matches=mg))
    while len(out) < k and left > 0:
        best = None
        for j, (_g, sub, region, _m, _s) in enumerate(parts):
            cand = np.flatnonzero(free[j] & (sub.cost <= left + BUDGET_RTOL * C))
            if cand.size:
                sc = variance_scores(posts[j], sub.X[cand], sub.cost[cand], region.X, C, gamma)
                if best is None or sc.max() > best[0]:
                    best = (float(sc.max()), j, int(cand[np.argmax(sc)]))
        if best is None:
            break
        score, j, i = best
        g, sub = parts[j][0], parts[j][1]
        out.append(_proposal(posts[j], sub, i, score, C, g.name, int(g.pool[i])))
        posts[j] = condition_on_mean(posts[j], sub.X[i])
        free[j][i] = False
        left -= float(sub.cost[i])
    if not out:
        raise BudgetExhausted(f"no pool row fits the {max(left, 0) / C:.4g} of C left of the "
                              "budget")
    return tuple(out)


def _for_group(g: Any, pool: Pool, make: Any, *args: Any, **kwargs: Any) -> list[Proposal]:
    """``make(*args, **kwargs)``'s proposals for group ``g``, made on its part of ``pool``, as
    rows of the whole pool with their group; the warnings it gives name the group."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        props = make(*args, **kwargs)
    for w in said:
        warnings.warn(f"group {g.name!r}: {w.message}", w.category, stacklevel=3)
    return [replace(p, row=int(g.pool[p.row]), group=g.name,
                    row_id=p.row_id if pool.row_ids else int(g.pool[p.row])) for p in props]
