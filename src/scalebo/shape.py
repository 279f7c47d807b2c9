"""Width/depth laws and the compute-optimal model shape (Gemstones, McLeish et al. 2025).

The law ``L(w, d, D) = E + A·w^(−α) + B·d^(−β) + G·D^(−γ)`` (:data:`scalebo.laws.WIDTH_DEPTH`;
``w`` = width (d_model), ``d`` = depth (layers), ``D`` = tokens, ``L`` in nats) is fitted with
the usual robust estimator. For a FLOP budget ``C`` the optimal *shape* minimizes the
predicted loss over shapes, the tokens being what the budget leaves:

    D(w, d) = C / flops_per_token(w, d),   flops_per_token = convention of :class:`ShapeSpec`

with the parameter count ``N(w, d) = layer_coef·d·w² (+ vocab·w if embeddings counted)``
(``layer_coef = 12``: 4w² attention + 8w² MLP of ratio 4 per layer, Kaplan et al. 2020).

Search (:func:`optimal_shape`): a dense grid over integer depth ``d ∈ [d_min, d_max]`` ×
width — every multiple of ``width_multiple`` in ``[w_min, w_max]``, or, with
``width_multiple=None``, a log-spaced grid of ``n_width`` widths refined by a bounded scalar
minimization in ``log w`` at the best grid depths (the best depth and its two neighbours).
Shapes whose tokens would be < 1 are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from scalebo.fit import DEFAULT_HUBER_DELTA, FitResult, fit_law
from scalebo.laws import WIDTH_DEPTH, PowerLawSum
from scalebo.resources import FlopsConvention, flops_per_token
from scalebo.runs import RunTable

__all__ = ["OptimalShape", "ShapeSpec", "fit_width_depth", "optimal_shape"]


@dataclass(frozen=True)
class ShapeSpec:
    """Parameter count and FLOPs per token of a shape ``(width, depth)``.

    Attributes:
        layer_coef: Parameters per layer per width², 12 for a standard block.
        vocab: Vocabulary size (tokens); embeddings add ``vocab·width`` parameters.
        embeddings: Count the embedding matrix in ``N`` (Gemstones' N does).
        convention: FLOPs per token (:class:`~scalebo.resources.FlopsConvention`), applied
            to ``N(w, d)``: ``6N`` counts ``6·N(w, d)``.
        seq_len: Context length (tokens), for the ``kaplan`` / ``chinchilla`` conventions.
    """

    layer_coef: float = 12.0
    vocab: int = 50304
    embeddings: bool = True
    convention: FlopsConvention | str = FlopsConvention.SIX_N
    seq_len: int = 2048

    def n_params(self, width: np.ndarray | float, depth: np.ndarray | float) -> np.ndarray:
        """Parameters ``layer_coef·d·w² (+ vocab·w)``, broadcast shape of the inputs."""
        w = np.asarray(width, dtype=np.float64)
        d = np.asarray(depth, dtype=np.float64)
        return self.layer_coef * d * w * w + (self.vocab * w if self.embeddings else 0.0)

    def flops_per_token(self, width: np.ndarray | float, depth: np.ndarray | float) -> np.ndarray:
        """Training FLOPs per token of the shape under ``convention``."""
        N = self.n_params(width, depth)
        if FlopsConvention(self.convention) in (FlopsConvention.SIX_N_NO_EMBED,
                                               FlopsConvention.KAPLAN) and not self.embeddings:
            N = N + self.vocab * np.asarray(width, dtype=np.float64)  # they subtract it
        return flops_per_token(self.convention, N=N, width=width, depth=depth,
                               vocab=self.vocab, seq_len=self.seq_len)


@dataclass(frozen=True)
class OptimalShape:
    """Compute-optimal shape at a FLOP budget.

    Attributes:
        C: Budget in FLOPs.
        width: d_model (float; a multiple of the requested multiple on a grid search).
        depth: Layers (integer valued).
        N: Parameters of the shape (:meth:`ShapeSpec.n_params`).
        D: Tokens, ``C / flops_per_token``.
        tokens_per_param: ``D / N``.
        loss: Predicted loss in nats.
        n_candidates: Shapes evaluated on the grid.
    """

    C: float
    width: float
    depth: int
    N: float
    D: float
    tokens_per_param: float
    loss: float
    n_candidates: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def fit_width_depth(
    table: RunTable | pd.DataFrame,
    *,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    starts: np.ndarray | None = None,
    law: PowerLawSum = WIDTH_DEPTH,
) -> FitResult:
    """Fit ``E + A·w^−α + B·d^−β + G·D^−γ`` to rows with ``width``, ``depth``, ``D``, ``loss``.

    Every row (run or checkpoint) is an observation; ``starts`` defaults to the law's grid
    (5,184 starts, data-aware coefficients).
    """
    frame = table.frame if isinstance(table, RunTable) else table
    missing = [c for c in (*law.variables, "loss") if c not in frame.columns]
    if missing:
        raise ValueError(f"fit_width_depth needs columns {missing}; got {list(frame.columns)}.")
    X = frame[list(law.variables)].to_numpy(dtype=np.float64)
    return fit_law(law, X, frame["loss"].to_numpy(dtype=np.float64), huber_delta=huber_delta,
                   starts=starts)


def _loss_fn(fit: FitResult):
    law = fit.law
    if not isinstance(law, PowerLawSum) or len(law.variables) != 3:
        raise ValueError(
            f"optimal_shape needs a law in (width, depth, tokens); got {law.name!r} "
            f"{law.variables}."
        )

    def loss(w, d, D):
        X = np.column_stack([np.ravel(w), np.ravel(d), np.ravel(D)])
        return fit.predict(X).reshape(np.shape(w))

    return loss


def optimal_shape(
    fit: FitResult,
    C: float,
    *,
    spec: ShapeSpec | None = None,
    depth_range: tuple[int, int] = (1, 256),
    width_range: tuple[float, float] = (64.0, 65536.0),
    width_multiple: int | None = 64,
    n_width: int = 2048,
) -> OptimalShape:
    """The (width, depth, tokens) minimizing the fitted loss at ``C`` FLOPs (module docstring).

    Args:
        fit: A fitted law in ``(width, depth, D)`` (e.g. :func:`fit_width_depth`).
        C: FLOP budget.
        spec: Parameter count and FLOPs per token (default :class:`ShapeSpec`).
        depth_range: Inclusive integer range of depths.
        width_range: Inclusive range of widths.
        width_multiple: Widths are multiples of this; ``None`` searches continuous widths.
        n_width: Log-spaced grid size for continuous widths.

    Raises:
        ValueError: no shape in range leaves at least one token for the budget.
    """
    spec = spec or ShapeSpec()
    loss_fn = _loss_fn(fit)
    depths = np.arange(int(depth_range[0]), int(depth_range[1]) + 1, dtype=np.float64)
    lo, hi = map(float, width_range)
    if width_multiple:
        m = int(width_multiple)
        widths = np.arange(int(np.ceil(lo / m)) * m, hi + 0.5, m, dtype=np.float64)
    else:
        widths = np.geomspace(lo, hi, int(n_width))
    if widths.size == 0 or depths.size == 0:
        raise ValueError(f"empty shape grid: widths {width_range}, depths {depth_range}.")
    W, Dp = np.meshgrid(widths, depths, indexing="ij")
    tokens = float(C) / spec.flops_per_token(W, Dp)
    ok = tokens >= 1.0
    if not ok.any():
        raise ValueError(f"no shape in range leaves ≥ 1 token at C = {C:.3g} FLOPs.")
    L = np.full(W.shape, np.inf)
    L[ok] = loss_fn(W[ok], Dp[ok], tokens[ok])
    i, j = np.unravel_index(np.argmin(L), L.shape)
    best_w, best_d, best_L = float(W[i, j]), float(Dp[i, j]), float(L[i, j])
    if not width_multiple:
        for jj in range(max(j - 1, 0), min(j + 2, depths.size)):
            d = depths[jj]
            a, b = np.log(widths[max(i - 1, 0)]), np.log(widths[min(i + 1, widths.size - 1)])

            def f(logw, d=d):
                w = np.exp(logw)
                D = float(C) / float(spec.flops_per_token(w, d))
                return float(loss_fn(np.array([w]), np.array([d]), np.array([D]))[0]) \
                    if D >= 1 else np.inf

            res = minimize_scalar(f, bounds=(a, b), method="bounded",
                                  options={"xatol": 1e-10})
            if res.fun < best_L:
                best_w, best_d, best_L = float(np.exp(res.x)), float(d), float(res.fun)
    N = float(spec.n_params(best_w, best_d))
    D = float(C) / float(spec.flops_per_token(best_w, best_d))
    return OptimalShape(C=float(C), width=best_w, depth=int(best_d), N=N, D=D,
                        tokens_per_param=D / N, loss=best_L, n_candidates=int(ok.sum()))
