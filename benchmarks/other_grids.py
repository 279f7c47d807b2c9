"""The default method on grids shaped unlike the two shared ones, with a known truth.

Writes three synthetic run tables whose losses follow Chinchilla's published law
(Hoffmann et al. 2022: ``L = 1.69 + 406.4/N^0.34 + 410.7/D^0.28``, nats; N parameters,
D tokens) plus hyperparameter penalties and multiplicative log-normal noise, then replays
the default method (Window ``spent``, GP + EI per unit cost, envelope incumbent, fill-in,
law posterior) on each and writes the report (errors at 1e25 FLOPs, floor oracles,
calibration of the law posterior):

* ``moving_optimum``: 7 N × 6 D × 8 learning rates × 4 batch sizes (1,344 runs) whose
  optimum moves with scale as StepLaw reports (lr* ∝ N^−0.71·D^0.31, batch* ∝ D^0.57);
  columns ``params``, ``tokens`` (mapped to N, D), ``lr``, ``batch``, ``loss``.
* ``lr_only``: 6 N × 5 D × 8 learning rates (240 runs), a learning-rate axis only, the
  optimum moving with N.
* ``envelope_heavy``: 6 N × 6 D × 2 learning rates (72 runs): the reference envelope
  costs about a third of the grid, so small budgets cannot buy it.

    python benchmarks/other_grids.py --out runs/other --seeds 10 --jobs 2 [--with-no-anchor]

The grids are written to ``OUT/grids`` (the same ``--data-seed`` gives the same files), the
records to ``OUT/records``, the report to ``OUT/report/report.md``; a rerun skips finished
cells.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28  # Hoffmann et al. (2022), approach 3


def chinchilla(N: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Chinchilla's published law, nats."""
    return E + A / N**ALPHA + B / D**BETA


def _table(rng: np.random.Generator, Ns: np.ndarray, Ds: np.ndarray, settings, noise: float,
           names: tuple[str, str] = ("N", "D")) -> pd.DataFrame:
    """One row per (N, D) and hyperparameter setting: ``settings(N, D)`` yields
    ``(columns, penalty in nats)``; loss = (Chinchilla + penalty) × log-normal(0, noise)."""
    rows = []
    for N in Ns:
        for D in Ds:
            for columns, pen in settings(N, D):
                rows.append({names[0]: N, names[1]: D, **columns,
                             "loss": (chinchilla(N, D) + pen) * rng.lognormal(0, noise)})
    return pd.DataFrame(rows)


def moving_optimum(rng: np.random.Generator) -> pd.DataFrame:
    def settings(N, D):
        lr_opt = 3e-3 * (N / 1e8) ** -0.71 * (D / 1e10) ** 0.31
        bs_opt = 256 * (D / 1e10) ** 0.57
        for lr in np.geomspace(1e-4, 1.6e-2, 8):
            for bs in (64, 128, 256, 512):
                u = np.log(lr / lr_opt)
                pen = 0.04 * u**2 + 0.015 * np.log(bs / bs_opt) ** 2
                pen += 0.5 * max(u - 1.2, 0.0) ** 2  # too high a learning rate diverges
                yield {"lr": lr, "batch": bs}, pen

    return _table(rng, np.geomspace(3e7, 2e9, 7), np.geomspace(1e9, 1e11, 6), settings,
                  0.0015, names=("params", "tokens"))


def lr_only(rng: np.random.Generator) -> pd.DataFrame:
    def settings(N, D):
        lr_opt = 2e-3 * (N / 1e8) ** -0.7
        for lr in np.geomspace(1e-4, 4e-3, 8):
            yield {"lr": lr}, 0.03 * np.log(lr / lr_opt) ** 2

    return _table(rng, np.geomspace(5e7, 1.6e9, 6), np.geomspace(1e9, 1.6e10, 5), settings,
                  0.002)


def envelope_heavy(rng: np.random.Generator) -> pd.DataFrame:
    def settings(N, D):
        yield {"lr": 1e-3}, 0.0
        yield {"lr": 3e-3}, 0.02

    return _table(rng, np.geomspace(5e7, 3e9, 6), np.geomspace(1e9, 2e11, 6), settings, 0.003)


GRIDS = {"moving_optimum": (moving_optimum, {"mapping": {"N": "params", "D": "tokens"}}),
         "lr_only": (lr_only, {}), "envelope_heavy": (envelope_heavy, {})}


def write_grids(folder: Path, data_seed: int) -> dict[str, dict]:
    """Write every grid as CSV; returns the sweep's ``datasets`` mapping."""
    folder.mkdir(parents=True, exist_ok=True)
    datasets = {}
    for k, (name, (make, options)) in enumerate(GRIDS.items()):
        path = folder / f"{name}.csv"
        make(np.random.default_rng([data_seed, k])).to_csv(path, index=False)
        datasets[name] = {"source": str(path.resolve()), **options}
    return datasets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/other_grids")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=0, help="noise seed of the grids")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--with-no-anchor", action="store_true",
                    help="also replay the default without its anchor run (anchor: 0; how "
                         "0.3.8's anchor was measured on these grids)")
    args = ap.parse_args()

    from scalebo.bench.report import write_report
    from scalebo.bench.sweep import SweepConfig, run_sweep

    out = Path(args.out)
    datasets = write_grids(out / "grids", args.data_seed)
    methods = {"window": {"strategy": "window", "schedule": "spent"}}
    if args.with_no_anchor:
        methods["window_no_anchor"] = {**methods["window"], "anchor": 0.0}
    config = SweepConfig.from_dict({
        "name": "other_grids", "seeds": args.seeds, "budgets": ["1%", "5%", "10%", "25%"],
        "datasets": datasets,
        "method_defaults": {"fantasize": True, "bootstrap_samples": 200},
        "methods": methods})
    t0 = time.perf_counter()
    run_sweep(config, out / "records", n_jobs=args.jobs)
    path = write_report(out / "records", out / "report")
    print(f"{time.perf_counter() - t0:.0f} s; report: {path}", file=sys.stderr)
    text = path.read_text()
    for title in ("## |Relative extrapolation error| (%) at 1e25 FLOPs",
                  "### Pooled over datasets"):
        start = text.find(title)
        if start >= 0:
            end = text.find("\n#", start + len(title))
            print(text[start:end if end > 0 else None].strip(), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
