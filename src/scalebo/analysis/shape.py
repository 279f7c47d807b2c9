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

An optimum on an edge of the search box (e.g. depth = ``d_max``) is not an optimum of the law,
only of the box: :attr:`OptimalShape.at_bound` names the edge(s) it sits on and
:func:`optimal_shape` warns (``UserWarning``) saying which range argument to widen.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from scalebo.data.columns import to_numbers
from scalebo.data.resources import FlopsConvention, flops_per_token
from scalebo.data.runs import RunTable
from scalebo.fitting.law_inputs import check_law_inputs
from scalebo.fitting.robust import DEFAULT_HUBER_DELTA, FitResult, fit_law
from scalebo.laws import WIDTH_DEPTH, PowerLawSum

__all__ = ["OptimalShape", "ShapeSpec", "fit_width_depth", "optimal_shape"]


@dataclass(frozen=True)
class ShapeSpec:
    """Parameter count and FLOPs per token of a shape ``(width, depth)``.

    ``N(w, d) = layer_coef·d·w² + vocab·w`` (the second term only if ``embeddings``).

    **What the defaults assume:** a GPT-2/Kaplan-style block of 12·w² parameters per layer
    (4·w² multi-head attention with full-width K and V, plus 8·w² for an MLP of ratio 4;
    biases and norms ignored) and *one* 50,304 × w embedding matrix shared by the input and
    the output head (tied), counted in ``N``. A model family built differently needs its own
    numbers, or its ``N`` — and so the optimal shape — will be off:

    - ``layer_coef`` = parameters of one layer / width² of that family;
    - ``vocab`` = embedding *rows* counted in ``N``: the vocabulary size if input and output
      embeddings are tied, twice it if they are not.

    Example, Gemstones (McLeish et al. 2025): GQA attention (3·w²) + GEGLU MLP of ratio 4
    (12·w²) and untied embeddings, so ``ShapeSpec(layer_coef=15, vocab=2 * 50304)``. That
    reproduces their ``params_active_precise`` to 0.04 % (1.5 % for width 384, whose three
    heads do not split into K/V groups exactly); the default undercounts every Gemstones model
    by more than 10 %. Compare a spec with a few published counts of the family before
    trusting an optimal shape.

    ``vocab`` is also what ``6N_no_embed`` and ``kaplan`` subtract from ``N`` and the
    vocabulary the ``chinchilla`` convention counts logits over; with ``vocab = 2·V`` the
    first two remove both embedding matrices, and ``chinchilla`` would count 2·V logits, so
    use ``6N`` (what the Gemstones numbers use) or a spec with ``vocab = V`` there.

    Attributes:
        layer_coef: Parameters per layer per width² (dimensionless); default 12, a standard
            multi-head attention + ratio-4 MLP block.
        vocab: Embedding rows counted in ``N`` (tokens): the vocabulary size (default 50,304)
            with tied embeddings, 2× it with untied ones; adds ``vocab·width`` parameters.
        embeddings: Count the embedding matrix in ``N`` (Gemstones' N does).
        convention: FLOPs per token (:class:`~scalebo.data.resources.FlopsConvention`), applied
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
        at_bound: Edges of the search box the optimum lies on, among ``"depth_min"``,
            ``"depth_max"`` (``depth_range``), ``"width_min"``, ``"width_max"``
            (``width_range``); empty for an interior optimum. Non-empty means the law wants a
            shape outside the box: widen that range before using the shape.
    """

    C: float
    width: float
    depth: int
    N: float
    D: float
    tokens_per_param: float
    loss: float
    n_candidates: int
    at_bound: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """Fields by name; ``at_bound`` as a list (JSON-ready)."""
        out = dict(self.__dict__)
        out["at_bound"] = list(self.at_bound)
        return out


def fit_width_depth(
    table: RunTable | pd.DataFrame,
    *,
    huber_delta: float = DEFAULT_HUBER_DELTA,
    starts: np.ndarray | None = None,
    law: PowerLawSum = WIDTH_DEPTH,
) -> FitResult:
    """Fit ``E + A·w^−α + B·d^−β + G·D^−γ`` to rows with ``width``, ``depth``, ``D``, ``loss``.

    Every row (run or checkpoint) is an observation; ``starts`` defaults to the law's
    data-aware grid ``law.start_grid(law.prepare(X))``: for :data:`~scalebo.laws.WIDTH_DEPTH`
    648 starts (3 values of ``log E`` × 3 of each exponent × 2 term scales per coefficient),
    fewer only if a start falls outside the parameter bounds (an input median outside
    ~e^−28 … e^80).
    """
    frame = table.frame if isinstance(table, RunTable) else table
    missing = [c for c in (*law.variables, "loss") if c not in frame.columns]
    if missing:
        raise ValueError(f"fit_width_depth needs columns {missing}; got {list(frame.columns)}.")
    source = table.source if isinstance(table, RunTable) else "fit_width_depth"
    check_law_inputs(frame if isinstance(table, RunTable) else frame.reset_index(drop=True),
                     law, "loss", source)
    X = frame[list(law.variables)].apply(to_numbers).to_numpy(dtype=np.float64)
    return fit_law(law, X, to_numbers(frame["loss"]).to_numpy(dtype=np.float64),
                   huber_delta=huber_delta,
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


#: Relative distance in width below which a continuous-width optimum counts as on the edge.
#: An optimum beyond the edge returns the grid's end point exactly; the tolerance also catches
#: a refined optimum pressed against it (the bounded refinement never evaluates the edge).
_WIDTH_EDGE_RTOL = 1e-6


def _edges(depth: float, width: float, depths: np.ndarray, widths: np.ndarray,
           continuous: bool) -> tuple[str, ...]:
    """Edges of the searched box (``depths`` × ``widths``) that ``(width, depth)`` lies on.

    A dimension with a single value (fixed by the caller) is not searched and never reported.
    """
    out: list[str] = []
    if depths.size > 1:
        out += ["depth_min"] if depth == depths[0] else []
        out += ["depth_max"] if depth == depths[-1] else []
    if widths.size > 1:
        rtol = _WIDTH_EDGE_RTOL if continuous else 0.0
        out += ["width_min"] if abs(width / widths[0] - 1.0) <= rtol else []
        out += ["width_max"] if abs(width / widths[-1] - 1.0) <= rtol else []
    return tuple(out)


def _warn_at_bound(C: float, at_bound: tuple[str, ...], depth: int, width: float,
                   depth_range: tuple[int, int], width_range: tuple[float, float]) -> None:
    """One ``UserWarning`` naming each edge hit, its value and the argument to widen."""
    ranges = {"depth": tuple(depth_range), "width": tuple(width_range)}
    parts = []
    for edge in at_bound:
        dim, side = edge.split("_")
        value = f"{depth}" if dim == "depth" else f"{width:.6g}"
        where = f"{dim} = {value} at the {'lower' if side == 'min' else 'upper'} end of " \
                f"{dim}_range = {ranges[dim]}"
        if edge == "depth_min" and depth <= 1:
            parts.append(f"{edge}: {where}, the smallest possible depth (nothing to widen)")
        else:
            move = "lower" if side == "min" else "raise"
            parts.append(f"{edge}: {where}; widen {dim}_range ({move} {dim}_range"
                         f"[{0 if side == 'min' else 1}])")
    warnings.warn(
        f"optimal_shape at C = {C:.3g} FLOPs: the optimum lies on the edge of the search "
        "range, so it is the best shape in the box, not the law's optimum. "
        + "; ".join(parts) + ".",
        UserWarning, stacklevel=3,
    )


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

    Returns:
        The optimum; its ``at_bound`` names the edges of the box it lies on (the searched
        extremes: with ``width_multiple`` the first/last multiple inside ``width_range``).

    Warns:
        UserWarning: the optimum lies on an edge of ``depth_range`` or ``width_range``
            (naming the edge, its value and the argument to widen).

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
    at_bound = _edges(best_d, best_w, depths, widths, continuous=not width_multiple)
    if at_bound:
        _warn_at_bound(float(C), at_bound, int(best_d), best_w, depth_range, width_range)
    return OptimalShape(C=float(C), width=best_w, depth=int(best_d), N=N, D=D,
                        tokens_per_param=D / N, loss=best_L, n_candidates=int(ok.sum()),
                        at_bound=at_bound)
