"""What the search loop hands out: trace entries (replays, reports) and suggestions (CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Suggestion:
    """A configuration to train, with why it was chosen (for the CLI and reports).

    Attributes mirror :class:`TraceEntry`; ``config`` maps grid columns (N, D, C, axes) to
    values and ``reason`` is a one-line human explanation.
    """

    index: int
    config: dict[str, Any]
    predicted_mean: float | None
    predicted_std: float | None
    cost: float
    cap: float
    acquisition_value: float | None
    reason: str
