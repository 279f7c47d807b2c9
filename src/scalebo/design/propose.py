"""The next experiments of a real campaign: fit the runs done so far, build the multi-mode
posterior (:mod:`scalebo.design.posterior`) and pick, greedily, the ``k`` pool rows with the
best variance-reduction-per-cost score (:mod:`scalebo.design.acquisition`) that still fit the
budget; after each pick the posterior is conditioned on that row as observed at its
predicted mean, so the batch does not repeat itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scalebo.design.acquisition import DEFAULT_GAMMA, condition_on_mean, variance_scores
from scalebo.design.pool import Pool, TargetRegion
from scalebo.design.posterior import build_posterior
from scalebo.design.replay import fit_rows
from scalebo.errors import FitError, SearchError
from scalebo.laws.formula import FormulaLaw

__all__ = ["Proposal", "done_rows", "propose_batch"]


@dataclass(frozen=True)
class Proposal:
    """One proposed experiment.

    Attributes:
        row: position in the pool (0-based); ``row_id``: the table's label of that row.
        inputs: ``{variable: value}`` in natural units.
        cost: cost of the row (pool units); ``cost_fraction``: cost / C.
        score: variance reduction per ``(cost/C)^γ`` when picked (response units squared).
        mean, lo80, hi80: predicted response and 80 % interval of the law's mean there.
    """

    row: int
    row_id: Any
    inputs: dict[str, float]
    cost: float
    cost_fraction: float
    score: float
    mean: float
    lo80: float
    hi80: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def done_rows(pool: Pool, X_done: np.ndarray) -> np.ndarray:
    """Mask ``(n,)`` of pool rows whose inputs equal (rtol 1e-9) a row of ``X_done``."""
    mask = np.zeros(pool.n, dtype=bool)
    for x in np.atleast_2d(X_done):
        mask |= np.all(np.isclose(pool.X, x[None, :], rtol=1e-9, atol=0), axis=1)
    return mask


def propose_batch(pool: Pool, target: TargetRegion, law: FormulaLaw, X_done: np.ndarray,
                  y_done: np.ndarray, cost_done: np.ndarray, budget: float, k: int = 1, *,
                  seed: int = 0, n_starts: int = 64,
                  gamma: float = DEFAULT_GAMMA) -> tuple[Proposal, ...]:
    """Propose up to ``k`` pool rows (fewer when the budget runs out).

    Args:
        pool: candidate rows (responses unused); C = its total cost.
        target: target region inputs.
        X_done, y_done, cost_done: runs done so far (inputs, responses, costs in pool units);
            pool rows with the same inputs are not proposed again.
        budget: campaign budget as a fraction of C; proposals fit what is left of it.
        k: batch size.

    Raises:
        SearchError: nothing is left of the budget, or no pool row fits it.
        FitError: the runs done cannot be fitted (fewer than the law's parameters, …).
    """
    if k < 1:
        raise ValueError(f"batch size must be >= 1, got {k}")
    if not 0 < budget <= 1:
        raise ValueError(f"budget must be a fraction in (0, 1], got {budget}")
    C = pool.total_cost
    left = budget * C - float(np.sum(cost_done))
    if left <= 0:
        raise SearchError(f"the runs done already spent {np.sum(cost_done) / C:.4f} of the "
                          f"pool's total cost, at or over the budget {budget}")
    fit = fit_rows(law, X_done, y_done, n_starts=n_starts, seed=seed)
    if fit is None:
        raise FitError(f"cannot fit {law.name!r} ({law.n_params} parameters) to the "
                       f"{len(y_done)} runs done")
    post = build_posterior(law, fit, X_done, y_done, X_target=target.X)
    free = ~done_rows(pool, X_done)
    out: list[Proposal] = []
    while len(out) < k:
        cand = np.flatnonzero(free & (pool.cost <= left * (1 + 1e-12)))
        if cand.size == 0:
            break
        s = variance_scores(post, pool.X[cand], pool.cost[cand], target.X, C, gamma)
        i = int(cand[np.argmax(s)])
        mean, _ = post.predict(pool.X[i : i + 1])
        lo, hi = post.interval(pool.X[i : i + 1], 0.8)
        out.append(Proposal(row=i, row_id=pool.row_ids[i] if pool.row_ids else i,
                            inputs=dict(zip(pool.variables, map(float, pool.X[i]), strict=True)),
                            cost=float(pool.cost[i]), cost_fraction=float(pool.cost[i] / C),
                            score=float(s.max()), mean=float(mean[0]), lo80=float(lo[0]),
                            hi80=float(hi[0])))
        post = condition_on_mean(post, pool.X[i])
        free[i] = False
        left -= float(pool.cost[i])
    if not out:
        raise SearchError(f"no pool row fits the {left / C:.4g} of C left of the budget")
    return tuple(out)
