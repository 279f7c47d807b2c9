"""The numerical environment a record was computed in, and the environments of a folder.

Replays are deterministic within one environment; across two, one rounding difference in a
sum or an ``exp`` can change a surrogate's pick and every number after it (measured: the
same install on a CPU with AVX-512 and without; docs/reproduction.md, 0.4.7). A record
names its environment so that a report can say which one its numbers are from.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence

__all__ = ["describe_environments", "environments", "numerics_environment", "warn_environments"]


@functools.cache
def numerics_environment() -> dict[str, str]:
    """What a record's numbers depend on besides scalebo's code, settings and data: the
    versions of Python, NumPy and SciPy, the SIMD extensions NumPy dispatches its own kernels
    to on this CPU, and each BLAS library with the kernel it chose (``threadpoolctl``), e.g.
    ``{"python": "3.11.7", "numpy": "2.4.6", "numpy_simd": "X86_V3 X86_V4 AVX512_ICL",
    "scipy": "1.17.1", "blas": "openblas 0.3.31 Haswell"}``. Two of them can round a sum or
    an ``exp`` differently, and one rounding difference can change a surrogate's pick and
    every number after it, so records computed in different environments can differ (a
    report warns when it mixes them). The same install gives other records on a CPU with
    AVX-512 than on one without (``NPY_DISABLE_CPU_FEATURES`` turns extensions off).
    """
    import platform

    import numpy
    import scipy
    from threadpoolctl import threadpool_info

    blas = sorted({" ".join(str(i.get(k) or "?") for k in ("internal_api", "version",
                                                            "architecture"))
                   for i in threadpool_info() if i.get("user_api") == "blas"})
    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "numpy_simd": _numpy_simd(), "scipy": scipy.__version__,
            "blas": "; ".join(blas) or "none found"}


def _numpy_simd() -> str:
    """The SIMD extensions (beyond its baseline) that NumPy found and dispatches to, as
    ``numpy.show_runtime()`` lists them; ``"unknown"`` where NumPy does not say."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return "unknown"
    return " ".join(f for f in __cpu_dispatch__ if __cpu_features__.get(f)) or "none"


def environments(records: Sequence[Mapping]) -> dict[str, int]:
    """How many of ``records`` were computed in each :func:`numerics_environment`, keyed by
    its description (``"blas …, numpy 2.4.6, numpy_simd …, python …, scipy …"``); records
    written before 0.4.6 name none and are not counted."""
    envs: dict[str, int] = defaultdict(int)
    for rec in records:
        if isinstance(rec.get("environment"), Mapping):
            envs[", ".join(f"{k} {v}" for k, v in sorted(rec["environment"].items()))] += 1
    return dict(sorted(envs.items()))


def warn_environments(directory: str | os.PathLike[str], records: Sequence[Mapping],
                      category: type[Warning] = UserWarning) -> None:
    """Warn when the records were computed in more than one :func:`numerics_environment`
    (records written before it was recorded are not counted): their numbers can differ."""
    envs = environments(records)
    if len(envs) > 1:
        shown = "".join(f"\n  {n} record(s): {e}" for e, n in sorted(envs.items()))
        warnings.warn(f"{directory}: the records were computed in {len(envs)} numerical "
                      "environments; the same cell can round, pick and score differently in "
                      f"each, and a report mixes them:{shown}", category, stacklevel=3)


def describe_environments(envs: Mapping[str, int]) -> str:
    """One sentence naming the environments of :func:`environments` (for a report's header);
    ``""`` when no record names one."""
    if not envs:
        return ""
    if len(envs) == 1:
        return f"Numerical environment of every record: {next(iter(envs))}."
    shown = "; ".join(f"{e} ({n} records)" for e, n in envs.items())
    return (f"The records come from {len(envs)} numerical environments, whose rounding can "
            f"change picks (a warning said so): {shown}.")
