"""What a replay measures at one recorded budget: the fill-in, the law posterior, the
observed-run bootstrap and the metrics of :mod:`scalebo.bench.metrics`.

:func:`measure` reads a finished :class:`~scalebo.search.loop.SearchLoop` (its observed
runs and its surrogate) and never changes it. The fill-in and the law posterior use a copy
of the search's GP (:func:`fantasy_surrogate`); a random order, which has no model, gets a
fresh GP. Every law fit uses the reference fit's fitter and start grid, never its optima.
Losses in nats, compute in FLOPs.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pandas as pd

from scalebo.bench.intervals import bootstrap_summary, score_intervals
from scalebo.bench.method import MethodConfig
from scalebo.bench.metrics import (
    LAWS,
    BudgetMetrics,
    evaluate,
    observed_table,
    point_fits,
)
from scalebo.bench.problems import ReplayProblem
from scalebo.errors import FitError, SearchError
from scalebo.search.fantasize import fantasize, guard_note
from scalebo.search.law_posterior import law_posterior
from scalebo.search.loop import SearchLoop
from scalebo.search.models.stack import gp_stack
from scalebo.search.models.surrogates import make_surrogate

__all__ = ["fantasy_scope", "fantasy_surrogate", "fill_in", "innermost", "measure",
           "method_surrogate", "posterior_scope"]


def method_surrogate(method: MethodConfig, problem: ReplayProblem, seed: int, *,
                     fantasy: bool) -> object:
    """A fresh surrogate of ``method``'s kind (a GP for a random order when ``fantasy``)."""
    name = method.surrogate
    if name == "random":  # a random order has no model: fantasize with a GP
        name = "gp"
    if name == "gp":
        return gp_stack(problem.grid.categorical_columns, seed, kernel=method.kernel,
                        shift_optimum=method.shift_optimum, trend=method.trend,
                        trend_form=method.trend_form, clip_iqr=method.clip_iqr,
                        restart_every=method.gp_restart_every,
                        restart_below=method.gp_restart_below)
    return make_surrogate(name, rng=seed)


def innermost(model: object) -> object:
    """The surrogate inside wrappers (clipping, trend)."""
    while hasattr(model, "inner"):
        model = model.inner
    return model


def fantasy_surrogate(loop: SearchLoop, method: MethodConfig, problem: ReplayProblem,
                      seed: int) -> object:
    """The surrogate that fills the grid: for a GP search, a copy of the search's GP whose
    hyperparameter fit starts from the last optimum only (one local refit on all
    observations, no random restarts); otherwise a fresh one (a GP for random search)."""
    if method.surrogate == "gp" and hasattr(innermost(loop.surrogate), "gp_"):
        model = copy.deepcopy(loop.surrogate)
        innermost(model).gp_.n_restarts = 0
        return model
    return method_surrogate(method, problem, seed, fantasy=True)


def fantasy_scope(loop: SearchLoop, method: MethodConfig) -> tuple[str, float | None]:
    """``(scope, cap)`` for :func:`~scalebo.search.fantasize.fantasize`."""
    if method.fantasize_scope == "window":
        cap = loop.window_cap()
        return ("grid", None) if np.isinf(cap) else ("window", cap)
    if method.fantasize_scope == "observed":
        return "window", None  # cap = the costliest observed cell
    return "grid", None


def posterior_scope(loop: SearchLoop, method: MethodConfig) -> tuple[str, float | None]:
    """``(scope, cap)`` of the law posterior: the whole acquirable grid, or the fill-in's
    scope with ``MethodConfig.posterior_scope="fantasize"``."""
    return ("grid", None) if method.posterior_scope == "grid" else fantasy_scope(loop, method)


def fill_in(problem: ReplayProblem, method: MethodConfig, loop: SearchLoop, seed: int
            ) -> pd.DataFrame:
    """The fill-in table of ``loop``'s runs (observed losses, posterior estimates of the
    untried configurations in :func:`fantasy_scope`; :func:`~scalebo.search.fantasize
    .fantasize`), as a replay measures it. Raises what ``fantasize`` raises."""
    scope, cap = fantasy_scope(loop, method)
    return fantasize(problem.grid, loop.observed_indices, loop.observed_losses,
                     fantasy_surrogate(loop, method, problem, seed), scope=scope, cap=cap,
                     estimator=method.estimator, rng=seed, max_std_ratio=method.max_std_ratio,
                     failed=loop.failed_indices)


def measure(problem: ReplayProblem, method: MethodConfig, loop: SearchLoop, budget: float,
            seed: int, timings: dict) -> BudgetMetrics:
    """The metrics of ``loop``'s runs at ``budget`` (a fraction of ``C_total``): the fill-in
    (``method.fantasize``), the law posterior (``posterior_samples``) and the observed-run
    bootstrap (``bootstrap_samples``) as ``method`` asks, each failure kept as a message;
    wall-clock seconds are added to ``timings`` (``fantasize``, ``posterior``,
    ``metrics``)."""
    idx = loop.observed_indices
    fantasized, message = None, ""
    if method.fantasize:
        t0 = time.perf_counter()
        if idx.size == 0:
            message = "no observation: nothing to fantasize from"
        else:
            try:
                fantasized = fill_in(problem, method, loop, seed)
                message = guard_note(fantasized.attrs.get("n_extrapolated", 0),
                                     method.max_std_ratio)
            except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
                message = f"fantasization failed: {exc}"
        timings["fantasize"] += time.perf_counter() - t0
    posterior, post_message = None, ""
    if method.posterior_samples:
        t0 = time.perf_counter()
        posterior, post_message = _posterior(problem, method, loop, seed)
        timings["posterior"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    fits = point_fits(problem, observed_table(problem, idx))  # shared by bootstrap and metrics
    timings["metrics"] += time.perf_counter() - t0
    boot = None
    if method.bootstrap_samples:
        t0 = time.perf_counter()
        boot = _bootstrap(problem, method, loop, seed, fits)
        timings["posterior"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    out = evaluate(problem, idx, budget=budget, fantasized=fantasized,
                   fantasize_message=message, law_posterior=posterior,
                   posterior_message=post_message, observed_bootstrap=boot,
                   observed_fits=fits, failed_idx=loop.failed_indices)
    timings["metrics"] += time.perf_counter() - t0
    return out


def _posterior(problem: ReplayProblem, method: MethodConfig, loop: SearchLoop, seed: int
               ) -> tuple[dict | None, str]:
    """Law posterior summaries (in :func:`posterior_scope`), or None and why not."""
    idx, y = loop.observed_indices, loop.observed_losses
    if idx.size == 0:
        return None, "no observation: no law posterior"
    scope, cap = posterior_scope(loop, method)
    try:
        post = law_posterior(problem.grid, idx, y, fantasy_surrogate(loop, method, problem, seed),
                             scope=scope, cap=cap, n_samples=method.posterior_samples,
                             targets=problem.targets, include_noise=method.posterior_noise,
                             discrepancy=method.posterior_discrepancy,
                             cell_coupling=method.posterior_coupling,
                             estimand=method.posterior_estimand, rng=seed,
                             max_std_ratio=method.max_std_ratio, failed=loop.failed_indices)
    except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
        return None, f"law posterior failed: {exc}"
    return score_intervals(problem, {law: p.summary() for law, p in post.items()}), ""


def _bootstrap(problem: ReplayProblem, method: MethodConfig, loop: SearchLoop, seed: int,
               fits: dict) -> dict:
    """Bootstrap summaries of each law over the observed runs, scored like the posterior
    (a law whose point fit fails gets a ``message`` instead of quantiles); ``fits``: the
    laws' point fits on the observed table (:func:`~scalebo.bench.metrics.point_fits`)."""
    table = observed_table(problem, loop.observed_indices)
    out = {}
    for law in LAWS:
        try:
            out[law] = bootstrap_summary(problem, law, table, n_resamples=method.bootstrap_samples,
                                         seed=seed, fit=fits.get(law))
        except (FitError, ValueError) as exc:
            out[law] = {"predicted_loss": None, "samples": method.bootstrap_samples,
                        "message": f"no bootstrap: {exc}"}
    return score_intervals(problem, out)
