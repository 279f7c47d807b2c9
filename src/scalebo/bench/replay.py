"""Replay a search strategy on a recorded grid: the pure task of a benchmark sweep.

``replay(problem, method, budget, seed)`` runs a :class:`~scalebo.search.loop.SearchLoop`
against the problem's oracle (the recorded loss of each configuration) until nothing else
fits the budget, then fantasizes (optional) and computes the metrics of
:mod:`scalebo.bench.metrics`, for observed runs only and for the fantasized table.

**Recording several budgets in one run.** ``record_budgets`` asks for metrics at smaller
budgets too. For strategies that do not depend on the total budget — ``full`` and the
``spent`` and ``coverage`` window schedules (their cap depends only on what was spent) — one
run to the largest budget is made: before an ask that could cross a smaller budget ``b``
the loop is copied, and when it crosses ``b`` the copy is finished under budget ``b``. A
budget-``b`` run makes exactly the same choices up to that point (the largest admissible
score is the same when the chosen configuration also fits ``b``), so the metrics equal
those of a separate budget-``b`` run. The ``sweep`` schedule's cap depends on the total
budget (``u = spent/B``), so each recorded budget is then a separate run.

Speed: surrogate hyperparameters are refitted every ``refit_every`` asks (default every ask;
the GP is conditioned on new observations with fixed hyperparameters in between, and refits
start from the previous optimum), ``q > 1`` asks batches, and the laws are fitted only at the
recorded budgets. Those fits use the reference fit's fitter and start grid, never its
optima: nothing a replay fits sees the answer it is scored against.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from scalebo.bench.budget_fork import fork_budgets
from scalebo.bench.budget_measure import measure, method_surrogate
from scalebo.bench.method import DEFAULT_METHOD, MethodConfig
from scalebo.bench.metrics import BudgetMetrics
from scalebo.bench.problems import ReplayProblem
from scalebo.search.cost_model import CostModel
from scalebo.search.loop import SearchLoop
from scalebo.search.trace import TraceEntry
from scalebo.search.window import COST_RTOL

#: A replay's progress callback: the fraction (0–1) of the run's budget committed so far.
Progress = Callable[[float], None]

__all__ = ["DEFAULT_METHOD", "MethodConfig", "ReplayRecord", "envelope_out_of_reach", "replay",
           "search_state", "unaffordable_budgets"]

@dataclass(frozen=True)
class ReplayRecord:
    """Outcome of :func:`replay`.

    Attributes:
        dataset: Problem name.
        method: The strategy.
        seed: Seed of the initial design, the surrogate and the samples.
        budget: Largest budget, fraction of ``C_total``.
        metrics: One :class:`~scalebo.bench.metrics.BudgetMetrics` per recorded budget,
            increasing.
        trace: Every configuration acquired in the run to ``budget`` (order, grid row,
            cost, cumulative compute committed, cap; FLOPs).
        timings: Wall-clock seconds: ``search``, ``fantasize``, ``posterior``, ``metrics``,
            ``total``.
        separate_runs: True when each recorded budget was a separate run (sweep schedule).
    """

    dataset: str
    method: MethodConfig
    seed: int
    budget: float
    metrics: tuple[BudgetMetrics, ...]
    trace: tuple[TraceEntry, ...]
    timings: dict = field(default_factory=dict)
    separate_runs: bool = False

    def at(self, budget: float) -> BudgetMetrics:
        """Metrics recorded at ``budget``."""
        for m in self.metrics:
            if np.isclose(m.budget, budget):
                return m
        raise KeyError(f"budget {budget} not recorded; have {[m.budget for m in self.metrics]}")

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN-free; failed fits are ``null`` with their status)."""
        return {
            "dataset": self.dataset,
            "method": self.method.to_dict(),
            "method_label": self.method.label(),
            "seed": self.seed,
            "budget": self.budget,
            "separate_runs": self.separate_runs,
            "metrics": [m.to_dict() for m in self.metrics],
            "trace": [_finite(asdict(t)) for t in self.trace],
            "timings": dict(self.timings),
        }


def _finite(entry: dict) -> dict:
    """Replace non-finite floats (an uncapped ``inf`` cap) by None for strict JSON."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
            for k, v in entry.items()}


def _make_loop(problem: ReplayProblem, method: MethodConfig, budget: float, seed: int
               ) -> SearchLoop:
    random_order = method.surrogate == "random"
    return SearchLoop(
        problem.grid, budget,
        None if random_order else method_surrogate(method, problem, seed, fantasy=False),
        acquisition="random" if random_order else method.acquisition,
        incumbent=method.incumbent,
        schedule=method.schedule_name, n_initial=method.n_initial, kappa=method.kappa,
        refit_every=method.refit_every, target_compute=method.target_compute,
        target_law=method.target_law, cost_power=method.cost_power,
        ei_cost_power=method.ei_cost_power,
        target_samples=method.target_samples, target_every=method.target_every,
        target_estimator=method.target_estimator,
        cost_model=CostModel(method.cost_model, method.cooldown), anchor=method.anchor,
        polish=method.polish,
        rng=seed,
    )


def tell_outcomes(loop: SearchLoop, problem: ReplayProblem, picks: list[int]) -> None:
    """Tell ``loop`` the recorded outcome of each pick: its loss (nats), or a failed run
    (compute spent, no loss) for a configuration the problem marks as diverged."""
    ok, bad = problem.split_outcomes(picks)
    if ok.size:
        loop.tell(ok, problem.loss[ok])
    if bad.size:
        loop.mark_failed(bad)


def _step(loop: SearchLoop, problem: ReplayProblem, method: MethodConfig) -> list[int]:
    n_obs = loop.observed_indices.size
    loop.refit_every = method.refit_interval(n_obs)
    picks = loop.ask(method.q)
    if picks:
        tell_outcomes(loop, problem, picks)
    return picks


def _timed(step: Callable, timings: dict, problem: ReplayProblem, method: MethodConfig
           ) -> Callable[[SearchLoop], list[int]]:
    """``step`` bound to ``problem`` and ``method``, its time added to ``timings["search"]``."""
    def run(loop: SearchLoop) -> list[int]:
        t0 = time.perf_counter()
        try:
            return step(loop, problem, method)
        finally:
            timings["search"] += time.perf_counter() - t0
    return run


def _finish(loop: SearchLoop, problem: ReplayProblem, method: MethodConfig,
            progress: Progress | None = None) -> None:
    while _step(loop, problem, method):
        if progress is not None:
            progress(loop.committed_budget / loop.budget)


def search_state(problem: ReplayProblem, method: MethodConfig, budget: float, seed: int
                 ) -> SearchLoop:
    """The search loop of a replay of ``method`` run alone to ``budget`` (a fraction of
    ``C_total``), nothing measured: its runs, surrogate and window, for diagnostics such as
    ``benchmarks/error_decomposition.py``. Its runs equal the record's at that budget."""
    loop = _make_loop(problem, method, budget, seed)
    _finish(loop, problem, method)
    return loop


def _copy(loop: SearchLoop) -> SearchLoop:
    """Deep copy sharing the (read-only) grid."""
    return copy.deepcopy(loop, memo={id(loop.grid): loop.grid})


def replay(
    problem: ReplayProblem,
    method: MethodConfig = DEFAULT_METHOD,
    budget: float = 0.05,
    seed: int = 0,
    *,
    record_budgets: Sequence[float] = (),
    progress: Progress | None = None,
) -> ReplayRecord:
    """Replay ``method`` on ``problem`` up to ``budget`` (fraction of ``C_total``).

    Args:
        problem: Grid, oracle and reference (:func:`~scalebo.bench.problems.load_problem`).
        method: The strategy.
        budget: Budget as a fraction of ``C_total`` (e.g. 0.05).
        seed: Seed of the initial design, surrogate restarts and posterior samples.
        record_budgets: Smaller budgets at which metrics are also recorded (see the module
            docstring for how); ``budget`` is always recorded.
        progress: Called after each step with the fraction of the run's budget committed
            so far (0–1; a method that is not budget-independent replays each budget
            separately, and the fraction restarts for each), e.g. to advance a bar.

    Raises:
        ValueError: a budget not in ``(0, budget]``.
    """
    budgets = sorted({float(b) for b in record_budgets} | {float(budget)})
    if budgets[0] <= 0 or budgets[-1] > budget:
        raise ValueError(f"record_budgets must lie in (0, budget={budget}], got "
                         f"{list(record_budgets)}")
    timings = {"search": 0.0, "fantasize": 0.0, "posterior": 0.0, "metrics": 0.0}
    t_start = time.perf_counter()
    records: list[BudgetMetrics] = []
    if not method.budget_independent:
        for b in budgets:
            loop = _make_loop(problem, method, b, seed)
            t0 = time.perf_counter()
            _finish(loop, problem, method, progress)
            timings["search"] += time.perf_counter() - t0
            records.append(measure(problem, method, loop, b, seed, timings))
    elif method.forks:  # q = 1: fork each smaller budget where its choices first differ
        loop = _make_loop(problem, method, budgets[-1], seed)
        records = fork_budgets(loop, budgets, _timed(_step, timings, problem, method),
                               lambda lp, b: measure(problem, method, lp, b, seed, timings),
                               progress)
    else:
        loop, records = _run_recording(problem, method, budgets, seed, timings, progress)
    timings["total"] = time.perf_counter() - t_start
    return ReplayRecord(dataset=problem.name, method=method, seed=int(seed),
                        budget=float(budget), metrics=tuple(records),
                        trace=tuple(loop.trace), timings=timings,
                        separate_runs=not method.budget_independent)


def unaffordable_budgets(rec: ReplayRecord, problem: ReplayProblem) -> list[str]:
    """One message per recorded budget that bought no run (the cheapest acquirable
    configuration costs more), which a table alone shows only as failed fits."""
    acquirable = problem.grid.cost[~np.asarray(problem.grid.held_out)]
    cheapest = float(acquirable.min() / problem.C_total)
    return [f"budget {m.budget:g} of C_total affords no run: the cheapest acquirable "
            f"configuration costs {cheapest:.3g} of C_total, so no law is fitted at this "
            "budget" for m in rec.metrics if m.n_runs == 0]


def envelope_out_of_reach(rec: ReplayRecord, problem: ReplayProblem) -> list[str]:
    """One message per recorded budget below the cost of one of the reference envelope's
    configurations: no search can train that configuration at that budget, so the law's
    error there has a floor that only a larger budget lowers (a grid whose envelope is a
    large share of its compute)."""
    env_cost = problem.grid.cost[problem.envelope_idx] / problem.C_total
    out = []
    for m in rec.metrics:
        over = env_cost > m.budget * (1 + COST_RTOL)
        if over.any():
            out.append(f"budget {m.budget:g} of C_total is below the cost of {int(over.sum())} "
                       f"of the reference envelope's {env_cost.size} configurations (the "
                       f"costliest costs {env_cost.max():.3g} of C_total): no search can train "
                       "them at this budget, so the law extrapolates past them")
    return out


def _run_recording(problem: ReplayProblem, method: MethodConfig, budgets: list[float],
                   seed: int, timings: dict, progress: Progress | None = None
                   ) -> tuple[SearchLoop, list[BudgetMetrics]]:
    """One run to ``budgets[-1]``, forking a copy finished under each smaller budget."""
    grid, C_total = problem.grid, problem.C_total
    loop = _make_loop(problem, method, budgets[-1], seed)
    lower = [b for b in budgets[:-1]]
    records: list[BudgetMetrics] = []
    t0 = time.perf_counter()
    while True:
        snapshot = None
        if lower:
            free = ~grid.held_out.copy()
            free[loop.observed_indices] = False
            room = lower[0] * C_total - loop.committed
            if free.any() and method.q * grid.cost[free].max() > room:
                snapshot = _copy(loop)
        n_obs = loop.observed_indices.size
        loop.refit_every = method.refit_interval(n_obs)
        picks = loop.ask(method.q)
        if not picks:
            break
        while lower and loop.committed > lower[0] * C_total * (1 + COST_RTOL):
            b = lower.pop(0)
            sub = _copy(snapshot) if snapshot is not None else None
            if sub is None:  # cannot happen: a crossing needs a cost above the room
                raise AssertionError("crossed a recorded budget without a snapshot")
            sub.budget = b * C_total
            _finish(sub, problem, method)
            timings["search"] += time.perf_counter() - t0
            records.append(measure(problem, method, sub, b, seed, timings))
            t0 = time.perf_counter()
        tell_outcomes(loop, problem, picks)
        if progress is not None:
            progress(loop.committed_budget / loop.budget)
    timings["search"] += time.perf_counter() - t0
    for b in lower:  # the run ended below b: the state is the same as a budget-b run's
        records.append(measure(problem, method, loop, b, seed, timings))
    records.append(measure(problem, method, loop, budgets[-1], seed, timings))
    return loop, records
