"""ScaleBench replay (issue 12): every law family of the vocab and data_constrained tasks ×
seeds × budgets 1/5/10 %, for the ``variance`` design and the random / cheapest /
cost-weighted baselines, following the benchmark's protocol (:mod:`scalebo.design.replay`).

Data: ``$SCALEBO_DATA_DIR/scalebench/<task>/{train,test}-00000-of-00001.parquet`` (read in
place, never copied). Law formulas and bounds: the published families as written in
``tests/test_formula_law.py``. Writes ``docs/scalebench.md`` (our table beside the published
one) and ``docs/figures/scalebench.png`` (R² against budget); the hand-written part of the
report, from the ``HAND_WRITTEN`` marker line on, is kept.

    SCALEBO_DATA_DIR=/work/shared/datasets python benchmarks/scalebench.py --seeds 3 --jobs 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TASKS = {
    "vocab": dict(folder="vocab_scaling_law", cols=("V", "P", "D"), cost="P*D",
                  response="unigram_normalized_loss",
                  vmap=dict(P="non_vocab_parameters", V="vocab_size", D="num_characters")),
    "data_constrained": dict(folder="data_constrained_scaling_law", cols=("U", "N", "D"),
                             cost="6*N*D", response="loss",
                             vmap=dict(U="unique_tokens", N="params", D="tokens")),
}
METHODS = ("variance", "random", "cheapest", "cost_weighted")
BUDGETS = (0.01, 0.05, 0.1)
#: Starts of the scored checkpoint fits: the protocol's 64 (``--checkpoint-starts``). With 64,
#: one or two start sets in eight missed the lowest-SSE basin on some vocab sl_6 / sl_9 rows
#: where 128 did not (sl_6 seed 7 at 10 %: SSE 5.75 vs 5.27, R² 0.58 vs 0.99; docs/scalebench.md).
CHECKPOINT_STARTS = 64
#: README Table 2 of PlanarG/active-sl (mean, SD) per task and budget (SOURCE.md).
PUBLISHED = {
    "Random": ([(.54, .57), (.53, .62), (.59, .54)], [(-.74, .48), (-.36, .71), (.12, .62)]),
    "Cheapest": ([(.30, .71), (.53, .62), (.55, .63)], [(-.58, .64), (-.56, .65), (-.40, .64)]),
    "Cost-weighted random": ([(.86, .38), (.89, .27), (.83, .34)],
                             [(-.38, .70), (-.39, .65), (-.22, .67)]),
    "D-opt": ([(.95, .03), (.97, .01), (.97, .00)], [(.71, .43), (.80, .17), (.77, .16)]),
    "V-opt": ([(.96, .02), (.97, .00), (.98, .00)], [(.58, .53), (.83, .17), (.85, .13)]),
    "MSPE (theirs)": ([(.96, .02), (.98, .00), (.98, .00)],
                      [(.73, .37), (.85, .16), (.86, .11)]),
}
#: Everything from this line on in docs/scalebench.md is hand-written and kept by a rerun.
HAND_WRITTEN = "<!-- hand-written notes below: kept when benchmarks/scalebench.py reruns -->"
#: Keys of a checkpoint's target-region intervals kept per row (``Checkpoint.interval``).
INTERVAL_KEYS = ("coverage80", "coverage95", "width80")
LABEL = {"variance": "variance (ours)", "random": "Random (ours)", "cheapest": "Cheapest (ours)",
         "cost_weighted": "Cost-weighted random (ours)"}


def _families() -> dict[str, dict]:
    spec = importlib.util.spec_from_file_location("_families", ROOT / "tests/test_formula_law.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return {"vocab": mod.VOCAB, "data_constrained": mod.DATA_CONSTRAINED}


def load_task(task: str, law_key: str):
    """``(law, pool, target)`` of one task and law family, read in place from
    ``$SCALEBO_DATA_DIR/scalebench``."""
    from scalebo.design import make_pool, make_target
    from scalebo.laws.formula import formula_law

    t = TASKS[task]
    formula, bounds, _ = _families()[task][law_key]
    law = formula_law(formula, t["cols"], bounds, name=law_key)
    base = Path(os.environ["SCALEBO_DATA_DIR"]) / "scalebench" / t["folder"]
    train = pd.read_parquet(base / "train-00000-of-00001.parquet")
    test = pd.read_parquet(base / "test-00000-of-00001.parquet")
    pool = make_pool(train, law, t["cost"], response=t["response"], variable_map=t["vmap"])
    target = make_target(test, law, response=t["response"], variable_map=t["vmap"])
    return law, pool, target


def run_one(task: str, law_key: str, method: str, seed: int,
            n_starts: int = CHECKPOINT_STARTS) -> list[dict]:
    """One replay; rows ``{task, law, method, seed, budget, r2, n_observed, ...}``."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from scalebo.design import design_replay

    law, pool, target = load_task(task, law_key)
    cpu = time.process_time()
    rep = design_replay(pool, target, law, BUDGETS, method=method, seed=seed,
                        n_starts=n_starts)
    cpu = time.process_time() - cpu
    return [dict(task=task, law=law_key, method=method, seed=seed, budget=c.budget, r2=c.r2,
                 n_observed=c.n_observed, spent=c.spent_fraction, status=c.status,
                 checkpoint_starts=n_starts, seconds=rep.seconds, cpu=cpu,
                 **{k: c.interval.get(k) for k in INTERVAL_KEYS}) for c in rep.checkpoints]


def _starts(df: pd.DataFrame) -> str:
    """The checkpoint starts of the rows ``df``, e.g. ``64`` (``64/128`` if mixed)."""
    col = df["checkpoint_starts"] if "checkpoint_starts" in df else pd.Series([64])
    return "/".join(str(int(v)) for v in sorted(col.fillna(64).unique()))


def _cell(values: pd.Series) -> str:
    return f"{values.mean():.2f} ± {values.std(ddof=0):.2f}"


def _calibration_lines(df: pd.DataFrame) -> list[str]:
    """The calibration table: per method, task and budget, the mean fraction of target rows
    inside the checkpoint's 80 % / 95 % intervals and the median 80 % width (rows of older
    runs without interval columns give no table)."""
    if "coverage80" not in df or df.coverage80.isna().all():
        return []
    out = ["", "Calibration of the checkpoints' target-region intervals (`Checkpoint.interval`:"
           " the fit's multi-mode Laplace posterior with the residual noise SSE/(n − p), "
           "normal intervals for a new observation at every target row): mean fraction of "
           "target rows inside the 80 % / 95 % interval over (law, seed), and the median 80 %"
           " width in response units. Failed fits have no interval and are left out.", "",
           "| method | task | 1 % | 5 % | 10 % |", "|---|---|---|---|---|"]
    for m in METHODS:
        for t in TASKS:
            cells = []
            for b in BUDGETS:
                g = df[(df.task == t) & (df.method == m) & np.isclose(df.budget, b)]
                g = g[g.coverage80.notna()]
                cells.append(f"{g.coverage80.mean():.2f} / {g.coverage95.mean():.2f} "
                             f"(w {g.width80.median():.3g})" if len(g) else "–")
            out.append(f"| {m} | {t} | " + " | ".join(cells) + " |")
    return out


def write_report(df: pd.DataFrame, seeds: int, wall: float, out: Path, jobs: int = 2) -> None:
    """``docs/scalebench.md`` and the figure; the checkpoint starts are read from the rows
    (rows of older runs, without the column, used the protocol's 64)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["# ScaleBench replay: variance design vs baselines", "",
             "Target-region R² (clipped to [−1, 1], −1 for a failed fit), mean ± SD over all "
             f"(law family, seed) pairs: 10 law families per task × **{seeds} seed(s)** "
             f"(the published table uses 10 seeds). Generated by `benchmarks/scalebench.py` "
             f"in {wall / 60:.1f} min on {jobs} worker(s). Protocol: `scalebo.design.replay` "
             "(pilot of cheapest rows for the design, rows that fit the final budget, the fit "
             "from before the spend first went past b, natural least squares, the best of "
             f"{_starts(df)} seeded starts, the protocol's 64; the variance design adds its "
             "own running fit's optima on the same rows as warm starts).", "",
             "| method | vocab 1 % | 5 % | 10 % | data_constrained 1 % | 5 % | 10 % |",
             "|---|---|---|---|---|---|---|"]
    for m in METHODS:
        cells = [_cell(df[(df.task == t) & (df.method == m) & np.isclose(df.budget, b)].r2)
                 for t in TASKS for b in BUDGETS]
        lines.append(f"| **{LABEL[m]}** | " + " | ".join(cells) + " |")
    for name, (voc, dc) in PUBLISHED.items():
        lines.append(f"| {name} (published) | "
                     + " | ".join(f"{a:.2f} ± {s:.2f}" for a, s in [*voc, *dc]) + " |")
    lines += ["", "Per-law mean R² of the variance design (over seeds):", "",
              "| task | law | 1 % | 5 % | 10 % | mean rows at 10 % | mean seconds/run (CPU) |",
              "|---|---|---|---|---|---|---|"]
    v = df[df.method == "variance"]
    col = "cpu" if "cpu" in v else "seconds"
    for (task, law), g in v.groupby(["task", "law"], sort=False):
        r = [g[np.isclose(g.budget, b)].r2.mean() for b in BUDGETS]
        n10 = g[np.isclose(g.budget, 0.1)].n_observed.mean()
        lines.append(f"| {task} | {law} | " + " | ".join(f"{x:.3f}" for x in r)
                     + f" | {n10:.0f} | {g[col].mean():.1f} |")
    lines += _calibration_lines(df)
    ep = df.drop_duplicates(["task", "law", "method", "seed"])
    col = "cpu" if "cpu" in ep else "seconds"  # CPU seconds of the replay (older runs: wall)
    lines += ["", f"Seconds per (law, seed) episode ({'CPU' if col == 'cpu' else 'wall'}, "
              "mean / median; 1 worker):", "", "| method | "
              + " | ".join(TASKS) + " |", "|---|" + "---|" * len(TASKS)]
    for m in METHODS:
        cells = [ep[(ep.task == t) & (ep.method == m)][col] for t in TASKS]
        lines.append(f"| {m} | " + " | ".join(f"{c.mean():.1f} / {c.median():.1f}"
                                               for c in cells) + " |")
    per_task = ep.groupby("task")[col].sum() * 10 / seeds / 2 / 60
    lines += ["", "The full protocol (10 seeds × 4 methods × 10 laws) would take about "
              + ", ".join(f"{per_task.get(t, float('nan')):.1f} min for {t}" for t in TASKS)
              + " on 2 workers (this run's seconds × 10 / seeds / 2).",
              "", "![R² against budget](figures/scalebench.png)", ""]
    kept = out.read_text().split(HAND_WRITTEN, 1) if out.exists() else []
    out.write_text("\n".join(lines) + (HAND_WRITTEN + kept[1] if len(kept) == 2 else ""))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, task in zip(axes, TASKS, strict=True):
        for m in METHODS:
            g = df[(df.task == task) & (df.method == m)].groupby("budget").r2
            ax.errorbar(np.array(BUDGETS) * 100, g.mean().to_numpy(), yerr=g.std(ddof=0),
                        marker="o", capsize=3, label=LABEL[m])
        mspe = PUBLISHED["MSPE (theirs)"][0 if task == "vocab" else 1]
        ax.plot(np.array(BUDGETS) * 100, [a for a, _ in mspe], "k--", label="MSPE (published)")
        ax.set(title=task, xlabel="budget (% of pool cost)", xscale="log", ylim=(-1.05, 1.05))
    axes[0].set_ylabel("target-region R²")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    (ROOT / "docs/figures").mkdir(exist_ok=True)
    fig.savefig(ROOT / "docs/figures/scalebench.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds per law (default 10)")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers (default 2)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    parser.add_argument("--checkpoint-starts", type=int, default=CHECKPOINT_STARTS,
                        help="starts of the scored checkpoint fits (default: the protocol's 64)")
    parser.add_argument("--raw", default=None, help="optional path for the per-run rows (JSON)")
    parser.add_argument("--from-raw", default=None, help="rebuild the report from --raw rows")
    args = parser.parse_args()
    if args.from_raw:
        df = pd.DataFrame(json.loads(Path(args.from_raw).read_text()))
        write_report(df, int(df.seed.nunique()), float("nan"), ROOT / "docs/scalebench.md")
        return
    from joblib import Parallel, delayed

    fams = _families()
    jobs = [(t, k, m, s) for s in range(args.seeds) for m in args.methods.split(",")
            for t in TASKS for k in fams[t]]
    jobs.sort(key=lambda j: j[2] != "variance")  # longest first
    t0 = time.perf_counter()
    out = Parallel(n_jobs=args.jobs, verbose=5)(delayed(run_one)(*j, args.checkpoint_starts)
                                                for j in jobs)
    wall = time.perf_counter() - t0
    df = pd.DataFrame([r for rows in out for r in rows])
    if args.raw:
        Path(args.raw).write_text(json.dumps(df.to_dict(orient="records")))
    write_report(df, args.seeds, wall, ROOT / "docs/scalebench.md", args.jobs)
    print(f"done in {wall / 60:.1f} min")


if __name__ == "__main__":
    main()
