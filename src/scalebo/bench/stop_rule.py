"""The stop rule, replayed: when would a campaign have stopped, and how wrong was it then?

DESIGN.md's rule: stop once the law posterior's 80 % interval of the prediction at the
target compute is narrower than a relative tolerance, ``(q90 − q10)/2 ≤ tol·q50`` (default
``tol = 0.005``, i.e. ±0.5 %). :func:`replay_stop_rule` walks a finished replay's trace (the
order in which the search bought its runs) and, at checkpoints where the compute spent has
grown by a factor ``growth`` since the last one, computes the law posterior from the runs
bought so far — a fresh surrogate of the method's kind fitted on them, samples in the
method's posterior scope (the whole grid by default) — exactly what a campaign's status
would see. The first checkpoint that satisfies the rule, with a point fit that converged
(not at a bound) and a width that resamples of its draws keep within the tolerance too
(:func:`~scalebo.search.stopping.width_upper`, as ``scalebo status`` asks), is the stop; the
estimate reported there is the fit on the posterior-mean (fantasized) table, compared with
the reference law only after the decision. With a noise-free posterior
(``method.posterior_estimand == "noise_free"``) each checkpoint also gets the noise-floor
ratio (:mod:`scalebo.search.noise_floor`) and the rule also stops when it is at least ``1 −
min_shrink`` (:func:`~scalebo.search.stopping.at_floor`), as ``scalebo status --estimand
noise_free`` does. Units: compute in FLOPs and fractions of ``C_total``, losses in nats.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from scalebo.bench.budget_measure import method_surrogate, posterior_scope
from scalebo.bench.intervals import reference_losses
from scalebo.bench.method import MethodConfig
from scalebo.bench.problems import ReplayProblem
from scalebo.errors import SearchError
from scalebo.search.law_posterior import law_posterior, target_key
from scalebo.search.loop import SearchLoop
from scalebo.search.noise_floor import floor_applies, noise_floor
from scalebo.search.stopping import (
    DEFAULT_MIN_SHRINK,
    DEFAULT_TOLERANCE,
    at_floor,
    check_min_shrink,
    half_width,
    width_upper,
)

__all__ = ["DEFAULT_MIN_SHRINK", "DEFAULT_TOLERANCE", "StopCheck", "StopOutcome",
           "replay_stop_rule"]


@dataclass(frozen=True)
class StopCheck:
    """One checkpoint: runs bought, compute spent (fraction of ``C_total``), the 80 %
    interval's relative half-width (%), the point estimate's error (%, vs the reference;
    None without a fit), for a noise-free posterior the noise-floor ratio (else None), and the
    point fit's status (the rule never stops on one that is not ``converged``)."""

    n_runs: int
    spent_fraction: float
    half_width_pct: float | None
    error_pct: float | None
    floor_ratio: float | None = None
    law_status: str | None = None
    #: The half-width's :func:`~scalebo.search.stopping.width_upper` (%), or None.
    width_upper_pct: float | None = None


@dataclass(frozen=True)
class StopOutcome:
    """Where the rule stopped (or the last checkpoint if it never did).

    Attributes:
        tolerance: Relative half-width that stops (e.g. 0.005).
        min_shrink: Noise-free posteriors: the rule also stops when training every untried
            configuration would narrow the interval by less than this fraction.
        target: Target compute, FLOPs. law: the law ("compute" or "chinchilla").
        stopped: Whether the rule fired within the replay's budget.
        n_runs, spent_fraction, half_width_pct, error_pct: At the stop (see
            :class:`StopCheck`).
        checks: Every checkpoint, in order.
    """

    tolerance: float
    target: float
    law: str
    stopped: bool
    n_runs: int
    spent_fraction: float
    half_width_pct: float | None
    error_pct: float | None
    checks: tuple[StopCheck, ...]
    min_shrink: float = DEFAULT_MIN_SHRINK

    def to_dict(self) -> dict:
        return asdict(self)


def _check(problem: ReplayProblem, method: MethodConfig, order: np.ndarray, k: int,
           law: str, target: float, n_samples: int, seed: int, budget: float) -> StopCheck:
    """The law posterior after the first ``k`` runs of ``order``."""
    grid = problem.grid
    idx, bad = problem.split_outcomes(order[:k])
    state = SearchLoop(grid, budget, None, acquisition="random",
                       schedule=method.schedule_name, n_initial=0)
    state.tell(idx, problem.loss[idx])
    state.mark_failed(bad)
    spent = float(grid.cost[order[:k]].sum() / problem.C_total)
    scope, cap = posterior_scope(state, method)
    try:
        post = law_posterior(grid, idx, problem.loss[idx],
                             method_surrogate(method, problem, seed, fantasy=True),
                             laws=(law,), scope=scope, cap=cap, n_samples=n_samples,
                             targets=(target,), include_noise=method.posterior_noise,
                             discrepancy=method.posterior_discrepancy,
                             cell_coupling=method.posterior_coupling,
                             estimand=method.posterior_estimand, rng=seed,
                             max_std_ratio=method.max_std_ratio, failed=bad,
                             keep_samples=method.posterior_estimand == "noise_free")[law]
    except (SearchError, ValueError, np.linalg.LinAlgError):
        return StopCheck(int(k), spent, None, None)
    q = post.summary()["predicted_loss"][target_key(target)]
    width = half_width(q)
    half = None if width is None else 100 * width
    ratio = None
    status = None if post.point is None else str(post.point.status)
    if floor_applies(post, method.posterior_estimand):  # the rule does not stop otherwise
        try:  # the posterior's own draws when they are the floor's (whole grid, no widening)
            ratio = noise_floor(grid, idx, problem.loss[idx],
                                method_surrogate(method, problem, seed, fantasy=True),
                                targets=(target,), n_samples=n_samples, rng=seed,
                                prepared=None if method.posterior_discrepancy else post,
                                cell_coupling=method.posterior_coupling,
                                exclude=bad).ratio[0]
        except (SearchError, ValueError, np.linalg.LinAlgError):
            ratio = None
    ref = reference_losses(problem, law)
    point = post.point_loss(target)
    err = None
    if point is not None and ref is not None:
        err = 100 * abs(point - ref[target_key(target)]) / ref[target_key(target)]
    upper = width_upper(post.predicted_loss[:, 0], seed) if width is not None else None
    return StopCheck(int(k), spent, half, err, ratio, status,
                     None if upper is None else 100 * upper)


def replay_stop_rule(problem: ReplayProblem, method: MethodConfig, trace_indices: object,
                     *, budget: float, seed: int = 0, tolerance: float = DEFAULT_TOLERANCE,
                     growth: float = 1.25, target: float = 1e25, law: str = "compute",
                     n_samples: int = 64, first: int = 10,
                     min_shrink: float = DEFAULT_MIN_SHRINK) -> StopOutcome:
    """Apply the stop rule along a replay's acquisition order (see the module docstring).

    Args:
        problem: The replay problem.
        method: The method the replay ran (surrogate, schedule and fantasization scope).
        trace_indices: Grid rows in the order bought, ``(n,)`` (``[t.index for t in
            record.trace]``).
        budget: The replay's budget, fraction of ``C_total`` (the window schedule's scale).
        seed: Seed of the surrogate and the posterior samples.
        tolerance: Relative half-width of the 80 % interval that stops.
        min_shrink: Noise-free posterior (compute law): also stop when the noise-floor ratio
            is at least ``1 − min_shrink``.
        growth: A checkpoint each time the compute spent has grown by this factor.
        target: Target compute, FLOPs. law: ``"compute"`` or ``"chinchilla"``.
        n_samples: Posterior samples per checkpoint.
        first: Runs bought before the first checkpoint.
    """
    if not (0 < tolerance < 1) or growth <= 1 or first < 1:
        raise ValueError("need 0 < tolerance < 1, growth > 1 and first >= 1")
    check_min_shrink(min_shrink)
    order = np.asarray(trace_indices, dtype=np.int64)
    spent = np.cumsum(problem.grid.cost[order])
    checks: list[StopCheck] = []
    last = 0.0
    for k in range(min(first, order.size), order.size + 1):
        if k < order.size and spent[k - 1] < growth * last:
            continue
        last = spent[k - 1]
        c = _check(problem, method, order, k, law, target, n_samples, seed, budget)
        checks.append(c)
        width = None if c.half_width_pct is None else c.half_width_pct / 100
        upper = None if c.width_upper_pct is None else c.width_upper_pct / 100
        if c.law_status == "converged" and at_floor(width, c.floor_ratio, tolerance=tolerance,
                                                    min_shrink=min_shrink, upper=upper):
            return StopOutcome(tolerance, target, law, True, c.n_runs, c.spent_fraction,
                               c.half_width_pct, c.error_pct, tuple(checks), min_shrink)
    if not checks:
        raise ValueError("the trace is empty: nothing to check")
    c = checks[-1]
    return StopOutcome(tolerance, target, law, False, c.n_runs, c.spent_fraction,
                       c.half_width_pct, c.error_pct, tuple(checks), min_shrink)
