"""Warnings for run tables whose numbers load but look like the wrong units or columns.

:func:`load_runs` checks that N, D, C and loss are positive numbers; these checks look at the
table as a whole and only warn (a real table may be unusual):

* every run has fewer tokens than parameters (``D < N``): N and D are likely swapped (LLM
  runs train on 1–10,000 tokens per parameter);
* the largest ``N`` is below :data:`MIN_PARAMS` or the largest ``D`` below :data:`MIN_TOKENS`:
  sizes given in millions or billions (N is a parameter count, D a token count);
* a text column that varies inside (N, D) cells like a setting but is not among the default
  (numeric) axes (:func:`text_settings`): its runs would be compared as one setting;
* a default axis with a different value on every run that tracks the run's compute and
  tells apart runs equal in every other setting (:func:`per_run_axes`): a measurement (a
  wall time) splitting repeats (seeds), which are then neither averaged nor compared as one
  configuration;
* the median finite loss is above :data:`MAX_LOSS` nats: a perplexity (``exp`` of the loss)
  or a loss scaled by 1000 (a per-token cross-entropy in nats lies below the log of the
  vocabulary size, 10.8–12.4 for 50k–250k tokens, already at initialization);
* a given ``C`` column differs from ``6·N·D`` by more than :data:`C_RTOL` (median ratio;
  attention FLOPs add 10–30 %, which is not worth a note): the
  compute law and predictions at a compute use ``C``, while Chinchilla's compute-optimal N*, D*
  solve ``6·N·D = C``, so the two laws' predictions "at C" are at different computes; and
  runs whose ``C/(6·N·D)`` is more than :data:`C_OUTLIER` times off that of the other runs
  of their model size are named (1-based data rows: the frame's positions as read).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["C_OUTLIER", "C_RTOL", "MAX_LOSS", "MIN_PARAMS", "MIN_TOKENS", "RUN_LABELS",
           "per_run_axes", "relabels", "text_settings", "unit_notes"]

#: A table whose largest N is below this many parameters gets a note (sizes in millions?).
MIN_PARAMS = 1e5
#: A table whose largest D is below this many tokens gets a note (tokens in billions?).
MIN_TOKENS = 1e6
#: A table whose median finite loss is above this many nats gets a note (a perplexity?).
MAX_LOSS = 15.0
#: Relative gap between a given C and 6·N·D (median over runs) above which a note says so.
C_RTOL = 0.25
#: Factor by which one run's C/(6·N·D) may differ from the median of the runs of its model
#: size (three or more) without a note.
C_OUTLIER = 2.0


def unit_notes(frame: pd.DataFrame, name: str, *, has_C: bool) -> list[str]:
    """Notes (warning texts) about implausible units of ``frame`` (columns ``N``, ``D``,
    ``C``, positive floats) from ``name``; ``has_C``: the table gave its own ``C`` column."""
    N = frame["N"].to_numpy(dtype=np.float64)
    D = frame["D"].to_numpy(dtype=np.float64)
    notes = []
    if N.size and np.all(D < N):
        ratio = D / N
        notes.append(f"{name}: every run has fewer tokens than parameters (D/N from "
                     f"{ratio.min():.3g} to {ratio.max():.3g}); are N and D swapped? N is the "
                     "parameter count and D the training tokens (--map N=...,D=...)")
    for col, values, floor, unit, eg in (("N", N, MIN_PARAMS, "parameters", "1.3e9"),
                                         ("D", D, MIN_TOKENS, "tokens", "2.6e10")):
        if values.size and values.max() < floor:
            notes.append(f"{name}: the largest {col} is {values.max():.4g}: {col} counts "
                         f"{unit} (e.g. {eg}), not millions or billions of them; the law's "
                         "compute and its predictions are in FLOPs of these units")
    loss = pd.to_numeric(frame["loss"], errors="coerce").to_numpy(np.float64) if (
        "loss" in frame.columns) else np.array([])
    if (loss := loss[np.isfinite(loss)]).size and (med := float(np.median(loss))) > MAX_LOSS:
        notes.append(f"{name}: the median loss is {med:.4g} nats (from {loss.min():.4g} to "
                     f"{loss.max():.4g}): a per-token cross-entropy in nats lies below the log "
                     "of the vocabulary size (about 11-12) even at initialization; is the "
                     "column a perplexity (exp of the loss) or in another unit? The laws are "
                     "fitted to it as it is")
    if has_C and N.size:
        ratio = frame["C"].to_numpy(dtype=np.float64) / (6.0 * N * D)
        med = float(np.median(ratio))
        if abs(med - 1.0) > C_RTOL:
            notes.append(f"{name}: the C column is {med:.3g} × 6·N·D (median; from "
                         f"{ratio.min():.3g} to {ratio.max():.3g}): the compute law and "
                         "predictions at a compute use C as given, while the Chinchilla law's "
                         "compute-optimal N* and D* solve 6·N·D = C")
        # compared within one model size: C may count other parameters than N does, so
        # its ratio to 6·N·D can drift with N (non-embedding N, total-parameter C)
        local = pd.Series(ratio).groupby(N).transform("median").to_numpy()
        size = pd.Series(ratio).groupby(N).transform("size").to_numpy()
        odd = np.flatnonzero((size >= 3) & (np.abs(np.log(ratio / local)) > np.log(C_OUTLIER)))
        if odd.size:
            shown = ", ".join(str(i + 1) for i in odd[:5]) + (", ..." if odd.size > 5 else "")
            notes.append(f"{name}: data row(s) {shown}: C is {ratio[odd[0]]:.3g} × 6·N·D where "
                         f"the other runs of N = {N[odd[0]]:.4g} have {local[odd[0]]:.3g} ×; "
                         "a typo in C, N or D?")
    return notes


#: Words of text column names that label runs or repeats rather than settings (``seed_tag``,
#: ``run_name``; a name unique per run is left out anyway, ``optimizer_name`` is a setting).
RUN_LABELS = ("seed", "run", "id", "job", "date", "time", "host", "path")
#: Words that name a training run itself (:func:`is_run_label` with ``strict``), and words
#: that make a name a model's or a setting's label instead (``model_id``, ``arch_run``).
RUN_WORDS, NOT_RUN_WORDS = ("run", "job", "seed", "wandb"), ("model", "arch", "size", "config")


def is_run_label(name: object, *, strict: bool = False) -> bool:
    """Whether a column's name labels runs or repeats (a word of :data:`RUN_LABELS`:
    ``seed_tag``, ``run_name``) rather than a setting; with ``strict``, a training run itself
    (a word of :data:`RUN_WORDS` and none of :data:`NOT_RUN_WORDS`: not ``model_id``)."""
    words = re.split(r"[^a-z]+", str(name).lower())
    if strict:
        return any(w in RUN_WORDS for w in words) and not any(w in NOT_RUN_WORDS
                                                              for w in words)
    return any(w in RUN_LABELS for w in words)


def text_settings(frame: pd.DataFrame, candidates: Sequence[str], chosen: Sequence[str],
                   config_columns: Sequence[str] = ()) -> dict[str, str]:
    """Text columns of ``candidates`` left out of ``chosen`` that look like a setting: no
    blank, a name that does not label runs (:data:`RUN_LABELS`), fewer distinct values
    than half the rows, varying inside some (N, D) cell (or config group), and not a one-to-one
    relabelling of a chosen column (``lr_tag`` beside ``lr``); column → its first values,
    for a warning. (A setting that the chosen axes determine, such as an optimizer whose
    learning rates differ from the other's, is still said: the GP would read both
    optimizers' learning rates as one axis.)"""
    out = {}
    cells = frame.groupby(["N", "D", *config_columns], sort=False, dropna=False)
    for column in candidates:
        series = frame[column]
        if (column in chosen or pd.api.types.is_numeric_dtype(series.dtype)
                or is_run_label(column)
                or series.isna().any() or 2 * series.nunique() >= len(series)
                or not (cells[column].nunique() > 1).any()
                or any(relabels(frame, column, c) for c in chosen)):
            continue
        values = list(map(str, pd.unique(series)))
        out[column] = ", ".join(values[:4]) + (", ..." if len(values) > 4 else "")
    return out


def per_run_axes(frame: pd.DataFrame, chosen: Sequence[str],
                 config_columns: Sequence[str] = ()) -> list[str]:
    """Columns of ``chosen`` (the default axes) that look measured, not set: a different
    value on every run, growing with the run's compute (Spearman ρ with ``N·D`` above 0.8,
    as a wall time or GPU-hours do, and a searched setting, even one scaled down with the
    model size, does not), and without which
    some runs would be equal in N, D and every other setting (so the default rule, which
    leaves a measured column out only when it splits no runs, kept it for splitting
    repeats)."""
    from scipy.stats import spearmanr

    out: list[str] = []
    compute = frame["N"].to_numpy(np.float64) * frame["D"].to_numpy(np.float64)
    if len(frame) < 5 or np.ptp(compute) == 0:  # no compute trend to follow
        return out
    for column in chosen:
        values = frame[column]
        if (values.nunique() < len(frame)
                or not pd.api.types.is_numeric_dtype(values.dtype)):
            continue
        others = [c for c in chosen if c != column]
        if not frame.duplicated(["N", "D", *others, *config_columns]).any():
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rho = float(spearmanr(values.to_numpy(np.float64), compute).statistic)
        if rho > 0.8:  # a wall time or GPU-hours grows with compute; a tuned lr falls
            out.append(column)
    return out


def relabels(frame: pd.DataFrame, a: str, b: str) -> bool:
    """Whether columns ``a`` and ``b`` determine each other (one value of one, one of the
    other)."""
    pairs = frame[[a, b]].drop_duplicates()
    return bool(pairs[a].is_unique and pairs[b].is_unique)
