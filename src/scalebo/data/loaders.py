"""Loaders of the built-in public run tables, registered in :mod:`scalebo.data.datasets`.

Each reads one file of a data directory laid out as ``<data_dir>/<folder>/<file>`` (the
folder's ``SOURCE.md`` documents provenance, columns and counts) and returns a validated
:class:`~scalebo.data.runs.RunTable`. Only CSV / JSON lines are read: nothing is unpickled.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scalebo.data.datasets import _file, register_dataset, round_significant
from scalebo.data.runs import ExclusionReason, RunTable, load_runs, read_table
from scalebo.errors import RunTableError


def load_steplaw(
    root: Path, *, diverged_above: float | None = None, lr_digits: int = 3
) -> RunTable:
    """StepLaw dense grid (``steplaw/dense_lr_bs_loss.csv``): 1911 runs, 17 (N, D) cells.

    ``loss`` is the file's ``smooth loss`` (nats, smoothed final training loss; the raw one is
    kept as ``raw_loss``). Hyperparameters: ``lr`` rounded to ``lr_digits`` significant digits
    (the file spells one lr two ways, e.g. 0.000345 / 0.0003453; the raw value is kept as
    ``lr_raw``; 3 digits give the paper's 14 values) and ``bs`` (sequences of 2048 tokens).
    Architecture columns (h, ffnh, numh, numl), ``ti`` and ``D/N`` are metadata. Diverged runs
    (181 have loss > 4) are real, costly runs of the grid and are kept unless
    ``diverged_above`` is given.
    """
    path, frame = _steplaw_frame(root, "dense_lr_bs_loss.csv", "steplaw", lr_digits,
                                 "; 3 gives the paper's 14 values")
    return load_runs(frame, hyperparameters=("lr", "bs"), run_id="exp_name",
                     diverged_above=diverged_above, source_name=str(path))


def _steplaw_frame(root: Path, filename: str, dataset: str, lr_digits: int,
                   digits_note: str = "") -> tuple[Path, pd.DataFrame]:
    """A StepLaw file read as both loaders use it: ``smooth loss`` as ``loss`` (the raw one
    as ``raw_loss``), ``lr`` rounded to ``lr_digits`` significant digits (raw: ``lr_raw``)."""
    if int(lr_digits) != lr_digits or lr_digits < 1:
        raise RunTableError(f"{dataset}: lr_digits must be an integer >= 1 (significant digits "
                            f"of lr{digits_note}), got {lr_digits!r}.")
    path = _file(root, "steplaw", filename)
    frame = read_table(path).rename(columns={"loss": "raw_loss", "smooth loss": "loss",
                                             "lr": "lr_raw"})
    frame.insert(frame.columns.get_loc("lr_raw"), "lr",
                 round_significant(frame["lr_raw"].to_numpy(), lr_digits))
    return path, frame


def load_steplaw_moe(root: Path, *, lr_digits: int = 3) -> RunTable:
    """StepLaw mixture-of-experts grid (``steplaw/moe_lr_bs_loss.csv``): 708 runs, 16 (N, D)
    cells, 9 lr × 5 bs.

    ``N`` is the number of **active** parameters (the file's ``Na``; its ``N``, the total
    parameter count, is about 2.15e9 for every model and is kept as ``N_total``), so
    ``C = 6·N·D`` is the training compute of a token-routed model. The four models differ in
    sparsity (``moe_name``: 1 of 89, 2 of 88, 1 of 8 and 3 of 8 experts active; 188M, 233M,
    590M and 1.24B active parameters), each trained to D = 2, 4, 8 and 20B tokens; the
    sparsest ones make the compute envelope, so here the costliest cell is not on it.
    ``loss``, ``lr`` and ``bs`` as :func:`load_steplaw` (no run diverged: the largest
    smoothed loss is 2.94). Not part of the StepLaw paper's benchmark (steplaw/SOURCE.md).
    """
    path, frame = _steplaw_frame(root, "moe_lr_bs_loss.csv", "steplaw_moe", lr_digits)
    return load_runs(frame.rename(columns={"N": "N_total"}), mapping={"N": "Na"},
                     hyperparameters=("lr", "bs"), run_id="exp_name", source_name=str(path))


def load_oellm_english(root: Path, *, diverged_above: float | None = None) -> RunTable:
    """OELLM-English dense grid (``oellm_english/loss_all_exps_post_annealing.csv``).

    909 runs, 51 (N, D) cells, no repeated configuration. ``loss``: validation loss after
    learning-rate annealing (nats). Hyperparameters: ``lr`` and ``bs`` (= the file's
    ``gbsz``, sequences of 4096 tokens). ``run_id`` is the file's ``job_name``.
    """
    path = _file(root, "oellm_english", "loss_all_exps_post_annealing.csv")
    frame = read_table(path)
    frame = frame.rename(columns={"gbsz": "bs"})
    return load_runs(frame, hyperparameters=("lr", "bs"), run_id="job_name",
                     diverged_above=diverged_above, source_name=str(path))


def load_epoch_chinchilla(root: Path, *, drop_highest_loss: int = 0) -> RunTable:
    """Epoch AI's digitized Chinchilla runs (``epoch_chinchilla/svg_extracted_data.csv``).

    245 runs; ``N`` = ``Model Size`` (parameters), ``C`` = ``Training FLOP``, ``D = C/(6N)``
    tokens, ``loss`` in nats. No hyperparameters.

    Args:
        drop_highest_loss: Remove this many highest-loss runs (ties: the earlier row is
            removed first); they go to ``excluded`` with reason ``dropped``. The reference fit of
            DESIGN.md uses 5 (Besiroglu et al. 2024).
    """
    path = _file(root, "epoch_chinchilla", "svg_extracted_data.csv")
    frame = read_table(path)
    frame = frame.rename(columns={"Model Size": "N", "Training FLOP": "C"})
    n = pd.to_numeric(frame["N"], errors="coerce").to_numpy(dtype=np.float64)
    c = pd.to_numeric(frame["C"], errors="coerce").to_numpy(dtype=np.float64)
    frame.insert(frame.columns.get_loc("N") + 1, "D", c / (6.0 * n))
    table = load_runs(frame, hyperparameters=(), source_name=str(path))
    if not 0 <= drop_highest_loss < len(table):
        raise ValueError(
            f"drop_highest_loss must be in [0, {len(table) - 1}], got {drop_highest_loss}."
        )
    if drop_highest_loss == 0:  # a trial's fit gave beta 0.453 and 6 tokens per parameter
        warnings.warn(f"{path}: all {len(table)} digitized runs kept; Besiroglu et al. "
                      "(2024), whose refit scalebo's reference reproduces, drop the 5 highest "
                      "losses (--dataset-option drop_highest_loss=5; drop_highest_loss=5 in "
                      "Python)", UserWarning, stacklevel=2)
        return table
    order = np.argsort(-table.loss, kind="stable")[:drop_highest_loss]
    drop = table.frame.index[order]
    dropped = table.frame.loc[drop].assign(reason=ExclusionReason.DROPPED.value)
    excluded = pd.concat([table.excluded, dropped]) if len(table.excluded) else dropped
    return RunTable(
        frame=table.frame.drop(index=drop),
        hyperparameters=table.hyperparameters,
        source=table.source,
        n_excluded=len(excluded),
        excluded=excluded,
        config_columns=table.config_columns,
    )


#: Filters of :func:`load_porian_isoflop`, in the order they form the ``config`` label.
PORIAN_FILTERS: tuple[str, ...] = (
    "dataset", "hparams", "warmup", "decay", "param_count", "loss_type"
)


def load_porian_isoflop(
    root: Path,
    *,
    dataset: str | Sequence[str] | None = None,
    hparams: str | Sequence[str] | None = None,
    warmup: str | Sequence[str] | None = None,
    decay: str | Sequence[str] | None = None,
    param_count: str | Sequence[str] | None = None,
    loss_type: str | Sequence[str] | None = None,
) -> RunTable:
    """Porian et al. 2024 isoFLOP points (``porian_isoflop_summary/porian_isoflop_points.csv``).

    1745 points of 15 analysis configurations; each filter keeps rows whose column equals the
    value (or one of the values); ``None`` keeps all. ``D`` = ``D_tokens`` (tokens; ``6·N·D``
    equals ``flops_budget``), ``loss`` in nats; ``flops_budget`` and ``config_index`` are kept.
    A ``config`` column (``"dataset/hparams/warmup/decay/param_count/loss_type"``) names each
    configuration and, being a config column, keeps points of different configurations from
    counting as repeats. No hyperparameters (tuned lr/bs are not recorded).

    Raises:
        RunTableError: a filter value that does not occur (the message lists the valid ones),
            or filters that select nothing.
    """
    path = _file(root, "porian_isoflop_summary", "porian_isoflop_points.csv")
    frame = read_table(path)
    chosen = {"dataset": dataset, "hparams": hparams, "warmup": warmup, "decay": decay,
              "param_count": param_count, "loss_type": loss_type}
    keep = np.ones(len(frame), dtype=bool)
    for column, wanted in chosen.items():
        if wanted is None:
            continue
        values = [wanted] if isinstance(wanted, str) else list(wanted)
        available = sorted(frame[column].astype(str).unique())
        unknown = [v for v in values if v not in available]
        if unknown:
            raise RunTableError(
                f"porian_isoflop: {column}={unknown} does not occur; available: {available}."
            )
        keep &= frame[column].isin(values).to_numpy()
    if not keep.any():
        raise RunTableError(f"porian_isoflop: the filters {chosen} select no configuration.")
    frame = frame.loc[keep].reset_index(drop=True)
    frame = frame.rename(columns={"D_tokens": "D"})
    frame["config"] = frame[list(PORIAN_FILTERS)].astype(str).agg("/".join, axis=1)
    _warn_if_pooled(frame, "config", "porian_isoflop", "analysis configurations",
                    "dataset=rw,hparams=tuned,warmup=short,decay=const,param_count=standard,"
                    "loss_type=val")
    return load_runs(frame, hyperparameters=(), config_columns=("config",),
                     source_name=_kept(path, keep.size, frame))


def _warn_if_pooled(frame: pd.DataFrame, column: str, dataset: str, what: str,
                    example: str) -> None:
    """Warn when a loaded table holds more than one value of ``column``: a law fitted to
    all its rows mixes experiments (corpora, recipes) that follow different laws."""
    counts = frame[column].astype(str).value_counts(sort=False)
    if counts.size > 1:
        shown = ", ".join(f"{k} ({v})" for k, v in list(counts.items())[:4])
        more = f" and {counts.size - 4} more" if counts.size > 4 else ""
        pairs = [item.split("=", 1) for item in example.split(",")]
        python = ", ".join(f"{k}={v!r}" for k, v in pairs)
        warnings.warn(  # stacklevel 4: the caller of load_dataset, through the loader
            f"{dataset}: the table pools {counts.size} {what} ({column} = {shown}{more}): a law "
            f"fitted to all of them mixes experiments that follow different laws. Choose one, "
            f"e.g. --dataset-option {example.replace(',', ' --dataset-option ')} (in Python: "
            f"load_dataset({dataset!r}, {python})).",
            UserWarning, stacklevel=4)


register_dataset(
    "steplaw", load_steplaw,
    "StepLaw dense lr×bs grid: 1911 runs, 5 N, 15 D, 17 (N,D) cells, 14 lr × 13 bs.",
)
register_dataset(
    "steplaw_moe", load_steplaw_moe,
    "StepLaw mixture-of-experts lr×bs grid: 708 runs, N = 4 active sizes (188M–1.24B), "
    "D = 2–20B, 16 (N,D) cells, 9 lr × 5 bs.",
)
register_dataset(
    "oellm_english", load_oellm_english,
    "OELLM-English dense grid (post-annealing val loss): 909 runs, 51 (N,D) cells, 5 lr × 7 bs.",
)
register_dataset(
    "epoch_chinchilla", load_epoch_chinchilla,
    "Epoch AI digitized Chinchilla runs: 245 (N, C, loss) points; no hyperparameters.",
)
register_dataset(
    "porian_isoflop", load_porian_isoflop,
    "Porian et al. 2024 isoFLOP points: 15 configurations × ≤12 budgets (filterable).",
)


# --------------------------------------------------------------------------- checkpoints

#: Gemstones files (``gemstones/wandb_dfs/wandb_df_for_fitting_<variant>.jsonl``) by variant,
#: with the phase of their losses (see gemstones/SOURCE.md).
GEMSTONES_VARIANTS: dict[str, str] = {
    "hot": "stable",
    "hot_477": "stable",
    "hot_100b+": "stable",
    "hot_100b+_477": "stable",
    "hot_100b+_512x": "stable",
    "hot_120b+_only": "stable",
    "hot_120b+_only_477": "stable",
    "cool_begin": "cooldown-start",
    "cool_end": "cooldown-end",
    "lr_ablation_hot": "stable",
    "lr_ablation_hot_477": "stable",
}
#: Other validation sets of Gemstones (``gemstones/benchmarks/``): 22 models × 35 checkpoints.
GEMSTONES_VALIDATION: dict[str, str | None] = {
    "main": None,
    "fineweb_edu": "fineweb_edu_losses_combined.jsonl",
    "dclm": "fineweb_dclm_losses_combined.jsonl",
}
GEMSTONES_MAPPING = {"N": "params_active_precise", "D": "tokens", "loss": "final_loss"}


def load_gemstones(root: Path, *, variant: str = "hot", validation: str = "main") -> RunTable:
    """Gemstones checkpoints (McLeish et al. 2025) as a checkpoint table.

    One row per (model, checkpoint): ``N`` = ``params_active_precise`` (parameters, embeddings
    included), ``D`` = ``tokens``, ``C = 6·N·D`` FLOPs up to the checkpoint, ``loss`` =
    ``final_loss`` (nats); ``run`` = ``run_name``, ``phase`` (``stable``, or
    ``cooldown-start`` / ``cooldown-end`` for ``cool_begin`` / ``cool_end``); ``width``,
    ``depth``, ``step``, ``num_nodes``, ``seconds_per_step`` are kept (for GPU-hours).
    See :mod:`scalebo.data.checkpoints`.

    Args:
        variant: A key of :data:`GEMSTONES_VARIANTS` (``hot`` = 220 checkpoints, 22 models,
            every ~10B tokens to 100B).
        validation: ``main`` (the training run's validation loss), ``fineweb_edu`` or
            ``dclm``: the loss on another validation set, from ``gemstones/benchmarks/``,
            matched on (width, depth, step). Those files hold the checkpoints every 2385
            steps up to 350B tokens, so only variants whose checkpoints all occur there
            (``hot``, ``hot_100b+``, ``hot_100b+_512x``, ``hot_120b+_only``) are available.

    Raises:
        ValueError: unknown variant or validation set.
        RunTableError: a validation set that lacks some of the variant's checkpoints.
    """
    from scalebo.data.checkpoints import checkpoint_table

    if variant not in GEMSTONES_VARIANTS:
        raise ValueError(f"gemstones: unknown variant {variant!r}; expected one of "
                         f"{list(GEMSTONES_VARIANTS)}.")
    if validation not in GEMSTONES_VALIDATION:
        raise ValueError(f"gemstones: unknown validation set {validation!r}; expected one of "
                         f"{list(GEMSTONES_VALIDATION)}.")
    path = _file(root, "gemstones/wandb_dfs", f"wandb_df_for_fitting_{variant}.jsonl")
    frame = read_table(path)
    name = str(path)
    other = GEMSTONES_VALIDATION[validation]
    if other is not None:
        bench_path = _file(root, "gemstones/benchmarks", other)
        keys = ["width", "depth", "step"]
        bench = read_table(bench_path).loc[:, [*keys, "final_loss"]]
        merged = frame.drop(columns="final_loss").merge(bench, on=keys, how="left")
        missing = int(merged["final_loss"].isna().sum())
        if missing:
            raise RunTableError(
                f"{bench_path}: {missing} of {len(frame)} checkpoints of variant {variant!r} "
                f"have no {validation} loss (that file holds checkpoints every 2385 steps); "
                "use variant 'hot' or 'hot_100b+'."
            )
        frame, name = merged, f"{path} with {validation} losses from {bench_path}"
    return checkpoint_table(frame, run="run_name", mapping=GEMSTONES_MAPPING,
                            phase=GEMSTONES_VARIANTS[variant], source_name=name)


def _kept(path: Path, n_file: int, frame: pd.DataFrame) -> str:
    """The name of a table filtered by its dataset options: its file, and, when rows were
    left out, that a message's data rows count the rows kept (a trial looked up "data row
    1" in the file and found another row)."""
    if len(frame) == n_file:
        return str(path)
    return (f"{path} (its dataset options keep {len(frame)} of its {n_file} rows; a data row "
            "here counts the rows kept)")


def _gadre_val_name(path: str) -> str:
    parts = str(path).split("/")
    for anchor in ("val_tok_mult", "eval_data"):
        if anchor in parts and parts.index(anchor) + 1 < len(parts):
            return parts[parts.index(anchor) + 1]
    return str(path)


def load_gadre_overtraining(
    root: Path, *, val_set: str | None = "c4_val", dataset: str | None = None
) -> RunTable:
    """Gadre et al. 2024 over-training runs (``gadre_overtraining/gadre_models_losses.csv``).

    104 models × 8 validation sets. ``N`` = ``params`` (with embeddings), ``D`` = ``tokens``,
    ``loss`` in nats on the validation set ``val_set`` (a short name: ``c4_val``,
    ``openlm``, ``paloma_c4_en``, ``paloma_falcon-refinedweb``, ``paloma_redpajama``,
    ``paloma_ptb``, ``paloma_dolma_100_programing_languages``, ``de-en``; ``None`` keeps all
    eight). ``run_id`` = ``name`` (+ ``@val_set``). ``dataset`` (training corpus ``c4_original``,
    ``rpj``, ``rw_original``) filters the runs; it and ``val_set`` are config columns. No
    hyperparameters (lr and batch size were fixed per size).

    Raises:
        RunTableError: a val_set or dataset that does not occur (the message lists them).
    """
    path = _file(root, "gadre_overtraining", "gadre_models_losses.csv")
    frame = read_table(path)
    n_file = len(frame)
    frame["val_set"] = frame["val_data"].map(_gadre_val_name).astype("str")
    for column, wanted in (("val_set", val_set), ("dataset", dataset)):
        if wanted is None:
            continue
        available = sorted(frame[column].astype(str).unique())
        if wanted not in available:
            raise RunTableError(
                f"gadre_overtraining: {column}={wanted!r} does not occur; available: "
                f"{available}."
            )
        frame = frame.loc[frame[column] == wanted].reset_index(drop=True)
    frame["run_id"] = frame["name"].astype(str) + "@" + frame["val_set"].astype(str)
    _warn_if_pooled(frame, "dataset", "gadre_overtraining", "training corpora",
                    "dataset=rw_original")
    _warn_if_pooled(frame, "val_set", "gadre_overtraining", "validation sets", "val_set=c4_val")
    return load_runs(frame, mapping={"N": "params", "D": "tokens"}, hyperparameters=(),
                     config_columns=("dataset", "val_set"),
                     source_name=_kept(path, n_file, frame))


register_dataset(
    "gemstones", load_gemstones,
    "Gemstones checkpoints: 22 models × checkpoints (variant: hot, hot_477, cool_end, "
    "lr_ablation_hot, …; validation: main, fineweb_edu, dclm).",
)
register_dataset(
    "gadre_overtraining", load_gadre_overtraining,
    "Gadre et al. 2024 over-training runs: 104 models × 8 validation sets (val_set filter).",
)
