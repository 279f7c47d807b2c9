"""What ``scalebo fit --formula`` computes: a formula law fitted to a table, as one call.

Names of the formula that are columns of the table (directly, or through ``variable_map``
``{name: column}``) are variables; every other name is a parameter and needs bounds.
Residuals are natural-log (Huber, δ = 1e-3; positive responses) or natural units (least
squares; any sign, e.g. vocab's normalized loss). See :mod:`scalebo.laws.formula` and
:mod:`scalebo.fitting.formula_fit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scalebo import __version__
from scalebo.errors import RunTableError
from scalebo.fitting.formula_fit import fit_formula_frame, table_inputs
from scalebo.laws.formula import formula_law, formula_names

__all__ = ["formula_fit_summary"]


def formula_fit_summary(frame: pd.DataFrame, formula: str, *,
                        bounds: Mapping[str, tuple[float, float]] | None = None,
                        variable_map: Mapping[str, str] | None = None,
                        response: str = "loss", residuals: str = "log", n_starts: int = 64,
                        seed: int = 0, source: str = "<DataFrame>") -> dict[str, Any]:
    """Fit ``formula`` to ``frame`` and return the JSON-ready summary.

    Raises:
        RunTableError: the response column is missing or not numeric (names the column).
        ValueError: a bad formula, bounds or variable map (names what is wrong).
    """
    vmap = dict(variable_map or {})
    bounds = dict(bounds or {})
    n_col, d_col = vmap.get("N", "N"), vmap.get("D", "D")
    if ("C" in formula_names(formula) and "C" not in frame.columns and "C" not in vmap
            and n_col in frame.columns and d_col in frame.columns):
        frame = frame.assign(C=6.0 * frame[n_col].to_numpy(np.float64)  # FLOPs, as load_runs
                             * frame[d_col].to_numpy(np.float64))
    if response not in frame.columns:
        raise RunTableError(f"{source}: no response column {response!r}; columns are "
                            f"{list(frame.columns)} (choose one with --response)")
    y = pd.to_numeric(frame[response], errors="coerce").to_numpy(np.float64)
    if not np.isfinite(y).all():
        bad = int(np.flatnonzero(~np.isfinite(y))[0])
        raise RunTableError(f"{source}: data row {bad + 1}, column {response!r}: "
                            f"{frame[response].iloc[bad]!r} is not a finite number")
    names = formula_names(formula)
    variables = [n for n in names if n not in bounds and (n in vmap or n in frame.columns)]
    law = formula_law(formula, variables, bounds)
    fit = fit_formula_frame(law, frame, response, variable_map=vmap, residuals=residuals,
                            n_starts=n_starts, seed=seed)
    X = table_inputs(law, frame, vmap)
    pred = law.predict(fit.x, X) if hasattr(law, "predict") else None
    out = fit.to_dict()
    if residuals == "natural":
        out["huber_delta"] = None  # least squares in natural units
    r2 = None
    if pred is not None:
        ss = float(np.sum((y - np.mean(y)) ** 2))
        r2 = 1 - float(np.sum((y - np.asarray(pred).ravel()) ** 2)) / ss if ss > 0 else None
    return {
        "scalebo_version": __version__,
        "source": source,
        "law": {"formula": formula, "variables": {v: vmap.get(v, v) for v in law.variables},
                "parameters": list(law.natural_names),
                "bounds": {k: list(v) for k, v in bounds.items()}, "response": response},
        "residuals": residuals,
        "n_rows": int(len(frame)),
        "fit": out,
        "r2_in_sample": r2,
    }
