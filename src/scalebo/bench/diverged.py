"""Diverged runs in a replayed grid: which recorded losses count as failed runs, and a note
when a grid seems to hold some that nobody marked.

A recorded grid often keeps its diverged runs with a loss far above the others (StepLaw: 181
runs at 4–11 nats among good runs at 2–3; a sentinel such as 10). Told to the search as
losses, they bend its surrogate; a campaign would record them as failed runs (compute spent,
no loss: ``scalebo status --diverged-above``). With ``diverged_above`` a replay does the same
(:attr:`scalebo.bench.problems.ReplayProblem.diverged`), and the reference fits leave them out.
Measured (docs/reproduction.md, 0.4.12): on a trial's grid whose diverged runs were recorded at
10 nats, 23.6 / 11.0 / 11.4 / 12.1 → 10.0 / 2.5 / 1.3 / 0.0 % error at 1 / 5 / 10 / 25 % of
C_total (20 seeds); on StepLaw (diverged above 4 nats) no significant change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scalebo.bench.problems import ReplayProblem

__all__ = ["DIVERGED_RATIO", "diverged_note", "diverged_rows"]

#: Recorded losses above this multiple of the median cell-best loss look diverged
#: (:func:`diverged_note`; trained LLM losses sit at 2–4 nats, diverged ones near ln(vocab)).
DIVERGED_RATIO = 2.0


def diverged_rows(loss: np.ndarray, diverged_above: float, name: str
                  ) -> tuple[np.ndarray, str]:
    """``(mask, note)``: which configurations' recorded ``loss`` (nats, ``(n_cfg,)``) is above
    ``diverged_above`` (read-only bool ``(n_cfg,)``), and a note saying how many.

    Raises:
        ValueError: ``diverged_above`` is not a finite number.
    """
    if not np.isfinite(diverged_above):
        raise ValueError(f"diverged_above must be a finite loss (nats), got "
                         f"{diverged_above!r}")
    mask = np.asarray(loss, dtype=np.float64) > diverged_above
    mask.flags.writeable = False
    return mask, (f"{name}: {int(mask.sum())} of {mask.size} configurations have a recorded "
                  f"loss above diverged_above={diverged_above:g} nats: a replay that buys one "
                  "spends its compute and learns no loss (a failed run)")


def diverged_note(problem: ReplayProblem) -> str | None:
    """A note when some recorded losses of ``problem`` look like diverged runs — above
    :data:`DIVERGED_RATIO` × the median of the cells' best losses — and none is marked
    (``problem.diverged`` is None); None otherwise."""
    if problem.diverged is not None:
        return None
    best = float(np.median(problem.loss[problem.cell_best_idx]))
    high = problem.loss > DIVERGED_RATIO * best
    if not high.any():
        return None
    return (f"{problem.name}: {int(high.sum())} configurations have a recorded loss over "
            f"{DIVERGED_RATIO:g}x the median cell best ({best:.4g} nats; up to "
            f"{problem.loss.max():.4g}): if they are diverged runs, --diverged-above LOSS "
            "(diverged_above= in a sweep or in Python) makes a replay treat them as failed "
            "runs (compute spent, no loss) instead of telling the search their losses")
