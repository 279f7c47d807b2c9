"""scalebo: robust LLM scaling-law fitting and budgeted choice of which runs to train.

Conventions used throughout the package:

* ``N`` — model size in parameters; ``D`` — training tokens; ``C`` — training compute in
  FLOPs (``6·N·D`` unless a table provides it); ``loss`` — cross-entropy in nats.
* All arrays are float64. Laws are fitted on log residuals ``log L_pred − log L_obs``
  (natural log).

The package follows the data: :mod:`scalebo.data` (run tables, files, datasets) →
:mod:`scalebo.laws` (law forms) → :mod:`scalebo.fitting` (frontiers, robust fits, bootstrap,
allocation, the fit summary) → :mod:`scalebo.analysis` (shape, fragility) →
:mod:`scalebo.search` (grids, the search loop, the law posterior; surrogates in
:mod:`scalebo.search.models`) → :mod:`scalebo.bench` (replays of recorded grids, sweeps,
reports) → :mod:`scalebo.cli` (parsing and printing only).

The names below are the public face; they are imported on first use, so ``import scalebo``
stays light::

    import scalebo
    runs = scalebo.load_runs("runs.csv")
    summary = scalebo.fit_summary(runs, "compute", bootstrap=1000, predict=[1e25])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.20"

#: Public name → module that defines it.
_PUBLIC: dict[str, str] = {
    "RunTable": "scalebo.data.runs",
    "load_runs": "scalebo.data.runs",
    "load_dataset": "scalebo.data.datasets",
    "list_datasets": "scalebo.data.datasets",
    "frontier": "scalebo.fitting.frontier",
    "Law": "scalebo.laws",
    "get_law": "scalebo.laws",
    "FitResult": "scalebo.fitting.robust",
    "FitStatus": "scalebo.fitting.robust",
    "fit_law": "scalebo.fitting.robust",
    "BootstrapResult": "scalebo.fitting.bootstrap",
    "bootstrap_fit": "scalebo.fitting.bootstrap",
    "compute_optimal": "scalebo.fitting.allocation",
    "FitSummary": "scalebo.fitting.summary",
    "fit_summary": "scalebo.fitting.summary",
    "Grid": "scalebo.search.grid",
    "SearchLoop": "scalebo.search.loop",
    "law_posterior": "scalebo.search.law_posterior",
    "noise_floor": "scalebo.search.noise_floor",
}

__all__ = [
    "BootstrapResult", "FitResult", "FitStatus", "FitSummary", "Grid", "Law", "RunTable",
    "SearchLoop", "__version__", "bootstrap_fit", "compute_optimal", "fit_law", "fit_summary",
    "frontier", "get_law", "law_posterior", "list_datasets", "load_dataset", "load_runs",
    "noise_floor",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'scalebo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from scalebo.data.datasets import list_datasets, load_dataset
    from scalebo.data.runs import RunTable, load_runs
    from scalebo.fitting.allocation import compute_optimal
    from scalebo.fitting.bootstrap import BootstrapResult, bootstrap_fit
    from scalebo.fitting.frontier import frontier
    from scalebo.fitting.robust import FitResult, FitStatus, fit_law
    from scalebo.fitting.summary import FitSummary, fit_summary
    from scalebo.laws import Law, get_law
    from scalebo.search.grid import Grid
    from scalebo.search.law_posterior import law_posterior
    from scalebo.search.loop import SearchLoop
    from scalebo.search.noise_floor import noise_floor
