"""Resource axes: training FLOPs under documented conventions, and GPU-hours.

A scaling law's "compute" axis can be counted several ways; the Gemstones study (McLeish et
al. 2025) shows that the compute-optimal allocation moves when the axis changes (FLOPs vs
GPU-hours) or when embeddings are counted or not. This module makes the axis explicit.

FLOPs per training token (forward + backward ≈ 3 × forward), for a decoder-only transformer of
``width`` (d_model), ``depth`` (n_layer), vocabulary ``vocab`` and context ``seq_len``
(:class:`FlopsConvention`):

* ``6N`` — ``6·N`` with ``N`` the table's parameter count (Kaplan et al. 2020, Eq. 2.1:
  ``C ≈ 6·N·D``). With Gemstones' ``params_active_precise`` this *includes* embeddings.
* ``6N_no_embed`` — ``6·(N − vocab·width)``: ``N`` without the (tied) embedding matrix, the
  count Kaplan et al. use; the Gemstones repository's ``--no_embeds`` subtracts 50304·width.
* ``kaplan`` — ``6·(N − vocab·width) + 6·depth·seq_len·width``: Kaplan et al. 2020, Table 1,
  ``C_forward = 2N + 2·n_layer·n_ctx·d_attn`` (attention over the context, d_attn = width),
  times 3 for training.
* ``chinchilla`` — the full count of Hoffmann et al. 2022, App. F: per sequence, forward =
  embeddings ``2·seq·vocab·w`` + per layer [QKV ``6·seq·w²``, logits ``2·seq²·w``, softmax
  ``3·h·seq²``, attention-weighted values ``2·seq²·w``, output projection ``2·seq·w²``, MLP
  ``4·seq·w·f``] + final logits ``2·seq·w·vocab``; training = 3 × forward; divided by
  ``seq`` per token (``f = ffw_ratio·w``, key size × heads = w; ``h`` heads).

GPU-hours: ``steps · seconds_per_step · nodes · gpus_per_node / 3600``. Gemstones logs
``num_nodes`` and ``seconds_per_step`` per run (trained on OLCF Frontier). **Assumption:**
8 GPUs per node — a Frontier node has 4 AMD MI250X, each two graphics compute dies that the
software sees as 8 GPUs; pass ``gpus_per_node`` to count otherwise (only the coefficient of
D*(R), N*(R) changes, not the exponents, if every run has the same GPUs per node).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import pandas as pd

from scalebo.data.runs import RunTable

__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "FlopsConvention",
    "flops",
    "flops_per_token",
    "gpu_hours",
    "resource_values",
]

#: GPUs per node assumed for Gemstones (OLCF Frontier: 4 MI250X = 8 GCDs seen as GPUs).
DEFAULT_GPUS_PER_NODE = 8
#: Gemstones vocabulary (padded GPT-NeoX tokenizer) and context length.
GEMSTONES_VOCAB = 50304
GEMSTONES_SEQ_LEN = 2048


class FlopsConvention(StrEnum):
    """How FLOPs per training token are counted (formulas in the module docstring)."""

    SIX_N = "6N"
    """``6·N``, N as given (Kaplan et al. 2020, Eq. 2.1)."""
    SIX_N_NO_EMBED = "6N_no_embed"
    """``6·(N − vocab·width)``: embeddings excluded."""
    KAPLAN = "kaplan"
    """``6·N_no_embed + 6·depth·seq_len·width`` (Kaplan et al. 2020, Table 1)."""
    CHINCHILLA = "chinchilla"
    """Full count of Hoffmann et al. 2022, App. F (embeddings, attention, MLP, logits)."""


def flops_per_token(
    convention: FlopsConvention | str = FlopsConvention.SIX_N,
    *,
    N: np.ndarray | float | None = None,
    width: np.ndarray | float | None = None,
    depth: np.ndarray | float | None = None,
    vocab: int = GEMSTONES_VOCAB,
    seq_len: int = GEMSTONES_SEQ_LEN,
    ffw_ratio: float = 4.0,
    n_heads: np.ndarray | float | None = None,
) -> np.ndarray:
    """Training FLOPs per token under ``convention`` (broadcast over the array arguments).

    Args:
        convention: A :class:`FlopsConvention` value.
        N: Parameters (needed by ``6N``, ``6N_no_embed``, ``kaplan``).
        width: d_model (needed by all but ``6N``).
        depth: Number of layers (``kaplan``, ``chinchilla``).
        vocab: Vocabulary size (tokens).
        seq_len: Context length (tokens).
        ffw_ratio: MLP hidden size / width (``chinchilla``).
        n_heads: Attention heads (``chinchilla`` softmax term; default ``width/128``).

    Returns:
        FLOPs per token, float64.
    """
    conv = FlopsConvention(convention)

    def need(value, what):
        if value is None:
            raise ValueError(f"flops convention {conv.value!r} needs {what}.")
        return np.asarray(value, dtype=np.float64)

    if conv is FlopsConvention.SIX_N:
        return 6.0 * need(N, "N (parameters)")
    w = need(width, "width (d_model)")
    if conv is FlopsConvention.SIX_N_NO_EMBED:
        return 6.0 * (need(N, "N (parameters)") - vocab * w)
    d = need(depth, "depth (layers)")
    if conv is FlopsConvention.KAPLAN:
        return 6.0 * (need(N, "N (parameters)") - vocab * w) + 6.0 * d * seq_len * w
    heads = w / 128.0 if n_heads is None else np.asarray(n_heads, dtype=np.float64)
    s = float(seq_len)
    f = ffw_ratio * w
    per_layer = (6 * s * w * w + 2 * s * s * w + 3 * heads * s * s + 2 * s * s * w
                 + 2 * s * w * w + 4 * s * w * f)
    forward = 2 * s * vocab * w + d * per_layer + 2 * s * w * vocab
    return 3.0 * forward / s


def flops(
    frame: pd.DataFrame,
    convention: FlopsConvention | str = FlopsConvention.SIX_N,
    **kwargs: float,
) -> np.ndarray:
    """Training FLOPs up to each row: ``flops_per_token(...) · D``, shape ``(n_rows,)``.

    ``frame`` needs ``D`` (tokens) and what the convention needs among ``N``, ``width``,
    ``depth``; keyword arguments go to :func:`flops_per_token`.
    """
    cols = {c: frame[c].to_numpy(dtype=np.float64) for c in ("N", "width", "depth")
            if c in frame.columns}
    per_token = flops_per_token(convention, **cols, **kwargs)
    return per_token * frame["D"].to_numpy(dtype=np.float64)


def gpu_hours(
    steps: np.ndarray | float,
    seconds_per_step: np.ndarray | float,
    num_nodes: np.ndarray | float,
    gpus_per_node: float = DEFAULT_GPUS_PER_NODE,
) -> np.ndarray:
    """GPU-hours ``steps · seconds_per_step · num_nodes · gpus_per_node / 3600``.

    Args:
        steps: Optimizer steps taken up to the checkpoint.
        seconds_per_step: Wall-clock seconds per step (whole job).
        num_nodes: Nodes used by the job.
        gpus_per_node: GPUs per node (see module docstring for the Gemstones assumption).

    Returns:
        GPU-hours, float64, broadcast shape of the inputs.
    """
    out = (np.asarray(steps, dtype=np.float64) * np.asarray(seconds_per_step, dtype=np.float64)
           * np.asarray(num_nodes, dtype=np.float64) * float(gpus_per_node) / 3600.0)
    if np.any(~np.isfinite(out)):
        raise ValueError(
            "gpu_hours: steps, seconds_per_step and num_nodes must be finite (a table "
            "without timing — e.g. Gemstones' benchmark losses — has no GPU-hour axis)."
        )
    return out


def resource_values(
    table: RunTable | pd.DataFrame,
    resource: str = "flops",
    *,
    convention: FlopsConvention | str | None = None,
    gpus_per_node: float = DEFAULT_GPUS_PER_NODE,
    **kwargs: float,
) -> np.ndarray:
    """The resource spent by each row, shape ``(n_rows,)``.

    ``resource="flops"``: the table's ``C`` column (FLOPs) when ``convention`` is None, else
    :func:`flops` under ``convention``. ``resource="gpu_hours"``: :func:`gpu_hours` from the
    columns ``step``, ``seconds_per_step``, ``num_nodes``.
    """
    frame = table.frame if isinstance(table, RunTable) else table
    if resource == "flops":
        if convention is None:
            if "C" not in frame:
                raise ValueError("resource 'flops' needs a column C (FLOPs), as load_runs "
                                 "adds (6*N*D unless the table has one), or a convention "
                                 f"(convention=...); the columns are {list(frame.columns)}")
            return frame["C"].to_numpy(dtype=np.float64)
        return flops(frame, convention, **kwargs)
    if resource == "gpu_hours":
        missing = [c for c in ("step", "seconds_per_step", "num_nodes") if c not in frame]
        if missing:
            raise ValueError(f"resource 'gpu_hours' needs columns {missing}.")
        return gpu_hours(frame["step"], frame["seconds_per_step"], frame["num_nodes"],
                         gpus_per_node)
    raise ValueError(f"unknown resource {resource!r}; expected 'flops' or 'gpu_hours'.")
