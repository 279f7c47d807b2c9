"""Experiment design for scaling-law fits (issue 12): which runs to do next, under a cost
budget, so that a law predicts a costly target region well.

* :mod:`~scalebo.design.pool` — candidate rows with costs, and the target region;
* :mod:`~scalebo.design.posterior` — a multi-mode Laplace posterior over formula-law fits;
* :mod:`~scalebo.design.acquisition` — expected target-variance reduction per unit cost,
  and the random / cheapest / cost-weighted baselines;
* :mod:`~scalebo.design.replay` — ScaleBench's replay protocol with budget checkpoints;
* :mod:`~scalebo.design.groups` — the same replay over several groups (own fit per group,
  pooled R²; each group its own episode as ScaleBench, or one shared budget);
* :mod:`~scalebo.design.propose` — the next batch of a real campaign;
* :mod:`~scalebo.design.predictions` — the fit of its runs done and its target predictions;
* :mod:`~scalebo.design.runs_done` — which pool rows the runs done are, and pool columns
  the law does not read.
"""

from scalebo.design.acquisition import (
    BASELINES,
    DEFAULT_GAMMA,
    baseline_pick,
    condition_on_mean,
    variance_reduction,
    variance_scores,
)
from scalebo.design.groups import (
    GroupedCheckpoint,
    GroupedReplay,
    grouped_design_replay,
    separate_group_replays,
    split_groups,
)
from scalebo.design.pool import Pool, TargetRegion, evaluate_cost, make_pool, make_target
from scalebo.design.posterior import Mode, Posterior, build_posterior, jacobian
from scalebo.design.predictions import DoneFit, fit_and_predict
from scalebo.design.propose import Proposal, propose_batch, propose_groups, target_predictions
from scalebo.design.replay import METHODS, Checkpoint, DesignReplay, design_replay

__all__ = ["BASELINES", "DEFAULT_GAMMA", "METHODS", "Checkpoint", "DesignReplay", "DoneFit",
           "GroupedCheckpoint", "GroupedReplay", "Mode", "Pool", "Posterior", "Proposal",
           "TargetRegion", "baseline_pick", "build_posterior", "condition_on_mean",
           "design_replay", "evaluate_cost", "fit_and_predict", "grouped_design_replay",
           "jacobian", "make_pool", "make_target", "propose_batch", "propose_groups",
           "separate_group_replays", "split_groups", "target_predictions",
           "variance_reduction", "variance_scores"]
