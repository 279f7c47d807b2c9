"""A replay's search strategy: :class:`MethodConfig`, its validated settings and defaults."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import asdict, dataclass, fields, replace

from scalebo.data.columns import parse_number
from scalebo.search.acquisition import INCUMBENTS
from scalebo.search.law_posterior import ESTIMANDS
from scalebo.search.law_samples import CELL_COUPLING
from scalebo.search.models.composite_kernels import KERNEL_NAMES
from scalebo.search.models.trend import TREND_FORMS
from scalebo.search.polish import POLISH

__all__ = ["DEFAULT_METHOD", "MethodConfig"]

_CHOICES = {
    "strategy": ("window", "full"),
    "schedule": ("sweep", "spent", "coverage"),
    "surrogate": ("gp", "random", "trees"),
    "acquisition": ("ei", "pi", "lcb", "target"),
    "incumbent": INCUMBENTS,
    "fantasize_scope": ("window", "observed", "grid"),
    "estimator": ("mean", "cell_best"),
    "law": ("compute", "chinchilla"),
    "target_law": ("compute", "chinchilla"),
    "target_estimator": ("stein", "ensemble"),
    "trend_form": TREND_FORMS,
    "cost_model": ("independent", "wsd"),
    "posterior_estimand": ESTIMANDS,
    "posterior_scope": ("grid", "fantasize"),
    "kernel": KERNEL_NAMES,
}


#: A float as YAML 1.1 (PyYAML) reads one: a dot, and an exponent only with its sign.
_YAML_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?")


def _number_hint(value: object, *, whole: bool) -> str:
    """How to write a number a sweep config gave as text (``""`` for other values): an
    integer field's whole number plainly; text YAML reads as a float, without quotes; an
    exponent YAML 1.1 reads as text (``1e25``), with a dot and a signed exponent."""
    number = parse_number(value) if isinstance(value, str) else None
    if number is None:
        return ""
    text = value.strip()
    if not math.isfinite(number):
        sign = "-" if text.startswith("-") else ""
        return f" (YAML spells it {sign}.{text.lstrip('+-').lower()[:3]}, without quotes)"
    if whole:
        return (f" (write {int(number)}: a whole number, without quotes or an exponent)"
                if float(number).is_integer() else " (it must be a whole number)")
    if _YAML_FLOAT.fullmatch(text) or not re.search(r"[eE]", text):
        return f" (a number in quotes is text: write {text} without them)"
    mantissa, exponent = f"{number:e}".split("e")
    mantissa = mantissa.rstrip("0") + ("0" if mantissa.rstrip("0").endswith(".") else "")
    return f" (YAML reads {text} as text: write {mantissa}e{exponent})"


@dataclass(frozen=True)
class MethodConfig:
    """A search strategy (defaults chosen by ``benchmarks/replay_baseline.py`` and, since 0.3,
    the same script's incumbent and cost-power rows, see below).

    Measured with ``benchmarks/replay_baseline.py`` before 0.3 (5 seeds, |rel. diff| of the
    compute law at 1e25 FLOPs, fantasized, budgets 1 / 5 / 10 %, hyperparameters refitted at
    every ask):
    window ``spent`` + EI + frontier incumbent + posterior-mean fill-in gave OELLM-English
    2.9 / 0.6 / 0.4 % and StepLaw 19.8 / 4.5 / 0.2 %; ``sweep`` was better on OELLM at 1–5 %
    (1.7 / 0.4 %, the same runs for every seed) but worse at 10 % and on StepLaw
    (22.0 / 9.6 / 3.2 %), at 25× the time per replay; Full was better on StepLaw at 1–5 %
    (8.9 / 2.9 %) and worse on OELLM (5.8 / 1.0 / 0.7 %); the global incumbent and random
    order were worse almost everywhere; ``cell_best`` was slightly better than ``mean``
    everywhere (OELLM 2.4 / 0.4 / 0.3 %, StepLaw 17.6 / 4.4 / 0.2 %), within one SD, so the
    published estimator stays the default. Refitting the GP's hyperparameters at every ask
    instead of every max(10, n/4) asks (5 seeds, 1 / 5 / 10 / 25 %): OELLM
    17.1 / 2.9 / 0.74 / 0.27 → 2.9 / 0.64 / 0.35 / 0.00 %, StepLaw 6.6 / 12.3 / 1.8 / 1.5 →
    19.8 / 4.5 / 0.24 / 0.00 %, for ~3× the search time; hence ``refit_every=1``, and since
    0.4.3 a growth rule of 5 % only from 128 runs on (``refit_growth``).

    Attributes:
        strategy: ``"window"`` (candidates capped by a growing compute window) or ``"full"``.
        schedule: Window schedule: ``"sweep"``, ``"spent"`` or ``"coverage"``.
        surrogate: ``"gp"``, ``"random"`` (a uniformly random order of the admissible
            configurations, whatever ``acquisition`` and ``incumbent``; fantasized with a
            GP) or ``"trees"``.
        kernel: GP kernel name (:func:`~scalebo.search.models.composite_kernels.make_kernel`).
        acquisition: ``"ei"``, ``"pi"``, ``"lcb"`` or ``"target"`` (expected reduction of
            the law posterior's variance at ``target_compute`` per cost^``cost_power``,
            :mod:`scalebo.search.target`). Measured (10 seeds, 1 / 5 / 10 %, γ = 0.5):
            OELLM 2.16 / 0.67 / 0.08 % vs EI 5.17 / 0.94 / 0.31 %, StepLaw
            18.6 / 2.49 / 0.31 % vs 13.4 / 6.91 / 0.78 %, at 5–30× the time per replay, so
            EI stays the default (``cost_power`` 0.5: γ = 1 is better on OELLM,
            1.95 / 0.34 / 0.09 %, but worse on StepLaw, 25.1 / 5.17 / 0.43 %).
        incumbent: ``"envelope"`` (the lower of the candidate cell's best loss and the
            envelope reachable at its compute: only runs that could move the Pareto envelope
            improve on it), ``"frontier"`` (the cell's best loss; the default until 0.3) or
            ``"global"``.
        ei_cost_power: ``γ`` of EI and PI per unit cost, ``log EI − γ·log(cost/C_total)``
            (0: cost-blind). Measured with ``incumbent`` (20 seeds on StepLaw and
            OELLM-English, 10 on the synthetic grid; compute law at 1e25 FLOPs, |error| %,
            1 / 5 / 10 % of C_total): frontier, γ = 0 → envelope, γ = 1 (the defaults since
            0.3): StepLaw 15.9 / 5.35 / 1.67 → 14.5 / 1.99 / 0.00, OELLM 4.47 / 1.10 / 0.30 →
            6.10 / 0.66 / 0.26 (1 % worse in 11 of 20 seeds, not significant), synthetic
            5.78 / 0.41 / 0.030 → 3.73 / 0.23 / 0.029; envelope with γ = 0 (10 seeds):
            StepLaw 12.4 / 4.88 / 0.39, OELLM 5.58 / 0.99 / 0.19; γ = 0.5: StepLaw
            17.9 / 2.65 / 1.78, OELLM 3.93 / 1.01 / 0.25 (docs/reproduction.md).
        kappa: LCB exploration weight.
        fantasize: Also compute the metrics on observed + predicted losses.
        fantasize_scope: ``"window"``: the search's final window (DESIGN.md), i.e.
            configurations costing at most :meth:`~scalebo.search.loop.SearchLoop.window_cap`
            (for ``spent``, the compute spent; for Full, no cap: the whole grid);
            ``"observed"``: up to the costliest observed cell; ``"grid"``: every acquirable
            configuration.
        estimator: Fantasized cell losses: ``"mean"`` (posterior means) or ``"cell_best"``
            (expected cell minimum over joint posterior samples).
        law: Headline law of reports: ``"compute"`` or ``"chinchilla"`` (both are measured).
        n_initial: Size of the shared initial design (cheapest compute levels).
        q: Configurations asked per batch (kriging believer within a batch).
        refit_every: Surrogate hyperparameters refitted at least this many asks apart.
        refit_growth, refit_growth_from: From ``refit_growth_from`` runs on, also at least
            ``refit_growth × n_obs`` asks apart (the runs grew by that fraction since the
            last refit), so refits (each ``O(n_obs³)`` per likelihood evaluation) get rarer
            as observations accumulate; in between the GP is conditioned on the new runs
            with fixed hyperparameters (one Cholesky factorization). Below
            ``refit_growth_from`` every ask refits (in full below ``gp_restart_below``).
            Measured (0.4.3, main comparison, 10 seeds × Full and Window, paired with
            refits at every ask): 5 % from 128 runs (every 7 asks at 128 runs, 20 at 400)
            halves the search's CPU time (672 → 349 s) with every compute-law error and
            every pick up to 5 % of C_total unchanged; the changed picks at 10–25 % move
            the Chinchilla fits and intervals there both ways (StepLaw's observed-run
            Chinchilla error at 25 % worse in 16 of 20 replays, p = 0.06; posterior
            coverage flips 5 gained / 6 lost at 80 %). 2 % (every 3 to 8 asks) saved 37 %
            with the same mixed picture (80 % coverage 6 lost, 0 gained). A
            growth of ``n/4`` at every size (before 0.3) was much worse at 1–10 %.
        gp_restart_every, gp_restart_below: The search GP's hyperparameter refit is a full
            one (its previous optimum and 2 screened random restarts, the best by marginal
            likelihood) at every ``gp_restart_every``-th fit and at every fit on fewer than
            ``gp_restart_below`` runs; the others start from the previous optimum alone
            (0: never). Below 128 runs every fit is full, as in a campaign (``scalebo
            suggest`` fits a fresh GP at every call): a warm start kept a local optimum for
            up to 9 asks. Measured (20 seeds, compute law at 1e25 FLOPs, |error| %, 1 / 5 / 10 %
            of C_total, docs/reproduction.md): every 10th fit (until 0.3.5) → every fit below
            128 runs (0.3.6): OELLM-English 6.10 / 0.66 / 0.26 → 3.29 / 0.52 / 0.32 (1 %:
            better in 14 of 20 seeds, Wilcoxon p = 0.04), StepLaw 14.5 / 1.99 / 0.00 →
            14.2 / 1.94 / 0.12 (no budget significantly different). A full fit
            at every ask at every size (also measured) gave the same 1 and 5 % (those
            replays stay under 128 runs) but made the main comparison sweep, whose replays
            reach 25 %, ~3× slower.
        clip_iqr: The GP sees losses clipped at ``median + clip_iqr × IQR`` of the losses
            it is fitted on (see :class:`ClippedGP`); None: no clipping.
        trend: Give the GP a mean in encoded ``log N`` and ``log D`` (see ``trend_form``)
            (:class:`~scalebo.search.models.trend.TrendSurrogate`) so that it does not revert to
            the average loss on the grid's unexplored, expensive cells.
        trend_form: ``"linear"``, or ``"power"``: a saturating Chinchilla-form mean
            ``c + a·N^(−α) + b·D^(−β)`` (rates on a grid, ``a, b ≥ 0``).
        posterior_samples: Samples S of the law posterior recorded at every budget
            (:func:`~scalebo.search.law_posterior.law_posterior`, in ``posterior_scope``);
            0: none.
        posterior_noise: Sample recorded losses (latent + observation noise) rather than
            the latent loss.
        posterior_estimand: What the law posterior is about
            (:data:`~scalebo.search.law_posterior.ESTIMANDS`): ``"reference"``, the law of
            the whole grid's recorded runs (what a replay is scored against), or
            ``"noise_free"``, the noise-free law (trained runs redrawn from the latent
            posterior; ``posterior_noise`` then does not apply).
        cost_model, cooldown: How a set of configurations costs
            (:mod:`scalebo.search.cost_model`): ``"independent"`` runs, or ``"wsd"`` with
            a cooldown fraction (configurations differing only in D share one run). Budget
            fractions stay fractions of the independent ``C_total``.
        bootstrap_samples: Resamples of a bootstrap over the observed runs' frontier
            (what ``scalebo fit --bootstrap`` gives), recorded beside the law posterior for
            comparison; 0: none.
        anchor: Largest share of the budget the anchor run may cost (0: none): one
            configuration of the costliest cell costing at most ``anchor × budget`` is held
            back and trained once nothing else fits, unless the runs then dominate the cell
            (dropped since 0.4.1; :mod:`scalebo.search.anchor`; the
            default 0.7 since 0.3.8, measured in docs/reproduction.md; the label then says
            ``no-anchor`` or ``anchor=…``). The held-back cost depends on the budget: a
            replay follows one long run and forks each smaller recorded budget where its
            choices first differ (:mod:`scalebo.bench.budget_fork`; with ``q > 1`` each
            budget is a separate run).
        polish: Share of the budget at whose end the search tries untried neighbours of
            the best runs in the observed envelope's costliest cells first
            (:mod:`scalebo.search.polish`; default :data:`~scalebo.search.polish.POLISH`
            since 0.4.0; 0: off, the label then says ``no-polish``). Like the anchor it
            depends on the budget, and is recorded the same way.
        shift_optimum: The GP sees hyperparameters relative to an optimum that moves with
            N and D (:class:`~scalebo.search.optimum_shift.OptimumShiftSurrogate`; the
            default since 0.3.7, measured in docs/reproduction.md; False: absolute
            coordinates, the label then says ``no-shift``).
        posterior_scope: Which unobserved configurations the law posterior samples:
            ``"grid"`` (default since 0.3.3), every acquirable one, as the reference fit
            (the whole grid's recorded runs) uses them; ``"fantasize"``, only those inside
            the fill-in's scope (``fantasize_scope``; the default until 0.3.2). The two are
            the same once the window spans the grid, as it does at every recorded budget on
            StepLaw, OELLM-English and the built-in synthetic grid (10 seeds × 4 budgets,
            identical coverage). They differ where single configurations are a large share
            of the grid's compute: on a synthetic grid of 3 N × 4 D × 4 learning rates (the
            envelope 17 % of C_total), at 10 % the window scope left the costliest
            envelope configuration out and its 80 % / 95 % intervals covered the reference
            in 0 / 0 of 10 seeds, the grid scope in 9 / 10 (docs/reproduction.md).
        posterior_discrepancy: Scale of the law posterior's hyperparameter-shift
            discrepancy (``law_posterior(..., discrepancy=)``: ``τ`` in one-step loss gaps,
            :mod:`scalebo.search.posterior_discrepancy`; 1.5 measured); 0: none. Only the
            intervals move.
        posterior_coupling: Share ρ of their sampled deviation that an (N, D) cell's
            untried configurations hold in common in the law posterior
            (:func:`~scalebo.search.law_samples.couple_cells`; default
            :data:`~scalebo.search.law_samples.CELL_COUPLING` since 0.4.4, measured in
            docs/reproduction.md; 0: the GP's joint draws as they are, as before 0.4.4, the
            label then says ``coupling=0``). Only the intervals move.
        extrapolation_guard: The fill-in and the law posterior leave out an unobserved
            configuration whose posterior std exceeds this many times that of its cell's
            most certain one (:func:`~scalebo.search.fantasize.extrapolated`; default 5
            since 0.3.9; 0: off, the label then says ``no-guard``).
    """

    strategy: str = "window"
    schedule: str = "spent"
    surrogate: str = "gp"
    kernel: str = "matern52"
    acquisition: str = "ei"
    incumbent: str = "envelope"
    kappa: float = 2.0
    fantasize: bool = True
    fantasize_scope: str = "window"
    estimator: str = "mean"
    law: str = "compute"
    n_initial: int = 5
    q: int = 1
    refit_every: int = 1
    refit_growth: float = 0.05
    refit_growth_from: int = 128
    gp_restart_every: int = 10
    gp_restart_below: int = 128
    clip_iqr: float | None = 5.0
    trend: bool = False
    trend_form: str = "linear"
    posterior_samples: int = 64
    posterior_noise: bool = True
    posterior_estimand: str = "reference"
    posterior_scope: str = "grid"
    target_compute: float = 1e25
    target_law: str = "compute"
    cost_power: float = 0.5
    ei_cost_power: float = 1.0
    target_samples: int = 32
    target_every: int = 1
    target_estimator: str = "stein"
    shift_optimum: bool = True
    anchor: float = 0.7
    polish: float = POLISH
    posterior_discrepancy: float = 0.0
    posterior_coupling: float = CELL_COUPLING
    extrapolation_guard: float = 5.0
    bootstrap_samples: int = 0
    cost_model: str = "independent"
    cooldown: float = 0.1

    def __post_init__(self) -> None:
        for f in fields(self):  # a sweep config's 'lots' failed inside every worker
            value = getattr(self, f.name)
            flag = type(value).__name__ in ("bool", "bool_")  # Python's or numpy's
            kind = {"int": numbers.Integral, "float": numbers.Real}.get(str(f.type))
            if kind is not None and (flag or not isinstance(value, kind)):
                hint = _number_hint(value, whole=kind is numbers.Integral)
                raise ValueError(f"MethodConfig.{f.name} must be "
                                 f"{'an integer' if kind is numbers.Integral else 'a number'}, "
                                 f"got {value!r}{hint}")
            if f.type == "bool" and not flag:
                raise ValueError(f"MethodConfig.{f.name} must be true or false, got {value!r}")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"MethodConfig.{name} must be one of {list(allowed)}, got "
                                 f"{getattr(self, name)!r}")
        if self.gp_restart_every < 0 or self.gp_restart_below < 0:
            raise ValueError("MethodConfig.gp_restart_every and gp_restart_below must be >= 0 "
                             f"(0: never), got {self.gp_restart_every} and "
                             f"{self.gp_restart_below}")
        floors = {"q": 1, "refit_every": 1, "n_initial": 0, "refit_growth": 0,
                  "refit_growth_from": 0, "posterior_samples": 0, "bootstrap_samples": 0,
                  "posterior_discrepancy": 0}
        if bad := [k for k, low in floors.items() if not getattr(self, k) >= low]:
            raise ValueError("MethodConfig needs " + ", ".join(
                f"{k} >= {floors[k]} (got {getattr(self, k)!r})" for k in bad))
        if not (self.extrapolation_guard == 0 or 1 <= self.extrapolation_guard):
            raise ValueError("MethodConfig.extrapolation_guard must be 0 (off) or >= 1, got "
                             f"{self.extrapolation_guard}")
        if not 0 <= self.posterior_coupling <= 1:
            raise ValueError("MethodConfig.posterior_coupling must be a share in [0, 1], got "
                             f"{self.posterior_coupling}")
        for name in ("anchor", "polish"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"MethodConfig.{name} must be a share of the budget in "
                                 f"[0, 1), got {getattr(self, name)}")
        if not 0 <= self.cooldown <= 1:
            raise ValueError(f"MethodConfig.cooldown must be a fraction in [0, 1], got "
                             f"{self.cooldown}")
        if not (self.target_compute > 0 and self.target_compute < float("inf")
                and 0 <= self.cost_power < float("inf") and 0 <= self.ei_cost_power < float("inf")
                and self.target_samples >= 8
                and self.target_every >= 1):
            raise ValueError("MethodConfig needs a finite target_compute > 0 FLOPs, a finite "
                             "cost_power and ei_cost_power >= 0, target_samples >= 8 and "
                             f"target_every >= 1; got {self.target_compute}, {self.cost_power}, "
                             f"{self.ei_cost_power}, "
                             f"{self.target_samples}, {self.target_every}")

    def refit_interval(self, n_obs: int) -> int:
        """Asks between the search surrogate's hyperparameter refits at ``n_obs`` runs:
        ``refit_every``, and from ``refit_growth_from`` runs at least
        ``ceil(refit_growth × n_obs)``."""
        if n_obs < self.refit_growth_from:
            return self.refit_every
        return max(self.refit_every, math.ceil(self.refit_growth * n_obs))

    @property
    def schedule_name(self) -> str:
        """The window schedule actually used (``"full"`` for the full strategy)."""
        return "full" if self.strategy == "full" else self.schedule

    @property
    def budget_independent(self) -> bool:
        """Whether choices never depend on the total budget (see the module docstring): not
        with the ``sweep`` schedule, nor with an anchor run or polish and batches
        (``q > 1``); with ``q = 1`` they are recorded on one run by forking
        (``budget_fork``)."""
        return self.schedule_name != "sweep" and not (self.forks and self.q > 1)

    @property
    def forks(self) -> bool:
        """Choices depend on the budget through an anchor run or polish, so a replay forks
        each smaller recorded budget (:mod:`scalebo.bench.budget_fork`)."""
        return bool(self.anchor or (self.polish and self.surrogate != "random"))

    def label(self) -> str:
        """Short human-readable name, e.g. ``"window-spent gp ei/frontier fant=mean"``; a law
        posterior that is not the default reference one is named (``posterior=noise_free``,
        ``discrepancy=1.5``)."""
        fant = f"fant={self.estimator}" if self.fantasize else "no-fant"
        acq = self.acquisition + ("" if self.acquisition == "lcb" else f"/{self.incumbent}")
        if self.acquisition == "target":
            acq = f"target/{self.target_law}@{self.target_compute:.0e},γ={self.cost_power:g}"
        cost = "" if self.cost_model == "independent" else f" wsd(f={self.cooldown:g})"
        if self.posterior_estimand != "reference":
            cost += f" posterior={self.posterior_estimand}"
        if self.posterior_discrepancy:
            cost += f" discrepancy={self.posterior_discrepancy:g}"
        if self.posterior_coupling != CELL_COUPLING:
            cost += f" coupling={self.posterior_coupling:g}"
        if self.posterior_scope != "grid":
            cost += f" posterior_scope={self.posterior_scope}"
        if self.trend and self.surrogate == "gp":
            cost += f" trend={self.trend_form}"
        if not self.shift_optimum and self.surrogate in ("gp", "random"):  # the GPs
            cost += " no-shift"
        if self.anchor != 0.7:
            cost += f" anchor={self.anchor:g}" if self.anchor else " no-anchor"
        if self.polish != POLISH and self.surrogate != "random":
            cost += f" polish={self.polish:g}" if self.polish else " no-polish"
        if self.extrapolation_guard != 5.0:
            cost += (f" guard={self.extrapolation_guard:g}" if self.extrapolation_guard
                     else " no-guard")
        return f"{f'window-{self.schedule_name}' if self.strategy == 'window' else 'full'} " \
               f"{self.surrogate} {acq} {fant}{cost}"

    def with_(self, **changes: object) -> MethodConfig:
        """A copy with some fields changed (validated)."""
        return replace(self, **changes)

    @property
    def max_std_ratio(self) -> float | None:
        """``extrapolation_guard`` as the fill-in's ``max_std_ratio`` (None: off)."""
        return self.extrapolation_guard or None

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_METHOD = MethodConfig()
