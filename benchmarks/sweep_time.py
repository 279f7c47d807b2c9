"""Wall time of a benchmark sweep (default: the study's main comparison).

Runs every cell of a sweep config from scratch (a fresh temporary record directory unless
``--out`` is given, in which case finished cells are skipped as usual) and prints the wall
time, the cells per second and the failures. Needs ``SCALEBO_DATA_DIR`` for the public
datasets.

    python benchmarks/sweep_time.py                       # the full main comparison
    python benchmarks/sweep_time.py --seeds 0-1 --jobs 2  # a documented subset
    python benchmarks/sweep_time.py benchmarks/configs/smoke.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from scalebo.bench.sweep import SweepConfig, run_sweep
from scalebo.cli.bench import _seeds

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default=str(HERE / "configs/main_comparison.yaml"))
    parser.add_argument("--seeds", type=_seeds, default=None, help="subset, e.g. 0-1")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", default=None, help="record directory (default: temporary)")
    args = parser.parse_args(argv)
    config = SweepConfig.from_yaml(args.config)
    if args.seeds is not None:
        config = config.with_seeds(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or tmp
        t0 = time.perf_counter()
        summary = run_sweep(config, out, n_jobs=args.jobs, progress=True)
        wall = time.perf_counter() - t0
    print(summary.describe(), file=sys.stderr)
    result = {"config": config.name, "datasets": [d.name for d in config.datasets],
              "methods": [m.name for m in config.methods], "seeds": list(config.seeds),
              "budgets": list(config.budgets), "cells": summary.total, "ran": summary.ran,
              "tasks": summary.n_tasks, "failed": summary.failed, "jobs": args.jobs,
              "wall_seconds": round(wall, 1),
              "cells_per_second": round(summary.ran / wall, 4) if wall > 0 else None}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
