"""Law posterior: the scaling law's uncertainty given what a campaign observed (DESIGN.md).

S joint posterior samples of the **unobserved** losses in scope (by default every acquirable
configuration, ``scope="grid"``, since the law of the whole grid is what a prediction at a
target stands for; ``scope="window"`` samples only the fill-in's window, which leaves a costly
configuration that could still move the law out of the interval; standardization as in
:func:`~scalebo.search.fantasize.fantasize`; observed configurations keep their observed
losses) give S fantasized tables; the law is fitted on
each — all S in one batched call (:func:`scalebo.fitting.batch.fit_batch`) — and the S fits give
the distribution of any derived number:

* ``compute``: ``L(C) = E + A·C^−α`` on each table's Pareto envelope of (C, loss), built for
  all samples at once; the fit's rows are the union of the envelopes, each sample weighing
  its own rows 1 and the others 0. Derived: the loss at the targets (no allocation).
* ``chinchilla``: ``L(N, D) = E + A/N^α + B/D^β`` on each table's per-(N, D)-cell best
  losses (the same cells for every sample); derived: the loss along its compute-optimal path
  and ``N*(C)``, ``D*(C)`` (Approach 3, :mod:`scalebo.fitting.allocation`).

By default the samples are of a *recorded* loss (latent + observation noise,
``include_noise=True``), since a reference law is fitted on recorded, noisy losses: the
posterior is about the law a fit on the whole grid would give (``estimand="reference"``).
Once the runs that make the envelope are observed, that law is known exactly and the compute
law's interval has width 0, although the recorded losses it is fitted on are noisy.
``estimand="noise_free"`` is about the law of the noise-free losses instead: every row in
scope, observed ones included, is drawn from the latent posterior. Measured on synthetic
grids with a known law (12 grids, σ = 0.005 nats, default search, S = 64, 1e25 FLOPs; the
reference itself is 0.59 % from the noise-free law on average): at 5 / 10 / 25 % of
``C_total`` the reference posterior's 80 % interval covers the noise-free law in
50 / 8 / 0 % of replays (median width 0.88 / 0 / 0 %), the noise-free posterior's in
100 / 100 / 92 % (width 2.1 / 1.8 / 1.4 %), its median 0.61 / 0.38 / 0.34 % from it.

Starts: the ``n_starts`` best distinct converged optima of :func:`~scalebo.fitting.robust.
fit_law` with the law's default start grid on the posterior-mean table (the ordinary
fantasized table; for ``noise_free`` the trained rows too are at their latent posterior
mean, so the point fit is about the same law as the samples), so every sample starts from
the campaign's own point estimate.

Failures are counted, never NaN: a sample without an estimate, whose frontier holds a loss
that is not positive (no log-space fit), whose fit did not converge
(max iterations), whose Chinchilla fit has an exponent at 0 (no compute-optimal path) or
whose prediction is not finite is *failed*; its status and reason are kept, and the arrays of
:class:`LawPosterior` hold the successful samples only (``sample_index`` says which).

StepLaw, 5 % replay: 31 % of the compute law's samples (42 % latent) give *exactly* the point
fit (Huber δ = 1e-3: a residual beyond δ weighs only through its sign, as in an L1 fit, so
moving such points without crossing ±δ leaves the optimum); Chinchilla's none. Units:
compute in FLOPs, losses in nats, N in parameters, D in tokens. ``discrepancy``: see below.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from scalebo.errors import FitError
from scalebo.fitting.allocation import approach3, compute_law_from_chinchilla, predict_compute
from scalebo.fitting.batch import fit_batch
from scalebo.fitting.bootstrap import distinct_optima
from scalebo.fitting.robust import FitResult, FitStatus, bound_mask, fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW, PowerLawSum
from scalebo.search.fantasize import MAX_STD_RATIO, check_losses
from scalebo.search.grid import Grid
from scalebo.search.law_frontiers import envelope_masks, sample_frontiers, too_few_points
from scalebo.search.law_samples import (
    CELL_COUPLING,
    ESTIMANDS,
    Draws,
    check_estimand,
    draw_with_model,
    sample_losses,
)
from scalebo.search.posterior_discrepancy import DiscrepancySurrogate

__all__ = ["COVER_RTOL", "ESTIMANDS", "LAW_NAMES", "QUANTILES", "LawPosterior",
           "check_estimand", "covers", "envelope_masks", "law_posterior", "sample_losses",
           "target_key"]

#: Laws a posterior can be built for, by name.
LAW_NAMES: dict[str, PowerLawSum] = {"compute": COMPUTE_LAW, "chinchilla": CHINCHILLA}
#: Summary quantiles: q10–q90 is the 80 % interval, q02.5–q97.5 the 95 % one.
QUANTILES: dict[str, float] = {"q02.5": 0.025, "q10": 0.10, "q50": 0.50, "q90": 0.90,
                               "q97.5": 0.975}
_OK = (str(FitStatus.CONVERGED), str(FitStatus.BOUND_HIT))
#: Relative slack of :func:`covers`: the fitter's precision on a prediction.
COVER_RTOL = 1e-6


def covers(lo: Any, hi: Any, value: Any, rtol: float = COVER_RTOL) -> np.ndarray:
    """Whether ``[lo, hi]`` contains ``value`` within ``rtol·|value|`` (elementwise, bool):
    ``max(lo − value, value − hi, 0) ≤ rtol·|value|``; False where any input is NaN. A
    posterior collapsed onto a point fit is then not "outside" it by rounding."""
    lo, hi, value = (np.asarray(a, dtype=np.float64) for a in (lo, hi, value))
    gap = np.maximum(np.maximum(lo - value, value - hi), 0.0)
    with np.errstate(invalid="ignore"):
        return np.asarray(gap <= rtol * np.abs(value)) & np.isfinite(gap)


def target_key(C: float) -> str:
    """Key of a target compute (FLOPs) in summaries: ``"1e+25"`` for a round power of ten
    times a digit, else enough digits to tell targets apart (``"1.4e+25"``, not ``"1e+25"``)."""
    short = f"{C:.0e}"
    return short if float(short) == float(C) else f"{C:.6g}"


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return dict.fromkeys(QUANTILES)
    q = np.quantile(values, list(QUANTILES.values()))
    return {k: float(v) for k, v in zip(QUANTILES, q, strict=True)}


@dataclass(frozen=True, eq=False)
class LawPosterior:
    """Distribution of one law's fit over S posterior samples of the unobserved losses.

    Attributes:
        law: ``"compute"`` or ``"chinchilla"``.
        targets: Target computes, FLOPs.
        predicted_loss: Loss at each target, nats, ``(n_ok, n_targets)`` (Chinchilla: along
            its compute-optimal path), one row per successful sample (n_ok = S − n_failed).
        params: Natural parameter name → ``(n_ok,)`` values (``E`` nats; ``A`` nats·FLOPs^α
            (compute law) or nats·parameters^α; ``B`` nats·tokens^β; exponents unitless).
        N_opt, D_opt: Compute-optimal parameters and tokens, ``(n_ok, n_targets)``;
            Chinchilla only (None for the compute law, which has no allocation).
        status: Per drawn sample ``(S,)``: ``"converged"``, ``"bound hit"`` (successful),
            ``"max iterations"`` or ``"failed"``. messages: the fit's message or the reason.
        sample_index: Drawn sample of each successful row, ``(n_ok,)``.
        n_samples: Samples drawn (S). n_failed: Samples without a usable fit.
        seconds: Wall-clock seconds: sampling (shared by the laws of a call, counted in
            each) plus this law's fits; ``timings`` splits it into ``sample`` (surrogate fit
            and draws), ``starts`` (point fit), ``fit`` (batched fit), ``derive``.
        starts: Internal start parameters given to every sample, ``(k, p)``.
        point: The fit on the posterior-mean table, or None if it failed (then all failed).
        message: Why every sample failed ('' otherwise).
        samples: With ``keep_samples``: the drawn tables and the fitted surrogate
            (:class:`~scalebo.search.law_samples.Draws`, shared by the laws of a call), for
            :func:`~scalebo.search.noise_floor.noise_floor` to reuse; else None.
    """

    law: str
    targets: tuple[float, ...]
    predicted_loss: np.ndarray
    params: Mapping[str, np.ndarray]
    N_opt: np.ndarray | None
    D_opt: np.ndarray | None
    status: tuple[str, ...]
    messages: tuple[str, ...]
    sample_index: np.ndarray
    n_samples: int
    n_failed: int
    seconds: float
    timings: Mapping[str, float] = field(default_factory=dict)
    starts: np.ndarray = field(default_factory=lambda: np.empty((0, 0)), repr=False)
    point: FitResult | None = field(default=None, repr=False)
    message: str = ""
    samples: Draws | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:  # the arrays hold S samples each: their medians instead
        q50 = (np.median(self.predicted_loss, axis=0).round(4).tolist()
               if self.predicted_loss.size else None)
        return (f"LawPosterior(law={self.law!r}, targets={list(self.targets)}, "
                f"median_loss={q50}, n_samples={self.n_samples}, n_failed={self.n_failed}, "
                f"seconds={self.seconds:.3g}" + (f", message={self.message!r})" if self.message
                                                 else ")"))

    @property
    def ok(self) -> np.ndarray:
        """Mask of the successful samples among those drawn, ``(n_samples,)``."""
        return np.array([st in _OK for st in self.status], dtype=bool)

    def thetas(self) -> np.ndarray:
        """Internal (fitted) parameters of each successful sample, ``(n_ok, p)``."""
        law = LAW_NAMES[self.law]
        return np.array([law.from_natural({k: v[i] for k, v in self.params.items()})
                         for i in range(self.sample_index.size)]).reshape(-1, law.n_params)

    def at_bound(self) -> tuple[str, ...]:
        """The parameters (natural names) at a bound in some successful sample's fit, the
        most often hit first (:func:`~scalebo.fitting.robust.bound_mask`)."""
        thetas = self.thetas()
        if not thetas.size:
            return ()
        law = LAW_NAMES[self.law]
        hits = np.sum([bound_mask(law, t) for t in thetas], axis=0)
        names = list(law.natural(thetas[0]))
        return tuple(names[i] for i in np.argsort(-hits, kind="stable") if hits[i] > 0)

    def point_loss(self, C: float) -> float | None:
        """The point fit's (posterior-mean table) loss at ``C`` FLOPs, nats; None without a
        fit or a compute-optimal path."""
        if self.point is None:
            return None
        try:
            return float(predict_compute(self.law, self.point, np.array([C]))[0])
        except FitError:
            return None

    def summary(self) -> dict[str, Any]:
        """JSON-ready quantiles (keys of :data:`QUANTILES`) over the successful samples.

        ``{"predicted_loss": {"1e+25": {"q02.5": …, …}, …}, "params": {name: {…}},
        "N_opt": {…} or None, "D_opt": …, "samples": S, "n_failed": k, "n_bound_hit": b,
        "point_status": status, "seconds": t}``; ``n_bound_hit``: successful samples whose
        fit ended at a parameter bound (their spread is the bound's, not the data's);
        ``point_status``: the posterior-mean table's fit (None without one). If no sample
        succeeded every quantile is None and ``"message"`` says why.
        """
        keys = [target_key(C) for C in self.targets]

        def by_target(a: np.ndarray | None) -> dict[str, Any] | None:
            if a is None:
                return None
            return {k: _quantiles(a[:, j]) for j, k in enumerate(keys)}

        out: dict[str, Any] = {
            "predicted_loss": by_target(self.predicted_loss),
            "params": {name: _quantiles(v) for name, v in self.params.items()},
            "N_opt": by_target(self.N_opt),
            "D_opt": by_target(self.D_opt),
            "samples": int(self.n_samples),
            "n_failed": int(self.n_failed),
            "n_bound_hit": int(sum(st == str(FitStatus.BOUND_HIT) for st in self.status)),
            "point_status": None if self.point is None else str(self.point.status),
            "seconds": float(self.seconds),
        }
        if self.n_failed >= self.n_samples:
            out["message"] = self.message or "no sample fit succeeded: " + "; ".join(
                sorted(set(self.messages)))[:500]
        return out


def _derive(name: str, fit: FitResult, C: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Loss (nats) and, for Chinchilla, N*, D* at computes ``C``; FitError without a path.

    A sample's extreme fit can overflow N* or D* (e.g. an exponent near 0); the caller counts
    such a non-finite result as a failed sample, so numpy's overflow warnings are silenced
    here rather than shown to the user without context."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if name == "compute":
            return fit.predict(C[:, None]), None, None
        alloc = approach3(fit).at(C)
        loss = compute_law_from_chinchilla(fit, C)
        return loss, np.asarray(alloc["N_opt"], float), np.asarray(alloc["D_opt"], float)


def _one_law(name: str, grid: Grid, rows: np.ndarray, mean: np.ndarray, draws: np.ndarray,
             C: np.ndarray, n_starts: int, t_sample: float) -> LawPosterior:
    law = LAW_NAMES[name]
    S = draws.shape[0]
    timings = {"sample": t_sample, "starts": 0.0, "fit": 0.0, "derive": 0.0}
    t0 = time.perf_counter()
    Xm, ym, wm = sample_frontiers(name, grid, rows, mean[None, :])
    keep = slice(None) if wm is None else wm[0] > 0
    point, starts, message = None, np.empty((0, law.n_params)), ""
    n_points = int(np.asarray(ym[0, keep]).size)
    try:
        if n_points < law.n_params:  # say what is short, in the user's terms
            raise FitError(too_few_points(name, n_points, law.n_params))
        point = fit_law(law, Xm[keep], ym[0, keep])
        starts = distinct_optima(point, n_starts)
    except FitError as exc:
        message = f"no point fit on the posterior-mean table to start from: {exc}"
    timings["starts"] = time.perf_counter() - t0

    status, messages = ["failed"] * S, [message] * S
    good: list[tuple] = []  # (sample, loss, N*, D*, params) of the successful samples
    if point is not None:
        t0 = time.perf_counter()
        X, Y, W = sample_frontiers(name, grid, rows, draws)
        # A sample whose frontier holds a loss that is not positive (a GP extrapolating
        # far below the observed losses) cannot be fitted in log space: it is counted as
        # failed with its reason (weights 0, placeholder targets) instead of failing all.
        fittable = np.isfinite(Y) & (Y > 0)
        weighed = np.ones(Y.shape, dtype=bool) if W is None else W > 0
        bad = np.any(~fittable & weighed, axis=1)
        if bad.any():
            Y = np.where(fittable, Y, 1.0)
            W = np.where(bad[:, None], 0.0, np.ones(Y.shape) if W is None else W)
        batch = fit_batch(law, X, Y, starts, sample_weight=W)
        timings["fit"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for s, fit in enumerate(batch.results):  # status stays "failed" unless successful
            if bad[s]:
                messages[s] = "a sampled frontier loss is not positive (no log-space fit)"
                continue
            if fit is None or not fit.success:
                status[s], messages[s] = ((str(fit.status), fit.message) if fit is not None
                                          else ("failed", batch.errors[s]))
                continue
            try:
                out = _derive(name, fit, C)
            except FitError as exc:
                messages[s] = f"{fit.message}; no compute-optimal path: {exc}"
                continue
            if not all(np.all(np.isfinite(a)) for a in out if a is not None):
                messages[s] = f"{fit.message}; non-finite prediction"
                continue
            status[s], messages[s] = str(fit.status), fit.message
            good.append((s, *out, fit.params))
        timings["derive"] = time.perf_counter() - t0

    def stack(j: int) -> np.ndarray:  # (n_ok, n_targets)
        return np.array([g[j] for g in good], dtype=np.float64).reshape(len(good), C.size)

    return LawPosterior(
        law=name, targets=tuple(float(c) for c in C), predicted_loss=stack(1),
        params={k: np.array([g[4][k] for g in good], dtype=np.float64)
                for k in law.natural_names},
        N_opt=None if name == "compute" else stack(2),
        D_opt=None if name == "compute" else stack(3),
        status=tuple(status), messages=tuple(messages),
        sample_index=np.array([g[0] for g in good], dtype=np.int64), n_samples=S,
        n_failed=S - len(good), seconds=float(sum(timings.values())), timings=timings,
        starts=starts, point=point, message=message,
    )


def law_posterior(
    grid: Grid,
    observed_idx: np.ndarray,
    y_obs: np.ndarray,
    surrogate: Any,
    *,
    laws: Sequence[str] = ("compute", "chinchilla"),
    scope: Literal["window", "grid"] = "grid",
    cap: float | None = None,
    n_samples: int = 64,
    targets: Sequence[float] = (1e25, 1e27, 1e29),
    include_noise: bool = True,
    n_starts: int = 8,
    rng: np.random.Generator | int | None = None,
    discrepancy: float = 0.0,
    estimand: str = "reference",
    keep_samples: bool = False,
    max_std_ratio: float | None = MAX_STD_RATIO,
    cell_coupling: float = CELL_COUPLING,
    failed: np.ndarray | None = None,
) -> dict[str, LawPosterior]:
    """Posterior of each law in ``laws`` given the observations (see the module docstring).

    Args:
        grid, observed_idx, y_obs, surrogate, scope, cap, include_noise, estimand: As for
            :func:`sample_losses` (the surrogate is copied, not modified), except that
            ``scope`` defaults to ``"grid"`` (every acquirable configuration); ``estimand``
            (:data:`ESTIMANDS`): the law a full grid of recorded runs would give
            (``"reference"``, what replays score against) or the noise-free law
            (``"noise_free"``, whose interval does not shrink to zero once the runs that
            make the envelope are trained).
        laws: Names among ``"compute"``, ``"chinchilla"`` (one name or several).
        n_samples: Posterior samples S (one law fit each).
        targets: Computes at which the loss (and N*, D*) are derived, FLOPs.
        n_starts: Starts per sample: the best distinct optima of the point fit.
        rng: Seed or generator of the samples; the same seed gives the same result when the
            surrogate is seeded too (`GPSurrogate(rng=0)`: its hyperparameter restarts).
        discrepancy: Samples widened by a hyperparameter-shift term of this scale
            (:class:`~scalebo.search.posterior_discrepancy.DiscrepancySurrogate`; 0: none);
            the posterior mean and point fit are unchanged.
        keep_samples: Keep the drawn tables and the fitted surrogate in each result's
            ``samples`` (memory: S × configurations in scope).
        max_std_ratio: Extrapolation guard of the fill-in, applied to the scope
            (:func:`~scalebo.search.fantasize.extrapolated`; None: off).
        cell_coupling: Share ρ of their deviation that a cell's untried configurations hold
            in common in every sample (:func:`~scalebo.search.law_samples.couple_cells`;
            0: the surrogate's joint draws as they are).
        failed: Grid rows whose run failed or diverged, ``(k,)``: out of scope (never drawn;
            the surrogate never saw them).

    Returns:
        ``{law name: LawPosterior}``. Raises SearchError (bad observations, scope or
        samples) or ValueError (unknown law, non-positive target, ``n_starts < 1``).
    """
    laws = (laws,) if isinstance(laws, str) else tuple(laws)
    unknown = [name for name in laws if name not in LAW_NAMES]
    if unknown:
        raise ValueError(f"unknown law(s) {unknown}; expected names among {list(LAW_NAMES)}")
    C = np.asarray(targets, dtype=np.float64).ravel()
    if C.size == 0 or not np.all(np.isfinite(C) & (C > 0)):
        raise ValueError(f"targets must be positive, finite FLOPs; got {list(targets)}")
    if n_starts < 1 or not discrepancy >= 0:
        raise ValueError(f"need n_starts >= 1, discrepancy >= 0; got {n_starts}, {discrepancy}")
    y = np.asarray(y_obs, dtype=np.float64).ravel()
    if y.shape == np.shape(np.ravel(observed_idx)):
        check_losses(np.ravel(observed_idx), y)  # the laws are fitted in log space
    t0 = time.perf_counter()
    surrogate = DiscrepancySurrogate(surrogate, discrepancy) if discrepancy else surrogate
    d = draw_with_model(grid, observed_idx, y_obs, surrogate, scope, cap, n_samples,
                        include_noise, np.random.default_rng(rng), estimand, max_std_ratio,
                        cell_coupling, failed)
    t_sample = time.perf_counter() - t0
    out = {name: _one_law(name, grid, d.rows, d.mean, d.draws, C, n_starts, t_sample)
           for name in dict.fromkeys(laws)}
    return {k: replace(v, samples=d) for k, v in out.items()} if keep_samples else out
