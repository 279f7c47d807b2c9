"""The search loop: ask which configurations to train next, tell their losses.

One step of :meth:`SearchLoop.ask`:

1. while the seeded initial design (``n_initial`` random configurations from the cheapest
   compute level(s), identical for every strategy given the seed) is not exhausted, return
   its next configuration; it ignores the window cap but not the budget;
2. otherwise standardize the observed losses, fit the surrogate (warm start after the first
   fit when ``fit`` accepts ``warm_start``, :mod:`scalebo.search.models.protocol`), treat
   pending configurations as observed at the posterior mean (kriging believer), and return
   the admissible configuration (see :func:`~scalebo.search.window.admissible_mask`) that
   maximizes the acquisition score. If the posterior (mean or std, at a candidate or a
   pending configuration) or a score is not finite, the search does not stop: the
   admissible configuration first in the seeded permutation below is returned instead, and
   the trace entry's ``fallback`` says why (the surrogate is not used again in that ask).
   With ``acquisition="random"`` the admissible configuration first in a seeded permutation
   of the grid (drawn once, after the initial design) is returned: a uniformly random order
   whatever the incumbent and however many candidates there are (a run forked under a
   smaller budget makes the same picks as a separate run).

With ``anchor = f > 0`` one run of the costliest cell costing at most ``f × budget`` is held
back until nothing else fits, then its lowest posterior mean is returned (dropped while
observed runs dominate the cell; :mod:`scalebo.search.anchor`). ``polish``: the budget's end
tries neighbours of the envelope's best runs, by compute² / runs (:mod:`scalebo.search.polish`).
Each :meth:`~SearchLoop.suggest` names the rule that placed it
(:attr:`~scalebo.search.trace.Suggestion.rule`) and why; each pick made with the surrogate
records in the trace how its last hyperparameter fit went.

With ``acquisition="target"`` the score is the expected reduction of the law's variance at
``target_compute`` per unit cost, from an ensemble over the current window (Full: the grid),
rebuilt every ``target_every`` asks (:mod:`scalebo.search.target`); EI stands in, with the
reason in the trace, when too few law fits succeed.

For ``q > 1`` each pick is treated as observed at its predicted mean (believed values count
toward the incumbents) before the next. Pending runs count as committed: a configuration is
admissible only if its cost fits ``budget − spent − pending``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from scalebo.errors import SearchError
from scalebo.search import target as tgt
from scalebo.search.acquisition import (
    INCUMBENTS,
    Acquisition,
    incumbent_score,
    parse_acquisition,
    score_words,
)
from scalebo.search.admission import Admission
from scalebo.search.budget import check_fraction
from scalebo.search.cost_model import CostModel
from scalebo.search.grid import Grid
from scalebo.search.models.protocol import accepts_warm_start, fit_surrogate, hyperparameter_fit
from scalebo.search.models.scaling import standardization
from scalebo.search.polish import nats_predictor, polish_pick
from scalebo.search.trace import Suggestion, TraceEntry
from scalebo.search.window import WindowSchedule, initial_design, make_schedule


def _not_finite(what: str, *arrays: np.ndarray) -> str:
    """Why ``arrays`` cannot be used (``"… not finite at 3 of 40 candidates"``), or ``""``."""
    bad = ~np.all([np.isfinite(a) for a in arrays], axis=0)
    return f"{what} not finite at {int(bad.sum())} of {bad.size} candidates" if bad.any() else ""


class SearchLoop(Admission):
    """Budgeted Bayesian optimization over a finite grid, ask/tell style.

    The tell side (:meth:`tell`, :meth:`mark_pending`, :attr:`spent`, :attr:`committed`,
    :attr:`observed_indices`, ...) is :class:`~scalebo.search.ledger.ObservationLedger`'s; what
    may be started now (:attr:`remaining`, :attr:`done`, :meth:`window_cap`) is
    :class:`~scalebo.search.admission.Admission`'s.

    Args:
        grid: Candidate configurations.
        budget_fraction: Budget as a fraction of :attr:`Grid.budget_total` (e.g. 0.05):
            of ``C_total`` in FLOPs, or of the grid's total price (:meth:`Grid.with_price`,
            e.g. GPU-hours), which then prices budgets and admissibility while windows stay
            in FLOPs.
        surrogate: Object with ``fit(X, y) -> self`` and ``predict(X) -> (mean, std)`` on
            :meth:`Grid.encode` inputs ``(n, d)``; optional ``condition_on(X, y)``. Unused
            (may be None) with ``acquisition="random"``.
        acquisition: ``"ei"`` (default), ``"pi"``, ``"lcb"``, ``"target"`` (expected
            reduction of the law's variance at ``target_compute`` per cost^``cost_power``)
            or ``"random"`` (a uniformly random order of admissible configurations).
        incumbent: ``"envelope"`` (default), ``"frontier"`` or ``"global"``
            (:func:`~scalebo.search.acquisition.incumbent_score`).
        ei_cost_power: ``γ`` of EI and PI per unit (marginal, priced) cost,
            ``log EI − γ·log(cost/budget_total)``: 1 (default) per unit of budget, 0 blind.
        schedule: Window schedule name or object (default ``"sweep"``).
        n_initial: Size of the initial design.
        kappa: LCB exploration weight.
        refit_every: Refit the surrogate (hyperparameters included) every this many asks;
            in between, a surrogate with ``condition_on`` is conditioned on the new
            observations with the last hyperparameters and y scaling (default 1: always).
        target_compute, target_law, cost_power, target_samples, target_every,
            target_estimator: Settings of ``"target"`` (:class:`~scalebo.search.target.
            TargetSettings`: FLOPs, ``"compute"`` or ``"chinchilla"``, γ of ``log VR −
            γ·log(cost/C_total)``, ensemble size S, asks between rebuilds, estimator).
        cost_model: :class:`~scalebo.search.cost_model.CostModel` (default independent
            runs; ``wsd``: configurations differing only in D share one run, each extra
            checkpoint pays its cooldown). Budgets and admissibility use the marginal cost.
        anchor: Largest share of the budget the anchor run may cost, in [0, 1) (0: none,
            the default here; replays and campaigns use 0.7).
        polish: Share of the budget, in [0, 1), at whose end the search tries neighbours
            of the envelope's best runs first, by compute² / runs (0: never, the default
            here; ignored by ``acquisition="random"``; :mod:`scalebo.search.polish`).
        rng: Seed or generator; the initial design is drawn first, from it.
    """

    def __init__(
        self,
        grid: Grid,
        budget_fraction: float,
        surrogate: Any,
        *,
        acquisition: Acquisition | str = Acquisition.EI,
        incumbent: str = "envelope",
        schedule: str | WindowSchedule = "sweep",
        n_initial: int = 5,
        kappa: float = 2.0,
        refit_every: int = 1,
        target_compute: float = 1e25,
        target_law: str = "compute",
        cost_power: float = 0.5,
        ei_cost_power: float = 1.0,
        target_samples: int = 32,
        target_every: int = 1,
        target_estimator: str = "stein",
        cost_model: CostModel | None = None,
        anchor: float = 0.0,
        polish: float = 0.0,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        budget_fraction = check_fraction(budget_fraction, grid)
        if incumbent not in INCUMBENTS:
            raise SearchError(f"incumbent must be one of {list(INCUMBENTS)}, got {incumbent!r}.")
        if not (np.isfinite(ei_cost_power) and ei_cost_power >= 0):
            raise SearchError(f"ei_cost_power must be finite and >= 0, got {ei_cost_power}.")
        for name, share in (("anchor", anchor), ("polish", polish)):
            if not 0 <= share < 1:
                raise SearchError(f"{name} must be a share of the budget in [0, 1), got {share}.")
        self.anchor = float(anchor)
        self.acquisition = parse_acquisition(acquisition)
        random_order = self.acquisition is Acquisition.RANDOM
        self.polish = 0.0 if random_order else float(polish)
        if not random_order and not (hasattr(surrogate, "fit") and hasattr(surrogate, "predict")):
            raise SearchError("The surrogate must have fit(X, y) and predict(X); got "
                              f"{type(surrogate).__name__}.")
        super().__init__(grid, cost_model)
        self.budget = float(budget_fraction) * grid.budget_total  # grid.price_unit
        self.surrogate = surrogate
        self.incumbent = incumbent
        self.schedule = make_schedule(schedule)
        self.kappa = float(kappa)
        self.ei_cost_power = float(ei_cost_power)
        self._rng = np.random.default_rng(rng)
        self._initial = [int(i) for i in initial_design(grid, n_initial, self._rng)]
        # Rank of each row in a seeded permutation: the order of acquisition="random" and the
        # tie-break of the others (equal scores, e.g. a tree ensemble's piecewise-constant
        # predictions, go to the lowest rank): no pick depends on how many candidates there are.
        self._rank = np.argsort(self._rng.permutation(grid.n_configs))
        self._random_order = random_order
        self.target = tgt.TargetSettings(float(target_compute), str(target_law), float(cost_power),
                                         int(target_samples), int(target_every), target_estimator)
        self._ens: tgt.TargetEnsemble | None = None
        if self.acquisition is Acquisition.TARGET:  # own stream: other acquisitions unchanged
            self._target_rng = np.random.default_rng(self._rng.integers(2**63))
        self._X = grid.encode()
        self._trace: list[TraceEntry] = []
        self._reasons: list[tuple[str, str]] = []  # (rule, reason) of each trace entry
        self._n_fits = 0
        self._warm = not random_order and accepts_warm_start(surrogate)
        if refit_every < 1:
            raise SearchError(f"refit_every must be >= 1 ask, got {refit_every}.")
        self.refit_every = int(refit_every)
        self._base: tuple[Any, int, float, float] | None = None  # model, n_obs, mu, sd
        self._since_fit = 0

    @property
    def trace(self) -> list[TraceEntry]:
        """Every configuration handed out, in order (a copy)."""
        return list(self._trace)

    # ------------------------------------------------------------------ tell side
    def cancel(self, idx: int | Iterable[int]) -> None:
        """Forget pending configurations (e.g. a crashed run); their cost is released."""
        arr = self._indices(idx)
        self._pending[arr] = False
        if self._ens is not None and set(arr.tolist()) & self._ens.known:
            self._ens = None  # it counted them as observed: rebuild at the next ask

    # ------------------------------------------------------------------ ask side
    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        if self._warm and self._n_fits > 0:
            fit_surrogate(self.surrogate, X, y, warm_start=True)
        else:
            self.surrogate.fit(X, y)
        self._n_fits += 1

    def _posterior(self) -> tuple[Any, np.ndarray, float, float]:
        """Surrogate on the observations, standardized y ``(n_obs,)``, and the y scale."""
        y, n = self.observed_losses, len(self._obs_y)
        base = self._base
        if base and self._since_fit < self.refit_every and hasattr(base[0], "condition_on"):
            model, n0, mu, sd = base
            y_std = (y - mu) / sd
            if n > n0:
                model = model.condition_on(self._X[self._obs_idx[n0:]], y_std[n0:])
            self._since_fit += 1
            return model, y_std, mu, sd
        if base and base[1] == n and self._since_fit <= self.refit_every:  # fitted on these
            return base[0], (y - base[2]) / base[3], base[2], base[3]  # very observations
        mu, sd = standardization(y)
        self._fit(self._X[self._obs_idx], (y - mu) / sd)
        self._base, self._since_fit = (self.surrogate, n, mu, sd), 1
        return self.surrogate, (y - mu) / sd, mu, sd

    def _record(self, picks: list[int], idx: int, cap: float, pred: tuple | None, reason: str,
                *, rule: str, fitted: bool = False, fallback: str | None = None) -> None:
        """Mark ``idx`` pending, add it to ``picks`` (and to the target ensemble's pending)
        and trace it with ``reason`` and ``rule`` (:attr:`Suggestion.rule`); ``fitted``: the
        pick used the surrogate, whose last hyperparameter fit (if any) is recorded."""
        cost = float(self.marginal_cost()[idx])
        self._pending[idx] = True
        mean, std, acq = pred if pred is not None else (None, None, None)
        hp = hyperparameter_fit(self.surrogate) if fitted else None
        status = None if hp is None else int(getattr(hp, "status", -1))
        message = None if hp is None else str(getattr(hp, "message", ""))
        entry = TraceEntry(len(self._trace), int(idx), cost, self.committed, cap, mean, std, acq,
                           self.grid.config(idx), fallback=fallback,
                           surrogate_fit_status=status, surrogate_fit_message=message)
        self._trace.append(entry)
        self._reasons.append((rule, reason))
        picks.append(int(idx))
        if self._ens is not None:
            self._ens = self._ens.observe([int(idx)])

    def ask(self, q: int = 1) -> list[int]:
        """Up to ``q`` distinct admissible grid rows to train next; they become pending.

        Returns fewer than ``q`` rows (possibly none) only when nothing else is admissible
        within the budget, i.e. when :attr:`done` becomes True.
        """
        if q < 1:
            raise SearchError(f"q must be >= 1, got {q}.")
        picks: list[int] = []
        model = None
        believed: dict[int, float] = {}
        y_std, mu, sd = np.zeros(0), 0.0, 1.0
        self._ens = None if self._ens is None else self._ens.aged()
        no_ensemble = ""  # why the target ensemble could not be built in this ask
        broken = ""  # why the surrogate's posterior is unusable in this ask (not finite)
        while len(picks) < q:
            adm_any = self._affordable()
            if not adm_any.any():
                if not (anchor := self._anchor_candidates()).size:
                    break
                if model is None and self._obs_y and not self._random_order:
                    model, y_std, mu, sd = self._posterior()
                self._place_anchor(anchor, model, mu, sd, picks)
                continue
            initial = next((i for i in self._initial if adm_any[i]), None)
            if initial is not None:
                self._initial.remove(initial)
                self._record(picks, initial, np.inf, None, "initial design: random "
                             "configuration from the cheapest compute level(s)", rule="initial")
                continue
            if self.polishing():
                if model is None:
                    model, y_std, mu, sd = self._posterior()
                if self._place_polish(adm_any, model, mu, sd, picks):
                    continue
            cap, mask = self._window(self.committed)
            cand = np.flatnonzero(mask)
            if self._random_order or not self._obs_y:
                pick = self._first_ranked(cand)
                self._record(picks, pick, cap, None, f"random order: first of {cand.size} "
                             f"admissible configurations under cap {cap:.3g} FLOPs in a seeded "
                             "permutation" if self._random_order else "random: no observation "
                             "yet to fit a surrogate", rule="random")
                continue
            if model is None:
                model, y_std, mu, sd = self._posterior()
            new = [int(i) for i in np.flatnonzero(self._pending) if i not in believed]
            if new and not broken:
                m_new = np.asarray(model.predict(self._X[new])[0], dtype=np.float64)
                broken = _not_finite("posterior mean", m_new).replace("candidates", "pending")
                if not broken:
                    model = self._believe(model, new, m_new, believed, y_std)
            if not broken:
                mean, std = (np.asarray(a, dtype=np.float64)
                             for a in model.predict(self._X[cand]))
                if mean.shape != cand.shape or std.shape != cand.shape:
                    raise SearchError(f"predict returned shapes {mean.shape}, {std.shape}; "
                                      f"expected ({cand.size},) for both.")
                broken = _not_finite("posterior mean/std", mean, std)
            if broken:
                self._fall_back(cand, cap, broken, picks)
                continue
            s, what = None, ""
            if target := self.acquisition is Acquisition.TARGET:
                if not no_ensemble:
                    self._ens, no_ensemble = tgt.refresh_ensemble(
                        self._ens, self.target, self.grid, cap, self._observed | self._pending,
                        model, dict(zip(self._obs_idx, self._obs_y, strict=True)), believed,
                        mu, sd, self._target_rng, self._failed)
                s, what = tgt.candidate_scores(self._ens, no_ensemble, self.target, self.grid,
                                               cand)
            inc, stand_in = None, None
            if s is None:
                stand_in = what.rstrip(": ") if target else None  # why EI stands in
                kind = Acquisition.EI if target else self.acquisition
                s, inc = incumbent_score(
                    kind, self.grid, np.array(self._obs_idx + list(believed), dtype=np.int64),
                    np.concatenate([y_std, np.fromiter(believed.values(), dtype=np.float64)]),
                    cand, mean, std, incumbent=self.incumbent, kappa=self.kappa,
                    cost=(self.marginal_cost(priced=True)[cand], self.grid.budget_total,
                          self.ei_cost_power))
                what += score_words(kind, self.ei_cost_power)
            if broken := _not_finite("acquisition score", np.where(np.isnan(s), np.nan, 0.0)):
                self._fall_back(cand, cap, broken, picks)
                continue
            top = np.flatnonzero(s == s.max())
            j = int(top[0] if top.size == 1 else top[np.argmin(self._rank[cand[top]])])
            pick = int(cand[j])
            reason = (f"{what} {s[j]:.4g} over {cand.size} admissible configurations under cap "
                      f"{cap:.3g} FLOPs")
            if inc is not None:
                reason += f" ({self.incumbent} incumbent {inc[j] * sd + mu:.4g} nats)"
            pred = (float(mean[j] * sd + mu), float(std[j] * sd), float(s[j]))
            self._record(picks, pick, cap, pred, reason, rule="acquisition", fallback=stand_in,
                         fitted=True)
        return picks

    def _fall_back(self, cand: np.ndarray, cap: float, why: str, picks: list[int]) -> None:
        """Pick (and trace) the candidate first in the seeded permutation because the
        surrogate's posterior is unusable (``why``)."""
        pick = self._first_ranked(cand)
        self._record(picks, pick, cap, None, f"fallback ({why}): first of {cand.size} "
                     f"admissible configurations under cap {cap:.3g} FLOPs in a seeded "
                     "permutation", rule="fallback", fitted=True, fallback=why)

    def _place_anchor(self, rows: np.ndarray, model: Any, mu: float, sd: float,
                      picks: list[int]) -> None:
        """Pick (and trace) the anchor: the lowest posterior mean among ``rows`` (the first
        in the seeded permutation without a usable surrogate)."""
        mean = None if model is None else np.asarray(model.predict(self._X[rows])[0], float)
        if mean is None or not np.isfinite(mean).all():
            pick, pred = self._first_ranked(rows), None
        else:
            j = int(np.argmin(mean))
            pick, pred = int(rows[j]), (float(mean[j] * sd + mu), None, None)
        cfg = self.grid.config(pick)
        self._record(picks, pick, np.inf, pred, f"anchor: lowest predicted loss of the "
                     f"{rows.size} configurations left in the cell N={cfg['N']:.3g}, "
                     f"D={cfg['D']:.3g}, the costliest that costs at most {self.anchor:g} of "
                     "the budget", rule="anchor", fitted=model is not None)

    def _place_polish(self, admissible: np.ndarray, model: Any, mu: float, sd: float,
                      picks: list[int]) -> bool:
        """Pick (and trace) the next polish run (:func:`polish_pick`); False if none."""
        hit = polish_pick(self.grid, self.observed_indices, self.observed_losses, admissible,
                          nats_predictor(model, self._X, mu, sd), np.flatnonzero(self._pending))
        if hit is not None:
            self._record(picks, hit[0], np.inf, (*hit[1:3], None), hit[3], rule="polish",
                         fitted=True)
        return hit is not None

    def _first_ranked(self, cand: np.ndarray) -> int:
        """The candidate row that comes first in the seeded permutation."""
        return int(cand[np.argmin(self._rank[cand])])

    def _believe(
        self, model: Any, new: list[int], values: np.ndarray, believed: dict, y_std: np.ndarray
    ) -> Any:
        """Kriging believer: condition the model on ``new`` rows observed at ``values``."""
        believed.update(zip(new, values.tolist(), strict=True))
        if hasattr(model, "condition_on"):
            return model.condition_on(self._X[new], values)
        rows = self._obs_idx + list(believed)
        y = np.concatenate([y_std, np.fromiter(believed.values(), dtype=np.float64)])
        self._fit(self._X[rows], y)
        self._base = None  # the surrogate now holds believed values: never reuse it as is
        return self.surrogate

    def suggest(self, q: int = 1) -> list[Suggestion]:
        """Like :meth:`ask`, but each row comes with its configuration and a reason."""
        start = len(self._trace)
        self.ask(q)
        return [Suggestion(e.index, dict(e.config), e.predicted_mean, e.predicted_std, e.cost,
                           e.cap, e.acquisition_value, reason, rule)
                for e, (rule, reason) in zip(self._trace[start:], self._reasons[start:],
                                             strict=True)]
