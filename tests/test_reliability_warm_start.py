"""Issue 11: one warm-start detection (scalebo.search.models.protocol) used by the loop and
the trend wrapper; a TypeError inside a surrogate's fit is raised, not swallowed."""

import numpy as np
import pytest

from scalebo.search.grid import Grid
from scalebo.search.loop import SearchLoop
from scalebo.search.models.protocol import (
    accepts_keyword,
    accepts_warm_start,
    fit_surrogate,
    hyperparameter_fit,
)
from scalebo.search.models.surrogates import GPSurrogate, RandomSurrogate
from scalebo.search.models.trend import TrendSurrogate


class Plain:
    def fit(self, X, y):
        self.calls = [*getattr(self, "calls", []), "plain"]
        return self

    def predict(self, X):
        return np.zeros(len(X)), np.ones(len(X))


class Warm(Plain):
    def fit(self, X, y, *, warm_start=False):
        self.calls = [*getattr(self, "calls", []), warm_start]
        return self


class Kwargs(Plain):
    def fit(self, X, y, **kwargs):
        self.calls = [*getattr(self, "calls", []), kwargs.get("warm_start")]
        return self


class Broken(Warm):
    """A fit that takes warm_start but fails inside with a TypeError (a bug to surface)."""

    def fit(self, X, y, *, warm_start=False):
        self.calls = [*getattr(self, "calls", []), warm_start]
        raise TypeError("unsupported operand type(s) inside fit")


def test_detection():
    assert not accepts_warm_start(Plain()) and not accepts_warm_start(RandomSurrogate())
    assert accepts_warm_start(Warm()) and accepts_warm_start(Kwargs())
    assert accepts_warm_start(GPSurrogate()) and accepts_warm_start(TrendSurrogate(Plain()))
    assert not accepts_warm_start(object())

    def positional_only(X, y, warm_start, /):
        return None

    assert not accepts_keyword(positional_only, "warm_start")
    assert not accepts_keyword(len, "warm_start")  # a builtin without a readable signature


def test_fit_surrogate_passes_warm_start_only_when_taken():
    X, y = np.zeros((3, 2)), np.zeros(3)
    assert fit_surrogate(Plain(), X, y, warm_start=True).calls == ["plain"]
    assert fit_surrogate(Warm(), X, y, warm_start=True).calls == [True]
    assert fit_surrogate(Kwargs(), X, y, warm_start=True).calls == [True]


def test_trend_passes_warm_start_to_an_inner_that_takes_it_and_not_otherwise():
    X = np.random.default_rng(0).uniform(size=(6, 2))
    y = X[:, 0]
    plain, warm = TrendSurrogate(Plain()), TrendSurrogate(Warm())
    plain.fit(X, y, warm_start=True)
    warm.fit(X, y, warm_start=True)
    warm.fit(X, y)
    assert plain.inner.calls == ["plain"]
    assert warm.inner.calls == [True, False]


def test_a_type_error_inside_the_inner_fit_is_raised_not_retried():
    X = np.random.default_rng(0).uniform(size=(6, 2))
    model = TrendSurrogate(Broken())
    with pytest.raises(TypeError, match="inside fit"):
        model.fit(X, X[:, 0], warm_start=True)
    assert model.inner.calls == [True]  # one call: no silent retry without warm start


def test_loop_warm_starts_a_kwargs_surrogate_after_the_first_fit():
    grid = Grid.from_axes({"N": [1e6, 2e6, 4e6], "D": [1e9, 2e9], "lr": [1e-3, 1e-2]},
                          n_held_out_cells=0)
    model = Kwargs()
    loop = SearchLoop(grid, 0.6, model, schedule="full", n_initial=1, rng=0)
    for _ in range(4):
        picks = loop.ask()
        if not picks:
            break
        loop.tell(picks, [3.0] * len(picks))
    assert model.calls[0] is None and set(model.calls[1:]) == {True}


def test_hyperparameter_fit_is_found_inside_wrappers():
    X = np.random.default_rng(0).uniform(size=(8, 2))
    gp = TrendSurrogate(GPSurrogate(rng=0)).fit(X, X[:, 0])
    fit = hyperparameter_fit(gp)
    assert fit is gp.inner.gp_.fit_result_
    assert hyperparameter_fit(Plain()) is None and hyperparameter_fit(None) is None
