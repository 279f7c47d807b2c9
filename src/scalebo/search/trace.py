"""What the search loop hands out: trace entries (replays, reports) and suggestions (CLI)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["Suggestion", "TraceEntry"]


@dataclass(frozen=True)
class TraceEntry:
    """One configuration handed out by :meth:`SearchLoop.ask`.

    Attributes:
        order: 0-based position in the order of asking.
        index: Grid row.
        cost: Its cost in FLOPs.
        cumulative_cost: Compute committed (observed + pending) after this pick, FLOPs.
        cap: Effective window cap in FLOPs when it was picked (``inf`` for no cap).
        predicted_mean: Surrogate posterior mean of the loss (nats); None when no surrogate
            was used (initial design or random pick).
        predicted_std: Posterior standard deviation (nats); None likewise.
        acquisition_value: Score maximized (logEI, logPI or −LCB in standardized units); None
            likewise.
        config: The configuration: ``N`` (parameters), ``D`` (tokens), ``C`` (FLOPs) and each
            axis value, so that a trace can be read without the grid.
        fallback: Why the pick is not the acquisition's own, or None when it is: the
            surrogate's posterior or score was not finite (a seeded-permutation pick instead),
            or the target acquisition could not score (EI stood in).
        surrogate_fit_status: Status of the surrogate's last hyperparameter fit when it
            reports one (``fit_result_``, e.g. the GP's L-BFGS-B code: 0 converged,
            1 iteration or evaluation limit, 2 abnormal, 3 every start failed); None when no
            surrogate was used or it reports no fit.
        surrogate_fit_message: That fit's message; None likewise.

    Entries written before the last three fields existed read back with them None
    (:meth:`from_dict`).
    """

    order: int
    index: int
    cost: float
    cumulative_cost: float
    cap: float
    predicted_mean: float | None
    predicted_std: float | None
    acquisition_value: float | None
    config: dict[str, Any] = field(default_factory=dict)
    fallback: str | None = None
    surrogate_fit_status: int | None = None
    surrogate_fit_message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field; an infinite ``cap`` (no cap) becomes None."""
        out = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceEntry:
        """Read an entry written by :meth:`to_dict` (or a replay record's trace, of any
        version: missing optional fields take their defaults, unknown keys are ignored, a
        None ``cap`` is ``inf``)."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        if kw.get("cap") is None:
            kw["cap"] = math.inf
        return cls(**kw)


@dataclass(frozen=True)
class Suggestion:
    """A configuration to train, with why it was chosen (for the CLI and reports).

    Attributes mirror :class:`TraceEntry`; ``config`` maps grid columns (N, D, C, axes) to
    values and ``reason`` is a one-line human explanation. ``rule``: which rule of the loop
    placed it, ``"initial"`` (design), ``"random"``, ``"acquisition"``, ``"fallback"``,
    ``"anchor"`` or ``"polish"`` (``""``: not said), for code to test rather than the reason.
    """

    index: int
    config: dict[str, Any]
    predicted_mean: float | None
    predicted_std: float | None
    cost: float
    cap: float
    acquisition_value: float | None
    reason: str
    rule: str = ""
