"""Surrogate models of the loss over encoded configurations, behind one small protocol.

Notations
---------
- ``X``: encoded configurations, shape ``(n, n_dims)`` (numeric columns in [0, 1],
  categorical columns as integer codes); ``y``: losses in nats, shape ``(n,)``.
- ``predict(X_*) -> (mean, std)``, each of shape ``(m,)``, in the units of ``y``.
- ``sample_joint(X_*, n_samples, rng)`` (optional) → shape ``(n_samples, m)``.

Adapters: :class:`GPSurrogate` (the exact GP of :mod:`scalebo.search.models.gp`),
:class:`RandomSurrogate` (no model: random scores, for a random acquisition order) and
:class:`TreeEnsembleSurrogate` (bagged gradient-boosted trees, needs the ``[trees]`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scalebo.search.models.gp import GaussianProcess, GPPrior
from scalebo.search.models.scaling import standardization


@runtime_checkable
class Surrogate(Protocol):
    """What the search loop needs from a model: ``fit`` then ``predict``."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Surrogate: ...

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def _check_Xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
        raise ValueError(f"need X of shape (n, n_dims) and y of shape (n,) with n ≥ 1; got "
                         f"{X.shape} and {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X or y contains NaN or infinite values")
    return X, y


class GPSurrogate:
    """Exact GP surrogate (Matérn-5/2 ARD by default).

    Args:
        kernel: kernel name for
            :func:`~scalebo.search.models.composite_kernels.make_kernel` or a Kernel.
        categorical: indices of categorical columns.
        n_restarts: random restarts of a full hyperparameter fit.
        restart_every: with ``fit(..., warm_start=True)``, every ``restart_every``-th fit is
            still a full fit with restarts (the others start only from the previous optimum).
        restart_below: ... and so is every fit on fewer than this many observations (0:
            none): with few runs the likelihood has several optima and the previous one is
            often not the best; later it moves little between fits.
        prior: optional :class:`~scalebo.search.models.gp.GPPrior` (MAP instead of ML).
        rng: seed of the restarts and of ``sample_joint`` when none is given.
        **gp_kwargs: other :class:`~scalebo.search.models.gp.GaussianProcess` arguments.
    """

    def __init__(self, kernel: Any = "matern52", *, categorical: Sequence[int] = (),
                 n_restarts: int = 2, restart_every: int = 10, restart_below: int = 0,
                 prior: GPPrior | None = None,
                 rng: np.random.Generator | int | None = None, **gp_kwargs: Any) -> None:
        self.kernel = kernel
        self.categorical = tuple(categorical)
        self.n_restarts = n_restarts
        self.restart_every = restart_every
        self.restart_below = restart_below
        self.prior = prior
        self.rng = rng
        self.gp_kwargs = gp_kwargs

    def fit(self, X: np.ndarray, y: np.ndarray, *, warm_start: bool = False) -> GPSurrogate:
        """Fit on ``X`` (n, n_dims) and ``y`` (n,); ``warm_start`` refits from the previous
        hyperparameters only (except every ``restart_every``-th fit and fits on fewer than
        ``restart_below`` rows)."""
        if not hasattr(self, "gp_"):
            self.gp_ = GaussianProcess(self.kernel, categorical=self.categorical,
                                       n_restarts=self.n_restarts, prior=self.prior,
                                       rng=self.rng, **self.gp_kwargs)
        n_fits = getattr(self, "n_fits_", 0)
        full = ((self.restart_every > 0 and n_fits % self.restart_every == 0)
                or len(y) < self.restart_below)
        self.gp_.fit(X, y, warm_start=warm_start and not full)
        self.n_fits_ = n_fits + 1
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the latent loss, each ``(m,)``."""
        return self.gp_.predict(X, return_std=True)

    def sample_joint(self, X: np.ndarray, n_samples: int,
                     rng: np.random.Generator | int | None = None, *,
                     include_noise: bool = False) -> np.ndarray:
        """Joint posterior samples of the latent loss (``include_noise``: of a recorded
        loss), shape ``(n_samples, m)``."""
        return self.gp_.sample_joint(X, n_samples, rng, include_noise=include_noise)

    def condition_on(self, X_new: np.ndarray, y_new: np.ndarray) -> GPSurrogate:
        """A copy conditioned on extra (e.g. believed) observations, same hyperparameters."""
        new = GPSurrogate.__new__(GPSurrogate)
        new.__dict__.update(self.__dict__)
        new.gp_ = self.gp_.condition_on(X_new, y_new)
        return new


class RandomSurrogate:
    """No model: random scores, so that any acquisition ranks candidates in random order.

    ``predict`` returns ``mean = ȳ + s_y·z`` with fresh i.i.d. ``z ~ N(0, 1)`` on every call
    and ``std = s_y`` (ȳ, s_y: mean and standard deviation of the fitted y; 0 and 1 before
    any fit). With a constant std, EI, PI and LCB are all monotone in the mean, so the order
    is uniformly random and reproducible from ``rng``. Its predictions are not estimates: do
    not use it to fantasize losses.
    """

    def __init__(self, rng: np.random.Generator | int | None = None) -> None:
        self.rng = rng
        self._gen = np.random.default_rng(rng)
        self.y_mean_, self.y_std_ = 0.0, 1.0

    def fit(self, X: np.ndarray, y: np.ndarray) -> RandomSurrogate:
        _, y = _check_Xy(X, y)
        self.y_mean_, self.y_std_ = standardization(y)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = np.asarray(X).shape[0]
        mean = self.y_mean_ + self.y_std_ * self._gen.standard_normal(m)
        return mean, np.full(m, self.y_std_)

    def sample_joint(self, X: np.ndarray, n_samples: int,
                     rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Independent ``N(ȳ, s_y²)`` samples, shape ``(n_samples, m)``."""
        gen = self._gen if rng is None else np.random.default_rng(rng)
        m = np.asarray(X).shape[0]
        return self.y_mean_ + self.y_std_ * gen.standard_normal((int(n_samples), m))


def _import_xgboost() -> Any:
    from scalebo.extras import require_extra

    return require_extra("trees", "the trees surrogate (TreeEnsembleSurrogate)")


class TreeEnsembleSurrogate:
    """Bagged gradient-boosted trees: each of ``n_bags`` XGBoost models is trained on a
    bootstrap resample of the rows; ``predict`` returns the mean and standard deviation
    over bags (floored at ``min_std_frac × std(y)`` so that acquisitions never see a zero
    std). Needs the ``[trees]`` extra; xgboost is imported at the first ``fit``.

    Args:
        n_bags: bootstrap models. n_estimators, max_depth, learning_rate: per model.
        min_std_frac: std floor, as a fraction of the standard deviation of y.
        n_threads: XGBoost threads per model.
        rng: seed of the resamples and of each model's seed.
    """

    def __init__(self, *, n_bags: int = 8, n_estimators: int = 100, max_depth: int = 4,
                 learning_rate: float = 0.1, min_std_frac: float = 1e-3, n_threads: int = 1,
                 rng: np.random.Generator | int | None = None) -> None:
        self.n_bags = n_bags
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_std_frac = min_std_frac
        self.n_threads = n_threads
        self.rng = rng

    def fit(self, X: np.ndarray, y: np.ndarray) -> TreeEnsembleSurrogate:
        """Train ``n_bags`` boosted-tree models on bootstrap resamples of ``(X, y)``."""
        xgb = _import_xgboost()
        X, y = _check_Xy(X, y)
        gen = np.random.default_rng(self.rng)
        _, self.y_std_ = standardization(y)
        params = {"max_depth": self.max_depth, "eta": self.learning_rate,
                  "objective": "reg:squarederror", "nthread": self.n_threads,
                  "base_score": float(np.mean(y)), "verbosity": 0}
        self.models_ = []
        for _ in range(self.n_bags):
            rows = gen.integers(0, X.shape[0], X.shape[0])
            dtrain = xgb.DMatrix(X[rows], label=y[rows], nthread=self.n_threads)
            seed = int(gen.integers(0, 2**31 - 1))
            self.models_.append(xgb.train({**params, "seed": seed}, dtrain,
                                          num_boost_round=self.n_estimators))
        return self

    def _bag_predictions(self, X: np.ndarray) -> np.ndarray:  # (n_bags, m)
        xgb = _import_xgboost()
        d = xgb.DMatrix(np.asarray(X, dtype=np.float64), nthread=self.n_threads)
        return np.stack([m.predict(d) for m in self.models_]).astype(np.float64)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over bags, each ``(m,)``, nats."""
        P = self._bag_predictions(X)
        std = np.maximum(P.std(axis=0, ddof=1) if len(P) > 1 else 0.0,
                         self.min_std_frac * self.y_std_)
        return P.mean(axis=0), std

    def sample_joint(self, X: np.ndarray, n_samples: int,
                     rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Whole-bag draws: each sample is one bag's prediction, shape ``(n_samples, m)``
        (jointly coherent across ``X``, as in a bootstrap posterior)."""
        P = self._bag_predictions(X)
        idx = np.random.default_rng(rng).integers(0, len(P), int(n_samples))
        return P[idx]


SURROGATE_NAMES = ("gp", "random", "trees")


def make_surrogate(name: str, **kw: Any) -> Any:
    """Build a surrogate by name: ``"gp"`` (:class:`GPSurrogate`), ``"random"``
    (:class:`RandomSurrogate`) or ``"trees"`` (:class:`TreeEnsembleSurrogate`); ``kw`` go to
    its constructor."""
    classes = {"gp": GPSurrogate, "random": RandomSurrogate, "trees": TreeEnsembleSurrogate}
    if name not in classes:
        raise ValueError(f"unknown surrogate {name!r}; expected one of "
                         f"{', '.join(SURROGATE_NAMES)}")
    return classes[name](**kw)
