"""The fit of a campaign's runs done and what it predicts at the target region.

:func:`fit_and_predict` fits the law to the runs done (each group on its own runs, with
groups) and returns, with every target row's prediction (:func:`target_predictions`), a
:class:`DoneFit` per fit: its natural parameters, status and message, so that a law the runs
done cannot identify (five runs at one model size) is visible, not hidden behind proposals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scalebo.design.groups import group_seed
from scalebo.design.pool import TargetRegion
from scalebo.design.replay import fit_rows, observation_bands
from scalebo.errors import FitError
from scalebo.fitting.robust import FitResult, FitStatus
from scalebo.laws.formula import FormulaLaw

__all__ = ["DoneFit", "fit_and_predict", "fit_done", "fit_runs", "target_predictions"]

Fits = dict[str | None, FitResult | FitError]


def fit_done(law: FormulaLaw, X_done: np.ndarray, y_done: np.ndarray, seed: int,
             n_starts: int) -> FitResult:
    """The fit of the runs done, or a FitError saying how many runs the law needs."""
    fit = fit_rows(law, X_done, y_done, n_starts=n_starts, seed=seed)
    if fit is None:
        n = len(y_done)
        raise FitError(f"cannot fit {law.name!r} ({law.n_params} parameters) to the {n} runs "
                       "done" + (f": it needs at least {law.n_params}" if n < law.n_params
                                 else ""))
    return fit


def fit_runs(law: FormulaLaw, X_done: np.ndarray, y_done: np.ndarray, *, seed: int = 0,
             n_starts: int = 64, target_groups: Any = None, done_groups: Any = None) -> Fits:
    """The fit of the runs done (:func:`fit_done`) of every group with target rows, each
    once: ``{group: FitResult, or the FitError saying why there is none}``, ``{None: ...}``
    without groups. The ``i``-th group in sorted order of its label is fitted with seed
    ``seed + 1000·i``, as :func:`~scalebo.design.propose.propose_groups` and a per-group
    replay seed theirs; these fits are the ones both the proposals and the report use."""
    if target_groups is None:
        parts = [(None, np.ones(len(y_done), bool))]
    else:
        dg = np.asarray(done_groups, dtype=object).astype(str)
        names = sorted(set(np.asarray(target_groups, dtype=object).astype(str).tolist()))
        parts = [(g, dg == g) for g in names]
    out: Fits = {}
    for i, (g, mine) in enumerate(parts):
        try:
            out[g] = fit_done(law, X_done[mine], y_done[mine], group_seed(seed, i), n_starts)
        except FitError as exc:
            out[g] = exc
    return out


@dataclass(frozen=True)
class DoneFit:
    """The fit of the runs done (of one group).

    Attributes:
        group: the group label, or ``None`` without groups.
        n_runs: runs fitted.
        params: natural parameters of the best fit (response and input units of the
            formula); empty when there is no fit.
        status: the fit's status (``converged``, ``bound hit``, ``max iterations``,
            ``unidentified``) or ``not fitted`` (too few runs, or no start could be fitted).
        message: the fit's account of its status (why it is unidentified), or why there is
            no fit.
    """

    group: str | None
    n_runs: int
    params: dict[str, float] = field(default_factory=dict)
    status: str = "not fitted"
    message: str = ""

    @property
    def identified(self) -> bool:
        """Whether the runs done identify the law (a fit whose status is not
        ``unidentified``)."""
        return self.status not in (str(FitStatus.UNIDENTIFIED), "not fitted")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``group`` left out without groups)."""
        out = {"n_runs": self.n_runs, "params": self.params, "status": self.status,
               "message": self.message, "identified": self.identified}
        return out if self.group is None else {"group": self.group, **out}


def fit_and_predict(law: FormulaLaw, X_done: np.ndarray, y_done: np.ndarray,
                    target: TargetRegion, *, seed: int = 0, n_starts: int = 64,
                    target_groups: Any = None, done_groups: Any = None,
                    fits: Fits | None = None
                    ) -> tuple[tuple[DoneFit, ...], list[dict[str, Any]]]:
    """``(fits, predictions)``: the fit of the runs done (one :class:`DoneFit` per group
    with target rows, in the order the target region names them) and
    :func:`target_predictions`' list, from one fit each: ``fits`` (:func:`fit_runs`'s, the
    ones the proposals were chosen by), else fitted here as :func:`fit_runs` does."""
    n_target = target.X.shape[0]
    if np.shape(X_done)[0] != np.size(y_done):
        raise ValueError(f"the runs done need one input row per response, got "
                         f"{np.shape(X_done)[0]} rows and {np.size(y_done)} responses")
    if target_groups is None:
        parts = [(None, np.arange(n_target), np.ones(len(y_done), bool))]
    else:
        tg = np.asarray(target_groups, dtype=object).astype(str)
        dg = np.asarray(done_groups, dtype=object).astype(str)
        parts = [(g, np.flatnonzero(tg == g), dg == g) for g in dict.fromkeys(tg.tolist())]
    if fits is None:
        fits = fit_runs(law, X_done, y_done, seed=seed, n_starts=n_starts,
                        target_groups=target_groups, done_groups=done_groups)
    out: list[dict[str, Any]] = []
    done: list[DoneFit] = []
    failed: list[str] = []
    for g, rows, mine in parts:
        Xt = target.X[rows]
        young = int(mine.sum()) < law.n_params  # a campaign's start: its pilot, no fit yet
        try:
            fit = fits[g]
            if isinstance(fit, FitError):
                raise fit
        except FitError as exc:
            if g is None and not young:
                raise
            why = ("" if g is None else f"group {g!r}: ") + str(exc)
            failed += [] if young else [why]  # too young to fit is no failure: a pilot
            done.append(DoneFit(g, int(mine.sum()), message=str(exc)))
            out += [{"target_row": int(i), **({"group": g} if g is not None else {}),
                     **dict(zip(law.variables, map(float, Xt[j]), strict=True)), "mean": None,
                     **dict.fromkeys(("lo80", "hi80", "lo95", "hi95")), "note": why}
                    for j, i in enumerate(rows)]
            continue
        done.append(DoneFit(g, int(mine.sum()), {k: float(v) for k, v in fit.params.items()},
                            str(fit.status), fit.message))
        mean = law.predict(fit.x, Xt)
        bands: dict[str, Any] = dict.fromkeys(("lo80", "hi80", "lo95", "hi95"))
        for tag, (lo, hi) in (observation_bands(law, fit, X_done[mine], y_done[mine], Xt)
                              or {}).items():
            bands["lo" + tag], bands["hi" + tag] = lo, hi
        for j, i in enumerate(rows):
            out.append({"target_row": int(i), **({"group": g} if g is not None else {}),
                        **dict(zip(law.variables, map(float, Xt[j]), strict=True)),
                        "mean": float(mean[j]),
                        **{k: None if v is None else float(v[j]) for k, v in bands.items()}})
    if failed and len(failed) == len(parts):
        raise FitError("; ".join(failed))
    return tuple(done), sorted(out, key=lambda r: r["target_row"])


def target_predictions(law: FormulaLaw, X_done: np.ndarray, y_done: np.ndarray,
                       target: TargetRegion, *, seed: int = 0, n_starts: int = 64,
                       target_groups: Any = None,
                       done_groups: Any = None) -> list[dict[str, Any]]:
    """The law's prediction at every target row from the runs done, with the normal 80 % and
    95 % intervals for a new observation there (multi-mode Laplace posterior, residual noise
    ``SSE/(n − p)``, as a replay checkpoint's :func:`~scalebo.design.replay.target_interval`;
    its calibration is measured in docs/scalebench.md). With ``target_groups`` and
    ``done_groups`` (labels, compared as text) each group is fitted on its own runs.

    Returns one dict per target row, in order: ``target_row`` (0-based), ``group`` (with
    groups), the inputs by variable name, ``mean`` (the best fit's prediction) and ``lo80``,
    ``hi80``, ``lo95``, ``hi95`` (the posterior mixture's intervals, centred on its mean, the
    fit's when one mode is kept; ``None`` when there are no more runs than parameters);
    response units. A group whose runs cannot be fitted, and runs fewer than the law's
    parameters (a campaign's start), get ``None`` and a ``note``. The fits themselves:
    :func:`fit_and_predict`.

    Raises:
        FitError: the runs done cannot be fitted (with groups: no group's can, named).
    """
    return fit_and_predict(law, X_done, y_done, target, seed=seed, n_starts=n_starts,
                           target_groups=target_groups, done_groups=done_groups)[1]
