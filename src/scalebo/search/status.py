"""How sure is the campaign's law, and should it stop? (``scalebo status``.)

From a grid, the campaign's runs (:mod:`scalebo.search.campaign_runs`) and a budget:

* the law fitted on observed + fantasized losses (the posterior-mean table of the whole
  grid, the law posterior's own point fit), with its natural parameters;
* per target compute (FLOPs): the point prediction (nats), the 80 % and 95 % intervals of
  the law posterior (:func:`~scalebo.search.law_posterior.law_posterior`: S joint samples of
  the unobserved losses, one fit each), and N*, D* from the Chinchilla law's posterior
  medians (parameters, tokens) when it can be fitted;
* spent / pending / remaining budget (in ``unit``: FLOPs, or GPU-hours for a grid with a
  ``cost`` column; and as fractions of the grid's total ``C_total`` in that unit);
* ``stop`` and its ``reason`` (:func:`~scalebo.search.stopping.stop_decision`); with
  ``estimand="noise_free"``, also the noise floor at each target (the half-width training
  every untried configuration could reach, :mod:`scalebo.search.noise_floor`), at which the
  rule stops too.

The intervals come from the posterior's quantiles; when the posterior cannot be computed
(too few runs) they are None and the reason says so — never a made-up interval.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scalebo.errors import SearchError
from scalebo.fitting.arguments import computes
from scalebo.fitting.identifiability import identification_problem
from scalebo.search.budget import check_budget_amount, remaining_budget
from scalebo.search.campaign_runs import CampaignRuns
from scalebo.search.cost_model import CostModel, accounting_note, cheapest_untried
from scalebo.search.failing_values import crashed_note
from scalebo.search.grid import Grid
from scalebo.search.law_notes import (
    envelope_share_note,
    fitted_draws,
    frontier_law_note,
    law_form_note,
)
from scalebo.search.law_posterior import check_estimand, covers, target_key
from scalebo.search.law_samples import CELL_COUPLING
from scalebo.search.runs_only import runs_only_note
from scalebo.search.stopping import (
    DEFAULT_MIN_SHRINK,
    DEFAULT_TOLERANCE,
    bound_note,
    check_min_shrink,
    half_width,
    stop_decision,
    width_upper,
)

__all__ = ["CampaignStatus", "TargetStatus", "campaign_status"]


@dataclass(frozen=True)
class TargetStatus:
    """The law at one target compute ``C`` (FLOPs): loss in nats, N* parameters, D* tokens
    (posterior medians of the Chinchilla law, None when it is not identified). Intervals are
    ``[low, high]`` (80 %: q10–q90, 95 %: q2.5–q97.5) or None."""

    C: float
    prediction: float | None
    interval_80: list[float] | None
    interval_95: list[float] | None
    half_width_pct: float | None
    N_opt: float | None
    D_opt: float | None
    #: Noise-free intervals only: the half-width (%) training every untried configuration
    #: could reach (``noise_floor.ratio × half_width_pct``), or None.
    floor_half_width_pct: float | None = None
    #: 80 % intervals of N* and D* (q10–q90), or None.
    N_opt_80: list[float] | None = None
    D_opt_80: list[float] | None = None
    #: The law posterior's median loss (q50, nats): the stop rule's ± is relative to it
    #: (``half_width_pct``), while ``prediction`` is the point fit of the posterior-mean table.
    median: float | None = None


@dataclass(frozen=True)
class CampaignStatus:
    """A campaign's status (see the module docstring); budget amounts in ``unit``."""

    law: dict[str, Any]
    targets: tuple[TargetStatus, ...]
    budget: float
    C_total: float
    spent: float
    pending: float
    remaining: float
    n_completed: int
    n_failed: int
    n_running: int
    stop: bool
    reason: str
    tolerance: float
    posterior: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The :class:`~scalebo.search.law_posterior.LawPosterior` of each law (samples; not
    #: serialized — ``posterior`` holds their summaries).
    law_posteriors: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    unit: str = "FLOPs"
    #: What the intervals are about: ``"reference"`` or ``"noise_free"``
    #: (:data:`~scalebo.search.law_posterior.ESTIMANDS`).
    estimand: str = "reference"
    #: Noise-free intervals only: ``{"ratio": {target: r or None}, "n_untried": k,
    #: "seconds": t, "message": …}`` (:class:`~scalebo.search.noise_floor.NoiseFloor`).
    noise_floor: dict[str, Any] | None = None
    min_shrink: float = DEFAULT_MIN_SHRINK
    #: Failed attempts of configurations that were run again (retried); not in
    #: ``n_failed``, which counts configurations, but their compute is in ``spent``.
    n_retried: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready status (what ``scalebo status --format json`` prints)."""
        out = {k: v for k, v in self.__dict__.items() if k != "law_posteriors"}
        out["targets"] = [asdict(t) for t in self.targets]
        out["units"] = {"C": "FLOPs", "loss": "nats", "N_opt": "parameters", "D_opt": "tokens",
                        "half_width_pct": "%", "budget": self.unit}  # as fit's law.units
        for key in ("spent", "pending", "remaining"):
            out[f"{key}_fraction"] = getattr(self, key) / self.C_total
        return out


def _interval(q: dict[str, float | None], lo: str, hi: str) -> list[float] | None:
    return None if q.get(lo) is None else [float(q[lo]), float(q[hi])]


def campaign_status(grid: Grid, runs: CampaignRuns, budget: float, *,
                    targets: float | tuple[float, ...] = (1e25,),
                    tolerance: float = DEFAULT_TOLERANCE, n_samples: int = 64,
                    clip_iqr: float = 5.0,
                    seed: int = 0, cost_model: CostModel | None = None,
                    kernel: str = "matern52", trend: bool = False,
                    shift_optimum: bool = True, estimand: str = "reference",
                    min_shrink: float = DEFAULT_MIN_SHRINK,
                    cell_coupling: float = CELL_COUPLING) -> CampaignStatus:
    """The status of a campaign (see the module docstring).

    Args:
        grid: candidate configurations. runs: its completed, failed and running runs.
        budget: total budget in the grid's budget unit (FLOPs, or GPU-hours for a priced
            grid, :meth:`~scalebo.search.grid.Grid.with_price`). targets: target computes,
            FLOPs (one number or several).
        tolerance: relative half-width of the 80 % interval that stops.
        n_samples: law-posterior samples S, over every configuration of the grid (since
            0.3.3; the search's window schedule no longer enters).
        clip_iqr: the GP's loss clipping (as the search's). seed: seed of GP and samples.
        cost_model: independent runs (default) or WSD checkpoints: spent, pending and the
            cost of the cheapest untried configuration under it.
        kernel, trend, shift_optimum: the campaign's GP
            (:func:`~scalebo.search.campaign.campaign_gp`).
        estimand: what the intervals are about (:data:`~scalebo.search.law_posterior.
            ESTIMANDS`): ``"reference"``, the law the whole grid's recorded runs would give
            (0 wide once the envelope's runs are trained), or ``"noise_free"``, the law of
            the noise-free losses, which keeps the noise of the trained runs; then the
            noise floor is computed too and the rule also stops at it.
        min_shrink: the rule stops at the noise floor when training every untried
            configuration would narrow the interval by less than this fraction.
        cell_coupling: share of their sampled deviation that a cell's untried
            configurations hold in common (:func:`~scalebo.search.law_samples.couple_cells`;
            0: the GP's joint draws as they are).

    Raises:
        ValueError: an unknown ``estimand``, ``min_shrink`` outside (0, 1), or a budget that
            is not positive or at most 1 FLOP (:func:`~scalebo.search.budget.
            check_budget_amount`).
    """
    from scalebo.search.campaign import campaign_posterior

    check_estimand(estimand)  # before the posterior, whose errors become notes
    check_min_shrink(min_shrink)
    targets = computes(targets, "targets")  # one compute, or several
    check_budget_amount(budget, grid.price_unit)
    model = cost_model or CostModel()
    spent, pending = runs.spent(grid, model), runs.pending(grid, model)
    remaining = remaining_budget(budget, spent, pending)
    trained = np.zeros(len(grid), dtype=bool)
    for arr in (runs.completed, runs.running):
        trained[arr] = True
    taken = trained.copy()
    taken[runs.failed] = True
    cheapest = cheapest_untried(grid, model.marginal(grid, trained, priced=True), taken)
    posts: dict[str, Any] = {}
    message = ""
    if runs.completed.size:
        try:  # one GP fit and one set of samples serve both laws
            posts = campaign_posterior(grid, runs, laws=("compute", "chinchilla"),
                                       targets=targets, n_samples=n_samples,
                                       clip_iqr=clip_iqr, seed=seed,
                                       kernel=kernel, trend=trend, estimand=estimand,
                                       shift_optimum=shift_optimum,
                                       cell_coupling=cell_coupling, keep_samples=True)
        except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
            message = f"law posterior unavailable: {exc}"
    else:
        message = "no completed run yet: no law"
    floor, ratios = _floor(grid, runs, estimand, posts, targets, n_samples, clip_iqr, seed,
                           kernel, trend, shift_optimum, cell_coupling)
    compute = posts.get("compute")
    summaries = {k: v.summary() for k, v in posts.items()}
    summary = summaries.get("compute")
    chin, chin_note = _allocation(posts.get("chinchilla"), summaries.get("chinchilla"),
                                  grid.configs[["N", "D"]].to_numpy()[runs.completed])
    rows, widths, uppers = [], {}, {}
    for j, C in enumerate(targets):
        key = target_key(C)
        q = summary["predicted_loss"][key] if summary else {}
        w = half_width(q) if q else None
        widths[C] = w
        uppers[C] = (width_upper(compute.predicted_loss[:, j], seed)
                     if w is not None and compute is not None else None)
        n_q = chin["N_opt"][key] if chin and chin["N_opt"] else {}
        d_q = chin["D_opt"][key] if chin and chin["D_opt"] else {}
        r = None if ratios is None else ratios.get(C)
        rows.append(TargetStatus(C=float(C), prediction=compute.point_loss(C) if compute else None,
                                 interval_80=_interval(q, "q10", "q90"),
                                 interval_95=_interval(q, "q02.5", "q97.5"),
                                 half_width_pct=None if w is None else 100 * w,
                                 N_opt=n_q.get("q50"), D_opt=d_q.get("q50"),
                                 N_opt_80=_interval(n_q, "q10", "q90"),
                                 D_opt_80=_interval(d_q, "q10", "q90"),
                                 median=q.get("q50") if q else None,
                                 floor_half_width_pct=None if w is None or r is None
                                 else 100 * r * w))
    settled = _law_status(compute, grid.cost[runs.completed])
    if summary is not None:  # JSON: what the text says about each law (see the notes)
        summary["identified_by_runs"] = settled.get("law_status") != "unidentified"
    if "chinchilla" in summaries:
        summaries["chinchilla"]["allocation_shown"] = chin is not None
    stop, reason = stop_decision(widths, remaining=remaining, cheapest_left=cheapest,
                                 tolerance=tolerance, unit=grid.price_unit,
                                 floor_ratios=ratios, min_shrink=min_shrink,
                                 n_running=int(runs.running.size), uppers=uppers,
                                 **settled)
    law: dict[str, Any] = {"name": "compute", "formula": "L(C) = E + A/C^alpha"}
    if compute is not None and compute.point is not None:
        law |= {"params": compute.point.params, "status": settled["law_status"],
                "at_bound": list(settled.get("law_at_bound", ())),
                "fitted_on": "observed + fantasized (posterior mean of the whole grid)"
                if estimand == "reference" else
                "latent posterior mean of every configuration of the grid, trained ones "
                "included"}
        if settled["law_status"] == "unidentified":
            law["message"] = settled["law_message"]
    else:
        law |= {"params": None, "status": None, "message": message or compute.message}
    if compute is not None and compute.predicted_loss.size == 0:
        message = message or ("no interval of the compute law: "
                              f"{compute.message or 'every posterior sample failed'}")
    law_notes = [accounting_note(model, runs.wsd_numbered, runs.source),
                 crashed_note(runs.crashed, runs.rows)]
    law_notes += [bound_note(v, k, posts[k].at_bound()) for k, v in summaries.items()
                  if k != "chinchilla" or chin is not None]  # not of an interval not shown
    form_note, outside = law_form_note(summary, chin, targets), _outside_note(rows)
    drawn = fitted_draws(compute)
    law_notes += [frontier_law_note(grid, compute, targets), form_note,
                  outside or _outside_note(rows, 80),
                  drawn and envelope_share_note(grid.cost[drawn.rows], drawn.mean,
                                                np.isin(drawn.rows, runs.completed)),
                  runs_only_note(*grid.configs[["N", "D"]].to_numpy()[runs.completed].T,
                                 runs.losses, chin, targets)]
    if stop and form_note:
        reason += ("; the Chinchilla law's loss lies outside the compute law's 80 % interval "
                   "(see the notes)")
    if stop and outside:
        reason += "; the point fit lies outside the law's own 95 % interval (see the notes)"
    notes = (*runs.notes, *([message] if message else []), *([chin_note] if chin_note else []),
             *(n for n in law_notes if n),
             *([f"noise floor unavailable: {floor['message']}"]
               if floor and floor["message"] else []))
    return CampaignStatus(law=law, targets=tuple(rows), budget=float(budget),
                          C_total=grid.budget_total, spent=spent, pending=pending,
                          remaining=remaining, n_completed=int(runs.completed.size),
                          n_failed=int(runs.failed.size), n_running=int(runs.running.size),
                          stop=stop, reason=reason, tolerance=tolerance,
                          posterior=summaries, notes=notes,
                          law_posteriors=posts, unit=grid.price_unit, estimand=estimand,
                          noise_floor=floor, min_shrink=min_shrink,
                          n_retried=int(runs.n_superseded))


def _outside_note(rows: list[TargetStatus], level: int = 95) -> str:
    """A note when the point fit's loss at a target lies outside the law posterior's own
    ``level`` % interval there (95 or 80), "" otherwise. Outside the 95 %, the fit on the
    posterior-mean table and the sample fits disagree (an outlying run, or a law the runs
    do not pin down). Outside the 80 % only, the median is the better point estimate: the
    fit's envelope takes the minimum of the GP's means where it is unsure, above the mean
    of the minima that the sample fits see (0.4.18's replays, 8 grids × seeds 0–19 × 1 / 5
    / 10 %, :func:`~scalebo.bench.metrics.point_estimate`: the fill-in's fit fell outside
    the 80 % interval in 17 of 480; there the median was closer to the full grid's law in
    12, farther in 2)."""
    if level not in (80, 95):
        raise ValueError(f"level must be 80 or 95, got {level}")

    def interval(r: TargetStatus) -> list[float] | None:
        return r.interval_95 if level == 95 else r.interval_80

    out = [r for r in rows if r.prediction is not None and interval(r) is not None
           and (level == 95 or r.median is not None)
           and not covers(*interval(r), r.prediction)]  # beyond the fitter's precision
    if not out:
        return ""
    r, (lo, hi) = out[0], interval(out[0])
    head = (f"the point fit's loss at {r.C:.3g} FLOPs ({r.prediction:.4g} nats) lies outside "
            f"the law posterior's {'own ' if level == 95 else ''}{level} % interval "
            f"[{lo:.4g}, {hi:.4g}]" + (f" (and at {len(out) - 1} more target(s))"
                                       if len(out) > 1 else ""))
    if level == 95:
        return head + (": the fit and the posterior's sample fits disagree (an outlying or "
                       "diverged run? a law the runs do not pin down yet): trust neither until "
                       "more runs agree")
    return head + (f": the posterior median ({r.median:.4g}) is the better point estimate "
                   "there; the fit is of the GP's mean at untried configurations, which leaves "
                   "out how unsure the GP is about them")


def _allocation(chin: Any, summary: dict | None, trained: np.ndarray) -> tuple[dict | None, str]:
    """The Chinchilla posterior's ``summary``, whose medians give N* and D*, when its point
    fit converged and the completed runs' ``(N, D)`` (``trained``, one row per run) can
    identify the law by themselves; else None and a note saying why N* and D* are not
    shown (a fit at a bound places them at the bound, not where the runs do; a fit that
    the posterior-mean table's GP-filled cells alone make converge places them where the
    GP's prior does)."""
    if chin is None:
        return None, ""
    if chin.point is None:
        return None, f"N*, D* not shown: no Chinchilla law L(N, D) ({chin.message})"
    status = str(chin.point.status)
    if problem := identification_problem(chin.point.law, trained):  # the root cause first
        table = ("converges only on the cells the GP fills in" if status == "converged"
                 else f"ends with status '{status}'")
        return None, ("N*, D* not shown: the completed runs cannot identify the Chinchilla "
                      f"law L(N, D) ({problem}); its fit on the posterior-mean table {table}")
    if status != "converged":
        return None, ("N*, D* not shown: the Chinchilla law L(N, D) is not identified by "
                      f"these runs ({status}: {chin.point.message})")
    return summary, ""


def _law_status(compute: Any, trained_C: np.ndarray) -> dict[str, Any]:
    """The compute law's point-fit status for the stop rule (none without a fit):
    ``unidentified`` when the completed runs' compute (``trained_C``, FLOPs, one per run)
    cannot identify the law by themselves, whatever the posterior-mean table's fit says."""
    if compute is None or compute.point is None:
        return {}
    problem = identification_problem(compute.point.law, trained_C[:, None])
    if problem:
        return {"law_status": "unidentified", "law_message": f"the completed runs: {problem}"}
    return {"law_status": str(compute.point.status), "law_message": compute.point.message,
            "law_at_bound": compute.point.at_bound}


def _floor(grid: Grid, runs: CampaignRuns, estimand: str, posts: dict[str, Any],
           targets: tuple[float, ...], n_samples: int, clip_iqr: float, seed: int,
           kernel: str, trend: bool, shift_optimum: bool, cell_coupling: float
           ) -> tuple[dict[str, Any] | None, dict[float, float | None] | None]:
    """The noise floor (JSON-ready) and its ratio per target, or ``(None, None)`` when the
    interval is not noise-free, or there is no compute-law interval or converged point fit
    to scale (the stop rule does not stop on those anyway). Failed runs are not conditioned
    on (they are not proposed again); runs in flight are."""
    from scalebo.search.noise_floor import floor_applies, noise_floor

    compute = posts.get("compute")
    if not floor_applies(compute, estimand):
        return None, None
    from scalebo.search.campaign import campaign_gp

    try:
        nf = noise_floor(grid, runs.completed, runs.losses,
                         campaign_gp(grid, seed, clip_iqr=clip_iqr, kernel=kernel, trend=trend,
                                     shift_optimum=shift_optimum),
                         targets=targets, n_samples=n_samples, rng=seed,
                         exclude=runs.failed, prepared=compute,
                         cell_coupling=cell_coupling)
    except (SearchError, ValueError, np.linalg.LinAlgError) as exc:
        return _floor_json(dict.fromkeys(targets), None, None, str(exc)), None
    ratios = dict(zip(targets, nf.ratio, strict=True))
    return _floor_json(ratios, nf.n_untried, nf.seconds, nf.message), ratios


def _floor_json(ratios: dict[float, float | None], n_untried: int | None,
                seconds: float | None, message: str) -> dict[str, Any]:
    """The status's ``noise_floor`` entry: the ratio per target key (None where unknown)."""
    return {"ratio": {target_key(C): r for C, r in ratios.items()}, "n_untried": n_untried,
            "seconds": seconds, "message": message}
