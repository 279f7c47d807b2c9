"""The embedded demo: recover a known scaling law at a fraction of an exhaustive grid's compute.

:func:`run_demo` needs no data file. It builds the synthetic grid of
:mod:`scalebo.bench.synthetic` (a Chinchilla surface ``L(N, D) = E + A/N^α + B/D^β`` plus
learning-rate and batch-size penalties whose optimum drifts with N and D, plus seeded noise),
then compares

* **exhaustive**: every run of the grid (held-out cells excepted), 100 % of ``C_total``, the
  compute law fitted on its Pareto envelope — the problem's reference fit; and
* **BO**: Window + fantasization (:class:`~scalebo.bench.replay.MethodConfig` defaults: GP
  Matérn-5/2, EI per unit cost against the envelope incumbent, the ``spent`` window) at a
  small budget, the law fitted on observed runs only and on observed + fantasized losses;

and the **true law**: the synthetic surface's compute-optimal loss, which is exactly
``L*(C) = E + A_c/C^α_c`` with ``α_c = αβ/(α+β)`` (both terms scale alike at the optimum).
Extrapolation errors are relative differences in % at 1e25 / 1e27 / 1e29 FLOPs, against the
exhaustive fit (as the benchmark measures them) and against the truth.

``quick=True`` uses a smaller grid: 5 N × 6 D × 6 lr × 3 bs = 540 configurations instead of
6 N × 7 D × 8 lr × 5 bs = 1,680. As in every replay, the runs of the 2 largest-compute (N, D)
cells are held out (36 and 80), so 504 and 1,600 runs are acquirable, and ``C_total`` (FLOPs)
is theirs.

When the fantasized losses leave the (C, loss) envelope unchanged, the BO fit with
fantasization equals the observed-only one (parameters within :data:`SAME_FIT_RTOL`);
:attr:`DemoResult.fantasize_identical` says so and the figure draws one curve. Warnings
raised while building the grid, fitting and replaying are not hidden: they are recorded
(:attr:`DemoResult.warnings`: count and first message per category) for the caller to report.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scalebo.bench.targets import DEFAULT_TARGETS
from scalebo.outputs import save_figure

__all__ = ["DemoResult", "LawRow", "WarningCount", "plot_demo", "run_demo", "true_compute_law"]

#: Relative tolerance under which two fitted laws count as identical: far above the fitter's
#: own (~1e-8 on the same points), far below what the table prints (5 digits).
SAME_FIT_RTOL = 1e-6


@dataclass(frozen=True)
class WarningCount:
    """Warnings of one category raised during :func:`run_demo`.

    Attributes:
        category: Warning class name (e.g. ``"RuntimeWarning"``).
        count: How many were raised (every occurrence, not only the first per location).
        first: Text of the first one.
    """

    category: str
    count: int
    first: str


def count_warnings(caught: list[warnings.WarningMessage]) -> tuple[WarningCount, ...]:
    """Group recorded warnings by category, in order of first occurrence."""
    groups: dict[str, list[str]] = {}
    for w in caught:
        groups.setdefault(w.category.__name__, []).append(str(w.message))
    return tuple(WarningCount(c, len(m), m[0]) for c, m in groups.items())


@dataclass(frozen=True)
class LawRow:
    """One compute law ``L(C) = E + A/C^α`` (C in FLOPs, L in nats) and how it was obtained.

    Attributes:
        name: ``"true"``, ``"exhaustive"``, ``"BO observed"`` or ``"BO + fantasize"``.
        E, A, alpha: Parameters (NaN when the fit failed).
        runs: Training runs behind it (0 for the truth).
        compute_fraction: Their compute as a fraction of ``C_total``.
        flops: Their compute, FLOPs.
        status: Fit status or ``"exact"``.
        message: Why the fit failed or is not trusted ('' for a converged one).
    """

    name: str
    E: float
    A: float
    alpha: float
    runs: int
    compute_fraction: float
    flops: float
    status: str
    message: str = ""

    def __call__(self, C: np.ndarray | float) -> np.ndarray:
        """Loss in nats at compute ``C`` (FLOPs)."""
        return self.E + self.A * np.asarray(C, dtype=np.float64) ** (-self.alpha)

    def same_fit(self, other: LawRow, rtol: float = SAME_FIT_RTOL) -> bool:
        """Whether ``other`` has the same parameters (within ``rtol``) and status."""
        mine, theirs = (np.array([r.E, r.A, r.alpha]) for r in (self, other))
        return self.status == other.status and bool(
            np.all(np.isfinite(mine)) and np.allclose(mine, theirs, rtol=rtol, atol=0))


@dataclass(frozen=True)
class DemoResult:
    """Outcome of :func:`run_demo`.

    Attributes:
        laws: True law, exhaustive fit, BO (observed only), BO + fantasize.
        budget: BO budget, fraction of ``C_total``.
        C_total: Compute of the whole acquirable grid, FLOPs.
        n_grid: Acquirable configurations (runs of the exhaustive fit).
        error_vs_exhaustive: ``{name: {C: signed rel. %}}`` for the BO laws.
        error_vs_true: ``{name: {C: signed rel. %}}`` for the fitted laws.
        seconds: Wall time, seconds.
        extras: The problem and the observed grid rows (for :func:`plot_demo`).
        n_held_out: Configurations in the held-out cells (not acquirable, not fitted).
        warnings: Warnings raised during the run, per category.
    """

    laws: tuple[LawRow, ...]
    budget: float
    C_total: float
    n_grid: int
    error_vs_exhaustive: Mapping[str, Mapping[float, float]]
    error_vs_true: Mapping[str, Mapping[float, float]]
    seconds: float
    extras: Mapping[str, Any] = field(default_factory=dict, repr=False)
    n_held_out: int = 0
    warnings: tuple[WarningCount, ...] = ()

    def law(self, name: str) -> LawRow:
        """The row called ``name``."""
        return next(r for r in self.laws if r.name == name)

    @property
    def fantasize_identical(self) -> bool:
        """Whether "BO + fantasize" fitted the same law as "BO observed" (False without)."""
        names = {r.name for r in self.laws}
        return {"BO observed", "BO + fantasize"} <= names and self.law(
            "BO observed").same_fit(self.law("BO + fantasize"))

    def warnings_summary(self) -> str:
        """One line: ``"no warnings"`` or each category's count and first message."""
        if not self.warnings:
            return "no warnings"
        n = sum(w.count for w in self.warnings)
        parts = [f"{w.count} {w.category} (first: {w.first[:120]})" for w in self.warnings]
        return f"{n} warning{'s' * (n != 1)}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "budget": self.budget, "C_total": self.C_total, "n_grid": self.n_grid,
            "n_held_out": self.n_held_out, "fantasize_identical": self.fantasize_identical,
            "laws": [{k: getattr(r, k) for k in ("name", "E", "A", "alpha", "runs",
                                                  "compute_fraction", "flops", "status")}
                     for r in self.laws],
            "error_vs_exhaustive_pct": {n: {f"{c:.0e}": v for c, v in d.items()}
                                        for n, d in self.error_vs_exhaustive.items()},
            "error_vs_true_pct": {n: {f"{c:.0e}": v for c, v in d.items()}
                                  for n, d in self.error_vs_true.items()},
            "seconds": self.seconds,
            "warnings": [{"category": w.category, "count": w.count, "first": w.first}
                         for w in self.warnings],
        }


def true_compute_law(law: Any) -> tuple[float, float, float]:
    """``(E, A_c, α_c)`` of ``min_N L(N, C/(6N))`` for a Chinchilla surface (nats, FLOPs).

    With ``G = (αA/(βB))^(1/(α+β))``, ``N* = G·(C/6)^(β/(α+β))`` and ``D* = C/(6N*)``; both
    terms then scale as ``C^−αβ/(α+β)``, so the loss is exactly ``E + A_c·C^−α_c``.
    """
    a, b = law.alpha, law.beta
    G = (a * law.A / (b * law.B)) ** (1.0 / (a + b))
    C = 1e21
    N = G * (C / 6.0) ** (b / (a + b))
    D = C / (6.0 * N)
    alpha_c = a * b / (a + b)
    return law.E, float((law.A * N ** -a + law.B * D ** -b) * C ** alpha_c), alpha_c


def _quick_axes() -> dict[str, np.ndarray]:
    return {"N": 5e7 * 2.0 ** np.arange(5), "D": 1e9 * 2.0 ** np.arange(6),
            "lr": 1.25e-4 * 2.0 ** np.arange(1, 7), "bs": 64.0 * 2.0 ** np.arange(1, 4)}


def _row(name: str, metrics: Any, lm: Any) -> LawRow:
    p = lm.params or {}
    return LawRow(name, float(p.get("E", np.nan)), float(p.get("A", np.nan)),
                  float(p.get("alpha", np.nan)), int(metrics.n_runs),
                  float(metrics.spent_fraction), float(metrics.spent_flops), str(lm.status),
                  "" if str(lm.status) == "converged" else str(lm.message or ""))


def run_demo(*, quick: bool = False, budget: float = 0.05, seed: int = 0,
             log: Callable[[str], None] | None = None) -> DemoResult:
    """Exhaustive grid vs Window + fantasize BO on the synthetic grid (see the module doc).

    Args:
        quick: Smaller grid.
        budget: BO budget as a fraction of ``C_total`` (default 0.05: 20× less compute).
        seed: Seed of the grid's noise and of the search.
        log: Called with progress lines (e.g. ``scalebo.cli.common.log``).
    """
    from scalebo.bench.problems import problem_from_table
    from scalebo.bench.replay import MethodConfig, replay
    from scalebo.bench.synthetic import DEFAULT_LAW, synthetic_runs

    say = log or (lambda _m: None)
    t0 = time.perf_counter()
    say("building the synthetic grid and the exhaustive (reference) fits ...")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every occurrence counted, none shown or lost
        runs = synthetic_runs(DEFAULT_LAW, seed=seed, **(_quick_axes() if quick else {}))
        problem = problem_from_table(runs, name="synthetic-quick" if quick else "synthetic")
        n_grid = int((~problem.grid.held_out).sum())
        n_held = int(problem.grid.held_out.sum())
        say(f"grid: {n_grid + n_held} runs, {n_grid} acquirable ({n_held} held out), "
            f"C_total = {problem.C_total:.3g} FLOPs; running Window + fantasize BO to "
            f"{100 * budget:g} % of it ...")
        rec = replay(problem, MethodConfig(strategy="window", fantasize=True), budget, seed)
    m = rec.at(budget)
    E, A, al = true_compute_law(DEFAULT_LAW)
    ref = problem.reference_compute.params
    laws = [
        LawRow("true", E, A, al, 0, 0.0, 0.0, "exact"),
        LawRow("exhaustive", ref["E"], ref["A"], ref["alpha"], n_grid, 1.0, problem.C_total,
               str(problem.reference_compute.status)),
        _row("BO observed", m, m.observed["compute"]),
    ]
    if m.fantasized is not None:
        laws.append(_row("BO + fantasize", m, m.fantasized["compute"]))
    Cs = np.array(DEFAULT_TARGETS)

    def rel(a: LawRow, b: LawRow) -> dict[float, float]:
        return {float(c): float(v) for c, v in zip(Cs, 100 * (a(Cs) - b(Cs)) / b(Cs),
                                                    strict=True)}

    true, exh = laws[0], laws[1]
    return DemoResult(
        laws=tuple(laws), budget=float(budget), C_total=float(problem.C_total), n_grid=n_grid,
        error_vs_exhaustive={r.name: rel(r, exh) for r in laws[2:]},
        error_vs_true={r.name: rel(r, true) for r in laws[1:]},
        seconds=time.perf_counter() - t0,
        extras={"problem": problem, "observed": [t.index for t in rec.trace]},
        n_held_out=n_held, warnings=count_warnings(caught),
    )


def plot_demo(result: DemoResult, path: str | Path) -> Path:
    """Loss vs compute: the grid, the BO runs, and the laws extrapolated to 1e25 FLOPs (the
    BO fits with and without fantasization as one curve when they are identical)."""
    import matplotlib

    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem = result.extras["problem"]
    cost, loss = problem.grid.cost, problem.loss
    seen = np.asarray(result.extras["observed"], dtype=int)
    acq = ~problem.grid.held_out
    same = result.fantasize_identical
    fig, ax = plt.subplots(figsize=(7.5, 5), constrained_layout=True)
    ax.scatter(cost[acq], loss[acq], s=6, color="0.8",
               label=f"acquirable grid runs ({acq.sum()}; the exhaustive law is fitted on "
               "their envelope)")
    if (~acq).any():
        ax.scatter(cost[~acq], loss[~acq], s=6, marker="x", color="0.6", lw=0.6,
                   label=f"held-out cells ({(~acq).sum()} runs)")
    if seen.size:
        ax.scatter(cost[seen], loss[seen], s=12, color="C0",
                   label=f"BO runs ({seen.size}, {100 * result.budget:g} % of compute)")
    C = np.geomspace(cost.min(), 1e25, 200)
    styles = {"true": ("k", ":"), "exhaustive": ("C2", "-"), "BO observed": ("C1", "--"),
              "BO + fantasize": ("C3", "-")}
    for r in result.laws:
        if same and r.name == "BO + fantasize":
            continue  # the same curve as "BO observed", named in its label
        if np.isfinite(r.E):
            color, ls = styles.get(r.name, ("C4", "-"))
            name = "BO observed = BO + fantasize" if same and r.name == "BO observed" else r.name
            ax.plot(C, r(C), ls, color=color, lw=1.5,
                    label=f"{name}: {r.E:.3f} + {r.A:.3g}/C^{r.alpha:.4f}")
    ax.axvline(float(cost[acq].max()), color="0.5", ls=":", lw=1,
               label="costliest acquirable run: the laws extrapolate beyond")
    title = "scalebo demo: law recovered from a fraction of the grid"
    if same:
        title += "\n(fantasization left the envelope unchanged: the same BO fit)"
    ax.set(xscale="log", yscale="log", xlabel="training compute C (FLOPs)",
           ylabel="loss (nats)", title=title)
    from scalebo.plotting import loss_ticks

    loss_ticks(ax)
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7)
    path = Path(path)
    save_figure(fig, path, dpi=150)
    plt.close(fig)
    return path
