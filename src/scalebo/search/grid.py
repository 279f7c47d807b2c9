"""The candidate grid ``G = N × D × Λ``: configurations, their cost in FLOPs, held-out cells.

Notations (shapes):

* ``n_cfg`` — number of configurations in the grid (rows of :attr:`Grid.configs`);
* ``n_cell`` — number of distinct ``(N, D)`` cells;
* ``d = 2 + len(axes)`` — columns of the surrogate input ``X`` (``N``, ``D``, then the axes).

Costs are training compute in FLOPs, ``6·N·D`` in float64 (``6·N·D`` overflows int64 for
``N ≈ 1e9``, ``D ≈ 1e11``) unless the source table carries a compute column ``C``. The cost
of a cell is the largest cost of its configurations, so that a cap at a cell's level admits
every configuration of that cell.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scalebo.data.columns import default_hyperparameters
from scalebo.errors import SearchError

#: Relative tolerance used by :meth:`Grid.index_of` to match numeric values to grid values.
INDEX_RTOL = 1e-6


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


@dataclass(frozen=True, eq=False)
class Grid:
    """A finite set of candidate training configurations with costs and held-out cells.

    Build it with :meth:`from_frame`, :meth:`from_axes` or :meth:`from_yaml` rather than
    directly.

    Attributes:
        configs: One row per configuration, index ``0..n_cfg-1``; columns ``N`` (parameters),
            ``D`` (tokens), ``C`` (FLOPs, equal to :attr:`cost`) and then the axis columns.
        axes: Names of the hyperparameter axes (columns of ``configs`` besides N, D, C).
        cost: Training compute of each configuration in FLOPs, shape ``(n_cfg,)``, float64.
        held_out: Shape ``(n_cfg,)`` bool; True for configurations in the ``n_held_out_cells``
            largest-compute ``(N, D)`` cells. They are never acquired.
        cell_ids: Shape ``(n_cfg,)`` int; the ``(N, D)`` cell of each configuration. Cells are
            numbered by increasing cell cost (ties by N, then D), so ``0`` is the cheapest.
        n_held_out_cells: How many of the largest-compute cells are held out.
        price: What each configuration costs in the budget's unit (e.g. GPU-hours from a
            campaign grid's ``cost`` column), ``(n_cfg,)``; None: its FLOPs. Budgets,
            spending and admissibility use :attr:`budget_cost`; the compute axis of the laws
            and the windows stay :attr:`cost` (FLOPs). Set it with :meth:`with_price`.
        price_unit: Unit of :attr:`budget_cost` (``"FLOPs"`` without a price).
    """

    configs: pd.DataFrame
    axes: tuple[str, ...]
    cost: np.ndarray
    held_out: np.ndarray
    cell_ids: np.ndarray
    n_held_out_cells: int = field(default=2)
    price: np.ndarray | None = None
    price_unit: str = "FLOPs"

    # ------------------------------------------------------------------ constructors
    @classmethod
    def _build(
        cls, configs: pd.DataFrame, axes: Sequence[str], cost: np.ndarray, n_held_out_cells: int
    ) -> Grid:
        axes = tuple(axes)
        if n_held_out_cells < 0:
            raise SearchError(f"n_held_out_cells must be >= 0, got {n_held_out_cells}; pass 0 "
                              "to hold out no cell.")
        if len(configs) == 0:
            raise SearchError("A grid needs at least one configuration, got an empty table.")
        for col in ("N", "D"):
            values = configs[col].to_numpy(dtype=np.float64)
            if not np.all(np.isfinite(values) & (values > 0)):
                bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))[:5].tolist()
                raise SearchError(f"Column {col!r} must be finite and > 0; rows {bad} are "
                                  "not. Drop or fix them before building the grid.")
        cost = np.asarray(cost, dtype=np.float64)
        if not np.all(np.isfinite(cost) & (cost > 0)):
            bad = np.flatnonzero(~(np.isfinite(cost) & (cost > 0)))[:5].tolist()
            raise SearchError(f"Costs must be finite and > 0 FLOPs; rows {bad} are not.")
        configs = configs.reset_index(drop=True).copy()
        configs["N"] = configs["N"].to_numpy(dtype=np.float64)
        configs["D"] = configs["D"].to_numpy(dtype=np.float64)
        configs["C"] = cost
        configs = configs[["N", "D", "C", *axes]]

        # Cells: (N, D) pairs, numbered by increasing cell cost (max over the cell's configs).
        nd = configs[["N", "D"]]
        cell_table = nd.assign(_cost=cost).groupby(["N", "D"], sort=True)["_cost"].max()
        cell_table = cell_table.reset_index().sort_values(["_cost", "N", "D"], kind="stable")
        cell_table["_cell"] = np.arange(len(cell_table))
        merged = nd.merge(cell_table, on=["N", "D"], how="left")
        cell_ids = merged["_cell"].to_numpy(dtype=np.int64)
        n_cell = len(cell_table)
        held_cells = np.arange(n_cell)[n_cell - min(n_held_out_cells, n_cell) :]
        if len(held_cells) == n_cell:
            raise SearchError(f"Holding out {n_held_out_cells} cells leaves no candidate: the "
                              f"grid has only {n_cell} (N, D) cells. Hold out fewer "
                              f"(at most {n_cell - 1}: n_held_out_cells in Python, "
                              "--held-out-cells or held_out_cells: in a file).")
        held_out = np.isin(cell_ids, held_cells)
        return cls(
            configs=configs,
            axes=axes,
            cost=_readonly(cost),
            held_out=_readonly(held_out),
            cell_ids=_readonly(cell_ids),
            n_held_out_cells=int(n_held_out_cells),
        )

    @classmethod
    def from_frame(
        cls, frame: Any, axes: Sequence[str] | None = None, *, n_held_out_cells: int = 2
    ) -> Grid:
        """Grid of the configurations present in a run table.

        Args:
            frame: A DataFrame with columns ``N``, ``D`` (optionally ``C`` in FLOPs) and the
                axes, or an object with ``.frame`` (e.g. a ``RunTable``).
            axes: Hyperparameter columns. Default: ``frame.hyperparameters`` plus
                ``frame.config_columns`` for a RunTable, else
                :func:`~scalebo.data.columns.default_hyperparameters` (numeric or text
                columns that vary inside a cell, derived ones included).
            n_held_out_cells: Number of largest-compute (N, D) cells held out (default 2).

        Raises:
            SearchError: a column is missing, or a configuration appears more than once
                (average repeated runs upstream, e.g. ``groupby(configs).loss.mean()``).
        """
        if axes is None and hasattr(frame, "hyperparameters"):
            axes = (*frame.hyperparameters, *getattr(frame, "config_columns", ()))
        df = frame.frame if hasattr(frame, "frame") else frame
        if not isinstance(df, pd.DataFrame):
            raise SearchError(f"Expected a DataFrame or a RunTable, got {type(frame).__name__}.")
        if axes is None:
            axes = default_hyperparameters(df, numeric_only=False, keep_derived=True)
        axes = tuple(axes)
        missing = [c for c in ("N", "D", *axes) if c not in df.columns]
        if missing:
            raise SearchError(
                f"Columns {missing} are missing from the table (has {list(df.columns)}); "
                "pass the right axes or rename the columns."
            )
        key = ["N", "D", *axes]
        dup = df.duplicated(subset=key, keep=False).to_numpy()
        if dup.any():
            rows = np.flatnonzero(dup)[:5].tolist()
            raise SearchError(
                f"{int(dup.sum())} rows repeat a configuration of {key} (first rows {rows}). "
                "A grid needs unique configurations: average repeated runs upstream."
            )
        configs = df[key].copy()
        if "C" in df.columns:
            cost = df["C"].to_numpy(dtype=np.float64)
        else:
            cost = 6.0 * df["N"].to_numpy(dtype=np.float64) * df["D"].to_numpy(dtype=np.float64)
        return cls._build(configs, axes, cost, n_held_out_cells)

    @classmethod
    def from_axes(
        cls, axes: Mapping[str, Sequence[Any]], *, n_held_out_cells: int = 2
    ) -> Grid:
        """Cartesian product grid, e.g. ``{"N": [...], "D": [...], "lr": [...], "bs": [...]}``.

        ``N`` and ``D`` are required keys; the other keys become the hyperparameter axes, in
        the mapping's order. Values are checked as a grid file's
        (:func:`~scalebo.search.grid_file.check_axis`: a repeated, non-finite or mixed value
        is an error; numeric text such as ``"1e-3"`` becomes a float, an all-text axis is
        categorical; numbers, booleans and None are kept as given). Cost is ``6·N·D`` FLOPs. The
        ``n_held_out_cells`` costliest (N, D) cells (default 2, as a replay holds them out to
        score extrapolation) are never acquired and do not count in :attr:`budget_total`;
        pass 0 for a campaign's grid.
        """
        from scalebo.search.grid_file import check_axis

        for col in ("N", "D"):
            if col not in axes:
                raise SearchError(
                    f"Axis {col!r} is required, got axes {list(axes)}; add e.g. {col}: [1e8, 1e9]"
                    f", or name the axis that holds it (--map {col}=NAME; mapping={{{col!r}: "
                    "NAME} in Python).")
        names = ["N", "D", *[k for k in axes if k not in ("N", "D")]]
        axes = {name: _as_given(axes[name], check_axis(f"axis {name!r}", name, axes[name]))
                for name in names}
        rows = list(itertools.product(*[list(axes[k]) for k in names]))
        configs = pd.DataFrame(rows, columns=names)
        cost = 6.0 * configs["N"].to_numpy(dtype=np.float64) * configs["D"].to_numpy(np.float64)
        return cls._build(configs, names[2:], cost, n_held_out_cells)

    @classmethod
    def from_yaml(cls, path: str | Path, n_held_out_cells: int | None = None,
                  mapping: Mapping[str, str] | None = None, *, held_out_default: int = 2
                  ) -> Grid:
        """Grid from YAML: ``axes: {N: [...], D: [...], lr: [...]}``, validated by
        :func:`~scalebo.search.grid_file.read_grid_file` (errors name the axis and item).

        Args:
            n_held_out_cells: Costliest cells held out; None (default): the file's
                ``held_out_cells``, else ``held_out_default``.
            mapping: Canonical name → the file's axis name (``{"N": "params"}``), as
                ``--map`` reads a grid file.
            held_out_default: Cells held out when neither the call nor the file says: 2, as
                a replay holds out; a campaign's grid holds none
                (:func:`~scalebo.search.campaign.campaign_grid` passes 0).
        """
        from scalebo.search.grid_file import read_grid_file

        axes, held = read_grid_file(path, mapping)
        if n_held_out_cells is None:
            n_held_out_cells = held_out_default if held is None else held
        try:
            return cls.from_axes(axes, n_held_out_cells=n_held_out_cells)
        except SearchError as err:
            raise SearchError(f"{path}: {err}") from None

    # ------------------------------------------------------------------ derived values
    def __len__(self) -> int:
        return len(self.configs)

    @property
    def n_configs(self) -> int:
        """Number of configurations ``n_cfg``."""
        return len(self.configs)

    @cached_property
    def cell_cost(self) -> np.ndarray:
        """Cost of each cell in FLOPs (max over its configurations), shape ``(n_cell,)``."""
        out = np.zeros(int(self.cell_ids.max()) + 1)
        np.maximum.at(out, self.cell_ids, self.cost)
        return _readonly(out)

    @cached_property
    def config_cell_cost(self) -> np.ndarray:
        """Cost of the cell of each configuration in FLOPs, shape ``(n_cfg,)``."""
        return _readonly(self.cell_cost[self.cell_ids])

    @cached_property
    def compute_levels(self) -> np.ndarray:
        """Sorted unique cell costs (FLOPs) of the cells that can be acquired (not held out)."""
        return _readonly(np.unique(self.cell_cost[np.unique(self.cell_ids[~self.held_out])]))

    @cached_property
    def all_compute_levels(self) -> np.ndarray:
        """Sorted unique cell costs (FLOPs), held-out cells included."""
        return _readonly(np.unique(self.cell_cost))

    @property
    def C_total(self) -> float:
        """Σ cost over the grid **excluding held-out cells**, in FLOPs.

        DESIGN.md defines ``C_total = Σ_{x∈G} cost(x)``; held-out configurations can never be
        acquired, so budgets (fractions of ``C_total``) are taken over what can be bought.
        The sum over every configuration is :attr:`C_total_all`.
        """
        return float(self.cost[~self.held_out].sum())

    def with_price(self, price: Any, unit: str = "GPU-hours") -> Grid:
        """This grid with a budget cost per configuration (finite, > 0) in ``unit``."""
        p = np.asarray(price, dtype=np.float64)
        if p.shape != (self.n_configs,) or not np.all(np.isfinite(p) & (p > 0)):
            raise SearchError(f"a price needs {self.n_configs} finite values > 0 ({unit}).")
        return replace(self, price=_readonly(p), price_unit=str(unit))

    @property
    def budget_cost(self) -> np.ndarray:
        """What each configuration costs in :attr:`price_unit`: the price, else FLOPs."""
        return self.cost if self.price is None else self.price

    @property
    def budget_total(self) -> float:
        """Σ :attr:`budget_cost` over the acquirable configurations (:attr:`C_total` in
        FLOPs without a price): what budget fractions are fractions of."""
        return float(self.budget_cost[~self.held_out].sum())

    @property
    def C_total_all(self) -> float:
        """Σ cost over every configuration of the grid, held-out cells included, in FLOPs."""
        return float(self.cost.sum())

    @property
    def held_out_share(self) -> float:
        """The share of :attr:`C_total_all` that the held-out cells hold (0 without any)."""
        return 1 - self.C_total / self.C_total_all

    @cached_property
    def categorical_axes(self) -> tuple[str, ...]:
        """Axes whose values are not numeric (encoded as integer codes)."""
        return tuple(a for a in self.axes if not _is_numeric(self.configs[a]))

    @property
    def input_columns(self) -> tuple[str, ...]:
        """Names of the columns of :meth:`encode`'s output: ``("N", "D", *axes)``."""
        return ("N", "D", *self.axes)

    @property
    def categorical_columns(self) -> tuple[int, ...]:
        """Column positions in :meth:`encode`'s output that hold categorical integer codes."""
        cats = set(self.categorical_axes)
        return tuple(i for i, c in enumerate(self.input_columns) if c in cats)

    @cached_property
    def _encoders(self) -> dict[str, tuple[str, Any, Any]]:
        enc: dict[str, tuple[str, Any, Any]] = {}
        for col in self.input_columns:
            s = self.configs[col]
            if col in self.categorical_axes:
                cats = sorted(pd.unique(s.astype(str)))
                enc[col] = ("cat", {c: i for i, c in enumerate(cats)}, None)
                continue
            v = s.to_numpy(dtype=np.float64)
            kind = "log" if np.all(v > 0) else "lin"
            t = np.log(v) if kind == "log" else v
            enc[col] = (kind, float(t.min()), float(t.max()))
        return enc

    def encode(self, configs: pd.DataFrame | None = None) -> np.ndarray:
        """Surrogate inputs ``X``, shape ``(n, d)`` float64, columns :attr:`input_columns`.

        Positive numeric columns (N, D, numeric hyperparameters) are log-transformed, then
        scaled to ``[0, 1]`` over the grid's range (a column with one value maps to 0);
        numeric axes with non-positive values are scaled linearly. Categorical axes are integer
        codes ``0..k-1`` (sorted category names), see :attr:`categorical_columns`.

        Args:
            configs: Rows to encode (default: the whole grid). Values outside the grid's range
                map outside ``[0, 1]``; unknown categories raise SearchError.
        """
        if configs is None:
            configs = self.configs
        X = np.empty((len(configs), len(self.input_columns)), dtype=np.float64)
        for j, col in enumerate(self.input_columns):
            kind, a, b = self._encoders[col]
            if kind == "cat":
                labels = configs[col].astype(str).to_numpy()
                unknown = sorted({x for x in labels if x not in a})
                if unknown:
                    raise SearchError(
                        f"Column {col!r} has categories {unknown[:5]} not in the grid "
                        f"(known: {sorted(a)})."
                    )
                X[:, j] = [a[x] for x in labels]
                continue
            v = configs[col].to_numpy(dtype=np.float64)
            t = np.log(v) if kind == "log" else v
            X[:, j] = (t - a) / (b - a) if b > a else 0.0
        return X

    def config(self, index: int) -> dict[str, Any]:
        """Row ``index`` as plain Python values: ``N``, ``D``, ``C`` (FLOPs) and each axis."""
        row = self.configs.iloc[int(index)]
        return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}

    def index_of(self, frame: pd.DataFrame, source: str | None = None,
                 names: Mapping[str, str] | None = None) -> np.ndarray:
        """Grid row of each row of ``frame`` (runs → configurations), shape ``(len(frame),)``.

        Numeric columns (N, D, numeric axes) match a grid value within a relative tolerance
        of :data:`INDEX_RTOL`; categorical axes match exactly as strings without surrounding
        blanks (``" adam"`` is ``"adam"``). Errors name
        ``source`` and 1-based data rows (an integer index is read as 0-based source
        positions, as :class:`~scalebo.data.runs.RunTable` keeps them) and each column by
        ``names`` (canonical → the user's name, a ``--map``; default the canonical one).

        Raises:
            SearchError: a column is missing or some rows are not on the grid (names them).
        """
        from scalebo.search.grid_match import match_rows

        return match_rows(self, frame, source, names)


def _as_given(values: Any, checked: list[Any]) -> list[Any]:
    """An axis's values as the caller gave them (ints stay ints, booleans booleans), except
    text, which takes its checked form (``"1e-3"`` → 0.001, ``" adam"`` → ``"adam"``)."""
    given = (values.tolist() if hasattr(values, "tolist") else
             list(values) if isinstance(values, list | tuple | range) else [values])
    return [c if isinstance(v, str) else v for v, c in zip(given, checked, strict=True)]
