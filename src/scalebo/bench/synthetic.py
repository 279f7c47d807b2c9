"""A built-in synthetic grid with a known scaling law, for replays with a known truth.

Loss of a configuration (nats)::

    L(N, D, lr, bs) = E + A/N^α + B/D^β                       (Hoffmann et al. 2022, Eq. 2)
                      + c_lr · (log2 lr − log2 lr*(N, D))²
                      + c_bs · (log2 bs − log2 bs*(N, D))²
                      + ε,      ε ~ N(0, σ²) i.i.d., seeded

The optimum drifts with the cell as in StepLaw's hyperparameter laws (Li et al. 2025:
``lr* ∝ N^−0.713 · D^0.307``, ``bs* ∝ D^0.571``): the power-law optimum is computed, then
snapped to the nearest grid value in log space, so the penalty is exactly zero at one grid
configuration of every cell. Hence the **noise-free best loss of every (N, D) cell follows
the law exactly**; the seeded noise (σ = 0.005 nats by default, about StepLaw's run-to-run
scatter) moves the observed best by at most a few σ.

Axes (defaults): N (6 values, 5e7…1.6e9 parameters, ratio 2), D (7 values, 1e9…6.4e10
tokens, ratio 2), lr (8 values, ratio 2 from 1.25e-4), bs (5 values, ratio 2 from 64
sequences): 42 cells × 40 configurations = 1,680 runs spanning 3.3 decades of compute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from scalebo.data.runs import RunTable, load_runs

__all__ = ["SyntheticLaw", "DEFAULT_LAW", "make_synthetic", "synthetic_runs"]


@dataclass(frozen=True)
class SyntheticLaw:
    """Parameters of the synthetic loss surface (see the module docstring).

    Attributes:
        E, A, alpha, B, beta: ``L(N, D) = E + A/N^α + B/D^β`` (nats; N parameters, D tokens);
            defaults near Epoch AI's Chinchilla replication.
        lr0, lr_N, lr_D: ``lr* = lr0 · (N/1e8)^lr_N · (D/1e10)^lr_D`` before snapping.
        bs0, bs_D: ``bs* = bs0 · (D/1e10)^bs_D`` sequences, before snapping.
        c_lr, c_bs: curvature of the penalty, nats per squared doubling away from the optimum.
        noise: standard deviation σ of the i.i.d. noise, nats.
    """

    E: float = 1.82
    A: float = 478.0
    alpha: float = 0.347
    B: float = 2144.0
    beta: float = 0.367
    lr0: float = 2e-3
    lr_N: float = -0.7
    lr_D: float = 0.3
    bs0: float = 256.0
    bs_D: float = 0.57
    c_lr: float = 0.012
    c_bs: float = 0.006
    noise: float = 0.005

    def law_loss(self, N: np.ndarray, D: np.ndarray) -> np.ndarray:
        """Noise-free best loss ``E + A/N^α + B/D^β`` in nats, broadcast shape of N and D."""
        N, D = np.asarray(N, dtype=np.float64), np.asarray(D, dtype=np.float64)
        return self.E + self.A * N ** (-self.alpha) + self.B * D ** (-self.beta)


DEFAULT_LAW = SyntheticLaw()


def _snap(target: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Nearest value of ``values`` to each ``target`` in log space."""
    lv = np.log(values)
    return values[np.abs(np.log(target)[..., None] - lv).argmin(axis=-1)]


def make_synthetic(
    law: SyntheticLaw = DEFAULT_LAW,
    *,
    N: np.ndarray | None = None,
    D: np.ndarray | None = None,
    lr: np.ndarray | None = None,
    bs: np.ndarray | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """The synthetic product grid ``N × D × lr × bs`` with losses, as a run-table frame.

    Args:
        law: Surface parameters.
        N, D, lr, bs: Axis values (parameters, tokens, learning rate, sequences per batch);
            defaults in the module docstring.
        seed: Seed of the noise.

    Returns:
        One row per configuration, columns ``run_id, N, D, lr, bs, loss`` (nats), plus
        ``loss_noise_free`` and ``is_optimum`` (the configuration at the snapped optimum);
        ``n_cfg = len(N)·len(D)·len(lr)·len(bs)`` rows.
    """
    N = 5e7 * 2.0 ** np.arange(6) if N is None else np.asarray(N, dtype=np.float64)
    D = 1e9 * 2.0 ** np.arange(7) if D is None else np.asarray(D, dtype=np.float64)
    lr = 1.25e-4 * 2.0 ** np.arange(8) if lr is None else np.asarray(lr, dtype=np.float64)
    bs = 64.0 * 2.0 ** np.arange(5) if bs is None else np.asarray(bs, dtype=np.float64)
    gN, gD, glr, gbs = (a.ravel() for a in np.meshgrid(N, D, lr, bs, indexing="ij"))
    lr_opt = _snap(law.lr0 * (gN / 1e8) ** law.lr_N * (gD / 1e10) ** law.lr_D, lr)
    bs_opt = _snap(law.bs0 * (gD / 1e10) ** law.bs_D, bs)
    penalty = (law.c_lr * np.log2(glr / lr_opt) ** 2 + law.c_bs * np.log2(gbs / bs_opt) ** 2)
    clean = law.law_loss(gN, gD) + penalty
    noise = np.random.default_rng(seed).normal(0.0, law.noise, clean.shape)
    return pd.DataFrame({
        "run_id": [f"syn{i}" for i in range(clean.size)],
        "N": gN, "D": gD, "lr": glr, "bs": gbs,
        "loss": clean + noise,
        "loss_noise_free": clean,
        "is_optimum": (glr == lr_opt) & (gbs == bs_opt),
    })


def synthetic_runs(law: SyntheticLaw = DEFAULT_LAW, *, seed: int = 0, **axes: np.ndarray
                   ) -> RunTable:
    """:func:`make_synthetic` as a validated :class:`~scalebo.data.runs.RunTable` (axes lr, bs)."""
    frame = make_synthetic(law, seed=seed, **axes)
    return load_runs(frame, hyperparameters=("lr", "bs"), run_id="run_id",
                     source_name=f"synthetic(seed={seed})")
