"""Pathwise joint posterior samples of the GP: random Fourier features + Matheron's rule.

:meth:`GaussianProcess.sample_joint <scalebo.search.models.gp.GaussianProcess.sample_joint>`
draws exactly from the ``m × m`` posterior covariance (``O(m³)`` time, ``O(m²)`` memory). Here
each sample is a function (Wilson et al. 2020, "Efficiently sampling functions from Gaussian
process posteriors", eq. 13), in the GP's standardized units::

    f(x*) = f̃(x*) + K(x*, X)·(K_XX + s²I)⁻¹·(y − f̃(X) − ε),   ε ~ N(0, s²I),

with ``K = σ²k`` (σ² = ``amplitude_``), ``s² = noise_ + jitter_`` (``L_ L_ᵀ = K_XX + s²I`` is
the GP's stored factor, so the covariance is the one :meth:`posterior_cov` uses), ``y`` the
standardized training losses and ``f̃`` a prior draw from random Fourier features:
``f̃(x) = σ·φ(x)ᵀw``, ``w ~ N(0, I_F)``, ``φ(x) = √(1/D)·[cos(Ωx), sin(Ωx)]`` with ``D = F/2``
frequencies (rows of ``Ω``) drawn from the kernel's spectral density, so that
``E[φ(x)ᵀφ(x')] = k(x, x')``. The update uses the exact kernel: the sample mean is the exact
posterior mean for any ``Ω``; only the covariance carries the feature error (the prior's is
``O(σ²/√D)`` per entry, less near data). The result is mapped to nats as ``predict`` does
(``· y_std_ + y_mean_``); ``include_noise`` adds independent ``N(0, noise_)`` (standardized)
per entry, as the exact sampler's ``posterior_cov(include_noise=True)``.

Spectral densities, with ``r² = Σ_j (x_j − x'_j)²/ℓ_j²`` on the kernel's active columns:
RBF ``exp(−r²/2)``: ``ω = z/ℓ``; Matérn-ν (5/2 here): ``ω = (z/ℓ)·√(2ν/u)``, ``z ~ N(0, I)``,
``u ~ χ²(2ν)`` (a multivariate Student-t with 2ν degrees of freedom); checked numerically
against ``E[cos(ωᵀτ)] = k(τ)`` in the tests. :class:`Additive` sums of them are sums of
independent features (each term ``D`` frequencies, scaled by its weight). Categorical
factors (``Mixed``, ``Categorical``) and any other kernel are not supported: ``"auto"`` falls
back to the exact sampler.

Variance reduction (both keep ``E[φ(x)ᵀφ(x')] = k(x, x')`` exactly):

* ``z`` and ``u`` come from scrambled Sobol' points (randomized quasi-Monte Carlo) through
  the inverse CDFs, ``D`` a power of two.
* Matérn: ``u`` is drawn from the defensive mixture ``q = ½χ²₅ + ½χ²₁`` and each frequency
  weighted by ``p/q = 2u²/(u² + 3)`` (≤ 2). The GPs fitted on scaling grids have length
  scales of several times the encoded range and amplitudes 10²–10⁴ times the posterior
  variances: the posterior then lives in the Student-t tail (most of it from ``u`` ≈
  0.003–0.1, where χ²₅ puts ~2·10⁻⁴ of its mass), which plain sampling almost never
  reaches: its posterior variances came out 30–40 % too small at every F tried (≤ 16,384).
  With the mixture the median variance error is a few %; on short length scales
  (posterior ≈ prior) it costs ~1.3× the plain error.

Accuracy (benchmarks/pathwise_speed.py, F = 4096, a 4-d grid GP, m = 1,000): entrywise
covariance error up to ~14 % of the largest posterior variance, median variance error
~2 %; the error is a fixed random function per call, shared by its S samples, and falls
with F (table at :data:`N_FEATURES`). Law-posterior quantiles at 1e25 FLOPs agreed with the
exact sampler's within Monte-Carlo error (30 seeds, two grids).

Cost: ``O(m·(F·d + F·S + n·d + n·S) + n²·S)`` time; memory ``O(m·S)`` for the output plus
``O(F·d + n·S)`` and one chunk of ``O(chunk·(F + n))``, never ``O(m²)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.linalg import cho_solve
from scipy.special import gammaincinv, ndtri
from scipy.stats import qmc

from scalebo.search.models.composite_kernels import Additive
from scalebo.search.models.kernels import RBF, Kernel, Matern52

__all__ = ["N_FEATURES", "PATHWISE_MIN_POINTS", "FourierPrior", "fourier_prior",
           "pathwise_samples", "supports", "use_pathwise"]

#: Random features ``F`` per stationary kernel term (``F/2`` frequencies, cos and sin each).
#: Measured (benchmarks/pathwise_speed.py, m = 1,000 of a 4-d grid GP, max entrywise
#: covariance error / max posterior variance; pathwise time at m = 20,000, S = 64):
#: F = 1024: 0.34, 0.4 s; 2048: 0.29, 0.7 s; 4096: 0.14, 1.4 s; 8192: 0.12, 2.5 s; 16384:
#: 0.10, 5.0 s. 4096: past it the error falls slowly while the time doubles.
N_FEATURES = 4096

#: ``method="auto"`` samples pathwise above this many points (exact Cholesky at or below).
#: Measured, S = 64, n = 200, 2 shared cores (exact / pathwise): m = 2,000: 0.18 / 0.17 s;
#: 3,000: 0.50 / 0.24 s, 215 / 28 MB; 5,000: 2.2 / 0.37 s, 588 / 29 MB; 20,000: ~10 GB /
#: 1.4 s, 37 MB. Up to 3,000 the exact draw is affordable (≤ 0.5 s) and has no feature error.
PATHWISE_MIN_POINTS = 3000

#: Target number of float64 entries of one chunk's feature matrix (``chunk × F``): 16 MB.
_CHUNK_ENTRIES = 1 << 21

Method = Literal["auto", "exact", "pathwise"]
METHODS: tuple[str, ...] = ("auto", "exact", "pathwise")


def _terms(kernel: Kernel, weight: float = 1.0) -> list[tuple[float, Kernel]] | None:
    """``[(weight, stationary term)]`` whose weighted sum is ``kernel``, or None when some
    term has no spectral sampler here (exact types only: a subclass may change ``φ``)."""
    if type(kernel) in (Matern52, RBF):
        return [(weight, kernel)]
    if type(kernel) is Additive:
        out: list[tuple[float, Kernel]] = []
        for w, k in zip(kernel._w, kernel.kernels, strict=True):
            part = _terms(k, weight * float(w))
            if part is None:
                return None
            out += part
        return out
    return None


def supports(kernel: Kernel) -> bool:
    """Whether :func:`pathwise_samples` can sample a GP with this (fitted) kernel."""
    return _terms(kernel) is not None


def use_pathwise(kernel: Kernel, m: int, method: str, min_points: int | None = None) -> bool:
    """Whether ``sample_joint(method=...)`` at ``m`` points goes pathwise: ``"pathwise"``
    (ValueError if the kernel is not supported), ``"exact"`` never, ``"auto"`` when
    ``m > min_points`` (default: :data:`PATHWISE_MIN_POINTS`, read at each call) and the
    kernel is supported."""
    if min_points is None:
        min_points = PATHWISE_MIN_POINTS
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; expected one of {list(METHODS)}")
    if method == "pathwise" and not supports(kernel):
        raise ValueError(f"pathwise sampling does not support the kernel {kernel!r} "
                         "(categorical or unknown terms); use method='exact' or 'auto'")
    return method == "pathwise" or (method == "auto" and m > min_points and supports(kernel))


def _sobol(dim: int, n: int, gen: np.random.Generator) -> np.ndarray:
    """``n`` (a power of two) scrambled Sobol' points in ``(0, 1)^dim``, seeded by ``gen``."""
    try:
        engine = qmc.Sobol(dim, scramble=True, rng=gen)
    except TypeError:  # scipy < 1.15 names it seed
        engine = qmc.Sobol(dim, scramble=True, seed=gen)
    return np.clip(engine.random(n), 1e-12, 1.0 - 1e-12)


def _frequencies(kernel: Kernel, D: int, gen: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(Ω, w)``: ``D`` frequencies ``(D, d)`` of a stationary term and their importance
    weights ``(D,)`` (``E[w·cos(ωᵀτ)] = k(τ)``), from randomized quasi-Monte Carlo points."""
    ls = np.asarray(kernel.length_scale, dtype=np.float64)  # type: ignore[attr-defined]
    d = ls.size
    matern = isinstance(kernel, Matern52)
    U = _sobol(d + 2 if matern else d, D, gen)
    omega = ndtri(U[:, :d]) / ls
    if not matern:
        return omega, np.ones(D)
    # u ~ q = ½χ²₅ + ½χ²₁ (first half of the U[:, d] range picks χ²₅), weight p/q = 2u²/(u²+3)
    dof = np.where(U[:, d] < 0.5, 2.5, 0.5)
    u = 2.0 * gammaincinv(dof, U[:, d + 1])
    omega *= np.sqrt(5.0 / u)[:, None]
    return omega, 2.0 * u**2 / (u**2 + 3.0)


@dataclass(frozen=True, eq=False)
class FourierPrior:
    """Random Fourier features of a unit-amplitude kernel: per term, its active columns
    ``cols`` (None: all), frequencies ``Ω`` ``(D, |cols|)`` in inverse encoded units and
    weights ``w`` ``(D,)`` (importance weight × the term's Additive weight); ``features(X)``
    is ``(rows, F)`` with ``F = Σ_terms 2D`` and ``features(X) @ features(X')ᵀ ≈ k(X, X')``."""

    terms: tuple[tuple[tuple[int, ...] | None, np.ndarray, np.ndarray], ...]

    @property
    def n_features(self) -> int:
        return sum(2 * omega.shape[0] for _, omega, _ in self.terms)

    def features(self, X: np.ndarray) -> np.ndarray:
        """``φ(X)``, shape ``(rows, F)``."""
        out = np.empty((X.shape[0], self.n_features))
        start = 0
        for cols, omega, w in self.terms:
            D = omega.shape[0]
            A = X if cols is None else X[:, list(cols)]
            proj = A @ omega.T  # (rows, D)
            scale = np.sqrt(w / D)
            np.cos(proj, out=out[:, start:start + D])
            np.sin(proj, out=out[:, start + D:start + 2 * D])
            out[:, start:start + D] *= scale
            out[:, start + D:start + 2 * D] *= scale
            start += 2 * D
        return out


def fourier_prior(kernel: Kernel, n_features: int, gen: np.random.Generator) -> FourierPrior:
    """Draw the frequencies of ``kernel``: ``D`` per term, ``n_features/2`` rounded up to a
    power of two (see the module docstring); ValueError if the kernel is not supported."""
    terms = _terms(kernel)
    if terms is None:
        raise ValueError(f"no spectral sampler for the kernel {kernel!r}")
    D = 1 << max(int(np.ceil(np.log2(max(int(n_features) // 2, 1)))), 0)
    out = []
    for weight, k in terms:
        omega, w = _frequencies(k, D, gen)
        out.append((k.active_dims, omega, weight * w))  # type: ignore[attr-defined]
    return FourierPrior(tuple(out))


def pathwise_samples(gp: Any, Xs: np.ndarray, n_samples: int,
                     rng: np.random.Generator | int | None = None, *,
                     include_noise: bool = False, n_features: int | None = None,
                     chunk: int | None = None) -> np.ndarray:
    """Joint posterior samples ``(n_samples, m)`` in nats of a fitted
    :class:`~scalebo.search.models.gp.GaussianProcess` ``gp`` at ``Xs`` ``(m, d)`` (checked
    by the caller), by the module docstring's rule; the same ``rng`` seed gives the same
    samples. ``n_features``: ``F`` per kernel term (default :data:`N_FEATURES`, read at each
    call); ``chunk``: test rows per block (default: ``chunk × F`` ≈ 2²¹ entries).

    Draws from ``rng`` in this order: the frequencies, the feature weights ``(F, S)``, the
    training noise ``ε`` ``(n, S)``, then (``include_noise``) the observation noise ``(S, m)``.
    """
    gen = np.random.default_rng(rng)
    S, m = int(n_samples), Xs.shape[0]
    X, L = gp.X_train_, gp.L_
    amp, kern = float(gp.amplitude_), gp.kernel_
    prior = fourier_prior(kern, N_FEATURES if n_features is None else n_features, gen)
    W = gen.standard_normal((prior.n_features, S)) * np.sqrt(amp)  # f̃ = φ(x)ᵀW, (F, S)
    eps = gen.standard_normal((X.shape[0], S)) * np.sqrt(gp.noise_ + gp.jitter_)
    resid = gp.y_train_[:, None] - prior.features(X) @ W - eps  # (n, S)
    V = cho_solve((L, True), resid, check_finite=False)  # (K_XX + s²I)⁻¹(y − f̃(X) − ε)
    V *= amp  # so that k(x*, X) @ V = K(x*, X)·(…)⁻¹(…)
    out = np.empty((S, m))
    step = int(chunk) if chunk else max(64, _CHUNK_ENTRIES // max(prior.n_features, X.shape[0]))
    for a in range(0, m, step):
        Xc = Xs[a:a + step]
        block = prior.features(Xc) @ W  # f̃(x*), (rows, S)
        block += kern(Xc, X) @ V
        out[:, a:a + step] = block.T
    if include_noise:
        out += gen.standard_normal((S, m)) * np.sqrt(gp.noise_)
    out *= gp.y_std_
    out += gp.y_mean_
    return out
