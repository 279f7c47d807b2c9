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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from scalebo.bench.metrics import BudgetMetrics, evaluate
from scalebo.bench.problems import ReplayProblem
from scalebo.errors import SearchError
from scalebo.search.clipping import ClippedGP
from scalebo.search.fantasize import fantasize
from scalebo.search.loop import SearchLoop
from scalebo.search.surrogates import make_surrogate
from scalebo.search.trace import TraceEntry
from scalebo.search.trend import TREND_FORMS, TrendSurrogate
from scalebo.search.window import COST_RTOL

__all__ = ["DEFAULT_METHOD", "ClippedGP", "MethodConfig", "ReplayRecord", "replay"]

_CHOICES = {
    "strategy": ("window", "full"),
    "schedule": ("sweep", "spent", "coverage"),
    "surrogate": ("gp", "random", "trees"),
    "acquisition": ("ei", "pi", "lcb"),
    "incumbent": ("frontier", "global"),
    "fantasize_scope": ("window", "observed", "grid"),
    "estimator": ("mean", "cell_best"),
    "law": ("compute", "chinchilla"),
    "trend_form": TREND_FORMS,
}


@dataclass(frozen=True)
class MethodConfig:
    """A search strategy (defaults chosen by ``benchmarks/replay_baseline.py``).

    Measured with ``benchmarks/replay_baseline.py`` (5 seeds, |rel. diff| of the compute law at
    1e25 FLOPs, fantasized, budgets 1 / 5 / 10 %, hyperparameters refitted at every ask):
    window ``spent`` + EI + frontier incumbent + posterior-mean fill-in gave OELLM-English
    2.9 / 0.6 / 0.4 % and StepLaw 19.8 / 4.5 / 0.2 %; ``sweep`` was better on OELLM at 1–5 %
    (1.7 / 0.4 %, the same runs for every seed) but worse at 10 % and on StepLaw
    (22.0 / 9.6 / 3.2 %), at 25× the time per replay; Full was better on StepLaw at 1–5 %
    (8.9 / 2.9 %) and worse on OELLM (5.8 / 1.0 / 0.7 %); the global incumbent and random
    order were worse almost everywhere; ``cell_best`` was slightly better than ``mean``
    everywhere (OELLM 2.4 / 0.4 / 0.3 %, StepLaw 17.6 / 4.4 / 0.2 %), within one SD, so the
    published estimator stays the default. Refitting the GP's hyperparameters at every ask
    instead of every max(10, n/4) asks (5 seeds, 1 / 5 / 10 / 25 %): OELLM
    17.1 / 2.9 / 0.74 / 0.27 → 2.9 / 0.64 / 0.35 / 0.00 %, StepLaw 6.6 / 12.3 / 1.8 / 1.5 →
    19.8 / 4.5 / 0.24 / 0.00 %, for ~3× the search time; hence ``refit_every=1,
    refit_growth=0``.

    Attributes:
        strategy: ``"window"`` (candidates capped by a growing compute window) or ``"full"``.
        schedule: Window schedule: ``"sweep"``, ``"spent"`` or ``"coverage"``.
        surrogate: ``"gp"``, ``"random"`` (a uniformly random order of the admissible
            configurations, whatever ``acquisition`` and ``incumbent``; fantasized with a
            GP) or ``"trees"``.
        kernel: GP kernel name (:func:`~scalebo.search.composite_kernels.make_kernel`).
        acquisition: ``"ei"``, ``"pi"`` or ``"lcb"``.
        incumbent: ``"frontier"`` (best loss in the candidate's cell) or ``"global"``.
        kappa: LCB exploration weight.
        fantasize: Also compute the metrics on observed + predicted losses.
        fantasize_scope: ``"window"``: the search's final window (DESIGN.md), i.e.
            configurations costing at most :meth:`~scalebo.search.loop.SearchLoop.window_cap`
            (for ``spent``, the compute spent; for Full, no cap: the whole grid);
            ``"observed"``: up to the costliest observed cell; ``"grid"``: every acquirable
            configuration.
        estimator: Fantasized cell losses: ``"mean"`` (posterior means) or ``"cell_best"``
            (expected cell minimum over joint posterior samples).
        law: Headline law of reports: ``"compute"`` or ``"chinchilla"`` (both are measured).
        n_initial: Size of the shared initial design (cheapest compute levels).
        q: Configurations asked per batch (kriging believer within a batch).
        refit_every: Surrogate hyperparameters refitted at least this many asks apart.
        refit_growth: ... and at least ``refit_growth × n_obs`` asks apart, so refits (each
            ``O(n_obs³)`` per likelihood evaluation) get rarer as observations accumulate;
            in between the GP is conditioned with fixed hyperparameters (``O(n_obs²)``).
        clip_iqr: The GP sees losses clipped at ``median + clip_iqr × IQR`` of the losses
            it is fitted on (see :class:`ClippedGP`); None: no clipping.
        trend: Give the GP a mean in encoded ``log N`` and ``log D`` (see ``trend_form``)
            (:class:`~scalebo.search.trend.TrendSurrogate`) so that it does not revert to
            the average loss on the grid's unexplored, expensive cells.
        trend_form: ``"linear"``, or ``"power"``: a saturating Chinchilla-form mean
            ``c + a·N^(−α) + b·D^(−β)`` (rates on a grid, ``a, b ≥ 0``).
    """

    strategy: str = "window"
    schedule: str = "spent"
    surrogate: str = "gp"
    kernel: str = "matern52"
    acquisition: str = "ei"
    incumbent: str = "frontier"
    kappa: float = 2.0
    fantasize: bool = True
    fantasize_scope: str = "window"
    estimator: str = "mean"
    law: str = "compute"
    n_initial: int = 5
    q: int = 1
    refit_every: int = 1
    refit_growth: float = 0.0
    clip_iqr: float | None = 5.0
    trend: bool = False
    trend_form: str = "linear"

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"MethodConfig.{name} must be one of {list(allowed)}, got "
                                 f"{getattr(self, name)!r}")
        if self.q < 1 or self.refit_every < 1 or self.n_initial < 0 or self.refit_growth < 0:
            raise ValueError("MethodConfig needs q >= 1, refit_every >= 1, n_initial >= 0 "
                             "and refit_growth >= 0")

    @property
    def schedule_name(self) -> str:
        """The window schedule actually used (``"full"`` for the full strategy)."""
        return "full" if self.strategy == "full" else self.schedule

    @property
    def budget_independent(self) -> bool:
        """Whether choices never depend on the total budget (see the module docstring)."""
        return self.schedule_name != "sweep"

    def label(self) -> str:
        """Short human-readable name, e.g. ``"window-spent gp ei/frontier fant=mean"``."""
        fant = f"fant={self.estimator}" if self.fantasize else "no-fant"
        acq = self.acquisition + ("" if self.acquisition == "lcb" else f"/{self.incumbent}")
        return f"{self.schedule_name if self.strategy == 'window' else 'full'} " \
               f"{self.surrogate} {acq} {fant}"

    def with_(self, **changes: object) -> MethodConfig:
        """A copy with some fields changed (validated)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_METHOD = MethodConfig()


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
        timings: Wall-clock seconds: ``search``, ``fantasize``, ``metrics``, ``total``.
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


def _surrogate(method: MethodConfig, problem: ReplayProblem, seed: int, *, fantasy: bool
               ) -> object:
    name = method.surrogate
    if name == "random":  # a random order has no model: fantasize with a GP
        name = "gp"
    if name == "gp":
        gp = make_surrogate("gp", kernel=method.kernel,
                            categorical=problem.grid.categorical_columns, rng=seed)
        if method.trend:
            gp = TrendSurrogate(gp, columns=(0, 1), form=method.trend_form)  # N, D first
        return gp if method.clip_iqr is None else ClippedGP(gp, method.clip_iqr)
    return make_surrogate(name, rng=seed)


def _innermost(model: object) -> object:
    """The surrogate inside wrappers (clipping, trend)."""
    while hasattr(model, "inner"):
        model = model.inner
    return model


def _fantasy_surrogate(loop: SearchLoop, method: MethodConfig, problem: ReplayProblem,
                       seed: int) -> object:
    """The surrogate that fills the grid: for a GP search, a copy of the search's GP whose
    hyperparameter fit starts from the last optimum only (one local refit on all
    observations, no random restarts); otherwise a fresh one (a GP for random search)."""
    if method.surrogate == "gp" and hasattr(_innermost(loop.surrogate), "gp_"):
        model = copy.deepcopy(loop.surrogate)
        _innermost(model).gp_.n_restarts = 0
        return model
    return _surrogate(method, problem, seed, fantasy=True)


def _make_loop(problem: ReplayProblem, method: MethodConfig, budget: float, seed: int
               ) -> SearchLoop:
    random_order = method.surrogate == "random"
    return SearchLoop(
        problem.grid, budget,
        None if random_order else _surrogate(method, problem, seed, fantasy=False),
        acquisition="random" if random_order else method.acquisition,
        incumbent=method.incumbent,
        schedule=method.schedule_name, n_initial=method.n_initial, kappa=method.kappa,
        refit_every=method.refit_every, rng=seed,
    )


def _step(loop: SearchLoop, problem: ReplayProblem, method: MethodConfig) -> list[int]:
    n_obs = loop.observed_indices.size
    loop.refit_every = max(method.refit_every, int(np.ceil(method.refit_growth * n_obs)))
    picks = loop.ask(method.q)
    if picks:
        loop.tell(picks, problem.loss[picks])
    return picks


def _finish(loop: SearchLoop, problem: ReplayProblem, method: MethodConfig) -> None:
    while _step(loop, problem, method):
        pass


def _copy(loop: SearchLoop) -> SearchLoop:
    """Deep copy sharing the (read-only) grid."""
    return copy.deepcopy(loop, memo={id(loop.grid): loop.grid})


def _fantasy_scope(loop: SearchLoop, method: MethodConfig) -> tuple[str, float | None]:
    """``(scope, cap)`` for :func:`~scalebo.search.fantasize.fantasize`."""
    if method.fantasize_scope == "window":
        cap = loop.window_cap()
        return ("grid", None) if np.isinf(cap) else ("window", cap)
    if method.fantasize_scope == "observed":
        return "window", None  # cap = the costliest observed cell
    return "grid", None


def _measure(problem: ReplayProblem, method: MethodConfig, loop: SearchLoop, budget: float,
             seed: int, timings: dict) -> BudgetMetrics:
    idx, y = loop.observed_indices, loop.observed_losses
    fantasized, message = None, ""
    if method.fantasize:
        t0 = time.perf_counter()
        if idx.size == 0:
            message = "no observation: nothing to fantasize from"
        else:
            try:
                scope, cap = _fantasy_scope(loop, method)
                fantasized = fantasize(
                    problem.grid, idx, y, _fantasy_surrogate(loop, method, problem, seed),
                    scope=scope, cap=cap, estimator=method.estimator, rng=seed)
            except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
                message = f"fantasization failed: {exc}"
        timings["fantasize"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    out = evaluate(problem, idx, budget=budget, fantasized=fantasized,
                   fantasize_message=message)
    timings["metrics"] += time.perf_counter() - t0
    return out


def replay(
    problem: ReplayProblem,
    method: MethodConfig = DEFAULT_METHOD,
    budget: float = 0.05,
    seed: int = 0,
    *,
    record_budgets: Sequence[float] = (),
) -> ReplayRecord:
    """Replay ``method`` on ``problem`` up to ``budget`` (fraction of ``C_total``).

    Args:
        problem: Grid, oracle and reference (:func:`~scalebo.bench.problems.load_problem`).
        method: The strategy.
        budget: Budget as a fraction of ``C_total`` (e.g. 0.05).
        seed: Seed of the initial design, surrogate restarts and posterior samples.
        record_budgets: Smaller budgets at which metrics are also recorded (see the module
            docstring for how); ``budget`` is always recorded.

    Raises:
        ValueError: a budget not in ``(0, budget]``.
    """
    budgets = sorted({float(b) for b in record_budgets} | {float(budget)})
    if budgets[0] <= 0 or budgets[-1] > budget:
        raise ValueError(f"record_budgets must lie in (0, budget={budget}], got "
                         f"{list(record_budgets)}")
    timings = {"search": 0.0, "fantasize": 0.0, "metrics": 0.0}
    t_start = time.perf_counter()
    records: list[BudgetMetrics] = []
    if not method.budget_independent:
        for b in budgets:
            loop = _make_loop(problem, method, b, seed)
            t0 = time.perf_counter()
            _finish(loop, problem, method)
            timings["search"] += time.perf_counter() - t0
            records.append(_measure(problem, method, loop, b, seed, timings))
    else:
        loop, records = _run_recording(problem, method, budgets, seed, timings)
    timings["total"] = time.perf_counter() - t_start
    return ReplayRecord(dataset=problem.name, method=method, seed=int(seed),
                        budget=float(budget), metrics=tuple(records),
                        trace=tuple(loop.trace), timings=timings,
                        separate_runs=not method.budget_independent)


def _run_recording(problem: ReplayProblem, method: MethodConfig, budgets: list[float],
                   seed: int, timings: dict) -> tuple[SearchLoop, list[BudgetMetrics]]:
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
        loop.refit_every = max(method.refit_every, int(np.ceil(method.refit_growth * n_obs)))
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
            records.append(_measure(problem, method, sub, b, seed, timings))
            t0 = time.perf_counter()
        loop.tell(picks, problem.loss[picks])
    timings["search"] += time.perf_counter() - t0
    for b in lower:  # the run ended below b: the state is the same as a budget-b run's
        records.append(_measure(problem, method, loop, b, seed, timings))
    records.append(_measure(problem, method, loop, budgets[-1], seed, timings))
    return loop, records
