"""Replay metrics (DESIGN.md, "Metrics"), against the problem's reference fits.

For a set of observed grid rows — and, separately, for a fantasized table (observed losses
plus surrogate predictions) — each law is refitted with the reference's fitter, start grid
and frontier (never starting from the reference's optima):

* ``compute``: ``L(C) = E + A·C^−α`` on the Pareto envelope of (C, loss);
* ``chinchilla``: ``L(N, D) = E + A/N^α + B/D^β`` on the per-cell best losses; its compute
  law is the loss along its compute-optimal path (Approach 3).

Per law (:class:`LawMetrics`):

* ``param_error``: absolute error of each parameter vs the reference. Units: ``E`` in nats;
  exponents (``alpha``, ``beta``) unitless; coefficients as ``log10_A`` (``log10_B``), in
  decades, where ``A`` is in nats·FLOPs^α for the compute law (C in FLOPs) and in
  nats·parameters^α (nats·tokens^β for B) for Chinchilla;
* ``heldout_mse``: mean of ``(L̂ − L_best)²`` over the held-out cells, nats², where
  ``L_best`` is the true best loss of the cell and ``L̂`` the law at the cell's compute
  (compute law) or at its (N, D) (Chinchilla);
* ``extrapolation_pct``: signed relative difference ``100·(L̂(C) − L_ref(C))/L_ref(C)`` at
  each of the problem's targets (default 1e25, 1e27, 1e29 FLOPs; :mod:`scalebo.bench.targets`;
  tables report its absolute value). On the fill-in, ``L̂(C)``
  is the method's point estimate (:func:`point_estimate`): the law fitted on the fill-in
  table, or the law posterior's median where that fit lies outside the posterior's own 80 %
  interval (``point_from`` says which, per C).

Per recorded budget (:class:`BudgetMetrics`): runs, compute spent (FLOPs, fraction of
``C_total``, multiples of the two compute floors), envelope recovery (% of the reference
envelope's configurations observed) and per-cell recovery (% of acquirable cells whose best
configuration was observed). A fit that fails is recorded with ``status="failed"`` and its
message, and its numbers are None (``null`` in JSON), never a silent NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from scalebo.bench.problems import ReplayProblem
from scalebo.bench.targets import DEFAULT_TARGETS
from scalebo.errors import FitError
from scalebo.fitting.allocation import predict_compute
from scalebo.fitting.frontier import best_per_cell, pareto_envelope
from scalebo.fitting.robust import FitResult, fit_law
from scalebo.laws import CHINCHILLA, COMPUTE_LAW
from scalebo.search.law_frontiers import too_few_points
from scalebo.search.law_posterior import covers, target_key

__all__ = ["EXTRAPOLATION_C", "LAWS", "BudgetMetrics", "LawMetrics", "evaluate",
           "law_metrics", "fit_table", "point_estimate", "point_fits"]

#: Compute values (FLOPs) at which extrapolations are compared with the reference law
#: unless the problem has its own (:attr:`ReplayProblem.targets`).
EXTRAPOLATION_C: tuple[float, ...] = DEFAULT_TARGETS
#: Law names evaluated by default.
LAWS: tuple[str, ...] = ("compute", "chinchilla")


def c_key(C: float) -> str:
    """Dictionary key of an extrapolation point, e.g. ``"1e+25"``
    (:func:`~scalebo.search.law_posterior.target_key`)."""
    return target_key(C)


@dataclass(frozen=True)
class LawMetrics:
    """How well one law, refitted on a table, matches the reference fit.

    Attributes:
        law: ``"compute"`` or ``"chinchilla"``.
        status: :class:`~scalebo.fitting.robust.FitStatus` value, or ``"failed"`` when no estimate.
        message: The fitter's message (or the error).
        n_points: Frontier points fitted.
        params: Natural parameters, or None on failure.
        param_error: Absolute error per parameter (keys ``E``, ``log10_A``, ``alpha``, ...;
            units in the module docstring), or None.
        heldout_mse: Held-out MSE in nats², or None.
        extrapolation_pct: Signed relative % difference vs the reference at each
            target of the problem (:attr:`ReplayProblem.targets`; keys from :func:`c_key`),
            or None.
        point_from: Per target key, what ``extrapolation_pct`` measures:
            ``"fit"`` (the law fitted on the table) or ``"posterior median"``
            (:func:`point_estimate`); None without extrapolations.
    """

    law: str
    status: str
    message: str
    n_points: int
    params: Mapping[str, float] | None = None
    param_error: Mapping[str, float] | None = None
    heldout_mse: float | None = None
    extrapolation_pct: Mapping[str, float] | None = None
    point_from: Mapping[str, str] | None = None

    @property
    def ok(self) -> bool:
        """Whether the fit produced an estimate."""
        return self.params is not None

    def abs_extrapolation(self, C: float = 1e25) -> float | None:
        """``|extrapolation_pct|`` at ``C`` FLOPs, or None on failure."""
        if self.extrapolation_pct is None:
            return None
        return abs(self.extrapolation_pct[c_key(C)])

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BudgetMetrics:
    """Metrics of one strategy run at one budget.

    Attributes:
        budget: Budget as a fraction of ``C_total``.
        n_runs: Observed configurations.
        spent_flops: Their total cost, plus that of the diverged runs bought, FLOPs.
        spent_fraction: ``spent_flops / C_total``.
        floor_multiple_cells: ``spent_fraction`` / the per-cell-best floor.
        floor_multiple_envelope: ``spent_fraction`` / the envelope floor.
        envelope_recovery_pct: % of reference envelope configurations observed.
        cell_recovery_pct: % of acquirable cells whose best configuration was observed.
        observed: Law metrics on observed runs only, keyed by law name.
        fantasized: Law metrics on the fantasized table, or None if not fantasized.
        fantasize_message: Why fantasization was skipped or failed, or what its
            extrapolation guard left out ('' otherwise).
        law_posterior: Per law, the law posterior's summary
            (:meth:`~scalebo.search.law_posterior.LawPosterior.summary`: quantiles of the
            predicted loss at each target, of the parameters, N* and D*)
            plus ``reference_loss`` (the reference law at each C, nats) and ``covered``
            (``{"80": bool, "95": bool}`` per C: whether q10–q90 and q02.5–q97.5 contain
            it); None when not computed (``posterior_message`` says why).
        posterior_message: Why the law posterior is missing ('' otherwise).
        observed_bootstrap: The same summaries from a bootstrap over the observed runs'
            frontier (blind to the unobserved grid), or None (``bootstrap_samples`` 0).
        n_failed: Configurations bought whose recorded run diverged
            (:attr:`~scalebo.bench.problems.ReplayProblem.diverged`): compute spent, no loss.
    """

    budget: float
    n_runs: int
    spent_flops: float
    spent_fraction: float
    floor_multiple_cells: float
    floor_multiple_envelope: float
    envelope_recovery_pct: float
    cell_recovery_pct: float
    observed: Mapping[str, LawMetrics]
    fantasized: Mapping[str, LawMetrics] | None = None
    fantasize_message: str = ""
    law_posterior: Mapping[str, Mapping] | None = None
    posterior_message: str = ""
    observed_bootstrap: Mapping[str, Mapping] | None = None
    n_failed: int = 0

    def law(self, name: str = "compute", source: str = "fantasized") -> LawMetrics | None:
        """Metrics of law ``name`` on ``source`` (falls back to observed if not fantasized)."""
        table = self.fantasized if source == "fantasized" and self.fantasized else self.observed
        return table.get(name)

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("observed", "fantasized")}
        out["observed"] = {k: v.to_dict() for k, v in self.observed.items()}
        out["fantasized"] = (None if self.fantasized is None
                             else {k: v.to_dict() for k, v in self.fantasized.items()})
        return out


def _reference(problem: ReplayProblem, law: str) -> FitResult | None:
    return problem.reference_compute if law == "compute" else problem.reference_chinchilla


def _points(law: str, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Frontier inputs ``X`` (n, k) and losses (n,) of ``table`` for ``law``."""
    if law == "compute":
        C = table["C"].to_numpy(dtype=np.float64)
        y = table["loss"].to_numpy(dtype=np.float64)
        keep = pareto_envelope(C, y)
        return C[keep][:, None], y[keep]
    best = best_per_cell(table)
    return best[["N", "D"]].to_numpy(dtype=np.float64), best["loss"].to_numpy(np.float64)


def fit_table(problem: ReplayProblem, law: str, table: pd.DataFrame) -> FitResult:
    """Fit ``law`` on the frontier of ``table`` (columns N, D, C, loss) like the reference.

    The same fitter and the same start grid as the reference fit (the law's default grid,
    or the problem's own Chinchilla grid), so that nothing in a replay's fit sees the
    reference answer.

    Raises:
        FitError: too few frontier points, or no finite estimate.
    """
    lawobj = COMPUTE_LAW if law == "compute" else CHINCHILLA
    X, y = _points(law, table)
    if y.size < lawobj.n_params:  # say what is short in the user's terms, not "observations"
        raise FitError(too_few_points(law, int(y.size), lawobj.n_params))
    return fit_law(lawobj, X, y, starts=problem.fit_starts.get(law))


def _param_error(law: str, fit: FitResult, ref: FitResult) -> dict[str, float]:
    p, r = fit.params, ref.params
    out = {}
    for name in p:
        if name in ("A", "B"):
            out[f"log10_{name}"] = abs(np.log10(p[name]) - np.log10(r[name]))
        else:
            out[name] = abs(p[name] - r[name])
    return out


def point_fits(problem: ReplayProblem, table: pd.DataFrame, laws: Sequence[str] = LAWS
               ) -> dict[str, FitResult]:
    """:func:`fit_table` of each law on ``table`` that can be fitted (a law whose fit fails
    is left out; :func:`law_metrics` records why). A replay fits the observed table once and
    hands these fits to both its metrics and its bootstrap, which would otherwise repeat the
    same deterministic fit."""
    out = {}
    for law in laws:
        try:
            if len(table):
                out[law] = fit_table(problem, law, table)
        except (FitError, ValueError):
            continue
    return out


def point_estimate(fitted: float, quantiles: Mapping[str, float] | None) -> tuple[float, str]:
    """``(loss, source)``: the fill-in's point estimate at one compute (nats): the value of
    the law fitted on the fill-in table (``fitted``), or the law posterior's median where
    ``fitted`` lies outside the posterior's own 80 % interval (``quantiles``: its ``q10``,
    ``q50``, ``q90`` there, or None). The fit is of the GP's means at untried
    configurations, and an envelope of means lies above the mean of the envelopes the
    posterior's samples see where the GP is unsure; outside the posterior's central 80 %
    the two disagree and the median is the one that accounts for that. Measured on 0.4.18's
    replays (the rule does not change what a replay buys; 8 grids × seeds 0–19 × 1 / 5 /
    10 %, at 1e25 FLOPs): the rule changed 17 of 480 compute-law estimates (closer to the
    full grid's law in 12, farther in 2, the same to 1e-9 in 3, which the slack of
    :func:`~scalebo.search.law_posterior.covers` now leaves to the fit) and 13 of 480
    Chinchilla ones (10 and 3); always taking the median was worse on the
    learning-rate-only and envelope-heavy grids."""
    q = quantiles or {}
    lo, mid, hi = q.get("q10"), q.get("q50"), q.get("q90")
    if lo is None or mid is None or hi is None or covers(lo, hi, fitted):  # within 1e-6
        return fitted, "fit"
    return float(mid), "posterior median"


def law_metrics(problem: ReplayProblem, law: str, table: pd.DataFrame, *,
                fit: FitResult | None = None, posterior: Mapping | None = None) -> LawMetrics:
    """Refit ``law`` on ``table`` and compare it with the reference (see module docstring).

    ``fit``: the law already fitted on ``table`` by :func:`fit_table` (see
    :func:`point_fits`), used instead of refitting. ``posterior``: the law posterior's
    summary (its ``predicted_loss`` quantiles per C, nats) for the fill-in's point estimate
    (:func:`point_estimate`); None: the fit's value.
    """
    if law not in LAWS:
        raise ValueError(f"unknown law {law!r}; expected one of {list(LAWS)}")
    ref = _reference(problem, law)
    if ref is None:
        n_cells = int(problem.cell_best_idx.size)
        return LawMetrics(law, "failed", f"no reference fit: the acquirable grid has "
                          f"{n_cells} (N, D) cell(s) and the {law} law needs at least "
                          f"{CHINCHILLA.n_params} (held-out cells excluded)", 0)
    n_points = int(_points(law, table)[1].size) if len(table) else 0
    try:
        if not len(table):
            raise FitError("no observation to fit")
        fit = fit_table(problem, law, table) if fit is None else fit
    except (FitError, ValueError) as exc:
        return LawMetrics(law, "failed", str(exc), n_points)
    held = problem.held_out_cells
    if law == "compute":
        pred = fit.predict(held["C"].to_numpy()[:, None])
    else:
        pred = fit.predict(held[["N", "D"]].to_numpy(dtype=np.float64))
    mse = float(np.mean((pred - held["best_loss"].to_numpy()) ** 2)) if len(held) else None
    Cs = np.asarray(problem.targets)
    message = fit.message
    try:
        mine, theirs = predict_compute(law, fit, Cs), predict_compute(law, ref, Cs)
    except FitError as exc:  # e.g. an exponent at 0: no compute-optimal L(C) from L(N, D)
        extra = None
        message = f"{fit.message}; no extrapolation in compute: {exc}"
    else:
        quantiles = (posterior or {}).get("predicted_loss") or {}
        points = {c_key(c): point_estimate(float(a), quantiles.get(c_key(c))) for c, a in
                  zip(Cs, mine, strict=True)}
        extra = {k: float(100.0 * (v - b) / b) for (k, (v, _)), b in zip(points.items(), theirs,
                                                                         strict=True)}
        source = {k: src for k, (_, src) in points.items()}
    return LawMetrics(law, str(fit.status), message, n_points, fit.params,
                      _param_error(law, fit, ref), mse, extra,
                      None if extra is None else source)


def observed_table(problem: ReplayProblem, observed_idx: Sequence[int]) -> pd.DataFrame:
    """Observed configurations with their oracle losses: grid columns + ``loss``, ``grid_index``."""
    idx = np.asarray(observed_idx, dtype=np.int64)
    out = problem.grid.configs.iloc[idx].copy()
    out["loss"] = problem.loss[idx]
    out["grid_index"] = idx
    return out.reset_index(drop=True)


def evaluate(
    problem: ReplayProblem,
    observed_idx: Sequence[int],
    *,
    budget: float,
    fantasized: pd.DataFrame | None = None,
    fantasize_message: str = "",
    laws: Sequence[str] = LAWS,
    law_posterior: Mapping[str, Mapping] | None = None,
    posterior_message: str = "",
    observed_bootstrap: Mapping[str, Mapping] | None = None,
    observed_fits: Mapping[str, FitResult] | None = None,
    failed_idx: Sequence[int] = (),
) -> BudgetMetrics:
    """All metrics of one strategy run at one budget.

    Args:
        problem: The replay problem (oracle and reference).
        observed_idx: Grid rows observed, shape ``(n_obs,)``, distinct.
        budget: The budget (fraction of ``C_total``) these observations were bought under.
        fantasized: Table with columns N, D, C, loss (observed + predicted), or None.
        fantasize_message: Recorded when fantasization was skipped or failed.
        laws: Laws to evaluate.
        law_posterior: Law posterior summaries by law, scored against the reference
            (:func:`scalebo.bench.intervals.score_intervals`), or None.
        posterior_message: Recorded when the law posterior was skipped or failed.
        observed_bootstrap: Bootstrap summaries over the observed runs, scored likewise
            (:func:`scalebo.bench.intervals.bootstrap_summary`), or None.
        observed_fits: Laws already fitted on the observed table (:func:`point_fits` of
            :func:`observed_table`), reused instead of refitting.
        failed_idx: Grid rows bought whose run diverged (their cost counts as spent).
    """
    idx = np.asarray(observed_idx, dtype=np.int64)
    grid = problem.grid
    if np.unique(idx).size != idx.size or np.any(grid.held_out[idx]):
        raise ValueError("observed_idx must hold distinct, acquirable grid rows")
    failed = np.asarray(failed_idx, dtype=np.int64)
    spent = float(grid.cost[idx].sum() + grid.cost[failed].sum())
    frac = spent / problem.C_total
    observed = np.zeros(grid.n_configs, dtype=bool)
    observed[idx] = True
    env_rec = 100.0 * float(observed[problem.envelope_idx].mean())
    cell_rec = 100.0 * float(observed[problem.cell_best_idx].mean())
    obs_table = observed_table(problem, idx)
    fits = observed_fits or {}
    obs = {law: law_metrics(problem, law, obs_table, fit=fits.get(law)) for law in laws}
    fan = None
    if fantasized is not None:
        fan = {law: law_metrics(problem, law, fantasized, posterior=(law_posterior or {})
                                .get(law)) for law in laws}
    return BudgetMetrics(
        budget=float(budget), n_runs=int(idx.size), spent_flops=spent, spent_fraction=frac,
        floor_multiple_cells=frac / problem.floor_cells,
        floor_multiple_envelope=frac / problem.floor_envelope,
        envelope_recovery_pct=env_rec, cell_recovery_pct=cell_rec,
        observed=obs, fantasized=fan, fantasize_message=fantasize_message,
        law_posterior=law_posterior,
        posterior_message=posterior_message,
        observed_bootstrap=observed_bootstrap, n_failed=int(failed.size),
    )
