"""Issue 11: the search loop falls back, and says why in the trace, when a surrogate's
posterior is not finite; the surrogate's own fit status reaches the trace."""

import json
from dataclasses import dataclass

import numpy as np
import pytest
from test_loop import _truth, loop_grid  # the same small grid and truth as test_loop

from scalebo.search.loop import SearchLoop
from scalebo.search.models.surrogates import GPSurrogate
from scalebo.search.models.trend import TrendSurrogate
from scalebo.search.trace import TraceEntry

grid = pytest.fixture(loop_grid, name="grid")


class NaNSurrogate:
    """Fits anything; predicts NaN means (``where="mean"``) or std (``"std"``), at every
    row or only at some (``every``)."""

    def __init__(self, where="mean", every=1):
        self.where, self.every = where, every
        self.n_fits = 0

    def fit(self, X, y):
        self.n_fits += 1
        return self

    def predict(self, X):
        m = np.zeros(len(X))
        s = np.ones(len(X))
        bad = np.arange(len(X)) % self.every == 0
        (m if self.where == "mean" else s)[bad] = np.nan
        return m, s


@dataclass(frozen=True)
class FakeFit:
    status: int
    message: str


class ReportingSurrogate:
    """A finite surrogate that reports a hyperparameter fit the way the GP does."""

    def fit(self, X, y):
        self.fit_result_ = FakeFit(2, "ABNORMAL_TERMINATION_IN_LNSRCH")
        return self

    def predict(self, X):
        return -np.asarray(X)[:, 0], np.ones(len(X))


def _run(loop, truth, max_asks=100, q=1):
    for _ in range(max_asks):
        picks = loop.ask(q)
        if not picks:
            break
        loop.tell(picks, truth[picks])
    return loop


@pytest.mark.parametrize("where,every", [("mean", 1), ("std", 1), ("mean", 3)])
def test_non_finite_posterior_falls_back_and_the_trace_says_why(grid, where, every):
    truth = _truth(grid)
    loop = _run(SearchLoop(grid, 0.5, NaNSurrogate(where, every), schedule="full",
                           n_initial=2, rng=0), truth)
    assert loop.done  # the search ran to the budget instead of stopping
    after = loop.trace[2:]
    assert after and all(e.fallback and "not finite" in e.fallback for e in after)
    assert all(e.predicted_mean is None and e.acquisition_value is None for e in after)
    assert loop.trace[0].fallback is None  # the initial design is not a fallback
    # The fallback is the seeded permutation order: the same seed gives the same picks.
    again = _run(SearchLoop(grid, 0.5, NaNSurrogate(where, every), schedule="full",
                            n_initial=2, rng=0), truth)
    assert [e.index for e in again.trace] == [e.index for e in loop.trace]


def test_non_finite_posterior_with_a_batch_and_a_suggestion(grid):
    loop = SearchLoop(grid, 0.5, NaNSurrogate(), schedule="full", n_initial=1, rng=1)
    first = loop.ask()
    loop.tell(first, _truth(grid)[first])
    suggestions = loop.suggest(3)
    assert len(suggestions) == 3 and len({s.index for s in suggestions}) == 3
    assert all(s.reason.startswith("fallback (posterior mean/std not finite") for s in suggestions)


def test_fit_status_of_the_surrogate_reaches_the_trace(grid):
    truth = _truth(grid)
    loop = _run(SearchLoop(grid, 0.3, TrendSurrogate(ReportingSurrogate()), schedule="full",
                           n_initial=2, rng=0), truth)
    initial, searched = loop.trace[:2], loop.trace[2:]
    assert all(e.surrogate_fit_status is None and e.surrogate_fit_message is None
               for e in initial)
    assert searched and all(e.surrogate_fit_status == 2 for e in searched)
    assert all(e.surrogate_fit_message == "ABNORMAL_TERMINATION_IN_LNSRCH" for e in searched)
    assert all(e.fallback is None for e in searched)


def test_the_gp_fit_status_reaches_the_trace(grid):
    truth = _truth(grid)
    loop = _run(SearchLoop(grid, 0.2, GPSurrogate(rng=0), schedule="full", n_initial=3,
                           rng=0), truth)
    searched = loop.trace[3:]
    assert searched
    for e in searched:
        assert isinstance(e.surrogate_fit_status, int) and e.surrogate_fit_status in (0, 1, 2, 3)
        assert isinstance(e.surrogate_fit_message, str)


def test_trace_json_round_trip_and_old_entries_read_back(grid):
    loop = _run(SearchLoop(grid, 0.3, NaNSurrogate(), schedule="full", n_initial=2, rng=0),
                _truth(grid))
    for entry in loop.trace:
        text = json.dumps(entry.to_dict(), allow_nan=False)
        assert TraceEntry.from_dict(json.loads(text)) == entry
    old = {"order": 0, "index": 3, "cost": 6e15, "cumulative_cost": 6e15, "cap": None,
           "predicted_mean": None, "predicted_std": None, "acquisition_value": None,
           "config": {"N": 1e6, "D": 1e9}}  # a schema written before the new fields
    back = TraceEntry.from_dict(old)
    assert back.cap == np.inf and back.fallback is None
    assert back.surrogate_fit_status is None and back.surrogate_fit_message is None


def test_a_non_finite_belief_at_a_pending_row_falls_back_too(grid):
    loop = SearchLoop(grid, 0.5, NaNSurrogate(), schedule="full", n_initial=1, rng=2)
    first = loop.ask()
    loop.tell(first, _truth(grid)[first])
    cheap = [i for i in np.argsort(grid.cost) if i not in first and not grid.held_out[i]]
    loop.mark_pending(int(cheap[0]))  # a run in flight: believed at its (NaN) mean
    pick = loop.ask()
    assert pick and loop.trace[-1].fallback == "posterior mean not finite at 1 of 1 pending"
