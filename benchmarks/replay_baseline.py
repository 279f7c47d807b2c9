"""Choose the replay defaults by measurement: window schedules, incumbents, EI's cost power,
fantasization.

For each dataset (StepLaw, OELLM-English, or ``synthetic``), method and seed, one replay to
the largest budget records metrics at every budget (separate runs for the budget-dependent
``sweep`` schedule), without the law posterior (it does not change the picks). Printed:
|relative difference| of the compute law at 1e25 FLOPs vs the reference law (mean ± SD over
seeds) on observed + fantasized data ("fant") and on observed runs only ("obs"), envelope
recovery, and seconds per replay; then, for every method against the 0.2 default
(:data:`REFERENCE`), the seeds whose fantasized error got better / worse and a paired
Wilcoxon signed-rank p-value per budget; then DESIGN.md's baseline rows.

Run: ``SCALEBO_DATA_DIR=... python benchmarks/replay_baseline.py [--seeds 5]
[--budgets 0.01,0.05,0.1] [--datasets steplaw,oellm_english] [--methods "LABEL;..."]
[--n-jobs 2] [--json out.json]``. The 0.3 defaults (envelope incumbent, EI per unit cost;
docs/reproduction.md) were chosen with ``--seeds 20 --methods ei-defaults`` (the rows of
:data:`EI_DEFAULTS`; and ``--datasets synthetic --seeds 10``), the GP's full refit at every
ask (0.3.6) with ``--seeds 20 --methods restarts``, the moving-optimum coordinates (0.3.7)
with ``--seeds 40 --methods shift`` (and ``--datasets synthetic``), the anchor run (0.3.8)
with ``--seeds 20 --methods anchor --budgets 0.01,0.05,0.1,0.25``, polish (0.4.0) with
``--seeds 10 --methods polish``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon

from scalebo.bench.problems import load_problem
from scalebo.bench.replay import MethodConfig, replay

BASE = MethodConfig(strategy="window", schedule="spent", acquisition="ei",
                    incumbent="frontier", ei_cost_power=0.0, fantasize=True, estimator="mean",
                    posterior_samples=0, gp_restart_below=0, shift_optimum=False,
                    anchor=0.0, polish=0.0)
#: The 0.2 default, which every other method is compared with seed by seed.
REFERENCE = "window-spent EI frontier, fant mean"
#: The 0.3 default: EI per unit cost against the envelope (the GP's hyperparameters refitted
#: in full every 10th ask, warm-started in between, until 0.3.5).
DEFAULT_03 = BASE.with_(incumbent="envelope", ei_cost_power=1.0)
#: The 0.3.6 default: the same, refitted in full at every ask below 128 runs.
DEFAULT_036 = DEFAULT_03.with_(gp_restart_below=128)
#: The 0.3.7 default: the same GP on hyperparameters relative to an optimum that moves with
#: N and D (``shift_optimum``).
DEFAULT_037 = DEFAULT_036.with_(shift_optimum=True)
#: The 0.3.8-0.3.9 default: the same search holding back one anchor run of the costliest
#: cell costing at most 70 % of the budget (``anchor``).
DEFAULT_038 = DEFAULT_037.with_(anchor=0.7)
#: The default since 0.4.0: the same search polishing the envelope's costliest cells in the
#: last 20 % of its budget (``polish``).
DEFAULT = DEFAULT_038.with_(polish=0.2)
METHODS: dict[str, MethodConfig] = {
    "window-spent EI/cost envelope, fant mean (default)": DEFAULT,
    "window-spent EI/cost envelope, no polish (0.3.9)": DEFAULT_038,
    "window-spent EI/cost envelope, polish 0.25": DEFAULT.with_(polish=0.25),
    "window-spent EI/cost envelope, no anchor (0.3.7)": DEFAULT_037,
    "window-spent EI/cost envelope, absolute hyperparameters (0.3.6)": DEFAULT_036,
    "window-spent EI/cost envelope, GP full refit every 10th": DEFAULT_03,
    REFERENCE: BASE,
    "window-spent EI envelope, fant mean": BASE.with_(incumbent="envelope"),
    "window-spent EI/cost^0.5 envelope, fant mean": BASE.with_(incumbent="envelope",
                                                               ei_cost_power=0.5),
    "window-sweep EI frontier, fant mean": BASE.with_(schedule="sweep"),
    "full EI frontier, fant mean": BASE.with_(strategy="full"),
    "window-spent EI global, fant mean": BASE.with_(incumbent="global"),
    "window-spent EI frontier, fant cell_best": BASE.with_(estimator="cell_best"),
    "window-spent random order, fant mean": BASE.with_(surrogate="random"),
    # The target acquisition on the default (EI per unit cost stands in where it cannot
    # score), its ensemble reused over 5 asks; 3-10x slower per replay than EI.
    **{f"window-spent target γ={g:g} every 5, fant mean": DEFAULT.with_(
        acquisition="target", cost_power=g, target_every=5) for g in (0.5, 1.0)},
}
#: The rows that chose the 0.3 defaults: incumbent × EI's cost power.
EI_DEFAULTS = (REFERENCE, "window-spent EI envelope, fant mean",
               "window-spent EI/cost^0.5 envelope, fant mean",
               "window-spent EI/cost envelope, GP full refit every 10th")
#: The rows that chose ``gp_restart_below=128`` (0.3.6, ``--methods restarts``).
RESTARTS = ("window-spent EI/cost envelope, GP full refit every 10th",
            "window-spent EI/cost envelope, absolute hyperparameters (0.3.6)")
#: The rows that chose ``shift_optimum=True`` (0.3.7, ``--methods shift``).
SHIFT = ("window-spent EI/cost envelope, absolute hyperparameters (0.3.6)",
         "window-spent EI/cost envelope, no anchor (0.3.7)")
#: The rows that chose ``anchor=0.7`` (0.3.8, ``--methods anchor``).
ANCHOR = ("window-spent EI/cost envelope, no anchor (0.3.7)",
          "window-spent EI/cost envelope, no polish (0.3.9)")
#: The rows that chose ``polish=0.2`` (0.4.0, ``--methods polish``).
POLISH = ("window-spent EI/cost envelope, no polish (0.3.9)",
          "window-spent EI/cost envelope, fant mean (default)",
          "window-spent EI/cost envelope, polish 0.25")
DESIGN_BASELINE = """\
DESIGN.md baseline (|rel. diff| at 1e25, %, budgets 1/5/10/25 %):
  OELLM random order + fantasize              2.7 ± 2.2 | 2.8 ± 1.7 | 1.8 ± 1.8 | 0.7 ± 0.4
  OELLM EI frontier, window, fantasize        7.3 ± 6.9 | 5.8 ± 6.9 | 4.7 ± 6.8 | 1.8 ± 3.6
  OELLM EI global, window, fantasize          7.4 ± 7.1 | 6.7 ± 5.9 | 7.3 ± 3.7 | 2.8 ± 2.0
  StepLaw EI frontier, window                 12.7      | 4.4       | 1.7       | 0.0
  Envelope recovery EI frontier: OELLM 10/32/48/84 %, StepLaw 6/50/84/100 %"""


def task(dataset: str, label: str, seed: int, budgets: tuple[float, ...]) -> dict:
    """One replay; returns the JSON-ready record plus the method label."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    problem = load_problem(dataset)
    t0 = time.perf_counter()
    try:
        rec = replay(problem, METHODS[label], max(budgets), seed,
                     record_budgets=budgets).to_dict()
        rec["error"] = None
    except Exception as exc:  # recorded, counted and summarized, never silent
        rec = {"error": f"{type(exc).__name__}: {exc}", "metrics": []}
    rec.update(label=label, dataset=dataset, seed=seed, seconds=time.perf_counter() - t0)
    return rec


def _cell(values: list[float | None]) -> str:
    vals = np.array([v for v in values if v is not None], dtype=float)
    if vals.size == 0:
        return "   failed   "
    fails = len(values) - vals.size
    text = f"{vals.mean():5.1f} ± {vals.std(ddof=1) if vals.size > 1 else 0.0:4.1f}"
    return text + (f" ({fails} failed)" if fails else "")


def summarize(results: list[dict], budgets: tuple[float, ...]) -> str:
    lines = []
    errors = [r for r in results if r["error"]]
    if errors:
        lines.append(f"{len(errors)} of {len(results)} replays failed: "
                     + "; ".join(sorted({r['error'][:80] for r in errors})))
    for dataset in sorted({r["dataset"] for r in results}):
        lines.append(f"\n{dataset}: compute law |rel. diff| at 1e25 FLOPs, % (mean ± SD), "
                     "fant / obs; envelope recovery %")
        head = "  " + "method".ljust(52) + "".join(
            f"| {100 * b:g} % fant".ljust(18) + f"| {100 * b:g} % obs".ljust(17)
            + "| env ".ljust(7) for b in budgets) + "| s/replay"
        lines.append(head)
        for label in METHODS:
            rows = [r for r in results if r["dataset"] == dataset and r["label"] == label
                    and not r["error"]]
            if not rows:
                continue
            text = "  " + label.ljust(52)
            for b in budgets:
                ms = [next(m for m in r["metrics"] if np.isclose(m["budget"], b)) for r in rows]
                fant = [_abs(m["fantasized"]["compute"]) if m["fantasized"] else None
                        for m in ms]
                obs = [_abs(m["observed"]["compute"]) for m in ms]
                env = np.mean([m["envelope_recovery_pct"] for m in ms])
                text += f"| {_cell(fant)} ".ljust(18) + f"| {_cell(obs)} ".ljust(17) \
                    + f"| {env:3.0f} ".ljust(7)
            text += f"| {np.mean([r['seconds'] for r in rows]):.1f}"
            lines.append(text)
        lines += paired(results, dataset, budgets)
    lines.append("\n" + DESIGN_BASELINE)
    return "\n".join(lines)


def _fant_errors(results: list[dict], dataset: str, label: str, b: float) -> dict[int, float]:
    """Seed → |fantasized error| at 1e25 FLOPs of ``label`` at budget ``b`` (finite only)."""
    out = {}
    for r in results:
        if r["dataset"] == dataset and r["label"] == label and not r["error"]:
            m = next(m for m in r["metrics"] if np.isclose(m["budget"], b))
            err = _abs(m["fantasized"]["compute"]) if m["fantasized"] else None
            if err is not None:
                out[r["seed"]] = err
    return out


def paired(results: list[dict], dataset: str, budgets: tuple[float, ...]) -> list[str]:
    """Per method, seeds better / worse than :data:`REFERENCE` (or, when it did not run,
    the first method of the run, e.g. a preset's first row) and the Wilcoxon p-value at
    each budget (nothing with a single method)."""
    run = list(dict.fromkeys(r["label"] for r in results if r["dataset"] == dataset))
    reference = REFERENCE if REFERENCE in run else (run[0] if run else None)
    labels = [m for m in run if m != reference]
    if reference is None or not labels:
        return []
    lines = [f"  paired with '{reference}' (seeds better / worse, Wilcoxon p), per budget"]
    for label in labels:
        cells = []
        for b in budgets:
            ref = _fant_errors(results, dataset, reference, b)
            mine = _fant_errors(results, dataset, label, b)
            d = np.array([mine[s] - ref[s] for s in sorted(set(ref) & set(mine))])
            p = wilcoxon(d).pvalue if np.any(d != 0) else 1.0
            cells.append(f"{int((d < 0).sum())}/{int((d > 0).sum())}, {p:.3f}")
        lines.append("  " + label.ljust(52) + "| " + " | ".join(cells))
    return lines


def _abs(law: dict) -> float | None:
    extra = law.get("extrapolation_pct")
    return None if extra is None else abs(extra["1e+25"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="0.01,0.05,0.1")
    parser.add_argument("--datasets", default="steplaw,oellm_english")
    parser.add_argument("--methods", default="",
                        help="';'-separated labels (they contain commas; default all), or "
                             "'ei-defaults' for EI_DEFAULTS, 'restarts' for RESTARTS, 'shift' for "
                             "SHIFT, 'anchor' for ANCHOR, 'polish' for POLISH")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--json", default=None, help="write every record here")
    args = parser.parse_args()
    budgets = tuple(float(b) for b in args.budgets.split(","))
    presets = {"ei-defaults": EI_DEFAULTS, "restarts": RESTARTS, "shift": SHIFT,
               "anchor": ANCHOR, "polish": POLISH}
    labels = (list(presets[args.methods]) if args.methods in presets else
              [m.strip() for m in args.methods.split(";") if m.strip()] or list(METHODS))
    if unknown := [m for m in labels if m not in METHODS]:
        raise SystemExit(f"unknown method labels {unknown}; known: {list(METHODS)}")
    tasks = [(d, m, s) for d in args.datasets.split(",") for m in labels
             for s in range(args.seeds)]
    t0 = time.perf_counter()
    results = Parallel(n_jobs=args.n_jobs, verbose=5)(
        delayed(task)(d, m, s, budgets) for d, m, s in tasks)
    print(summarize(results, budgets))
    print(f"\n{len(results)} replays in {time.perf_counter() - t0:.0f} s wall clock")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh)


if __name__ == "__main__":
    main()
